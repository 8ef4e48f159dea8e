"""The shapes of the API's results: every type a verb returns, named here for a caller.

A verb's result is a frozen dataclass (:class:`Result`) with typed rows inside: a caller reads
its fields, and ``to_dict()`` is the document ``--json`` prints (the CLI writes a dataclass as
that dict, so the JSON is the same as when these were dicts). Pydantic models stay for what is
written to disk (a row, a plan, a manifest). Two documents stay dicts of JSON values, typed here
for the type checker: the status document and a row as ``monte show`` prints it, whose keys grow
with the record.

Each result has one home. The results the API makes itself are defined here; a result a lower
layer makes is defined beside the code that makes it (``monte.plot.PlotWritten``,
``monte.claim.ClaimVerified``, ...) and named here too, imported when first read (``HOMES``), so
that importing the API loads none of those layers."""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypedDict

from monte.result_type import Result as Result

if TYPE_CHECKING:
    from monte.claim import ClaimExported as ClaimExported
    from monte.claim import ClaimVerified as ClaimVerified
    from monte.configshow import ConfigShown as ConfigShown
    from monte.datasets.manage import DatasetAdded as DatasetAdded
    from monte.datasets.manage import DatasetShown as DatasetShown
    from monte.diff import Diff as Diff
    from monte.diff import GroupCount as GroupCount
    from monte.diff import ItemFlip as ItemFlip
    from monte.diff import Outcome as Outcome
    from monte.envs.listing import EnvListed as EnvListed
    from monte.envs.manage import CatalogEntry as CatalogEntry
    from monte.envs.manage import EnvAddResult as EnvAddResult
    from monte.envs.manage import EnvInfo as EnvInfo
    from monte.envs.manage import EnvInstallResult as EnvInstallResult
    from monte.evals.nominate import Nominated as Nominated
    from monte.evals.run import EvalResult as EvalResult
    from monte.experiments import ExperimentListed as ExperimentListed
    from monte.experiments import ExperimentMade as ExperimentMade
    from monte.ledger.verify.report import LedgerVerified as LedgerVerified
    from monte.models.tiny import ModelMade as ModelMade
    from monte.plot import PlotWritten as PlotWritten
    from monte.report import ReportWritten as ReportWritten
    from monte.repository import ConfigSet as ConfigSet
    from monte.repository import Initialized as Initialized
    from monte.runs.lifecycle import StopResult as StopResult
    from monte.status.brief import StatusBrief as StatusBrief
    from monte.status.brief import TestBudget as TestBudget
    from monte.storage.results import Pushed as Pushed
    from monte.storage.results import Synced as Synced
    from monte.storage.results import SyncedExperiment as SyncedExperiment
    from monte.storage.vault_remote import VaultEntry as VaultEntry
    from monte.training.promote import Promoted as Promoted
    from monte.training.run import TrainResult as TrainResult

#: a result made below the API -> the module that defines it (its one home)
HOMES = {
    "ClaimExported": "monte.claim", "ClaimVerified": "monte.claim",
    "DatasetAdded": "monte.datasets.manage", "DatasetShown": "monte.datasets.manage",
    "Nominated": "monte.evals.nominate", "LedgerVerified": "monte.ledger.verify.report",
    "ModelMade": "monte.models.tiny", "PlotWritten": "monte.plot", "ReportWritten": "monte.report",
    "StopResult": "monte.runs.lifecycle", "Pushed": "monte.storage.results", "Synced": "monte.storage.results",
    "SyncedExperiment": "monte.storage.results", "VaultEntry": "monte.storage.vault_remote",
    "Diff": "monte.diff", "GroupCount": "monte.diff", "ItemFlip": "monte.diff", "Outcome": "monte.diff",
    "EnvListed": "monte.envs.listing", "CatalogEntry": "monte.envs.manage", "EnvAddResult": "monte.envs.manage",
    "EnvInfo": "monte.envs.manage", "EnvInstallResult": "monte.envs.manage", "EvalResult": "monte.evals.run",
    "TrainResult": "monte.training.run", "StatusBrief": "monte.status.brief", "TestBudget": "monte.status.brief",
    "ConfigShown": "monte.configshow", "ConfigSet": "monte.repository", "Initialized": "monte.repository",
    "ExperimentMade": "monte.experiments", "ExperimentListed": "monte.experiments", "Promoted": "monte.training.promote",
}


def __getattr__(name: str) -> Any:
    """A result of a lower layer, from its home (PEP 562: imported when first named)."""
    if name in HOMES:
        return getattr(importlib.import_module(HOMES[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


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


@dataclass(frozen=True)
class Rerun(Result):
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


@dataclass(frozen=True)
class Recovered(Result):
    """One finish ``monte recover`` recorded (or found stopped meanwhile, or still running on a
    grader). ``error``: why a read recorded ``failed`` failed."""

    run: str
    status: str
    score: float | None
    n: int | None
    error: str | None = None


@dataclass(frozen=True)
class Submitted(Result):
    """``--remote``: the rows started here and where their job runs."""

    experiment: str
    runs: list[str]
    box: str
    session: str
    commit: str
    workdir: str
    timings: dict[str, float]


@dataclass(frozen=True)
class BoxUp(Result):
    """``monte box up``: the box (its identity file's record), its price and its watchdog."""

    box: dict[str, Any]
    identity_file: str
    price_cents_per_hour: int | None
    watchdog: dict[str, Any]
    notes: list[str]


@dataclass(frozen=True)
class BoxInstance(Result):
    """One instance on the Lambda account; ``age_hours``, ``over_ttl``, ``cold``, ``keep_alive``
    and ``launched_at`` are known for monte's own boxes only (None otherwise)."""

    id: str
    name: str
    owner: str  # "monte" or "foreign"
    status: str | None
    type: str | None
    region: str | None
    ip: str | None
    age_hours: float | None
    over_ttl: bool | None
    cold: bool | None
    keep_alive: bool | None
    launched_at: str | None


@dataclass(frozen=True)
class BoxStatus(Result):
    """``monte box status``: every instance on the account, and identity files of none."""

    instances: tuple[BoxInstance, ...]
    stale_identity_files: list[str]


@dataclass(frozen=True)
class Terminated(Result):
    """The instance ``monte box down`` terminated."""

    id: str
    name: str
    type: str | None
    region: str | None


@dataclass(frozen=True)
class BoxDown(Result):
    """``monte box down``: the instance terminated, and its identity file removed."""

    terminated: Terminated
    already_terminating: bool
    identity_file_removed: str | None


@dataclass(frozen=True)
class RecipeAdded(Result):
    """``recipes/NAME.yaml`` written: its path, the sha256 of its bytes, its algorithm."""

    name: str
    path: str
    sha256: str
    algorithm: str


@dataclass(frozen=True)
class UpdatesJudged(Result):
    """Proposed ref updates that break no rule (a refusal is E_VERIFY): how many."""

    ok: bool
    updates: int


@dataclass(frozen=True)
class HooksInstalled(Result):
    """The hook files written."""

    installed: list[str]


@dataclass(frozen=True)
class HooksRemoved(Result):
    """The hook files removed."""

    removed: list[str]


@dataclass(frozen=True)
class TakenSplit(Result):
    """One test split ``monte grader take`` handed over: its exam, the sha256 of its bytes, and
    its items (``n``); ``already``: it was not here (in custody before), so nothing was sent;
    ``vault``: the name of the Vault's copy encrypted to the grader's key, where a Vault keeps one."""

    exam: str
    content: str
    n: int | None = None
    already: bool = False
    vault: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """As ``--json`` has always printed it: ``n`` for a split sent, ``already`` for one not here
        (and ``vault`` where the Vault keeps an encrypted copy)."""
        out: dict[str, Any] = {"exam": self.exam, "content": self.content}
        out |= {"already": True} if self.already else {"n": self.n}
        return out | ({"vault": self.vault} if self.vault else {})


@dataclass(frozen=True)
class GraderTaken(Result):
    """``monte grader take``: the environment, the grader now holding its test splits, each split,
    and the local copies removed."""

    environment: str
    grader: str
    taken: tuple[TakenSplit, ...]
    removed: list[str]
    #: the exams whose test items the catalog's public seed draws again (frozen without a grader):
    #: custody of the file keeps them from no one; the fix is a new environment frozen with the grader
    redrawable: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """As ``--json`` has always printed it, with ``redrawable`` where there is one to name."""
        out = super().to_dict()
        if not self.redrawable:
            del out["redrawable"]
        return out

