"""Object access for a walk: trees, blobs and diffs read once (or in bulk through git), ancestry.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

from dulwich.objects import Blob, Commit, ObjectID, Tree

from monte.ledger.store import MODE_DIR, Store
from monte.ledger.tips import Remembered
from monte.ledger.verify.model import (
    BULK,
    Passed,
    Violation,
)


class Core:
    """What every part of the :class:`~monte.ledger.verify.Verifier` shares: the store, the
    caches of objects read, the result of the last walk."""

    if TYPE_CHECKING:  # the parts that call each other across modules, defined further down the MRO
        def verify(self, experiment: str, *, tip: ObjectID | None = None,
                   since: ObjectID | None = None) -> list[Violation]: ...

        def verify_vault(self, *, tip: ObjectID | None = None, since: ObjectID | None = None) -> list[Violation]: ...

        def verify_lineage(self, experiment: str, run: str, *, tip: ObjectID | None = None,
                           since: ObjectID | None = None) -> list[Violation]: ...

        def _read_lineage(self, tips: Sequence[ObjectID], since: ObjectID | None = None) -> None: ...

    def __init__(self, store: Store) -> None:
        self.store = store
        self.objects = store.repo.object_store
        self.records = 0  # records checked by the last verify()
        # (experiment, tip, rows there, whether that is every row) of the last walk that found
        # nothing: the rows the ledger's indexes hold there, for the checks that read them next
        # (the lineage refs, the warnings); with --from read lazily, the rows the records wrote
        # (``wrote``) and those they looked at
        self.passed: Passed | None = None
        self.wrote: set[str] = set()  # the runs whose row the last walk checked
        self._heads: tuple[str, dict[str, list[Remembered]]] | None = None  # the last rewound()'s tips
        self._trees: dict[ObjectID, Tree] = {}
        self._overlay: dict[ObjectID, Any] = {}  # trees a re-derived merge made, never written
        # lineage commits as read once (each ref's walk re-reads its parent runs' commits)
        self._commits: dict[ObjectID, Commit] = {}
        # what _prefetch read through git ahead of a long walk, each taken once
        self._diffs: dict[tuple[ObjectID | None, ObjectID], list[tuple[str, ObjectID | None, ObjectID | None]]] = {}
        self._blobs: dict[bytes, bytes] = {}
        self._checkpoints: dict[ObjectID, tuple[bool, bool, Any, Exception | None]] = {}

    def _obj(self, sha: ObjectID) -> Any:
        return self.objects[sha]

    def _tree(self, sha: ObjectID | None) -> Tree:
        """Trees, cached: record i's new trees are record i+1's old ones, and most of a
        fanned-out ledger's trees are shared between neighbouring records."""
        if sha is None:
            return Tree()
        tree = self._trees.get(sha)
        if tree is None:
            tree = self._overlay.get(sha)
            if tree is None:
                tree = self._obj(sha)
            if len(self._trees) > 4096:
                self._trees.clear()
            self._trees[sha] = tree
        return tree

    def _flat_changes(self, old: ObjectID | None, new: ObjectID | None, prefix: str = "") -> Iterator[
            tuple[str, ObjectID | None, ObjectID | None]]:
        """(path, old blob, new blob) for every file that differs; descends only into trees
        whose ids differ, so a fanned-out ledger diffs in O(depth)."""
        if old == new:
            return
        a = self._tree(old)
        b = self._tree(new)
        names = {e.path for e in a.iteritems()} | {e.path for e in b.iteritems()}
        for name in sorted(names):
            ea = a[name] if name in a else None
            eb = b[name] if name in b else None
            path = prefix + name.decode()
            if ea and eb and ea[1] == eb[1]:
                continue
            a_dir = ea is not None and ea[0] == MODE_DIR
            b_dir = eb is not None and eb[0] == MODE_DIR
            if a_dir or b_dir:
                yield from self._flat_changes(ea[1] if a_dir and ea else None, eb[1] if b_dir and eb else None,
                                              path + "/")
                if ea and not a_dir:
                    yield path, ea[1], None
                if eb and not b_dir:
                    yield path, None, eb[1]
            else:
                yield path, ea[1] if ea else None, eb[1] if eb else None

    def _blob(self, sha: ObjectID) -> bytes:
        raw = self._blobs.pop(sha, None)
        if raw is not None:
            return raw
        obj = self._obj(sha)
        assert isinstance(obj, Blob)
        return bytes(obj.data)

    def _changes(self, old: ObjectID | None, new: ObjectID | None) -> list[tuple[str, ObjectID | None, ObjectID | None]]:
        got = self._diffs.pop((old, new), None) if new is not None else None
        return got if got is not None else list(self._flat_changes(old, new))

    def _reaches(self, tip: ObjectID, target: ObjectID) -> bool:
        """Whether ``target`` is an ancestor of ``tip`` over all parents (a full walk)."""
        return target in self._ancestors(tip)

    def _ancestors(self, tip: ObjectID) -> set[ObjectID]:
        out = {tip}
        todo = [tip]
        while todo:
            c = self._obj(todo.pop())
            if not isinstance(c, Commit):
                continue
            for p in c.parents:
                if p not in out:
                    out.add(p)
                    todo.append(p)
        return out

    def _chain(self, tip: ObjectID, since: ObjectID | None) -> tuple[list[Commit], bool]:
        """The first-parent line from ``since`` (exclusive) to ``tip``, oldest first, and whether
        ``since`` was on it."""
        chain: list[Commit] = []
        sha: ObjectID | None = tip
        while sha is not None and sha != since:
            c = self._commits.get(sha)
            if c is None and len(chain) == BULK:
                self._read_lineage([sha], since)  # a long line: the rest of it through git, at once
                c = self._commits.get(sha)
            if c is None:
                c = self._commits[sha] = self._obj(sha)
            chain.append(c)
            sha = c.parents[0] if c.parents else None
        return list(reversed(chain)), since is None or sha == since

    def _checkpoint_at(self, c: Commit) -> tuple[bool, bool, Any]:
        """(holds checkpoint.json, holds base.json, checkpoint.json parsed) of a lineage commit,
        read once per verify (what each lineage ref's walk asks of every commit below it); an
        error reading it is raised again wherever it is asked, as the first read raised it."""
        got = self._checkpoints.get(c.id)
        if got is None:
            tree = self._obj(c.tree)
            has_ck, has_base = b"checkpoint.json" in tree, b"base.json" in tree
            try:
                info = json.loads(self._blob(tree[b"checkpoint.json"][1])) if has_ck else None
            except Exception as e:  # noqa: BLE001 - kept to raise at the same point of the walk
                got = (has_ck, has_base, None, e)
            else:
                got = (has_ck, has_base, info, None)
            self._checkpoints[c.id] = got
        if got[3] is not None:
            raise got[3]
        return got[0], got[1], got[2]
