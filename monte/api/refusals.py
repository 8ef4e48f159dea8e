"""What a failure that is not monte's own means to its caller: an ``OSError`` the disk caused, a
damaged git object, a server out of reach, a module the light install leaves out. Each becomes a
:class:`~monte.errors.MonteError` with its ``E_*`` code and fix, here, below the CLI, so a Python
caller of :mod:`monte.api` meets the same refusal ``monte`` prints (and the CLI's handler uses
:func:`refusal_for` for what its own code meets)."""

from __future__ import annotations

import errno
import functools
import os
from collections.abc import Callable
from typing import ParamSpec, TypeVar

from monte.errors import MonteError, error, is_network_failure, network_refusal

P = ParamSpec("P")
R = TypeVar("R")

#: An OSError that is the machine's state, not a bug in monte: what is wrong, and the fix.
_STORAGE_ERRNOS = {
    errno.ENOSPC: ("the disk is full", "free space on that disk (or point MONTE_DATA_ROOT at a roomier one), "
                   "then run the command again"),
    errno.EDQUOT: ("the disk quota is used up", "free space within your quota on that disk, then run the "
                   "command again"),
    errno.EROFS: ("the file system is read-only", "remount it read-write (or point MONTE_DATA_ROOT at a "
                  "writable folder), then run the command again"),
    errno.EACCES: ("permission denied", "give your user access to it (`ls -ld` shows who owns it), then run "
                   "the command again"),
    errno.EPERM: ("the operation is not permitted there", "give your user access to it (`ls -ld` shows who "
                  "owns it), then run the command again"),
    errno.EIO: ("an I/O error (the disk or its file system failed)", "check the disk (`dmesg`), then run "
                "`monte recover` and `monte ledger verify`, and the command again"),
    # a folder monte keeps (`.git/monte/seal`, say) made a file, or the reverse: written by hand
    errno.ENOTDIR: ("a part of that path is a file where monte keeps a folder", "move that file away (it was not "
                    "written by monte), then run the command again"),
    errno.EISDIR: ("it is a folder where monte keeps a file", "move that folder away (it was not written by "
                   "monte), then run the command again"),
}


#: What dulwich raises on a damaged repository: (its exception's name, a word its text holds or
#: "" for any) -> what is wrong and the fix; the first row that matches speaks (``{text}``: its text).
_GIT_DAMAGE = (
    ("ChecksumMismatch", "", "a git object of this repository is not the object its name says ({text}): its file "
     "was replaced or damaged", "run `git fsck` to name it, and restore the object from another copy of the "
     "repository (`git fetch` from a clone, or `monte sync`)"),
    ("ObjectFormatException", "graft", "the repository's info/grafts is malformed ({text})",
     "remove or repair `.git/info/grafts` (monte never writes it; grafts rewrite history)"),
    ("ObjectFormatException", "", "a git object of this repository is malformed ({text})",
     "run `git fsck` to name it, and restore it from another copy of the repository"),
)


def git_refusal(e: BaseException) -> MonteError | None:
    """A refusal for what dulwich raises on a damaged repository (a loose object whose bytes are
    not its name's, a malformed object or ``info/grafts``), naming the object; None otherwise."""
    if not type(e).__module__.startswith("dulwich"):
        return None
    text = str(e)[:300]
    for name, word, what, fix in _GIT_DAMAGE:
        if type(e).__name__ == name and word in text:
            return error("E_INTEGRITY", what.format(text=text), fix)
    return None


def os_refusal(e: OSError) -> MonteError | None:
    """A refusal for an OSError that the disk, not monte, caused (a full or read-only disk, a
    permission, a path too long), naming the path; None for anything else (a bug)."""
    paths = [os.fsdecode(p) for p in (e.filename, e.filename2) if p is not None]
    where = " -> ".join(p if len(p) <= 300 else p[:300] + "…" for p in paths) or "a file monte needed"
    if e.errno == errno.ENAMETOOLONG:  # a path the user gave us
        return error("E_USAGE", f"a path is too long for the file system: {where[:120]}…",
                     "use a shorter path (at most 255 bytes per folder or file name)")
    if e.errno not in _STORAGE_ERRNOS:
        return None
    what, fix = _STORAGE_ERRNOS[e.errno]
    verb = "access" if e.errno in (errno.EACCES, errno.EPERM) else "write"
    return error("E_STORAGE", f"cannot {verb} {where}: {what}", fix)


def refusal_for(e: BaseException) -> MonteError | None:
    """The refusal ``e`` stands for (the disk, git's objects, the network, a missing extra), or
    None: then it is a bug in monte, and it propagates as it is."""
    if isinstance(e, MonteError):
        return e
    if isinstance(e, ModuleNotFoundError):  # the light install: the extra's pip line
        from monte.extras import missing

        return missing(e)
    refusal = os_refusal(e) if isinstance(e, OSError) else None
    if refusal is None:
        refusal = git_refusal(e)
    if refusal is None and is_network_failure(e):  # a server that could not be reached: not a bug
        refusal = network_refusal(e, "a server this command needed")
    return refusal


def refusing(f: Callable[P, R]) -> Callable[P, R]:
    """``f`` with :func:`refusal_for`'s failures raised as their refusals (the original kept as
    ``__cause__``); anything else, a bug, propagates unchanged."""

    @functools.wraps(f)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return f(*args, **kwargs)
        except MonteError:
            raise
        except Exception as e:
            refusal = refusal_for(e)
            if refusal is None:
                raise
            raise refusal from e

    return wrapper
