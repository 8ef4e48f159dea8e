"""``monte train``: one chunk of ``steps_per_chunk`` steps, through TRL's trainers.

Which TRL classes, and why:

- ``sft``: ``trl.SFTTrainer`` on a prompt/completion (or conversational) dataset made from a
  frozen ``--kind sft`` Dataset; loss on the completion only.
- ``grpo``: ``trl.GRPOTrainer`` with one reward function that calls the environment's own grader
  and pays 1 only for a full score (partial credit gets gamed). ``steps_per_generation`` equals
  ``gradient_accumulation_steps`` and ``num_iterations`` is 1, so a chunk edge never falls inside
  a generation buffer (that buffer is not in a checkpoint).
- ``distillation``: ``trl.DistillationTrainer`` (on-policy: the student samples and is trained
  toward the teacher's token distribution), prompts from the environment's curriculum.

Continuation and stage boundary (the two rules of docs/adr/0002-stage-boundary.md):

- Same recipe as the parent: ``resume_from_checkpoint`` on the parent's trainer state restores
  optimizer, scheduler, RNG and data position, and the trainer's step counter continues. The
  model handed to the trainer is the *stage's* starting weights, because GRPO loads its KL
  reference from there at construction; the resume then loads the parent's weights.
- Different recipe: a weights-only warm start from the parent's servable folder; the counter
  restarts and the KL reference is the parent checkpoint.

Learning-rate schedules: a constant one (with optional warm-up) needs nothing more. A decaying
one is rebuilt from ``max_steps`` on resume, so it would jump at every chunk edge; a recipe
declares its horizon (``schedule_steps``), the trainer's ``max_steps`` is that horizon in every
chunk of the stage, and a callback saves and stops at the chunk's own end.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from monte.errors import MonteError, error
from monte.ledger import rules
from monte.ledger.experiment import Ledger
from monte.ledger.lineage import checkpoint_info, ensure_base, identify_base, servable_files
from monte.ledger.records import RunRow
from monte.ledger.store import Snapshot
from monte.models import locate
from monte.runs.folders import log_event, run_folder
from monte.runs.lifecycle import (
    CohortReads,
    adopt_row,
    experiment_name,
    push_bucket,
    read_rows,
    record_failure,
    sigterm_stops,
    stopped_message,
    transitions,
)
from monte.runs.naming import parse_run_ref
from monte.training import launch, recipes, sources
from monte.training.launch import LaunchSpec
from monte.workspace import Workspace

SMOKE_STEPS = 3


class TrainPlan(BaseModel):
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
            f"  source {self.source.kind} {self.source.name}"
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
               accelerate_config: Path | None = None, port: int | None = None) -> TrainPlan:
    """The chunk's plan, every refusal proven before anything is written; the recipe's values
    against this machine too (:func:`check_machine`), unless the chunk runs on a box (``remote``:
    the box checks them when it plans the job); the launch past one process
    (:mod:`monte.training.launch`)."""
    if processes is not None and processes < 1 or nodes < 1:  # before anything else is read
        launch.plan_launch({}, "sft", processes=processes, nodes=nodes, cuda=False)
    plan = _plan_train(ws, experiment=experiment, recipe=recipe, source=source, parent=parent,
                       from_base=from_base, model=model, smoke=smoke)
    recipes.check_chunk(plan.recipe, plan.resume_step, plan.steps)  # horizon, generation buffer
    plan.launch = launch.plan_launch(plan.recipe.settings, plan.recipe.algorithm, processes=processes, nodes=nodes,
                                     accelerate_config=accelerate_config, port=port)
    if plan.resume_from and plan.parent and plan.recipe.algorithm != "sft":
        _same_world(ws, plan)
    if not remote:
        check_machine(plan)
    if push:  # refused before any compute: no bucket, or (a real chunk) no hub repo
        from monte.storage import hub

        plan.push = True
        plan.bucket = push_bucket(ws)
        plan.hub = None if smoke else hub.require_repo(ws)
    return plan


def _plan_train(ws: Workspace, *, experiment: str | None, recipe: str, source: str, parent: str | None,
                from_base: bool, model: str | None, smoke: bool) -> TrainPlan:
    exp = experiment_name(ws, experiment)
    ledger = Ledger(ws.store, exp)
    snap = ledger.snapshot()
    meas = ledger.measurement(snap)
    rec = recipes.resolve(recipe, ws.repo_root)
    if smoke and (parent or from_base):
        raise error("E_USAGE", "a smoke chunk states neither --parent nor --from-base: it never enters the tree",
                    "drop --parent/--from-base, or drop --smoke for a real chunk")
    if not smoke and bool(parent) == bool(from_base):
        raise error("E_USAGE", "a real chunk states its starting point: --parent RUN@STEP or --from-base"
                    + (" (not both)" if parent else ""), "monte train ... --from-base  |  --parent RUN@STEP")
    # a continuation's base is its parent's cohort's (as `eval --checkpoint` reads it), unless named
    base = model or (_parent_base(ws, exp, ledger, snap, parent) if parent else None) \
        or rec.settings.get("model") or meas.model
    if not base:
        raise error("E_USAGE", f"experiment {exp} names no model and neither does recipe {rec.name}",
                    "pass --model PATH")
    where = locate.locate(ws, base)
    assert where.folder is not None
    base_id = identify_base(ws.store, exp, where.folder)
    locate.prove(ws.store, exp, where, base_id.own or base_id.weights, base_id.identities)  # another model at a recorded location: E_INTEGRITY
    files, cohort = base_id.files, base_id.cohort
    names = {where.register: str(where.folder)} if where.register else {}
    if not smoke:
        _require_baselines(CohortReads(ledger, snap, cohort), meas, seal=(ws, exp, base_id))
    src = sources.resolve(ws, source)
    sources.check_pairing(rec.algorithm, src)
    extra: dict[str, Any] = {}
    if rec.algorithm == "distillation":  # refuse a missing teacher before anything is written
        teacher = _teacher(rec.parsed().teacher, ws.repo_root)
        taught = locate.locate(ws, teacher)
        if taught.register:
            names[taught.register] = teacher
        extra = {"teacher": teacher, "teacher_ref": taught.ref, "teacher_files": servable_files(Path(teacher))}
    leak = sources.leak_check(ws, meas, src)
    steps = SMOKE_STEPS if smoke else meas.train.steps_per_chunk
    base_str = str(where.folder.resolve())
    common: dict[str, Any] = dict(experiment=exp, cohort=cohort, weights=base_id.weights, base_model=where.ref,
                                  base_folder=base_str, base_files=files, recipe=rec, source=src, leak=leak,
                                  names=names)
    if not parent:
        return TrainPlan(**common, **extra, parent=None, boundary=False, start_step=0, steps=steps, smoke=smoke,
                         init_model=base_str, stage_start=base_str, resume_from=None, resume_step=0)
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
        stage_ref, stage_path = _stage_start(ws, exp, ledger, snap, info.get("stage_start"), base_str)
        return TrainPlan(**common, **extra, parent={"run": ck.run, "step": ck.step}, boundary=False,
                         start_step=ck.step, steps=steps, smoke=False, init_model=stage_path,
                         stage_start=stage_path, init_ref=stage_ref, stage_ref=stage_ref, resume_from=str(state),
                         resume_state=str(info["trainer_state"]),
                         resume_step=int(info.get("trainer_step", 0)))
    return TrainPlan(**common, parent={"run": ck.run, "step": ck.step}, boundary=True, start_step=ck.step,
                     steps=steps, smoke=False, init_model=weights, stage_start=weights, init_ref=ck.ref,
                     stage_ref=ck.ref, resume_from=None, resume_step=0)


def _same_world(ws: Workspace, plan: TrainPlan) -> None:
    """A sampling trainer (GRPO, distillation) continues only on its parent's world size: the
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
                 base: str) -> tuple[str, str]:
    """A continuation's KL reference as its parent's lineage commit names it: ``base`` (this
    machine's base model, of the parent's cohort) or ``RUN@STEP`` (that checkpoint, every file
    proven against its own lineage commit). An older record's folder is read as what it was: an
    absolute one was the base model's, a data-root one a checkpoint's."""
    stage = str(stage or "base")
    if stage == "base" or os.path.isabs(stage):
        return "base", base
    legacy = _LEGACY_STAGE.fullmatch(stage)
    run, step = (legacy.group(1), int(legacy.group(2))) if legacy else parse_run_ref(stage, exp)[1:]
    if step is None:
        raise error("E_INTEGRITY", f"a lineage commit names the stage start {stage!r}", "run `monte ledger verify`")
    ck = _checkpoint(ledger, snap, run, step)
    return ck.ref, str(ws.data_root / checkpoint_info(ws.store, ws.data_root, ck)["weights"])


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
                                "spans the repository: the same test content, eval settings and base weights)",
                                rules.NEW_COHORT_FIX)
        for split in ("dev", "test"):
            if split in x.splits and reads.baseline(exam, split) is None:
                missing.append(f"{exam}/{split}@0")
    if missing:
        raise error("E_NO_BASELINE", f"cohort {cohort} has no baseline for {', '.join(missing)}; training is "
                    "refused until every exam has its baseline",
                    "evaluate the base model first: `monte eval` (dev) and `monte eval --split test`")


# --- running -------------------------------------------------------------------------------------


class TrainResult(BaseModel):
    experiment: str
    run: dict[str, Any]


def run_train(ws: Workspace, plan: TrainPlan, *, on_progress: Callable[[int, int], None] | None = None,
              on_transition: Callable[[RunRow, str], None] | None = None) -> TrainResult:
    """Train the chunk and record it. ``on_transition(row, transition)`` is called right after
    each transition lands (started, weights-uploaded, checkpoint, finished); with ``plan.push``
    and none given, a :class:`monte.runs.Pusher` uploads the results then. A real ``--push``
    chunk uploads its checkpoint to the hub before the lineage commit, which records the revision.
    A failed upload keeps the local checkpoint and the run; the command then refuses E_STORAGE."""
    from monte.storage import hub
    from monte.training.record import finish_chunk, save_checkpoint, start_chunk

    rank = process_rank()
    if rank != 0:
        # One of several processes under `accelerate launch` (a multi-GPU box): it trains its
        # share and records nothing; the main process owns the row, the checkpoint and pushes.
        if not plan.adopt:
            raise error("E_USAGE", "a multi-process chunk runs only as a submitted job (--remote)",
                        "run the chunk in one process, or submit it with --remote")
        train_chunk(ws, plan, run_folder(ws, plan.experiment, plan.adopt) / "trainer", plan.adopt, None)
        return TrainResult(experiment=plan.experiment, run={"run": plan.adopt, "rank": rank})
    transition, pusher = transitions(ws, plan.experiment, plan.push, on_transition)
    preflight_train(plan)  # everything the chunk needs, proven before its row is started
    if plan.hub and not plan.smoke:
        hub.ensure_repo(plan.hub)  # a token that cannot write refuses before any compute
    hub_failures: list[MonteError] = []
    for name, named in sorted(plan.names.items()):  # the names the record gives folders outside the repository
        locate.remember(ws, name, named)
    ensure_base(ws.store, plan.experiment, plan.base_model, plan.base_files, cohort=plan.cohort,
                weights=plan.weights or None, folder=Path(plan.base_folder) if plan.base_folder else None)
    if plan.adopt:  # on a box: the row the laptop started for this job (--remote)
        row = adopt_row(Ledger(ws.store, plan.experiment), plan.adopt, kind="train", check=lambda r: (
            r.plan.get("recipe") == plan.recipe.identity() and r.plan.get("source") == plan.source.name
            and r.plan.get("parent") == plan.parent and r.smoke == plan.smoke
            and int(r.plan.get("start_step", -1)) == plan.start_step))
        log_event(ws, plan.experiment, row.run, "running", host=row.host)
    else:
        row = start_chunk(ws, plan.experiment, cohort=plan.cohort, base_model=plan.base_model,
                          smoke=plan.smoke, plan=row_plan(plan))
    transition(row, "started")
    with sigterm_stops():
        folder = run_folder(ws, plan.experiment, row.run)
        try:
            if plan.launch and (plan.launch.world_size > 1 or plan.launch.config):  # the ranks train it
                trainer_dir, trainer_step = train_ranks(ws, plan, folder / "trainer", row.run)
            else:
                trainer_dir, trainer_step = train_chunk(ws, plan, folder / "trainer", row.run, on_progress)
            if not plan.smoke:
                upload = (_hub_upload(ws, plan, row, transition, hub_failures)
                          if plan.hub else None)
                row = save_checkpoint(ws, plan.experiment, row, plan.start_step + plan.steps, trainer_dir, extra={
                    "trainer_state": str(trainer_dir.relative_to(ws.data_root)), "trainer_step": trainer_step,
                    "stage_start": plan.stage_ref}, before_commit=upload)
                transition(row, "checkpoint")
        except BaseException as exc:
            record_failure(ws, plan.experiment, row, exc, transition=transition,
                           finish=lambda reason: finish_chunk(ws, plan.experiment, row, "failed", error_text=reason),
                           event="error")  # finish_chunk logs the "failed" event itself
            if isinstance(exc, MonteError) and exc.code == "E_STOPPED":
                raise stopped_message(Ledger(ws.store, plan.experiment), row.run) from None
            raise
    done = finish_chunk(ws, plan.experiment, row, "succeeded")
    transition(done, "finished")
    _refuse_unfinished_uploads(done, hub_failures, pusher)
    return TrainResult(experiment=plan.experiment, run=done.model_dump(mode="json"))


def check_machine(plan: TrainPlan) -> None:
    """Refuse (before any record) a recipe whose machine-dependent settings cannot run here:
    ``deepspeed`` (a JSON config, and the package), ``fsdp`` (CUDA GPUs), more dataloader
    workers than CPUs, and then TRL's own config built exactly as the chunk will build it."""
    import importlib.util
    import tempfile

    import torch

    rec, s = plan.recipe, plan.recipe.settings
    cuda = torch.cuda.is_available()
    ds = s.get("deepspeed")
    if ds is not None:
        if isinstance(ds, str):
            try:
                ok = isinstance(json.loads(Path(os.path.expanduser(ds)).read_text(encoding="utf-8")), dict)
            except (OSError, ValueError):
                ok = False
            if not ok:
                raise error("E_BAD_INPUT", f"recipe {rec.name}: 'deepspeed': {ds!r} is not a readable DeepSpeed "
                            "JSON config (a file holding one JSON object)",
                            "point deepspeed at a DeepSpeed config file, give the config inline as a mapping, "
                            "or remove the key")
        if importlib.util.find_spec("deepspeed") is None:
            raise error("E_PREFLIGHT", f"recipe {rec.name} sets deepspeed, and this machine has no deepspeed "
                        "package; nothing was started", "`pip install deepspeed` where the chunk trains (a GPU "
                        "box: --remote), or remove deepspeed from the recipe")
    fsdp = s.get("fsdp")
    if fsdp not in (None, False, "", []) and not cuda:
        raise error("E_PREFLIGHT", f"recipe {rec.name} sets fsdp: {fsdp!r}, which shards the model over CUDA "
                    "GPUs, and this machine has none; nothing was started",
                    "train on a GPU box (--remote), or remove fsdp (and fsdp_config) from the recipe")
    workers, cpus = s.get("dataloader_num_workers"), os.cpu_count() or 1
    if isinstance(workers, int) and workers > cpus:
        raise error("E_PREFLIGHT", f"recipe {rec.name} sets dataloader_num_workers: {workers}, and this machine "
                    f"has {cpus} CPUs; nothing was started",
                    f"set dataloader_num_workers to at most {cpus} (0: load in the trainer's process)")
    import warnings

    with tempfile.TemporaryDirectory(prefix="monte-preflight-") as tmp, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        args = trainer_args(rec, out=Path(tmp) / "trainer", end=plan.resume_step + plan.steps, smoke=plan.smoke,
                            cuda=cuda)
        if rec.algorithm == "grpo":
            args = {"steps_per_generation": args.get("gradient_accumulation_steps", 1), "num_iterations": 1, **args}
        try:
            recipes.trl_config_class(rec.algorithm)(**args)
        except Exception as e:  # noqa: BLE001 (whatever TRL refuses here refuses before the row)
            raise error("E_PREFLIGHT", f"recipe {rec.name}: trl.{recipes.TRL_CONFIG[rec.algorithm]} refuses these "
                        f"settings on this machine ({'CUDA' if cuda else 'no GPU'}): {type(e).__name__}: {e}; "
                        "nothing was started", "fix or remove the setting it names, or train where it can run "
                        "(--remote)") from None


def preflight_train(plan: TrainPlan) -> None:
    """Everything a chunk needs, before its ``started`` record: the recipe's values on this
    machine, and the tokenizer of the weights it starts from, loaded, with one row of its source
    tokenized. A refusal here records nothing."""
    check_machine(plan)
    try:
        with open(plan.source.rows, encoding="utf-8") as f:
            first = f.readline()[:4096]
    except OSError as e:
        raise error("E_NOT_FOUND", f"the source's rows {plan.source.rows} cannot be read ({e.strerror}); nothing "
                    "was started", "restore them with `monte env install` / `monte dataset show`") from None
    try:
        from transformers import AutoTokenizer

        AutoTokenizer.from_pretrained(plan.init_model)(first)
    except ModuleNotFoundError:
        raise  # a missing extra: refused with its pip line (monte.extras)
    except Exception as e:  # noqa: BLE001 (a broken tokenizer.json raises tokenizers' bare Exception)
        raise error("E_NOT_FOUND", f"{plan.init_model} is not a loadable model folder (its tokenizer: "
                    f"{type(e).__name__}: {e}); nothing was started",
                    "pass a folder saved with save_pretrained (or `monte model init DIR`)") from None


def _refuse_unfinished_uploads(done: RunRow, hub_failures: list[MonteError], pusher: Any) -> None:
    """The run is recorded; refuse (E_STORAGE) if its weights missed the hub or its final push
    missed the bucket, saying what still stands and what retries."""
    problems = list(hub_failures)
    if pusher is not None:
        try:
            pusher.check()
        except MonteError as e:
            problems.append(e)
    if len(problems) == 1:
        raise problems[0]
    if problems:
        raise error("E_STORAGE", "; and ".join(p.message for p in problems), "; ".join(p.fix for p in problems if p.fix))


def _hub_upload(ws: Workspace, plan: TrainPlan, row: RunRow, transition: Callable[[RunRow, str], None],
                failures: list[MonteError]) -> Callable[[Path, dict[str, str], Any], dict[str, Any]]:
    """``before_commit`` for a real --push chunk: the checkpoint's servable files and a model card
    go to a hub branch of their own (``<exp>--<run>--step<N>``); the lineage commit then records
    ``hub: {repo, branch, revision, ledger_commit}``. A failed upload is logged and remembered,
    the checkpoint is recorded without a hub copy, and the run goes on."""
    from monte.ledger.refs import ledger_ref
    from monte.storage import hub

    assert plan.hub is not None
    repo = plan.hub

    def upload(folder: Path, files: dict[str, str], parent_commit: Any) -> dict[str, Any]:
        step = plan.start_step + plan.steps
        ref = f"{row.run}@{step}"
        tip = ws.store.tip(ledger_ref(plan.experiment))
        ledger_commit = tip.decode() if tip is not None else ""
        branch = hub.branch_name(plan.experiment, row.run, step)
        card = _model_card(ws, plan, row, step, files, ledger_commit, parent_commit.decode())
        try:
            oid = hub.upload_checkpoint(repo, branch, folder, sorted(files), card,
                                        f"monte: {plan.experiment} checkpoint {ref}")
        except MonteError as e:
            log_event(ws, plan.experiment, row.run, "weights-upload-failed", step=step, repo=repo, branch=branch,
                      code=e.code, message=e.message)
            failures.append(error(
                "E_STORAGE", f"run {row.run} finished and checkpoint {ref} is recorded, but its weights did not "
                f"reach the hub: {e.message}",
                f"{e.fix}; the checkpoint is kept on this data root ({folder}) and serves `monte eval` and "
                f"`monte promote` here"))
            return {}
        log_event(ws, plan.experiment, row.run, "weights-uploaded", step=step, repo=repo, branch=branch,
                  revision=oid)
        transition(row, "weights-uploaded")
        return {"hub": {"repo": repo, "branch": branch, "revision": oid, "ledger_commit": ledger_commit}}

    return upload


def _model_card(ws: Workspace, plan: TrainPlan, row: RunRow, step: int, files: dict[str, str],
                ledger_commit: str, parent_commit: str) -> str:
    """The hub revision's README.md: the same model card ``monte promote`` writes
    (:mod:`monte.training.card`), as it stands when the checkpoint is made (no read of it yet)."""
    from monte.ledger.refs import ledger_ref, lineage_ref
    from monte.training import card

    ledger = Ledger(ws.store, plan.experiment)
    rows = read_rows(ledger)
    hops: list[dict[str, Any]] = []
    if plan.parent:
        cks = rules.checkpoints(rows)
        parent = next((c for c in cks if c.run == plan.parent["run"] and c.step == int(plan.parent["step"])), None)
        hops = card.hops_for(rows, cks, parent) if parent else []
    r = plan.recipe.identity()
    hops.append({"run": row.run, "recipe": r["name"], "recipe_sha256": r["sha256"], "algorithm": r["algorithm"],
                 "source": plan.source.name, "start": plan.start_step, "end": step, "boundary": plan.boundary,
                 "parent": f"{plan.parent['run']}@{plan.parent['step']}" if plan.parent else None})
    story = card.Story(
        experiment=plan.experiment, ref=f"{row.run}@{step}", cohort=plan.cohort, base_model=plan.base_model,
        lineage=card.lineage_line(hops), ledger_commit=ledger_commit, ledger_ref=ledger_ref(plan.experiment),
        lineage_commit="", files=files, hops=hops, meas=ledger.measurement(),
        reads=card.baseline_reads(rows, plan.cohort),
        notes=[f"- parent lineage commit: `{parent_commit}`; this checkpoint's lineage commit is the next one on "
               f"`{lineage_ref(plan.experiment, row.run)}`, and its `checkpoint.json` names this revision "
               "(`monte promote RUN@STEP --from-hub` proves every file against it before anything lands)"])
    return card.render(story)


def process_rank() -> int:
    """This process's rank under ``accelerate launch`` / torchrun (0 when alone)."""
    try:
        return int(os.environ.get("RANK", "0"))
    except ValueError:
        return 0


def launch_command(python: str, args: list[str], gpus: int) -> list[str]:
    """How a box runs ``monte train ARGS``: one process, or with several GPUs ``--processes``
    one per GPU: that one monte process records, and starts the ranks under ``accelerate
    launch --multi_gpu`` (TRL's supported multi-GPU path; :mod:`monte.training.launch`)."""
    if gpus <= 1:
        return [python, "-m", "monte", "train", *args]
    return [python, "-m", "monte", "train", *args, "--processes", str(gpus)]


def train_ranks(ws: Workspace, plan: TrainPlan, out: Path, run: str) -> tuple[Path, int]:
    """The chunk on ``plan.launch``'s ranks (:func:`monte.training.launch.run_ranks`): each rank
    runs :func:`train_chunk`; this process records. Returns (trainer checkpoint, step)."""
    assert plan.launch is not None
    job = {"repo_root": str(ws.repo_root), "plan": plan.model_dump(mode="json"), "run": run, "out": str(out)}
    done = launch.run_ranks(plan.launch, job, run_folder(ws, plan.experiment, run) / launch.LAUNCH_DIR,
                            cwd=ws.repo_root)
    log_event(ws, plan.experiment, run, "ranks-finished", world_size=plan.launch.world_size, step=done.step)
    return Path(done.checkpoint), done.step


def row_plan(plan: TrainPlan) -> dict[str, Any]:
    """What a train row records of its plan."""
    return {"recipe": plan.recipe.identity(), "source": plan.source.name,
            "source_kind": plan.source.kind, "parent": plan.parent, "boundary": plan.boundary,
            "start_step": plan.start_step, "steps": plan.steps,
            "settings": plan.recipe.settings, "init_model": plan.init_ref,
            "resume_from": plan.resume_state,
            "teacher": plan.teacher_ref, "teacher_files": plan.teacher_files,
            **({"launch": plan.launch.record()} if plan.launch else {})}


def train_chunk(ws: Workspace, plan: TrainPlan, out: Path, run: str,
                on_progress: Callable[[int, int], None] | None) -> tuple[Path, int]:
    """Build the TRL trainer for the recipe and run the chunk (in this process, or as one rank of
    a launch: :mod:`monte.training.launch_rank`). Returns (trainer checkpoint, step)."""
    import torch
    from transformers import AutoTokenizer, TrainerCallback
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    hf_logging.set_verbosity_error()
    import datasets

    datasets.disable_progress_bars()
    r = plan.recipe.parsed()
    max_steps = plan.resume_step + plan.steps  # where this chunk ends, on the trainer's counter
    cuda = torch.cuda.is_available()
    common = trainer_args(plan.recipe, out=out, end=max_steps, smoke=plan.smoke, cuda=cuda)
    if plan.launch:
        common.update(plan.launch.trainer_overrides())  # each rank's share of the recipe's batch
    tok = AutoTokenizer.from_pretrained(plan.init_model)
    rows = [json.loads(line) for line in open(plan.source.rows, encoding="utf-8")]

    class Progress(TrainerCallback):  # type: ignore[misc]
        def on_step_end(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
            if on_progress:
                on_progress(state.global_step - plan.resume_step, plan.steps)

        def on_log(self, args: Any, state: Any, control: Any, logs: Any = None, **kw: Any) -> None:
            if logs and state.is_world_process_zero:
                log_event(ws, plan.experiment, run, "log", step=plan.start_step + state.global_step - plan.resume_step,
                          **{k: v for k, v in logs.items() if isinstance(v, int | float)})

    class StopAt(TrainerCallback):  # type: ignore[misc]
        """Ends the chunk at its last step, saving there, whatever the schedule's horizon."""

        def on_step_end(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
            if state.global_step >= max_steps:
                control.should_save = args.save_strategy != "no"
                control.should_training_stop = True

    import warnings

    warnings.filterwarnings("ignore", category=FutureWarning, module="transformers")
    from transformers.trainer_callback import PrinterCallback, ProgressCallback

    with ExitStack() as cleanup:  # a NeMo Gym reward server lives exactly as long as the training
        reward = _reward(plan, r.reward_threshold, rows, cleanup, config=ws.config,
                         log=run_folder(ws, plan.experiment, run) / "gym-server.log") if plan.recipe.algorithm == "grpo" else None
        trainer = _build(plan, r, common, tok, rows, [Progress(), StopAt()], reward)
        for cb in (PrinterCallback, ProgressCallback):  # monte logs events itself; stdout stays monte's
            trainer.remove_callback(cb)
        trainer.train(resume_from_checkpoint=plan.resume_from)
    ckpt = out / f"checkpoint-{max_steps}"
    if process_rank() != 0:
        return ckpt, max_steps  # the main process saved it and records it
    if not plan.smoke and not ckpt.is_dir():
        raise error("E_INTERNAL", f"the trainer did not save {ckpt}", "report this with `monte logs RUN`")
    if not plan.smoke:
        tok.save_pretrained(str(ckpt))  # a servable folder carries its tokenizer
        from monte.models.publish import strip_local_flags

        strip_local_flags(ckpt)  # ... and no flag that only means something on this machine
    return ckpt, max_steps


def trainer_args(rec: recipes.ResolvedRecipe, *, out: Path, end: int, smoke: bool, cuda: bool) -> dict[str, Any]:
    """The TRL config's arguments: monte's defaults (CPU-safe, one log per step), then every TRL
    field the recipe sets, then what monte owns (where the files go, one save at the chunk's end,
    no reporting). With ``schedule_steps`` the trainer is built for the whole horizon, so the
    scheduler is the same object every chunk, and :class:`_StopAt` ends the chunk at ``end``."""
    settings = rec.trl_settings()
    args: dict[str, Any] = dict(seed=0, data_seed=settings.get("seed", 0), use_cpu=not cuda, bf16=False,
                                logging_steps=1, disable_tqdm=True, dataloader_num_workers=0)
    if "gradient_checkpointing" not in settings:  # its old name: setting both is refused by transformers
        args["activation_checkpointing"] = False
    args.update(settings)
    horizon = rec.settings.get("schedule_steps")
    args.update(output_dir=str(out), max_steps=int(horizon) if horizon else end, report_to=[],
                save_strategy="no" if smoke else "steps", save_steps=end, save_only_model=False)
    return args


def _build(plan: TrainPlan, r: Any, common: dict[str, Any], tok: Any, rows: list[dict[str, Any]],
           callbacks: list[Any], reward: Callable[..., list[float | None]] | None = None) -> Any:
    from datasets import Dataset

    algo = plan.recipe.algorithm
    if algo == "sft":
        from trl import SFTConfig, SFTTrainer

        cols = plan.source.columns or {}
        if "messages" in cols:
            data = Dataset.from_list([{"messages": row["messages"]} for row in rows])
        else:
            data = Dataset.from_list([{"prompt": str(row[cols["input"]]), "completion": str(row[cols["output"]])}
                                      for row in rows])
        sft_cfg = SFTConfig(**common)
        return SFTTrainer(model=plan.init_model, args=sft_cfg, train_dataset=data, processing_class=tok,
                          callbacks=callbacks)
    from monte.envs.grading import prompt_of, task_id

    # a NeMo Gym row's prompt is its chat (TRL renders it with the chat template); its id, its place
    prompts = Dataset.from_list([{"prompt": prompt_of(row), "answer": str(row.get("answer", "")),
                                  "metadata": json.dumps(row.get("metadata", {}), sort_keys=True),
                                  "item_id": task_id(row, "curriculum", k)} for k, row in enumerate(rows)])
    if algo == "grpo":
        from trl import GRPOConfig, GRPOTrainer

        # one generation buffer per optimizer step unless the recipe says otherwise (check_chunk
        # then keeps a chunk edge off a buffer's middle)
        grpo_cfg = GRPOConfig(**{"steps_per_generation": r.gradient_accumulation_steps, "num_iterations": 1,
                                 **common})
        assert reward is not None
        return GRPOTrainer(model=plan.init_model, reward_funcs=reward, args=grpo_cfg,
                           train_dataset=prompts, processing_class=tok, callbacks=callbacks)
    from trl import DistillationConfig, DistillationTrainer

    distill_cfg = DistillationConfig(**common)
    return DistillationTrainer(model=plan.init_model, teacher_model=plan.teacher or r.teacher, args=distill_cfg,
                               train_dataset=prompts.select_columns(["prompt"]), processing_class=tok,
                               callbacks=callbacks)


def _reward(plan: TrainPlan, threshold: float, rows: list[dict[str, Any]], cleanup: ExitStack, *,
            config: dict[str, Any], log: Path) -> Callable[..., list[float | None]]:
    """The environment's own grader as the reward: 1 for a full score, else 0. A NeMo Gym
    curriculum's grader is its resources server, started here and stopped by ``cleanup``."""
    from monte.envs import grading
    from monte.envs.registry import get

    if grading.is_gym(plan.source.grader):
        identity = (plan.source.grader or {}).get("curriculum")
        if not isinstance(identity, dict):
            raise error("E_INTEGRITY", f"environment {plan.source.name!r} names no NeMo Gym server for its curriculum",
                        "re-freeze it with `monte env add --server`")
        gym = grading.Reward(identity, {grading.task_id(row, "curriculum", k): row for k, row in enumerate(rows)},
                             threshold, config=config, log=log)
        cleanup.callback(gym.close)
        return gym

    bench = get(plan.source.benchmark or "").benchmark

    def grader_reward(prompts: list[Any], completions: list[Any], answer: list[str], metadata: list[str],
                      item_id: list[str], **_: Any) -> list[float | None]:
        out: list[float | None] = []
        for p, c, a, m, i in zip(prompts, completions, answer, metadata, item_id, strict=True):
            text = c if isinstance(c, str) else (c[-1]["content"] if c else "")
            item = {"id": i, "prompt": p, "answer": a, "metadata": json.loads(m)}
            out.append(1.0 if bench.grade(item, text) >= threshold else 0.0)
        return out

    grader_reward.__name__ = f"grader_{plan.source.benchmark}"
    return grader_reward


def _teacher(spec: str, repo_root: Path) -> str:
    """The teacher's model folder: absolute, or relative to the repository root."""
    p = Path(os.path.expanduser(spec))
    if not p.is_absolute():
        p = repo_root / p
    if p.is_dir() and (p / "config.json").is_file():
        return str(p.resolve())
    raise error("E_NOT_FOUND", f"the recipe's teacher {spec!r} is not a model folder ({p})",
                "set `teacher:` to a local model folder (absolute, or relative to the repository root)")
