"""The shapes of the API's results.

A verb's result is a frozen dataclass (:class:`Result`) with typed rows inside: a caller reads
its fields, and ``to_dict()`` is the document ``--json`` prints (the CLI writes a dataclass as
that dict, so the JSON is the same as when these were dicts). Pydantic models stay for what is
written to disk (a row, a plan, a manifest). Two documents stay dicts of JSON values, typed here
for the type checker: the status document and a row as ``monte show`` prints it, whose keys grow
with the record. A lower layer's own dict (``monte.report``'s
``ReportDoc``, ...) becomes its result here, at the API's edge; the verbs not yet converted
(environments, evals, training; the Vault's listings) return their pydantic models."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypedDict, cast

if TYPE_CHECKING:
    from monte.ledger.records import Measurement


@dataclass(frozen=True)
class Result:
    """Base of the API's results: frozen (a result is what happened), read by field."""

    def to_dict(self) -> dict[str, Any]:
        """The result as the JSON document ``--json`` prints (rows as dicts, tuples as lists)."""
        return cast("dict[str, Any]", _plain(dataclasses.asdict(self)))


def _plain(value: Any) -> Any:
    """JSON's shapes: a tuple (a frozen result's rows) as a list."""
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


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
    """One finish ``monte recover`` recorded (or found stopped meanwhile)."""

    run: str
    status: str
    score: float | None
    n: int | None


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
class Pushed(Result):
    """``monte push``: what went to the results bucket (packs, refs, run files, their bytes) and
    the refs it merged because the bucket had moved (``merged``)."""

    experiment: str
    bucket: str
    run: str | None
    packs: int
    pack_bytes: int
    refs: int
    files: int
    file_bytes: int
    uploaded_bytes: int
    merged: list[str]


@dataclass(frozen=True)
class SyncedExperiment(Result):
    """One experiment ``monte sync`` brought back: what its ledger ref did (``ledger``: up-to-date,
    fast-forward, merged, ...), new packs, refs read, run files, and the refs kept as they are here."""

    experiment: str
    packs: int
    ledger: str
    refs: int
    files: int
    skipped_weights: int
    conflicts: list[str]


@dataclass(frozen=True)
class Synced(Result):
    """``monte sync``: the bucket and each experiment it held."""

    bucket: str
    experiments: tuple[SyncedExperiment, ...]


@dataclass(frozen=True)
class LedgerVerified(Result):
    """``monte ledger verify`` that found nothing (a violation is E_VERIFY): the experiments and
    records checked, the warnings (records that verify, and are named), the remote copies let in
    (``adopted``: ref -> remote ref) and the refs not read (ref -> why)."""

    ok: bool
    experiments: list[str]
    records: int
    warnings: list[Any]
    adopted: dict[str, Any]
    unchecked: dict[str, str]


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
class Nominated(Result):
    """``monte nominate``: the checkpoint the final claim of its cohort scores, and when."""

    experiment: str
    checkpoint: str
    cohort: str
    at: str


@dataclass(frozen=True)
class StopResult(Result):
    """``monte stop``: the run, the status it now reads, whether its process was signalled. (Not
    :class:`monte.errors.Stopped`, the E_STOPPED refusal a stopped run's own command gives.)"""

    run: str
    status: str
    signalled: bool


@dataclass(frozen=True)
class PlotWritten(Result):
    """``monte plot``: the file, its format, and what the figure shows (``note``: why a figure is
    empty, None otherwise)."""

    path: str
    format: str
    experiment: str
    exams: list[str]
    paths: int
    points: int
    lineage: list[str]
    cycles: dict[str, int]
    test_reads: int
    claims: list[str]
    note: str | None


@dataclass(frozen=True)
class ReportWritten(Result):
    """``monte report``: the page's path and size, and what it shows."""

    path: str
    bytes: int
    experiment: str
    runs: int
    checkpoints: int
    cycles: dict[str, int]
    evals: int
    claims: list[str]


@dataclass(frozen=True)
class ClaimExported(Result):
    """``monte claim export``: the bundle's folder, its Statement's sha256, the ``allowed_signers``
    line a reader adds for the key, each file's size, and the model card that names it (or None)."""

    out: str
    statement_sha256: str
    signer: str
    files: dict[str, int]
    card: str | None


@dataclass(frozen=True)
class ClaimVerified(Result):
    """``monte claim verify``: what the bundle proved with its files alone (a failure is a refusal)."""

    statement_sha256: str
    signer: str
    fingerprint: str
    experiment: str
    checkpoint: str
    delta: str
    verdict: str
    test_reads: int
    repository_reads: int
    repository_cohorts: int
    recovered: list[str]
    records: int
    weights: str


@dataclass(frozen=True)
class ModelMade(Result):
    """``monte model init``: the folder written, its size and shape (``hidden``, ``layers``,
    ``heads``, ``kv_heads``, ...), its tokens, each file's sha256, and its bytes."""

    path: str
    size: str
    seed: int
    parameters: int
    architecture: str
    shape: dict[str, Any]
    vocab_size: int
    eos_token: str
    pad_token: str
    files: dict[str, str]
    bytes: int


@dataclass(frozen=True)
class Initialized(Result):
    """``monte init``: the repository and its data root, the files it created, monte's git hooks
    installed (none with ``hooks=False``) and a line saying so or why not, and the CI pin's line."""

    repo_root: str
    data_root: str
    created: list[str]
    already_initialized: bool
    hooks: list[str]
    hooks_note: str
    ci_note: str


@dataclass(frozen=True)
class ConfigShown(Result):
    """``monte config show``: the data root, the Vault and the bucket (None: not set), the recipe
    search path and every resolvable recipe name -> its file (the first match on the path wins)."""

    repo_root: str
    data_root: str
    config_file: str
    recipe_path: list[str]
    recipes: dict[str, str]
    vault: str | None
    bucket: str | None


@dataclass(frozen=True)
class ConfigSet(Result):
    """``monte config set``: the setting written, its value and file, the DVC config that names
    the Vault as DVC's remote too (or None), and what was not checked (``note``)."""

    setting: str
    url: str
    file: str
    dvc_config: str | None
    note: str


@dataclass(frozen=True)
class Promoted(Result):
    """``monte promote``: the checkpoint exported, where, its files and their bytes (``disk``: the
    blocks they take), each file's sha256, and with ``from_hub`` the hub repo and revision."""

    checkpoint: str
    experiment: str
    dest: str
    files: int
    bytes: int
    disk: int
    sha256: dict[str, str]
    hub: dict[str, str] | None

    def to_dict(self) -> dict[str, Any]:
        """As ``--json`` has always printed it: no ``hub`` key for a local export."""
        out = super().to_dict()
        if self.hub is None:
            del out["hub"]
        return out


@dataclass(frozen=True)
class ExperimentMade(Result):
    """``monte experiment init``: the measurement frozen (a pydantic model: it is what the ledger
    holds) and, once the ledger holds it, its ref and commit (None in a dry run, whose document has
    neither key)."""

    dry_run: bool
    measurement: Measurement  # what the ledger holds: pydantic
    commit: str | None
    ref: str | None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"dry_run": self.dry_run, "measurement": self.measurement.model_dump(mode="json")}
        if not self.dry_run:
            out |= {"commit": self.commit, "ref": self.ref}
        return out


@dataclass(frozen=True)
class ExperimentListed(Result):
    """One line of ``monte experiment list``: its name, environment, exams, model and creation."""

    name: str
    environment: str
    exams: list[str]
    model: str | None
    created_at: str


@dataclass(frozen=True)
class DatasetShown(Result):
    """One frozen Dataset (``monte dataset show``, a row of ``monte dataset list``): its rows, kind
    and columns, the sha256 of ``rows.jsonl``, where it came from, its folder, and whether that
    hash was re-proven against the bytes here (``verified``)."""

    name: str
    kind: str | None
    rows: int
    columns: dict[str, str] | None
    sha256: str
    provenance: dict[str, Any]
    folder: str
    verified: bool


@dataclass(frozen=True)
class DatasetAdded(Result):
    """``monte dataset add``: the plan, and unless a dry run the Dataset frozen (a dry run's
    document has no ``dataset`` key), a note (the Vault's part), and the ``.dvc`` pointer staged."""

    dry_run: bool
    plan: dict[str, Any]
    dataset: DatasetShown | None
    note: str
    dvc_pointer: str | None

    def to_dict(self) -> dict[str, Any]:
        out = super().to_dict()
        if self.dataset is None:
            del out["dataset"]
        return out
