"""``monte eval``'s run: spend the test read with a ``started`` record, read, generate, grade, finish."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from monte import jsonl
from monte.errors import MonteError, error
from monte.evals import shards
from monte.evals.plan import SMOKE_TASKS, EvalPlan, ExamPlan, exam_of
from monte.hashing import sha256_bytes
from monte.ledger import rules
from monte.ledger.experiment import Ledger
from monte.ledger.ids import new_run_id
from monte.ledger.lineage import ensure_base
from monte.ledger.predicates import is_test_smoke, spends_test_read
from monte.ledger.records import RunRow
from monte.ledger.seal import SEAL_RULE, Seal, SealKey, overlap_note, seal_lock, settings_key
from monte.ledger.store import Snapshot
from monte.ledger.verify import verify_before_spend
from monte.manifest import now
from monte.models import locate
from monte.models.private import private_copy, remove
from monte.result_type import Result
from monte.runs.folders import log_event
from monte.runs.lifecycle import (
    PENDING,
    CohortReads,
    Transition,
    adopt_row,
    answers_digest,
    clear_pending,
    generated_digest,
    os_reason,
    probe_writable,
    read_pending,
    read_rows,
    read_tasks,
    require_live,
    running,
    save_pending,
    sigterm_stops,
    stamp_generated,
    transitions,
    with_retries,
)
from monte.runs.liveness import is_dead, this_process
from monte.workspace import Workspace


def _read_split(ws: Workspace, e: ExamPlan) -> list[dict[str, Any]]:
    """Read the split once, re-proving its hash against measurement.json first."""
    path = ws.data_root / e.path
    try:
        raw = path.read_bytes()
    except OSError:
        raise error("E_NOT_FOUND", f"the frozen split {path} is missing",
                    "restore it with `monte env install ENV`") from None
    if sha256_bytes(raw) != e.sha256:
        raise error("E_INTEGRITY", f"{e.exam}/{e.split}: {path} does not match the hash frozen in "
                    "measurement.json", "restore it with `monte env install ENV`; never edit a frozen split")
    return jsonl.load_lines(raw)  # split on \n only: a prompt may hold U+2028 raw


@dataclass(frozen=True)
class EvalResult(Result):
    """``monte eval``: each run's row as it finished (``row.json``'s dict), and what the scores
    mean: the floors, the graders' rules, the exact-match shares, the generation settings."""

    experiment: str
    runs: list[dict[str, Any]]
    #: "<exam>/<split>" -> the constant-answer floor of what was scored, when recorded
    floors: dict[str, float] = field(default_factory=dict)
    #: exam -> what its score means: the grader's rule in words (:func:`monte.envs.grading.rule`)
    rules: dict[str, str] = field(default_factory=dict)
    #: "<exam>/<split>" -> the share of items scored exactly 1, where the grader gave partial credit
    #: (then the score is not accuracy)
    exact: dict[str, float] = field(default_factory=dict)
    #: what was generated: the measurement's eval settings (tokens, stop, sampling)
    settings: dict[str, Any] = field(default_factory=dict)


def run_eval(ws: Workspace, plan: EvalPlan, *, on_progress: Callable[[int, int], None] | None = None,
             load: Callable[[Path], tuple[Any, Any]] | None = None,
             on_transition: Transition | None = None) -> EvalResult:
    """Run the plan: one row per exam. ``on_transition(row, transition)`` is called right after
    each transition's record lands (started, scored, finished); with ``plan.push`` and none given,
    a :class:`Pusher` uploads the results then, and a finished run's failed final push refuses."""
    ledger = Ledger(ws.store, plan.experiment)
    splits = {e.exam: _read_split(ws, e) for e in plan.exams}  # proven before any touch is spent
    measurement = ledger.measurement()
    transition, pusher = transitions(ws, plan.experiment, plan.push, on_transition)
    # a touch is spent only when its score can be recorded: prove the disks before writing anything
    sizes = {e.exam: min(e.n, SMOKE_TASKS) if plan.smoke else e.n for e in plan.exams}
    probe_writable(ws, plan.experiment, need=sum(sizes.values()) * 1024)
    plan, private = private_weights(ws, plan)  # the bytes proven are the bytes loaded (one read of each file)
    try:
        return _run_eval(ws, plan, splits, measurement, transition, pusher, sizes, on_progress, load)
    finally:
        if private is not None:
            remove([private])


def private_weights(ws: Workspace, plan: EvalPlan) -> tuple[EvalPlan, Path | None]:
    """A private copy of the target's model files, each hashed as it is read and compared with
    the identity the plan proved (a checkpoint's lineage commit, the base commit's files), made
    before the ``started`` record; the plan returned loads it, in this process and in every shard.
    A file swapped after the proof (while the plan waited at its prompt, or after ``started``)
    is either not in the copy or refused here, ``E_INTEGRITY``, before anything is spent. The copy
    lives in a staging folder of the data root (removed after the eval; a killed eval's is swept)."""
    from dulwich.objects import ObjectID

    from monte.ledger.lineage import read_checkpoint

    if not plan.target.folder:
        return plan, None
    if plan.target.kind == "checkpoint":
        if not plan.target.commit:  # a plan an older monte wrote: its checkpoint was proven by path
            return plan, None
        files = dict(read_checkpoint(ws.store, ObjectID(plan.target.commit.encode())).get("files") or {})
    else:
        files = dict(plan.base_files)
    if not files:
        return plan, None
    dest = private_copy(ws, Path(plan.target.folder), files, plan.target.label)
    target = plan.target.model_copy(update={"folder": str(dest)})
    return plan.model_copy(update={"target": target}), dest


def _regenerated(ws: Workspace, ledger: Ledger, row: RunRow, items: list[dict[str, Any]],
                 ids: list[str]) -> list[str]:
    """The answers the test read's model gives again, under the row's own settings (greedy, or
    each item's seeded samples: deterministic here), from a private copy of the files its target
    was proven by (a checkpoint's lineage commit, the cohort's base commit)."""
    import json
    import shutil

    from dulwich.objects import ObjectID

    from monte.envs import grading
    from monte.ledger.lineage import read_checkpoint
    from monte.ledger.refs import base_ref
    from monte.models import generate as gen

    target = row.plan.get("target") or {}
    settings = dict(row.plan.get("settings") or {})
    if target.get("kind") == "checkpoint" and target.get("commit"):
        info = read_checkpoint(ws.store, ObjectID(str(target["commit"]).encode()))
        folder, files = ws.data_root / str(info.get("weights") or ""), dict(info.get("files") or {})
    else:
        raw = ws.store.snapshot(base_ref(ledger.experiment, row.cohort)).read("base.json")
        base = json.loads(raw) if raw else {}
        located = locate.locate(ws, str(row.plan.get("base_model") or base.get("model") or ""), fetch=False)
        folder, files = Path(located.folder or ""), dict(base.get("files") or {})
    if not files:
        raise error("E_INTEGRITY", f"run {row.run}: the files its model was proven by are not recorded",
                    f"end the run (`monte stop {ledger.experiment}/{row.run}`: its read stays spent)")
    private = private_copy(ws, folder, files, str(target.get("model") or row.model))
    try:
        model, tok = gen.load(private)
        prompts = [grading.prompt_of(i) for i in items]
        common = {"max_new_tokens": settings["max_new_tokens"], "temperature": settings["temperature"],
                  "top_p": settings["top_p"], "stop": settings["stop"], "chat_template": settings["chat_template"]}
        if is_sampled(settings):
            drawn = gen.sample(model, tok, prompts, [gen.sample_seed(i) for i in ids], k=samples_per_item(settings),
                               **common)
            return [a for per in drawn for a in per]
        execution: dict[str, Any] = dict(row.plan.get("execution") or {})
        batch = int(execution.get("batch_size") or settings.get("batch_size") or 32)
        return [str(a) for a in gen.generate(model, tok, prompts, batch_size=batch, **common)]
    finally:
        shutil.rmtree(private, ignore_errors=True)


def _run_eval(ws: Workspace, plan: EvalPlan, splits: dict[str, list[dict[str, Any]]], measurement: Any,
              transition: Any, pusher: Any, sizes: dict[str, int], on_progress: Callable[[int, int], None] | None,
              load: Callable[[Path], tuple[Any, Any]] | None) -> EvalResult:
    from monte.envs import grading
    from monte.models import generate as gen

    ledger = Ledger(ws.store, plan.experiment)
    grader = measurement.grader  # the catalog's, a NeMo Gym server's, a JSONL's or lm-eval's (monte.envs.grading)
    env_folder = ws.env_dir(measurement.environment)
    model, tok = preflight_eval(plan, splits, load)  # all a read needs, before any record: a refusal spends nothing

    def exam_grader(e: ExamPlan) -> grading.ExamGrader:
        items = splits[e.exam][:SMOKE_TASKS] if plan.smoke else splits[e.exam]
        return grading.ExamGrader(grader, e.benchmark, e.exam, needed=not is_test_smoke(e.split, plan.smoke),
                                  config=ws.config, log=ws.data_root / "logs" / f"gym-{plan.experiment}-{e.exam}.log",
                                  folder=env_folder, split=e.split, items=items,
                                  graded_elsewhere=bool(ws.config.get("grader")))

    # an lm-eval exam proves its frozen files and every document's hashes before anything is written
    ready = {e.exam: exam_grader(e) for e in plan.exams} if grading.proves_first(grader) else {}
    locate.remember(ws, plan.base_register, plan.base_folder)  # the name the record gives the base model
    ensure_base(ws.store, plan.experiment, plan.base_model, plan.base_files, cohort=plan.cohort,
                weights=plan.weights or None, folder=Path(plan.base_folder) if plan.base_folder else None)
    with sigterm_stops():
        recover(ws, plan.experiment)  # a finish an earlier process could not write: record it first
        results = []
        exact: dict[str, float] = {}
        for i, e in enumerate(plan.exams):
            items = splits[e.exam][:SMOKE_TASKS] if plan.smoke else splits[e.exam]
            if i:  # the disks again before each further touch
                probe_writable(ws, plan.experiment, need=len(items) * 1024)
            # a NeMo Gym server starts before the touch is spent: one that cannot start spends nothing
            grades = ready.pop(e.exam, None) or exam_grader(e)
            with ExitStack() as stack:
                stack.callback(grades.close)  # after a failure is recorded, as after a start that is refused
                run = stack.enter_context(running(
                    ws, plan.experiment, partial(start_row, ledger, plan, e, ws=ws, extra_plan={
                        "processes": plan.processes} if plan.processes > 1 else None),
                    started=partial(_note_start, ws, plan, e), fail=partial(_failed, ledger), transition=transition))
                row = run.row
                tasks: list[dict[str, Any]] | None = None
                if grades.generates:  # an lm-eval exam: lm-eval's requests, answered here, graded by lm-eval
                    # (with --processes N its generations in whole batches across N shard processes)
                    sharded = partial(shards.generate, Path(plan.target.folder or plan.target.model),
                                      processes=plan.processes, work=ws.run_folder(plan.experiment, row.run) / "shards",
                                      cwd=ws.repo_root) if plan.processes > 1 else None
                    tasks = grades.evaluate(model, tok, {**plan.settings, "batch_size": _batch_size(plan)}, on_progress,
                                            generate_with=sharded)
                    if grades.lmeval.said:  # lm-eval's warnings: the run's event file, not the terminal
                        log_event(ws, plan.experiment, row.run, "lm-eval", said=list(grades.lmeval.said))
                    answers = [str(t.get("answer", "")) for t in tasks]
                    stamp_generated(ws, plan.experiment, row.run, answers)  # (lm-eval grades as it generates)
                elif is_sampled(plan.settings):  # K seeded samples per item (docs/statistics.md)
                    ids = [grading.task_id(it, f"{e.exam}/{e.split}", k) for k, it in enumerate(items)]
                    seeds = [gen.sample_seed(i) for i in ids]
                    drawn = gen.sample(model, tok, [grading.prompt_of(i) for i in items], seeds,
                                       k=samples_per_item(plan.settings),
                                       max_new_tokens=plan.settings["max_new_tokens"],
                                       temperature=plan.settings["temperature"], top_p=plan.settings["top_p"],
                                       stop=plan.settings["stop"], chat_template=plan.settings["chat_template"],
                                       on_batch=on_progress)
                    answers = [a for per_item in drawn for a in per_item]
                    stamp_generated(ws, plan.experiment, row.run, answers)  # what this process wrote, before grading
                    if not is_test_smoke(e.split, plan.smoke):  # smoke on test: nothing graded, as at K = 1
                        tasks = graded_samples(grades, items, ids, seeds, drawn)
                elif plan.processes > 1:  # whole batches per shard process: the same answers (monte.evals.shards)
                    answers = shards.generate(Path(plan.target.folder or plan.target.model),
                                              [grading.prompt_of(i) for i in items],
                                              {**plan.settings, "batch_size": _batch_size(plan)}, plan.processes,
                                              ws.run_folder(plan.experiment, row.run) / "shards",
                                              cwd=ws.repo_root)
                    if on_progress:
                        on_progress(len(items), len(items))
                else:
                    answers = gen.generate(model, tok, [grading.prompt_of(i) for i in items],
                                           max_new_tokens=plan.settings["max_new_tokens"],
                                           batch_size=_batch_size(plan),
                                           temperature=plan.settings["temperature"], top_p=plan.settings["top_p"],
                                           stop=plan.settings["stop"], chat_template=plan.settings["chat_template"],
                                           on_batch=on_progress)
                if tasks is None and not is_test_smoke(e.split, plan.smoke):
                    # (a sealed item is never graded, scored or recorded: smoke on test proves that
                    # generation runs on the test split's format, and reveals nothing of it)
                    ids = [grading.task_id(it, f"{e.exam}/{e.split}", k) for k, it in enumerate(items)]
                    stamp_generated(ws, plan.experiment, row.run, answers)  # what this process wrote, before grading
                    tasks = grades.grade(items, answers, ids)
                # durable before the finishing append: if that cannot be written, the score is kept
                try:
                    # the whole answers too: `monte recover` grades them again before recording
                    save_pending(ws, plan.experiment, row.run, {"tasks": tasks, "n": len(items),
                                                                "smoke": plan.smoke,
                                                                "answers": list(answers) if tasks else None})
                    kept = True
                except OSError:  # the data root filled or turned read-only since the probe: the
                    kept = False  # ledger can still take the score, and it is what counts
                grades.close()
                # one record both scores the run and ends it: the "scored" and "finished" transitions
                # land together, so one push reports both
                done = run.finish(partial(_record_result, ws, ledger, tasks=tasks, smoke=plan.smoke, n=len(items),
                                          kept=kept))
            rate = grading.exact_rate(tasks) if tasks and not plan.smoke else None
            if rate is not None:
                exact[f"{e.exam}/{e.split}"] = rate
            results.append(done.model_dump(mode="json"))
    if pusher is not None:
        pusher.check()
    return EvalResult(experiment=plan.experiment, runs=results,
                      floors={f"{e.exam}/{e.split}": e.floor for e in plan.exams if e.floor is not None},
                      rules={e.exam: grading.rule(grader, e.benchmark, e.exam) for e in plan.exams},
                      exact=exact, settings=dict(plan.settings))


def samples_per_item(settings: dict[str, Any]) -> int:
    """K, the samples per item (a measurement from before K, or at K = 1, holds none)."""
    return int(settings.get("samples", 1))


def is_sampled(settings: dict[str, Any]) -> bool:
    """Seeded samples per item (:func:`monte.models.generate.sample`): K > 1, or one sampled answer."""
    return samples_per_item(settings) > 1 or float(settings.get("temperature", 0.0)) > 0


def graded_samples(grades: Any, items: list[dict[str, Any]], ids: list[str], seeds: list[int],
                    drawn: list[list[str]]) -> list[dict[str, Any]]:
    """One ``tasks.jsonl`` entry per item: its id, its score (the mean over its samples), the
    first sample's answer (what a one-answer reader shows) and every sample (index, seed, answer,
    score) under ``samples``; at K = 1 the one sample's seed beside the usual fields."""
    k = len(drawn[0]) if drawn else 1
    graded = grades.grade([it for it in items for _ in range(k)], [a for per in drawn for a in per],
                          [i for i in ids for _ in range(k)])
    out = []
    for n, (tid, seed) in enumerate(zip(ids, seeds, strict=True)):
        mine = graded[n * k:(n + 1) * k]
        if k == 1:
            out.append({**mine[0], "seed": seed})
            continue
        out.append({"id": tid, "score": sum(float(g["score"]) for g in mine) / k, "answer": mine[0].get("answer", ""),
                    "seed": seed, "samples": [{**{x: v for x, v in g.items() if x != "id"}, "sample": j, "seed": seed,
                                               "score": float(g["score"])} for j, g in enumerate(mine)]})
    return out


def preflight_eval(plan: EvalPlan, splits: dict[str, list[dict[str, Any]]],
                   load: Callable[[Path], tuple[Any, Any]] | None = None) -> tuple[Any, Any]:
    """Everything an eval needs, proven before its ``started`` record spends anything: the extras
    it imports (the light install refuses with their pip line), the model and its tokenizer
    loaded, and one prompt of each exam rendered, tokenized and run through the model for one
    token (nothing is graded or kept: it reveals nothing of a sealed split). Returns the loaded
    (model, tokenizer) for the run."""
    from monte.envs import grading
    from monte.models import generate as gen

    folder = Path(plan.target.folder or plan.target.model)
    model, tok = (load or gen.load)(folder)
    for e in plan.exams:
        items = splits[e.exam][:1]
        if not items:
            continue
        try:
            gen.generate(model, tok, [grading.prompt_of(items[0])], max_new_tokens=1, batch_size=1,
                         temperature=0.0, top_p=1.0, stop=(), chat_template=plan.settings["chat_template"])
        except (MonteError, ModuleNotFoundError, KeyboardInterrupt):
            raise
        except Exception as exc:  # noqa: BLE001 (out of memory, a CUDA error, a tokenizer that cannot encode)
            raise error("E_PREFLIGHT", f"the model {plan.target.label} could not answer one prompt of "
                        f"{e.exam}/{e.split} ({type(exc).__name__}: {exc}); nothing was started and no test "
                        "read was spent", "fix the model folder (or free the GPU's memory) and run the command "
                        "again") from None
    return model, tok


def _batch_size(plan: EvalPlan) -> int:
    """An execution detail; a plan an older monte wrote (a submission) holds it in ``settings``."""
    return int(plan.execution.get("batch_size", plan.settings.get("batch_size", 32)))


def start_row(ledger: Ledger, plan: EvalPlan, e: ExamPlan, *, who: dict[str, Any] | None = None,
           extra_plan: dict[str, Any] | None = None, ws: Workspace | None = None, run: str | None = None) -> RunRow:
    """The ``started`` record: the touch is spent here (the seal's rules, re-checked on the tip).
    On a box running a laptop's submission, the row the laptop started is adopted instead.
    ``run``: the run id, where it was named before the record (a grader already holds its weights)."""
    if e.exam in plan.adopt:
        return adopt_row(ledger, plan.adopt[e.exam], kind="eval", check=lambda r: (
            r.exam == e.exam and r.split == e.split and r.smoke == plan.smoke
            and (r.plan.get("target") or {}).get("run") == plan.target.run
            and r.step == plan.target.step))
    run = run or new_run_id()
    who = who or this_process()
    code = ws.code_version() if ws is not None else {}  # the commit this eval runs at

    def make(snap: Snapshot, seq: int) -> RunRow:
        role = None
        if spends_test_read(e.split, plan.smoke):  # re-checked on the tip: racing claims, one wins
            rows = read_rows(ledger, snap)  # only a test read needs them: a dev start reads no rows
            key = SealKey(e.sha256, settings_key(plan.settings), plan.weights, plan.legacy_cohort, exam=e.exam_id)
            seal = Seal(ledger.store, exam_of=exam_of(ws)) if ws is not None else Seal(ledger.store)
            touches = seal.touches(key, own=(plan.experiment, rows)) if plan.weights else None
            role = rules.check_test_read(rows, plan.cohort, e.exam, on_checkpoint=plan.target.kind == "checkpoint",
                                         experiment=plan.experiment, touches=touches,
                                         note=overlap_note(seal, touches or ()))
        return RunRow(run=run, experiment=plan.experiment, kind="eval", status="started", created_at=now(),
                      updated_at=now(), cohort=plan.cohort, model=plan.target.model, exam=e.exam,
                      split=e.split, step=plan.target.step, smoke=plan.smoke, role=role,
                      plan={"target": plan.target.recorded(), "benchmark": e.benchmark,
                            "split_sha256": e.sha256, "settings": plan.settings, "execution": plan.execution,
                            **({"exam_id": e.exam_id} if e.exam_id else {}), "seal": SEAL_RULE,
                            # an lm-eval exam: what it asked the model (the settings above are unused)
                            **({"lm_eval": e.requests} if e.requests else {}),
                            "base_model": plan.base_model, **code, **(extra_plan or {})},
                      **who)

    def append() -> RunRow:
        return ledger.append_row(make, event="started",
                                 summary=lambda r: f"eval {r.exam}/{r.split}@{r.step} started: {r.run}"
                                 + (" (smoke)" if r.smoke else ""),
                                 trailers=lambda r: {"Monte-Exam": r.exam or "",
                                                     **({"Monte-Role": r.role} if r.role else {})})

    if not spends_test_read(e.split, plan.smoke):
        return append()
    # one writer per seal key across the repository; the ledgers verified before the read is spent
    with seal_lock(ledger.store, SealKey(e.sha256, settings_key(plan.settings), plan.weights, plan.legacy_cohort)):
        verify_before_spend(ledger.store)
        return append()


def finish_row(ledger: Ledger, row: RunRow, status: str, *, tasks: list[dict[str, Any]] | None = None,
               n: int | None = None, error_text: str | None = None, files: dict[str, bytes] | None = None,
               check: Callable[[RunRow, list[dict[str, Any]]], None] | None = None) -> RunRow:
    """The finishing record of an eval scored elsewhere (a grader, monte.grader): ``files`` go
    beside ``row.json``; ``check(row, tasks)`` sees the finished row before it is written and
    refuses what must not land."""
    return _finish(ledger, row, status, tasks=tasks, n=n, error_text=error_text, files=files, check=check)


def _finish(ledger: Ledger, row: RunRow, status: str, *, tasks: list[dict[str, Any]] | None = None,
            smoke: bool = False, error_text: str | None = None, n: int | None = None,
            recovered: bool = False, files: dict[str, bytes] | None = None,
            check: Callable[[RunRow, list[dict[str, Any]]], None] | None = None) -> RunRow:
    body = jsonl.dump_lines(tasks) if tasks else None  # any decoded text: separators, lone surrogates

    def make(snap: Snapshot, seq: int) -> RunRow:
        current = require_live(ledger.row(row.run, snap), row.run)
        update: dict[str, Any] = {"status": status, "updated_at": now(), "error": error_text}
        if recovered:  # recorded by `monte recover` from the run folder, graded again first
            update["recovered"] = True
        if n is not None:
            update["n"] = n
        if tasks is not None:
            update["n"] = len(tasks)
            if not smoke:
                update["score"] = sum(t["score"] for t in tasks) / len(tasks) if tasks else 0.0
                update["delta"] = _delta(ledger, snap, row, tasks)
        done = current.model_copy(update=update)
        if check is not None:
            check(done, tasks or [])
        return done

    def summary(r: RunRow) -> str:
        what = f"eval {r.exam}/{r.split}@{r.step} {status}: {r.run}"
        return what + (f" score {r.score:.4f} (n={r.n})" if r.score is not None else "")

    return ledger.append_row(make, event="finished" if status == "succeeded" else status, summary=summary,
                             files=(lambda r: {**({"tasks.jsonl": body} if body else {}), **(files or {})})
                             if body or files else None,
                             trailers=lambda r: {"Monte-Exam": r.exam or "", "Monte-Status": status})


def _record_result(ws: Workspace, ledger: Ledger, row: RunRow, *, tasks: list[dict[str, Any]] | None, smoke: bool,
                   n: int, kept: bool = True) -> RunRow:
    """The finishing append, retried on a transient failure. If it still cannot be written the
    result stays in the run folder (``kept``) and the refusal says how it gets recorded."""
    try:
        done = with_retries(lambda: _finish(ledger, row, "succeeded", tasks=tasks, smoke=smoke, n=n))
    except OSError as e:
        if not kept:
            raise error("E_STORAGE", f"run {row.run} finished, but its result could be neither recorded in the "
                        f"ledger ({os_reason(e)}) nor kept in its run folder: both disks failed during the run; "
                        "its score is lost", "free space or make the repository and the data root writable "
                        "before the next run") from None
        raise error("E_STORAGE", f"run {row.run} finished, but its result could not be recorded in the ledger "
                    f"({os_reason(e)}); the result is kept in its run folder "
                    f"({ws.run_folder(ledger.experiment, row.run) / PENDING})",
                    f"free space or make the repository writable, then `monte recover {ledger.experiment}` "
                    "records it (so does the next `monte eval` in this experiment)") from None
    if kept:
        clear_pending(ws, ledger.experiment, row.run)
    try:
        log_event(ws, ledger.experiment, row.run, "succeeded", score=done.score, n=done.n)
    except OSError:
        pass
    return done


def _note_start(ws: Workspace, plan: EvalPlan, e: ExamPlan, row: RunRow) -> None:
    log_event(ws, plan.experiment, row.run, "started", exam=e.exam, split=e.split, target=plan.target.label)


def recover(ws: Workspace, experiment: str, *, test_reads: bool = True) -> list[dict[str, Any]]:
    """Record the finish of every run whose process died after its result was kept in its run
    folder (the finishing append could not be written). A run stopped meanwhile stays stopped:
    its kept result is reported, not recorded. ``test_reads=False`` (a grader holds the seal): a
    test read's result is never taken from a file here, only from the grader's signed result."""
    ledger = Ledger(ws.store, experiment)
    out: list[dict[str, Any]] = []
    for path in sorted(ws.runs_folder(experiment).glob(f"*/{PENDING}")):
        row = ledger.row(path.parent.name)
        if row is None or row.kind != "eval" or row.status not in ("started", "running"):
            continue
        if not test_reads and spends_test_read(row.split, row.smoke):
            continue
        pending = read_pending(ws, experiment, row.run)
        if pending is None or not is_dead(row):
            continue
        tasks = prove_kept_result(ws, ledger, row, pending)
        done = with_retries(partial(_finish, ledger, row, "succeeded", tasks=tasks,
                                    smoke=bool(pending.get("smoke")), n=pending.get("n"), recovered=True))
        clear_pending(ws, experiment, row.run)
        log_event(ws, experiment, row.run, "recovered", score=done.score, n=done.n)
        out.append({"run": done.run, "status": done.status, "score": done.score, "n": done.n})
    return out


def prove_kept_result(ws: Workspace, ledger: Ledger, row: RunRow, pending: dict[str, Any]) -> list[dict[str, Any]] | None:
    """A result kept in a run folder (``finish.json``), proven before it is recorded: its task ids
    are exactly the frozen split's (every item, in order; the first few for a smoke run), and the
    frozen grader, run again on the kept answers, gives every kept score. Returns the tasks as
    graded again; refuses ``E_INTEGRITY`` (nothing recorded, the file left for a look) when the
    file says anything else. A smoke read of the test split keeps no tasks: only its count."""
    from monte.envs import grading

    def forged(why: str) -> Exception:
        return error("E_INTEGRITY", f"the result kept for run {row.run} ({PENDING} in its run folder) is not "
                     f"what its answers grade to: {why}; nothing was recorded",
                     f"the file was edited or is not this run's: restore it from a good copy, or end the run "
                     f"(`monte stop {ledger.experiment}/{row.run}`: it reads abandoned, its read stays spent)")

    tasks = pending.get("tasks")
    smoke = bool(pending.get("smoke"))
    meas = ledger.measurement()
    exam = meas.exams.get(row.exam or "")
    split = exam.splits.get(row.split or "") if exam is not None else None
    if exam is None or split is None or split.sha256 != row.plan.get("split_sha256"):
        raise forged(f"the experiment holds no frozen split {row.exam}/{row.split} with the hash the run read")
    items = _read_split(ws, ExamPlan(exam=row.exam or "", benchmark=exam.benchmark, split=row.split or "",
                                     path=split.path, sha256=split.sha256, n=split.n))
    if smoke:
        items = items[:SMOKE_TASKS]
    if pending.get("n") != len(items):
        raise forged(f"it counts {pending.get('n')} answers, the split holds {len(items)} items")
    if tasks is None:
        if is_test_smoke(row.split, smoke):
            return None
        raise forged("it holds no per-task results")
    if not isinstance(tasks, list) or not all(isinstance(t, dict) for t in tasks):
        raise forged("its per-task results are not a list of tasks")
    ids = [grading.task_id(it, f"{row.exam}/{row.split}", k) for k, it in enumerate(items)]
    kept = [str(t.get("id")) for t in tasks]
    if kept != ids:
        odd = sorted(set(kept) ^ set(ids))
        raise forged(f"its task ids are not the split's ({len(kept)} kept, {len(ids)} in the split"
                     + (f"; e.g. {', '.join(odd[:3])}" if odd else "; in another order") + ")")
    stamped = generated_digest(ws, ledger.experiment, row.run)
    if stamped is None and spends_test_read(row.split, smoke) and not grading.proves_first(meas.grader):
        # a test read with no stamp (killed before it generated, or kept by a monte that stamped
        # nothing): its model answers again, greedy or seeded, so the same answers or none
        stamped = answers_digest(_regenerated(ws, ledger, row, items, ids))
    if stamped is None:
        raise forged("no record, signed with this repository's key, that this run's own process generated "
                     "answers before grading (a result written by hand, or by a monte that kept none)")
    if any("samples" in t for t in tasks):  # K > 1: every sample graded again (K samples per item, docs/statistics.md)
        drawn = [str(x.get("answer", "")) for t in tasks
                 for x in sorted(t.get("samples") or [], key=lambda x: int(x.get("sample", 0)))]
        if answers_digest(drawn) != stamped:
            raise forged("its answers are not the ones this run's model generated")
        return _prove_kept_samples(ws, meas, exam.benchmark, row, items, ids, tasks, forged)
    answers = pending.get("answers")
    if not isinstance(answers, list) or len(answers) != len(items):  # a file kept before answers were
        answers = [str(t.get("answer", "")) for t in tasks]
    answers = [str(a) for a in answers]
    # What every grader records of an answer, checked before any grader starts (a NeMo server
    # takes seconds to start: a forged file is refused without one).
    quoted = ("answer", "answer_chars", "answer_sha256")
    if any({f: t.get(f) for f in quoted} != {f: grading.answer_fields(a).get(f) for f in quoted}
           for t, a in zip(tasks, answers, strict=True)):
        raise forged("its answers are not the ones its tasks quote")
    if answers_digest(answers) != stamped:
        raise forged("its answers are not the ones this run's model generated")
    with grading.ExamGrader(meas.grader, exam.benchmark, row.exam or "", config=ws.config,
                            log=ws.data_root / "logs" / f"gym-{ledger.experiment}-{row.exam}.log") as grader:
        graded = grader.grade(items, answers, ids)
    if any({f: t.get(f) for f in quoted} != {f: g.get(f) for f in quoted} for t, g in zip(tasks, graded, strict=True)):
        raise forged("its answers are not the ones its tasks quote")
    for t, g in zip(tasks, graded, strict=True):
        score = t.get("score")
        if not isinstance(score, (int, float)) or abs(float(score) - g["score"]) > 1e-9:
            raise forged(f"task {g['id']} is kept with score {score!r}, the frozen grader gives {g['score']!r}")
    return graded


def _prove_kept_samples(ws: Workspace, meas: Any, benchmark: str, row: RunRow, items: list[dict[str, Any]],
                        ids: list[str], tasks: list[dict[str, Any]], forged: Callable[[str], Exception]) -> list[dict[str, Any]]:
    """:func:`prove_kept_result` at K > 1: each item's samples, graded again, give every kept
    sample's score and the item's mean."""
    from monte.envs import grading

    per = [t.get("samples") for t in tasks]
    if not all(isinstance(p, list) and p and all(isinstance(x, dict) for x in p) for p in per):
        raise forged("an item holds no samples")
    k = len(per[0] or [])
    if any(len(p or []) != k for p in per):
        raise forged("its items hold different numbers of samples")
    drawn = [[str(x.get("answer", "")) for x in sorted(p or [], key=lambda x: int(x.get("sample", 0)))] for p in per]
    seeds = [int(t.get("seed", 0)) for t in tasks]
    with grading.ExamGrader(meas.grader, benchmark, row.exam or "", config=ws.config,
                            log=ws.data_root / "logs" / f"gym-{row.experiment}-{row.exam}.log") as grader:
        graded = graded_samples(grader, items, ids, seeds, drawn)
    for t, g in zip(tasks, graded, strict=True):
        kept = [float(x.get("score", -1)) for x in sorted(t["samples"], key=lambda x: int(x.get("sample", 0)))]
        if kept != [x["score"] for x in g["samples"]] or abs(float(t.get("score", -1)) - g["score"]) > 1e-9:
            raise forged(f"task {g['id']}'s samples are kept with other scores than the frozen grader gives")
    return graded


def _failed(ledger: Ledger, row: RunRow, reason: str) -> RunRow:
    return _finish(ledger, row, "failed", error_text=reason)


def _paired(ledger: Ledger, snap: Snapshot, older: list[dict[str, Any]] | None,
            tasks: list[dict[str, Any]]) -> tuple[Any, dict[str, Any]] | None:
    """The paired delta of ``tasks`` against ``older``'s (a Delta and the fields a K > 1 delta
    adds), or None when ``older`` cannot be read or its tasks are not these."""
    from monte.stats.paired import paired_delta
    from monte.stats.samples import sampled_delta, samples_of

    mine = {t["id"]: float(t["score"]) for t in tasks}
    if older is None or {t["id"] for t in older} != set(mine):
        return None
    ids = [t["id"] for t in older]
    mine_samples, older_samples = samples_of(tasks), samples_of(older)
    if mine_samples is not None and older_samples is not None:  # K > 1: the item is the unit (K samples per item, docs/statistics.md)
        s = sampled_delta([older_samples[i] for i in ids], [mine_samples[i] for i in ids],
                          pass_at=ledger.measurement(snap).pass_at)
        return s.d, s.record()
    return paired_delta([float(t["score"]) for t in older], [mine[i] for i in ids]), {}


#: how many hops up its lineage a checkpoint's dev eval looks for an evaluated ancestor
PARENT_HOPS = 10_000


def _parent_delta(ledger: Ledger, snap: Snapshot, row: RunRow, tasks: list[dict[str, Any]]) -> dict[str, Any] | None:
    """A checkpoint's dev delta against its parent checkpoint (the search verdict, docs/statistics.md): what this move did.
    The parent is the nearest ancestor on its lineage (the run's previous checkpoint, or the
    checkpoint the run started from) with an admissible dev eval on this exam in this cohort,
    paired as against the base; None from the base, or when no ancestor was evaluated or its
    tasks do not pair (the verdict against the base is then the only one)."""
    from monte.stats.paired import verdict

    t = row.plan.get("target", {})
    if t.get("kind") != "checkpoint" or row.split != "dev":
        return None
    run, step = str(t.get("run")), int(t.get("step", -1))
    firsts: dict[tuple[str, int], tuple[str, int]] | None = None
    for _ in range(PARENT_HOPS):
        train = ledger.row(run, snap)
        if train is None or train.kind != "train":
            return None
        earlier = [int(ck["step"]) for ck in train.checkpoints if int(ck["step"]) < step]
        start = train.plan.get("parent")
        if earlier:
            run, step = run, max(earlier)
        elif isinstance(start, dict) and start.get("run"):
            run, step = str(start["run"]), int(start.get("step", -1))
        else:
            return None  # from the base: the delta against the base is the move's
        if firsts is None:
            firsts = _first_dev_evals(ledger, snap, row)
        ev = firsts.get((run, step))
        if ev is None:
            continue
        paired = _paired(ledger, snap, read_tasks(snap, ev[0]), tasks)
        if paired is None:
            return None
        d, extra = paired
        return {"checkpoint": f"{run}@{step}", "eval": ev[0], "delta": d.delta, "lower": d.lower,
                "upper": d.upper, "n": d.n, "fixed": d.fixed, "broken": d.broken, "method": d.method,
                "verdict": verdict(d), "regression": d.significant_regression,
                **{k: v for k, v in extra.items() if k in ("samples", "pvalue")}}
    return None


def _first_dev_evals(ledger: Ledger, snap: Snapshot, row: RunRow) -> dict[tuple[str, int], tuple[str, int]]:
    """Each checkpoint's first admissible dev eval of ``row``'s exam and cohort, ``(run, step) ->
    (eval run, seq)``, from the facts ``monte status`` derives (:mod:`monte.ledger.derived`'s
    cache: an append re-derives one fan-out index, not every row)."""
    from monte.status.facts import (
        COHORT,
        EXAM,
        KIND,
        RUN,
        SEQ,
        SMOKE,
        SPLIT,
        STATUS,
        TKIND,
        TRUN,
        TSTEP,
        derive_facts,
        facts_version,
    )

    out: dict[tuple[str, int], tuple[str, int]] = {}
    for f in ledger.derived(snap, "status", facts_version(), derive_facts):
        if (f[KIND] == "eval" and f[STATUS] == "succeeded" and not f[SMOKE] and f[COHORT] == row.cohort
                and f[EXAM] == row.exam and f[SPLIT] == "dev" and f[TKIND] == "checkpoint" and f[RUN] != row.run):
            key = (str(f[TRUN]), int(f[TSTEP] if f[TSTEP] is not None else -1))
            if key not in out or f[SEQ] < out[key][1]:
                out[key] = (str(f[RUN]), int(f[SEQ]))
    return out


def _delta(ledger: Ledger, snap: Snapshot, row: RunRow, tasks: list[dict[str, Any]]) -> dict[str, Any] | None:
    """Paired against the cohort's baseline on this exam and split (unpaired when a per-task
    file cannot be read or the tasks do not line up)."""
    from monte.stats.paired import verdict
    from monte.stats.unpaired import unpaired_delta

    if row.plan.get("target", {}).get("kind") == "base":
        return None
    base = CohortReads(ledger, snap, row.cohort).baseline(row.exam or "", row.split or "")  # O(1): the cohort index
    if base is None or base.run == row.run or row.plan.get("target", {}).get("kind") == "base":
        return None
    base_tasks = read_tasks(snap, base.run)
    mine = {t["id"]: float(t["score"]) for t in tasks}
    extra: dict[str, Any] = {}
    paired = _paired(ledger, snap, base_tasks, tasks)
    if paired is not None:
        d, extra = paired
        parent = _parent_delta(ledger, snap, row, tasks)
        if parent is not None:  # what this move did (the search verdict, docs/statistics.md): beside the verdict against the base
            extra = {**extra, "parent": parent}
    else:
        scores = list(mine.values())
        binary = all(s in (0.0, 1.0) for s in scores)
        d = unpaired_delta(base.score or 0.0, base.n or len(scores), sum(scores) / len(scores), len(scores),
                           binary=binary)
    return {"baseline": base.run, "delta": d.delta, "lower": d.lower, "upper": d.upper, "n": d.n,
            "fixed": d.fixed, "broken": d.broken, "paired": d.paired, "method": d.method,
            "verdict": verdict(d), **extra}
