"""Helpers shared by the tests and the bench scripts (``from tests.support.helpers import ...``)."""

from __future__ import annotations

import contextlib
import errno
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pytest itself is not imported: the bench scripts import this module too
    import pytest

    from monte.ledger.records import RunRow
    from monte.ledger.store import Snapshot

PINNED_ENV = {
    "GIT_AUTHOR_NAME": "Monte Test",
    "GIT_AUTHOR_EMAIL": "test@monte.invalid",
    "GIT_COMMITTER_NAME": "Monte Test",
    "GIT_COMMITTER_EMAIL": "test@monte.invalid",
    "GIT_AUTHOR_DATE": "1764400000 +0000",
    "GIT_COMMITTER_DATE": "1764400000 +0000",
    "GIT_CONFIG_NOSYSTEM": "1",
    "DVC_NO_ANALYTICS": "1",
    "HF_HUB_OFFLINE": "1",
    "OMP_NUM_THREADS": "1",
}


def home_env(home: Path) -> dict[str, str]:
    """$HOME and the XDG config and cache folders, all under ``home``."""
    return {"HOME": str(home), "XDG_CONFIG_HOME": str(home / ".config"), "XDG_CACHE_HOME": str(home / ".cache")}


def scrubbed(mp: pytest.MonkeyPatch, home: Path) -> None:
    """The environment every test runs in: out of $HOME, the real data root and the developer's
    git config; git's author, committer and clock pinned."""
    for k, v in home_env(home).items():
        mp.setenv(k, v)
    for k in ("MONTE_DATA_ROOT", "GIT_DIR", "GIT_WORK_TREE", "MONTE_HOOKS"):
        mp.delenv(k, raising=False)
    for k, v in PINNED_ENV.items():
        mp.setenv(k, v)


def git(repo: Path, *args: str, check: bool = True) -> str:
    """The real git binary, as a user would run it."""
    r = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True)
    if check and r.returncode != 0:
        raise AssertionError(f"git {' '.join(args)} failed: {r.stderr}")
    return r.stdout


#: DVC's own command line, from the environment the tests run in
DVC = str(Path(sys.executable).parent / "dvc")


def run_dvc(cwd: Path, *args: str, check: bool = True, stderr: bool = True, timeout: float = 300) -> str:
    """The real ``dvc`` CLI, as a user runs it: its stdout, then (``stderr``) its stderr."""
    r = subprocess.run([DVC, *args], cwd=cwd, capture_output=True, text=True, timeout=timeout)
    if check and r.returncode != 0:
        raise AssertionError(f"dvc {' '.join(args)} exited {r.returncode}: {r.stdout}{r.stderr}")
    return r.stdout + (r.stderr if stderr else "")


def monte_proc(*args: str, cwd: Path, env: dict[str, str] | None = None,
               timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """Run ``monte`` as a real subprocess (for races, start-up and crash tests)."""
    return subprocess.run(
        [sys.executable, "-c", "from monte.cli.main import main; main()", *args],
        cwd=cwd, capture_output=True, text=True, timeout=timeout, env={**os.environ, **(env or {})},
    )


_SIGNALLED = """
import importlib, os, signal, sys, time
# a Ctrl-C as a terminal delivers it: a process started under pytest-xdist inherits SIGINT ignored
signal.signal(signal.SIGINT, signal.default_int_handler)
module_name, name = os.environ["MONTE_TEST_PATCH"].split(":")
module = importlib.import_module(module_name)
original = getattr(module, name)
def signalled(*a, **k):
    if eval(os.environ["MONTE_TEST_WHEN"]):
        os.kill(os.getpid(), getattr(signal, os.environ["MONTE_TEST_SIGNAL"]))
        time.sleep(30)  # the signal ends the command long before this does
    return original(*a, **k)
setattr(module, name, signalled)
from monte.cli.main import main
main(sys.argv[1:])
"""


def monte_signalled(sig: str, at: str, *args: str, cwd: Path, when: str = "True",
                    timeout: float = 300) -> subprocess.CompletedProcess[str]:
    """Run ``monte ARGS`` as a real subprocess that sends itself ``sig`` ("SIGINT": a Ctrl-C as a
    terminal delivers it, "SIGTERM") the moment it calls ``at`` ("module:function", looked up on
    the module at call time) with arguments ``a``, ``k`` for which the Python expression ``when``
    holds; other calls run the function as it is. The one stand-in is that moment: the command,
    its handlers and its records are real."""
    env = {**os.environ, "MONTE_TEST_SIGNAL": sig, "MONTE_TEST_PATCH": at, "MONTE_TEST_WHEN": when}
    return subprocess.run([sys.executable, "-c", _SIGNALLED, *args], cwd=cwd, capture_output=True, text=True,
                          timeout=timeout, env=env)


def snapshot_state(repo: Path, data_root: Path | None = None) -> dict[str, Any]:
    """Everything a refusal must leave alone: every ref, and every file under the data root."""
    from monte.hashing import sha256_file

    refs = git(repo, "for-each-ref", "--format=%(refname) %(objectname)")
    data_root = data_root or repo / ".monte"
    files = {}
    if data_root.exists():
        for p in sorted(data_root.rglob("*")):
            if p.is_file() or p.is_symlink():
                files[str(p.relative_to(data_root))] = sha256_file(p) if p.is_file() else "link"
    return {"refs": refs, "files": files}


# --- real file systems that are full or read-only --------------------------------------------------


@contextlib.contextmanager
def tmpfs(at: Path, size: str = "1m") -> Iterator[Path]:
    """A small real tmpfs mounted at ``at`` (root only), unmounted afterwards. Where the machine
    forbids mounting, the test is skipped with the reason."""
    import pytest

    at.mkdir(parents=True, exist_ok=True)
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(at)], capture_output=True,
                       text=True)
    if r.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here ({r.stderr.strip() or 'mount failed'}): a real full or "
                    "read-only file system needs root and mount(2)")
    try:
        yield at
    finally:
        subprocess.run(["umount", "-l", str(at)], capture_output=True)


def fill(at: Path) -> Path:
    """Write ``at/filler`` until its file system is full (ENOSPC: not one page left); returns it."""
    filler = at / "filler"
    try:
        with open(filler, "wb", buffering=0) as f:
            while True:
                f.write(b"\0" * 4096)
    except OSError as e:
        if e.errno != errno.ENOSPC:
            raise
    return filler


# --- runs, clones and pushes -----------------------------------------------------------------------


def as_is(row: RunRow) -> Callable[[Snapshot, int], RunRow]:
    """The ``make`` of an append that writes ``row`` as it is, on whatever tip it lands."""
    return lambda _snap, _seq: row


def append_evals(repo: Path, n: int, exp: str = "exp") -> list[str]:
    """``n`` eval runs, each a started and a failed record, through the ledger's own API, and
    their event files: something for a push to send."""
    from monte.ledger.experiment import Ledger
    from monte.ledger.ids import new_run_id
    from monte.ledger.records import RunRow
    from monte.ledger.store import Store

    ledger = Ledger(Store(repo), exp)
    runs = []
    for _ in range(n):
        rid = new_run_id()
        row = ledger.append_row(as_is(RunRow(run=rid, experiment=exp, kind="eval", status="started", cohort="c",
                                             exam="parity", split="dev", created_at="t")),
                                event="started", summary=lambda r: f"eval {r.run} started")
        ledger.append_row(as_is(row.model_copy(update={"status": "failed", "error": "x"})),
                          event="failed", summary=lambda r: f"eval {r.run} failed")
        runs.append(rid)
        folder = repo / ".monte" / "runs" / exp / rid
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "events.jsonl").write_text(f'{{"event": "started", "run": "{rid}"}}\n')
    return runs


def new_machine(repo: Path, dest: Path) -> Path:
    """A clone as another machine has it: the repository's files, no monte refs but the Vault's,
    its own data root, and none of the experiment's objects."""
    shutil.copytree(repo, dest, symlinks=True, ignore=shutil.ignore_patterns(".monte"))
    (dest / ".monte").mkdir()
    for ref in git(dest, "for-each-ref", "--format=%(refname)", "refs/heads/monte/", "refs/remotes/").split():
        if "/vault" not in ref:
            # monte's hooks (copied along) refuse a deletion; a fresh clone never had these refs
            subprocess.run(["git", "-C", str(dest), "update-ref", "-d", ref], check=True, capture_output=True,
                           env={**os.environ, "MONTE_HOOKS": "off"})
    shutil.rmtree(dest / ".git" / "monte", ignore_errors=True)
    git(dest, "reflog", "expire", "--expire=now", "--all")
    git(dest, "gc", "-q", "--prune=now")
    return dest


def vault_machine(repo: Path, dest: Path) -> Path:
    """Another machine of a Vault's users: the same commit of the repository, an empty data root,
    no DVC cache and no monte refs (not even the Vault's: what it installs comes from the Vault)."""
    shutil.copytree(repo, dest, symlinks=True, ignore=shutil.ignore_patterns(".monte", "cache"))
    (dest / ".monte").mkdir()
    for ref in git(dest, "for-each-ref", "--format=%(refname)", "refs/heads/monte/").split():
        # monte's hooks (copied along) refuse a deletion; a fresh clone never had these refs,
        # nor monte's memory of them
        subprocess.run(["git", "-C", str(dest), "update-ref", "-d", ref], check=True,
                       env={**os.environ, "MONTE_HOOKS": "off"})
    shutil.rmtree(dest / ".git" / "monte", ignore_errors=True)
    return dest


def push_to_new_origin(repo: Path, origin: Path) -> None:
    """Commit the repository as it stands and push it to a new bare repository ``origin``, as a
    laptop has it before a remote run (the box clones from there)."""
    subprocess.run(["git", "init", "-q", "--bare", str(origin)], check=True)
    for args in (("add", "-A"), ("commit", "-q", "-m", "the experiment's repository"),
                 ("remote", "add", "origin", str(origin)), ("push", "-q", "origin", "HEAD:main"),
                 ("fetch", "-q", "origin")):
        git(repo, *args)


def run_events(repo: Path, run: str, exp: str = "exp") -> list[dict[str, Any]]:
    """A run's ``events.jsonl`` on the repository's data root, parsed."""
    path = repo / ".monte" / "runs" / exp / run / "events.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()]


def pushes_failing_on(monkeypatch: pytest.MonkeyPatch, fail: set[int]) -> list[str]:
    """The seam for a push that fails mid-run: ``results.push`` raises E_STORAGE on the numbered
    calls (1-based) and pushes for real otherwise. Returns the run of each call."""
    from monte.errors import error
    from monte.storage import results

    real = results.push
    calls: list[str] = []

    def push(ws: Any, experiment: str, **kw: Any) -> Any:
        calls.append(kw.get("run") or "")
        if len(calls) in fail:
            raise error("E_STORAGE", "the results bucket is unreachable (test)", "retry")
        return real(ws, experiment, **kw)

    monkeypatch.setattr(results, "push", push)
    return calls


# --- checkpoints, recorded as `monte train` records them ----------------------------------------
# A real, loadable model folder per checkpoint, a train row and a lineage commit, through
# `monte.training.record`. The weights are differently-seeded tiny models rather than trained
# ones: the tests that use this are about the rules of the record, not about learning.


def checkpoint(repo: Path, weights: Path, *, parent: tuple[str, int] | None = None, steps: int = 50,
               algorithm: str = "sft", source: str = "parity-sft", recipe: str = "sft-tiny",
               boundary: bool = False, base: Path | None = None, smoke: bool = False,
               experiment: str = "exp", start_step: int | None = None) -> str:
    """Record a finished training chunk with one checkpoint; return the run id."""
    from monte.ledger.experiment import Ledger
    from monte.ledger.lineage import ensure_base, identify_base
    from monte.models.locate import locate
    from monte.training.record import finish_chunk, save_checkpoint, start_chunk
    from monte.workspace import open_workspace

    ws = open_workspace(repo)
    meas = Ledger(ws.store, experiment).measurement()
    where = locate(ws, str(base) if base else meas.model or "")  # the reference records hold
    assert where.folder is not None
    base_dir = where.folder
    ident = identify_base(ws.store, experiment, base_dir)
    cohort, _ = ensure_base(ws.store, experiment, where.ref, ident.files, cohort=ident.cohort,
                            weights=ident.weights, folder=base_dir)
    start = start_step if start_step is not None else (parent[1] if parent else 0)
    plan: dict[str, Any] = {"recipe": {"name": recipe, "sha256": "0" * 64, "algorithm": algorithm},
                            "source": source, "parent": {"run": parent[0], "step": parent[1]} if parent else None,
                            "boundary": boundary, "start_step": start, "steps": steps}
    row = start_chunk(ws, experiment, cohort=cohort, base_model=where.ref, plan=plan, smoke=smoke)
    if not smoke:
        tmp = repo.parent / f"ck-{row.run}"
        shutil.copytree(weights, tmp)
        row = save_checkpoint(ws, experiment, row, start + steps, tmp)
    finish_chunk(ws, experiment, row, "succeeded")
    return row.run
