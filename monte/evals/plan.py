"""``monte eval``'s plan: every refusal that can be proven before anything is written."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict

from monte.envs import lmeval
from monte.envs.items import exam_sketch, read_items
from monte.errors import MonteError, error
from monte.evals import shards
from monte.hashing import sha256_file
from monte.ledger import rules
from monte.ledger.experiment import Ledger
from monte.ledger.lineage import checkpoint_info, identify_base
from monte.ledger.predicates import is_admissible, is_sealed, spends_test_read
from monte.ledger.records import Measurement, RunRow
from monte.ledger.seal import Seal, SealKey, overlap_note, settings_key
from monte.ledger.store import Snapshot
from monte.ledger.verify import verify_before_spend
from monte.ledger.views import nomination_path
from monte.models import locate
from monte.runs.lifecycle import experiment_name, push_bucket, read_rows
from monte.runs.naming import parse_run_ref
from monte.stats.power import describe_detectable, detectable
from monte.workspace import Workspace

SMOKE_TASKS = 5


class Target(BaseModel):
    kind: str  # "base" | "checkpoint"
    run: str | None = None
    step: int = 0
    #: what the record names: the base model's reference (monte.models.locate), or EXP/RUN@STEP
    model: str
    recipe: str | None = None
    commit: str | None = None  # a checkpoint's lineage commit
    #: the folder generation loads, on this machine (shown in the plan, never recorded)
    folder: str = ""
    #: the final claim's: why this checkpoint, and its dev verdict (shown in the plan, never recorded:
    #: verify recomputes the selection from the records)
    why: str = ""

    def recorded(self) -> dict[str, Any]:
        """What a row records of the target: no machine-local folder."""
        return self.model_dump(exclude={"folder", "why"})

    @property
    def label(self) -> str:
        return "base" if self.kind == "base" else f"{self.run}@{self.step}"


class ExamPlan(BaseModel):
    model_config = ConfigDict(frozen=True)

    exam: str
    benchmark: str
    split: str
    path: str  # on the data root
    sha256: str
    n: int
    role: str | None = None  # test: "baseline" | "claim"
    floor: float | None = None  # the split's constant-answer floor (monte.envs.floor)
    #: a test read: what it can show (monte.stats.power.detectable), before the touch is spent
    detectable: dict[str, Any] | None = None
    #: a final claim: its checkpoint judged as the best of the K dev-evaluated
    #: (monte.stats.search), shown before the touch is spent, never recorded as evidence
    search: dict[str, Any] | None = None
    #: a test split: its items (monte.envs.items.exam_sketch), what the seal knows it by
    exam_id: dict[str, Any] | None = None
    #: an lm-eval exam: what lm-eval asks the model (monte.envs.lmeval.requests), not the
    #: experiment's generation settings, which it does not use
    requests: dict[str, Any] | None = None


class EvalPlan(BaseModel):
    # a plan is what was shown and checked: a change is a new plan (model_copy), never an edit
    model_config = ConfigDict(frozen=True)

    experiment: str
    cohort: str
    weights: str = ""  # the base model's weights identity (the seal is keyed by it)
    legacy_cohort: str = ""  # the same base's older file-listing cohort id
    base_model: str  # the base model's reference, the same on every machine (monte.models.locate)
    base_folder: str = ""  # where it is on this machine (shown, never recorded)
    base_register: str | None = None  # a name to give base_folder in .monte.yaml when recorded
    base_files: dict[str, str]
    target: Target
    exams: list[ExamPlan]
    smoke: bool
    settings: dict[str, Any]  # what is generated: the measurement's eval settings (the seal's)
    execution: dict[str, Any] = {}  # how: its execution details (batch size), never the seal's
    push: bool = False  # upload results to the results bucket after each transition
    bucket: str | None = None  # where (--push only)
    #: on a box: exam -> the run id the laptop already started for it (``--remote``)
    adopt: dict[str, str] = {}
    #: generation split across this many processes (monte.evals.shards): an execution detail
    processes: int = 1
    #: a base no record knows by its weights, read on the grader: its behavioural fingerprint is
    #: taken there, on the copy it loads, and checked here before anything is spent
    behaviour_unchecked: bool = False

    def lines(self) -> list[str]:
        out = [f"plan: eval {self.target.label} of cohort {self.cohort} in {self.experiment}"
               + (" (smoke: decides nothing, no score)" if self.smoke else "")]
        for e in self.exams:
            role = {"baseline": " - spends test read 1 of 2 (test@0)",
                    "claim": " - spends test read 2 of 2: the final claim"}.get(e.role or "", "")
            out.append(f"  {e.exam}/{e.split}: {min(e.n, SMOKE_TASKS) if self.smoke else e.n} tasks{role}")
            if e.requests is not None:
                out.append(f"    {lmeval.describe(e.requests, min(e.n, SMOKE_TASKS) if self.smoke else e.n)}"
                           + (f", generated in {self.processes} processes" if self.processes > 1 else ""))
            if e.floor is not None:
                out.append(f"    constant-answer floor {e.floor:.4f}: a score at or below it is not learning")
            if e.detectable is not None:
                out.append(f"    {describe_detectable(e.detectable)}")
            if e.search is not None:
                from monte.status.search import search_line

                out.append(f"    {search_line(e.search)}")
        out.append(f"  model: {self.target.model}" + (f" ({self.target.folder})" if self.target.folder else ""))
        if self.target.why:
            out.append(f"  chosen: {self.target.why}")
        if self.behaviour_unchecked:
            out.append("  a new base: the grader takes its behavioural fingerprint from the copy it loads, checked "
                       "here before the read starts (a model that behaves as a checkpoint is refused, nothing spent)")
        if self.base_register:
            out.append(f"  base model {self.base_folder} is named {self.base_register!r} in .monte.yaml when recorded "
                       f"(another machine says where it is with {locate.env_var(self.base_register)})")
        k = int(self.settings.get("samples", 1))
        n = sum(min(e.n, SMOKE_TASKS) if self.smoke else e.n for e in self.exams if e.requests is None)
        if n:  # (an lm-eval exam said what it asks above)
            out.append(f"  {n * k} generations" + (f" ({n} items x K = {k} samples, temperature "
                                                   f"{self.settings['temperature']:g})" if k > 1 else "")
                       + f", max {self.settings['max_new_tokens']} new tokens each"
                       + (f", in {self.processes} processes" if self.processes > 1 else ""))
        if self.push:
            out.append(f"  push: results to {self.bucket} after each transition")
        return out


def plan_eval(ws: Workspace, *, experiment: str | None, model: str | None, split: str,
              step: int | None, checkpoint: str | None, smoke: bool, push: bool = False,
              processes: int = 1) -> EvalPlan:
    if processes < 1:
        shards.check(processes, {})
    from monte.frozen import sweep_staging

    sweep_staging(ws)  # private copies of the weights that killed evals left (their owners are gone)
    exp = experiment_name(ws, experiment)
    ledger = Ledger(ws.store, exp)
    snap = ledger.snapshot()
    meas = ledger.measurement(snap)
    rows = read_rows(ledger, snap)
    if step is not None and checkpoint:
        raise error("E_USAGE", "--step and --checkpoint refuse together", "state one of them")
    test_read = spends_test_read(split, smoke)
    if test_read and (checkpoint or step is not None):
        raise error("E_REFUSED", "the final claim's checkpoint is chosen by monte, not by a flag",
                    "drop --checkpoint/--step: the test eval scores the nomination "
                    "(`monte nominate RUN@STEP`) or the best paired dev delta")
    base_model = model or (_checkpoint_base(ws, exp, rows, checkpoint) if checkpoint else None) or meas.model
    if not base_model:
        raise error("E_USAGE", f"experiment {exp} names no model", "pass --model PATH (a local model folder)")
    where = locate.locate(ws, base_model)
    assert where.folder is not None
    # a test read on a grader: the base's behaviour is taken there, from the copy it loads (no
    # torch here; the grader's worker loads the model anyway), and checked before the read starts
    on_grader = test_read and bool(ws.config.get("grader"))
    base = identify_base(ws.store, exp, where.folder, by_behaviour=not on_grader)
    locate.prove(ws.store, exp, where, base.own or base.weights, base.identities)  # another model at a recorded location: E_INTEGRITY
    files, cohort = base.files, base.cohort
    exams = _exams(ws, meas, split)
    if processes > 1 and (meas.eval.samples > 1 or meas.eval.temperature > 0):
        raise error("E_USAGE", f"experiment {exp} samples its answers (K = {meas.eval.samples}, temperature "
                    f"{meas.eval.temperature:g}); each item's samples are drawn in one process from its own seed",
                    "drop --processes (one process samples every item)")
    for e in exams if processes > 1 else []:
        why = lmeval.sharding_refusal(e.requests) if e.requests is not None else None
        if why:
            raise error("E_USAGE", f"--processes {processes} cannot shard lm-eval exam {e.exam}: {why}",
                        "drop --processes (one process runs it)")
    shards.check(processes, {e.exam: min(e.n, SMOKE_TASKS) if smoke else e.n for e in exams})
    seal = Seal(ws.store, exam_of=exam_of(ws))
    keys = {e.exam: SealKey(e.sha256, settings_key(meas.eval.model_dump()), base.weights, base.legacy_cohort,
                            exam=e.exam_id) for e in exams}
    if test_read:  # the seal first: no selection can make up for a missing test@0
        has_checkpoints = bool(rules.checkpoints(rows, cohort))
        for e in exams:
            touches = seal.touches(keys[e.exam], own=(exp, rows))
            rules.check_test_read(rows, cohort, e.exam, on_checkpoint=has_checkpoints, experiment=exp,
                                  touches=touches, note=overlap_note(seal, touches))
    if test_read:  # the history verified before a read is planned (--dry-run says so too); a deleted
        verify_before_spend(ws.store)  # base ref reads as a fresh cohort above, and is a rewind here
    target = _resolve_target(ws, exp, rows, cohort, where, split, step, checkpoint, smoke, snap)
    if test_read:
        for i, e in enumerate(exams):
            touches = seal.touches(keys[e.exam], own=(exp, rows))
            exams[i] = e.model_copy(update={"role": rules.check_test_read(
                rows, cohort, e.exam, on_checkpoint=target.kind == "checkpoint", experiment=exp,
                touches=touches, note=overlap_note(seal, touches))})
    _advise(ws, meas, rows, cohort, exams, test_read=test_read)
    if test_read and target.kind == "checkpoint":
        _searched(rows, cohort, exams, f"{target.run}@{target.step}")
    bucket = push_bucket(ws) if push else None
    return EvalPlan(experiment=exp, cohort=cohort, weights=base.weights, legacy_cohort=base.legacy_cohort,
                    base_model=where.ref, base_folder=str(where.folder), base_register=where.register,
                    base_files=files,
                    target=target, exams=exams, smoke=smoke, settings=meas.eval.model_dump(),
                    execution=meas.execution.model_dump(), push=push,
                    bucket=bucket, processes=processes, behaviour_unchecked=base.unchecked)


def _checkpoint_base(ws: Workspace, exp: str, rows: Sequence[RunRow], checkpoint: str) -> str | None:
    """The base model of the cohort ``checkpoint`` belongs to (None: refused later, for good)."""
    from monte.ledger.lineage import cohort_model

    try:
        ref_exp, run, step = parse_run_ref(checkpoint, exp)
        ck = rules.find_checkpoint(rows, run, step) if ref_exp == exp else None
    except MonteError:
        return None
    return cohort_model(ws.store, exp, ck.cohort) if ck is not None and ck.cohort else None


def _resolve_target(ws: Workspace, exp: str, rows: Sequence[RunRow], cohort: str, base: locate.Located, split: str,
                    step: int | None, checkpoint: str | None, smoke: bool, snap: Snapshot) -> Target:
    ck: rules.Checkpoint | None
    why = ""
    if checkpoint:
        ref_exp, run, ck_step = parse_run_ref(checkpoint, exp)
        if ref_exp != exp:
            raise error("E_USAGE", f"{checkpoint} names experiment {ref_exp}, not {exp}",
                        f"pass --experiment {ref_exp}")
        ck = rules.find_checkpoint(rows, run, ck_step)
        if ck.cohort != cohort:
            raise error("E_REFUSED", f"checkpoint {ck.ref} belongs to cohort {ck.cohort}, not {cohort} "
                        "(another base model)", "pass the --model that checkpoint was trained from")
    elif step is not None:
        ck = None if step == 0 else rules.checkpoint_at_step(rows, cohort, step)
    elif spends_test_read(split, smoke):
        ck = None
        if rules.checkpoints(rows, cohort):
            meas = Ledger(ws.store, exp).measurement(snap)
            dev_exams = sorted(e for e, x in meas.exams.items() if "dev" in x.splits)
            nom = snap.read(nomination_path(cohort))
            nominated = json.loads(nom)["checkpoint"] if nom else None
            ck = rules.select_for_claim(rows, cohort, dev_exams, nominated)
            why = _why_chosen(rows, cohort, ck, nominated)
    else:
        ck = rules.newest_checkpoint(rows, cohort)
        if ck is not None:  # a user who names a model may expect that model: say what was chosen, and why
            why = (f"the newest checkpoint of cohort {cohort} (base model {base.ref} and the checkpoints trained "
                   f"from it): without --checkpoint or --step, an eval scores it; the base model itself: "
                   f"--step 0")
    if ck is None:
        return Target(kind="base", step=0, model=base.ref, folder=str(base.folder))
    folder = _checkpoint_folder(ws, exp, ck)  # every file proven against its lineage commit
    return Target(kind="checkpoint", run=ck.run, step=ck.step, model=f"{exp}/{ck.ref}", recipe=ck.recipe,
                  commit=ck.commit, folder=str(folder), why=why)


def _why_chosen(rows: Sequence[RunRow], cohort: str, ck: rules.Checkpoint, nominated: str | None) -> str:
    """Why the final claim scores ``ck``, and what its dev evals said (a STRIKE named as such)."""
    from monte.stats.paired import format_interval

    evals = [r for r in rows if is_admissible(r) and r.cohort == cohort and r.split == "dev"
             and (r.plan.get("target") or {}).get("kind") == "checkpoint"]
    mine = [r for r in evals if (r.plan.get("target") or {}).get("run") == ck.run
            and int((r.plan.get("target") or {}).get("step", -1)) == ck.step]
    if nominated:
        why = f"nominated with `monte nominate {nominated}`"
    else:
        why = (f"the best paired dev delta over dev@0 among {len(evals)} dev eval(s) of this cohort's checkpoints "
               "(ties: the higher step, then the newer run)")
    latest = {r.exam: r for r in sorted(mine, key=lambda r: r.seq)}  # each exam's newest dev eval
    verdicts = []
    for r in latest.values():
        d = r.delta or {}
        if isinstance(d.get("delta"), int | float):
            verdicts.append(f"{r.exam} {d['delta']:+.3f} {format_interval(d.get('lower', 0.0), d.get('upper', 0.0), 3)} "
                            f"{d.get('verdict') or 'unjudged'} (run {r.run})")
    if not verdicts:
        return why + "; it has no dev eval"
    strike = any(" STRIKE " in v for v in verdicts)
    return (why + "; its dev delta: " + ", ".join(verdicts)
            + ("; a STRIKE: its dev gain over the baseline is not significant" if strike else ""))


def _checkpoint_folder(ws: Workspace, exp: str, ck: rules.Checkpoint) -> Path:
    """The checkpoint's servable folder, every file proven against its lineage commit."""
    return ws.data_root / str(checkpoint_info(ws.store, ws.data_root, ck)["weights"])


def exam_of(ws: Workspace) -> Callable[[str, str, str], dict[str, Any] | None]:
    """For the seal: the exam sketch of experiment EXP's test split of EXAM, read from its file on
    this data root when that file still holds the bytes (sha256) the read recorded."""
    def read(experiment: str, exam: str, sha256: str) -> dict[str, Any] | None:
        meas = Ledger(ws.store, experiment).measurement_view()
        s = meas.exams[exam].splits["test"]
        path = ws.data_root / s.path
        if s.sha256 != sha256 or not path.is_file() or sha256_file(path) != sha256:
            return None
        return exam_sketch(read_items(str(path)))

    return read


def _exams(ws: Workspace, meas: Measurement, split: str) -> list[ExamPlan]:
    out = []
    for exam, x in sorted(meas.exams.items()):
        if split in x.splits:
            s = x.splits[split]
            # a test split's items: what the seal knows the exam by (any order, file or name)
            path = ws.data_root / s.path
            exam_id = exam_sketch(read_items(str(path))) if is_sealed(split) and path.is_file() else None
            lm = (meas.grader or {}).get("kind") == lmeval.KIND  # lm-eval builds this exam's requests
            task = ((meas.grader or {}).get("tasks") or {}).get(exam) if lm else None
            out.append(ExamPlan(exam=exam, benchmark=x.benchmark, split=split, path=s.path,
                                sha256=s.sha256, n=s.n, exam_id=exam_id,
                                requests=lmeval.requests(task) if isinstance(task, dict) else None))
    if not out:
        raise error("E_NOT_FOUND", f"experiment {meas.experiment} has no {split} split",
                    "an eval-only --benchmark environment has a dev exam only")
    return out


def _searched(rows: Sequence[RunRow], cohort: str, exams: list[ExamPlan], claimed: str) -> None:
    """The search verdict, in the final claim's plan: the claimed checkpoint's first dev delta judged as
    the best of the K checkpoints of this cohort dev-evaluated on the exam (each first admissible
    dev eval with a delta, as ``monte status`` counts them)."""
    from monte.stats.search import Candidate, judge

    for i, e in enumerate(exams):
        first: dict[str, Candidate] = {}
        for r in sorted(rows, key=lambda r: r.seq):
            t = r.plan.get("target") or {}
            if (r.delta and is_admissible(r) and r.cohort == cohort and r.exam == e.exam and r.split == "dev"
                    and t.get("kind") == "checkpoint"):
                ref = f"{t.get('run')}@{t.get('step')}"
                if ref not in first:
                    first[ref] = Candidate.of(ref, r.delta, int(t.get("step", 0)))
        s = judge(list(first.values()), nominated=claimed) if claimed in first else None
        if s is not None:
            exams[i] = e.model_copy(update={"search": {"cohort": cohort, "exam": e.exam, "split": "dev",
                                                       **s.record(), "chosen": "claimed"}})


def _advise(ws: Workspace, meas: Measurement, rows: Sequence[RunRow], cohort: str, exams: list[ExamPlan], *,
            test_read: bool) -> None:
    """The floor, before anything is spent: each exam's constant-answer floor, and for a test read
    the smallest gain it can show at 80 % power given this cohort's paired dev deltas so far."""
    from monte.envs.floor import exam_floors

    floors = exam_floors(ws, meas.environment)
    for i, e in enumerate(exams):  # each exam's plan replaced, never edited (plans are frozen)
        f = floors.get(e.exam, {}).get(e.split)
        update: dict[str, Any] = {"floor": f.score if f is not None else None}
        if test_read:
            dev = [r.delta for r in rows if r.delta and is_admissible(r) and r.cohort == cohort
                   and r.exam == e.exam and r.split == "dev"]
            update["detectable"] = detectable(e.n, dev, samples=meas.eval.samples)
        exams[i] = e.model_copy(update=update)
