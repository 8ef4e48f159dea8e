"""Fault campaign: faults outside monte, injected for real, many times, and what they cost.

The campaigns of docs/reliability.md (crashes, racing writers) re-run with the faults of issue 14
added. Every fault is the real thing: a full or read-only file system is a small tmpfs mounted
for the trial (as root; filled, or remounted read-only); another file system is ``/dev/shm``
behind a symlink; git maintenance is the real ``git gc --aggressive``, ``pack-refs --all``,
``repack -ad`` and ``prune`` in loops beside monte; a stop from another host is ``monte stop``
run with another host name (``socket.gethostname`` patched, as ``hostname otherhost`` would).

Faults and their variants (``--faults`` picks some; each variant runs ``--trials`` times):

- ``full``: the data root full before a test read (``data-root-before``); ``.git/objects`` or the
  data root filling up *during* a test read (``objects-during``, ``data-root-during``: after the
  answers are generated, or after the result is kept in the run folder, drawn per trial); the
  Vault's datasets folder full under ``monte dataset add`` (``dataset-add``);
- ``read-only``: the data root or ``.git/objects`` read-only before a test read, or remounted
  read-only during one (same moments);
- ``cross-device``: ``monte dataset add`` with ``.monte/datasets`` on another file system;
  ``monte promote`` into a folder on another file system;
- ``git-maintenance``: 8 processes appending 26 records each beside gc/pack-refs/repack loops
  (``appenders``); 20 ``monte nominate`` calls beside a ``pack-refs`` loop (``nominate``);
  appenders beside ``git prune --expire=now`` (``prune``: unsafe by git's own documentation, so
  reported apart: named refusals expected, counted);
- ``cross-host-stop``: a test read stopped with ``monte stop`` from another host while it runs.

After each trial the fault is taken away (space freed, remounted read-write, ``monte recover``)
and checked: no ``E_INTERNAL`` or traceback, every failure a named refusal of the expected
family; no record the ledger held before is lost (its old tip is still an ancestor); no touch
spent without a score (a test read on the ledger with no score there and none kept in its run
folder); ``monte ledger verify --all`` and ``git fsck --strict`` pass (no "bad sha1 file", no
``.lock`` left under ``.git``); the next command works (a test read refused for lack of room
still has its touch).

    .venv/bin/python bench/fault_campaign.py --trials 3 --seed 1414 --json-out /tmp/faults.json
    .venv/bin/python bench/fault_campaign.py --faults git-maintenance --trials 5
    .venv/bin/python bench/fault_campaign.py --quick --json-out /tmp/q.json   # a smoke run, seconds

Exit status: 0 when no trial failed, 1 otherwise.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import random
import shutil
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Callable, Iterator
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # monte and tests.support, as packages

from tests.support import crashhelp as ch  # noqa: E402
from tests.support import maintenance as gm  # noqa: E402

EXP = "exp"
FAULTS: dict[str, list[str]] = {
    "full": ["data-root-before", "objects-during", "data-root-during", "dataset-add"],
    "read-only": ["data-root-before", "objects-before", "objects-during", "data-root-during"],
    "cross-device": ["dataset-add", "promote"],
    "git-maintenance": ["appenders", "nominate", "prune"],
    "cross-host-stop": ["test-eval"],
}
QUICK = [("cross-device", "dataset-add"), ("read-only", "data-root-before"), ("git-maintenance", "appenders")]

#: ``python -c BOOT ARGS``: monte's CLI with one fault armed by the environment. FAULT_ACT:
#: ``fill:<folder>`` (write until the disk is full), ``ro:<mount point>`` (remount it read-only),
#: ``wait:<ready file>:<go file>`` (say so, then wait); FAULT_AT: right after the answers are
#: generated (``generated``) or after the result is kept in the run folder (``kept``).
#: FAULT_HOST: the host name this process has (a second machine sharing the repository).
BOOT = r"""
import os, socket, subprocess, sys, time
from pathlib import Path
act = os.environ.pop("FAULT_ACT", "")
at = os.environ.pop("FAULT_AT", "generated")
host = os.environ.pop("FAULT_HOST", "")
if host:
    socket.gethostname = lambda: host

def fault():
    kind, _, arg = act.partition(":")
    if kind == "fill":
        try:
            with open(os.path.join(arg, "filler"), "wb", buffering=0) as f:
                while True:
                    f.write(bytes(4096))
        except OSError:
            pass
    elif kind == "ro":
        r = subprocess.run(["mount", "-o", "remount,ro", arg], capture_output=True, text=True)
        if r.returncode:  # the harness's failure, not monte's: say so on stderr, apart
            sys.stderr.write("FAULT NOT INJECTED: " + r.stderr)
    elif kind == "wait":
        ready, go = arg.split(":")
        Path(ready).write_text("generated")
        while not os.path.exists(go):
            time.sleep(0.05)

def armed(orig):
    def run(*a, **k):
        out = orig(*a, **k)
        fault()
        return out
    return run

if act and at == "generated":
    import monte.models.generate as g
    g.generate = armed(g.generate)
elif act:
    import monte.evals.run as r
    r.save_pending = armed(r.save_pending)
from monte.cli.main import main
main(sys.argv[1:])
"""


class CannotMount(Exception):
    pass


@contextlib.contextmanager
def tmpfs(at: Path, size: str) -> Iterator[Path]:
    at.mkdir(parents=True, exist_ok=True)
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(at)], capture_output=True,
                       text=True)
    if r.returncode != 0:
        raise CannotMount(f"cannot mount a tmpfs here ({r.stderr.strip() or 'mount failed'}): a real full or "
                          "read-only file system needs root and mount(2)")
    try:
        yield at
    finally:
        subprocess.run(["umount", "-l", str(at)], capture_output=True)


def remount(at: Path, mode: str) -> None:
    subprocess.run(["mount", "-o", f"remount,{mode}", str(at)], check=True, capture_output=True)


def on_tmpfs(stack: contextlib.ExitStack, folder: Path, size: str) -> Path:
    """Mount a tmpfs over ``folder``, holding a copy of what was there."""
    saved = folder.parent / f".saved-{folder.name}"
    shutil.copytree(folder, saved, symlinks=True)
    stack.enter_context(tmpfs(folder, size))
    shutil.copytree(saved, folder, symlinks=True, dirs_exist_ok=True)
    shutil.rmtree(saved)
    return folder


def fill(folder: Path) -> Path:
    filler = folder / "filler"
    with contextlib.suppress(OSError), open(filler, "wb", buffering=0) as f:
        while True:
            f.write(bytes(4096))
    return filler


def other_fs(work: Path) -> Path:
    shm = Path("/dev/shm")
    if not shm.is_dir() or os.stat(shm).st_dev == os.stat(work).st_dev:
        raise CannotMount("/dev/shm is not a second file system beside the work folder here")
    return Path(tempfile.mkdtemp(prefix="monte-fault-xdev-", dir=shm))


def run(cwd: Path, env: dict[str, str], *args: str, timeout: float = 600, **fault: str) -> ch.Done:
    """monte ``args`` as a real subprocess, with the fault of ``fault`` (FAULT_ACT=...) armed."""
    t0 = time.monotonic()
    extra = {f"FAULT_{k.upper()}": v for k, v in fault.items()}
    r = subprocess.run([sys.executable, "-c", BOOT, *args], cwd=cwd, env={**env, **extra}, capture_output=True,
                       text=True, timeout=timeout)
    return ch.Done(r.returncode, r.stdout, r.stderr, time.monotonic() - t0)


# --- the templates ---------------------------------------------------------------------------------

#: The templates' first commands (not timed, no fault armed) one after another in one interpreter,
#: rather than a fresh one a command.
SETUP = str(Path(__file__).resolve().parents[1] / "tests" / "support" / "batch.py")  # the commands in one interpreter


@dataclass
class Templates:
    root: Path
    base: Path  # env (dev + test), experiment on the base model: test@0 not yet read
    ready: Path  # base + dev@0, test@0, a checkpoint and its dev eval (nominate, promote)
    checkpoint: str


def build(root: Path, full: bool, log: Callable[[str], None]) -> Templates:
    from monte.models.tiny import init_model
    from tests.support.helpers import checkpoint

    env = ch.base_env(root / "home")
    models = root / "models"
    init_model(models / "seed0", seed=0)
    base = root / "base"
    repo = base / "repo"
    repo.mkdir(parents=True)
    ch.git(repo, "init", "-q", "-b", "main")
    args: tuple[str, ...]
    setup = [["init", "--json"], ["env", "add", "--server", "parity", "--dev", "parity", "--test", "parity", "--json"],
             ["experiment", "init", EXP, "--eval", "parity", "--model", str(models / "seed0"), "--json"]]
    r = subprocess.run([sys.executable, SETUP, json.dumps(setup)], cwd=repo, env=env, capture_output=True,
                       text=True, timeout=600)
    assert r.returncode == 0, (r.stdout[-2000:], r.stderr[-2000:])
    ready = root / "ready"
    ck = ""
    if full:
        log("template: dev@0, test@0, a checkpoint and its dev eval ...")
        init_model(models / "seed1", seed=1)
        shutil.copytree(base, ready, symlinks=True)
        for args in (("eval", "--yes"), ("eval", "--split", "test", "--yes")):  # both baselines
            d = run(ready / "repo", env, *args, "--json")
            assert d.code == 0, d.out + d.err
        cwd = os.getcwd()
        with _environ(env):
            try:
                os.chdir(ready / "repo")
                ck = checkpoint(ready / "repo", models / "seed1")
            finally:
                os.chdir(cwd)
        d = run(ready / "repo", env, "eval", "--checkpoint", f"{EXP}/{ck}@50", "--yes", "--json")
        assert d.code == 0, d.out + d.err
    return Templates(root, base / "repo", ready / "repo", ck)


# --- one trial ---------------------------------------------------------------------------------------


@dataclass
class Trial:
    fault: str
    variant: str
    index: int
    moment: str = ""
    exit: int | None = None
    code: str | None = None
    expected: str = ""
    touches: int = 0
    touches_without_score: int = 0
    records_before: int = 0
    records_lost: int = 0
    internal: int = 0
    next: str = ""
    skipped: str = ""
    figures: dict[str, Any] = field(default_factory=dict)
    failures: list[str] = field(default_factory=list)
    seconds: float = 0.0

    def check(self, ok: bool, what: str) -> None:
        if not ok:
            self.failures.append(what)


def _commits(repo: Path) -> dict[str, str]:
    """Every monte ref and its tip."""
    out = ch.git(repo, "for-each-ref", "--format=%(refname) %(objectname)", "refs/heads/monte/", check=False).stdout
    return dict(line.split() for line in out.splitlines() if line.strip())


def _records(repo: Path, refs: dict[str, str]) -> int:
    if not refs:
        return 0
    r = ch.git(repo, "rev-list", "--count", *refs.values(), check=False)
    return int(r.stdout.strip() or 0) if r.returncode == 0 else 0


def _lost(repo: Path, before: dict[str, str]) -> int:
    """Records the ledger held before and holds no more: each old tip must still be an ancestor."""
    after = _commits(repo)
    lost = 0
    for ref, sha in before.items():
        tip = after.get(ref)
        if tip is None:
            lost += max(1, _records(repo, {ref: sha}))
        elif ch.git(repo, "merge-base", "--is-ancestor", sha, tip, check=False).returncode != 0:
            r = ch.git(repo, "rev-list", "--count", sha, f"^{tip}", check=False)
            lost += int(r.stdout.strip()) if r.returncode == 0 else 1
    return lost


def _test_rows(repo: Path) -> list[Any]:
    from monte.ledger.experiment import Ledger
    from monte.ledger.store import Store

    return [r for r in Ledger(Store(repo), EXP).rows() if r.kind == "eval" and r.split == "test" and not r.smoke]


def _touches(repo: Path, env: dict[str, str], data_root: Path) -> tuple[int, int]:
    """Test reads recorded on the ledger, and those with no score there and none kept in the run folder."""
    rows = _test_rows(repo)
    without = 0
    for r in rows:
        if r.score is not None:
            continue
        kept = data_root / "runs" / EXP / r.run / "finish.json"
        try:
            ok = bool(json.loads(kept.read_text()).get("tasks"))
        except (OSError, ValueError):
            ok = False
        without += not ok
    return len(rows), without


def _after(t: Trial, repo: Path, env: dict[str, str], data_root: Path, before: dict[str, str]) -> None:
    """The checks every trial ends with."""
    d = run(repo, env, "ledger", "verify", "--all", "--json")
    t.check(d.code == 0, f"verify: {d.out[-400:]} {d.err[-300:]}")
    t.internal += d.error_code == "E_INTERNAL" or "Traceback" in d.err
    fsck = gm.fsck(repo)
    t.check(not fsck, f"fsck: {fsck[-400:]}")
    git_dir = repo / ".git"  # git's own lock files (monte keeps flock files of its own under .git/monte)
    locks = [str(p.relative_to(repo)) for p in [*git_dir.glob("*.lock"), *(git_dir / "refs").rglob("*.lock"),
                                                *(git_dir / "objects").rglob("*.lock")]
             if not p.name.startswith("monte-")]
    t.check(not locks, f".lock files left: {locks[:5]}")
    t.records_lost = _lost(repo, before)
    t.check(t.records_lost == 0, f"{t.records_lost} record(s) lost")
    t.touches, t.touches_without_score = _touches(repo, env, data_root)
    t.check(t.touches_without_score == 0, f"{t.touches_without_score} touch(es) spent without a score")


def _outcome(t: Trial, d: ch.Done, *expected: str) -> None:
    """The command's exit: ``ok`` or one of the expected codes; never E_INTERNAL nor a traceback."""
    t.exit, t.code = d.code, ("ok" if d.code == 0 else d.error_code or f"exit {d.code}")
    t.expected = "/".join(expected)
    internal = t.code == "E_INTERNAL" or "Traceback" in d.err
    t.internal += internal
    t.check(not internal, f"E_INTERNAL or a traceback: {d.out[-500:]} {d.err[-800:]}")
    t.check(t.code in expected, f"exit {d.code} {t.code}, expected {t.expected}: {d.out[-400:]} {d.err[-400:]}")


@contextlib.contextmanager
def _environ(env: dict[str, str]) -> Iterator[None]:
    """``env`` as this process's environment (the appenders' helpers start their processes with it)."""
    saved = dict(os.environ)
    os.environ.clear()
    os.environ.update(env)
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


def _copy(src: Path, folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    shutil.copytree(src, folder / "repo", symlinks=True)
    return folder / "repo"


def _rows_file(path: Path, n: int) -> Path:
    path.write_text("".join(json.dumps({"input": f"{i} {i + 1}", "output": "odd" if i % 2 else "even"}) + "\n"
                            for i in range(n)))
    return path


def trial_eval_fault(t: Trial, tpl: Templates, folder: Path, env: dict[str, str], rng: random.Random) -> None:
    """full / read-only: a test read with the data root or .git/objects full or read-only, before
    the read or during it."""
    repo = _copy(tpl.base, folder)
    where, when = t.variant.rsplit("-", 1)
    t.moment = "before" if when == "before" else rng.choice(["generated", "kept"])
    data_root = repo / ".monte"
    with contextlib.ExitStack() as stack:
        if where == "data-root":
            data_root = folder / "data-root"
            shutil.copytree(repo / ".monte", data_root, symlinks=True)
            on_tmpfs(stack, data_root, "16m")
            env = dict(env, MONTE_DATA_ROOT=str(data_root))
            mount = data_root
        else:
            mount = on_tmpfs(stack, repo / ".git" / "objects", "32m")
        before = _commits(repo)
        t.records_before = _records(repo, before)
        act = ("fill:" if t.fault == "full" else "ro:") + str(mount)
        if t.moment == "before":
            if t.fault == "full":
                fill(mount)
            else:
                remount(mount, "ro")
            d = run(repo, env, "eval", "--split", "test", "--yes", "--json")
            _outcome(t, d, "E_STORAGE")
            t.check(_commits(repo) == before, "a refused test read moved a ref")
        else:
            d = run(repo, env, "eval", "--split", "test", "--yes", "--json", act=act, at=t.moment)
            # the ledger may still take the score (the data root filled after the result was kept,
            # say); if not, the result is kept and the refusal says how it gets recorded
            _outcome(t, d, "ok", "E_STORAGE")
        objects = repo / ".git" / "objects"
        early = [str(p) for p in objects.rglob("*.lock")]
        t.check(not early, f"object .lock files left by the failure: {early[:3]}")
        # the way back: room again, writable again, and whatever was kept recorded
        if t.fault == "full":
            (mount / "filler").unlink(missing_ok=True)
        else:
            remount(mount, "rw")
        if t.moment == "before":
            d = run(repo, env, "eval", "--split", "test", "--yes", "--json")
            t.next = "ok" if d.code == 0 else str(d.error_code)
            t.check(d.code == 0, f"test@0 after the fault went: {d.out[-300:]} {d.err[-300:]}")
        else:
            d = run(repo, env, "recover", "--json")
            t.check(d.code == 0, f"recover: {d.out[-300:]} {d.err[-300:]}")
            unscored = [r.run for r in _test_rows(repo) if r.score is None]
            t.check(not unscored, f"a kept result not recorded on the ledger by monte recover: {unscored}")
            d = run(repo, env, "eval", "--split", "test", "--yes", "--json")
            t.next = "ok" if d.code == 0 else str(d.error_code)
            t.check(d.error_code == "E_SEALED", f"a second test@0 read: {t.next}, expected E_SEALED (one touch)")
        _after(t, repo, env, data_root, before)


def trial_dataset(t: Trial, tpl: Templates, folder: Path, env: dict[str, str], rng: random.Random) -> None:
    """full / cross-device: ``monte dataset add`` with ``.monte/datasets`` full, or elsewhere."""
    repo = _copy(tpl.base, folder)
    rows = _rows_file(folder / "rows.jsonl", rng.choice([200, 2000, 6000]))
    with contextlib.ExitStack() as stack:
        if t.fault == "full":
            away = stack.enter_context(tmpfs(folder / "away", "1m"))
        else:
            away = other_fs(folder)
            stack.callback(shutil.rmtree, away, True)
        datasets = repo / ".monte" / "datasets"
        shutil.rmtree(datasets, ignore_errors=True)
        datasets.symlink_to(away)
        before = _commits(repo)
        t.records_before = _records(repo, before)
        if t.fault == "full":
            fill(away)
            d = run(repo, env, "dataset", "add", "rows", "--from-file", str(rows), "--kind", "sft", "--json")
            _outcome(t, d, "E_STORAGE")
            t.check(_commits(repo) == before, "a refused freeze moved a ref (the name is burned)")
            (away / "filler").unlink()
        d = run(repo, env, "dataset", "add", "rows", "--from-file", str(rows), "--kind", "sft", "--json")
        if t.fault == "full":
            t.next = "ok" if d.code == 0 else str(d.error_code)
            t.check(d.code == 0, f"the add after room was made: {d.out[-300:]} {d.err[-300:]}")
        else:
            _outcome(t, d, "ok")
        d = run(repo, env, "dataset", "show", "rows", "--json")
        t.check(d.code == 0, f"dataset show: {d.out[-300:]} {d.err[-300:]}")
        left = [p.name for p in away.iterdir() if p.name not in ("rows", "rows.dvc", "filler")]
        t.check(not left, f"left beside the freeze: {left}")
        _after(t, repo, env, repo / ".monte", before)


def trial_promote(t: Trial, tpl: Templates, folder: Path, env: dict[str, str], rng: random.Random) -> None:
    repo = _copy(tpl.ready, folder)
    away = other_fs(folder)
    try:
        before = _commits(repo)
        t.records_before = _records(repo, before)
        ref = f"{EXP}/{tpl.checkpoint}@50"
        dest = away / rng.choice(["promoted", "weights"])
        d = run(repo, env, "promote", ref, "--dest", str(dest), "--confirm", ref, "--json")
        _outcome(t, d, "ok")
        t.check((dest / "config.json").is_file(), "the promoted folder has no config.json")
        left = [str(p) for p in away.rglob("*") if p.name.startswith(".monte-promote")]
        t.check(not left, f"staging left: {left[:3]}")
        _after(t, repo, env, repo / ".monte", before)
    finally:
        shutil.rmtree(away, ignore_errors=True)


def trial_appenders(t: Trial, tpl: Templates, folder: Path, env: dict[str, str], rng: random.Random,
                    writers: int, records: int) -> None:
    repo = _copy(tpl.base, folder)
    before = _commits(repo)
    t.records_before = _records(repo, before)
    kinds = ["prune", "repack"] if t.variant == "prune" else ["gc", "pack-refs", "repack"]
    t.moment = "+".join(kinds)
    with _environ(env):
        res = gm.appenders_beside(repo, EXP, writers, max(1, records // 2), kinds, folder / "work")
        after = gm.after_checks(repo) if t.variant == "prune" else {}
    t.figures = {k: v for k, v in res.items() if k not in ("census",)}
    t.internal += res["codes"].get("UNHANDLED", 0) + len(res["crashed"])
    t.check(not res["crashed"], f"a writer crashed: {res['crashed'][:1]}")
    t.check(not res["unhandled"], f"unhandled errors: {res['unhandled'][:2]}")
    t.exit, t.code = 0, ",".join(f"{k}x{n}" for k, n in sorted(res["codes"].items())) or "ok"
    if t.variant == "prune":  # unsafe by git's word: named refusals are the promise, not a clean ledger
        t.expected = "ok/E_INTEGRITY"
        t.check(set(res["codes"]) <= {"E_INTEGRITY"}, f"refusals other than E_INTEGRITY: {res['codes']}")
        t.figures["after"] = after
        for name in ("verify", "status"):
            t.check(after[name]["code"] in ("ok", "E_INTEGRITY"), f"{name} after prune: {after[name]}")
            t.internal += after[name]["code"] not in ("ok", "E_INTEGRITY")
        t.records_lost = res["records_lost"]
        return
    t.expected = "ok"
    t.check(res["codes"] == {}, f"appends refused: {res['codes']}")
    t.check(res["records_appended"] == res["records_tried"], f"{res['records_tried'] - res['records_appended']} "
            "append(s) failed")
    t.check(all(m["runs"] >= 1 for m in res["maintenance"].values()), f"maintenance did not overlap: "
            f"{res['maintenance']}")
    hook = [w for m in res["maintenance"].values() for w in m.get("why", {}) if "hook" in w]
    t.check(not hook, f"monte's hook refused git's maintenance: {hook[:2]}")
    _after(t, repo, env, repo / ".monte", before)
    t.records_lost += res["records_lost"]
    t.check(res["records_lost"] == 0 and res["duplicated"] == 0, f"lost {res['records_lost']}, "
            f"duplicated {res['duplicated']}")


def trial_nominate(t: Trial, tpl: Templates, folder: Path, env: dict[str, str], rng: random.Random,
                   calls: int = 20) -> None:
    repo = _copy(tpl.ready, folder)
    before = _commits(repo)
    t.records_before = _records(repo, before)
    t.moment = "pack-refs"
    loops, stop = gm.beside(repo, ["pack-refs"], folder / "work")
    codes: dict[str, int] = {}
    try:
        for _ in range(calls):
            d = run(repo, env, "nominate", f"{EXP}/{tpl.checkpoint}@50", "--json")
            code = "ok" if d.code == 0 else str(d.error_code)
            codes[code] = codes.get(code, 0) + 1
            internal = code == "E_INTERNAL" or "Traceback" in d.err
            t.internal += internal
            t.check(d.code == 0, f"nominate: {d.out[-300:]} {d.err[-300:]}")
    finally:
        stop.touch()
        for loop in loops:
            loop.wait(timeout=300)
    runs = json.loads((folder / "work" / "pack-refs.json").read_text())
    t.figures = {"calls": calls, "codes": codes, "pack_refs_runs": runs}
    t.exit, t.code, t.expected = 0, ",".join(f"{k}x{n}" for k, n in sorted(codes.items())), "ok"
    t.check(runs["runs"] >= 1, "pack-refs did not overlap")
    hook = [w for w in runs.get("why", {}) if "hook" in w]
    t.check(not hook, f"monte's hook refused git pack-refs: {hook[:2]}")
    _after(t, repo, env, repo / ".monte", before)
    got = _records(repo, _commits(repo)) - t.records_before
    t.figures["records_appended"] = got
    t.check(got == codes.get("ok", 0), f"{codes.get('ok', 0)} nominations succeeded, {got} records appended")


def trial_stop(t: Trial, tpl: Templates, folder: Path, env: dict[str, str], rng: random.Random) -> None:
    """A test read runs on one host; ``monte stop`` from another host ends it; then it finishes."""
    repo = _copy(tpl.base, folder)
    before = _commits(repo)
    t.records_before = _records(repo, before)
    ready, go = folder / "ready", folder / "go"
    t.moment = rng.choice(["generated", "kept"])
    p = subprocess.Popen([sys.executable, "-c", BOOT, "eval", "--split", "test", "--yes", "--json"], cwd=repo,
                         env={**env, "FAULT_ACT": f"wait:{ready}:{go}", "FAULT_AT": t.moment},
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 600
        while not ready.exists():
            if p.poll() is not None or time.monotonic() > deadline:
                out, err = p.communicate()
                raise RuntimeError(f"the test read ended before it was stopped: {out[-300:]} {err[-500:]}")
            time.sleep(0.1)
        run_id = ch.git(repo, "log", "-1", "--format=%(trailers:key=Monte-Run,valueonly)",
                        f"refs/heads/monte/{EXP}/ledger").stdout.strip()
        d = run(repo, env, "stop", run_id, "--json", host="otherhost")
        t.check(d.code == 0, f"stop from otherhost: {d.out[-300:]} {d.err[-300:]}")
        go.write_text("go")
        out, err = p.communicate(timeout=600)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    _outcome(t, ch.Done(p.returncode, out, err, 0.0), "E_CONFLICT", "E_STOPPED")
    row = json.loads(run(repo, env, "show", run_id, "--json").out or "{}")
    t.check(row.get("status") == "abandoned", f"the stopped row reads {row.get('status')}")
    t.figures = {"row": row.get("status"), "kept": (repo / ".monte" / "runs" / EXP / run_id / "finish.json").exists()}
    d = run(repo, env, "eval", "--split", "test", "--yes", "--json")
    t.next = "ok" if d.code == 0 else str(d.error_code)
    t.check(d.error_code == "E_SEALED", f"test@0 after the stop: {t.next} (the stopped read spent the touch)")
    _after(t, repo, env, repo / ".monte", before)


def one(t: Trial, tpl: Templates, work: str, seed: int, sizes: dict[str, int], keep: bool) -> Trial:
    folder = Path(work) / f"{t.fault}-{t.variant}-{t.index}"
    env = ch.base_env(folder / "home")
    rng = random.Random(f"{seed}:{t.fault}:{t.variant}:{t.index}")
    t0 = time.monotonic()
    try:
        if t.variant in ("appenders", "prune"):
            trial_appenders(t, tpl, folder, env, rng, sizes["writers"], sizes["records"])
        elif t.variant == "nominate":
            trial_nominate(t, tpl, folder, env, rng, sizes["nominations"])
        elif t.variant == "dataset-add":
            trial_dataset(t, tpl, folder, env, rng)
        elif t.variant == "promote":
            trial_promote(t, tpl, folder, env, rng)
        elif t.fault == "cross-host-stop":
            trial_stop(t, tpl, folder, env, rng)
        else:
            trial_eval_fault(t, tpl, folder, env, rng)
    except CannotMount as e:
        t.skipped = str(e)
    except Exception as e:  # noqa: BLE001 - a harness error is the trial's failure
        t.failures.append(f"harness: {type(e).__name__}: {e} {traceback.format_exc()[-1200:]}")
    t.seconds = round(time.monotonic() - t0, 1)
    if not (keep and t.failures):
        subprocess.run(["umount", "-R", "-l", str(folder)], capture_output=True)
        shutil.rmtree(folder, ignore_errors=True)
    return t


def summarize(done: list[Trial]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for t in done:
        key = f"{t.fault}/{t.variant}"
        s = out.setdefault(key, {"trials": 0, "skipped": 0, "failed": 0, "records_lost": 0, "internal": 0,
                                 "touches_without_score": 0, "codes": {}, "moments": {}})
        if t.skipped:
            s["skipped"] += 1
            continue
        s["trials"] += 1
        s["failed"] += bool(t.failures)
        s["records_lost"] += t.records_lost
        s["internal"] += t.internal
        s["touches_without_score"] += t.touches_without_score
        s["codes"][t.code or "-"] = s["codes"].get(t.code or "-", 0) + 1
        if t.moment:
            s["moments"][t.moment] = s["moments"].get(t.moment, 0) + 1
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="smoke run: one trial each of three cheap variants, tiny")
    ap.add_argument("--trials", type=int, default=None, help="trials per variant (default 3)")
    ap.add_argument("--faults", default=None, help=f"comma-separated, of {', '.join(FAULTS)}, or FAULT/VARIANT "
                    "(default: all)")
    ap.add_argument("--seed", type=int, default=None, help="the RNG seed (default: drawn, and printed)")
    ap.add_argument("--jobs", type=int, default=1, help="trials run at once (each in its own folder)")
    ap.add_argument("--writers", type=int, default=None, help="git-maintenance appenders (default 8)")
    ap.add_argument("--records", type=int, default=None, help="records per appender (default 26)")
    ap.add_argument("--nominations", type=int, default=20, help="nominate calls per trial")
    ap.add_argument("--keep-failed", action="store_true", help="keep the folders of failed trials")
    ap.add_argument("--json-out", type=Path, default=None)
    a = ap.parse_args(argv)
    seed = a.seed if a.seed is not None else (1 if a.quick else random.SystemRandom().randrange(1, 2**31))
    trials = a.trials if a.trials is not None else (1 if a.quick else 3)
    sizes = {"writers": a.writers or (2 if a.quick else 8), "records": a.records or (4 if a.quick else 26),
             "nominations": a.nominations}
    faults = [f.strip() for f in (a.faults or ",".join(FAULTS)).split(",") if f.strip()]
    chosen = [(f, v) for f, _, one in (x.partition("/") for x in faults) if f in FAULTS
              for v in FAULTS[f] if not one or v == one]
    bad = [x for x in faults if not any(x in (f, f"{f}/{v}") for f, v in chosen)]
    if bad:
        ap.error(f"unknown fault(s) {bad}; pick from {', '.join(FAULTS)} (or FAULT/VARIANT)")
    plan = QUICK if a.quick else chosen
    planned = [Trial(f, v, i) for i in range(trials) for f, v in plan]
    print(f"fault campaign: seed {seed}, {trials} trial(s) per variant, {len(planned)} trials, jobs {a.jobs}",
          flush=True)
    t0 = time.monotonic()
    work = Path(tempfile.mkdtemp(prefix="monte-faults-"))
    needs_ready = any(v in ("nominate", "promote") for _, v in plan)
    tpl = build(work / "template", needs_ready, lambda m: print(m, flush=True))
    build_s = time.monotonic() - t0
    print(f"templates built in {build_s:.0f}s", flush=True)
    done: list[Trial] = []
    with ProcessPoolExecutor(max_workers=max(1, a.jobs)) as pool:
        futures = [pool.submit(one, t, tpl, str(work / "trials"), seed, sizes, a.keep_failed) for t in planned]
        for n, fut in enumerate(as_completed(futures), 1):
            t = fut.result()
            done.append(t)
            status = "skipped: " + t.skipped if t.skipped else ("ok" if not t.failures else "FAIL " + "; ".join(
                f[:300] for f in t.failures))
            print(f"[{n}/{len(planned)} {time.monotonic() - t0:6.0f}s] {t.fault}/{t.variant} #{t.index} "
                  f"{t.moment or '-'}: {t.code} next={t.next or '-'} touches={t.touches} "
                  f"lost={t.records_lost} ({t.seconds}s) {status}", flush=True)
    wall = time.monotonic() - t0
    summary = summarize(done)
    print("\n| fault | variant | trials | failures | records lost | touches spent without a score | E_INTERNAL | "
          "outcomes |")
    print("|---|---|---|---|---|---|---|---|")
    for key, s in summary.items():
        fault, variant = key.split("/")
        outcomes = ", ".join(f"{k} x{v}" for k, v in sorted(s["codes"].items()))
        skipped = f" ({s['skipped']} skipped)" if s["skipped"] else ""
        print(f"| {fault} | {variant} | {s['trials']}{skipped} | {s['failed']} | {s['records_lost']} | "
              f"{s['touches_without_score']} | {s['internal']} | {outcomes} |")
    failed = [t for t in done if t.failures]
    ran = [t for t in done if not t.skipped]
    print(f"\ntotal: {len(ran)} trials ({len(done) - len(ran)} skipped), {len(failed)} failed, "
          f"{sum(t.records_lost for t in ran if t.variant != 'prune')} record(s) lost, "
          f"{sum(t.touches_without_score for t in ran)} touch(es) spent without a score, "
          f"{sum(t.internal for t in ran)} E_INTERNAL; wall {wall:.0f}s (templates {build_s:.0f}s)")
    for t in failed:
        print(f"FAILED {t.fault}/{t.variant} #{t.index}: " + " | ".join(f[:1500] for f in t.failures))
    if a.json_out:
        a.json_out.write_text(json.dumps({
            "seed": seed, "trials_per_variant": trials, "argv": sys.argv, "wall_s": round(wall, 1),
            "templates_s": round(build_s, 1), "sizes": sizes,
            "machine": {"cpus": os.cpu_count(), "platform": platform.platform(), "loadavg": os.getloadavg(),
                        "python": platform.python_version()},
            "summary": summary, "failed_trials": len(failed), "trials": [asdict(t) for t in done]}, indent=1))
    shutil.rmtree(work, ignore_errors=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
