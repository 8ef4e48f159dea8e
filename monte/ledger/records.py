"""What the ledger stores, as pydantic models. No I/O here.

Paths inside an experiment's ledger tree:

- ``measurement.json`` — the frozen measurement (first record).
- ``meta.json`` — ``{"records": N}``, the number of records so far (orders rows).
- ``runs/<id[0]>/<id[1]>/<id>/row.json`` — one Run row (canonical).
- ``runs/<id[0]>/<id[1]>/index.json`` — the rows of that fan-out folder, derived, so that
  reading the whole state reads at most 1,024 small blobs instead of one blob per run.
- ``runs/<id[0]>/<id[1]>/<id>/tasks.jsonl`` — per-task results of an eval.

Run ids are base32, so each fan-out level has at most 32 entries: an append rewrites five small
trees (root, ``runs/``, two fan-out levels, the run's folder), whatever the ledger's size.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    model_serializer,
    model_validator,
)

from monte.ledger.views import (
    EXECUTION_DETAILS,
    ROW_DEFAULTS,
    ROW_FIELDS,
    bucket_index,
    run_dir,
    with_row_defaults,
)

__all__ = ["ROW_FIELDS", "EvalSettings", "ExamFreeze", "ExecutionSettings", "Measurement", "RunRow", "RunStatus", "SplitFreeze",
           "TrainSettings", "bucket_index", "row_from_index", "run_dir", "with_row_defaults"]

SCHEMA = 1


class SplitFreeze(BaseModel):
    model_config = ConfigDict(extra="forbid", defer_build=True)
    path: str  # relative to the environment's folder on the data root
    sha256: str
    n: int


class ExamFreeze(BaseModel):
    model_config = ConfigDict(extra="forbid", defer_build=True)
    benchmark: str
    splits: dict[str, SplitFreeze]  # "dev" and/or "test"


class EvalSettings(BaseModel):
    """What every eval of the experiment generates: the settings that change an answer (with the
    exam's items and its grader, what the seal is keyed on). Frozen: a change is a new experiment."""

    model_config = ConfigDict(extra="forbid", defer_build=True)
    max_new_tokens: int = 16
    temperature: float = 0.0
    top_p: float = 1.0
    chat_template: bool = False  # prompts are fed raw; a chat model may ask for its template
    stop: list[str] = Field(default_factory=lambda: ["\n"])
    #: K: sampled answers per item (K samples per item, docs/statistics.md). A measurement written before K, or at K = 1, holds
    #: no such key: it is written only when K > 1, so K = 1 keeps its bytes and its seal.
    samples: int = 1

    @model_serializer(mode="wrap")
    def _k1_unwritten(self, nxt: SerializerFunctionWrapHandler) -> dict[str, Any]:
        out: dict[str, Any] = nxt(self)
        if out.get("samples") == 1:
            out.pop("samples")
        return out


class ExecutionSettings(BaseModel):
    """How an eval runs, not what it answers (``views.EXECUTION_DETAILS``): never a cohort, never
    a seal. The device, the backend (vLLM or transformers) and the processes are chosen where the
    eval runs and recorded nowhere in the measurement."""

    model_config = ConfigDict(extra="forbid", defer_build=True)
    batch_size: int = 32


class TrainSettings(BaseModel):
    model_config = ConfigDict(extra="forbid", defer_build=True)
    steps_per_chunk: int = 50


class Measurement(BaseModel):
    """``measurement.json``: what every score in this experiment is measured with."""

    model_config = ConfigDict(extra="forbid", defer_build=True)
    schema_version: int = SCHEMA
    experiment: str
    created_at: str
    environment: str
    environment_fingerprint: str
    grader: dict[str, Any]
    exams: dict[str, ExamFreeze]
    eval: EvalSettings = Field(default_factory=EvalSettings)
    execution: ExecutionSettings = Field(default_factory=ExecutionSettings)
    train: TrainSettings = Field(default_factory=TrainSettings)
    model: str | None = None  # the default base model: a reference (repo:, data:, hf:, name:; monte.models.locate)
    #: the pass@k deltas reported beside the mean score's (each k <= K): what is shown,
    #: not what is generated or graded, so no part of the seal; written only when asked for
    pass_at: list[int] = Field(default_factory=list)

    @model_serializer(mode="wrap")
    def _no_pass_at_unasked(self, nxt: SerializerFunctionWrapHandler) -> dict[str, Any]:
        out: dict[str, Any] = nxt(self)
        if not out.get("pass_at"):
            out.pop("pass_at", None)
        return out

    @model_validator(mode="before")
    @classmethod
    def _execution_apart(cls, data: Any) -> Any:
        """A measurement written before the split holds ``batch_size`` among its ``eval``
        settings: read, it is an execution detail like any other (the file is not rewritten)."""
        if isinstance(data, dict) and isinstance(data.get("eval"), dict):
            moved = {k: v for k, v in data["eval"].items() if k in EXECUTION_DETAILS}
            if moved and "execution" not in data:
                data = {**data, "eval": {k: v for k, v in data["eval"].items() if k not in moved},
                        "execution": moved}
        return data


RunStatus = Literal["started", "running", "succeeded", "failed", "abandoned"]


class RunRow(BaseModel):
    """One Run: an eval or a training chunk. Rewritten at each transition of the run."""

    model_config = ConfigDict(extra="allow", defer_build=True)
    run: str
    experiment: str
    kind: Literal["eval", "train"]
    status: RunStatus
    seq: int = 0
    created_at: str = ""
    updated_at: str = ""
    cohort: str = ""
    model: str = ""
    exam: str | None = None
    split: str | None = None
    step: int = 0
    smoke: bool = False
    score: float | None = None
    n: int | None = None
    host: str = ""
    pid: int | None = None
    plan: dict[str, Any] = Field(default_factory=dict)
    #: eval rows: the paired delta against the cohort's baseline on the same exam and split,
    #: computed when the eval finished (``monte.stats.paired``), so status reads no task files.
    delta: dict[str, Any] | None = None
    #: eval rows on test: "baseline" (test@0) or "claim" (the final claim).
    role: str | None = None
    #: train rows: the checkpoints saved, ``[{"step": N, "commit": sha}]``.
    checkpoints: list[dict[str, Any]] = Field(default_factory=list)
    error: str | None = None
    proc_start: str | None = None


_ROW_DEFAULTS = {name: f.default for name, f in RunRow.model_fields.items()
                 if not f.is_required() and f.default_factory is None}
# monte.ledger.views holds the same, without pydantic, for read-only views: never apart
if frozenset(RunRow.model_fields) != ROW_FIELDS or _ROW_DEFAULTS != ROW_DEFAULTS:  # pragma: no cover
    raise RuntimeError("monte.ledger.views.ROW_FIELDS/ROW_DEFAULTS differ from RunRow's fields")


def row_from_index(data: dict[str, Any]) -> RunRow:
    """A row from a fan-out index entry, built without validation (what ``model_construct``
    does, ~10x cheaper: reading 10,000 rows is a status call's hot loop). The index is derived
    data monte wrote and ``monte ledger verify`` checks against every ``row.json``."""
    row = object.__new__(RunRow)
    values = with_row_defaults(data)
    extra = {k: values.pop(k) for k in data if k not in ROW_FIELDS}
    object.__setattr__(row, "__dict__", values)
    object.__setattr__(row, "__pydantic_fields_set__", set(data) - extra.keys())
    object.__setattr__(row, "__pydantic_extra__", extra)
    object.__setattr__(row, "__pydantic_private__", None)
    return row
