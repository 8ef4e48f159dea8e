"""``monte train``'s run: the chunk trained (in this process, or on a launch's ranks:
:mod:`monte.training.launch`) and recorded (started -> checkpoint -> finished), a real ``--push``
chunk's weights uploaded to the hub before the lineage commit that records the revision.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from monte.errors import MonteError, error
from monte.ledger import rules
from monte.ledger.experiment import Ledger
from monte.ledger.lineage import ensure_base
from monte.ledger.records import RunRow
from monte.models import locate, private
from monte.result_type import Result
from monte.runs.folders import log_event
from monte.runs.lifecycle import (
    Transition,
    adopt_row,
    read_rows,
    running,
    transitions,
)
from monte.training import launch, recipes, sources
from monte.training.plan import TrainPlan, row_plan
from monte.training.preflight import preflight_train
from monte.training.trainers import build, trainer_args
from monte.training.trainers.grpo import reward as reward_function
from monte.workspace import Workspace


@dataclass(frozen=True)
class TrainResult(Result):
    """``monte train``: the chunk's row as it finished (``row.json``'s dict; on a box that adopted
    a submitted row, its id and rank) and its loss curve."""

    experiment: str
    run: dict[str, Any]
    #: the chunk's loss curve in a few numbers (:func:`monte.runs.curve.summary`), None where it
    #: logged no loss (a smoke chunk, a launch whose ranks log elsewhere)
    curve: dict[str, Any] | None = None


def run_train(ws: Workspace, plan: TrainPlan, *, on_progress: Callable[[int, int], None] | None = None,
              on_transition: Transition | None = None,
              nodes: launch.NodeRunner | None = None) -> TrainResult:
    """Train the chunk and record it. ``on_transition(row, transition)`` is called right after
    each transition lands (started, weights-uploaded, checkpoint, finished); with ``plan.push``
    and none given, a :class:`monte.runs.Pusher` uploads the results then. A real ``--push``
    chunk uploads its checkpoint to the hub before the lineage commit, which records the revision.
    A failed upload keeps the local checkpoint and the run; the command then refuses E_STORAGE."""
    rank = process_rank()
    if rank != 0:
        # One of several processes under `accelerate launch` (a multi-GPU box): it trains its
        # share and records nothing; the main process owns the row, the checkpoint and pushes.
        if not plan.adopt:
            raise error("E_USAGE", "a multi-process chunk runs only as a submitted job (--remote)",
                        "run the chunk in one process, or submit it with --remote")
        adopted = plan.adopt
        plan, copies = private_weights(ws, plan)  # each rank loads the bytes it proved itself
        try:
            train_chunk(ws, plan, ws.run_folder(plan.experiment, adopted) / "trainer", adopted, None)
        finally:
            private.remove(copies)
        return TrainResult(experiment=plan.experiment, run={"run": adopted, "rank": rank})
    transition, pusher = transitions(ws, plan.experiment, plan.push, on_transition)
    preflight_train(plan)  # everything the chunk needs, proven before its row is started
    from monte.frozen import sweep_staging

    sweep_staging(ws)  # the private copies killed chunks and evals left (their owners are gone)
    # the bytes proven are the bytes trained on: private copies, hashed as they are read, before
    # `started` (a swapped parent refuses here); this process and every rank load them
    plan, copies = private_weights(ws, plan)
    try:
        return _run_train(ws, plan, transition, pusher, on_progress, nodes)
    finally:
        private.remove(copies)


def private_weights(ws: Workspace, plan: TrainPlan) -> tuple[TrainPlan, list[Path]]:
    """Private copies of the folders the chunk loads weights from (its initial model, the parent's
    trainer state it resumes, a distillation teacher), each file hashed in the one read that
    copies it and compared with the digest the plan proved (``E_INTEGRITY`` otherwise, before the
    ``started`` record). The plan returned names the copies; the ranks of a launch get it. A smoke
    chunk (never evidence) and a plan without proven files (an older monte's) load by path."""
    if plan.smoke or not plan.init_files:
        return plan, []
    copies: list[Path] = []
    try:
        label = plan.init_ref if plan.init_ref != "base" else f"the base model {plan.base_model}"
        init = private.private_copy(ws, Path(plan.init_model), plan.init_files, label)
        copies.append(init)
        update: dict[str, Any] = {"init_model": str(init)}
        if plan.stage_start == plan.init_model:
            update["stage_start"] = str(init)
        if plan.resume_from and plan.resume_files:
            parent = plan.parent or {}
            state = private.private_copy(ws, Path(plan.resume_from), plan.resume_files,
                                         f"the trainer state of {parent.get('run')}@{parent.get('step')}", rest=True)
            copies.append(state)
            update["resume_from"] = str(state)
        if plan.teacher and plan.teacher_files:
            teacher = private.private_copy(ws, Path(plan.teacher), plan.teacher_files,
                                           f"the teacher {plan.teacher_ref or plan.teacher}")
            copies.append(teacher)
            update["teacher"] = str(teacher)
    except BaseException:
        private.remove(copies)
        raise
    return plan.model_copy(update=update), copies


def _run_train(ws: Workspace, plan: TrainPlan, transition: Transition, pusher: Any,
               on_progress: Callable[[int, int], None] | None,
               nodes: launch.NodeRunner | None) -> TrainResult:
    from monte.storage import hub
    from monte.training.record import finish_chunk, save_checkpoint, start_chunk

    if plan.hub and not plan.smoke:
        hub.ensure_repo(plan.hub)  # a token that cannot write refuses before any compute
    hub_failures: list[MonteError] = []
    for name, named in sorted(plan.names.items()):  # the names the record gives folders outside the repository
        locate.remember(ws, name, named)
    ensure_base(ws.store, plan.experiment, plan.base_model, plan.base_files, cohort=plan.cohort,
                weights=plan.weights or None, folder=Path(plan.base_folder) if plan.base_folder else None)

    def start() -> RunRow:
        if plan.adopt:  # on a box: the row the laptop started for this job (--remote)
            row = adopt_row(Ledger(ws.store, plan.experiment), plan.adopt, kind="train", check=lambda r: (
                r.plan.get("recipe") == plan.recipe.identity() and r.plan.get("source") == plan.source.name
                and r.plan.get("parent") == plan.parent and r.smoke == plan.smoke
                and int(r.plan.get("start_step", -1)) == plan.start_step))
            log_event(ws, plan.experiment, row.run, "running", host=row.host)
            return row
        return start_chunk(ws, plan.experiment, cohort=plan.cohort, base_model=plan.base_model,
                           smoke=plan.smoke, plan=row_plan(plan))

    with running(ws, plan.experiment, start, transition=transition, event="error",  # finish_chunk logs "failed"
                 fail=lambda row, reason: finish_chunk(ws, plan.experiment, row, "failed", error_text=reason)) as run:
        row = run.row
        folder = ws.run_folder(plan.experiment, row.run)
        if plan.launch and (plan.launch.world_size > 1 or plan.launch.config):  # the ranks train it
            trainer_dir, trainer_step = train_ranks(ws, plan, folder / "trainer", row.run, nodes)
        else:
            trainer_dir, trainer_step = train_chunk(ws, plan, folder / "trainer", row.run, on_progress)
        if not plan.smoke:
            upload = (_hub_upload(ws, plan, row, transition, hub_failures)
                      if plan.hub else None)
            run.moved(save_checkpoint(ws, plan.experiment, row, plan.start_step + plan.steps, trainer_dir, extra={
                "trainer_state": str(trainer_dir.relative_to(ws.data_root)), "trainer_step": trainer_step,
                "stage_start": plan.stage_ref}, before_commit=upload), "checkpoint")
        done = run.finish(lambda row: finish_chunk(ws, plan.experiment, row, "succeeded"))
    _refuse_unfinished_uploads(done, hub_failures, pusher)
    return TrainResult(experiment=plan.experiment, run=done.model_dump(mode="json"), curve=_curve(ws, plan, done.run))


def _curve(ws: Workspace, plan: TrainPlan, run: str) -> dict[str, Any] | None:
    from monte.runs.curve import read_events, summary

    try:
        curve = summary(read_events(ws.run_folder(plan.experiment, run) / "events.jsonl"))
    except OSError:  # the run is recorded; a curve it cannot read is only not shown
        return None
    if curve is not None and not plan.smoke:
        curve.update(path_samples(ws, plan))
    return curve


def path_samples(ws: Workspace, plan: TrainPlan) -> dict[str, Any]:
    """The samples the new checkpoint's weights have seen since the base: this chunk's and each
    chunk's up its path (effective batch x steps, from the rows' plans), the batch of each,
    oldest first, and the epochs of each source along it (:func:`path_epochs`). A step is not a
    sample count once the batch size changes between stages: this sum is. ``path_samples`` is
    None where an ancestor's row or batch cannot be read here."""
    from monte.ledger.experiment import Ledger

    unknown: dict[str, Any] = {"path_samples": None, "path_batches": None, "path_epochs": None}
    ledger = Ledger(ws.store, plan.experiment)
    chunks = [path_chunk(int(plan.launch.effective_batch) if plan.launch is not None else 0, plan.steps,
                     plan.recipe.algorithm, plan.recipe.settings, plan.source.name, plan.source.kind)]
    parent, seen = plan.parent, set()
    while parent and parent.get("run") not in seen:
        seen.add(parent.get("run"))
        row = ledger.row(str(parent.get("run")))
        launch = (row.plan.get("launch") or {}) if row is not None else {}
        if row is None or not launch.get("effective_batch") or not row.plan.get("steps"):
            return unknown
        chunks.append(path_chunk(int(launch["effective_batch"]), int(row.plan["steps"]),
                             (row.plan.get("recipe") or {}).get("algorithm"), row.plan.get("settings") or {},
                             row.plan.get("source"), row.plan.get("source_kind")))
        parent = row.plan.get("parent")
    if not all(c["batch"] for c in chunks):
        return unknown
    chunks.reverse()  # oldest first
    return {"path_samples": sum(c["batch"] * c["steps"] for c in chunks),
            "path_batches": [c["batch"] for c in chunks],
            "path_epochs": path_epochs(chunks, lambda name, kind: sources.row_count(ws, name, kind))}


def path_chunk(batch: int, steps: int, algorithm: Any, settings: dict[str, Any], source: Any, kind: Any) -> dict[str, Any]:
    """One chunk of a path, as :func:`path_epochs` reads it. ``per_row``: the samples one row of
    the source gives: a grpo or rloo batch counts completions, ``num_generations`` per prompt;
    None where rows and samples do not map (an sft recipe that packs rows into sequences)."""
    per_row: int | None = 1
    if algorithm in recipes.GENERATING:
        per_row = int(settings.get("num_generations") or 0) or None
    elif settings.get("packing"):
        per_row = None
    return {"batch": batch, "steps": steps, "source": source, "kind": kind, "per_row": per_row}


def path_epochs(chunks: list[dict[str, Any]], count: Callable[[str, str], int | None]) -> list[dict[str, Any]]:
    """Epochs of each source along a path (``chunks`` oldest first, from :func:`path_chunk`), in the
    order the path first trains on them: ``seen`` rows drawn (a dataset's samples; an
    environment's prompts, a grpo or rloo batch's completions over ``num_generations``) summed
    over the chunks on that source, over ``rows`` (its rows, or curriculum items), whatever batch
    each stage had. TRL's ``epoch`` restarts at a stage boundary; this does not. ``epochs`` is
    None where the source is not on this data root or a chunk's rows do not map to its samples."""
    out: dict[str, dict[str, Any]] = {}
    for c in chunks:
        name = str(c["source"])
        if name not in out:
            rows = count(name, str(c["kind"])) if c["kind"] else None
            out[name] = {"source": name, "kind": c["kind"], "seen": 0, "rows": rows}
        e = out[name]
        drawn = c["batch"] * c["steps"] // c["per_row"] if c["per_row"] else None
        e["seen"] = e["seen"] + drawn if e["seen"] is not None and drawn is not None else None
    for e in out.values():
        e["epochs"] = round(e["seen"] / e["rows"], 4) if e["seen"] is not None and e["rows"] else None
    return list(out.values())


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


def _hub_upload(ws: Workspace, plan: TrainPlan, row: RunRow, transition: Transition,
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


def train_ranks(ws: Workspace, plan: TrainPlan, out: Path, run: str,
                nodes: launch.NodeRunner | None = None) -> tuple[Path, int]:
    """The chunk on ``plan.launch``'s ranks (:func:`monte.training.launch.run_ranks`): each rank
    runs :func:`train_chunk`; this process records. Returns (trainer checkpoint, step)."""
    assert plan.launch is not None
    job = {"repo_root": str(ws.repo_root), "plan": plan.model_dump(mode="json"), "run": run, "out": str(out)}
    done = launch.run_ranks(plan.launch, job, ws.run_folder(plan.experiment, run) / launch.LAUNCH_DIR,
                            cwd=ws.repo_root, nodes=nodes)
    log_event(ws, plan.experiment, run, "ranks-finished", world_size=plan.launch.world_size, step=done.step)
    return Path(done.checkpoint), done.step


def train_chunk(ws: Workspace, plan: TrainPlan, out: Path, run: str,
                on_progress: Callable[[int, int], None] | None) -> tuple[Path, int]:
    """Build the TRL trainer for the recipe and run the chunk (in this process, or as one rank of
    a launch: :mod:`monte.training.launch_rank`). Returns (trainer checkpoint, step)."""
    import torch

    from monte.models import threads

    threads.apply()  # as many threads as the other processes leave cores (a rank: its OMP_NUM_THREADS)
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

    class Progress(TrainerCallback):
        def on_step_end(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
            if on_progress:
                on_progress(state.global_step - plan.resume_step, plan.steps)

        def on_log(self, args: Any, state: Any, control: Any, logs: Any = None, **kw: Any) -> None:
            if logs and state.is_world_process_zero:
                log_event(ws, plan.experiment, run, "log", step=plan.start_step + state.global_step - plan.resume_step,
                          **{k: v for k, v in logs.items() if isinstance(v, int | float)})

    class StopAt(TrainerCallback):
        """Ends the chunk at its last step, saving there, whatever the schedule's horizon."""

        def on_step_end(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
            if state.global_step >= max_steps:
                control.should_save = args.save_strategy != "no"
                control.should_training_stop = True

    import warnings

    warnings.filterwarnings("ignore", category=FutureWarning, module="transformers")
    from transformers.trainer_callback import PrinterCallback, ProgressCallback

    with ExitStack() as cleanup:  # a NeMo Gym reward server lives exactly as long as the training
        reward = reward_function(plan, r.reward_threshold, rows, cleanup, config=ws.config,
                                 log=ws.run_folder(plan.experiment, run) / "gym-server.log") \
            if plan.recipe.algorithm in recipes.GENERATING else None  # grpo and rloo: the grader's reward
        trainer = build(plan, r, common, tok, rows, [Progress(), StopAt()], reward)
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

