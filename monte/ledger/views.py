"""What a read-only view of a ledger needs without pydantic: the tree's paths, a row's fields
and their defaults as the fan-out indexes hold them, and a frozen measurement as plain data.

``monte status`` reads 10,000 rows and a measurement, and prints; importing pydantic and
building its models is ~50 ms of every such process, most of what it costs on a small
repository. :mod:`monte.ledger.records` (the models, which write and validate) checks at import
that the field names and defaults here are its own, so the two cannot drift apart.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from os import PathLike
from pathlib import Path
from typing import Any, NamedTuple, Protocol

#: Every field of a Run row (``records.RunRow``), as its index entry holds them.
ROW_FIELDS = frozenset((
    "run", "experiment", "kind", "status", "seq", "created_at", "updated_at", "cohort", "model", "exam",
    "split", "step", "smoke", "score", "n", "host", "pid", "plan", "delta", "role", "checkpoints", "error",
    "proc_start",
))
#: The defaults of the fields that have one (``plan`` and ``checkpoints`` are fresh each time).
ROW_DEFAULTS: dict[str, Any] = {
    "seq": 0, "created_at": "", "updated_at": "", "cohort": "", "model": "", "exam": None, "split": None,
    "step": 0, "smoke": False, "score": None, "n": None, "host": "", "pid": None, "delta": None, "role": None,
    "error": None, "proc_start": None,
}


#: The ledger tree's folders: the runs, fanned out by their ids' first two characters, and what
#: each cohort derives or is told (its index, its nomination). Nothing else spells a tree path.
#: monte's own files inside a repository's git directory (``.git/monte/``: the derived caches, the
#: seal's locks, the tips it remembers, a results bucket's state): spelled here only
OWN_DIR = "monte"


def own_dir(git_dir: str | PathLike[str]) -> Path:
    """``<git dir>/monte``: where monte keeps its own files (a linked worktree's: the main one's)."""
    return Path(git_dir) / OWN_DIR


RUNS = "runs"
COHORTS = "cohorts"


def run_dir(run_id: str) -> str:
    return f"{RUNS}/{run_id[0]}/{run_id[1]}/{run_id}"


def fanout_index(first: str, second: str) -> str:
    """The index of the rows in the fan-out folder ``runs/<first>/<second>/``."""
    return f"{RUNS}/{first}/{second}/index.json"


def bucket_index(run_id: str) -> str:
    return fanout_index(run_id[0], run_id[1])


def cohort_index_path(cohort: str) -> str:
    """The cohort's derived index (``monte.ledger.cohorts``: its baselines and test reads)."""
    return f"{COHORTS}/{cohort}/index.json"


#: leak refusals counted against a sealed test content (``monte.ledger.seal.record_leak_refusal``)
LEAKS = "leaks"


def leak_refusal_path(key: str) -> str:
    """One leak refusal's record, fanned out by the first two hex digits of its key."""
    return f"{LEAKS}/{key[:2]}/{key}.json"


def nomination_path(cohort: str) -> str:
    """The checkpoint ``monte nominate`` names for the cohort's final claim."""
    return f"{COHORTS}/{cohort}/nomination.json"


#: Eval settings that change how an eval runs, never what it generates or how it is graded: they
#: never define a cohort or a seal (``measurement.json`` keeps them in ``execution``; one written
#: before the split holds ``batch_size`` in ``eval``, and the seal leaves it out there too).
EXECUTION_DETAILS = frozenset({"batch_size", "device", "backend", "processes"})


def output_settings(settings: Mapping[str, Any]) -> dict[str, Any]:
    """The eval settings that change what is generated or graded: all but the execution details."""
    return {k: v for k, v in settings.items() if k not in EXECUTION_DETAILS}


#: The vault ref's folder of each kind of freeze (``refs/heads/monte/vault``, monte.ledger.vault_ref).
VAULT_FOLDERS = {"environment": "environments", "dataset": "datasets"}


def manifest_path(kind: str, name: str) -> str:
    """A freeze manifest's path in the vault ref's tree."""
    return f"{VAULT_FOLDERS[kind]}/{name}/manifest.json"


def with_row_defaults(data: dict[str, Any]) -> dict[str, Any]:
    """An index entry with every row field: the defaults of those an older monte did not write
    (what validating it would fill in)."""
    return {**ROW_DEFAULTS, "plan": {}, "checkpoints": [], **data}


class SplitView(NamedTuple):
    path: str
    sha256: str
    n: int


class ExamView(NamedTuple):
    benchmark: str
    splits: dict[str, SplitView]


class EvalView(NamedTuple):
    """How answers are drawn (``records.EvalSettings`` has these, validated): what status shows."""

    samples: int = 1
    temperature: float = 0.0


class MeasurementView(NamedTuple):
    """The frozen measurement's fields a read-only view reads (``records.Measurement`` has them
    all, validated). Built from ``measurement.json`` as monte wrote it; a document without that
    shape raises (KeyError, TypeError, ValueError) so the caller validates it instead."""

    experiment: str
    environment: str
    exams: dict[str, ExamView]
    eval: EvalView = EvalView()

    @classmethod
    def parse(cls, raw: bytes) -> MeasurementView:
        data = json.loads(raw)
        ev = data.get("eval") or {}
        return cls(experiment=str(data["experiment"]), environment=str(data["environment"]),
                   eval=EvalView(int(ev.get("samples", 1)), float(ev.get("temperature", 0.0))), exams={
            name: ExamView(benchmark=str(x["benchmark"]), splits={
                s: SplitView(path=str(v["path"]), sha256=str(v["sha256"]), n=int(v["n"]))
                for s, v in x["splits"].items()}) for name, x in data["exams"].items()})


class SplitLike(Protocol):
    @property
    def sha256(self) -> str: ...
    @property
    def n(self) -> int: ...


class ExamLike(Protocol):
    @property
    def splits(self) -> Mapping[str, SplitLike]: ...


class EvalLike(Protocol):
    @property
    def samples(self) -> int: ...
    @property
    def temperature(self) -> float: ...


class MeasurementLike(Protocol):
    """What a read-only view reads of a measurement: ``records.Measurement`` or :class:`MeasurementView`."""

    @property
    def eval(self) -> EvalLike: ...

    @property
    def experiment(self) -> str: ...
    @property
    def environment(self) -> str: ...
    @property
    def exams(self) -> Mapping[str, ExamLike]: ...
