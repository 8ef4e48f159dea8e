"""A run's life, shared by evaluation and training: which experiment, the rows as they stand,
adopting a submitted row on a box, the transitions and the push after each one, the one way an
exception becomes a failure reason, and abandoning a run.

The records themselves (what a ``started`` eval row or a checkpoint holds) are written by
:mod:`monte.evals` and :mod:`monte.training`; both build on this module, and this module imports
neither.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import traceback
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Literal, get_args

from monte import jsonl
from monte.errors import MonteError, error
from monte.ledger import cohorts, rules
from monte.ledger.experiment import Ledger, experiment_names, one_experiment
from monte.ledger.predicates import is_base_eval, is_test_read
from monte.ledger.records import RunRow, run_dir
from monte.ledger.store import Snapshot
from monte.manifest import now
from monte.names import check_name
from monte.result_type import Result
from monte.runs.folders import log_event, portable_text
from monte.runs.liveness import is_dead, proc_start, this_process
from monte.runs.naming import parse_run_ref
from monte.workspace import Workspace

#: The moments of a run (seeds, "Remote runs") whose record, once it lands, calls ``on_transition``:
#: after each one, --push uploads its results. Record events, not a row's status moves
#: (``monte.ledger.verify.ROW_STATUS_MOVES``).
PushPoint = Literal["started", "checkpoint", "scored", "weights-uploaded", "finished"]
PUSH_POINTS: tuple[PushPoint, ...] = get_args(PushPoint)
ENDED = ("succeeded", "failed", "abandoned")

#: ``on_transition(row, moment)``: called right after a moment's record lands.
Transition = Callable[[RunRow, PushPoint], None]


def experiment_name(ws: Workspace, given: str | None) -> str:
    """The experiment named, or the only one in the repository."""
    return one_experiment(ws.store, given)


def read_rows(ledger: Ledger, snap: Snapshot | None = None) -> list[RunRow]:
    """The rows at the tip; a started/running row whose process died reads ``abandoned``."""
    return [_live(r) for r in ledger.rows(snap)]


def _live(r: RunRow) -> RunRow:
    return (r.model_copy(update={"status": "abandoned", "error": "the process died without finishing"})
            if is_dead(r) else r)


class CohortReads:
    """A cohort's baselines and test reads at a tip, as :func:`rules.baseline` and
    :func:`rules.test_touches` give them over :func:`read_rows`: from the cohort's derived index
    and one row read per run named (O(1) in the ledger's runs), or, on a ledger that has no index
    for the cohort yet (written before there was one), from the rows, read once."""

    def __init__(self, ledger: Ledger, snap: Snapshot, cohort: str) -> None:
        self.ledger = ledger
        self.snap = snap
        self.cohort = cohort
        self.index = ledger.cohort_index(cohort, snap)
        self._rows: list[RunRow] | None = None

    def rows(self) -> list[RunRow]:
        if self._rows is None:
            self._rows = read_rows(self.ledger, self.snap)
        return self._rows

    def _row(self, run: str, fits: Callable[[RunRow], bool]) -> RunRow:
        row = self.ledger.row(run, self.snap)
        if row is None or row.cohort != self.cohort or not fits(row):
            raise error("E_INTEGRITY", f"the index of cohort {self.cohort} names run {run}, whose row does not "
                        "fit it: the derived file was written by hand", "run `monte ledger verify`")
        return _live(row)

    def baseline(self, exam: str, split: str) -> RunRow | None:
        if self.index is None:
            return rules.baseline(self.rows(), self.cohort, exam, split)
        run = cohorts.baseline(self.index, exam, split)
        if run is None:
            return None
        return self._row(run, lambda r: is_base_eval(r) and r.exam == exam and r.split == split)

    def test_touches(self, exam: str) -> list[RunRow]:
        if self.index is None:
            return rules.test_touches(self.rows(), self.cohort, exam)
        return [self._row(run, lambda r: is_test_read(r) and r.exam == exam)
                for run in cohorts.test_reads(self.index, exam)]


def read_tasks(snap: Snapshot, run: str) -> list[dict[str, Any]] | None:
    """A run's per-task scores (``tasks.jsonl``), or None when absent or unreadable."""
    raw = snap.read(f"{run_dir(run)}/tasks.jsonl")
    if raw is None:
        return None
    try:
        return jsonl.load_lines(raw)  # split on \n only: tasks written raw by an older monte read too
    except (ValueError, UnicodeDecodeError):
        return None


def push_bucket(ws: Workspace) -> str:
    """``--push`` needs a results bucket: refuse (E_STORAGE) before any compute when none is named."""
    from monte.storage.locations import require_url

    return require_url(ws, "bucket")


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

        results.open_bucket(self.ws, bucket=None, key_file=None, write=True, flags=False)

    def __call__(self, row: RunRow, transition: str) -> None:
        from monte.storage import results

        try:
            results.push(self.ws, self.experiment, run=row.run)
        except Exception as exc:  # a push never kills the run it reports on
            e = exc if isinstance(exc, MonteError) else error(
                "E_STORAGE", f"the push failed ({type(exc).__name__})", "retry with `monte push`")
            log_event(self.ws, self.experiment, row.run, "push-failed", transition=transition,
                      code=e.code, message=e.message)
            if row.status in ENDED:
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


def transitions(ws: Workspace, experiment: str, push: bool,
                on_transition: Transition | None) -> tuple[Transition, Pusher | None]:
    """What runs after each transition: the caller's hook, or with ``push`` and none given, a
    :class:`Pusher` (its bucket opened now, before any compute)."""
    if push and on_transition is None:
        pusher = Pusher(ws, experiment)
        pusher.preflight()
        return pusher, pusher
    return on_transition or (lambda row, what: None), None


def failure_reason(exc: BaseException) -> str:
    """The one line a failed row records for the exception that ended it."""
    if isinstance(exc, MonteError):
        return f"{exc.code}: {exc.message}"
    if isinstance(exc, KeyboardInterrupt):
        return "interrupted"
    return f"{type(exc).__name__}: {exc}"


def record_failure(ws: Workspace, experiment: str, row: RunRow, exc: BaseException,
                   finish: Callable[[str], RunRow], transition: Transition, event: str = "failed") -> RunRow:
    """The run ended in ``exc``: record it ``failed`` (``finish(reason)`` appends the record),
    keep the reason and traceback in the run's event file (as ``event``), and report the
    ``finished`` transition."""
    reason = portable_text(ws, failure_reason(exc))  # the record reads the same wherever the repository is
    try:
        failed = finish(reason)
    except MonteError as e:
        if e.code != "E_CONFLICT":
            raise
        return row  # stopped meanwhile (another host's `monte stop`): that record stands
    try:
        log_event(ws, experiment, row.run, event, reason=reason, traceback=traceback.format_exc()[-3000:])
    except OSError:  # the record matters; an event file that cannot be written must not hide it
        pass
    transition(failed, "finished")
    return failed


class Run:
    """The run inside :func:`running`: its row as it last moved, and the moments it reports."""

    def __init__(self, row: RunRow, transition: Transition) -> None:
        self.row = row
        self.transition = transition
        self.finishing = False  # once the finishing record is being written, an error is not the run's failure

    def moved(self, row: RunRow, moment: PushPoint) -> RunRow:
        """A record of this run landed (``checkpoint``, ``weights-uploaded``): report it."""
        self.row = row
        self.transition(row, moment)
        return row

    def finish(self, record: Callable[[RunRow], RunRow]) -> RunRow:
        """Write the finishing record (``record(row)``) and report ``finished``. A finishing
        record that cannot be written is not recorded as the run's failure: the run did its
        work, and what it refuses with says where its result is kept."""
        self.finishing = True
        done = record(self.row)
        return self.moved(done, "finished")


@contextmanager
def running(ws: Workspace, experiment: str, start: Callable[[], RunRow], *, transition: Transition,
            fail: Callable[[RunRow, str], RunRow], event: str = "failed",
            started: Callable[[RunRow], None] | None = None) -> Iterator[Run]:
    """A run's life, one way for evaluation and training: ``start()`` writes the ``started``
    record (or adopts a submitted row), ``started(row)`` notes it in the run's event file, and
    the ``started`` moment is reported; the body does the
    work, reporting each record through :meth:`Run.moved` and ending with :meth:`Run.finish`.

    While it runs, SIGTERM (``monte stop``, a box's watchdog) raises E_STOPPED. Any exception
    from the body, Ctrl-C included, records the run ``failed`` (``fail(row, reason)`` appends
    that record, the event file keeps the traceback as ``event``) and reports ``finished``; a
    stop then refuses E_STOPPED and Ctrl-C E_INTERRUPTED, each saying what the row reads and
    what its ``started`` record spent."""
    with sigterm_stops():
        run = Run(start(), transition)
        try:
            if started is not None:
                started(run.row)
            transition(run.row, "started")
            yield run
        except BaseException as exc:
            if run.finishing:
                raise
            record_failure(ws, experiment, run.row, exc, finish=lambda reason: fail(run.row, reason),
                           transition=transition, event=event)
            if isinstance(exc, MonteError) and exc.code == "E_STOPPED":
                raise stopped_message(Ledger(ws.store, experiment), run.row.run) from None
            if isinstance(exc, KeyboardInterrupt):  # say what the started record spent
                raise interrupted_message(Ledger(ws.store, experiment), run.row.run) from None
            raise


def adopt_row(ledger: Ledger, run: str, *, kind: str, check: Callable[[RunRow], bool]) -> RunRow:
    """On a box: take over the run a laptop started for this job (``--remote``), moving it from
    ``started`` to ``running`` with this host and process. The laptop's ``started`` record already
    spent the touch and passed the rules; what this box is about to run must be that plan."""
    who = this_process()

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


def abandon(ledger: Ledger, run: str, reason: str) -> RunRow:
    """Record a started/running run as ``abandoned`` (``monte stop``, a box's dead job)."""

    def make(snap: Snapshot, seq: int) -> RunRow:
        current = ledger.row(run, snap)
        if current is None or current.status not in ("started", "running"):
            raise error("E_REFUSED", f"run {run} is no longer running", "nothing to do")
        return current.model_copy(update={"status": "abandoned", "updated_at": now(), "error": reason[:500]})

    return ledger.append_row(make, event="abandoned", summary=lambda r: f"{r.kind} {r.run} abandoned (monte stop)")


def find_run(ws: Workspace, ref: str, experiment: str | None) -> tuple[Ledger, RunRow]:
    """The run ``ref`` names (``RUN``, ``EXP/RUN``, with or without ``@STEP``), in the experiment
    given or any of them; its row as :func:`read_rows` reads it."""
    exp0, run, _ = parse_run_ref(ref, None)
    exps = [experiment or exp0] if (experiment or exp0) else experiment_names(ws.store)
    for exp in exps:
        ledger = Ledger(ws.store, check_name(exp or "", "experiment name"))
        snap = ledger.snapshot()
        row = ledger.row(run, snap)
        if row is not None:
            rows = [r for r in read_rows(ledger, snap) if r.run == run]
            return ledger, rows[0] if rows else row
    raise error("E_NOT_FOUND", f"no run {run!r}" + (f" in experiment {exps[0]}" if len(exps) == 1 else ""),
                "list runs with `monte status`")


@dataclass(frozen=True)
class StopResult(Result):
    """``monte stop``: the run, the status it now reads, whether its process was signalled. (Not
    :class:`monte.errors.Stopped`, the E_STOPPED refusal a stopped run's own command gives.)"""

    run: str
    status: str
    signalled: bool


def stop(ws: Workspace, ref: str, *, experiment: str | None = None, reason: str | None = None) -> StopResult:
    """``monte stop``: terminate a running Run (on this host) and record it as abandoned
    (``reason``: why, for the row; a box's job wrapper says how its job ended)."""
    ledger, row = find_run(ws, ref, experiment)
    if row.status not in ("started", "running", "abandoned"):
        raise error("E_REFUSED", f"run {row.run} has {row.status}; only a running run can be stopped",
                    "nothing to do")
    killed = False
    local = row.host == socket.gethostname() and row.pid and row.status != "abandoned" \
        and proc_start(row.pid) == row.proc_start
    # recorded first, then signalled: the stopped process finds its row abandoned and leaves it so
    done = abandon(ledger, row.run, reason or f"stopped by `monte stop` on {socket.gethostname()}")
    # a process stopping its own run (`monte mcp` cancelling a tool call) is not signalled: its
    # worker ends the run at its next progress report, and the abandoned record stands
    if local and row.pid and row.pid != os.getpid():
        try:
            os.kill(row.pid, signal.SIGTERM)
            killed = True
        except ProcessLookupError:
            pass
    log_event(ws, ledger.experiment, row.run, "abandoned", reason=(reason or "monte stop")[:500], killed=killed)
    return StopResult(run=done.run, status=done.status, signalled=killed)


# --- a score is never lost ---------------------------------------------------------------------

#: the result of a run, written to its folder before the finishing append (``monte recover``
#: records it when that append could not be written)
PENDING = "finish.json"
_PROBE_FLOOR = 256 << 10


class sigterm_stops:  # noqa: N801 - used as a context manager, reads as a phrase
    """While a run runs, SIGTERM (`monte stop`, a box's watchdog) raises E_STOPPED in it, so the
    run ends through the same failure path as any other error and the command says so."""

    def __enter__(self) -> sigterm_stops:
        import threading

        self.previous: Any = None
        if threading.current_thread() is threading.main_thread():
            self.previous = signal.signal(signal.SIGTERM, self._stop)
        return self

    @staticmethod
    def _stop(signum: int, frame: Any) -> None:
        raise error("E_STOPPED", "stopped by SIGTERM (`monte stop`, or a box's watchdog)", "")

    def __exit__(self, *exc: object) -> None:
        if self.previous is not None:
            signal.signal(signal.SIGTERM, self.previous)


def stopped_message(ledger: Ledger, run: str) -> MonteError:
    """What a stopped run's own terminal is told: who stopped it, if known, what its row reads,
    and (a test read) that the read is spent."""
    row = ledger.row(run)
    status = row.status if row else "unknown"
    why = f" ({row.error})" if row and row.error else ""
    spent, fix = spent_words(row)
    return error("E_STOPPED", f"run {run} was stopped{why}; its row reads {status}{spent}",
                 "see `monte show " + run + "`; " + (fix or "start a new run to go on"))


def interrupted_message(ledger: Ledger, run: str) -> MonteError:
    """What an interrupted run (Ctrl-C) says once its failure is recorded: what its row reads and
    what was spent; "run the command again" only where that can work."""
    row = ledger.row(run)
    status = row.status if row else "unknown"
    spent, fix = spent_words(row)
    return error("E_INTERRUPTED", f"run {run} was interrupted; its row reads {status}{spent}",
                 "see `monte show " + run + "`; " + (fix or "run the command again (a new run)"))


def spent_words(row: RunRow | None) -> tuple[str, str]:
    """(what was spent, what to do) for a run that ended without a score: a test read's
    ``started`` record spent the touch, and running the command again is refused E_SEALED."""
    if row is None or not is_test_read(row) or row.role not in ("baseline", "claim"):
        return "", ""
    what = "test@0 (the baseline read)" if row.role == "baseline" else "the final claim (the second test read)"
    spent = (f"; its started record spent {what} of exam {row.exam} in cohort {row.cohort}: the read is gone, "
             "and running the command again is refused (E_SEALED)")
    if row.role == "claim":
        return spent, ("the claim stands as recorded; another claim needs another cohort: " + rules.NEW_COHORT_FIX)
    return spent, ("this cohort can never take its test baseline, so it cannot train: " + rules.NEW_COHORT_FIX)


def probe_writable(ws: Workspace, experiment: str, need: int) -> None:
    """Before a touch is spent: prove that the data root and the repository can take this run's
    results (a real write of ``need`` bytes to each file system, then removed); refuse E_STORAGE
    otherwise, with nothing written."""
    import errno
    import tempfile
    from pathlib import Path

    git_dir = Path(ws.store.repo.commondir())  # refs and objects: a linked worktree's live in the main one's
    need = max(int(need), _PROBE_FLOOR)
    for folder, what in ((ws.runs_folder(experiment), "the data root"),
                         (git_dir / "objects", "the repository's object store")):
        try:
            folder.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(prefix=".monte-probe-", dir=folder)
            try:
                try:
                    os.posix_fallocate(fd, 0, need)
                except OSError as e:  # a file system without fallocate: write the bytes
                    if e.errno not in (errno.EOPNOTSUPP, errno.EINVAL, errno.ENOSYS):
                        raise
                    os.write(fd, bytes(need))
                os.fsync(fd)
            finally:
                os.close(fd)
                os.unlink(tmp)
        except OSError as e:
            raise error("E_STORAGE", f"{what} ({folder}) cannot take this run's results: {os_reason(e)}; "
                        "nothing was started and no test read was spent",
                        "free space on that file system, or make it writable, and run the command again") from None
    refs = git_dir / "refs"
    if not os.access(refs, os.W_OK) or not os.access(git_dir, os.W_OK):
        raise error("E_STORAGE", f"the repository's refs ({refs}) cannot be written; nothing was started and no "
                    "touch was spent", "make the repository writable and run the command again")


def os_reason(e: OSError) -> str:
    """What an OSError means to a person, in a few words."""
    import errno

    return {errno.ENOSPC: "the disk is full", errno.EDQUOT: "the disk quota is exceeded",
            errno.EROFS: "the file system is read-only", errno.EACCES: "permission denied",
            errno.EPERM: "permission denied", errno.EXDEV: "a move across file systems",
            errno.EIO: "an I/O error"}.get(
        e.errno or 0, e.strerror or type(e).__name__)


def save_pending(ws: Workspace, experiment: str, run: str, result: dict[str, Any]) -> None:
    """Keep the run's result durable in its folder (write, fsync, rename) before it is recorded."""
    folder = ws.run_folder(experiment, run)
    folder.mkdir(parents=True, exist_ok=True)
    tmp = folder / f".{PENDING}.{os.getpid()}"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(json.dumps(result, sort_keys=True))
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, folder / PENDING)


#: the answers' digest the generating process wrote before grading, signed with the repository's
#: key: `monte recover` records a kept result only when its answers are these
GENERATED = "generated.json"


def answers_digest(answers: Sequence[str]) -> str:
    """sha256 of the answers, in order (each a JSON string: no separator can be forged in)."""
    import hashlib

    return hashlib.sha256(json.dumps([str(a) for a in answers], ensure_ascii=True).encode()).hexdigest()


def _generated_body(run: str, digest: str) -> bytes:
    return f"monte-generated 1\0{run}\0{digest}".encode()


def stamp_generated(ws: Workspace, experiment: str, run: str, answers: Sequence[str]) -> None:
    """Record, before anything is graded, what this run's process generated (best effort: a run
    whose stamp cannot be written still finishes; only its `monte recover` is then refused)."""
    from monte.ledger.derived import mac

    digest = answers_digest(answers)
    try:
        sig = mac(ws.store.repo.commondir(), _generated_body(run, digest), create=True)
        if sig is None:
            return
        folder = ws.run_folder(experiment, run)
        folder.mkdir(parents=True, exist_ok=True)
        tmp = folder / f".{GENERATED}.{os.getpid()}"
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(json.dumps({"answers_sha256": digest, "mac": sig.hex()}, sort_keys=True))
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, folder / GENERATED)
    except OSError:
        pass


def generated_digest(ws: Workspace, experiment: str, run: str) -> str | None:
    """The answers' digest the run's own process stamped (:func:`stamp_generated`), None where
    there is none or its MAC under the repository's key does not hold."""
    import hmac

    from monte.ledger.derived import mac

    try:
        data = json.loads((ws.run_folder(experiment, run) / GENERATED).read_text(encoding="utf-8"))
        digest, got = str(data["answers_sha256"]), bytes.fromhex(str(data["mac"]))
    except (OSError, ValueError, KeyError, TypeError):
        return None
    want = mac(ws.store.repo.commondir(), _generated_body(run, digest), create=False)
    return digest if want is not None and hmac.compare_digest(want, got) else None


def read_pending(ws: Workspace, experiment: str, run: str) -> dict[str, Any] | None:
    path = ws.run_folder(experiment, run) / PENDING
    try:
        data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data


def clear_pending(ws: Workspace, experiment: str, run: str) -> None:
    try:
        (ws.run_folder(experiment, run) / PENDING).unlink()
    except OSError:
        pass


def with_retries(append: Callable[[], RunRow], *, attempts: int = 4, pause: float = 0.25) -> RunRow:
    """An append that may meet a transient failure (a lock held by git maintenance, a file
    system that is briefly full): try a few times, then let the last failure through."""
    import time

    for i in range(attempts):
        try:
            return append()
        except OSError:
            if i == attempts - 1:
                raise
            time.sleep(pause * (2 ** i))
    raise AssertionError("unreachable")


def require_live(row: RunRow | None, run: str) -> RunRow:
    """A finishing record only ever moves a live row (started or running): a row stopped
    elsewhere (``monte stop`` from another host) stays as it was recorded."""
    if row is None:
        raise error("E_NOT_FOUND", f"run {run} is not in this ledger", "run `monte ledger verify`")
    if row.status not in ("started", "running"):
        raise error("E_CONFLICT", f"run {run} was recorded {row.status} while it ran"
                    + (f" ({row.error})" if row.error else "") + "; its result is not written over that record",
                    f"its result is kept in its run folder ({PENDING}); start a new run to record a score")
    return row
