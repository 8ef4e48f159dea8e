"""``monte eval``'s plan: every refusal that can be proven before anything is written."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from monte.errors import error
from monte.ledger import rules
from monte.ledger.experiment import Ledger
from monte.ledger.lineage import checkpoint_info, identify_base
from monte.ledger.records import Measurement, RunRow
from monte.ledger.seal import Seal, SealKey, settings_key
from monte.ledger.store import Snapshot
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

    def recorded(self) -> dict[str, Any]:
        """What a row records of the target: no machine-local folder."""
        return self.model_dump(exclude={"folder"})

    @property
    def label(self) -> str:
        return "base" if self.kind == "base" else f"{self.run}@{self.step}"


class ExamPlan(BaseModel):
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


class EvalPlan(BaseModel):
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
    settings: dict[str, Any]
    push: bool = False  # upload results to the results bucket after each transition
    bucket: str | None = None  # where (--push only)
    #: on a box: exam -> the run id the laptop already started for it (``--remote``)
    adopt: dict[str, str] = {}

    def lines(self) -> list[str]:
        n = sum(min(e.n, SMOKE_TASKS) if self.smoke else e.n for e in self.exams)
        out = [f"plan: eval {self.target.label} of cohort {self.cohort} in {self.experiment}"
               + (" (smoke: decides nothing, no score)" if self.smoke else "")]
        for e in self.exams:
            role = {"baseline": " - spends test touch 1 of 2 (test@0)",
                    "claim": " - spends test touch 2 of 2: the final claim"}.get(e.role or "", "")
            out.append(f"  {e.exam}/{e.split}: {min(e.n, SMOKE_TASKS) if self.smoke else e.n} tasks{role}")
            if e.floor is not None:
                out.append(f"    constant-answer floor {e.floor:.4f}: a score at or below it is not learning")
            if e.detectable is not None:
                out.append(f"    {describe_detectable(e.detectable)}")
        out.append(f"  model: {self.target.model}" + (f" ({self.target.folder})" if self.target.folder else ""))
        if self.base_register:
            out.append(f"  base model {self.base_folder} is named {self.base_register!r} in .monte.yaml when recorded "
                       f"(another machine says where it is with {locate.env_var(self.base_register)})")
        out.append(f"  {n} generations, max {self.settings['max_new_tokens']} new tokens each")
        if self.push:
            out.append(f"  push: results to {self.bucket} after each transition")
        return out


def plan_eval(ws: Workspace, *, experiment: str | None, model: str | None, split: str,
              step: int | None, checkpoint: str | None, smoke: bool, push: bool = False) -> EvalPlan:
    exp = experiment_name(ws, experiment)
    ledger = Ledger(ws.store, exp)
    snap = ledger.snapshot()
    meas = ledger.measurement(snap)
    rows = read_rows(ledger, snap)
    if step is not None and checkpoint:
        raise error("E_USAGE", "--step and --checkpoint refuse together", "state one of them")
    if split == "test" and (checkpoint or step is not None) and not smoke:
        raise error("E_REFUSED", "the final claim's checkpoint is chosen by monte, not by a flag",
                    "drop --checkpoint/--step: the test eval scores the nomination "
                    "(`monte nominate RUN@STEP`) or the best paired dev delta")
    base_model = model or meas.model
    if not base_model:
        raise error("E_USAGE", f"experiment {exp} names no model", "pass --model PATH (a local model folder)")
    where = locate.locate(ws, base_model)
    assert where.folder is not None
    base = identify_base(ws.store, exp, where.folder)
    locate.prove(ws.store, exp, where, base.own or base.weights, base.identities)  # another model at a recorded location: E_INTEGRITY
    files, cohort = base.files, base.cohort
    exams = _exams(ws, meas, split)
    seal = Seal(ws.store)
    keys = {e.exam: SealKey(e.sha256, settings_key(meas.eval.model_dump()), base.weights, base.legacy_cohort)
            for e in exams}
    if split == "test" and not smoke:  # the seal first: no selection can make up for a missing test@0
        has_checkpoints = bool(rules.checkpoints(rows, cohort))
        for e in exams:
            rules.check_test_read(rows, cohort, e.exam, on_checkpoint=has_checkpoints, experiment=exp,
                                  touches=seal.touches(keys[e.exam], own=(exp, rows)))
    target = _resolve_target(ws, exp, rows, cohort, where, split, step, checkpoint, smoke, snap)
    if split == "test" and not smoke:
        for e in exams:
            e.role = rules.check_test_read(rows, cohort, e.exam, on_checkpoint=target.kind == "checkpoint",
                                           experiment=exp, touches=seal.touches(keys[e.exam], own=(exp, rows)))
    _advise(ws, meas, rows, cohort, exams, test_read=split == "test" and not smoke)
    bucket = push_bucket(ws) if push else None
    return EvalPlan(experiment=exp, cohort=cohort, weights=base.weights, legacy_cohort=base.legacy_cohort,
                    base_model=where.ref, base_folder=str(where.folder), base_register=where.register,
                    base_files=files,
                    target=target, exams=exams, smoke=smoke, settings=meas.eval.model_dump(), push=push,
                    bucket=bucket)


def _resolve_target(ws: Workspace, exp: str, rows: Sequence[RunRow], cohort: str, base: locate.Located, split: str,
                    step: int | None, checkpoint: str | None, smoke: bool, snap: Snapshot) -> Target:
    ck: rules.Checkpoint | None
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
    elif split == "test" and not smoke:
        ck = None
        if rules.checkpoints(rows, cohort):
            meas = Ledger(ws.store, exp).measurement(snap)
            dev_exams = sorted(e for e, x in meas.exams.items() if "dev" in x.splits)
            nom = snap.read(f"cohorts/{cohort}/nomination.json")
            ck = rules.select_for_claim(rows, cohort, dev_exams,
                                        json.loads(nom)["checkpoint"] if nom else None)
    else:
        ck = rules.newest_checkpoint(rows, cohort)
    if ck is None:
        return Target(kind="base", step=0, model=base.ref, folder=str(base.folder))
    folder = _checkpoint_folder(ws, exp, ck)  # every file proven against its lineage commit
    return Target(kind="checkpoint", run=ck.run, step=ck.step, model=f"{exp}/{ck.ref}", recipe=ck.recipe,
                  commit=ck.commit, folder=str(folder))


def _checkpoint_folder(ws: Workspace, exp: str, ck: rules.Checkpoint) -> Path:
    """The checkpoint's servable folder, every file proven against its lineage commit."""
    return ws.data_root / checkpoint_info(ws.store, ws.data_root, ck)["weights"]


def _exams(ws: Workspace, meas: Measurement, split: str) -> list[ExamPlan]:
    out = []
    for exam, x in sorted(meas.exams.items()):
        if split in x.splits:
            s = x.splits[split]
            out.append(ExamPlan(exam=exam, benchmark=x.benchmark, split=split, path=s.path,
                                sha256=s.sha256, n=s.n))
    if not out:
        raise error("E_NOT_FOUND", f"experiment {meas.experiment} has no {split} split",
                    "an eval-only --benchmark environment has a dev exam only")
    return out


def _advise(ws: Workspace, meas: Measurement, rows: Sequence[RunRow], cohort: str, exams: list[ExamPlan], *,
            test_read: bool) -> None:
    """Issue 18, before anything is spent: each exam's constant-answer floor, and for a test read
    the smallest gain it can show at 80 % power given this cohort's paired dev deltas so far."""
    from monte.envs.floor import exam_floors

    floors = exam_floors(ws, meas.environment)
    for e in exams:
        f = floors.get(e.exam, {}).get(e.split)
        e.floor = f.score if f is not None else None
        if test_read:
            dev = [r.delta for r in rows if r.delta and rules.is_admissible(r) and r.cohort == cohort
                   and r.exam == e.exam and r.split == "dev"]
            e.detectable = detectable(e.n, dev)
