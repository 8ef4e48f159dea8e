"""A cache of the raw git objects a state read walks, that can never be stale or forged.

Reading an experiment's state (``Ledger.rows``) walks ``runs/``, its 32 first-level trees, up
to 1,024 bucket trees and their ``index.json`` blobs: ~2,000 objects at 10,000 runs, most of
them deltas inside packs that dulwich resolves in Python (most of a status call's time). This
cache keeps those objects' raw bytes, undeltified, in one file per experiment under
``<git dir>/monte/cache/``, rewritten after a read that missed some (an append changes 5 of
them) once enough of what a read walks is missing from it (not after every append: the file
is 10 MB at 10,000 runs).

It is keyed by object id, and an object id *is* the sha1 of the object's bytes: every entry is
re-hashed when it is used, and one whose bytes do not hash to its id (edited by hand, torn,
forged) is not used; the object is read from git instead and the file rewritten. So the cache
can only make a read faster, never different: a status computed with it is the status computed
without it. ``monte ledger verify`` reports such an entry (:func:`check`).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import struct
import threading
import time
from collections.abc import Iterator
from pathlib import Path

from monte.ledger.views import own_dir

MAGIC = b"monte-objcache 1\n"
_HEAD = struct.Struct(">40sBI")  # hex id, git type number, length
#: Below this many objects walked (~200 runs) a read is fast without a cache, and none is written.
MIN_OBJECTS = 256
_STALE_TMP_S = 600.0
_TYPES = {1: b"commit", 2: b"tree", 3: b"blob", 4: b"tag"}


def cache_path(git_dir: str | os.PathLike[str], experiment: str) -> Path:
    return own_dir(git_dir) / "cache" / f"{experiment}.objects"


def git_id(type_num: int, raw: bytes) -> bytes:
    """The object id git gives these bytes."""
    h = hashlib.sha1(_TYPES[type_num] + b" " + str(len(raw)).encode() + b"\0")  # noqa: S324 - git's id
    h.update(raw)
    return h.hexdigest().encode()


def _entries(data: bytes) -> Iterator[tuple[bytes, int, bytes]]:
    """(id, type, raw) of each entry; stops at a torn tail."""
    if not data.startswith(MAGIC):
        return
    at, end = len(MAGIC), len(data)
    while at + _HEAD.size <= end:
        sha, type_num, n = _HEAD.unpack_from(data, at)
        at += _HEAD.size
        if at + n > end or type_num not in _TYPES:
            return
        yield sha, type_num, data[at:at + n]
        at += n


class ObjectCache:
    """One experiment's cache file, loaded once per read. ``get`` returns verified bytes or None."""

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self._old: dict[bytes, tuple[int, bytes]] = {}
        if path is not None:
            try:
                data = path.read_bytes()
            except OSError:
                data = b""
            self._old = {sha: (t, raw) for sha, t, raw in _entries(data)}
        self._used: dict[bytes, tuple[int, bytes]] = {}
        self.misses = 0
        self.rejected = 0

    def get(self, sha: bytes) -> tuple[int, bytes] | None:
        found = self._old.get(sha)
        if found is None:
            return None
        if git_id(*found) != sha:  # not the object this id names: never used
            self.rejected += 1
            return None
        self._used[sha] = found
        return found

    def put(self, sha: bytes, type_num: int, raw: bytes) -> None:
        self.misses += 1
        self._used[sha] = (type_num, raw)

    def save(self) -> None:
        """Rewrite the file with what this read used, when it differs from what was there.
        Best effort: a read-only repository (a hook's quarantine) just reads from git again."""
        if self.path is None or len(self._used) < MIN_OBJECTS:
            return  # a small ledger reads fast from git: no file
        if not self.rejected and self.misses <= max(64, len(self._old) // 20):
            return  # a few objects new since the file was written (an append makes 5): read from
            # git for now, and rewrite the file (10 MB at 10,000 runs) only once they add up
        parts = [MAGIC]
        for sha, (t, raw) in self._used.items():
            parts += [_HEAD.pack(sha, t, len(raw)), raw]
        tmp = self.path.with_name(f".{self.path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            for old in self.path.parent.glob(f".{self.path.name}.*.tmp"):  # a writer killed mid-write
                if time.time() - old.stat().st_mtime > _STALE_TMP_S:
                    old.unlink(missing_ok=True)
            tmp.write_bytes(b"".join(parts))
            os.replace(tmp, self.path)
        except OSError:
            with contextlib.suppress(OSError):  # .git/monte made a file: no cache, not a crash
                tmp.unlink(missing_ok=True)


def check(git_dir: str | os.PathLike[str]) -> list[str]:
    """Every cache entry whose bytes do not hash to its id (a forged or torn cache), by file.
    Such an entry is never used (it is read from git instead); this names it for ``verify``."""
    out: list[str] = []
    folder = own_dir(git_dir) / "cache"
    for path in sorted(folder.glob("*.objects")) if folder.is_dir() else []:
        data = path.read_bytes()
        if not data.startswith(MAGIC):
            out.append(f"{path.name}: not a monte object cache")
            continue
        bad = [sha.decode(errors="replace") for sha, t, raw in _entries(data) if git_id(t, raw) != sha]
        if bad:
            out.append(f"{path.name}: {len(bad)} object(s) whose bytes are not their id ({', '.join(bad[:3])})")
    return out
