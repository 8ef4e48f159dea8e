"""``monte train``'s plan: one chunk of ``steps_per_chunk`` steps, every refusal proven before
any record (the recipe and the source pair, the parent and its stage, the baselines, the seal,
this machine's settings: :mod:`monte.training.preflight`).

Continuation and stage boundary (the two rules of docs/adr/0002-stage-boundary.md):

- Same recipe as the parent: ``resume_from_checkpoint`` on the parent's trainer state restores
  optimizer, scheduler, RNG and data position, and the trainer's step counter continues. The
  model handed to the trainer is the *stage's* starting weights, because GRPO loads its KL
  reference from there at construction; the resume then loads the parent's weights.
- Different recipe: a weights-only warm start from the parent's servable folder; the counter
  restarts and the KL reference is the parent checkpoint.

Running the plan: :mod:`monte.training.run`; the TRL trainers: :mod:`monte.training.trainers`.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict

from monte.errors import MonteError, error
from monte.ledger import rules
from monte.ledger.experiment import Ledger
from monte.ledger.lineage import checkpoint_info, identify_base, servable_files
from monte.ledger.store import Snapshot
from monte.models import locate
from monte.runs.lifecycle import (
    CohortReads,
    experiment_name,
    push_bucket,
)
from monte.runs.naming import parse_run_ref
from monte.training import launch, recipes, sources
from monte.training.launch import LaunchSpec
from monte.training.preflight import check_machine
from monte.workspace import Workspace

SMOKE_STEPS = 3


class TrainPlan(BaseModel):
    # a plan is what was shown and checked: a change is a new plan (model_copy), never an edit
    model_config = ConfigDict(frozen=True)

    experiment: str
    cohort: str
    weights: str = ""  # the base model's weights identity
    base_model: str  # the base model's reference, the same on every machine (monte.models.locate)
    base_folder: str = ""  # where it is on this machine (never recorded)
    base_files: dict[str, str]
    recipe: recipes.ResolvedRecipe
    source: sources.Source
    parent: dict[str, Any] | None  # {"run", "step"}
    boundary: bool
    start_step: int
    steps: int
    smoke: bool
    init_model: str  # the weights the trainer is constructed from (a folder here)
    stage_start: str  # the stage's starting weights (the KL reference; a folder here)
    resume_from: str | None  # the parent's trainer state (continuation only; a folder here)
    resume_step: int  # the trainer's own step counter at the start
    #: the proven sha256 of init_model's servable files (the base commit's, or the checkpoint's
    #: lineage commit's) and of resume_from's (its checkpoint's): the chunk loads a private copy
    #: hashed against them (:func:`monte.training.run.private_weights`); empty: loaded by path
    init_files: dict[str, str] = {}
    resume_files: dict[str, str] = {}
    leak: dict[str, Any]
    #: what records name instead of those folders: "base" or RUN@STEP (a checkpoint, proven
    #: against its lineage commit wherever it is resolved)
    init_ref: str = "base"
    stage_ref: str = "base"
    resume_state: str | None = None  # resume_from, relative to the data root
    teacher: str | None = None  # distillation: the teacher's folder (here)
    teacher_ref: str | None = None  # and its reference (monte.models.locate)
    teacher_files: dict[str, str] | None = None  # and the sha256 of its servable files
    #: names monte gives folders outside the repository in .monte.yaml when it records (name -> folder)
    names: dict[str, str] = {}
    push: bool = False  # upload results to the results bucket after each transition
    bucket: str | None = None  # where (--push only)
    hub: str | None = None  # the hub model repo the checkpoint goes to (a real --push chunk)
    adopt: str | None = None  # on a box: the run the laptop already started for this job
    #: how the chunk is launched (processes, nodes, backend, the accelerate config): monte.training.launch
    launch: LaunchSpec | None = None

    def lines(self) -> list[str]:
        move = ("smoke (3 steps, never evidence)" if self.smoke else
                "stage boundary: weights-only warm start" if self.boundary else
                "continuation: optimizer, scheduler, RNG and data position restored" if self.resume_from else
                "fresh branch from the base model")
        frm = f"{self.parent['run']}@{self.parent['step']}" if self.parent else "base"
        return [
            f"plan: train {self.recipe.algorithm}:{self.source.name} from {frm} in {self.experiment}",
            f"  recipe {self.recipe.name} (sha256 {self.recipe.sha256[:12]}), {self.steps} steps: "
            f"{self.start_step} -> {self.start_step + self.steps}",
            f"  {move}",
            *([f"  reference model (beta {self.recipe.settings['beta']:g}): the stage's start, {self.stage_ref}"
               + (" (the parent checkpoint)" if self.boundary else "")]
              if self.recipe.algorithm in ("dpo", "grpo", "rloo") and self.recipe.settings.get("beta") else []),
            f"  source {self.source.dataset_kind + ' ' if self.source.dataset_kind else ''}{self.source.kind} "
            f"{self.source.name}"
            + (f" ({self.leak['dev_overlap']} item(s) also in a dev exam)" if self.leak.get("dev_overlap") else ""),
            f"  cohort {self.cohort} (base model {self.base_model}"
            + (f", here {self.base_folder})" if self.base_folder else ")"),
            *[f"  {folder} is named {name!r} in .monte.yaml when recorded (elsewhere: {locate.env_var(name)})"
              for name, folder in sorted(self.names.items())],
            *([f"  recipe keys ignored (TRL's defaults in a pasted dump): "
               f"{', '.join(sorted(self.recipe.ignored))}"] if self.recipe.ignored else []),
            *(self.launch.lines() if self.launch else []),
            *([f"  push: results to {self.bucket} after each transition"
               + (f"; weights to the hub repo {self.hub}, one branch per checkpoint" if self.hub else "")]
              if self.push else []),
        ]


def plan_train(ws: Workspace, *, experiment: str | None, recipe: str, source: str, parent: str | None,
               from_base: bool, model: str | None, smoke: bool, push: bool = False,
               remote: bool = False, processes: int | None = 1, nodes: int = 1,
               accelerate_config: Path | str | None = None, port: int | None = None,
               hosts: str | None = None, ssh_key: str | None = None) -> TrainPlan:
    """The chunk's plan, every refusal proven before anything is written; the recipe's values
    against this machine too (:func:`check_machine`), unless the chunk runs on a box (``remote``:
    the box checks them when it plans the job); the launch past one process
    (:mod:`monte.training.launch`)."""
    if processes is not None and processes < 1 or nodes < 1:  # before anything else is read
        launch.plan_launch({}, "sft", processes=processes, nodes=nodes, cuda=False)
    if push:  # refused before any compute (and before TRL's import): no bucket, or (a real chunk) no hub repo
        from monte.storage import hub

        bucket, hub_repo = push_bucket(ws), None if smoke else hub.require_repo(ws)
    plan = _plan_train(ws, experiment=experiment, recipe=recipe, source=source, parent=parent,
                       from_base=from_base, model=model, smoke=smoke)
    recipes.check_chunk(plan.recipe, plan.resume_step, plan.steps)  # horizon, generation buffer
    plan = plan.model_copy(update={"launch": launch.plan_launch(
        plan.recipe.settings, plan.recipe.algorithm, processes=processes, nodes=nodes,
        accelerate_config=accelerate_config, port=port, hosts=hosts, ssh_key=ssh_key)})
    if plan.resume_from and plan.parent and plan.recipe.algorithm not in ("sft", "dpo"):  # those sample nothing
        _same_world(ws, plan)
    if not remote:
        check_machine(plan)
    if push:
        plan = plan.model_copy(update={"push": True, "bucket": bucket, "hub": hub_repo})
    return plan


def _plan_train(ws: Workspace, *, experiment: str | None, recipe: str, source: str, parent: str | None,
                from_base: bool, model: str | None, smoke: bool) -> TrainPlan:
    exp = experiment_name(ws, experiment)
    ledger = Ledger(ws.store, exp)
    snap = ledger.snapshot()
    meas = ledger.measurement(snap)
    # Every refusal that needs no trainer comes before TRL's import (which imports torch, seconds):
    # the starting point, the base, its baselines, the source and its pairing, a leak.
    head = recipes.peek(recipe, ws.repo_root)
    if smoke and (parent or from_base):
        raise error("E_USAGE", "a smoke chunk states neither --parent nor --from-base: it never enters the tree",
                    "drop --parent/--from-base, or drop --smoke for a real chunk")
    if not smoke and bool(parent) == bool(from_base):
        raise error("E_USAGE", "a real chunk states its starting point: --parent RUN@STEP or --from-base"
                    + (" (not both)" if parent else ""), "monte train ... --from-base  |  --parent RUN@STEP")
    # a continuation's base is its parent's cohort's (as `eval --checkpoint` reads it), unless named
    base = model or (_parent_base(ws, exp, ledger, snap, parent) if parent else None) \
        or head.model or meas.model
    if not base:
        raise error("E_USAGE", f"experiment {exp} names no model and neither does recipe {head.name}",
                    "pass --model PATH")
    where = locate.locate(ws, base)
    assert where.folder is not None
    base_id = identify_base(ws.store, exp, where.folder, by_behaviour=False)  # no torch before its refusals
    locate.prove(ws.store, exp, where, base_id.own or base_id.weights, base_id.identities)  # another model at a recorded location: E_INTEGRITY
    files, cohort = base_id.files, base_id.cohort
    names = {where.register: str(where.folder)} if where.register else {}
    if not smoke:
        _require_baselines(CohortReads(ledger, snap, cohort), meas, seal=(ws, exp, base_id))
    src = sources.resolve(ws, source)
    sources.check_pairing(head.algorithm, src)
    leak = sources.leak_check(ws, meas, src)
    rec = recipes.resolve(recipe, ws.repo_root)  # the TRL fields proven: imports TRL
    extra: dict[str, Any] = {}
    if rec.algorithm == "distillation":  # refuse a missing teacher before anything is written
        teacher = _teacher(rec.parsed().teacher, ws.repo_root)
        taught = locate.locate(ws, teacher)
        if taught.register:
            names[taught.register] = teacher
        extra = {"teacher": teacher, "teacher_ref": taught.ref, "teacher_files": servable_files(Path(teacher))}
    steps = SMOKE_STEPS if smoke else meas.train.steps_per_chunk
    base_str = str(where.folder.resolve())
    common: dict[str, Any] = dict(experiment=exp, cohort=cohort, weights=base_id.weights, base_model=where.ref,
                                  base_folder=base_str, base_files=files, recipe=rec, source=src, leak=leak,
                                  names=names)
    if not parent:
        return TrainPlan(**common, **extra, parent=None, boundary=False, start_step=0, steps=steps, smoke=smoke,
                         init_model=base_str, stage_start=base_str, resume_from=None, resume_step=0,
                         init_files=files)
    ref_exp, run, step = parse_run_ref(parent, exp)
    if ref_exp != exp:
        raise error("E_USAGE", f"{parent} names experiment {ref_exp}, not {exp}", f"pass --experiment {ref_exp}")
    ck = _checkpoint(ledger, snap, run, step)
    if ck.cohort != cohort:
        raise error("E_REFUSED", f"checkpoint {ck.ref} belongs to cohort {ck.cohort}, not {cohort}",
                    "pass the --model that checkpoint was trained from")
    info = checkpoint_info(ws.store, ws.data_root, ck)
    weights = str(ws.data_root / info["weights"])
    same = info["recipe"].get("name") == rec.name and info["recipe"].get("sha256") == rec.sha256
    if same:
        if info.get("source") != src.name:
            raise error("E_REFUSED", f"a same-recipe continuation keeps its parent's --source "
                        f"({info.get('source')}); its optimizer and dataloader state index those rows",
                        "start a fresh branch with --from-base, or cross a stage boundary with another recipe")
        if not info.get("trainer_state"):
            raise error("E_NOT_FOUND", f"checkpoint {ck.ref} kept no trainer state to continue from",
                        "cross a stage boundary (another recipe) for a weights-only warm start")
        state = ws.data_root / info["trainer_state"]
        if not state.is_dir():
            raise error("E_NOT_FOUND", f"the trainer state of {ck.ref} is not on this data root ({state})",
                        "run where the run directories live (the box)")
        stage_ref, stage_path, stage_files = _stage_start(ws, exp, ledger, snap, info.get("stage_start"),
                                                          base_str, files)
        return TrainPlan(**common, **extra, parent={"run": ck.run, "step": ck.step}, boundary=False,
                         start_step=ck.step, steps=steps, smoke=False, init_model=stage_path,
                         stage_start=stage_path, init_ref=stage_ref, stage_ref=stage_ref, resume_from=str(state),
                         resume_state=str(info["trainer_state"]),
                         resume_step=int(info.get("trainer_step", 0)),
                         # the trainer state's servable files are the ones its checkpoint folder was copied from
                         init_files=stage_files, resume_files=dict(info["files"]))
    return TrainPlan(**common, parent={"run": ck.run, "step": ck.step}, boundary=True, start_step=ck.step,
                     steps=steps, smoke=False, init_model=weights, stage_start=weights, init_ref=ck.ref,
                     stage_ref=ck.ref, resume_from=None, resume_step=0, init_files=dict(info["files"]))


def _same_world(ws: Workspace, plan: TrainPlan) -> None:
    """A sampling trainer (GRPO, RLOO, distillation) continues only on its parent's world size: the
    trainer keeps one RNG state per rank, and another count would not restore them, so the
    continuation would not equal one longer chunk."""
    assert plan.launch is not None and plan.parent is not None
    parent = Ledger(ws.store, plan.experiment).row(str(plan.parent["run"]))
    was = int(((parent.plan.get("launch") if parent else None) or {}).get("world_size") or 1)
    if was != plan.launch.world_size:
        raise error("E_REFUSED", f"a same-recipe {plan.recipe.algorithm} continuation on {plan.launch.world_size} "
                    f"process(es) of {plan.parent['run']}@{plan.parent['step']}, which trained on {was}: the trainer "
                    "saved one sampling RNG state per rank, and another process count cannot restore them",
                    f"continue with {was} process(es) (--processes x --nodes), or cross a stage boundary")


_LEGACY_STAGE = re.compile(r"runs/[^/]+/([0-9a-z]+)/checkpoints/step-(\d+)")


def _checkpoint(ledger: Ledger, snap: Snapshot, run: str, step: int | None) -> rules.Checkpoint:
    """:func:`rules.find_checkpoint` over the one row it needs (``Ledger.row``: O(1) in the runs)."""
    found = ledger.row(run, snap)
    return rules.find_checkpoint([found] if found is not None else [], run, step)


def _stage_start(ws: Workspace, exp: str, ledger: Ledger, snap: Snapshot, stage: Any,
                 base: str, base_files: dict[str, str]) -> tuple[str, str, dict[str, str]]:
    """A continuation's KL reference as its parent's lineage commit names it: ``base`` (this
    machine's base model, of the parent's cohort) or ``RUN@STEP`` (that checkpoint, every file
    proven against its own lineage commit). An older record's folder is read as what it was: an
    absolute one was the base model's, a data-root one a checkpoint's. Returns (reference, folder
    here, the proven sha256 of its servable files)."""
    stage = str(stage or "base")
    if stage == "base" or os.path.isabs(stage):
        return "base", base, base_files
    legacy = _LEGACY_STAGE.fullmatch(stage)
    run, step = (legacy.group(1), int(legacy.group(2))) if legacy else parse_run_ref(stage, exp)[1:]
    if step is None:
        raise error("E_INTEGRITY", f"a lineage commit names the stage start {stage!r}", "run `monte ledger verify`")
    ck = _checkpoint(ledger, snap, run, step)
    info = checkpoint_info(ws.store, ws.data_root, ck)
    return ck.ref, str(ws.data_root / info["weights"]), dict(info["files"])


def _parent_base(ws: Workspace, exp: str, ledger: Ledger, snap: Snapshot, parent: str) -> str | None:
    """The base model reference of the cohort the parent checkpoint belongs to (its base commit's
    ``base.json``), so `--parent` of a checkpoint in a second cohort needs no `--model`."""
    from monte.ledger.lineage import cohort_model

    try:
        ref_exp, run, step = parse_run_ref(parent, exp)
        if ref_exp != exp:
            return None
        ck = _checkpoint(ledger, snap, run, step)
    except MonteError:
        return None  # refused below, where the parent is read for good
    return cohort_model(ws.store, exp, ck.cohort) if ck.cohort else None


def _read_elsewhere(ws: Workspace, exp: str, base_id: Any, meas: Any, exam: str, split_sha256: str,
                    reads: CohortReads) -> list[Any]:
    """Test reads of this exam's content with these base weights in other experiments (the seal
    spans the repository): a cohort whose test@0 was read there can take none here."""
    from monte.ledger.seal import Seal, SealKey, settings_key

    key = SealKey(split_sha256, settings_key(meas.eval.model_dump()), base_id.weights, base_id.legacy_cohort)
    return [t for t in Seal(ws.store).touches(key) if t.experiment != exp]


def _require_baselines(reads: CohortReads, meas: Any, seal: tuple[Workspace, str, Any] | None = None) -> None:
    """Every exam's baselines in the cohort (from its derived index: O(1) in the ledger's runs).
    ``seal`` (workspace, experiment, base identity): a test baseline the repository-wide seal has
    already spent in another experiment is named as such, with the way on (other base weights)."""
    cohort = reads.cohort
    missing = []
    for exam, x in sorted(meas.exams.items()):
        if "test" in x.splits and reads.baseline(exam, "test") is None:
            lost = rules.dead_baseline(reads.test_touches(exam))
            if lost is not None:
                raise error("E_NO_BASELINE", lost.message, lost.fix)
            if seal is not None and not reads.test_touches(exam):
                ws, exp, base_id = seal
                there = _read_elsewhere(ws, exp, base_id, meas, exam, x.splits["test"].sha256, reads)
                if there:
                    raise error("E_NO_BASELINE", f"cohort {cohort} has no test baseline for {exam}/test@0 in {exp}, "
                                f"and can take none: the test split of exam {exam!r} was already read with these "
                                f"base weights in experiment {there[0].experiment} (run {there[0].run}; the seal "
                                "spans the repository: two reads per test content and base weights, whatever the "
                                "eval settings)",
                                rules.NEW_COHORT_FIX)
        for split in ("dev", "test"):
            if split in x.splits and reads.baseline(exam, split) is None:
                missing.append(f"{exam}/{split}@0")
    if missing:
        # name only the reads that are missing: an experiment with no test split has no `--split test`
        todo = [cmd for split, cmd in (("dev", "`monte eval` (dev)"), ("test", "`monte eval --split test`"))
                if any(m.endswith(f"/{split}@0") for m in missing)]
        raise error("E_NO_BASELINE", f"cohort {cohort} has no baseline for {', '.join(missing)}; training is "
                    "refused until every exam has its baseline",
                    f"evaluate the base model first: {' and '.join(todo)}")


def _teacher(spec: str, repo_root: Path) -> str:
    """The teacher's model folder: absolute, or relative to the repository root."""
    p = Path(os.path.expanduser(spec))
    if not p.is_absolute():
        p = repo_root / p
    if p.is_dir() and (p / "config.json").is_file():
        return str(p.resolve())
    raise error("E_NOT_FOUND", f"the recipe's teacher {spec!r} is not a model folder ({p})",
                "set `teacher:` to a local model folder (absolute, or relative to the repository root)")


def row_plan(plan: TrainPlan) -> dict[str, Any]:
    """What a train row records of its plan."""
    return {"recipe": plan.recipe.identity(), "source": plan.source.name,
            "source_kind": plan.source.kind, "parent": plan.parent, "boundary": plan.boundary,
            "start_step": plan.start_step, "steps": plan.steps,
            "settings": plan.recipe.settings, "init_model": plan.init_ref,
            "resume_from": plan.resume_state,
            "teacher": plan.teacher_ref, "teacher_files": plan.teacher_files,
            **({"launch": plan.launch.record()} if plan.launch else {})}

