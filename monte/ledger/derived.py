"""What a reader derives from each fan-out index, kept between reads, keyed by the index's id.

``monte status`` turns every row of an experiment into a few facts (its target, what it
shows, its delta, its output line). Parsing 1,024 index blobs and deriving 10,000 rows' facts
is most of a status call at 10,000 runs; an append changes one index. This cache keeps, per
experiment and per reader (``name``), the facts derived from each index blob, keyed by the
blob's git id: an index's bytes never change under its id, so an entry can never be stale.
It also remembers the ``runs/`` tree it last described; when the tip's ``runs/`` tree is that
one, the read skips the walk entirely.

The file is ``<git dir>/monte/cache/<experiment>.<name>``: a header, a ``marshal`` payload and
an HMAC-SHA256 of both under a key kept beside it (``key``, 32 random bytes, mode 0600). A file
that is torn, edited or forged fails the MAC and is not used (the facts are derived from the
indexes again, and the file rewritten): the key keeps a stray edit, a partial write or another
user's file from feeding a status. ``monte ledger verify`` re-derives every entry from its blob
and names an entry that differs (:func:`check`), so a cache that passed its MAC and still lies
(a key read and a payload forged by hand) is a verify failure.

A reader may also keep a *view* (:class:`ViewCache`): what it printed for one state of the
repository (``<experiment>.view-<mode>``), keyed by a digest of every ref that state is read
from and of the code that made it, with what the view judged of each live-looking run's process.
It is the same signed file; a view whose key is not the repository's current state is never
used, and verify derives the view of the current state again and names one that differs.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import marshal
import os
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, NamedTuple

from monte.ledger.views import own_dir

MAGIC = b"monte-derived 1\n"
_MAC = 32
_STALE_TMP_S = 600.0

#: what a reader derives from one index blob's parsed entries: a list of marshal-able values
Derive = Callable[[dict[str, Any]], list[Any]]


def cache_path(git_dir: str | os.PathLike[str], experiment: str, name: str) -> Path:
    return own_dir(git_dir) / "cache" / f"{experiment}.{name}"


def _key(folder: Path, *, create: bool) -> bytes | None:
    path = folder / "key"
    try:
        key = path.read_bytes()
        if len(key) == 32:
            return key
    except OSError:
        pass
    if not create:
        return None
    import secrets

    key = secrets.token_bytes(32)
    tmp = folder / f".key.{os.getpid()}.{threading.get_ident()}.tmp"
    try:
        folder.mkdir(parents=True, exist_ok=True)
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(key)
        os.link(tmp, path)  # the first writer's key wins; a racing writer reads it back
    except FileExistsError:
        pass
    except OSError:
        return None
    finally:
        with contextlib.suppress(OSError):  # .git/monte made a file: no cache, not a crash
            tmp.unlink(missing_ok=True)
    try:
        key = path.read_bytes()
    except OSError:
        return None
    return key if len(key) == 32 else None


def mac(git_dir: str | os.PathLike[str], body: bytes, *, create: bool) -> bytes | None:
    """HMAC-SHA256 of ``body`` under the repository's key (the one the caches here are signed
    with), None where there is no key this user can read (or, with ``create``, write). Other
    memory monte keeps under ``<git dir>/monte`` and trusts without re-deriving (the tips a
    verify saw pass) is signed with it, so a line appended by hand is not believed."""
    key = _key(own_dir(git_dir) / "cache", create=create)
    return None if key is None else hmac.new(key, body, hashlib.sha256).digest()


def _load(path: Path) -> tuple[bool, Any]:
    """(rejected, payload): the signed file's payload, None where there is none this user can
    judge (no file, no readable key); ``rejected`` when it is torn, edited or forged."""
    try:
        raw = path.read_bytes()
    except OSError:
        return False, None
    key = _key(path.parent, create=False)
    if key is None:  # no key this user can read (removed, or another user's): not used, not judged
        return False, None
    if not raw.startswith(MAGIC) or len(raw) < len(MAGIC) + _MAC:
        return True, None
    view = memoryview(raw)  # (no copy of a payload of megabytes: slicing one costs as much as reading it)
    body, mac = view[:-_MAC], raw[-_MAC:]
    if not hmac.compare_digest(hmac.new(key, body, hashlib.sha256).digest(), mac):
        return True, None
    try:
        return False, marshal.loads(body[len(MAGIC):])
    except (ValueError, EOFError, TypeError):
        return True, None


def _save(path: Path, payload: Any) -> None:
    """Write a signed file, best effort (a read-only repository just derives again next time)."""
    folder = path.parent
    key = _key(folder, create=True)
    if key is None:
        return
    dumped = marshal.dumps(payload)
    mac = hmac.new(key, MAGIC, hashlib.sha256)
    mac.update(dumped)  # (the file is written in parts: no copy of the payload)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    try:
        for old in folder.glob(f".{path.name}.*.tmp"):  # a writer killed mid-write
            if time.time() - old.stat().st_mtime > _STALE_TMP_S:
                old.unlink(missing_ok=True)
        with open(tmp, "wb") as f:
            f.write(MAGIC)
            f.write(dumped)
            f.write(mac.digest())
        os.replace(tmp, path)
    except OSError:
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)


class DerivedCache:
    """One experiment's cache for one reader: load once, look entries up, save what was used."""

    def __init__(self, git_dir: str | os.PathLike[str], experiment: str, name: str, version: str) -> None:
        self.path = cache_path(git_dir, experiment, name)
        self.version = version
        self.runs_tree = b""
        self.entries: dict[bytes, list[Any]] = {}
        self.rejected = False
        data = self._read()
        if data is not None:
            self.runs_tree, self.entries = data

    def _read(self) -> tuple[bytes, dict[bytes, list[Any]]] | None:
        self.rejected, payload = _load(self.path)
        if payload is None:
            return None
        try:
            version, runs_tree, entries = payload
        except (ValueError, TypeError):
            self.rejected = True
            return None
        if version != self.version:
            return None  # written by another monte: derived again, not an error
        return runs_tree, entries

    def save(self, runs_tree: bytes, entries: dict[bytes, list[Any]]) -> None:
        """Best effort (a read-only repository just derives again next time)."""
        _save(self.path, (self.version, runs_tree, entries))


#: a view's file name: ``<experiment>.view-<mode>``
VIEW_PREFIX = "view-"


class View(NamedTuple):
    """What a reader printed for one state (``key``): ``live``, each live-looking run's
    (recorded status, (host, pid, process start), found dead) as the view judged it, in record
    order; ``depends``, what else it read outside git (e.g. whether a folder exists), as
    (what, found) pairs; ``payload``, the output."""

    key: str
    live: list[tuple[str, tuple[Any, ...], bool]]
    depends: list[tuple[str, Any]]
    payload: bytes | str


class ViewCache:
    """One experiment's last view in one mode (``json``, ``text``): one entry, the newest."""

    def __init__(self, git_dir: str | os.PathLike[str], experiment: str, mode: str, version: str) -> None:
        self.path = cache_path(git_dir, experiment, VIEW_PREFIX + mode)
        self.version = version
        self.view: View | None = None
        self.rejected, payload = _load(self.path)
        if payload is None:
            return
        try:
            version, key, live, depends, out = payload
            if version == self.version:
                self.view = View(str(key), list(live), list(depends), out)
        except (ValueError, TypeError):
            self.rejected = True

    def save(self, view: View) -> None:
        self.view = view
        _save(self.path, (self.version, view.key, view.live, view.depends, view.payload))


#: a fold's file name: ``<experiment>.fold-<mode>``
FOLD_PREFIX = "fold-"


class Fold(NamedTuple):
    """What a reader gathered of every row at one ledger commit (``tip``), by the code ``code``
    digests: ``state``, its accumulators as ``marshal`` bytes (loaded only when used); and
    ``memo``, figures it derived from their inputs alone (e.g. a detectable effect by n and
    discordance), kept beside them."""

    code: str
    tip: bytes
    state: bytes
    memo: dict[Any, Any]


class FoldCache:
    """One experiment's last fold in one mode: a view that missed continues from it with only
    the rows appended since (:meth:`monte.ledger.experiment.Ledger.appended`), instead of
    gathering every row again. Signed like the views; ``monte ledger verify`` gathers the rows
    at its ``tip`` again and names a fold that differs (:func:`check_folds`)."""

    def __init__(self, git_dir: str | os.PathLike[str], experiment: str, mode: str, version: str) -> None:
        self.path = cache_path(git_dir, experiment, FOLD_PREFIX + mode)
        self.version = version
        self.fold: Fold | None = None
        self.rejected, payload = _load(self.path)
        if payload is None:
            return
        try:
            version, code, tip, state, memo = payload
            if version == self.version and isinstance(state, bytes) and isinstance(memo, dict):
                self.fold = Fold(str(code), bytes(tip), state, memo)
        except (ValueError, TypeError):
            self.rejected = True

    def save(self, fold: Fold) -> None:
        self.fold = fold
        _save(self.path, (self.version, fold.code, fold.tip, fold.state, fold.memo))


def cached_files(git_dir: str | os.PathLike[str]) -> Iterator[tuple[str, str, Path]]:
    """(experiment, reader name, path) of every derived cache file."""
    folder = own_dir(git_dir) / "cache"
    if not folder.is_dir():
        return
    for path in sorted(folder.iterdir()):
        exp, dot, name = path.name.rpartition(".")
        if dot and exp and not path.name.startswith(".") and name != "objects" and path.name != "key":
            yield exp, name, path


def check(git_dir: str | os.PathLike[str], read_blob: Callable[[bytes], bytes | None],
          readers: dict[str, tuple[str, Derive]]) -> list[str]:
    """Every derived cache entry that is not what its reader derives from its blob (``readers``:
    name -> (version, derive)), and every file that fails its MAC, by file. Such a file is never
    used as it stands (a failed MAC) or is a forgery that passed it; this names it for verify."""
    import json

    out: list[str] = []
    for exp, name, path in cached_files(git_dir):
        if name not in readers or name.startswith(VIEW_PREFIX):
            continue
        version, derive = readers[name]
        cache = DerivedCache(git_dir, exp, name, version)
        if cache.rejected:
            out.append(f"{path.name}: its MAC does not match its bytes (torn, edited or forged); it is not used")
            continue
        bad = []
        for sha, facts in cache.entries.items():
            raw = read_blob(sha)
            if raw is None:
                continue  # an index no longer in the repository: never looked up again
            if derive(json.loads(raw)) != facts:
                bad.append(sha.decode(errors="replace"))
        if bad:
            out.append(f"{path.name}: {len(bad)} entr(ies) that are not what the index derives ({', '.join(bad[:3])})")
    return out


#: re-derives a view: (experiment, mode, the view as stored) -> the view of the repository's
#: current state (its payload made again with the stored liveness judgements), or None when
#: the stored key is not the current state (never used again) or it cannot be judged here
Rederive = Callable[[str, str, View], View | None]


def check_views(git_dir: str | os.PathLike[str], version: str, rederive: Rederive) -> list[str]:
    """Every view file that fails its MAC, or whose view of the current state is not what the
    reader makes of that state (a forgery that passed the MAC), by file."""
    out: list[str] = []
    for exp, name, path in cached_files(git_dir):
        if not name.startswith(VIEW_PREFIX):
            continue
        mode = name[len(VIEW_PREFIX):]
        cache = ViewCache(git_dir, exp, mode, version)
        if cache.rejected:
            out.append(f"{path.name}: its MAC does not match its bytes (torn, edited or forged); it is not used")
            continue
        if cache.view is None:
            continue
        again = rederive(exp, mode, cache.view)
        if again is not None and again != cache.view:
            out.append(f"{path.name}: its view of the current state is not what the ledger derives "
                       f"(key {cache.view.key[:12]})")
    return out


#: re-derives a fold: (experiment, mode, the fold as stored) -> its state and memo as the ledger
#: at its tip derives them (with the liveness judgements it holds), or None when it cannot be
#: judged here (another code's, a tip no longer in the repository)
Refold = Callable[[str, str, Fold], tuple[Any, dict[Any, Any]] | None]


def check_folds(git_dir: str | os.PathLike[str], version: str, refold: Refold) -> list[str]:
    """Every fold file that fails its MAC, or whose state or memo is not what the ledger at its
    tip derives (a forgery that passed the MAC), by file."""
    out: list[str] = []
    for exp, name, path in cached_files(git_dir):
        if not name.startswith(FOLD_PREFIX):
            continue
        cache = FoldCache(git_dir, exp, name[len(FOLD_PREFIX):], version)
        if cache.rejected:
            out.append(f"{path.name}: its MAC does not match its bytes (torn, edited or forged); it is not used")
            continue
        if cache.fold is None:
            continue
        again = refold(exp, name[len(FOLD_PREFIX):], cache.fold)
        if again is None:
            continue
        state, memo = again
        try:
            stored = marshal.loads(cache.fold.state)
        except (ValueError, EOFError, TypeError):
            stored = None
        if stored != state or any(memo.get(k, v) != v for k, v in cache.fold.memo.items()):
            out.append(f"{path.name}: its rows at {cache.fold.tip.decode(errors='replace')[:12]} are not what the "
                       "ledger derives")
    return out
