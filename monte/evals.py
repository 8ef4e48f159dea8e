"""``monte eval`` and ``monte nominate``: plan (every refusal that can be proven before writing),
then run (spend the touch with a ``started`` record, read, generate, grade, finish).
"""

from __future__ import annotations

import json
import os
import traceback
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from monte.errors import MonteError, error
from monte.hashing import sha256_bytes
from monte.ledger import rules
from monte.ledger.experiment import Ledger, dumps, experiment_names
from monte.ledger.ids import new_run_id
from monte.ledger.lineage import ensure_base, servable_files
from monte.ledger.records import Measurement, RunRow, run_dir
from monte.ledger.store import Change, Snapshot
from monte.manifest import now
from monte.names import check_name
from monte.runs import is_dead, log_event, me, parse_run_ref
from monte.workspace import Workspace

SMOKE_TASKS = 5


def experiment_name(ws: Workspace, given: str | None) -> str:
    """The experiment named, or the only one in the repository."""
    if given:
        return check_name(given, "experiment name")
    names = experiment_names(ws.store)
    if len(names) == 1:
        return names[0]
    if not names:
        raise error("E_NOT_FOUND", "this repository has no experiment yet",
                    "create one with `monte experiment init NAME --eval ENV`")
    raise error("E_USAGE", f"this repository has {len(names)} experiments: {', '.join(names)}",
                "name one with --experiment NAME")


def read_rows(ledger: Ledger, snap: Snapshot | None = None) -> list[RunRow]:
    """The rows at the tip; a started/running row whose process died reads ``abandoned``."""
    rows = ledger.rows(snap)
    return [r.model_copy(update={"status": "abandoned", "error": "the process died without finishing"})
            if is_dead(r) else r for r in rows]


def read_tasks(snap: Snapshot, run: str) -> list[dict[str, Any]] | None:
    raw = snap.read(f"{run_dir(run)}/tasks.jsonl")
    if raw is None:
        return None
    try:
        return [json.loads(line) for line in raw.decode().splitlines() if line.strip()]
    except (ValueError, UnicodeDecodeError):
        return None


#: The transitions of a run (seeds, "Remote runs"): after each one, --push uploads its results.
TRANSITIONS = ("started", "checkpoint", "scored", "weights-uploaded", "finished")
_ENDED = ("succeeded", "failed", "abandoned")


class Pusher:
    """``--push``: upload the run's results to the results bucket after each transition.

    Called as ``pusher(row, transition)`` right after the transition's record lands. A push that
    fails mid-run is logged to the run's event file (``push-failed``) and the run goes on: the
    next push carries everything the failed one would have. The push after a run has ended is
    the one that must land; :meth:`check` refuses with E_STORAGE when it did not.
    """

    def __init__(self, ws: Workspace, experiment: str) -> None:
        self.ws = ws
        self.experiment = experiment
        self.unpushed: dict[str, MonteError] = {}  # ended run -> why its last push failed
        self.pushes = 0

    def preflight(self) -> None:
        """Open the bucket (and resolve its key) before any compute: a bucket that cannot be
        written refuses here, with nothing recorded."""
        from monte.storage import results

        results.open_bucket(self.ws, bucket=None, key_file=None, write=True)

    def __call__(self, row: RunRow, transition: str) -> None:
        from monte.storage import results

        try:
            results.push(self.ws, self.experiment, run=row.run)
        except Exception as exc:  # a push never kills the run it reports on
            e = exc if isinstance(exc, MonteError) else error(
                "E_STORAGE", f"the push failed ({type(exc).__name__})", "retry with `monte push`")
            log_event(self.ws, self.experiment, row.run, "push-failed", transition=transition,
                      code=e.code, message=e.message)
            if row.status in _ENDED:
                self.unpushed[row.run] = e
            return
        self.pushes += 1
        self.unpushed.pop(row.run, None)

    def check(self) -> None:
        """Refuse (E_STORAGE) when a finished run's final push did not land."""
        if not self.unpushed:
            return
        runs = sorted(self.unpushed)
        why = self.unpushed[runs[0]]
        retry = "; ".join(f"`monte push {self.experiment} --run {r}`" for r in runs)
        raise error("E_STORAGE", f"run {', '.join(runs)} finished and is recorded locally, but its final push "
                    f"to the results bucket failed: {why.code}: {why.message}",
                    f"{why.fix + '; then ' if why.fix else ''}{retry} retries",
                    details=[{"run": r, "code": e.code, "message": e.message} for r, e in self.unpushed.items()])


Transition = Callable[[RunRow, str], None]


class Target(BaseModel):
    kind: str  # "base" | "checkpoint"
    run: str | None = None
    step: int = 0
    model: str  # the folder generation loads
    recipe: str | None = None

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


class EvalPlan(BaseModel):
    experiment: str
    cohort: str
    base_model: str
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
        out.append(f"  model: {self.target.model}")
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
    base_dir = Path(os.path.expanduser(base_model))  # ~nosuchuser stays as typed: then not found
    files = servable_files(base_dir)
    from monte.ledger.lineage import cohort_of

    cohort = cohort_of(files)
    exams = _exams(ws, meas, split)
    if split == "test" and not smoke:  # the seal first: no selection can make up for a missing test@0
        has_checkpoints = bool(rules.checkpoints(rows, cohort))
        for e in exams:
            rules.check_test_read(rows, cohort, e.exam, on_checkpoint=has_checkpoints)
    target = _resolve_target(ws, exp, rows, cohort, str(base_dir.resolve()), split, step, checkpoint,
                             smoke, snap)
    if split == "test" and not smoke:
        for e in exams:
            e.role = rules.check_test_read(rows, cohort, e.exam, on_checkpoint=target.kind == "checkpoint")
    bucket = push_bucket(ws) if push else None
    return EvalPlan(experiment=exp, cohort=cohort, base_model=str(base_dir.resolve()), base_files=files,
                    target=target, exams=exams, smoke=smoke, settings=meas.eval.model_dump(), push=push,
                    bucket=bucket)


def push_bucket(ws: Workspace) -> str:
    """``--push`` needs a results bucket: refuse (E_STORAGE) before any compute when none is named."""
    from monte.storage.locations import require_url

    return require_url(ws, "bucket")


def _resolve_target(ws: Workspace, exp: str, rows: Sequence[RunRow], cohort: str, base: str, split: str,
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
        return Target(kind="base", step=0, model=base)
    folder = _checkpoint_folder(ws, exp, ck)
    return Target(kind="checkpoint", run=ck.run, step=ck.step, model=str(folder), recipe=ck.recipe)


def _checkpoint_folder(ws: Workspace, exp: str, ck: rules.Checkpoint) -> Path:
    """The checkpoint's servable folder, every file proven against its lineage commit."""
    from monte.training.chunk import _checkpoint_info

    return ws.data_root / _checkpoint_info(ws, exp, ck)["weights"]


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
    return [json.loads(line) for line in raw.decode().splitlines() if line.strip()]


class EvalResult(BaseModel):
    experiment: str
    runs: list[dict[str, Any]]


def run_eval(ws: Workspace, plan: EvalPlan, *, on_progress: Callable[[int, int], None] | None = None,
             load: Callable[[Path], tuple[Any, Any]] | None = None,
             on_transition: Transition | None = None) -> EvalResult:
    """Run the plan: one row per exam. ``on_transition(row, transition)`` is called right after
    each transition's record lands (started, scored, finished); with ``plan.push`` and none given,
    a :class:`Pusher` uploads the results then, and a finished run's failed final push refuses."""
    from monte.envs.registry import get as get_bench
    from monte.models import generate as gen

    ledger = Ledger(ws.store, plan.experiment)
    splits = {e.exam: _read_split(ws, e) for e in plan.exams}  # proven before any touch is spent
    pusher = None
    if plan.push and on_transition is None:
        pusher = Pusher(ws, plan.experiment)
        pusher.preflight()
        on_transition = pusher
    transition = on_transition or (lambda row, what: None)
    ensure_base(ws.store, plan.experiment, plan.base_model, plan.base_files)
    model = tok = None
    results = []
    for e in plan.exams:
        items = splits[e.exam][:SMOKE_TASKS] if plan.smoke else splits[e.exam]
        row = _start(ledger, plan, e)
        log_event(ws, plan.experiment, row.run, "started", exam=e.exam, split=e.split, target=plan.target.label)
        transition(row, "started")
        try:
            if model is None:
                model, tok = (load or gen.load)(Path(plan.target.model))
            answers = gen.generate(model, tok, [str(i["prompt"]) for i in items],
                                   max_new_tokens=plan.settings["max_new_tokens"],
                                   batch_size=plan.settings["batch_size"],
                                   temperature=plan.settings["temperature"], top_p=plan.settings["top_p"],
                                   stop=plan.settings["stop"], chat_template=plan.settings["chat_template"],
                                   on_batch=on_progress)
            bench = get_bench(e.benchmark).benchmark
            tasks = [{"id": i["id"], "score": float(bench.grade(i, a)), "answer": a[:200]}
                     for i, a in zip(items, answers, strict=True)]
        except BaseException as exc:
            reason = (f"{exc.code}: {exc.message}" if isinstance(exc, MonteError)
                      else "interrupted" if isinstance(exc, KeyboardInterrupt)
                      else f"{type(exc).__name__}: {exc}")
            _finish(ledger, row, "failed", error_text=reason)
            log_event(ws, plan.experiment, row.run, "failed", reason=reason,
                      traceback=traceback.format_exc()[-2000:])
            failed = ledger.row(row.run)
            transition(failed or row, "finished")
            raise
        # one record both scores the run and ends it: the "scored" and "finished" transitions land
        # together, so one push reports both
        done = _finish(ledger, row, "succeeded", tasks=tasks, smoke=plan.smoke)
        log_event(ws, plan.experiment, row.run, "succeeded", score=done.score, n=done.n)
        transition(done, "finished")
        results.append(done.model_dump(mode="json"))
    if pusher is not None:
        pusher.check()
    return EvalResult(experiment=plan.experiment, runs=results)


def _start(ledger: Ledger, plan: EvalPlan, e: ExamPlan, *, who: dict[str, Any] | None = None,
           extra_plan: dict[str, Any] | None = None) -> RunRow:
    """The ``started`` record: the touch is spent here (the seal's rules, re-checked on the tip).
    On a box running a laptop's submission, the row the laptop started is adopted instead."""
    if e.exam in plan.adopt:
        return adopt_row(ledger, plan.adopt[e.exam], kind="eval", check=lambda r: (
            r.exam == e.exam and r.split == e.split and r.smoke == plan.smoke
            and (r.plan.get("target") or {}).get("run") == plan.target.run
            and r.step == plan.target.step))
    run = new_run_id()
    who = who or me()

    def make(snap: Snapshot, seq: int) -> RunRow:
        rows = read_rows(ledger, snap)
        role = None
        if e.split == "test" and not plan.smoke:  # re-checked on the tip: racing claims, one wins
            role = rules.check_test_read(rows, plan.cohort, e.exam, on_checkpoint=plan.target.kind == "checkpoint")
        return RunRow(run=run, experiment=plan.experiment, kind="eval", status="started", created_at=now(),
                      updated_at=now(), cohort=plan.cohort, model=plan.target.model, exam=e.exam,
                      split=e.split, step=plan.target.step, smoke=plan.smoke, role=role,
                      plan={"target": plan.target.model_dump(), "benchmark": e.benchmark,
                            "split_sha256": e.sha256, "settings": plan.settings,
                            "base_model": plan.base_model, **(extra_plan or {})},
                      **who)

    return ledger.append_row(make, event="started",
                             summary=lambda r: f"eval {r.exam}/{r.split}@{r.step} started: {r.run}"
                             + (" (smoke)" if r.smoke else ""),
                             trailers=lambda r: {"Monte-Exam": r.exam or "", **({"Monte-Role": r.role} if r.role else {})})


def _finish(ledger: Ledger, row: RunRow, status: str, *, tasks: list[dict[str, Any]] | None = None,
            smoke: bool = False, error_text: str | None = None) -> RunRow:
    body = (b"".join(json.dumps(t, sort_keys=True, ensure_ascii=False, separators=(",", ":")).encode() + b"\n"
                     for t in tasks) if tasks else None)

    def make(snap: Snapshot, seq: int) -> RunRow:
        update: dict[str, Any] = {"status": status, "updated_at": now(), "error": error_text}
        if tasks is not None:
            update["n"] = len(tasks)
            if not smoke:
                update["score"] = sum(t["score"] for t in tasks) / len(tasks) if tasks else 0.0
                update["delta"] = _delta(ledger, snap, row, tasks)
        return row.model_copy(update=update)

    def summary(r: RunRow) -> str:
        what = f"eval {r.exam}/{r.split}@{r.step} {status}: {r.run}"
        return what + (f" score {r.score:.4f} (n={r.n})" if r.score is not None else "")

    return ledger.append_row(make, event="finished" if status == "succeeded" else status, summary=summary,
                             files=(lambda r: {"tasks.jsonl": body}) if body else None,
                             trailers=lambda r: {"Monte-Exam": r.exam or "", "Monte-Status": status})


def _delta(ledger: Ledger, snap: Snapshot, row: RunRow, tasks: list[dict[str, Any]]) -> dict[str, Any] | None:
    """Paired against the cohort's baseline on this exam and split (unpaired when a per-task
    file cannot be read or the tasks do not line up)."""
    from monte.stats.paired import paired_delta, unpaired_delta, verdict

    rows = read_rows(ledger, snap)
    base = rules.baseline(rows, row.cohort, row.exam or "", row.split or "")
    if base is None or base.run == row.run or row.plan.get("target", {}).get("kind") == "base":
        return None
    base_tasks = read_tasks(snap, base.run)
    mine = {t["id"]: float(t["score"]) for t in tasks}
    if base_tasks is not None and {t["id"] for t in base_tasks} == set(mine):
        ids = [t["id"] for t in base_tasks]
        d = paired_delta([float(t["score"]) for t in base_tasks], [mine[i] for i in ids])
    else:
        scores = list(mine.values())
        binary = all(s in (0.0, 1.0) for s in scores)
        d = unpaired_delta(base.score or 0.0, base.n or len(scores), sum(scores) / len(scores), len(scores),
                           binary=binary)
    return {"baseline": base.run, "delta": d.delta, "lower": d.lower, "upper": d.upper, "n": d.n,
            "fixed": d.fixed, "broken": d.broken, "paired": d.paired, "method": d.method,
            "verdict": verdict(d)}


# --- nominate ------------------------------------------------------------------------------------


def nominate(ws: Workspace, *, ref: str, experiment: str | None, model: str | None) -> dict[str, Any]:
    exp0, run, step = parse_run_ref(ref, None)
    exp = experiment_name(ws, experiment or exp0)
    ledger = Ledger(ws.store, exp)
    snap = ledger.snapshot()
    meas = ledger.measurement(snap)
    rows = read_rows(ledger, snap)
    ck = rules.find_checkpoint(rows, run, step)
    dev_exams = sorted(e for e, x in meas.exams.items() if "dev" in x.splits)
    result: dict[str, Any] = {}

    def build(snap: Snapshot) -> Change:
        rows = read_rows(ledger, snap)
        rules.nominee_is_admissible(rows, ck, dev_exams)
        claims = [r for r in rows if r.cohort == ck.cohort and r.role == "claim"]
        if claims:
            raise error("E_SEALED", f"the final claim of cohort {ck.cohort} has started ({claims[0].run}); "
                        "the nomination is fixed", "nothing to do: the claim is the record")
        body = {"checkpoint": ck.ref, "cohort": ck.cohort, "at": now()}
        result.update(body)
        return Change(summary=f"nominate {ck.ref} for the final claim of cohort {ck.cohort}",
                      writes={f"cohorts/{ck.cohort}/nomination.json": dumps(body)},
                      trailers={"Monte-Event": "nominate", "Monte-Run": ck.run, "Monte-Step": str(ck.step),
                                "Monte-Cohort": ck.cohort})

    ws.store.append(ledger.ref, build)
    return {"experiment": exp, **result}


def adopt_row(ledger: Ledger, run: str, *, kind: str, check: Callable[[RunRow], bool]) -> RunRow:
    """On a box: take over the run a laptop started for this job (``--remote``), moving it from
    ``started`` to ``running`` with this host and process. The laptop's ``started`` record already
    spent the touch and passed the rules; what this box is about to run must be that plan."""
    who = me()

    def make(snap: Snapshot, seq: int) -> RunRow:
        row = ledger.row(run, snap)
        if row is None:
            raise error("E_NOT_FOUND", f"run {run} is not in this ledger",
                        f"sync the experiment first (`monte sync {ledger.experiment}`)")
        if row.kind != kind or row.status != "started" or not row.plan.get("remote"):
            raise error("E_CONFLICT", f"run {run} is a {row.status} {row.kind} row, not a submitted job waiting "
                        "for this box", "submit the job again from the laptop")
        if not check(row):
            raise error("E_CONFLICT", f"run {run} was submitted with another plan than this box would run",
                        "check out the submitted commit, or submit again")
        return row.model_copy(update={"status": "running", "updated_at": now(), **who})

    return ledger.append_row(make, event="running", summary=lambda r: f"{kind} {r.run} running on {r.host}")
