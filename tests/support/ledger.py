"""An experiment's ledger for the ledger tests: its measurement (the frozen environment, with
exams and, when asked, their dev and test splits) and a store holding its ledger."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from monte.ledger.experiment import Ledger
from monte.ledger.records import ExamFreeze, Measurement, SplitFreeze
from monte.ledger.store import Store


def measurement(experiment: str, *, exams: Sequence[str] = ("arith",), splits: dict[str, SplitFreeze] | None = None,
                environment: str = "arith", created_at: str = "2025-11-29T00:00:00Z") -> Measurement:
    """A measurement of ``exams`` (each with ``splits``: none by default) on ``environment``."""
    return Measurement(experiment=experiment, created_at=created_at, environment=environment,
                       environment_fingerprint="sha256:" + "ab" * 32, grader={"name": "exact_match"},
                       exams={e: ExamFreeze(benchmark=e, splits=dict(splits or {})) for e in exams})


def ledger_store(repo: Path, meas: Measurement) -> Store:
    """A store of ``repo`` holding one new ledger, of ``meas``'s experiment."""
    store = Store(repo)
    Ledger(store, meas.experiment).create(meas)
    return store
