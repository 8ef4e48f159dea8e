"""An experiment's ledger for the ledger tests: its measurement (the frozen environment, with
exams and, when asked, their dev and test splits) and a store holding its ledger."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from monte.ledger.experiment import Ledger
from monte.ledger.records import ExamFreeze, Measurement, SplitFreeze
from monte.ledger.store import Store


def measurement(experiment: str, *, exams: Sequence[str] = ("arith",), split_n: int | None = None,
                environment: str = "arith", created_at: str = "2025-11-29T00:00:00Z") -> Measurement:
    """A measurement of ``exams`` on ``environment``: each exam with a dev and a test split of
    ``split_n`` items (their hashes made up), or with no split when ``split_n`` is None."""
    def splits(exam: str) -> dict[str, SplitFreeze]:
        return {s: SplitFreeze(path=f"{exam}/{s}.jsonl", sha256=s[0] * 64, n=split_n)
                for s in ("dev", "test")} if split_n is not None else {}

    return Measurement(experiment=experiment, created_at=created_at, environment=environment,
                       environment_fingerprint="sha256:" + "ab" * 32, grader={"name": "exact_match"},
                       exams={e: ExamFreeze(benchmark=e, splits=splits(e)) for e in exams})


def ledger_store(repo: Path, meas: Measurement) -> Store:
    """A store of ``repo`` holding one new ledger, of ``meas``'s experiment (the ``store`` fixture
    of tests/conftest.py: of the test module's ``MEASUREMENT``)."""
    store = Store(repo)
    Ledger(store, meas.experiment).create(meas)
    return store
