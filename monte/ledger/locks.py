"""git's ``.lock`` files left by a writer that died: when one is stale, breaking it once (never a
live one, never one git still acts on), and how long to wait on one that is not."""

from __future__ import annotations

import os
import time

#: A git ``.lock`` file older than this, that no process holds open, was left by a writer that
#: died between taking the lock and renaming it into place (SIGKILL, the OOM killer, a power
#: cut). A loose object's lock is only ever dulwich's, open from its creation to its rename,
#: held for microseconds.
STALE_LOCK_S = 1.0
#: The same for a ref's lock. git closes its ref lock files before it renames them and runs the
#: ``reference-transaction`` hook in between (monte's hook verifies the update: a second or
#: two), so a ref lock that nobody holds open may still be live for a while.
STALE_REF_LOCK_S = 5.0


def break_stale_lock(git_dir: str | os.PathLike[str], lock: str | os.PathLike[str],
                     min_age: float = STALE_LOCK_S, *, git_may_hold: bool = False) -> bool:
    """Remove ``lock`` if it is stale; True when it is gone (removed here or released).

    Stale: older than ``min_age`` seconds and held open by no process (``/proc``; where that
    cannot be read, older than a minute). Breakers take turns under ``flock(2)`` on
    ``<git dir>/monte-stale.lock`` (released by the kernel if a breaker dies) and re-check under
    it, so two processes never break one lock twice (the second would remove a fresh lock).

    ``git_may_hold`` (a ref's lock): nor while a git process works in this repository. git holds
    a ref's lock closed while its reference-transaction hook runs, however long that takes, and
    then acts on what it locked: `git pack-refs` deletes the loose ref it has packed. A lock
    broken under it let monte move the ref, git then deleted monte's record with the loose file,
    and the ledger fell back to the packed tip.
    """
    import fcntl

    try:
        first = os.stat(lock)
    except FileNotFoundError:
        return True
    if time.time() - first.st_mtime < min_age:
        return False
    try:
        fd = os.open(os.path.join(git_dir, "monte-stale.lock"), os.O_CREAT | os.O_RDWR, 0o644)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        try:
            st = os.stat(lock)
        except FileNotFoundError:
            return True
        age = time.time() - st.st_mtime
        held = _held_open(lock, st)
        if age < min_age or held or (held is None and age < max(60.0, min_age)):
            return False
        if git_may_hold and _git_works_in(git_dir):
            return False
        try:
            os.unlink(lock)
        except FileNotFoundError:
            pass
        return True
    finally:
        os.close(fd)


def lock_wait(lock: str, min_age: float) -> float:
    """How long to wait on ``lock``: a second for one a live process holds open; for one that
    nobody holds open (maybe a dead writer's), until it is ``min_age`` old and can be broken."""
    try:
        st = os.stat(lock)
    except FileNotFoundError:
        return 0.0
    if _held_open(lock, st):
        return 1.0
    return max(1.0, min_age - (time.time() - st.st_mtime) + 0.2)


def _git_works_in(git_dir: str | os.PathLike[str]) -> bool:
    """Whether a ``git`` process runs in this repository: its current folder is in the work tree
    or the git folder, or its command line names one of them (``git -C``, ``--git-dir``)."""
    root = os.path.realpath(git_dir)
    top = os.path.dirname(root) if os.path.basename(root) == ".git" else root
    named = os.fsencode(top)
    try:
        pids = [p for p in os.listdir("/proc") if p.isdigit()]
    except OSError:
        return False
    for pid in pids:
        try:
            with open(f"/proc/{pid}/comm", "rb") as f:
                if not f.read().startswith(b"git"):
                    continue
            cwd = os.readlink(f"/proc/{pid}/cwd")
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                argv = f.read().split(b"\0")
        except OSError:
            continue
        if cwd == top or cwd.startswith(top + os.sep) or any(named in arg for arg in argv):
            return True
    return False


def _held_open(path: str | os.PathLike[str], st: os.stat_result) -> bool | None:
    """Whether a process this user can see has ``path`` open (None: no ``/proc`` to ask)."""
    if not os.path.isdir("/proc/self/fd"):
        return None
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            continue
        for fd in fds:
            try:
                other = os.stat(f"/proc/{pid}/fd/{fd}")
            except OSError:
                continue
            if other.st_ino == st.st_ino and other.st_dev == st.st_dev:
                return True
    return False
