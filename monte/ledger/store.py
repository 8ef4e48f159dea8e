"""The ledger store: one git commit per record, written with dulwich.

A ledger is a ref (``refs/heads/monte/<exp>/ledger``); each commit on it is one record, and its
tree is the whole state after that record. Appends move the ref by compare-and-swap: a writer
that loses the race re-reads the new tip, re-applies its record there (re-checking the rules,
which the record's ``build`` function does) and tries again. Nothing here knows monte's rules;
it stores bytes at paths and keeps history append-only.

No work tree is touched and no ``git`` binary is needed.
"""

from __future__ import annotations

import os
import random
import shutil
import stat
import subprocess
import sys
import time
import weakref
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from dulwich.errors import NotGitRepository
from dulwich.file import FileLocked
from dulwich.object_store import BaseObjectStore, DiskObjectStore
from dulwich.objects import Blob, Commit, ObjectID, ShaFile, Tree
from dulwich.reflog import format_reflog_line
from dulwich.refs import Ref
from dulwich.repo import Repo

from monte.errors import error
from monte.ledger.commits import commit_identity, config_user, format_message, parse_trailers
from monte.ledger.git_objects import (
    REMAKES,
    MissingObject,
    ObjectsBesideGit,
    add_object,
    beside_git,
    missing_object,
    present,
    write_loose,
)
from monte.ledger.locks import STALE_LOCK_S, STALE_REF_LOCK_S, break_stale_lock, lock_wait
from monte.ledger.refs import PREFIX
from monte.ledger.tips import REFLOG_MESSAGE, Ancestry, Tips, restore_fix, rewind_what

MODE_FILE = 0o100644
MODE_DIR = stat.S_IFDIR

# git's own gc.auto heuristic: sample one loose-object folder and pack when it suggests more
# than ~6700 loose objects (27 in one of 256 folders). Keeps a long-lived ledger a few packs.
_GC_SAMPLE_DIR = "17"
_GC_SAMPLE_LIMIT = 27
_MAX_RETRIES = 200

__all__ = ["MODE_DIR", "MODE_FILE", "STALE_LOCK_S", "STALE_REF_LOCK_S", "Change", "MissingObject",
           "ObjectsBesideGit", "Snapshot", "Store", "add_object", "break_stale_lock", "config_user",
           "format_message", "missing_object", "parse_trailers", "write_loose"]


@dataclass(frozen=True)
class Change:
    """What one record writes: files to set (bytes) or delete (None), a summary line, trailers."""

    summary: str
    writes: Mapping[str, bytes | None] = field(default_factory=dict)
    trailers: Mapping[str, str] = field(default_factory=dict)


class Snapshot:
    """A read-only view of one commit's tree. Reads load only the trees on the path asked for."""

    def __init__(self, repo: Repo, commit_id: ObjectID | None) -> None:
        self._repo = repo
        self.commit_id = commit_id
        self._tree_id: ObjectID | None = None
        self._trees: dict[ObjectID, Tree] = {}
        if commit_id is not None:
            commit = repo.object_store[commit_id]
            assert isinstance(commit, Commit)
            self._tree_id = commit.tree

    @property
    def empty(self) -> bool:
        return self.commit_id is None

    def _tree(self, sha: ObjectID) -> Tree:
        """Parsed trees, cached: a snapshot is immutable, and reading many paths under one
        folder (every fan-out index) would otherwise re-parse the same trees each time."""
        tree = self._trees.get(sha)
        if tree is None:
            obj = self._repo.object_store[sha]
            assert isinstance(obj, Tree)
            tree = self._trees[sha] = obj
        return tree

    def _lookup(self, path: str) -> tuple[int, ObjectID] | None:
        if self._tree_id is None:
            return None
        tree_id = self._tree_id
        parts = [p for p in path.split("/") if p]
        mode, sha = MODE_DIR, tree_id
        for part in parts:
            if mode != MODE_DIR:
                return None
            tree = self._tree(sha)
            try:
                mode, sha = tree[part.encode()]
            except KeyError:
                return None
        return mode, sha

    def read(self, path: str) -> bytes | None:
        found = self._lookup(path)
        if found is None or found[0] == MODE_DIR:
            return None
        blob = self._repo.object_store[found[1]]
        assert isinstance(blob, Blob)
        return blob.data

    def exists(self, path: str) -> bool:
        return self._lookup(path) is not None

    def listdir(self, path: str = "") -> list[str]:
        found = self._lookup(path) if path else ((MODE_DIR, self._tree_id) if self._tree_id else None)
        if found is None or found[0] != MODE_DIR:
            return []
        return [entry.path.decode() for entry in self._tree(found[1]).iteritems()]


class Store:
    """A monte repository's ledger, lineage and vault refs."""

    def __init__(self, root: str | os.PathLike[str]) -> None:
        try:
            self.repo = Repo(str(root))
        except NotGitRepository:
            raise error(
                "E_NOT_INITIALIZED",
                f"{root} is not a git repository",
                "run monte inside a git repository (git init), then `monte init`",
            ) from None
        self.root = Path(root)
        self.tips = Tips(self.repo.commondir())
        self._tips_ok = False
        self._user: tuple[str | None, str | None] | None = None
        self._signer: tuple[Path | None] | None = None
        self._written: list[ShaFile] = []
        beside_git(self.repo)
        # Close pack files before interpreter teardown (dulwich's __del__ fails noisily then).
        weakref.finalize(self, self.repo.close)

    @classmethod
    def from_git_env(cls) -> Store | None:
        """The repository a git hook runs in, as git describes it (``GIT_DIR``, and for a push
        the quarantine: ``GIT_OBJECT_DIRECTORY`` + ``GIT_ALTERNATE_OBJECT_DIRECTORIES``), so a
        hook sees the objects being pushed, in a bare repository too. None outside a hook."""
        git_dir = os.environ.get("GIT_DIR")
        if not git_dir:
            return None
        objects = os.environ.get("GIT_OBJECT_DIRECTORY")
        alternates = [a for a in os.environ.get("GIT_ALTERNATE_OBJECT_DIRECTORIES", "").split(os.pathsep) if a]
        store = cls.__new__(cls)
        store.repo = Repo(controldir=os.path.abspath(git_dir), object_directory=objects,
                          alternates=alternates or None, bare=True)
        store.root = Path(git_dir)
        store.tips = Tips(store.repo.commondir())
        store._tips_ok = False
        store._user = None
        store._signer = None
        store._written = []
        beside_git(store.repo)
        weakref.finalize(store, store.repo.close)
        return store

    # --- reading -----------------------------------------------------------------------------

    def tip(self, ref: str) -> ObjectID | None:
        try:
            return self.repo.refs[Ref(ref.encode())]
        except KeyError:
            return None

    def snapshot(self, ref: str) -> Snapshot:
        return Snapshot(self.repo, self.tip(ref))

    def refs_under(self, prefix: str) -> dict[str, ObjectID]:
        """Refs whose name starts with ``prefix`` (a folder, e.g. ``refs/heads/monte/``)."""
        keys = self.repo.refs.keys(base=Ref(prefix.rstrip("/").encode()))
        out = {}
        for key in keys:
            name = prefix.rstrip("/") + "/" + key.decode()
            sha = self.tip(name)
            if sha is not None:
                out[name] = sha
        return out

    def log(self, ref: str) -> Iterator[Commit]:
        """Commits reachable from ``ref`` along first parents, newest first."""
        sha = self.tip(ref)
        while sha is not None:
            commit = self.repo.object_store[sha]
            assert isinstance(commit, Commit)
            yield commit
            sha = commit.parents[0] if commit.parents else None

    # --- writing -----------------------------------------------------------------------------

    def append(
        self,
        ref: str,
        build: Callable[[Snapshot], Change],
        *,
        create: bool = False,
        extra_parents: tuple[ObjectID, ...] = (),
    ) -> ObjectID:
        """Append one record to ``ref`` and return the new commit id.

        ``build`` sees the current tip and returns the :class:`Change` to make, or raises a
        :class:`~monte.errors.MonteError` to refuse (then nothing is written). On a lost
        compare-and-swap it is called again on the new tip. With ``create`` the ref must not
        exist yet (``add_if_new``), so two creators cannot both win.
        """
        for attempt in range(_MAX_RETRIES):
            old = self.tip(ref)
            snap = Snapshot(self.repo, old)
            change = build(snap)
            commit_id = self._write_commit(snap, change, extra_parents)
            if create and old is not None:
                raise error("E_CONFLICT", f"{ref} already exists", "pick another name")
            if self.set_ref(ref, old, commit_id, message=change.summary):
                self._maybe_pack()
                return commit_id
            # Lost the race: back off a little (jittered) and re-apply on the new tip.
            time.sleep(min(0.05, 0.001 * (attempt + 1)) * random.random())
        raise error(
            "E_CONFLICT",
            f"gave up appending to {ref} after {_MAX_RETRIES} lost races",
            "another writer is appending very fast; retry the command",
        )

    def _write_commit(self, snap: Snapshot, change: Change, extra_parents: tuple[ObjectID, ...]) -> ObjectID:
        parents = ([snap.commit_id] if snap.commit_id else []) + list(extra_parents)
        return self._commit(snap._tree_id, change.writes, change.summary, change.trailers, parents, snap._trees)

    def _commit(self, base_tree: ObjectID | None, writes: Mapping[str, bytes | None], summary: str,
                trailers: Mapping[str, str], parents: list[ObjectID],
                cache: dict[ObjectID, Tree] | None = None) -> ObjectID:
        """Write the blobs, the trees over ``base_tree`` and the commit; return its id. The
        objects are kept until the ref moves onto the commit (:meth:`_still_there`)."""
        store = self.repo.object_store
        written: list[ShaFile] = []
        changes: dict[str, ObjectID | None] = {}
        for path, data in writes.items():
            if data is None:
                changes[path] = None
            else:
                blob = Blob.from_string(data)
                add_object(store, blob)
                written.append(blob)
                changes[path] = blob.id
        commit = Commit()
        commit.tree = _apply_changes(store, base_tree, changes, cache, written)
        commit.parents = parents
        who, when, tz = self._identity()
        commit.author = commit.committer = who
        commit.author_time = commit.commit_time = when
        commit.author_timezone = commit.commit_timezone = tz
        commit.encoding = b"UTF-8"
        commit.message = format_message(summary, trailers).encode()
        key = self._signing_key()
        if key is not None:  # as `git commit -S` with gpg.format=ssh: the object without its gpgsig, signed
            from monte.ledger.signing import GIT_NAMESPACE, ssh_sign

            commit.gpgsig = ssh_sign(key, commit.as_raw_string(), GIT_NAMESPACE)
        add_object(store, commit)
        written.append(commit)
        self._written = written
        return commit.id

    def set_ref(self, ref: str, old: ObjectID | None, new: ObjectID, *, message: str | None = None) -> bool:
        """Move ``ref`` from ``old`` to ``new`` by compare-and-swap (``old=None``: create).

        Another process holding the ref's ``.lock`` is waited for (a few milliseconds); a lock
        left by a writer that died holding it (SIGKILL between taking the lock and renaming it
        into place) is removed once it is stale (:func:`break_stale_lock`). A lock still held
        after that is a lost race: False, retry on the tip.

        Every move is remembered (:mod:`monte.ledger.tips`). A ``refs/heads/monte/`` ref that
        something other than monte moved back, away from the newest tip monte wrote, is not
        written to (``E_VERIFY``): a record appended there would hide the ones it lost. Such a
        move also gets a git reflog line (``git reflog show monte/<exp>/ledger``), written, like
        the memory, once the ref has moved.
        """
        name = Ref(ref.encode())
        ours = ref.startswith(PREFIX)
        if not self._tips_ok:
            self.tips.check()  # a memory that cannot be written: refuse before the ref moves
            self._tips_ok = True
        if ours and not self._keeps_newest_tip(ref, old, new):
            return False
        give_up: float | None = None
        remade = 0
        while True:
            try:
                if old is None:
                    done = bool(self.repo.refs.add_if_new(name, new))
                else:
                    done = bool(self.repo.refs.set_if_equals(name, old, new))
            except FileNotFoundError:
                # `git pack-refs` (and so `git gc`) removes a ref's folder once its loose refs are
                # packed: dulwich made the folder, git removed it, and the lock could not be
                # created in it. dulwich makes it again on the next try.
                remade += 1
                if remade > REMAKES:
                    raise
                continue
            except FileLocked as e:
                lock = os.fsdecode(e.lockfilename)
                if break_stale_lock(self.repo.commondir(), lock, STALE_REF_LOCK_S, git_may_hold=True):
                    continue
                if give_up is None:  # a live writer's lock goes within milliseconds; one that
                    # nobody holds open may be a dead writer's: wait until it can be broken
                    give_up = time.monotonic() + lock_wait(lock, STALE_REF_LOCK_S)
                if time.monotonic() > give_up:
                    return False
                time.sleep(0.005 + 0.02 * random.random())
                continue
            if done:
                self._still_there(new)
                # the record landed: a memory that cannot be written is a weaker check, not a
                # failure (said, so that a full disk is not found later as a missing line)
                try:
                    self.tips.record(ref, old, new)
                except OSError as e:
                    _missed_memory(ref, new, self.tips.log, e)
                if ours:
                    try:
                        who, when, tz = self._identity()
                        self.tips.reflog(ref, format_reflog_line(
                            old, new, who, when, tz, f"{REFLOG_MESSAGE}{message or 'update'}".encode()))
                    except OSError as e:
                        _missed_memory(ref, new, Path(self.tips.git_dir) / "logs" / ref, e)
            return done

    def _keeps_newest_tip(self, ref: str, old: ObjectID | None, new: ObjectID) -> bool:
        """Whether ``new`` still holds the newest tip monte wrote to ``ref``. O(1) when it moves
        on from that tip (the common case); else a walk from ``new`` that stops at it. False: a
        lost race (the ref moved since ``old`` was read). A ref moved back by hand refuses."""
        newest = self.tips.newest(ref)
        if newest is None or newest == old or newest == new:
            return True
        if newest in Ancestry(self.repo.object_store, new):
            return True
        if self.tip(ref) != old:
            return False  # another writer moved it (and the memory) on: retry on the new tip
        raise error("E_VERIFY", rewind_what(ref, newest, deleted=old is None) + "; monte writes nothing on "
                    "a rewound ref, as a record there would hide the records it lost",
                    restore_fix(ref, newest) + ", then run the command again")

    def _still_there(self, new: ObjectID) -> None:
        """Write again any object of the commit the ref just moved onto that is gone.

        Until the ref moved, the objects this process wrote for it were unreachable, and
        ``git prune --expire=now`` (or ``gc --prune=now``) deletes unreachable objects however new
        they are: run beside monte, it left the ledger on a missing commit. Now that they are
        reachable no later prune removes them; one already past its reachability walk still can
        (git documents those commands as unsafe beside a writer), and a read then refuses
        :class:`MissingObject`. A few ``stat`` calls: the objects are loose, just written."""
        written, self._written = self._written, []
        if not written or written[-1].id != new:
            return  # not a commit this store wrote (a fetched one, say)
        objects = self.repo.object_store
        try:
            for obj in written:
                if isinstance(objects, DiskObjectStore) and not present(objects, obj.id):
                    write_loose(objects, obj)
        except (OSError, FileLocked):
            pass  # the record landed; an object that cannot be written again refuses at its next read

    def _signing_key(self) -> Path | None:
        """The SSH key git's config asks commits to be signed with (read once per Store)."""
        signer = getattr(self, "_signer", None)
        if signer is None:
            from monte.ledger.signing import commit_signing_key

            signer = self._signer = (commit_signing_key(self.repo),)
        return signer[0]

    def _identity(self) -> tuple[bytes, int, int]:
        """:func:`commit_identity`, reading the repository's config once per Store, not per commit
        (a read costs ~0.1 ms; an append writes a commit and a reflog line)."""
        if self._user is None and not (os.environ.get("GIT_COMMITTER_NAME") and os.environ.get("GIT_COMMITTER_EMAIL")):
            self._user = config_user(self.repo)
        return commit_identity(self.repo, self._user or (None, None))

    def write_commit(self, tree_files: Mapping[str, bytes], summary: str, trailers: Mapping[str, str],
                     parents: list[ObjectID]) -> ObjectID:
        """Write a commit with a fresh tree of ``tree_files`` and explicit parents (lineage)."""
        return self._commit(None, tree_files, summary, trailers, list(parents))

    def _maybe_pack(self) -> None:
        objects = Path(self.repo.commondir()) / "objects"
        try:
            sampled = len(os.listdir(objects / _GC_SAMPLE_DIR))
        except FileNotFoundError:
            return
        if sampled <= _GC_SAMPLE_LIMIT:
            return
        self.pack()

    def pack(self) -> None:
        """Pack loose objects; fold many packs into one.

        With a ``git`` binary on the machine, git does it (``pack-objects`` with deltas: about
        10x less disk than whole objects, and fast; then a geometric ``repack``). Without one, dulwich packs the loose objects
        (no deltas, never a full in-memory repack inside an append). One packer at a time
        (an ``O_EXCL`` lock file; a busy lock means someone else is packing: skip). A loose
        object is deleted only after the pack holding it is in place, so concurrent readers
        and writers never miss one. Packing runs after a record has landed and must never fail
        the append, so its errors are swallowed.
        """
        objects = Path(self.repo.commondir()) / "objects"
        lock = objects / "monte-pack.lock"
        try:
            if lock.exists() and time.time() - lock.stat().st_mtime > 600:
                lock.unlink(missing_ok=True)  # left by a packer that died
            os.close(os.open(lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
        except OSError:
            return
        try:
            git = shutil.which("git")
            if git:
                self._git_repack(git, objects)
            else:
                self._dulwich_pack()
        except (OSError, FileLocked, subprocess.SubprocessError):
            pass
        finally:
            lock.unlink(missing_ok=True)

    def _git_repack(self, git: str, objects: Path) -> None:
        """Every loose object (reachable or not: a lost race leaves a few dangling ones, and
        leaving them loose would re-trigger packing on every append) into one delta pack with
        ``git pack-objects``, then ``prune-packed`` drops the loose copies, and a geometric
        ``repack`` folds small packs together."""
        run = [git, "--git-dir", str(self.repo.controldir())]
        loose = sorted(d.name + f.name for d in objects.iterdir() if len(d.name) == 2 and d.is_dir()
                       for f in d.iterdir() if len(f.name) == 38)
        if loose:
            subprocess.run([*run, "pack-objects", "-q", str(objects / "pack" / "pack")],
                           input="\n".join(loose) + "\n", text=True, capture_output=True, timeout=600,
                           check=True)
            subprocess.run([*run, "prune-packed", "-q"], capture_output=True, timeout=600, check=True)
        # Keep the pack count logarithmic in the ledger's size (reads probe every pack): each
        # pack at least twice the size of the next smaller one; every object of a merged pack
        # is kept, reachable or not.
        subprocess.run([*run, "repack", "-d", "-q", "--geometric=2"], capture_output=True, timeout=600,
                       check=True)

    def _dulwich_pack(self) -> None:
        store = self.repo.object_store
        loose = [o for o in (store._get_loose_object(s) for s in store._iter_loose_objects())
                 if o is not None]
        if loose:
            store.add_objects([(o, None) for o in loose])
            for o in loose:
                try:
                    store.delete_loose_object(o.id)
                except FileNotFoundError:
                    pass

    def close(self) -> None:
        self.repo.close()


def _apply_changes(
    store: BaseObjectStore, tree_id: ObjectID | None, changes: Mapping[str, ObjectID | None],
    cache: dict[ObjectID, Tree] | None = None, written: list[ShaFile] | None = None,
) -> ObjectID:
    return _write_tree(store, tree_id, changes, cache, [] if written is None else written)[0]


def _write_tree(
    store: BaseObjectStore, tree_id: ObjectID | None, changes: Mapping[str, ObjectID | None],
    cache: dict[ObjectID, Tree] | None, written: list[ShaFile],
) -> tuple[ObjectID, int]:
    """Write the trees for ``changes`` (path -> blob id, or None to delete) over ``tree_id``.

    Only the trees on a changed path are rewritten, so an append to a fanned-out ledger costs
    O(depth x fan-out), not O(records).
    """
    tree = Tree()
    if tree_id is not None:
        old = cache.get(tree_id) if cache is not None else None
        if old is None:
            found = store[tree_id]
            assert isinstance(found, Tree)
            old = found
        for entry in old.iteritems():
            tree.add(entry.path, entry.mode, entry.sha)
    nested: dict[str, dict[str, ObjectID | None]] = {}
    for path, sha in changes.items():
        head, _, rest = path.strip("/").partition("/")
        if rest:
            nested.setdefault(head, {})[rest] = sha
        elif sha is None:
            if head.encode() in tree:
                del tree[head.encode()]
        else:
            tree.add(head.encode(), MODE_FILE, sha)
    for name, sub in nested.items():
        key = name.encode()
        sub_id = tree[key][1] if key in tree and tree[key][0] == MODE_DIR else None
        new_sub, entries = _write_tree(store, sub_id, sub, cache, written)
        if entries == 0:  # a folder left empty disappears, as in git
            if key in tree:
                del tree[key]
        else:
            tree.add(key, MODE_DIR, new_sub)
    add_object(store, tree)
    written.append(tree)
    return tree.id, len(tree)


def _missed_memory(ref: str, new: ObjectID, log: Path, e: OSError) -> None:
    print(f"monte: note: {ref} moved to {new.decode()[:12]}, but {log} could not remember it "
          f"({e.strerror or e}): a later rewind past it is caught by the other log (monte's tips or git's reflog)",
          file=sys.stderr)
