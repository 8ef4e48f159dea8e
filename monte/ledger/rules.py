"""The rules of the record, as pure functions over Run rows (no I/O).

Everything here reads the rows of one experiment's ledger tip and either answers a question
(which checkpoints exist, what the baseline is, which checkpoint the final claim scores) or
refuses with a :class:`~monte.errors.MonteError`. The API calls these inside a ledger append's
``build`` so that, after a lost race, they are re-checked on the new tip.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from monte.errors import MonteError, error
from monte.ledger.predicates import is_admissible, is_base_eval, is_test_read  # noqa: F401  (is_admissible: where callers look)

if TYPE_CHECKING:  # annotations only: a read of the rows needs no pydantic
    from monte.ledger.records import RunRow

LIVE = ("started", "running")
#: how many reads of an exam's sealed test split a cohort gets: ``test@0`` and one final claim
TEST_READS = 2

E_PREFLIGHT_MESSAGE = (
    "this cohort has no test baseline (test@0), so a checkpoint test eval would spend the final "
    "test read with nothing to pair against — the test delta would be forfeit forever"
)


@dataclass(frozen=True)
class Checkpoint:
    run: str
    step: int  # absolute
    seq: int  # the training row's record number (newer runs have larger seq)
    cohort: str
    label: str  # "algorithm:source", the Move that made it
    recipe: str
    parent: tuple[str, int] | None  # (run, step) of the parent checkpoint; None: from base
    start_step: int  # the absolute step the hop started from
    boundary: bool
    commit: str = ""  # the lineage commit the row records (what evals and promotes trust)

    @property
    def ref(self) -> str:
        return f"{self.run}@{self.step}"


def checkpoints(rows: Iterable[RunRow], cohort: str | None = None) -> list[Checkpoint]:
    """Every evidence checkpoint: saved by a non-smoke training run, in record order."""
    out: list[Checkpoint] = []
    for r in rows:
        if r.kind != "train" or r.smoke or (cohort and r.cohort != cohort):
            continue
        out += row_checkpoints(r.run, r.seq, r.cohort, r.plan, r.checkpoints)
    return out


def row_checkpoints(run: str, seq: int, cohort: str, plan: dict[str, Any],
                    saved: Iterable[dict[str, Any]]) -> list[Checkpoint]:
    """The checkpoints one non-smoke training row saved (its fields, so a reader of the
    indexes' dicts needs no model object: ``monte status``)."""
    parent = plan.get("parent")
    algo = plan.get("recipe", {}).get("algorithm", "?")
    label = f"{algo}:{plan.get('source', '?')}"
    return [Checkpoint(
        run=run, step=int(ck["step"]), seq=seq, cohort=cohort, label=label,
        recipe=plan.get("recipe", {}).get("name", "?"),
        parent=(parent["run"], int(parent["step"])) if parent else None,
        start_step=int(plan.get("start_step", 0)), boundary=bool(plan.get("boundary")),
        commit=str(ck.get("commit", "")),
    ) for ck in saved]


def find_checkpoint(rows: Sequence[RunRow], run: str, step: int | None) -> Checkpoint:
    cks = [c for c in checkpoints(rows) if c.run == run]
    for r in rows:
        if r.run == run and r.kind == "train" and r.smoke:
            raise error("E_NOT_EVIDENCE", f"run {run} is a smoke run; a smoke chunk is never evidence",
                        "name a checkpoint of a real training run")
    if not cks:
        raise error("E_NOT_FOUND", f"no checkpoint of run {run!r} in this experiment",
                    "list checkpoints with `monte status`")
    if step is None:
        return max(cks, key=lambda c: c.step)
    for c in cks:
        if c.step == step:
            return c
    have = ", ".join(c.ref for c in cks)
    raise error("E_NOT_FOUND", f"run {run} has no checkpoint at step {step} (it has {have})",
                "name one of those")


def checkpoint_at_step(rows: Sequence[RunRow], cohort: str, step: int) -> Checkpoint:
    found = [c for c in checkpoints(rows, cohort) if c.step == step]
    if not found:
        raise error("E_NOT_FOUND", f"no checkpoint at step {step} in this cohort",
                    "list checkpoints with `monte status`")
    if len(found) > 1:
        raise error("E_USAGE", f"{len(found)} branches hold step {step}: "
                    + ", ".join(c.ref for c in found),
                    "name the branch with --checkpoint RUN@STEP")
    return found[0]


def newest_checkpoint(rows: Sequence[RunRow], cohort: str) -> Checkpoint | None:
    cks = checkpoints(rows, cohort)
    return max(cks, key=lambda c: (c.seq, c.step)) if cks else None


def baseline(rows: Iterable[RunRow], cohort: str, exam: str, split: str) -> RunRow | None:
    """The first admissible eval of the base model (step 0) on this exam and split."""
    for r in rows:
        if is_base_eval(r) and r.cohort == cohort and r.exam == exam and r.split == split:
            return r
    return None


def test_touches(rows: Iterable[RunRow], cohort: str, exam: str) -> list[RunRow]:
    """Reads of the sealed test split. A touch is spent when the eval *starts*: every non-smoke
    test eval row counts, whatever became of it (a crash still spent its touch)."""
    return [r for r in rows if is_test_read(r) and r.cohort == cohort and r.exam == exam]


def check_test_read(rows: Sequence[RunRow], cohort: str, exam: str, *, on_checkpoint: bool,
                    touches: Sequence[RunRow] | None = None, experiment: str | None = None,
                    note: str = "") -> str:
    """Refuse a test read the seal does not allow; return its role: "baseline" or "claim".

    ``touches``: the reads already spent under this seal across the repository (every
    experiment that shares the test content and base weights, whatever its eval settings:
    ``monte.ledger.seal``); by default, this
    ledger's reads in ``cohort``; ``experiment``: the one asking (a read spent in another one is
    named with its experiment); ``note``: how another test split was found to be this exam
    (``monte.ledger.seal.overlap_note``), added to a refusal."""
    touches = list(test_touches(rows, cohort, exam) if touches is None else touches)
    elsewhere = experiment is not None and any(t.experiment != experiment for t in touches)
    span = (" (the seal spans the repository: two reads per test content and base weights, whatever the "
            f"eval settings{note})" if elsewhere else "")
    if len(touches) >= TEST_READS:
        raise error("E_SEALED",
                    f"the test split of exam {exam!r} has been read twice in cohort {cohort} "
                    f"({_names(touches[:2], elsewhere)}){span}; a third read is refused",
                    "the claim is made; start a new cohort (another base model) or a new experiment"
                    + (" with another test split" if elsewhere else ""))
    if not on_checkpoint:
        lost = dead_baseline(touches)
        if lost is not None:
            raise lost
        if touches and elsewhere and experiment is not None and all(t.experiment != experiment for t in touches):
            raise error("E_SEALED", f"test@0 of exam {exam!r} with these base weights was already taken in "
                        f"experiment {touches[0].experiment} (run {_names(touches[:1], True)}){span}; its remaining "
                        f"read belongs to that experiment's final claim, so {experiment} can take no test baseline "
                        "with these weights", NEW_COHORT_FIX)
        if touches:
            raise error("E_SEALED", f"test@0 of exam {exam!r} was already taken in cohort {cohort} "
                        f"(run {_names(touches[:1], elsewhere)}){span}; the remaining read belongs to the final claim",
                        "nominate a checkpoint and run the final claim: monte eval --split test"
                        + (f" in experiment {touches[0].experiment}" if elsewhere else ""))
        if checkpoints(rows, cohort):
            raise error("E_SEALED", f"cohort {cohort} already holds checkpoints; test@0 must be "
                        "read before any training", "start a new cohort and take both baselines first")
        return "baseline"
    if not touches:
        raise error("E_PREFLIGHT", E_PREFLIGHT_MESSAGE,
                    "start a new cohort and take both baselines (dev and test) before you train")
    return "claim"


NEW_COHORT_FIX = ("start a new cohort with other base weights: e.g. `monte model init base2 --seed 1`, then "
                  "`monte experiment init EXP2 --eval ENV --model base2`, `monte eval -e EXP2` and "
                  "`monte eval -e EXP2 --split test` (a copy of these weights is the same cohort)")


def dead_baseline(touches: Sequence[RunRow]) -> MonteError | None:
    """A cohort whose one test@0 read ended without a score (stopped, crashed, failed): its test
    baseline can never be taken, so it can never train. The refusal says so, and how to go on."""
    if len(touches) != 1 or touches[0].status in ("succeeded", "started", "running"):
        return None
    t = touches[0]
    return error("E_SEALED", f"test@0 of exam {t.exam!r} in cohort {t.cohort} was spent by run {t.run}, which "
                 f"ended {t.status} without a score; the test read stays spent, so this cohort can take no test "
                 "baseline and cannot train", NEW_COHORT_FIX)


def _names(rows: Sequence[RunRow], qualified: bool) -> str:
    return ", ".join(f"{r.experiment}/{r.run}" if qualified else r.run for r in rows)


@dataclass(frozen=True)
class SealConflict:
    """Reads of one sealed exam in one cohort that the seal cannot hold together. ``what``:
    "claims" (two final claims), "baselines" (two test@0) or "reads" (more than two reads, and
    neither of those); ``rows``: the reads that break it."""

    cohort: str
    exam: str
    what: str
    rows: tuple[RunRow, ...]


def read_role(r: RunRow) -> str:
    """A test read's role: the one its row records, else what its target says (a read of the
    base model is test@0, any other is a claim)."""
    if r.role:
        return r.role
    return "baseline" if (r.plan.get("target") or {}).get("kind") == "base" else "claim"


def seal_conflicts(rows: Iterable[RunRow]) -> list[SealConflict]:
    """Where a set of rows (say, the union of two machines' ledgers) breaks the seal: per cohort
    and exam, two final claims, two test@0, or more than two reads. A read is what
    :func:`test_touches` counts (every non-smoke test eval row, whatever became of it). Each
    append is refused by :func:`check_test_read` on its own tip; this checks rows that were
    never on one tip together."""
    groups: dict[tuple[str, str], list[RunRow]] = {}
    for r in rows:
        if is_test_read(r):
            groups.setdefault((r.cohort, r.exam or ""), []).append(r)
    out: list[SealConflict] = []
    for (cohort, exam), reads in sorted(groups.items()):
        reads.sort(key=lambda r: (r.seq, r.run))
        found = [SealConflict(cohort, exam, what, tuple(same))
                 for what, role in (("claims", "claim"), ("baselines", "baseline"))
                 if len(same := [r for r in reads if read_role(r) == role]) > 1]
        if not found and len(reads) > 2:
            found.append(SealConflict(cohort, exam, "reads", tuple(reads)))
        out += found
    return out


def nominee_is_admissible(rows: Sequence[RunRow], ck: Checkpoint, exams: Iterable[str]) -> None:
    for exam in exams:
        if not any(is_admissible(r) and r.split == "dev" and r.exam == exam and _targets(r, ck)
                   for r in rows):
            raise error("E_REFUSED", f"checkpoint {ck.ref} has no admissible dev eval on exam {exam!r}; "
                        "a presented model is measured, never merely liked",
                        f"run `monte eval --checkpoint {ck.ref}` first")


def _targets(r: RunRow, ck: Checkpoint) -> bool:
    t = r.plan.get("target", {})
    return t.get("kind") == "checkpoint" and t.get("run") == ck.run and int(t.get("step", -1)) == ck.step


def select_for_claim(rows: Sequence[RunRow], cohort: str, dev_exams: Sequence[str],
                     nomination: str | None) -> Checkpoint:
    """The checkpoint the final claim scores: the nomination, or (one dev exam) the best paired
    dev delta over the baseline; ties to the higher step, then the newer run."""
    cks = checkpoints(rows, cohort)
    if nomination:
        run, _, step = nomination.partition("@")
        for c in cks:
            if c.run == run and c.step == int(step):
                return c
        raise error("E_INTEGRITY", f"the nomination {nomination} names no checkpoint of this cohort",
                    "nominate again with `monte nominate RUN@STEP`")
    if len(dev_exams) != 1:
        raise error("E_REFUSED", f"this experiment has {len(dev_exams)} dev exams and nothing is "
                    "nominated; any ranking across exams would be a guess",
                    "nominate the checkpoint to claim: `monte nominate RUN@STEP`")
    exam = dev_exams[0]
    base = baseline(rows, cohort, exam, "dev")
    if base is None:
        raise error("E_NO_BASELINE", f"cohort {cohort} has no dev baseline on exam {exam!r}",
                    "run `monte eval` on the base model first")
    candidates = [r for r in rows if is_admissible(r) and r.cohort == cohort and r.split == "dev"
                  and r.exam == exam and r.plan.get("target", {}).get("kind") == "checkpoint"]
    if not candidates:
        raise error("E_REFUSED", "no checkpoint of this cohort carries an admissible dev eval",
                    "evaluate a checkpoint on dev (`monte eval --checkpoint RUN@STEP`) or nominate one")
    unpairable = [r.run for r in candidates if not (r.delta or {}).get("paired")]
    if unpairable:
        raise error("E_UNPAIRABLE",
                    f"{len(unpairable)} candidate dev eval(s) cannot be paired with the baseline "
                    f"({', '.join(unpairable[:3])}); taking the best readable one would be a guess",
                    "run the command where the run directories live (the box), or nominate")
    best = max(candidates, key=lambda r: ((r.delta or {})["delta"], int(r.plan["target"]["step"]), r.seq))
    t = best.plan["target"]
    return next(c for c in cks if c.run == t["run"] and c.step == int(t["step"]))
