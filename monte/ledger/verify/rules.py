"""The rules a new row must keep, as plain functions a test can call on rows: each takes the
state the walk has re-derived so far (:class:`WalkState`: the rows before it, the cohort's
baselines, its test reads, its checkpoints, the measurement), the record's commit id and the new
row, and returns its violations. :data:`NEW_ROW_RULES` is the list the walk applies to each new
row, in order (:meth:`monte.ledger.verify.records.Records._new_row`); a rule is added by writing
a function and naming it there. :func:`first_record` and :func:`changed_row` are the rules of a
run's first record and of each one after it. The rules that read git objects (a row's per-task file, a
checkpoint's lineage commit) stay in the walk; what they need of it comes in as ``chosen``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from monte.ledger.predicates import is_test_read
from monte.ledger.records import RunRow
from monte.ledger.verify.model import IDENTITY, ROW_STATUS_MOVES, Violation
from monte.ledger.verify.state import WalkState

#: the checkpoint a cohort's claim must read: its nomination, or the best paired dev delta
#: recomputed from the per-task files (None: nothing to compare against)
Chosen = Callable[[str], str | None]


class RowRule(Protocol):
    def __call__(self, state: WalkState, cid: str, row: RunRow, *, chosen: Chosen) -> list[Violation]: ...


def _target(row: RunRow) -> dict[str, Any]:
    target: dict[str, Any] = row.plan.get("target", {}) if row.kind == "eval" else {}
    return target


def no_smoke_evidence(state: WalkState, cid: str, row: RunRow, *, chosen: Chosen) -> list[Violation]:
    """``no-smoke-evidence``: an eval never scores a smoke run, a chunk never continues one."""
    out: list[Violation] = []
    target = _target(row)
    if target.get("kind") == "checkpoint":
        src = state.rows.get(str(target.get("run")))
        if src is not None and src.smoke:
            out.append(Violation(cid, "no-smoke-evidence", f"eval {row.run} scores smoke run {src.run}"))
    if row.kind == "train":
        parent = row.plan.get("parent")
        if parent and (p := state.rows.get(parent["run"])) is not None and p.smoke:
            out.append(Violation(cid, "no-smoke-evidence", f"train {row.run} continues smoke run {p.run}"))
    return out


def baselines_first(state: WalkState, cid: str, row: RunRow, *, chosen: Chosen) -> list[Violation]:
    """``baselines-first``: a real training chunk starts only after every exam's dev and test
    baselines (``@0``) in its cohort."""
    if row.kind != "train" or row.smoke:
        return []
    missing = []
    for exam, x in sorted((state.meas or {}).get("exams", {}).items()):
        for split in ("dev", "test"):
            if split in x.get("splits", {}) and (row.cohort, exam, split) not in state.baselines:
                missing.append(f"{exam}/{split}@0")
    if missing:
        return [Violation(cid, "baselines-first", f"train {row.run} started before the baselines {', '.join(missing)}")]
    return []


def two_touch(state: WalkState, cid: str, row: RunRow, *, chosen: Chosen) -> list[Violation]:
    """``two-touch``: at most two test reads per exam per cohort; ``test@0`` on the base model,
    once, before any checkpoint of the cohort; the second read on a checkpoint, after ``test@0``,
    and on the nominated or rule-selected checkpoint. Counts the read into the state."""
    if not is_test_read(row):
        return []
    state.need_all()  # the cohort's reads, its checkpoints, the rule-selected checkpoint
    target = _target(row)
    touches = state.touches.setdefault((row.cohort, row.exam or ""), [])
    out: list[Violation] = []
    if len(touches) >= 2:
        out.append(Violation(cid, "two-touch", f"a third read of {row.exam}/test in cohort {row.cohort} "
                             f"(after {', '.join(touches)})"))
    elif target.get("kind") == "base":
        if touches:
            out.append(Violation(cid, "two-touch", f"test@0 of {row.exam} read a second time"))
        elif state.checkpoints.get(row.cohort, 0):
            out.append(Violation(cid, "two-touch", f"test@0 of {row.exam} read after the cohort has checkpoints"))
    else:
        if not touches:
            out.append(Violation(cid, "two-touch", f"a checkpoint test read of {row.exam} before test@0"))
        claimed = f"{target.get('run')}@{target.get('step')}"
        picked = chosen(row.cohort)
        if picked is not None and picked != claimed:
            out.append(Violation(cid, "two-touch", f"the claim reads {claimed}, but the nominated or "
                                 f"rule-selected checkpoint is {picked}"))
    touches.append(row.run)
    return out


def first_record(state: WalkState, cid: str, row: RunRow) -> list[Violation]:
    """A run's first record: a new id (``unique-run-id``), ``started`` (``one-record``), and no
    checkpoint on it yet (``lineage``)."""
    out: list[Violation] = []
    if row.run in state.seen:
        out.append(Violation(cid, "unique-run-id", f"run id {row.run} is used again"))
    if row.status != "started":
        out.append(Violation(cid, "one-record", f"run {row.run} appears as {row.status}, not started"))
    if row.checkpoints:
        out.append(Violation(cid, "lineage", f"run {row.run} starts with checkpoints already on it"))
    return out


def changed_row(old: RunRow, row: RunRow, cid: str) -> list[Violation]:
    """A run's next record (``append-only``): a status move the lifecycle allows
    (:data:`ROW_STATUS_MOVES`), a finished row never rewritten, and its identity fields, its plan
    and its checkpoints so far unchanged."""
    out: list[Violation] = []
    run = row.run
    if old.status not in ROW_STATUS_MOVES:
        rule = "unique-run-id" if row.status == "started" else "append-only"
        out.append(Violation(cid, rule, f"run {run} had {old.status}; a finished row is never rewritten"))
    elif row.status not in ROW_STATUS_MOVES[old.status]:
        out.append(Violation(cid, "append-only", f"run {run} went {old.status} -> {row.status}"))
    for f in IDENTITY:
        if getattr(old, f) != getattr(row, f):
            out.append(Violation(cid, "append-only", f"run {run}: {f} changed"))
    if old.plan != row.plan:
        out.append(Violation(cid, "append-only", f"run {run}: its plan changed"))
    if row.checkpoints[: len(old.checkpoints)] != old.checkpoints:
        out.append(Violation(cid, "append-only", f"run {run}: a checkpoint was rewritten"))
    return out


#: the rules each new row is checked against, in this order
NEW_ROW_RULES: tuple[RowRule, ...] = (no_smoke_evidence, baselines_first, two_touch)


def new_row_violations(state: WalkState, cid: str, row: RunRow, *, chosen: Chosen,
                       rules: tuple[RowRule, ...] = NEW_ROW_RULES) -> list[Violation]:
    """Every rule's violations of ``row``, appended in ``cid``, over ``state``."""
    return [v for rule in rules for v in rule(state, cid, row, chosen=chosen)]
