"""The grader's home: a folder only the grader's account can enter (mode 0700), holding

- ``key`` / ``key.pub``: the SSH key every read is signed with (its public half is what a
  repository pins);
- ``ledger.git``: a bare git repository whose ref ``refs/heads/reads`` is the grader's own ledger
  of test reads, one commit per record (``started``, then ``finished`` or ``failed``), tree
  ``reads/<run>/{started,statement,outcomes,failed}.json``. It is authoritative for the budget:
  nothing the agent's ledger says can grant a read here;
- ``sealed/<sha256>.jsonl`` (+ ``.json``, what grades it): the sealed splits in custody;
- ``weights/<run>/``: the copy of the weights a read received, hashed as written and loaded
  from exactly there (removed once graded);
- ``locks/<run>.lock``: the read's liveness: locked from before its ``started`` record until its
  worker exits (:func:`lock_run`), so a worker killed without a word is found (:func:`worker_ended`).
"""

from __future__ import annotations

import fcntl
import json
import os
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from monte.errors import error
from monte.jsonl import log_records
from monte.ledger.grader_statement import canonical

REF_NAME = b"refs/heads/reads"


@dataclass(frozen=True)
class Home:
    root: Path

    @property
    def key(self) -> Path:
        return self.root / "key"

    @property
    def ledger(self) -> Path:
        return self.root / "ledger.git"

    @property
    def sealed(self) -> Path:
        return self.root / "sealed"

    def weights(self, run: str) -> Path:
        return self.root / "weights" / run

    def run_lock(self, run: str) -> Path:
        return self.root / "locks" / f"{run}.lock"

    def public_key(self) -> str:
        return " ".join((self.root / "key.pub").read_text().split()[:2])


def init(root: Path) -> Home:
    """Make a grader home at ``root`` (a new or empty folder): mode 0700, its ledger, its key."""
    from dulwich.repo import Repo

    from monte.ledger.signing import ssh_keygen

    root = root.absolute()
    if root.exists() and any(root.iterdir()):
        raise error("E_REFUSED", f"{root} exists and is not empty",
                    "pass a new folder: monte grader init DIR (a grader home is never reused)")
    old = os.umask(0o077)  # nothing under the home is ever readable by another account
    try:
        root.mkdir(parents=True, exist_ok=True, mode=0o700)
        os.chmod(root, 0o700)
        home = Home(root)
        for d in ("sealed", "weights"):
            (root / d).mkdir(mode=0o700)
        Repo.init_bare(str(home.ledger), mkdir=True)
        r = subprocess.run([ssh_keygen(), "-q", "-t", "ed25519", "-N", "", "-C", f"monte-grader@{root}",
                            "-f", str(home.key)], capture_output=True, text=True, stdin=subprocess.DEVNULL)
        if r.returncode != 0:
            raise error("E_STORAGE", f"ssh-keygen could not make the grader's key: {r.stderr.strip()[-300:]}",
                        "check that the folder is writable, then run `monte grader init DIR` on a new folder")
        (root / "grader.json").write_text(json.dumps({"version": 1}) + "\n")
    finally:
        os.umask(old)
    return home


def open_home(root: Path) -> Home:
    home = Home(root.absolute())
    if not (home.root / "grader.json").is_file() or not home.key.is_file():
        raise error("E_NOT_FOUND", f"{root} is not a grader home", "make one with `monte grader init DIR`")
    return home


@contextmanager
def locked(home: Home) -> Iterator[None]:
    """One writer of the grader's ledger at a time: the budget is checked and the ``started``
    record written under one lock, so two racing reads never both pass."""
    fd = os.open(home.root / "lock", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)


def lock_run(home: Home, run: str) -> int:
    """Lock read ``run``'s liveness file and return its descriptor. The server takes it before the
    ``started`` record and its worker inherits it (``pass_fds``), so the lock is held until the
    last of them exits: a worker killed by SIGKILL (out of memory, a reboot), or a server killed
    before it started one, leaves it free, and :func:`worker_ended` finds the read over."""
    path = home.run_lock(run)
    path.parent.mkdir(exist_ok=True, mode=0o700)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        raise error("E_CONFLICT", f"the grader is already reading run {run}", "fetch it: `monte recover EXP`") from None
    return fd


@contextmanager
def worker_ended(home: Home, run: str) -> Iterator[bool]:
    """Whether read ``run``'s worker has ended (its liveness lock is free); while the block runs
    the lock is held here, so no worker of that run can start meanwhile. False while one holds it,
    and for a read started by a monte that kept no lock (its record alone says where it stands)."""
    try:
        fd = os.open(home.run_lock(run), os.O_RDWR)
    except FileNotFoundError:
        yield False
        return
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            yield False
            return
        yield True
    finally:
        os.close(fd)


# --- the grader's ledger ---------------------------------------------------------------------------


def records(home: Home) -> dict[str, dict[str, Any]]:
    """Every read the grader's ledger holds: run -> its files (``started``, ``statement``, ...)."""
    from dulwich.objects import Tree
    from dulwich.refs import Ref
    from dulwich.repo import Repo

    repo = Repo(str(home.ledger))
    try:
        tip = repo.refs[Ref(REF_NAME)]
    except KeyError:
        return {}
    root = repo[repo[tip].tree]  # type: ignore[attr-defined]
    assert isinstance(root, Tree)
    if b"reads" not in root:
        return {}
    out: dict[str, dict[str, Any]] = {}
    reads = repo[root[b"reads"][1]]
    assert isinstance(reads, Tree)
    for run, _, sha in reads.iteritems():
        sub = repo[sha]
        assert isinstance(sub, Tree)
        out[run.decode()] = {name.decode().removesuffix(".json"): json.loads(repo[fsha].data)  # type: ignore[attr-defined]
                             for name, _, fsha in sub.iteritems()}
    return out


def append(home: Home, run: str, files: dict[str, Any], message: str) -> None:
    """One record: ``reads/<run>/<name>.json`` for each of ``files``, committed on the ref. The
    caller holds :func:`locked` (the server and the workers write this one ref)."""
    from dulwich.objects import Blob, Commit, ObjectID, Tree
    from dulwich.refs import Ref
    from dulwich.repo import Repo

    repo = Repo(str(home.ledger))
    try:
        parent: ObjectID | None = repo.refs[Ref(REF_NAME)]
    except KeyError:
        parent = None
    root = Tree() if parent is None else repo[repo[parent].tree]  # type: ignore[attr-defined]
    assert isinstance(root, Tree)
    reads = repo[root[b"reads"][1]] if b"reads" in root else Tree()
    assert isinstance(reads, Tree)
    sub = repo[reads[run.encode()][1]] if run.encode() in reads else Tree()
    assert isinstance(sub, Tree)
    for name, value in files.items():
        blob = Blob.from_string(canonical(value))
        repo.object_store.add_object(blob)
        sub.add(f"{name}.json".encode(), 0o100644, blob.id)
    repo.object_store.add_object(sub)
    reads.add(run.encode(), 0o040000, sub.id)
    repo.object_store.add_object(reads)
    root.add(b"reads", 0o040000, reads.id)
    repo.object_store.add_object(root)
    c = Commit()
    c.tree = root.id
    c.parents = [parent] if parent else []
    c.author = c.committer = b"monte grader <grader@monte.invalid>"
    c.author_time = c.commit_time = int(time.time())
    c.author_timezone = c.commit_timezone = 0
    c.message = message.encode() + f"\n\nMonte-Run: {run}\n".encode()
    repo.object_store.add_object(c)
    if not repo.refs.set_if_equals(Ref(REF_NAME), parent, c.id):
        raise error("E_CONFLICT", "the grader's ledger moved during a write", "run the command again")


def sealed_meta(home: Home, content: str) -> dict[str, Any] | None:
    path = home.sealed / f"{content}.json"
    return json.loads(path.read_text()) if path.is_file() else None


#: the grader's log of every leak check it answered (one JSON line each), in its home
LEAK_LOG = "leaks.jsonl"


def leak_checks(home: Home, content: str) -> dict[str, int]:
    """What the leak check has told about sealed split ``content``: how many distinct training
    sources it answered against it (``sources``), and how many distinct items of it those answers
    named (``named``: each answer that finds a leak names one). Signed into every read's statement."""
    sources: set[str] = set()
    named: set[str] = set()
    for rec in log_records(home.root / LEAK_LOG):
        if content in (rec.get("contents") or []):
            sources.add(str(rec.get("source")))
            if rec.get("named") and rec.get("named_content") == content:
                named.add(str(rec["named"]))
    return {"sources": len(sources), "named": len(named)}
