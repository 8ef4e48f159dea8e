"""Merging two ledgers that diverged (a laptop's and a box's): a merge commit whose tree is the union.

Run ids are globally unique and each run's files are written by one owner, so two copies of an
experiment's ledger that grew apart from a common record merge without conflict:

- a path changed on one side only takes that side; the same change on both sides is fine;
- the derived files are recomputed: each fan-out ``runs/<a>/<b>/index.json`` in a folder both
  sides changed is rebuilt from the merged folder's ``row.json`` blobs, each cohort's
  ``cohorts/<cohort>/index.json`` both sides changed is the union of their entries
  (:func:`monte.ledger.cohorts.union`), ``meta.json`` counts
  ``ours + theirs - base`` records, and the CI workflow (:data:`monte.ci.LEDGER_WORKFLOW`: two
  machines may pin another monte) is ours;
- any other path changed differently on both sides (a row both rewrote, ``measurement.json``, a
  nomination, per-task results) is a conflict: ``E_CONFLICT``, and no ref moves.

A union that would break the test seal (two machines that each spent the same read: two final
claims, two test@0, or a third read of one exam in one cohort) is refused ``E_SEALED`` before
anything is written (:func:`check_seal`): each append was checked on its own machine's tip, but
the two never met on one tip.

The base is the best common ancestor of the two tips, found by walking both histories at once
over all parents (a ledger may hold earlier merges). The trees are merged recursively, descending
only into folders whose ids differ, so merging two 10,000-run ledgers that differ by a few runs
reads O(changed) trees, not O(runs). :func:`union_tree` computes the same tree without writing
anything; ``monte ledger verify`` uses it to check a merge commit.
"""

from __future__ import annotations

import heapq
import json
import random
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from dulwich.object_store import BaseObjectStore
from dulwich.objects import Blob, Commit, ObjectID, ShaFile, Tree

from monte.ci import LEDGER_WORKFLOW
from monte.errors import error
from monte.ledger import cohorts
from monte.ledger.cohorts import PATH as COHORT_INDEX
from monte.ledger.predicates import is_test_read
from monte.ledger.records import RunRow
from monte.ledger.rules import SealConflict, read_role, seal_conflicts
from monte.ledger.store import MODE_DIR, MODE_FILE, Snapshot, Store, add_object
from monte.ledger.views import RUNS, fanout_index

MERGE_EVENT = "merge"
_BUCKET = re.compile(r"^runs/[^/]+/[^/]+/$")
_MAX_RETRIES = 200

MergeCase = Literal["up-to-date", "fast-forward", "merged"]


@dataclass(frozen=True)
class MergeResult:
    """What a merge did. ``commit`` is the tip to move to: ``ours`` (up-to-date), ``theirs``
    (fast-forward) or the new merge commit (merged). ``trees_read``: tree objects the tree merge
    read from the object store (0 unless merged)."""

    case: MergeCase
    commit: ObjectID
    base: ObjectID | None = None
    trees_read: int = 0


class Conflict(Exception):
    """Both sides changed ``path`` differently (and it is not a derived file)."""

    def __init__(self, path: str) -> None:
        super().__init__(path)
        self.path = path


def conflict_error(path: str):  # type: ignore[no-untyped-def]
    return error(
        "E_CONFLICT",
        f"the two ledgers disagree about {path}",
        f"the two ledgers disagree about {path}; run `monte ledger verify` on both and keep the honest one",
    )


# --- the merge base ----------------------------------------------------------------------------

_OURS, _THEIRS, _STALE = 1, 2, 4
_BOTH = _OURS | _THEIRS


def _commit(objects: BaseObjectStore, sha: ObjectID) -> Commit:
    obj = objects[sha]
    if not isinstance(obj, Commit):
        raise error("E_BAD_INPUT", f"{sha.decode()[:12]} is not a commit", "name a ledger commit")
    return obj


def merge_bases(objects: BaseObjectStore, a: ObjectID, b: ObjectID) -> list[ObjectID]:
    """The best common ancestors of ``a`` and ``b`` (none of them an ancestor of another), sorted.

    Both histories are walked at once over all parents, each commit carrying which tip reached
    it; a commit reached from both is a common ancestor, and what lies below it is marked stale
    (common, but not the best). Commits are visited nearest-to-a-tip first (breadth first), so
    the stale mark catches up with a walk that ran past the fork. The walk stops when only stale
    commits are left to visit: every path from a tip to a best common ancestor runs through
    commits that are neither common nor stale, so each best one has been found by then. Diverged
    ledgers cost the records since the fork, not the history. With several candidates the walk
    runs to the end, to drop those below another one.
    """
    if a == b:
        return [a]
    flags: dict[ObjectID, int] = {a: _OURS, b: _THEIRS}
    depth: dict[ObjectID, int] = {a: 0, b: 0}
    heap: list[tuple[int, int, ObjectID]] = [(0, 0, a), (0, 1, b)]
    pushes = 2
    found: set[ObjectID] = set()

    def step() -> None:
        nonlocal pushes
        _, _, sha = heapq.heappop(heap)
        f = flags[sha]
        if f & _STALE:
            found.discard(sha)
        elif f & _BOTH == _BOTH:
            found.add(sha)
            f |= _STALE  # below a common ancestor everything is common, and none is the best
        d = depth[sha] + 1
        for parent in _commit(objects, sha).parents:
            old = flags.get(parent, 0)
            if old | f != old:
                flags[parent] = old | f
                depth[parent] = min(depth.get(parent, d), d)
                heapq.heappush(heap, (depth[parent], pushes, parent))
                pushes += 1

    while heap and any(not flags[s] & _STALE for _, _, s in heap):
        step()
    if len(found) > 1:
        while heap:
            step()
        found = {s for s in found if not flags[s] & _STALE}
    return sorted(found)


# --- the tree merge -----------------------------------------------------------------------------


class _TreeMerge:
    """A three-way union of ledger trees. New objects are kept in ``new`` (children before their
    parents) until the caller writes them, so a conflict writes nothing."""

    def __init__(self, objects: BaseObjectStore) -> None:
        self.objects = objects
        self.new: dict[ObjectID, ShaFile] = {}
        self.cache: dict[ObjectID, Tree] = {}
        self.trees_read = 0

    def tree(self, sha: ObjectID | None) -> Tree:
        if sha is None:
            return Tree()
        found = self.new.get(sha)
        if found is None:
            found = self.cache.get(sha)
        if found is None:
            found = self.objects[sha]
            self.trees_read += 1
            assert isinstance(found, Tree)
            self.cache[sha] = found
        assert isinstance(found, Tree)
        return found

    def blob(self, sha: ObjectID) -> bytes:
        obj = self.new.get(sha)
        if obj is None:
            obj = self.objects[sha]
        assert isinstance(obj, Blob)
        return bytes(obj.data)

    def add(self, obj: ShaFile) -> ObjectID:
        self.new.setdefault(obj.id, obj)
        return obj.id

    def merge(self, base: ObjectID | None, ours: ObjectID | None, theirs: ObjectID | None,
              prefix: str = "") -> ObjectID | None:
        """The union of two trees over ``base``; None for an empty tree."""
        if ours == theirs:
            return ours
        if base == ours:
            return theirs
        if base == theirs:
            return ours
        tb, to, tt = self.tree(base), self.tree(ours), self.tree(theirs)
        names = {e.path for e in to.iteritems()} | {e.path for e in tt.iteritems()} | {
            e.path for e in tb.iteritems()}
        out = Tree()
        for name in sorted(names):
            eb = tb[name] if name in tb else None
            eo = to[name] if name in to else None
            et = tt[name] if name in tt else None
            path = prefix + name.decode()
            if path == "meta.json" and eo is not None and et is not None and eb != eo and eb != et:
                # both sides added records (maybe as many): the union holds ours + theirs - base
                picked: tuple[int, ObjectID] | None = (MODE_FILE, self._meta(eb, eo, et))
            elif eo == et:
                picked = eo
            elif eb == eo:
                picked = et
            elif eb == et:
                picked = eo
            elif eo is not None and et is not None and eo[0] == MODE_DIR and et[0] == MODE_DIR:
                sub = self.merge(eb[1] if eb is not None and eb[0] == MODE_DIR else None, eo[1], et[1], path + "/")
                picked = (MODE_DIR, sub) if sub is not None else None
            elif (name == b"index.json" and _BUCKET.match(prefix) and eo is not None and et is not None
                  and eo[0] != MODE_DIR and et[0] != MODE_DIR):
                picked = eo  # derived: rebuilt below from the merged rows
            elif (COHORT_INDEX.match(path) and eo is not None and et is not None
                  and MODE_DIR not in (eo[0], et[0]) and (eb is None or eb[0] != MODE_DIR)):
                picked = (MODE_FILE, self._cohort_index(path, eb, eo, et))  # derived: the union of both
            elif path == LEDGER_WORKFLOW and eo is not None and et is not None and MODE_DIR not in (eo[0], et[0]):
                picked = eo  # derived: the CI workflow each record carries (two monte versions' pins)
            else:
                raise Conflict(path)
            if picked is not None:
                out.add(name, picked[0], picked[1])
        if _BUCKET.match(prefix):
            self._reindex(out)
        if len(out) == 0:
            return None
        return self.add(out)

    def _meta(self, eb: tuple[int, ObjectID] | None, eo: tuple[int, ObjectID], et: tuple[int, ObjectID]) -> ObjectID:
        from monte.ledger.experiment import meta_json

        def records(entry: tuple[int, ObjectID] | None) -> int:
            if entry is None:
                return 0
            if entry[0] == MODE_DIR:
                raise Conflict("meta.json")
            try:
                return int(json.loads(self.blob(entry[1]))["records"])
            except (ValueError, KeyError, TypeError):
                raise Conflict("meta.json") from None

        return self.add(Blob.from_string(meta_json(records(eo) + records(et) - records(eb))))

    def _cohort_index(self, path: str, eb: tuple[int, ObjectID] | None, eo: tuple[int, ObjectID],
                      et: tuple[int, ObjectID]) -> ObjectID:
        """A cohort's derived index that both sides changed: the union of their entries over the
        base's (:func:`monte.ledger.cohorts.union`), O(1) in the runs."""
        from monte.ledger.experiment import compact_json

        def index(entry: tuple[int, ObjectID] | None) -> dict[str, Any] | None:
            if entry is None:
                return None
            try:
                found = json.loads(self.blob(entry[1]))
            except ValueError:
                raise Conflict(path) from None
            if not isinstance(found, dict):
                raise Conflict(path)
            return found

        ours, theirs = index(eo), index(et)
        assert ours is not None and theirs is not None
        try:
            merged = cohorts.union(index(eb), ours, theirs)
        except (TypeError, ValueError, AttributeError, IndexError, KeyError):
            raise Conflict(path) from None
        return self.add(Blob.from_string(compact_json(merged)))

    def _reindex(self, bucket: Tree) -> None:
        """Rebuild a fan-out folder's ``index.json`` from its rows (both sides changed it)."""
        from monte.ledger.experiment import compact_json

        index = {}
        for entry in bucket.iteritems():
            if entry.mode != MODE_DIR:
                continue
            run = self.tree(entry.sha)
            if b"row.json" in run:
                mode, sha = run[b"row.json"]
                if mode != MODE_DIR:
                    try:
                        index[entry.path.decode()] = json.loads(self.blob(sha))
                    except ValueError:
                        raise Conflict(f"{entry.path.decode()}/row.json") from None
        if index:
            bucket.add(b"index.json", MODE_FILE, self.add(Blob.from_string(compact_json(index))))


def _base_tree(objects: BaseObjectStore, merger: _TreeMerge, bases: list[ObjectID]) -> ObjectID | None:
    """The tree to merge over: the one best common ancestor's, or (criss-cross histories) the
    union of several, folded pairwise over their own bases."""
    tree: ObjectID | None = _commit(objects, bases[0]).tree
    for other in bases[1:]:
        inner = merge_bases(objects, bases[0], other)
        tree = merger.merge(_base_tree(objects, merger, inner) if inner else None, tree,
                            _commit(objects, other).tree)
    return tree


@dataclass(frozen=True)
class Union:
    """The union of two commits' trees, computed without writing: ``tree`` (the tree a merge
    commit of the two must carry), and the objects a merge writes for it (``new``, children
    before their parents)."""

    tree: ObjectID | None
    new: Mapping[ObjectID, ShaFile]
    trees_read: int


def union_tree(objects: BaseObjectStore, ours: ObjectID, theirs: ObjectID,
               bases: list[ObjectID] | None = None) -> Union:
    """The union tree of two commits over their merge ``bases`` (computed when not given; at
    least one). Raises :class:`Conflict`. Writes nothing."""
    if bases is None:
        bases = merge_bases(objects, ours, theirs)
    if not bases:
        raise ValueError("the two commits share no history")
    merger = _TreeMerge(objects)
    tree = merger.merge(_base_tree(objects, merger, bases), _commit(objects, ours).tree,
                        _commit(objects, theirs).tree)
    return Union(tree, merger.new, merger.trees_read)


# --- the seal across a merge ---------------------------------------------------------------------

SEALED_FIX = ("the two machines each spent the same sealed read, and no merge can make that honest; keep "
              "one: nothing was merged, uploaded or moved, so the record stays where it is on each machine; "
              "decide which claim stands and keep that machine's ledger as the experiment's (the other "
              "read stays disclosed on its machine), see docs/reliability.md (Two machines, one seal)")


def _entries(objects: BaseObjectStore, sha: ObjectID | None) -> dict[bytes, tuple[int, ObjectID]]:
    if sha is None:
        return {}
    tree = objects[sha]
    assert isinstance(tree, Tree)
    return {e.path: (e.mode, e.sha) for e in tree.iteritems()}


def _one_sided_runs(objects: BaseObjectStore, ours: ObjectID, theirs: ObjectID) -> tuple[dict[str, ObjectID], dict[str, ObjectID]]:
    """The run folders that are in one commit's tree and not the other's (what each side added
    since they forked), ``{run: folder tree}`` per side. Descends only into fan-out folders whose
    ids differ, and opens no run folder: O(changed) tree reads."""
    found: tuple[dict[str, ObjectID], dict[str, ObjectID]] = ({}, {})

    def walk(a: ObjectID | None, b: ObjectID | None, depth: int) -> None:
        ea, eb = _entries(objects, a), _entries(objects, b)
        for name in ea.keys() | eb.keys():
            x, y = ea.get(name), eb.get(name)
            if x == y:
                continue
            if depth < 2:  # runs/<a>/<b>/: fan-out folders
                walk(x[1] if x and x[0] == MODE_DIR else None, y[1] if y and y[0] == MODE_DIR else None, depth + 1)
            elif x is None and y is not None and y[0] == MODE_DIR:
                found[1][name.decode()] = y[1]
            elif y is None and x is not None and x[0] == MODE_DIR:
                found[0][name.decode()] = x[1]

    a, b = (_entries(objects, _commit(objects, c).tree).get(RUNS.encode()) for c in (ours, theirs))
    walk(a[1] if a and a[0] == MODE_DIR else None, b[1] if b and b[0] == MODE_DIR else None, 0)
    return found


def _test_reads(objects: BaseObjectStore, folders: Mapping[str, ObjectID]) -> dict[str, RunRow]:
    """The rows in these run folders that are reads of a sealed test split."""
    out: dict[str, RunRow] = {}
    for run, folder in folders.items():
        entry = _entries(objects, folder).get(b"row.json")
        if entry is None or entry[0] == MODE_DIR:
            continue
        blob = objects[entry[1]]
        assert isinstance(blob, Blob)
        try:
            row = RunRow.model_validate_json(bytes(blob.data))
        except ValueError:
            continue  # not a row monte wrote: `monte ledger verify` names it
        if is_test_read(row):
            out[run] = row
    return out


def _rows(store: Store, commit: ObjectID) -> dict[str, RunRow]:
    """Every row of a ledger commit, from its fan-out indexes (as ``Ledger.rows`` reads them)."""
    snap = Snapshot(store.repo, commit)
    out: dict[str, RunRow] = {}
    for first in snap.listdir(RUNS):
        for second in snap.listdir(f"{RUNS}/{first}"):
            raw = snap.read(fanout_index(first, second))
            for run, row in (json.loads(raw).items() if raw else ()):
                out[run] = RunRow.model_construct(**row)
    return out


def check_seal(store: Store, ours: bytes, theirs: bytes) -> None:
    """Refuse (``E_SEALED``) merging two ledgers whose union breaks the seal where neither did
    alone: both sides read the same exam's test split in the same cohort since they forked, and
    together those reads are two final claims, two test@0, or more than two reads. Reads only
    what differs between the two, unless both sides read one exam (then the whole of ``ours``).
    Writes nothing."""
    objects = store.repo.object_store
    only_ours, only_theirs = _one_sided_runs(objects, ObjectID(ours), ObjectID(theirs))
    if not only_ours or not only_theirs:
        return  # one side holds every run of the other: the union is that side's rows
    mine = _test_reads(objects, only_ours)
    yours = _test_reads(objects, only_theirs) if mine else {}
    both = {(r.cohort, r.exam or "") for r in mine.values()} & {(r.cohort, r.exam or "") for r in yours.values()}
    if not both:
        return
    union = {**_rows(store, ObjectID(ours)), **yours}
    broken = [c for c in seal_conflicts(r for r in union.values() if (r.cohort, r.exam or "") in both)
              if any(r.run in mine for r in c.rows) and any(r.run in yours for r in c.rows)]
    if broken:
        raise error("E_SEALED", "; ".join(_seal_message(c, mine, yours) for c in broken), SEALED_FIX)


def _seal_message(c: SealConflict, mine: Mapping[str, RunRow], yours: Mapping[str, RunRow]) -> str:
    what = {"claims": "two final claims", "baselines": "two test@0 reads"}.get(c.what, f"{len(c.rows)} reads")

    def one(r: RunRow) -> str:
        side = "this ledger" if r.run in mine else "the ledger merged in" if r.run in yours else "both ledgers"
        role = "test@0" if read_role(r) == "baseline" else "claim"
        return f"run {r.run} ({role} on host {r.host or '(unknown)'}, in {side})"

    return (f"merging would put {what} on the sealed test split of exam {c.exam!r} in cohort {c.cohort}: "
            + ", ".join(one(r) for r in c.rows) + "; the seal allows test@0 and one final claim")


# --- merging, and moving a ref ------------------------------------------------------------------


def merge_ledgers(store: Store, ours: bytes | None, theirs: bytes) -> MergeResult:
    """Merge the ledger at ``theirs`` into ``ours``; write the objects, move no ref.

    ``up-to-date``: ``theirs`` is ``ours`` or an ancestor of it. ``fast-forward``: ``ours`` is
    None or an ancestor of ``theirs`` (the result is ``theirs``). ``merged``: they diverged; the
    result is a new commit with parents ``[ours, theirs]`` whose tree is the union. A path both
    sides changed differently raises ``E_CONFLICT``, and a union that breaks the test seal
    ``E_SEALED`` (:func:`check_seal`), before anything is written.
    """
    objects = store.repo.object_store
    ours = ObjectID(ours) if ours is not None else None
    theirs = ObjectID(theirs)
    _commit(objects, theirs)
    if ours is None:
        return MergeResult("fast-forward", theirs)
    _commit(objects, ours)
    if ours == theirs:
        return MergeResult("up-to-date", ours, ours)
    bases = merge_bases(objects, ours, theirs)
    if not bases:
        raise error("E_CONFLICT",
                    f"the two ledgers share no history ({ours.decode()[:12]} and {theirs.decode()[:12]})",
                    "they are two experiments that happen to share a name; keep one and rename the other")
    base = bases[0] if len(bases) == 1 else None
    if theirs in bases:
        return MergeResult("up-to-date", ours, base)
    if ours in bases:
        return MergeResult("fast-forward", theirs, base)
    check_seal(store, ours, theirs)
    try:
        union = union_tree(objects, ours, theirs, bases)
    except Conflict as c:
        raise conflict_error(c.path) from None
    if union.tree is None:
        raise conflict_error("the whole tree")
    for obj in union.new.values():  # children first: a crash leaves no tree pointing at nothing
        add_object(objects, obj)
    summary = f"merge: union of {ours.decode()[:12]} and {theirs.decode()[:12]}"
    commit = store._commit(union.tree, {}, summary, {"Monte-Event": MERGE_EVENT}, [ours, theirs])
    return MergeResult("merged", commit, base, union.trees_read)


def merge_into_ref(store: Store, ref: str, theirs: bytes) -> MergeResult:
    """Merge ``theirs`` into ``ref`` and move the ref by compare-and-swap; on a lost race, merge
    again with the new tip. A conflict raises ``E_CONFLICT`` and leaves the ref where it was."""
    for attempt in range(_MAX_RETRIES):
        old = store.tip(ref)
        result = merge_ledgers(store, old, theirs)
        if result.case == "up-to-date":
            return result
        if store.set_ref(ref, old, result.commit):
            if result.case == "merged":
                store._maybe_pack()
            return result
        time.sleep(min(0.05, 0.001 * (attempt + 1)) * random.random())
    raise error("E_CONFLICT", f"gave up merging into {ref} after {_MAX_RETRIES} lost races",
                "another writer is appending very fast; retry the command")
