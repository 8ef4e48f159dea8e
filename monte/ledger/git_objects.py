"""git objects written and read beside a running git: an object two writers add at once, one
``git repack`` moves under a read, a fan-out folder ``git prune-packed`` removes under a write,
a lock a dead writer left; and the named refusal for an object that is really gone."""

from __future__ import annotations

import contextlib
import os
import time

from dulwich.file import FileLocked, adjust_shared_perm
from dulwich.object_store import PACK_MODE, BaseObjectStore, DiskObjectStore
from dulwich.objects import ObjectID, RawObjectID, ShaFile
from dulwich.repo import Repo

from monte.errors import IntegrityError
from monte.ledger.locks import STALE_LOCK_S, break_stale_lock

#: How often a folder that git removes under a write (a ref's, by ``pack-refs``; an object's
#: fan-out folder, by ``prune-packed``) is made again before the write gives up.
REMAKES = 100
#: How often an object that looks missing is looked up again (``git repack`` moves it from its
#: loose file into a new pack between dulwich's look in the packs and its look for the file).
_REREADS = 3


def add_object(store: BaseObjectStore, obj: ShaFile) -> None:
    """Add an object, tolerating another process writing the very same object at once.

    Objects are content-addressed, so two writers often produce identical blobs or trees
    (``meta.json`` of racing appends, identical records under a pinned clock). dulwich writes a
    loose object through an exclusive ``.lock`` file; the loser of that race gets
    ``FileLocked`` although the object it wanted is (about to be) there.
    """
    give_up = time.monotonic() + STALE_LOCK_S + 4.0
    while True:
        try:
            store.add_object(obj)
            return
        except (FileLocked, FileExistsError) as e:
            if obj.id in store:
                return
            # A writer that died holding the object's lock (the same bytes under the same name:
            # ``meta.json`` of the next record, say) would stop every later append: break it.
            lock = getattr(e, "lockfilename", None)
            path = getattr(store, "path", None)
            if lock is not None and path is not None and break_stale_lock(os.path.dirname(path), os.fsdecode(lock)):
                continue
            if time.monotonic() > give_up:
                raise OSError(f"could not write git object {obj.id.decode()}: a .lock file is in the way") from None
            time.sleep(0.005)


class MissingObject(IntegrityError, KeyError):
    """A git object monte needs is not in the repository (``E_INTEGRITY``). Also a ``KeyError``,
    which is how dulwich says "missing", so code that expects a miss (a shallow copy, a commit
    another clone has not sent yet) still handles it; anywhere else it is a named refusal."""


def missing_object(sha: bytes, *, shallow: bool = False) -> MissingObject:
    short = sha.decode(errors="replace")[:12]
    if shallow:  # a `git clone --depth N`: the history before its shallow commits was never sent
        return MissingObject(
            f"git object {short} is not in this repository: it is a shallow clone (`git clone --depth`), "
            "which holds no history before its shallow commits, and monte's records need their whole history "
            "(verify re-derives every rule from it)",
            fix="fetch the whole history: `git fetch --unshallow` (or clone again without --depth), then run "
                "the command again", code="E_INTEGRITY")
    return MissingObject(
        f"git object {short} is missing from this repository's .git/objects: something deleted it "
        "after it was written, most likely `git prune --expire=now` or `git gc --prune=now` run "
        "while monte was writing (git documents both as unsafe beside a running writer); "
        "`git fsck` lists every missing object",
        fix="bring it back from a copy that has it (`git fetch` from another clone, or `monte sync` "
            "from the results bucket), then run the command again; if no copy has it, the records "
            "that need it are lost (docs/reliability.md, git maintenance)",
        code="E_INTEGRITY")


class ObjectsBesideGit(DiskObjectStore):
    """dulwich's object store, for use while git maintains the same repository.

    ``git repack`` and ``gc`` move loose objects into a new pack and then delete the loose files;
    dulwich looks in its packs first and for the loose file second, so an object moved between
    the two looks missing: a miss is looked up again (the second look rescans the packs). A
    real miss is :class:`MissingObject`. Loose objects are written by :func:`write_loose`.
    """

    def get_raw(self, name: RawObjectID | ObjectID) -> tuple[int, bytes]:
        for _ in range(_REREADS - 1):
            try:
                return super().get_raw(name)
            except KeyError:
                pass
        try:
            return super().get_raw(name)
        except KeyError:
            shallow = os.path.exists(os.path.join(os.path.dirname(self.path), "shallow"))
            raise missing_object(name if len(name) == 40 else name.hex().encode(), shallow=shallow) from None

    def __contains__(self, sha: ObjectID) -> bool:
        return super().__contains__(sha) or super().__contains__(sha)

    def add_object(self, obj: ShaFile) -> None:
        write_loose(self, obj)


def beside_git(repo: Repo) -> None:
    """Give ``repo`` the object store above (dulwich builds its own from the repository's config,
    alternates and permissions; this keeps all that and changes only the behaviour)."""
    if type(repo.object_store) is DiskObjectStore:
        repo.object_store.__class__ = ObjectsBesideGit


def _loose_path(objects: DiskObjectStore, sha: ObjectID) -> str:
    hexsha = sha.decode("ascii")
    return os.path.join(objects.path, hexsha[:2], hexsha[2:])


def present(objects: DiskObjectStore, sha: ObjectID) -> bool:
    return os.path.exists(_loose_path(objects, sha)) or sha in objects


def write_loose(objects: DiskObjectStore, obj: ShaFile) -> None:
    """Write ``obj`` as a loose object, as dulwich does (its ``<object>.lock`` created exclusively,
    written, renamed into place; one already there is only freshened, so that an age-based prune
    spares it), except in two ways:

    - ``git prune-packed`` (run by ``repack -d`` and ``gc``) removes fan-out folders it leaves
      empty, so the folder made for the object can be gone before its lock is created in it: it
      is made again (dulwich raised ``FileNotFoundError``);
    - when the write fails (a full disk, a file system gone read-only, an interrupt), the lock it
      created is removed before the error goes on. On a full disk dulwich's own write failed when
      it closed the file, left a 0-byte lock (``git fsck``: "bad sha1 file") and printed a second
      error when the interpreter collected it.

    A lock that exists already is another writer's: ``FileLocked``, as from dulwich.
    """
    path = _loose_path(objects, obj.id)
    try:
        os.utime(path)
        return
    except FileNotFoundError:
        pass
    except PermissionError:
        pass  # another user's object in a shared repository: write it anew for a fresh mtime
    data = obj.as_legacy_object(compression_level=objects.loose_compression_level)
    folder, lock = os.path.dirname(path), path + ".lock"
    for _ in range(REMAKES):
        try:
            os.mkdir(folder)
            adjust_shared_perm(folder, objects.shared_perm)
        except FileExistsError:
            pass
        try:
            fd = os.open(lock, os.O_WRONLY | os.O_CREAT | os.O_EXCL, PACK_MODE)
            break
        except FileExistsError:
            raise FileLocked(path, lock) from None
        except FileNotFoundError:
            continue  # git removed the empty folder between the mkdir and the open
    else:
        raise FileNotFoundError(f"git keeps removing {folder} while monte writes an object in it")
    placed = False
    try:
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
            if objects.fsync_object_files:
                os.fsync(fd)
        finally:
            os.close(fd)
        adjust_shared_perm(lock, objects.shared_perm)
        os.replace(lock, path)
        placed = True
    finally:
        if not placed:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(lock)
