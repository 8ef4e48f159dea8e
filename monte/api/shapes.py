"""The shapes of the API's results that their makers return as plain dicts (the status document,
a row as ``monte show`` prints it, a rerun's command, a remote submission, a box): what a caller
may read in each, for the type checker. At run time each is the dict its maker returns, so the
CLI's ``--json`` prints it as before. The results the API's lower layers type themselves
(:class:`monte.report.ReportWritten`, ...) are imported from there."""

from __future__ import annotations

from typing import Any, TypedDict


class StatusDoc(TypedDict, total=False):
    """``monte status``: :func:`monte.status.experiment_status`'s document. ``rows`` is a list of
    row dicts, or one serialized JSON array (``json_rows``); the ``_`` keys are the text view's
    (never printed as JSON)."""

    experiment: str
    environment: str
    rows: Any
    cohorts: list[dict[str, Any]]
    deltas: list[dict[str, Any]]
    lineage: list[str]
    legend: str | None
    cycles: list[dict[str, Any]]
    checkpoints: list[dict[str, Any]]
    _test_reads: Any
    _scores: Any
    _table: Any


class RowDoc(TypedDict, total=False):
    """One run's ``row.json`` with its defaults filled in (``monte show``); ``launch``: how a
    train chunk was launched (its plan's record; None for an older row)."""

    run: str
    experiment: str
    kind: str
    status: str
    seq: int
    created_at: str
    updated_at: str
    cohort: str
    model: str
    exam: str | None
    split: str | None
    step: int
    smoke: bool
    score: float | None
    n: int | None
    host: str
    pid: int | None
    plan: dict[str, Any]
    delta: dict[str, Any] | None
    role: str | None
    checkpoints: list[Any]
    error: str | None
    proc_start: str | None
    launch: Any


class Rerun(TypedDict):
    """``monte rerun``: the command and environment that would launch a train chunk again."""

    run: str
    experiment: str
    command: list[str]
    env: dict[str, str]
    ranks: list[Any]
    recipe_sha256: str | None
    config_sha256: str | None
    versions: dict[str, str | None]
    gpus: list[dict[str, str]]
    recorded: bool


class Recovered(TypedDict):
    """One finish ``monte recover`` recorded (or found stopped meanwhile)."""

    run: str
    status: str
    score: float | None
    n: int | None


class Submitted(TypedDict):
    """``--remote``: the rows started here and where their job runs."""

    experiment: str
    runs: list[str]
    box: str
    session: str
    commit: str
    workdir: str
    timings: dict[str, float]


class BoxUp(TypedDict):
    """``monte box up``: the box, its identity file, its price and its watchdog."""

    box: dict[str, Any]
    identity_file: str
    price_cents_per_hour: int | None
    watchdog: dict[str, Any]
    notes: list[str]


class BoxStatus(TypedDict):
    """``monte box status``: every instance on the account, and identity files of none."""

    instances: list[dict[str, Any]]
    stale_identity_files: list[str]


class BoxDown(TypedDict):
    """``monte box down``: the instance terminated, and its identity file removed."""

    terminated: dict[str, Any]
    already_terminating: bool
    identity_file_removed: str | None
