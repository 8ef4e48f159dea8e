"""The crash-consistency harness: start a monte command as a real subprocess, SIGKILL its whole
process group at a chosen moment, then check that the repository, the data root and the
buckets are still consistent and that the next command works.

Shared by the CI test (``tests/reliability/test_crash.py``: a handful of trials per command) and
the long campaign (``bench/crash_campaign.py``: >= 50 trials per command). Nothing here imports
pytest, so the bench script imports it as it is (``tests.support.crashhelp``).

A trial:

1. copies a prepared template (a monte repository with a trainable environment, an SFT dataset,
   an experiment with 4-step chunks, baselines, a checkpoint; a results bucket with a first push)
   into a fresh folder, so no trial sees another's leftovers;
2. reads the state before (refs, rows, vault names, the bucket);
3. starts the command (``sys.executable -c "from monte.cli.main import main; main()" ...``,
   ``start_new_session=True``, ``OMP_NUM_THREADS=1``) and SIGKILLs its process group after a
   delay drawn uniformly from ``[0, typical duration]`` (measured once, when the template is
   built), or at a named **crash point** (a function of monte or dulwich, entered or returned
   from for the n-th time: the process kills its own group there, so a window of a few
   microseconds is hit every time);
4. classifies the moment of the kill from what the command left: ``before`` (it had recorded
   nothing), ``mid`` (its first record landed, its last did not), ``after`` (everything was
   recorded; the process was still tearing down or had exited);
5. checks: ``monte ledger verify --all --json`` passes; ``git fsck --strict`` passes; every ref
   is a commit; ``monte status --json`` of every experiment exits 0 and every row parses; no row
   reads ``started``/``running``; the killed run reads ``abandoned``/``failed`` (``succeeded``
   only when the command had finished); nothing recorded before is lost and every ref only moved
   forward; every frozen folder has its manifest and matches the vault ref;
6. runs the next command of the same kind to completion: it must exit 0, or refuse exactly as
   the record says it must (a spent test touch: ``E_SEALED``; a name whose freeze was recorded:
   ``E_NAME_TAKEN``, and then ``monte env install``/``monte dataset show`` verifies it); a push
   must complete and a fresh clone that syncs must see every run exactly once;
7. checks everything again after the next command, and counts staging folders left in
   ``<data root>/tmp`` (a stale one must never block, and is swept).
"""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from .helpers import PINNED_ENV, as_is, home_env, new_machine

#: The commands a trial can kill.
COMMANDS = ("eval", "eval-test", "train", "env-add", "dataset-add", "push")

#: Run as ``python -c BOOT ARGS``: arm the crash point named by ``MONTE_CRASH_POINT`` (if any),
#: then run monte's CLI. A crash point is ``module:qualname:when:nth[:match]``: the process kills
#: its own process group with SIGKILL ``before`` entering or ``after`` returning from the n-th call
#: of that function (whose first argument's ``_filename``/repr contains ``match``, when given).
BOOT = r"""
import os, signal, sys
spec = os.environ.pop("MONTE_CRASH_POINT", "")
if spec:
    import importlib
    mod, qual, when, nth, *match = spec.split(":", 4)
    match = match[0] if match else ""
    owner = importlib.import_module(mod)
    names = qual.split(".")
    for part in names[:-1]:
        owner = getattr(owner, part)
    orig = getattr(owner, names[-1])
    calls = [0]

    def _die(why=""):
        if os.environ.get("MONTE_CRASH_SAY"):
            sys.stderr.write("crash point fired: " + why + "\n")
        sys.stdout.flush(); sys.stderr.flush()
        os.killpg(os.getpgid(0), signal.SIGKILL)

    def _armed(*a, **k):
        hit = True
        if match:
            first = a[0] if a else None
            hit = match in (str(getattr(first, "_filename", "")) + repr(a))
            hit = hit and not getattr(first, "_closed", False)  # an aborted lock file: a no-op close
        if hit:
            calls[0] += 1
        fire = hit and calls[0] == int(nth)
        why = spec + " " + repr(a)[:300] if fire else ""
        if fire and when == "before":
            _die(why)
        out = orig(*a, **k)
        if fire and when == "after":
            _die(why)
        return out

    setattr(owner, names[-1], _armed)
from monte.cli.main import main
main()
"""

ENV_NAME = "crashenv"
DATASET_NAME = "crashds"
EXP = "exp"

SFT_RECIPE = """\
algorithm: sft
learning_rate: 3.0e-3
lr_scheduler_type: constant
per_device_train_batch_size: 16
max_length: 32
"""


# --- running monte ---------------------------------------------------------------------------------


def base_env(home: Path, **extra: str) -> dict[str, str]:
    """The environment every monte process of a trial runs in: the tests' own (``helpers``: out of
    $HOME and the developer's git config, git's author, committer and clock pinned, one torch
    thread, no network), and no bucket or vault unless named."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("MONTE_", "GIT_", "STORAGE_EMULATOR", "GCSFS_"))}
    env.update({**PINNED_ENV, **home_env(home), "TOKENIZERS_PARALLELISM": "false", **extra})
    home.mkdir(parents=True, exist_ok=True)
    return env


def argv(*args: str) -> list[str]:
    return [sys.executable, "-c", BOOT, *args]


@dataclass
class Done:
    code: int
    out: str
    err: str
    seconds: float

    def json(self) -> Any:
        try:
            return json.loads(self.out)
        except ValueError:
            return None

    @property
    def error_code(self) -> str | None:
        doc = self.json()
        return doc.get("error", {}).get("code") if isinstance(doc, dict) and "error" in doc else None


def monte(cwd: Path, env: dict[str, str], *args: str, timeout: float = 600) -> Done:
    """Run monte to completion (setup, checks, the next command)."""
    t0 = time.monotonic()
    r = subprocess.run(argv(*args), cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    return Done(r.returncode, r.stdout, r.stderr, time.monotonic() - t0)


def git(repo: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    r = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True)
    if check and r.returncode != 0:
        raise RuntimeError(f"git {' '.join(args)} failed: {r.stderr}")
    return r


@dataclass
class Killed:
    delay: float  # when the kill was due (s after the start); -1 for a crash point
    elapsed: float  # when the process was gone
    killed: bool  # False: it exited on its own first
    code: int | None  # its exit status when it exited on its own
    out: str
    err: str


def start_and_kill(cwd: Path, env: dict[str, str], args: list[str], delay: float | None, logs: Path,
                   *, crash_point: str | None = None, timeout: float = 600) -> Killed:
    """Start monte in its own session; SIGKILL the whole group after ``delay`` seconds (or let the
    crash point fire). Output goes to files (a pipe nobody reads could stall the child)."""
    logs.mkdir(parents=True, exist_ok=True)
    env = dict(env)
    if crash_point:
        env["MONTE_CRASH_POINT"] = crash_point
        env["MONTE_CRASH_SAY"] = "1"
    with open(logs / "stdout", "w") as out, open(logs / "stderr", "w") as err:
        t0 = time.monotonic()
        proc = subprocess.Popen(argv(*args), cwd=cwd, env=env, stdout=out, stderr=err, start_new_session=True)
        pgid = proc.pid  # start_new_session: the child leads its own group
        due = t0 + delay if delay is not None else t0 + timeout
        killed = False
        while True:
            try:
                proc.wait(timeout=max(0.0, min(0.05, due - time.monotonic())))
                break
            except subprocess.TimeoutExpired:
                pass
            if time.monotonic() >= due:
                killed = True
                _killpg(pgid)
                proc.wait()
                break
        elapsed = time.monotonic() - t0
        _killpg(pgid)  # anything the command started that outlived it (a git child, a worker)
    code = proc.returncode
    if code == -signal.SIGKILL:  # a crash point fired: the group killed itself
        killed = True
    return Killed(delay if delay is not None else -1.0, elapsed, killed, None if killed else code,
                  (logs / "stdout").read_text(), (logs / "stderr").read_text())


def _killpg(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    # reap nothing else: only the group we started is signalled


# --- the template ----------------------------------------------------------------------------------


@dataclass
class Template:
    """Two prepared repositories (copied per trial) and the measured duration of each command.

    ``fresh``: the trainable environment ``parity``, the SFT dataset ``parity-sft``, the
    experiment ``exp`` (4 steps per chunk) and its dev baseline, no test read yet (the test-touch
    trials kill ``test@0``). ``ready``: ``fresh`` plus ``test@0``, one trained chunk (a checkpoint)
    and a first push to its results bucket (``bucket/`` beside ``repo/``)."""

    root: Path
    model: Path
    rows: Path  # SFT rows for `dataset add`
    typical: dict[str, float] = field(default_factory=dict)

    @property
    def fresh(self) -> Path:
        return self.root / "fresh"

    @property
    def ready(self) -> Path:
        return self.root / "ready"

    def save(self) -> None:
        (self.root / "template.json").write_text(json.dumps(
            {"model": str(self.model), "rows": str(self.rows), "typical": self.typical}, indent=1))

    @classmethod
    def load(cls, root: Path) -> Template:
        d = json.loads((root / "template.json").read_text())
        return cls(root, Path(d["model"]), Path(d["rows"]), d["typical"])


def _ok(d: Done, what: str) -> Done:
    if d.code != 0:
        raise RuntimeError(f"template: {what} failed ({d.code}): {d.out[-2000:]} {d.err[-2000:]}")
    return d


def build_template(root: Path, model: Path | None = None, log: Any = None, fresh_only: bool = False) -> Template:
    """Build both repositories, timing each command kind once (the trials' kill window).

    ``fresh_only``: ``fresh`` alone, with the durations of env-add, dataset-add and eval: enough
    for trials of env-add and dataset-add, the commands that start from it and not from ``ready``."""
    say = log or (lambda msg: None)
    root.mkdir(parents=True, exist_ok=True)
    env = base_env(root / "home")
    if model is None:
        model = root / "model"
        if not (model / "config.json").is_file():
            _ok(monte(root, env, "model", "init", str(model), "--seed", "0"), "model init")
    tpl = Template(root, model, root / "sft-rows.jsonl")
    box = tpl.fresh
    repo = box / "repo"
    shutil.rmtree(box, ignore_errors=True)
    repo.mkdir(parents=True)
    git(repo, "init", "-q", "-b", "main")
    _ok(monte(repo, env, "init"), "init")
    d = _ok(monte(repo, env, "env", "add", "--server", "parity", "--dev", "parity", "--test", "parity",
                  "--json"), "env add")
    tpl.typical["env-add"] = d.seconds
    items = [json.loads(line) for line in
             (repo / ".monte" / "environments" / "parity" / "curriculum.jsonl").read_text().splitlines()[:256]]
    tpl.rows.write_text("".join(json.dumps({"input": it["prompt"], "output": " " + it["answer"]}) + "\n"
                                for it in items))
    d = _ok(monte(repo, env, "dataset", "add", "parity-sft", "--from-file", str(tpl.rows), "--kind", "sft",
                  "--json"), "dataset add")
    tpl.typical["dataset-add"] = d.seconds
    _ok(monte(repo, env, "experiment", "init", EXP, "--eval", "parity", "--model", str(model),
              "--steps-per-chunk", "4", "--json"), "experiment init")
    (repo / "recipes").mkdir(exist_ok=True)
    (repo / "recipes" / "sft-t.yaml").write_text(SFT_RECIPE)
    say("template: dev@0 ...")
    d = _ok(monte(repo, env, "eval", "--yes", "--json"), "dev@0")
    tpl.typical["eval"] = d.seconds
    (box / "bucket").mkdir()
    (box / "vault").mkdir()
    if fresh_only:  # its test read, chunk and pushes would serve no trial
        tpl.save()
        return tpl

    ready = tpl.ready
    shutil.rmtree(ready, ignore_errors=True)
    shutil.copytree(box, ready, symlinks=True)
    repo = ready / "repo"
    say("template: test@0 ...")
    d = _ok(monte(repo, env, "eval", "--split", "test", "--yes", "--json"), "test@0")
    tpl.typical["eval-test"] = d.seconds
    say("template: one chunk ...")
    d = _ok(monte(repo, env, *TRAIN_ARGS), "train")
    tpl.typical["train"] = d.seconds
    benv = dict(env, MONTE_BUCKET=str(ready / "bucket"))
    _ok(monte(repo, benv, "push", "--json"), "first push")
    # the push trials push PUSH_RUNS new runs: measure one such push
    scratch = root / "push-measure"
    shutil.rmtree(scratch, ignore_errors=True)
    shutil.copytree(ready, scratch, symlinks=True)
    append_evals(scratch / "repo", PUSH_RUNS)
    d = _ok(monte(scratch / "repo", dict(env, MONTE_BUCKET=str(scratch / "bucket")), "push", "--json"),
            "push (measure)")
    tpl.typical["push"] = d.seconds
    shutil.rmtree(scratch, ignore_errors=True)
    tpl.save()
    return tpl


TRAIN_ARGS = ("train", "--recipe", "sft-t", "--source", "parity-sft", "--from-base", "--yes", "--json")
PUSH_RUNS = 30


def append_evals(repo: Path, n: int, exp: str = EXP) -> list[str]:
    """``n`` finished eval runs through the ledger's own API, each with a run folder holding an
    event file and a transcript, so a push has packs, refs and files to send."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    from monte.ledger.experiment import Ledger
    from monte.ledger.ids import new_run_id
    from monte.ledger.records import RunRow
    from monte.ledger.store import Store

    store = Store(repo)
    ledger = Ledger(store, exp)
    runs = []
    for _ in range(n):
        rid = new_run_id()
        row = ledger.append_row(as_is(RunRow(
            run=rid, experiment=exp, kind="eval", status="started", cohort="c0", exam="parity",
            split="dev", smoke=True, created_at="t")), event="started", summary=lambda r: f"eval {r.run} started")
        ledger.append_row(as_is(row.model_copy(update={"status": "failed", "error": "x"})),
                          event="failed", summary=lambda r: f"eval {r.run} failed")
        folder = repo / ".monte" / "runs" / exp / rid
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "events.jsonl").write_text(json.dumps({"event": "started", "run": rid}) + "\n")
        (folder / "transcript.jsonl").write_text("".join(json.dumps({"i": i, "run": rid, "pad": "x" * 200}) + "\n"
                                                         for i in range(200)))
        runs.append(rid)
    store.close()
    return runs


# --- reading the state -------------------------------------------------------------------------------


@dataclass
class State:
    refs: dict[str, str]  # every ref -> sha
    rows: dict[str, dict[str, str]]  # exp -> run -> status (as `monte status` reads it)
    vault: dict[str, str]  # "environment/NAME" | "dataset/NAME" -> fingerprint (the vault ref)


def read_state(repo: Path) -> State:
    out = git(repo, "for-each-ref", "--format=%(refname) %(objectname)").stdout
    refs = {k: v for k, v in (line.split(" ", 1) for line in out.splitlines() if line.strip())}
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    from monte.ledger.experiment import Ledger, experiment_names
    from monte.ledger.store import Store
    from monte.ledger.vault_ref import Vault
    from monte.runs import read_rows

    store = Store(repo)
    try:
        rows: dict[str, dict[str, str]] = {exp: {r.run: r.status for r in read_rows(Ledger(store, exp))}
                                           for exp in experiment_names(store)}
        v = Vault(store)
        vault = {}
        for kind in ("environment", "dataset"):
            for name in v.names(kind):
                m = v.get(kind, name)
                vault[f"{kind}/{name}"] = m.fingerprint if m else ""
    finally:
        store.close()
    return State(refs, rows, vault)


def _new_runs(before: State, after: State, exp: str = EXP) -> dict[str, str]:
    old = before.rows.get(exp, {})
    return {r: s for r, s in after.rows.get(exp, {}).items() if r not in old}


# --- checks ------------------------------------------------------------------------------------------


@dataclass
class Failure:
    check: str
    detail: str


def check_repo(repo: Path, env: dict[str, str], before: State, *, stage: str) -> tuple[list[Failure], State | None, int]:
    """Every repository-wide check; returns (failures, the state now, records lost)."""
    fails: list[Failure] = []
    lost = 0
    v = monte(repo, env, "ledger", "verify", "--all", "--json")
    if v.code != 0:
        fails.append(Failure(f"{stage}:verify", (v.out or v.err)[-1500:]))
    f = git(repo, "fsck", "--strict", "--no-dangling", "--no-progress", check=False)
    if f.returncode != 0:
        fails.append(Failure(f"{stage}:fsck", (f.stderr or f.stdout)[-1500:]))
    types = git(repo, "for-each-ref", "--format=%(refname) %(objecttype)", check=False).stdout
    names = []
    for line in types.splitlines():
        name, _, kind = line.partition(" ")
        if kind != "commit":
            fails.append(Failure(f"{stage}:refs", f"{name} points at a {kind or 'missing object'}"))
        parts = name.split("/")
        if len(parts) == 5 and parts[:3] == ["refs", "heads", "monte"] and parts[4] == "ledger":
            names.append(parts[3])  # every experiment: refs/heads/monte/<exp>/ledger
    for exp in names:
        s = monte(repo, env, "status", exp, "--json")
        doc = s.json()
        if s.code != 0 or not isinstance(doc, dict) or not isinstance(doc.get("rows"), list):
            fails.append(Failure(f"{stage}:status", f"status {exp} exited {s.code}: {(s.out or s.err)[-800:]}"))
            continue
        for row in doc["rows"]:
            if not (isinstance(row, dict) and row.get("run") and row.get("status") in
                    ("started", "running", "succeeded", "failed", "abandoned")):
                fails.append(Failure(f"{stage}:status", f"unreadable row {row!r:.300}"))
            elif row["status"] in ("started", "running"):
                fails.append(Failure(f"{stage}:stuck", f"{exp}/{row['run']} reads {row['status']} after the kill"))
    try:
        now = read_state(repo)
    except Exception as e:  # noqa: BLE001 - any failure to read is a finding
        fails.append(Failure(f"{stage}:read", f"{type(e).__name__}: {e}"))
        return fails, None, lost
    # nothing recorded before is lost, and every ref only moved forward
    for exp, runs in before.rows.items():
        have = now.rows.get(exp, {})
        for run, status in runs.items():
            if run not in have:
                lost += 1
                fails.append(Failure(f"{stage}:lost", f"{exp}/{run} ({status}) is gone"))
            elif status in ("succeeded", "failed") and have[run] != status:
                fails.append(Failure(f"{stage}:lost", f"{exp}/{run} was {status}, reads {have[run]}"))
    for ref, sha in before.refs.items():
        if not ref.startswith(("refs/heads/monte/", "refs/remotes/results/")):
            continue
        new = now.refs.get(ref)
        if new is None:
            lost += 1
            fails.append(Failure(f"{stage}:lost", f"{ref} is gone"))
        elif new != sha and git(repo, "merge-base", "--is-ancestor", sha, new, check=False).returncode != 0:
            lost += 1
            fails.append(Failure(f"{stage}:append-only", f"{ref} moved from {sha[:12]} to {new[:12]}, not a descendant"))
    for key in before.vault:
        if key not in now.vault:
            lost += 1
            fails.append(Failure(f"{stage}:lost", f"vault ref lost {key}"))
    fails += check_data_root(repo, now)
    fails += [Failure(f"{stage}:{f.check}", f.detail) for f in check_checkpoints(repo)]
    return fails, now, lost


def check_data_root(repo: Path, now: State) -> list[Failure]:
    """No half-written frozen folder: each has its manifest, and agrees with the vault ref."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    from monte.manifest import read_manifest
    from monte.storage.tracking import read_pointer

    fails = []
    root = repo / ".monte"
    for kind, folder in (("environment", "environments"), ("dataset", "datasets")):
        base = root / folder
        for d in sorted(base.iterdir()) if base.is_dir() else []:
            if d.name.startswith(".") and d.name.endswith(".tmp"):
                continue  # a DVC pointer's temporary, left by the kill (the next command sweeps it)
            if d.name.endswith(".dvc") and d.is_file():  # DVC's pointer to the folder beside it
                if read_pointer(d) is None:
                    fails.append(Failure("data-root", f"{d} is not a whole DVC pointer (a half-written one)"))
                continue
            try:
                m = read_manifest(d)
            except Exception as e:  # noqa: BLE001
                fails.append(Failure("data-root", f"{d}: unreadable manifest ({e})"))
                continue
            if m is None:
                fails.append(Failure("data-root", f"{d} holds no manifest.json (a half-written freeze)"))
                continue
            rec = now.vault.get(f"{kind}/{d.name}")
            if rec is not None and rec != m.fingerprint:
                fails.append(Failure("data-root", f"{d} differs from the vault ref's {kind} {d.name}"))
    for events in sorted((root / "runs").glob("*/*/events.jsonl")):
        for n, line in enumerate(events.read_text(errors="replace").splitlines(), 1):
            try:
                json.loads(line)
            except ValueError:
                fails.append(Failure("data-root", f"{events}, line {n}: a half-written event line {line[:120]!r}"))
                break
    return fails


def check_checkpoints(repo: Path) -> list[Failure]:
    """Every checkpoint a row records is on the data root and proves against its lineage commit."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    from monte.errors import MonteError
    from monte.ledger import rules
    from monte.ledger.experiment import Ledger, experiment_names
    from monte.ledger.lineage import checkpoint_info
    from monte.runs import read_rows
    from monte.workspace import open_workspace

    fails = []
    ws = open_workspace(repo)
    try:
        for exp in experiment_names(ws.store):
            for ck in rules.checkpoints(read_rows(Ledger(ws.store, exp))):
                try:
                    checkpoint_info(ws.store, ws.data_root, ck)
                except MonteError as e:
                    fails.append(Failure("checkpoint", f"{exp}/{ck.ref}: {e.code}: {e.message}"))
    finally:
        ws.store.close()
    return fails


def staging_left(repo: Path) -> int:
    tmp = repo / ".monte" / "tmp"
    return len([p for p in tmp.iterdir() if p.name.startswith("freeze-")]) if tmp.is_dir() else 0


# --- trials ------------------------------------------------------------------------------------------


@dataclass
class Trial:
    command: str
    index: int
    seed: int
    delay: float
    crash_point: str | None
    vault: bool
    label: str = ""  # the crash point's name
    killed: bool = False
    elapsed: float = 0.0
    moment: str = ""
    next_code: int | None = None
    next_error: str | None = None
    failures: list[Failure] = field(default_factory=list)
    lost: int = 0
    staging_left: int = 0
    seconds: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["failures"] = [asdict(f) for f in self.failures]
        return d


def plan_trials(command: str, n: int, seed: int, typical: float, *, vault: bool | None = None) -> list[Trial]:
    """``n`` trials of one command, each with its kill moment drawn uniformly from
    ``[0, typical]`` by an RNG seeded from ``seed`` and the command (so one seed replays all)."""
    rng = random.Random(f"{seed}:{command}")
    out = []
    for i in range(n):
        delay = rng.uniform(0.0, typical)
        use_vault = (i % 2 == 1) if vault is None else vault
        out.append(Trial(command, i, seed, round(delay, 4), None,
                         use_vault if command in ("env-add", "dataset-add") else False))
    return out


def command_args(command: str, tpl: Template) -> list[str]:
    if command == "eval":
        return ["eval", "--yes", "--json"]
    if command == "eval-test":
        return ["eval", "--split", "test", "--yes", "--json"]
    if command == "train":
        return list(TRAIN_ARGS)
    if command == "env-add":
        return ["env", "add", "--server", "parity", "--dev", "parity", "--test", "parity", "--as", ENV_NAME, "--json"]
    if command == "dataset-add":
        return ["dataset", "add", DATASET_NAME, "--from-file", str(tpl.rows), "--kind", "sft", "--json"]
    if command == "push":
        return ["push", "--json"]
    raise ValueError(command)


def run_trial(trial: Trial, tpl: Template, work: Path) -> Trial:
    """One trial in ``work`` (created; the caller removes it)."""
    t0 = time.monotonic()
    cmd = trial.command
    src = tpl.fresh if cmd == "eval-test" or cmd in ("env-add", "dataset-add") else tpl.ready
    if work.exists():
        shutil.rmtree(work)
    shutil.copytree(src, work, symlinks=True)
    repo = work / "repo"
    extra = {}
    if cmd == "push":
        extra["MONTE_BUCKET"] = str(work / "bucket")
        append_evals(repo, PUSH_RUNS)
    if trial.vault:
        extra["MONTE_VAULT"] = str(work / "vault")
    env = base_env(work / "home", **extra)
    args = command_args(cmd, tpl)
    before = read_state(repo)
    bucket_before = _bucket_files(work / "bucket")
    point = trial.crash_point.replace("{meta_blob}", next_meta_blob(repo)) if trial.crash_point else None
    k = start_and_kill(repo, env, args, None if point else trial.delay, work / "logs", crash_point=point)
    trial.killed, trial.elapsed = k.killed, round(k.elapsed, 4)
    if not k.killed and k.code != 0:
        trial.failures.append(Failure("command", f"exited {k.code} before the kill: {k.out[-800:]} {k.err[-800:]}"))
    finished = not k.killed and k.code == 0
    fails, after, lost = check_repo(repo, env, before, stage="kill")
    trial.failures += fails
    trial.lost += lost
    if after is None:
        trial.seconds = round(time.monotonic() - t0, 3)
        return trial
    trial.moment = classify(cmd, before, after, work, finished, k.killed, bucket_before)
    trial.failures += check_killed_run(cmd, before, after)
    nxt_fails, lost = next_command(trial, tpl, work, env, args, before, after)
    trial.failures += nxt_fails
    trial.lost += lost
    fails, _, lost = check_repo(repo, env, before, stage="next")
    trial.failures += fails
    trial.lost += lost
    trial.staging_left = staging_left(repo)
    if trial.staging_left:
        trial.failures.append(Failure("next:staging", f"{trial.staging_left} staging folder(s) left in "
                                      f"{repo / '.monte' / 'tmp'} after the next command"))
    trial.seconds = round(time.monotonic() - t0, 3)
    return trial


def next_meta_blob(repo: Path) -> str:
    """Where the ledger's next ``meta.json`` blob lands (``objects/xx/yyyy..``): the same bytes
    for whichever process appends record n+1, so a lock left on it would stop every later append."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    from dulwich.objects import Blob

    from monte.ledger.experiment import dumps

    raw = git(repo, "show", f"refs/heads/monte/{EXP}/ledger:meta.json").stdout
    sha = Blob.from_string(dumps({"records": int(json.loads(raw)["records"]) + 1})).id.decode()
    return f"objects/{sha[:2]}/{sha[2:]}"


def _bucket_files(bucket: Path) -> dict[str, int]:
    return {p.relative_to(bucket).as_posix(): p.stat().st_mtime_ns for p in bucket.rglob("*")
            if p.is_file() and not p.name.startswith(".")}


def classify(cmd: str, before: State, after: State, work: Path, finished: bool, killed: bool,
             bucket_before: dict[str, int] | None = None) -> str:
    """Where the kill landed: ``before`` the command's first durable effect, ``mid`` (some but not
    all of its effects), ``after`` its last effect (or it exited on its own)."""
    if finished or not killed:
        return "after"
    repo = work / "repo"
    if cmd in ("eval", "eval-test", "train"):
        new = _new_runs(before, after)
        if not new:
            return "before"
        raw = _raw_statuses(repo, list(new))
        return "after" if all(s in ("succeeded", "failed") for s in raw.values()) else "mid"
    if cmd in ("env-add", "dataset-add"):
        kind, name = ("environment", ENV_NAME) if cmd == "env-add" else ("dataset", DATASET_NAME)
        folder = repo / ".monte" / ("environments" if kind == "environment" else "datasets") / name
        vault = work / "vault" / "monte"
        claimed = (vault / "claims" / f"{kind}s" / f"{name}.json").is_file()
        uploaded = (vault / "manifests" / f"{kind}s" / f"{name}.json").is_file()
        recorded = f"{kind}/{name}" in after.vault
        if not recorded and not claimed and not folder.exists():
            return "before"
        if recorded and folder.is_dir() and (uploaded or not (work / "vault" / "monte").exists() and not claimed):
            return "after"
        return "mid"
    if cmd == "push":
        now = _bucket_files(work / "bucket")
        if now == (bucket_before or {}):
            return "before"
        local = {k.removeprefix(f"refs/heads/monte/{EXP}/"): v for k, v in after.refs.items()
                 if k.startswith(f"refs/heads/monte/{EXP}/")}
        prefix = f"git/{EXP}/refs/"
        remote = {k[len(prefix):]: (work / "bucket" / k).read_text().strip() for k in now if k.startswith(prefix)}
        runs = repo / ".monte" / "runs" / EXP
        files = {p.relative_to(repo / ".monte").as_posix() for p in runs.rglob("*.jsonl")} if runs.is_dir() else set()
        if remote == local and files <= set(now):
            return "after"
        return "mid"
    raise ValueError(cmd)


def _raw_statuses(repo: Path, runs: list[str]) -> dict[str, str]:
    """The statuses the ledger records (not the dead-process reading)."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    from monte.ledger.experiment import Ledger
    from monte.ledger.store import Store

    store = Store(repo)
    try:
        ledger = Ledger(store, EXP)
        return {r: (row.status if (row := ledger.row(r)) else "?") for r in runs}
    finally:
        store.close()


def check_killed_run(cmd: str, before: State, after: State) -> list[Failure]:
    if cmd not in ("eval", "eval-test", "train"):
        return []
    # (``succeeded`` is right when the last record landed before the kill; verify proves it)
    return [Failure("kill:stuck", f"the killed run {run} reads {status}")
            for run, status in _new_runs(before, after).items() if status in ("started", "running")]


def next_command(trial: Trial, tpl: Template, work: Path, env: dict[str, str], args: list[str],
                 before: State, after: State) -> tuple[list[Failure], int]:
    """The next command of the same kind, to completion, and what it must do."""
    repo = work / "repo"
    cmd = trial.command
    fails: list[Failure] = []
    lost = 0
    d = monte(repo, env, *args)
    trial.next_code, trial.next_error = d.code, d.error_code
    if cmd == "eval-test":
        spent = bool(_new_runs(before, after))
        if spent and not (d.code == 3 and d.error_code == "E_SEALED"):
            fails.append(Failure("next:seal", f"test@0 was started before the kill (the touch is spent), "
                                 f"yet the next test eval exited {d.code} ({d.error_code}): {d.out[-600:]}"))
        if not spent and d.code != 0:
            fails.append(Failure("next:command", f"exited {d.code}: {(d.out or d.err)[-1200:]}"))
        if spent:
            touches = _test_touches(repo)
            if touches != 1:
                fails.append(Failure("next:seal", f"{touches} test touch(es) recorded; expected exactly the killed one"))
        return fails, lost
    if cmd in ("env-add", "dataset-add"):
        kind, name = ("environment", ENV_NAME) if cmd == "env-add" else ("dataset", DATASET_NAME)
        recorded = f"{kind}/{name}" in after.vault
        if d.code != 0 and not (recorded and d.error_code == "E_NAME_TAKEN"):
            fails.append(Failure("next:command", f"re-add exited {d.code} ({d.error_code}) though the freeze was "
                                 f"{'recorded' if recorded else 'not recorded'}: {(d.out or d.err)[-1200:]}"))
        show = (monte(repo, env, "env", "install", name, "--json") if kind == "environment"
                else monte(repo, env, "dataset", "show", name, "--json"))
        if show.code != 0:
            fails.append(Failure("next:verify-folder", f"`{'env install' if kind == 'environment' else 'dataset show'} "
                                 f"{name}` exited {show.code}: {(show.out or show.err)[-1200:]}"))
        if trial.vault:
            listing = monte(repo, env, "env" if kind == "environment" else "dataset", "list", "--vault", "--json")
            entries = {e["name"]: e for e in listing.json() or []} if listing.code == 0 else {}
            if not entries.get(name, {}).get("complete"):
                fails.append(Failure("next:vault", f"the Vault's copy of {name} is not complete: {listing.out[-600:]}"))
        return fails, lost
    if d.code != 0:
        fails.append(Failure("next:command", f"exited {d.code} ({d.error_code}): {(d.out or d.err)[-1500:]}"))
    if cmd == "push" and d.code == 0:
        f2, lost = check_fresh_clone(repo, work, env)
        fails += f2
    return fails, lost


def _test_touches(repo: Path) -> int:
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    from monte.ledger.experiment import Ledger
    from monte.ledger.store import Store

    store = Store(repo)
    try:
        return sum(1 for r in Ledger(store, EXP).rows() if r.kind == "eval" and r.split == "test" and not r.smoke)
    finally:
        store.close()


def check_fresh_clone(repo: Path, work: Path, env: dict[str, str]) -> tuple[list[Failure], int]:
    """A fresh clone syncs and sees every local run exactly once, with its files."""
    fails: list[Failure] = []
    box = new_machine(repo, work / "box")
    s = monte(box, env, "sync", "--json")
    if s.code != 0:
        return [Failure("next:sync", f"sync in a fresh clone exited {s.code}: {(s.out or s.err)[-1200:]}")], 0
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    from monte.ledger.experiment import Ledger
    from monte.ledger.store import Store

    stores = Store(repo), Store(box)
    try:
        mine = [r.run for r in Ledger(stores[0], EXP).rows()]
        theirs = [r.run for r in Ledger(stores[1], EXP).rows()]
    finally:
        for st in stores:
            st.close()
    missing = set(mine) - set(theirs)
    lost = len(missing)
    if missing:
        fails.append(Failure("next:clone-lost", f"{len(missing)} run(s) missing in the fresh clone: {sorted(missing)[:5]}"))
    if len(theirs) != len(set(theirs)):
        fails.append(Failure("next:clone-duplicate", f"{len(theirs) - len(set(theirs))} run(s) twice in the clone"))
    for run in mine:
        local = repo / ".monte" / "runs" / EXP / run / "events.jsonl"
        if local.is_file() and not (box / ".monte" / "runs" / EXP / run / "events.jsonl").is_file():
            fails.append(Failure("next:clone-files", f"run {run}'s events.jsonl did not reach the clone"))
            break
    v = monte(box, env, "ledger", "verify", "--all", "--json")
    if v.code != 0:
        fails.append(Failure("next:clone-verify", (v.out or v.err)[-1200:]))
    return fails, lost


# --- crash points: the narrow windows a uniform kill seldom hits ---------------------------------------

#: command -> [(label, crash point, with a Vault)]. The n-th matching call of the function is
#: where the process SIGKILLs its own group; each is a window of microseconds to milliseconds.
CRASH_POINTS: dict[str, list[tuple[str, str, bool]]] = {
    "eval": [
        ("a lock on the next record's meta.json blob", "os:replace:before:1:{meta_blob}", False),
        ("ledger ref lock held (started record)", "dulwich.file:_GitFile.close:before:1:monte/exp/ledger", False),
        ("after the started record", "monte.evals.run:start_row:after:1", False),
        ("ledger ref lock held (finish record)", "dulwich.file:_GitFile.close:before:2:monte/exp/ledger", False),
    ],
    "eval-test": [
        ("after the started record (touch spent)", "monte.evals.run:start_row:after:1", False),
        ("ledger ref lock held (started record)", "dulwich.file:_GitFile.close:before:1:monte/exp/ledger", False),
    ],
    "train": [
        ("after the started record", "monte.training.record:start_chunk:after:1", False),
        ("mid checkpoint copy", "shutil:copy2:after:2", False),
        ("lineage commit landed, row not yet", "monte.ledger.lineage:record_checkpoint:after:1", False),
        ("lineage ref lock held", "dulwich.file:_GitFile.close:before:1:/lineage/", False),
        ("after the checkpoint record", "monte.training.record:save_checkpoint:after:1", False),
    ],
    "env-add": [
        ("vault ref lock held", "dulwich.file:_GitFile.close:before:1:refs/heads/monte/vault", False),
        ("recorded, not moved into place", "monte.staging:move_into_place:before:1", False),
        ("recorded, not moved into place, with a Vault", "monte.staging:move_into_place:before:1", True),
        ("Vault claim made, nothing recorded", "monte.ledger.vault_ref:Vault.record:before:1", True),
        ("in place, Vault upload not done", "monte.storage.vault_remote:VaultRemote.upload:before:1", True),
    ],
    "dataset-add": [
        ("vault ref lock held", "dulwich.file:_GitFile.close:before:1:refs/heads/monte/vault", False),
        ("recorded, not moved into place", "monte.staging:move_into_place:before:1", False),
        ("recorded, not moved into place, with a Vault", "monte.staging:move_into_place:before:1", True),
        ("Vault claim made, nothing recorded", "monte.ledger.vault_ref:Vault.record:before:1", True),
        ("loose object lock held", "dulwich.file:_GitFile.close:before:1:/objects/", False),
    ],
    "push": [
        ("pack uploaded, no ref moved", "monte.storage.object_stores:LocalStore.create:after:1", False),
        ("one bucket ref moved", "monte.storage.object_stores:LocalStore.swap:after:1", False),
        ("mirror ref lock held", "dulwich.file:_GitFile.close:before:1:refs/remotes/results", False),
        ("mid run files", "monte.storage.object_stores:LocalStore.put:after:5", False),
    ],
}


def point_trials(commands: Iterable[str], seed: int = 0) -> list[Trial]:
    """One trial per crash point of each command."""
    return [Trial(cmd, i, seed, -1.0, point, vault, label=label)
            for cmd in commands for i, (label, point, vault) in enumerate(CRASH_POINTS.get(cmd, []))]


def summarize(trials: list[Trial]) -> dict[str, Any]:
    """Per command: trials, the kill moments, failures (by check), records lost."""
    out: dict[str, Any] = {}
    for t in trials:
        s = out.setdefault(t.command, {"trials": 0, "killed": 0, "moments": {"before": 0, "mid": 0, "after": 0},
                                       "failed_trials": 0, "failures": {}, "records_lost": 0,
                                       "seconds": 0.0, "next_codes": {}})
        s["trials"] += 1
        s["killed"] += int(t.killed)
        if t.moment:
            s["moments"][t.moment] = s["moments"].get(t.moment, 0) + 1
        s["failed_trials"] += int(bool(t.failures))
        for f in t.failures:
            s["failures"][f.check] = s["failures"].get(f.check, 0) + 1
        s["records_lost"] += t.lost
        s["seconds"] = round(s["seconds"] + t.seconds, 1)
        key = f"{t.next_code}" + (f" {t.next_error}" if t.next_error else "")
        s["next_codes"][key] = s["next_codes"].get(key, 0) + 1
    return out
