"""``monte ledger verify``: re-derive every rule from the commit history alone.

Nothing a row says about itself is trusted: touches are counted from the records that created
them, deltas for the final claim's selection are recomputed from the per-task files, baselines
are the records themselves, and checkpoints are checked against their lineage commits. Each
violation names the commit, the rule and a one-line explanation.

Rules (the names printed):

- ``one-record``: one record per commit (a row, or a nomination), with a ``Monte-Event`` trailer,
  on a single first-parent line from the experiment's creation. The one other commit allowed is
  a merge of two ledgers that diverged (``monte.ledger.merge``): two parents, a ``Monte-Event:
  merge`` trailer, and a tree that is exactly the union of its parents (re-derived here). The
  records it merges in (reachable from its second parent, not its first) are checked as records,
  oldest first, on top of the state before the merge, under every rule below: two machines
  that each spent the final test read break ``two-touch`` at the merge. Their violations name the
  merge commit and the merged-in record (a ``two-touch`` one's fix says two ledgers were merged;
  monte's own merge now refuses such a union, ``E_SEALED``).
- ``well-formed``: every path is one monte writes (the CI workflow every record carries,
  :data:`monte.ci.LEDGER_WORKFLOW`, among them: derived, like ``meta.json``); every row parses;
  the derived fan-out index equals the rows it indexes; each cohort's derived index
  (``cohorts/<cohort>/index.json``: its baselines and test reads, :mod:`monte.ledger.cohorts`)
  that a record writes equals the fold of the rows before it, and a record that changes a
  cohort's baselines or test reads rewrites the index where the ledger keeps one.
- ``append-only``: no record removed; no finished row rewritten; identity fields never change;
  ``measurement.json`` never changes; per-task files never change once written.
- ``unique-run-id``: a new run never reuses an id.
- ``two-touch``: at most two test reads per sealed exam per cohort; ``test@0`` on the base model,
  before any checkpoint of the cohort and only once; the second read on a checkpoint, after
  ``test@0``, and on the nominated or rule-selected checkpoint.
- ``baselines-first``: a real training chunk only after every exam's baselines.
- ``lineage``: each checkpoint's lineage commit exists, names its run and step, hangs off the
  parent the plan names (or the cohort's base commit), and absolute steps add up.
- ``frozen-hashes``: the split hashes in ``measurement.json`` match the vault's manifest.
- ``no-smoke-evidence``: a smoke run is never a parent, an eval target or a nominee.
- ``rewound``: every tip monte remembers of a ``refs/heads/monte/`` ref (each one the store
  wrote, git's reflog of it, each one a verify saw pass: :mod:`monte.ledger.tips`) is still in
  that ref's history, and the ref still exists; a remote-tracking copy of a ledger holds no record
  the local ledger lacks: the results bucket's mirror (``monte sync`` merges it), or a git
  remote's copy that diverged from the local ledger (one simply ahead is let in before verify
  reads: :mod:`monte.ledger.remotes`). The violation names the lost commit. A rewind that drops only commits
  that monte never wrote and that each break a rule (a forgery put back by hand, with
  ``MONTE_HOOKS=off``) is a repair, not a rewind.
- ``seal``: the repository-wide seal. The test reads of every ledger the repository holds (and
  the results bucket's mirrors of experiments it does not, and, in a hook, the ledgers a push
  brings) are counted per seal key (:func:`monte.ledger.seal.seal_key`: the exam's test content,
  the output-relevant eval settings, the base weights identity), whatever experiment holds
  them: two final claims, two test@0 or a third read under one key, spread over ledgers that
  each keep ``two-touch`` on their own, break it. The violation names every read, its
  experiment and where it was read from (:func:`seal_violations`).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

from dulwich.objects import Blob, Commit, ObjectID, Tree

from monte.ci import LEDGER_WORKFLOW
from monte.ledger import cohorts as cohort_index
from monte.ledger.gitread import Git
from monte.ledger.merge import MERGE_EVENT, Conflict, merge_bases, union_tree
from monte.ledger.predicates import (
    is_admissible,
    is_base_eval,
    is_checkpoint_eval,
    is_test_read,
    target_kind,
)
from monte.ledger.records import RunRow
from monte.ledger.refs import (
    MIRROR,
    PREFIX,
    VAULT_REF,
    base_ref,
    experiment_of_ledger,
    experiment_prefix,
    ledger_ref,
    lineage_ref,
)
from monte.ledger.store import MODE_DIR, Store, parse_trailers
from monte.ledger.tips import Ancestry, Remembered, restore_fix, rewind_what
from monte.ledger.transaction import Proposed, proposed

ROW = re.compile(r"^runs/([0-9a-z])/([0-9a-z])/([0-9a-z]{1,64})/row\.json$")
TASKS = re.compile(r"^runs/([0-9a-z])/([0-9a-z])/([0-9a-z]{1,64})/tasks\.jsonl$")
INDEX = re.compile(r"^runs/([0-9a-z])/([0-9a-z])/index\.json$")
NOMINATION = re.compile(r"^cohorts/([0-9a-zA-Z._-]+)/nomination\.json$")
# the files whose bytes the walk reads (what _prefetch reads ahead), and the length of history
# past which the walk reads through git in bulk (monte.ledger.gitread) rather than object by object
READ = re.compile(r"^(runs/[0-9a-z]/[0-9a-z]/([0-9a-z]{1,64}/(row\.json|tasks\.jsonl)|index\.json)"
                  r"|cohorts/[0-9a-zA-Z._-]+/(nomination|index)\.json|measurement\.json)$")
BULK = 16
COHORT_INDEX = cohort_index.PATH  # cohorts/<cohort>/index.json, derived (monte.ledger.cohorts)
TRANSITIONS = {
    "started": {"running", "succeeded", "failed", "abandoned"},
    "running": {"running", "succeeded", "failed", "abandoned"},
}
IDENTITY = ("run", "experiment", "kind", "cohort", "exam", "split", "smoke", "created_at", "role")


@dataclass(frozen=True)
class Violation:
    commit: str
    rule: str
    message: str
    fix: str = ""  # what to do, where the ledger-wide fix ("written outside monte") is wrong

    def to_dict(self) -> dict[str, str]:
        out = {"commit": self.commit, "rule": self.rule, "message": self.message}
        return {**out, "fix": self.fix} if self.fix else out


MERGED_TOUCH_FIX = ("two ledgers that each spent this read were merged (by monte sync/push before this check "
                    "existed, or by git); both reads are spent and stay on the record: decide which claim "
                    "stands and report the other read with it, or take a sealed claim in a new cohort; see "
                    "docs/reliability.md (Two machines, one seal)")


@dataclass
class _Seen:
    """The commits already in the verified state: a merge's records are those of its second
    parent not in here. With ``--from`` the ancestors of that commit are added the first time a
    merge needs them (``pending``), so a linear incremental check never walks the history."""

    ids: set[ObjectID] = field(default_factory=set)
    pending: ObjectID | None = None


class _NeedAll(Exception):
    """The state at ``--from``, read lazily, was asked what only all of its rows answer."""


class _Since:
    """The verified state at a ``--from`` commit, read as the records after it ask: a run's row
    from its fan-out folder's index (every row of that folder at once: the index check needs
    them all), a cohort's baselines and index from that cohort's derived index. Only what
    :meth:`Verifier._load` would have read, from the same files; a question they cannot answer
    alone (every row, a count over the cohort, a cohort without an index) raises
    :class:`_NeedAll`, and the records are checked again on the whole state."""

    def __init__(self, store: Store, commit: ObjectID, state: _State) -> None:
        from monte.ledger.store import Snapshot

        self.snap = Snapshot(store.repo, commit)
        self.state = state
        self.loaded: set[str] = set()
        self.indexes: dict[str, dict[str, Any]] = {}
        state.rows = _LazyRows(self)
        state.seen = _LazySeen(self)
        state.buckets = _LazyBuckets(self)
        state.cohorts = _LazyCohorts(self)
        state.baselines = _LazyBaselines(self)
        state.lazy = True
        state.since = self.snap
        raw = self.snap.read("measurement.json")
        if raw:
            state.meas = json.loads(raw)

    def run(self, run: object) -> None:
        if not isinstance(run, str) or len(run) < 2:
            raise _NeedAll
        self.bucket(run[:2])

    def bucket(self, bucket: str) -> None:
        if bucket in self.loaded:
            return
        if len(bucket) != 2:
            raise _NeedAll
        from monte.ledger.records import row_from_index

        self.loaded.add(bucket)
        raw = self.snap.read(f"runs/{bucket[0]}/{bucket[1]}/index.json")
        if not raw:
            return
        try:
            rows = [row_from_index(d) for d in json.loads(raw).values()]
            if any(row.run[:2] != bucket for row in rows):
                raise _NeedAll  # not a row this folder holds: let the whole read judge it
        except (ValueError, TypeError, AttributeError):
            raise _NeedAll from None  # not an index monte writes: the whole read fails as it did
        for row in rows:
            dict.setdefault(self.state.rows, row.run, row)
            set.add(self.state.seen, row.run)
            dict.setdefault(self.state.buckets, bucket, set()).add(row.run)

    def cohort_index(self, cohort: str) -> dict[str, Any]:
        """The cohort's derived index at the commit (verified when it landed)."""
        if cohort not in self.indexes:
            path = cohort_index.index_path(cohort)
            raw = self.snap.read(path) if path is not None else None
            try:
                index = json.loads(raw) if raw is not None else None
            except ValueError:
                index = None
            if not isinstance(index, dict):
                raise _NeedAll
            self.indexes[cohort] = index
        return self.indexes[cohort]


class _LazyRows(dict[str, RunRow]):
    def __init__(self, since: _Since) -> None:
        super().__init__()
        self.since = since

    def get(self, run: str, default: Any = None) -> Any:
        self.since.run(run)
        return super().get(run, default)

    def __getitem__(self, run: str) -> RunRow:
        self.since.run(run)
        return super().__getitem__(run)

    def __contains__(self, run: object) -> bool:
        self.since.run(run)
        return super().__contains__(run)

    def _all(self, *_: Any) -> Any:
        raise _NeedAll

    pop = values = items = keys = __iter__ = __len__ = _all  # type: ignore[assignment]


class _LazySeen(set[str]):
    def __init__(self, since: _Since) -> None:
        super().__init__()
        self.since = since

    def __contains__(self, run: object) -> bool:
        self.since.run(run)
        return super().__contains__(run)


class _LazyBuckets(dict[str, set[str]]):
    def __init__(self, since: _Since) -> None:
        super().__init__()
        self.since = since

    def get(self, bucket: str, default: Any = None) -> Any:
        self.since.bucket(bucket)
        return super().get(bucket, default)

    def setdefault(self, bucket: str, default: Any = None) -> Any:
        self.since.bucket(bucket)
        return super().setdefault(bucket, default)


class _LazyCohorts(dict[str, dict[str, Any]]):
    def __init__(self, since: _Since) -> None:
        super().__init__()
        self.since = since

    def get(self, cohort: str, default: Any = None) -> Any:
        if not super().__contains__(cohort):
            dict.__setitem__(self, cohort, self.since.cohort_index(cohort))
        return super().get(cohort, default)


class _LazyBaselines(set[tuple[str, str, str]]):
    def __init__(self, since: _Since) -> None:
        super().__init__()
        self.since = since

    def __contains__(self, key: object) -> bool:
        if super().__contains__(key):
            return True
        cohort, exam, split = cast(tuple[str, str, str], key)
        try:
            if (self.since.cohort_index(cohort).get("base") or {}).get(exam, {}).get(split):
                return True
        except (TypeError, AttributeError):
            pass  # not the shape monte writes: the rows judge
        raise _NeedAll  # no baseline in the index: the rows say so, or not


@dataclass
class _State:
    rows: dict[str, RunRow] = field(default_factory=dict)
    seen: set[str] = field(default_factory=set)
    tasks: dict[str, ObjectID] = field(default_factory=dict)
    nominations: dict[str, str] = field(default_factory=dict)
    measurement: ObjectID | None = None
    meas: dict[str, Any] | None = None
    touches: dict[tuple[str, str], list[str]] = field(default_factory=dict)
    since: Any = None  # the Snapshot at --from, for lazy lookups
    # incremental indexes, so a 10,000-record walk stays linear
    buckets: dict[str, set[str]] = field(default_factory=dict)
    baselines: set[tuple[str, str, str]] = field(default_factory=set)
    checkpoints: dict[str, int] = field(default_factory=dict)
    dumps: dict[str, dict[str, Any]] = field(default_factory=dict)  # each row as its index holds it
    lazy: bool = False  # the state at --from, read as asked (_Since): some questions need it all
    # each cohort's index re-derived (the fold of its rows), the cohorts whose index a record
    # wrote or a ledger holds, and those whose fold the record being checked changed
    cohorts: dict[str, dict[str, Any]] = field(default_factory=dict)
    indexed: set[str] = field(default_factory=set)
    refolded: set[str] = field(default_factory=set)

    def put(self, row: RunRow) -> None:
        old = self.rows.get(row.run)
        if cohort_index.index_path(row.cohort) is not None and any(
                r is not None and r.kind == "eval" and not r.smoke for r in (row, old)):  # what it indexes
            was = self.cohorts.get(row.cohort) or cohort_index.empty()
            self.cohorts[row.cohort] = now = cohort_index.fold(was, row)
            if now != was:
                self.refolded.add(row.cohort)
        self.rows[row.run] = row
        self.dumps.pop(row.run, None)
        self.seen.add(row.run)
        self.buckets.setdefault(row.run[:2], set()).add(row.run)
        if is_base_eval(row):
            self.baselines.add((row.cohort, row.exam or "", row.split or ""))
        if row.kind == "train" and not row.smoke:
            self.checkpoints[row.cohort] = (self.checkpoints.get(row.cohort, 0) + len(row.checkpoints)
                                            - (len(old.checkpoints) if old else 0))

    def need_all(self) -> None:
        """Read lazily, the state cannot answer what follows (a count over a cohort): read it all."""
        if self.lazy:
            raise _NeedAll


class Verifier:
    def __init__(self, store: Store) -> None:
        self.store = store
        self.objects = store.repo.object_store
        self.records = 0  # records checked by the last verify()
        # (experiment, tip, rows there, whether that is every row) of the last walk that found
        # nothing: the rows the ledger's indexes hold there, for the checks that read them next
        # (the lineage refs, the warnings); with --from read lazily, the rows the records wrote
        # (``wrote``) and those they looked at
        self.passed: tuple[str, ObjectID, dict[str, RunRow], bool] | None = None
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

    # --- object access ---------------------------------------------------------------------------

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

    # --- the walk --------------------------------------------------------------------------------

    def verify(self, experiment: str, *, tip: ObjectID | None = None, since: ObjectID | None = None) -> list[Violation]:
        """Verify the ledger of ``experiment`` (up to ``tip``, default the ref); with ``since``,
        only the records after that commit (which must be an ancestor on the first-parent line).

        Verifying the ref itself (no ``tip``) also checks that none of the experiment's refs was
        rewound (rule ``rewound``), and, when all is well, remembers the tip it saw."""
        out = self._walk(experiment, tip=tip, since=since)
        if tip is not None:
            return out
        ref = ledger_ref(experiment)
        out += self.rewound(experiment_prefix(experiment))
        out += self._copies(experiment)
        if not out:
            self._remember(ref)
        return out

    def _walk(self, experiment: str, *, tip: ObjectID | None = None, since: ObjectID | None = None) -> list[Violation]:
        ref = ledger_ref(experiment)
        tip = tip or self.store.tip(ref)
        out: list[Violation] = []
        self.wrote = set()
        if tip is None:
            return out
        chain: list[Commit] = []
        sha: ObjectID | None = tip
        while sha is not None and sha != since:
            if len(chain) == BULK and (rest := self._bulk_line(sha, since)) is not None:
                chain += rest  # a long history: the rest of the line through git, at once
                sha = since
                break
            c = self._obj(sha)
            if not isinstance(c, Commit):
                return [Violation(sha.decode()[:12], "well-formed", "the ledger ref points at a non-commit")]
            chain.append(c)
            sha = c.parents[0] if c.parents else None
        if since is not None and sha != since:
            if self._reaches(tip, since):
                # merged in from the second parent's side (a ledger that pulled, then pushed):
                # not a rewrite; the walk from the creation checks it all
                return self._walk(experiment, tip=tip)
            return [Violation(tip.decode()[:12], "append-only",
                              f"{since.decode()[:12]} is not an ancestor of the ledger tip: history was rewritten")]
        chain.reverse()
        self.records = len(chain)
        if since is not None and not any(len(c.parents) > 1 for c in chain):
            try:  # the state at --from read a fan-out folder at a time, as the new records ask
                return self._replay(experiment, tip, since, chain, lazy=True)
            except _NeedAll:
                pass  # a record asked what only every row answers (a test read, a nomination)
        return self._replay(experiment, tip, since, chain, lazy=False)

    def _replay(self, experiment: str, tip: ObjectID, since: ObjectID | None, chain: list[Commit], *,
                lazy: bool) -> list[Violation]:
        """Check ``chain`` (oldest first) on the state at ``since`` (every row read up front, or,
        ``lazy``, only the rows the records ask for: :class:`_Since`)."""
        out: list[Violation] = []
        state = _State()
        seen = _Seen(pending=since)
        self.wrote = set()
        prev_tree: ObjectID | None = None
        if since is not None:
            base = self._obj(since)
            prev_tree = base.tree
            if lazy:
                _Since(self.store, since, state)
            else:
                self._load(state, since, experiment)
        if len(chain) > BULK:
            self._prefetch(prev_tree, chain)
        for i, c in enumerate(chain):
            first = since is None and i == 0
            if len(c.parents) == 2 and not first:
                out += self._merge(experiment, state, c, prev_tree, seen)
            else:
                out += self._record(experiment, state, c, prev_tree, first=first)
            seen.ids.add(c.id)
            prev_tree = c.tree
        self.passed = (experiment, tip, dict(dict.items(state.rows)), not lazy) if not out else None
        return out

    def _bulk_line(self, sha: ObjectID, since: ObjectID | None) -> list[Commit] | None:
        """The first-parent line from ``sha`` back to ``since`` (exclusive), newest first, read
        through git at once; None where git's line is not that one, commit by commit (``since``
        is not on it, or a commit there is not one): the walk then goes on object by object."""
        if since is not None and since not in self.objects:
            return None
        git = Git(self.store.repo.controldir())
        ids = git.first_parents(sha, since)
        if not ids or ids[0] != sha:
            return None  # ``sha`` is below ``since`` (a rewind): git lists nothing
        commits = git.commits(ids)
        out: list[Commit] = []
        for i, cid in enumerate(ids):
            c = commits.get(cid)
            if c is None or (c.parents[0] if c.parents else None) != (ids[i + 1] if i + 1 < len(ids) else since):
                return None
            out.append(c)
        return out

    def _prefetch(self, prev_tree: ObjectID | None, chain: Sequence[Commit]) -> None:
        """Each record's changes (one ``git diff-tree`` over every record of ``chain``) and the
        blobs the walk reads (one ``git cat-file --batch``), ahead of the walk, which takes each
        from here once (:meth:`_changes`, :meth:`_blob`) and reads anything else as before."""
        git = Git(self.store.repo.controldir())
        pairs: list[tuple[ObjectID | None, ObjectID]] = []
        for c in chain:
            pairs.append((prev_tree, c.tree))
            prev_tree = c.tree
        wanted: list[bytes] = []
        for pair, changes in zip(pairs, git.diffs(pairs), strict=True):
            self._diffs[pair] = changes
            wanted += [new for path, _, new in changes if new is not None and READ.match(path)]
        self._blobs.update((sha, raw) for sha, (kind, raw) in git.objects(wanted).items() if kind == b"blob")

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

    # --- merges ----------------------------------------------------------------------------------

    def _merge(self, experiment: str, state: _State, c: Commit, prev_tree: ObjectID | None, seen: _Seen,
               *, side: bool = False) -> list[Violation]:
        """A merge of two ledgers: the records it brings in, replayed on the state before it,
        then its tree against the union re-derived from its parents, then its indexes."""
        cid = c.id.decode()[:12]
        out: list[Violation] = []

        def bad(rule: str, msg: str) -> None:
            out.append(Violation(cid, rule, msg))

        if not side:
            state.refolded = set()  # what this merge's records change (checked with its indexes)
        if parse_trailers(c.message).get("Monte-Event") != MERGE_EVENT:
            bad("one-record", "a merge commit without the Monte-Event: merge trailer: the only merge on a "
                "ledger is monte's union of two ledgers")
        if seen.pending is not None:
            seen.ids |= self._ancestors(seen.pending)
            seen.pending = None
        p1, p2 = c.parents
        bases = merge_bases(self.objects, p1, p2)
        if not bases:
            bad("one-record", f"the merge joins {p2.decode()[:12]}, a history that shares no record with this ledger")
            return out
        for s in self._side(p2, seen):
            sid = s.id.decode()[:12]
            parent_tree = self._obj(s.parents[0]).tree if s.parents else None
            if len(s.parents) == 2:
                found = self._merge(experiment, state, s, parent_tree, seen, side=True)
            else:
                found = self._record(experiment, state, s, parent_tree, first=False, side=True)
                self.records += 1
            out += [Violation(cid, v.rule, f"{v.message} (record {sid}, merged in)",
                              MERGED_TOUCH_FIX if v.rule == "two-touch" else v.fix) for v in found]
            seen.ids.add(s.id)
        try:
            union = union_tree(self.objects, p1, p2, bases)
        except Conflict as e:
            bad("well-formed", f"the merged ledgers disagree about {e.path}: they have no union")
        else:
            if union.tree != c.tree:
                self._overlay = dict(union.new)
                try:
                    diffs = list(self._flat_changes(union.tree, c.tree))
                finally:
                    self._overlay = {}
                # name a record's path first: a stale index or count follows from it
                diffs.sort(key=lambda d: d[0] == "meta.json" or bool(INDEX.match(d[0])))
                what = "; ".join(f"{p} is missing" if n is None else f"{p} is in neither parent" if o is None
                                 else f"{p} differs" for p, o, n in diffs[:3]) or "its tree differs"
                bad("well-formed", f"the merge commit's tree is not the union of its parents: {what}")
        changes = self._changes(prev_tree, c.tree)
        for path, _, new in changes:
            if new is None:
                bad("append-only", f"{path} was removed by the merge: records are never deleted")
                if (m := ROW.match(path)) is not None:
                    state.rows.pop(m.group(3), None)
                    state.buckets.get(m.group(3)[:2], set()).discard(m.group(3))
            elif not side and (m := INDEX.match(path)) is not None:
                out += self._index(state, cid, path, new, m.group(1) + m.group(2))
        if not side:
            out += self._cohort_indexes(state, cid, changes)
        return out

    def _side(self, tip: ObjectID, seen: _Seen) -> list[Commit]:
        """The commits reachable from ``tip`` and not in ``seen``, parents before children (each
        merge's first-parent line before the line it merged in)."""
        order: list[Commit] = []
        visited: set[ObjectID] = set()
        stack: list[tuple[ObjectID, Commit | None]] = [(tip, None)]
        while stack:
            sha, done = stack.pop()
            if done is not None:
                order.append(done)
                continue
            if sha in visited or sha in seen.ids:
                continue
            visited.add(sha)
            c = self._obj(sha)
            if not isinstance(c, Commit):
                continue
            stack.append((sha, c))
            stack.extend((p, None) for p in reversed(c.parents))
        return order

    def _load(self, state: _State, commit: ObjectID, experiment: str) -> None:
        """State at an already-verified commit (for ``--from``), read from its derived indexes
        (at most 1,024 blobs, through the state read's object cache, rows built unvalidated:
        that commit was verified when it landed), so an incremental check costs the new
        records, not the history. Per-task files of runs before that commit are looked up
        lazily (``_tasks_blob``)."""
        from monte.ledger.experiment import Ledger
        from monte.ledger.store import Snapshot

        snap = Snapshot(self.store.repo, commit)
        for row in Ledger(self.store, experiment).rows(snap):
            state.put(row)
        for cohort in snap.listdir("cohorts"):
            raw = snap.read(f"cohorts/{cohort}/nomination.json")
            if raw:
                state.nominations[cohort] = json.loads(raw)["checkpoint"]
        raw = snap.read("measurement.json")
        if raw:
            state.meas = json.loads(raw)
        state.since = snap
        for row in sorted(state.rows.values(), key=lambda r: r.seq):
            if is_test_read(row):
                state.touches.setdefault((row.cohort, row.exam or ""), []).append(row.run)

    def _tasks_blob(self, state: _State, run: str) -> ObjectID | None:
        if run in state.tasks:
            return state.tasks[run]
        if state.since is not None:
            found = state.since._lookup(f"runs/{run[0]}/{run[1]}/{run}/tasks.jsonl")
            if found is not None:
                state.tasks[run] = found[1]
                return found[1]
        return None

    def _record(self, experiment: str, state: _State, c: Commit, prev_tree: ObjectID | None,
                *, first: bool, side: bool = False) -> list[Violation]:
        cid = c.id.decode()[:12]
        out: list[Violation] = []

        def bad(rule: str, msg: str) -> None:
            out.append(Violation(cid, rule, msg))

        if not side:
            state.refolded = set()  # what this record changes (checked with its indexes)
        trailers = parse_trailers(c.message)
        if "Monte-Event" not in trailers:
            bad("one-record", "the commit has no Monte-Event trailer: not a monte record")
        if first and c.parents:
            bad("one-record", "the experiment's first record has a parent")
        if len(c.parents) > 1:
            bad("one-record", f"a merge commit of {len(c.parents)} parents on the ledger line: a ledger merge "
                "joins two ledgers")
        elif trailers.get("Monte-Event") == MERGE_EVENT:
            bad("one-record", "a merge record with one parent: a merge joins two ledgers")
        changes = self._changes(prev_tree, c.tree)
        row_changes = [(p, o, n) for p, o, n in changes if ROW.match(p)]
        if len(row_changes) > 1:
            bad("one-record", f"one commit changes {len(row_changes)} rows; a record is one row")
        for path, old, new in changes:
            if new is None:
                bad("append-only", f"{path} was removed: records are never deleted")
                if (m := ROW.match(path)) is not None:  # one finding, not a stale-index one too
                    state.rows.pop(m.group(3), None)
                    state.buckets.get(m.group(3)[:2], set()).discard(m.group(3))
                continue
            if path == "measurement.json":
                if not first:
                    bad("append-only", "measurement.json changed after the experiment was created: it is frozen")
                else:
                    state.measurement = new
                    try:
                        state.meas = json.loads(self._blob(new))
                    except ValueError:
                        bad("well-formed", "measurement.json is not JSON")
                    else:
                        out += [Violation(cid, v.rule, v.message) for v in self._frozen_hashes(state.meas or {})]
            elif path in ("meta.json", LEDGER_WORKFLOW) or INDEX.match(path) or COHORT_INDEX.match(path):
                continue  # derived (the record count, the CI workflow); indexes are checked below
            elif (m := TASKS.match(path)) is not None:
                if old is not None:
                    bad("append-only", f"per-task results of run {m.group(3)} were rewritten")
                state.tasks[m.group(3)] = new
            elif (m := NOMINATION.match(path)) is not None:
                out += self._nomination(state, cid, m.group(1), new)
            elif ROW.match(path) is None:
                bad("well-formed", f"{path} is not a path monte writes")
        if first and state.measurement is None:
            bad("well-formed", "the experiment's first record holds no measurement.json")
        for path, _, new in row_changes:
            if new is not None:
                out += self._row(experiment, state, cid, ROW.match(path).group(3), new)  # type: ignore[union-attr]
        if side:  # merged in: its indexes lack the other side's runs; the merge's are checked
            return out
        for path, _, new in changes:
            if new is not None and (m := INDEX.match(path)) is not None:
                out += self._index(state, cid, path, new, m.group(1) + m.group(2))
        out += self._cohort_indexes(state, cid, changes)
        return out

    def _cohort_indexes(self, state: _State, cid: str,
                        changes: Sequence[tuple[str, ObjectID | None, ObjectID | None]]) -> list[Violation]:
        """Each cohort index the record (or merge) wrote equals the fold of the rows verified so
        far (:mod:`monte.ledger.cohorts`); one it left as it was still does, where the ledger
        keeps one for that cohort (a ledger written before there were any has none)."""
        out: list[Violation] = []
        written: set[str] = set()
        for path, _, new in changes:
            if (m := COHORT_INDEX.match(path)) is None:
                continue
            cohort = m.group(1)
            if new is None:  # removed: an append-only violation already
                state.indexed.discard(cohort)
                continue
            written.add(cohort)
            state.indexed.add(cohort)
            try:
                index = json.loads(self._blob(new))
            except ValueError:
                out.append(Violation(cid, "well-formed", f"{path} is not JSON"))
                continue
            if index != state.cohorts.get(cohort, cohort_index.empty()):
                out.append(Violation(cid, "well-formed", f"{path} does not match the rows of cohort {cohort} "
                                     "(its baselines and test reads)"))
        for cohort in sorted(state.refolded - written):
            path = f"cohorts/{cohort}/index.json"
            if cohort in state.indexed or (state.since is not None and state.since.exists(path)):
                out.append(Violation(cid, "well-formed", f"{path} is stale: this record changed the baselines "
                                     f"or test reads of cohort {cohort} and left the index as it was"))
        state.refolded = set()
        return out

    def _index(self, state: _State, cid: str, path: str, blob: ObjectID, bucket: str) -> list[Violation]:
        try:
            index = json.loads(self._blob(blob))
        except ValueError:
            return [Violation(cid, "well-formed", f"{path} is not JSON")]
        want = {}
        for run in state.buckets.get(bucket, ()):
            dump = state.dumps.get(run)
            if dump is None:  # dumped once per version of the row, not once per record of its bucket
                dump = state.dumps[run] = state.rows[run].model_dump(mode="json")
            want[run] = dump
        if index != want:
            return [Violation(cid, "well-formed", f"{path} does not match the rows it indexes")]
        return []

    # --- rows ------------------------------------------------------------------------------------

    def _row(self, experiment: str, state: _State, cid: str, run: str, blob: ObjectID) -> list[Violation]:
        self.wrote.add(run)
        out: list[Violation] = []
        try:
            row = RunRow.model_validate_json(self._blob(blob))
        except ValueError as e:
            return [Violation(cid, "well-formed", f"the row of run {run} does not parse: {str(e)[:120]}")]
        if row.run != run:
            out.append(Violation(cid, "well-formed", f"the row at {run}'s path names run {row.run}"))
        old = state.rows.get(run)
        if old is None:
            if run in state.seen:
                out.append(Violation(cid, "unique-run-id", f"run id {run} is used again"))
            if row.status != "started":
                out.append(Violation(cid, "one-record", f"run {run} appears as {row.status}, not started"))
            if row.checkpoints:
                out.append(Violation(cid, "lineage", f"run {run} starts with checkpoints already on it"))
                for ck in row.checkpoints:
                    out += self._checkpoint(experiment, state, cid, row, ck)
            out += self._new_row(experiment, state, cid, row)
        else:
            if old.status not in TRANSITIONS:
                rule = "unique-run-id" if row.status == "started" else "append-only"
                out.append(Violation(cid, rule, f"run {run} had {old.status}; a finished row is never rewritten"))
            elif row.status not in TRANSITIONS[old.status]:
                out.append(Violation(cid, "append-only", f"run {run} went {old.status} -> {row.status}"))
            for f in IDENTITY:
                if getattr(old, f) != getattr(row, f):
                    out.append(Violation(cid, "append-only", f"run {run}: {f} changed"))
            if old.plan != row.plan:
                out.append(Violation(cid, "append-only", f"run {run}: its plan changed"))
            if row.checkpoints[: len(old.checkpoints)] != old.checkpoints:
                out.append(Violation(cid, "append-only", f"run {run}: a checkpoint was rewritten"))
            for ck in row.checkpoints[len(old.checkpoints):]:
                out += self._checkpoint(experiment, state, cid, row, ck)
            if row.status == "succeeded" and row.kind == "eval" and not row.smoke:
                if self._tasks_blob(state, run) is None:
                    out.append(Violation(cid, "well-formed", f"eval {run} succeeded without per-task results"))
                else:
                    scores = list(self._tasks(state, run).values())
                    mean = sum(scores) / len(scores) if scores else 0.0
                    if row.n != len(scores) or row.score is None or abs(row.score - mean) > 1e-9:
                        out.append(Violation(cid, "well-formed", f"eval {run}: score {row.score} over n={row.n} "
                                             f"does not match its per-task results ({mean:.6f} over {len(scores)})"))
        state.put(row)
        return out

    def _new_row(self, experiment: str, state: _State, cid: str, row: RunRow) -> list[Violation]:
        out: list[Violation] = []
        target = row.plan.get("target", {}) if row.kind == "eval" else {}
        if target.get("kind") == "checkpoint":
            src = state.rows.get(str(target.get("run")))
            if src is not None and src.smoke:
                out.append(Violation(cid, "no-smoke-evidence", f"eval {row.run} scores smoke run {src.run}"))
        if row.kind == "train":
            parent = row.plan.get("parent")
            if parent and (p := state.rows.get(parent["run"])) is not None and p.smoke:
                out.append(Violation(cid, "no-smoke-evidence", f"train {row.run} continues smoke run {p.run}"))
            if not row.smoke:
                out += self._baselines_first(state, cid, row)
        if is_test_read(row):
            out += self._test_touch(state, cid, row, target)
        return out

    def _baselines_first(self, state: _State, cid: str, row: RunRow) -> list[Violation]:
        missing = []
        for exam, x in sorted((state.meas or {}).get("exams", {}).items()):
            for split in ("dev", "test"):
                if split in x.get("splits", {}) and (row.cohort, exam, split) not in state.baselines:
                    missing.append(f"{exam}/{split}@0")
        if missing:
            return [Violation(cid, "baselines-first",
                              f"train {row.run} started before the baselines {', '.join(missing)}")]
        return []

    def _test_touch(self, state: _State, cid: str, row: RunRow, target: dict[str, Any]) -> list[Violation]:
        state.need_all()  # the cohort's reads, its checkpoints, the rule-selected checkpoint
        key = (row.cohort, row.exam or "")
        touches = state.touches.setdefault(key, [])
        out: list[Violation] = []
        if len(touches) >= 2:
            out.append(Violation(cid, "two-touch", f"a third read of {row.exam}/test in cohort {row.cohort} "
                                 f"(after {', '.join(touches)})"))
        elif target.get("kind") == "base":
            if touches:
                out.append(Violation(cid, "two-touch", f"test@0 of {row.exam} read a second time"))
            elif state.checkpoints.get(row.cohort, 0):
                out.append(Violation(cid, "two-touch", f"test@0 of {row.exam} read after the cohort has checkpoints"))
        else:
            if not touches:
                out.append(Violation(cid, "two-touch", f"a checkpoint test read of {row.exam} before test@0"))
            claimed = f"{target.get('run')}@{target.get('step')}"
            chosen = self._chosen(state, row.cohort)
            if chosen is not None and chosen != claimed:
                out.append(Violation(cid, "two-touch", f"the claim reads {claimed}, but the nominated or "
                                     f"rule-selected checkpoint is {chosen}"))
        touches.append(row.run)
        return out

    def _chosen(self, state: _State, cohort: str) -> str | None:
        """The nomination, or the best paired dev delta recomputed from the per-task files."""
        if cohort in state.nominations:
            return state.nominations[cohort]
        exams = [e for e, x in (state.meas or {}).get("exams", {}).items() if "dev" in x.get("splits", {})]
        if len(exams) != 1:
            return "a nomination (several dev exams)"
        from monte.stats.paired import paired_delta

        exam = exams[0]
        rows = sorted(state.rows.values(), key=lambda r: r.seq)
        base = next((r for r in rows if is_base_eval(r) and r.cohort == cohort and r.exam == exam
                     and r.split == "dev"), None)
        if base is None or self._tasks_blob(state, base.run) is None:
            return None
        base_tasks = self._tasks(state, base.run)
        best: tuple[float, int, int] | None = None
        chosen = None
        for r in rows:
            t = r.plan.get("target", {})
            if is_checkpoint_eval(r) and r.cohort == cohort and r.exam == exam and r.split == "dev":
                mine = self._tasks(state, r.run) if self._tasks_blob(state, r.run) is not None else None
                if mine is None or set(mine) != set(base_tasks):
                    return None  # unpairable: the live rule refuses; nothing to compare against
                ids = sorted(base_tasks)
                d = paired_delta([base_tasks[i] for i in ids], [mine[i] for i in ids]).delta
                key = (d, int(t.get("step", 0)), r.seq)
                if best is None or key > best:
                    best, chosen = key, f"{t.get('run')}@{t.get('step')}"
        return chosen

    def _tasks(self, state: _State, run: str) -> dict[str, float]:
        blob = self._tasks_blob(state, run)
        assert blob is not None
        lines = self._blob(blob).decode().split("\n")  # \n only: an answer may hold U+2028 raw
        out: dict[str, float] = {}
        for line in lines:
            if line.strip():
                t = _json_line(line)
                out[t["id"]] = float(t["score"])
        return out

    def _nomination(self, state: _State, cid: str, cohort: str, blob: ObjectID) -> list[Violation]:
        try:
            ck = json.loads(self._blob(blob))["checkpoint"]
        except (ValueError, KeyError):
            return [Violation(cid, "well-formed", f"the nomination of cohort {cohort} does not parse")]
        out = []
        claims = [r for r in state.rows.values() if r.cohort == cohort and is_test_read(r)
                  and target_kind(r) == "checkpoint"]
        if claims:
            out.append(Violation(cid, "two-touch", f"cohort {cohort} re-nominated after its claim started"))
        run, _, step = ck.partition("@")
        src = state.rows.get(run)
        if src is not None and src.smoke:
            out.append(Violation(cid, "no-smoke-evidence", f"nominee {ck} is a smoke run"))
        if not any(is_admissible(r) and r.split == "dev"
                   and r.plan.get("target", {}).get("run") == run and str(r.plan["target"].get("step")) == step
                   for r in state.rows.values()):
            out.append(Violation(cid, "two-touch", f"nominee {ck} carries no admissible dev eval"))
        state.nominations[cohort] = ck
        return out

    # --- lineage and frozen hashes ---------------------------------------------------------------

    def _checkpoint(self, experiment: str, state: _State, cid: str, row: RunRow, ck: dict[str, Any]) -> list[Violation]:

        out: list[Violation] = []
        sha = str(ck.get("commit", "")).encode()
        try:
            commit = self._obj(ObjectID(sha))
        except (KeyError, ValueError, AssertionError):
            return [Violation(cid, "lineage", f"checkpoint {row.run}@{ck.get('step')}: lineage commit "
                              f"{sha.decode()[:12]} does not exist")]
        tree = self._obj(commit.tree)
        try:
            info = json.loads(self._blob(tree[b"checkpoint.json"][1]))
        except (KeyError, ValueError):
            return [Violation(cid, "lineage", f"lineage commit {sha.decode()[:12]} holds no checkpoint.json")]
        step = int(ck.get("step", -1))
        if info.get("run") != row.run or int(info.get("step", -2)) != step:
            out.append(Violation(cid, "lineage", f"lineage commit {sha.decode()[:12]} names "
                                 f"{info.get('run')}@{info.get('step')}, not {row.run}@{step}"))
        start = int(row.plan.get("start_step", 0))
        if not start < step <= start + int(row.plan.get("steps", step - start)):
            out.append(Violation(cid, "lineage", f"checkpoint {row.run}@{step} is outside its chunk "
                                 f"({start} + {row.plan.get('steps')})"))
        earlier = [c for c in row.checkpoints if c is not ck and int(c["step"]) < step]
        if earlier:
            want = str(max(earlier, key=lambda c: int(c["step"]))["commit"]).encode()
        elif row.plan.get("parent"):
            p = row.plan["parent"]
            src = state.rows.get(p["run"])
            hit = [c for c in (src.checkpoints if src else []) if int(c["step"]) == int(p["step"])]
            want = str(hit[0]["commit"]).encode() if hit else b"?"
        else:
            tip = self.store.tip(base_ref(experiment, row.cohort))
            want = tip or b"?"
        if [want] != list(commit.parents):
            out.append(Violation(cid, "lineage", f"lineage commit {sha.decode()[:12]} of {row.run}@{step} hangs "
                                 f"off {b','.join(commit.parents).decode()[:12] or 'nothing'}, "
                                 f"not the plan's parent {want.decode()[:12]}"))
        return out

    def _frozen_hashes(self, meas: dict[str, Any]) -> list[Violation]:
        out: list[Violation] = []
        env = meas.get("environment", "")
        snap_tip = self.store.tip(VAULT_REF)
        if snap_tip is None:
            return [Violation("-", "frozen-hashes", f"no vault ref holds environment {env!r}")]
        from monte.ledger.store import Snapshot

        raw = Snapshot(self.store.repo, snap_tip).read(f"environments/{env}/manifest.json")
        if raw is None:
            return [Violation("-", "frozen-hashes", f"the vault holds no manifest for environment {env!r}")]
        files = json.loads(raw).get("files", {})
        prefix = f"environments/{env}/"
        for exam, x in meas.get("exams", {}).items():
            for split, s in x.get("splits", {}).items():
                rel = str(s.get("path", "")).removeprefix(prefix)
                if files.get(rel, {}).get("sha256") != s.get("sha256"):
                    out.append(Violation("-", "frozen-hashes", f"{exam}/{split}: measurement.json's sha256 does not "
                                         "match the vault manifest"))
        return out

    # --- rewinds ---------------------------------------------------------------------------------

    def rewound(self, prefix: str, *, tips: dict[str, ObjectID | None] | None = None,
                exact: bool = False) -> list[Violation]:
        """``rewound``: each remembered tip of each ref under ``prefix`` (only ``prefix`` itself with
        ``exact``) is an ancestor of, or equal to, the ref's tip (``tips`` overrides it: a hook
        judges the proposed tip), and no remembered ref is gone."""
        out: list[Violation] = []
        remembered = self.store.tips.heads(prefix)
        self._heads = (prefix, remembered)  # what _remember asks next, unchanged until it writes
        for ref, heads in sorted(remembered.items()):
            if exact and ref != prefix:
                continue
            current = tips[ref] if tips is not None and ref in tips else self.store.tip(ref)
            newest = heads[-1]
            if current is None:
                out.append(self._rewind(ref, newest, newest, deleted=True))
                continue
            ancestry = Ancestry(self.objects, current)
            lost = [h for h in heads if h.sha not in ancestry
                    and not (h.source != "tips.log" and self._forgery_put_back(ref, h, ancestry))]
            out += [self._rewind(ref, h, max(lost, key=lambda r: r.when)) for h in lost]
        return out

    def _rewind(self, ref: str, lost: Remembered, restore: Remembered, *, deleted: bool = False) -> Violation:
        fix = restore_fix(ref, restore.sha)
        return Violation(lost.sha.decode()[:12], "rewound",
                         f"{rewind_what(ref, lost.sha, deleted=deleted)} ({lost.source}); {fix}", fix)

    def _forgery_put_back(self, ref: str, lost: Remembered, ancestry: Ancestry) -> bool:
        """Whether the commits ``lost`` held and the ref no longer does were each a forgery: none
        written or seen by monte, every one named by a violation of its own. Putting such a tip
        back by hand (``MONTE_HOOKS=off``) repairs the ref; it loses no record."""
        kept = ancestry.all()
        todo = [lost.sha]
        gone: set[ObjectID] = set()
        while todo:  # the commits only ``lost`` reaches
            sha = todo.pop()
            if sha in kept or sha in gone:
                continue
            gone.add(sha)
            try:
                c = self.objects[sha]
            except KeyError:
                return False  # not here to judge: keep the finding
            if isinstance(c, Commit):
                todo.extend(c.parents)
        if gone & self.store.tips.by_monte(ref):
            return False
        parts = ref.split("/")
        other = Verifier(self.store)
        try:
            if ref == VAULT_REF:
                found = other.verify_vault(tip=lost.sha)
            elif len(parts) == 5 and parts[4] == "ledger":
                found = other.verify(parts[3], tip=lost.sha)
            elif len(parts) == 6 and parts[4] == "lineage":
                found = other.verify_lineage(parts[3], parts[5], tip=lost.sha)
            else:
                return False
        except (KeyError, ValueError, AssertionError):
            return False
        named = {v.commit for v in found}
        return all(sha.decode()[:12] in named for sha in gone)

    def _copies(self, experiment: str) -> list[Violation]:
        """``rewound``: a remote-tracking copy of the ledger (a git remote's, or the results
        bucket's mirror written by ``monte sync``) holds records the local ledger lacks."""
        ref = ledger_ref(experiment)
        suffix = "/" + ref[len("refs/heads/"):]
        local = self.store.tip(ref)
        ancestry = Ancestry(self.objects, local) if local is not None else None
        out = []
        for name, sha in sorted(self.store.refs_under("refs/remotes/").items()):
            if not name.endswith(suffix) or (ancestry is not None and sha in ancestry):
                continue
            mirror = name.startswith(MIRROR + "/")
            if not mirror and (local is None or local in Ancestry(self.objects, sha)):
                continue  # a git remote's copy ahead of this one: let in, or named, by monte.ledger.remotes
            if mirror:
                fix = "`monte sync` merges the bucket's records back into the local ledger"
            else:
                fix = ("two ledgers that diverged are merged by monte through the results bucket (`monte push`, "
                       "`monte sync`), never by force")
            why = ("deleted" if local is None else "moved back by something other than monte, or is behind" if mirror
                   else "moved back and appended to, or the two copies diverged")
            out.append(Violation(sha.decode()[:12], "rewound",
                                 f"{name} holds records that the local ledger {ref} lacks (its tip "
                                 f"{sha.decode()[:12]} is not in the local history): the local ledger was {why}; "
                                 f"{fix}", fix))
        return out

    def _remember(self, ref: str) -> None:
        """Remember the tip this verify saw pass, and that each remembered tip leads to it, so the
        next check walks nothing. A repository verify may not write to (CI) keeps what it had."""
        current = self.store.tip(ref)
        if current is None or isinstance(self.store, Proposed):
            return  # a view's refs are not this repository's: nothing to remember
        known = self._heads[1] if self._heads is not None and ref.startswith(self._heads[0]) else None
        self._heads = None
        olds: list[ObjectID | None] = [h.sha for h in (known if known is not None
                                                       else self.store.tips.heads(ref)).get(ref, [])]
        olds = olds or [None]
        if olds == [current]:
            return
        try:
            for old in olds:
                if old != current:
                    self.store.tips.record(ref, old, current)
        except OSError:
            pass

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

    def verify_vault(self, *, tip: ObjectID | None = None, since: ObjectID | None = None) -> list[Violation]:
        """Each vault commit adds exactly one manifest; none is ever changed or removed. Verifying
        the ref itself (no ``tip``) also checks it was not rewound, as :meth:`verify` does."""
        if tip is None:
            current = self.store.tip(VAULT_REF)
            found = self.verify_vault(tip=current, since=since) if current is not None else []
            found += self.rewound(VAULT_REF, exact=True)
            if not found:
                self._remember(VAULT_REF)
            return found
        chain, ok = self._chain(tip, since)
        if not ok:
            return [Violation(tip.decode()[:12], "append-only", "the vault ref's history was rewritten")]
        out: list[Violation] = []
        prev = self._obj(since).tree if since is not None else None
        for c in chain:
            changes = list(self._flat_changes(prev, c.tree))
            cid = c.id.decode()[:12]
            for path, old, new in changes:
                if old is not None:
                    out.append(Violation(cid, "append-only", f"{path} was {'removed' if new is None else 'rewritten'}: "
                                         "frozen means frozen"))
            added = [p for p, o, n in changes if o is None and n is not None]
            if len(added) != 1 or not re.match(r"^(environments|datasets)/[^/]+/manifest\.json$", added[0]):
                out.append(Violation(cid, "one-record", f"a vault record adds one manifest; this adds {added or 'nothing'}"))
            prev = c.tree
        return out

    def verify_lineages(self, experiment: str, refs: Mapping[str, ObjectID], *,
                        own: bool = False) -> dict[str, list[Violation]]:
        """:meth:`verify_lineage` of each lineage ref in ``refs`` (ref: tip), the same findings,
        read at once: every commit below the tips through git in bulk, and each ref's walk cut
        short where it provably finds nothing more (no commit below its run's own is flawed, and
        its run's every checkpoint commit is above the rest), so 1,000 runs cost one pass, not
        one walk of the whole lineage each.

        ``own`` (``verify --from``): each ref's own checkpoints only, and the commit they hang
        off; the lineage below is its parent runs', checked with their records."""
        runs = {ref: ref.rsplit("/", 1)[1] for ref in refs}
        if own:
            out: dict[str, list[Violation]] = {}
            at: ObjectID | None
            for ref, tip in refs.items():
                at = tip
                while at is not None:
                    c = self._commits.get(at) or self._commits.setdefault(at, self._obj(at))
                    has_ck, _, info = self._checkpoint_at(c)
                    at = c.parents[0] if c.parents else None
                    if not (has_ck and isinstance(info, dict) and info.get("run") == runs[ref]):
                        break  # the commit its run's checkpoints hang off: checked too, not below it
                out[ref] = self.verify_lineage(experiment, runs[ref], tip=tip, since=at)
            return out
        self._read_lineage(list(refs.values()))
        count: dict[Any, int] = {}
        odd = False
        for has_ck, _, info, exc in self._checkpoints.values():
            if exc is not None or (has_ck and not isinstance(info, dict)):
                odd = True  # the walk raises, or asks what it cannot: take each ref's walk as it is
            elif has_ck:
                count[info.get("run")] = count.get(info.get("run"), 0) + 1
        flawed: dict[ObjectID, bool] = {}  # a commit on the first-parent line below holds no checkpoint

        def flaw_below(sha: ObjectID) -> bool | None:
            line: list[ObjectID] = []
            at: ObjectID | None = sha
            while at is not None and at not in flawed:
                c, got = self._commits.get(at), self._checkpoints.get(at)
                if c is None or got is None:
                    return None  # not read in bulk: the walk reads it
                line.append(at)
                at = c.parents[0] if c.parents else None
            below = flawed[at] if at is not None else False
            for s in reversed(line):
                c, got = self._commits[s], self._checkpoints[s]
                below = flawed[s] = below or (not got[0] and not (got[1] and not c.parents))
            return below

        out = {}
        for ref, tip in refs.items():
            run = runs[ref]
            if odd or flaw_below(tip) is not False:
                out[ref] = self.verify_lineage(experiment, run, tip=tip)
                continue
            top: list[dict[str, Any]] = []
            at = tip
            while at is not None and (got := self._checkpoints[at])[0] and got[2].get("run") == run:
                top.append(got[2])
                c = self._commits[at]
                at = c.parents[0] if c.parents else None
            if len(top) != count.get(run, 0):
                out[ref] = self.verify_lineage(experiment, run, tip=tip)  # more of its run below
                continue
            found: list[Violation] = []
            last = -1
            for sha, info in zip(self._top_ids(tip, len(top))[::-1], reversed(top), strict=True):
                step = int(info.get("step", -1))
                if step <= last:
                    found.append(Violation(sha.decode()[:12], "lineage",
                                           f"checkpoint {run}@{step} does not follow step {last}"))
                last = step
            out[ref] = found
        return out

    def _top_ids(self, tip: ObjectID, n: int) -> list[ObjectID]:
        ids: list[ObjectID] = []
        at: ObjectID | None = tip
        while at is not None and len(ids) < n:
            ids.append(at)
            c = self._commits[at]
            at = c.parents[0] if c.parents else None
        return ids

    def _read_lineage(self, tips: Sequence[ObjectID], since: ObjectID | None = None) -> None:
        """Every commit on the first-parent lines below ``tips``, its tree and its
        checkpoint.json, read through git in bulk into what :meth:`_chain` and
        :meth:`_checkpoint_at` remember; whatever git does not give as dulwich would read it is
        left for them to read."""
        if not tips or (since is not None and since not in self.objects):
            return
        git = Git(self.store.repo.controldir())
        ids = [ObjectID(x) for x in git.run(["rev-list", "--first-parent", "--stdin"], b"".join(
            t + b"\n" for t in tips) + (b"^" + since + b"\n" if since is not None else b"")).split()]
        commits = {sha: c for sha, c in git.commits([i for i in ids if i not in self._commits]).items()}
        self._commits.update(commits)
        trees: dict[ObjectID, Tree] = {}
        for sha, (kind, raw) in git.objects(list({c.tree for c in commits.values()})).items():
            if kind == b"tree":
                parsed = Tree.from_raw_string(Tree.type_num, raw, sha=ObjectID(sha))
                assert isinstance(parsed, Tree)
                trees[ObjectID(sha)] = parsed
        want: dict[ObjectID, bytes] = {}
        for sha, c in commits.items():
            tree = trees.get(c.tree)
            if tree is not None and sha not in self._checkpoints:
                if b"checkpoint.json" in tree:
                    want[sha] = tree[b"checkpoint.json"][1]
                else:
                    self._checkpoints[sha] = (False, b"base.json" in tree, None, None)
        blobs = git.objects(list(set(want.values())))
        for sha, blob in want.items():
            kind, raw = blobs.get(blob, (b"", b""))
            if kind != b"blob":
                continue  # not there, or not a file: the walk reads it (and fails as it did)
            got: tuple[bool, bool, Any, Exception | None]
            try:
                got = (True, b"base.json" in trees[commits[sha].tree], json.loads(raw), None)
            except Exception as e:  # noqa: BLE001 - kept to raise at the same point of the walk
                got = (True, b"base.json" in trees[commits[sha].tree], None, e)
            self._checkpoints[sha] = got

    def verify_lineage(self, experiment: str, run: str, *, tip: ObjectID | None = None,
                        since: ObjectID | None = None) -> list[Violation]:
        """Every commit new on a lineage ref is a checkpoint of that run, in increasing steps."""

        tip = tip or self.store.tip(lineage_ref(experiment, run))
        if tip is None:
            return []
        chain, ok = self._chain(tip, since)
        if not ok:
            return [Violation(tip.decode()[:12], "append-only", f"the lineage of {run} was rewritten")]
        out: list[Violation] = []
        last = -1
        for c in chain:
            has_ck, has_base, info = self._checkpoint_at(c)
            if not has_ck:
                if has_base and not c.parents:
                    continue  # the chain reached the cohort's base commit
                out.append(Violation(c.id.decode()[:12], "lineage",
                                     f"a commit on the lineage of {run} holds no checkpoint.json"))
                continue
            cid = c.id.decode()[:12]
            if info.get("run") != run:
                continue  # the parent run's checkpoints, below this run's first
            step = int(info.get("step", -1))
            if step <= last:
                out.append(Violation(cid, "lineage", f"checkpoint {run}@{step} does not follow step {last}"))
            last = step
        return out


_SCAN: Callable[[str, int], tuple[Any, int]] = json.JSONDecoder().scan_once  # type: ignore[attr-defined]


def _json_line(line: str) -> Any:
    """``json.loads(line)``, by json's own scanner without its per-call wrapping (a 10,000-record
    ledger holds ~a million per-task lines); anything it does not take whole is handed to
    ``json.loads``, which then answers, or raises, as it would have."""
    text = line.strip(" \t\n\r")  # the whitespace json.loads skips around a value
    try:
        value, end = _SCAN(text, 0)
    except (StopIteration, ValueError, RecursionError):
        return json.loads(line)
    return value if end == len(text) else json.loads(line)


def experiments(store: Store) -> list[str]:
    """The experiments whose ledger ref exists, and those whose ledger monte remembers (a deleted
    ledger is a finding, not an experiment that never was)."""
    from monte.ledger.experiment import experiment_names

    remembered = (experiment_of_ledger(ref) for ref in store.tips.heads(PREFIX))
    return sorted(set(experiment_names(store)) | {n for n in remembered if n})


ZERO = b"0" * 40


def verify_before_spend(store: Store) -> None:
    """Before a test read is spent: every ledger of the repository (each one a seal key may be
    counted in, and each one monte remembers, deleted or not) is verified from the tip this
    check last saw pass (:data:`VERIFIED`; the whole history the first time) to its tip now, and
    none was moved back or removed. A forged forward commit (a read's row deleted by hand) or a
    rewind refuses ``E_VERIFY`` here, before the ``started`` record, instead of letting the read
    be planned and counted on the forged count. Between two test reads a ledger has moved by
    the records made since: only those are walked."""
    from monte.errors import error

    v = Verifier(store)
    found: list[tuple[str, Violation]] = []
    verified = _verified(store)
    for exp in experiments(store):
        ref = ledger_ref(exp)
        found += [(exp, x) for x in v.rewound(ref, exact=True)]
        tip = store.tip(ref)
        if tip is None:
            continue
        known = verified.get(ref)
        if known == tip:
            continue
        since = known if known is not None and known in Ancestry(store.repo.object_store, tip) else None
        walk = v.verify(exp, tip=tip, since=since)
        found += [(exp, x) for x in walk]
        if not walk:
            _remember_verified(store, ref, tip)  # the next read walks only what came after
    if found:
        lines = "; ".join(f"{exp}: {x.commit} [{x.rule}] {x.message}" for exp, x in found[:10])
        fixes = [x.fix for _, x in found if x.fix]
        raise error("E_VERIFY", f"no test read is spent on a ledger that fails verify: {len(found)} violation(s): "
                    f"{lines}", fixes[0] if len(fixes) == len(found) else
                    "the ledger was written outside monte; run `monte ledger verify --all`, find who wrote these "
                    "commits (`git show COMMIT`) and restore the ref from a good copy",
                    details=[{"experiment": exp, **x.to_dict()} for exp, x in found])


VERIFIED = "monte/verified.log"


def _verified(store: Store) -> dict[str, ObjectID]:
    """ref -> the newest tip :func:`verify_before_spend` saw pass (``<git dir>/monte/verified.log``,
    one ``<ref> <sha>`` line per pass). Not ``tips.log``: monte also logs there each tip it
    appended, and an append on top of a commit forged by hand does not make it verified."""
    out: dict[str, ObjectID] = {}
    try:
        data = (Path(store.repo.commondir()) / VERIFIED).read_bytes()
    except OSError:
        return out
    for line in data.split(b"\n"):
        parts = line.split(b" ")
        if len(parts) == 2 and len(parts[1]) == 40:
            out[parts[0].decode(errors="replace")] = ObjectID(parts[1])
    return out


def _remember_verified(store: Store, ref: str, tip: ObjectID) -> None:
    if isinstance(store, Proposed):
        return
    path = Path(store.repo.commondir()) / VERIFIED
    try:
        if path.exists() and path.stat().st_size > 1 << 20:  # keep the newest line of each ref
            keep = b"".join(b"%s %s\n" % (r.encode(), sha) for r, sha in _verified(store).items())
            tmp = path.with_name(f"{path.name}.{os.getpid()}")
            tmp.write_bytes(keep)
            os.replace(tmp, path)
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, b"%s %s\n" % (ref.encode(), tip))
        finally:
            os.close(fd)
    except OSError:
        pass  # a repository verify cannot write to: the next read verifies again


def verify_updates(store: Store, updates: Sequence[tuple[str, bytes, bytes]], *,
                   full: bool = False) -> list[tuple[str, Violation]]:
    """Check the ref updates of one transaction (a push: ``(ref, old, new)`` each) together:
    each is judged against the repository with all of them in place
    (:class:`~monte.ledger.transaction.Proposed`), so a ledger arriving with the vault, base and
    lineage refs it refers to passes in any order, and a forged record fails wherever it is.
    The test reads the pushed records add are counted with every other ledger's (rule ``seal``)."""
    ours = [u for u in updates if u[0].startswith(PREFIX)]
    view = proposed(store, ours)
    out: list[tuple[str, Violation]] = []
    wrote: dict[str, set[str]] = {}
    for ref, old, new in ours:
        runs: set[str] = set()
        out += [(ref, v) for v in verify_update(store, ref, old, new, full=full, view=view, wrote=runs)]
        if (exp := experiment_of_ledger(ref)) is not None and runs:
            wrote[exp] = runs
    if not out and wrote:
        out += [(ledger_ref(exp), v) for exp, v in seal_violations(view, new_runs=wrote)]
    return out


def seal_violations(store: Store, *, new_runs: Mapping[str, set[str]] | None = None) -> list[tuple[str, Violation]]:
    """Rule ``seal`` over every ledger ``store`` sees (:func:`monte.ledger.seal.seal_breaks`):
    (experiment, violation) per break, named after the ledger of its newest read. ``new_runs``
    (experiment -> runs whose rows just landed: a push's): only the seal keys of the test reads
    among them are judged, and nothing is read when there are none."""
    from monte.ledger.experiment import Ledger
    from monte.ledger.predicates import is_test_read
    from monte.ledger.seal import SEAL_FIX, Seal, seal_breaks

    seal = Seal(store)
    only: list[RunRow] | None = None
    if new_runs is not None:
        only = []
        for exp, runs in sorted(new_runs.items()):
            ledger = Ledger(store, exp)
            snap = store.snapshot(ledger_ref(exp))
            only += [r for r in (ledger.row(run, snap) for run in sorted(runs)) if r is not None and is_test_read(r)]
        if not only:
            return []
    out = []
    for b in seal_breaks(seal, only):
        last = b.rows[-1]
        tip = store.tip(b.where[-1])
        out.append((last.experiment, Violation(tip.decode()[:12] if tip else "-", "seal", b.message(), SEAL_FIX)))
    return out


def verify_update(store: Store, ref: str, old: bytes, new: bytes, *, full: bool = False,
                  view: Store | None = None, wrote: set[str] | None = None) -> list[Violation]:
    """Check one proposed ref update (from a git hook: ``old new ref``) before it happens.

    ``full``: verify the new tip's whole history (pre-push: the remote's old value may not be
    here, and the local ref already points at what is pushed); the remote's ``old`` must then be
    an ancestor of ``new`` (no force-push moves a monte ref back). Either way ``new`` must hold
    every tip of ``ref`` this repository remembers (rule ``rewound``). ``view``: the repository
    the records are judged in (:func:`verify_updates`: the other updates of the transaction in
    place); ``store`` is read for the ref's current value. ``wrote``: filled with the runs whose
    rows the new records wrote (a ledger's)."""
    if not ref.startswith(PREFIX):
        return []
    if new == ZERO:
        if old != ZERO and _packing(store, ref, ObjectID(old)):
            return []  # `git pack-refs` (run by `git gc`) removing the loose copy: the ref stays, packed
        return [Violation(old.decode()[:12], "append-only", f"{ref} would be deleted: monte refs are never removed")]
    if not full and _packed_under_loose(store, ref, new):
        return []  # `git pack-refs` writing a tip it read to packed-refs: the loose ref stays the ref
    out: list[Violation] = []
    if full:
        since = ZERO
        if old != ZERO:
            out += _fast_forward(store, ref, ObjectID(old), ObjectID(new))
            if not out and old != new:
                since = old  # what the remote already holds (and accepted): only the records after it
        old = since  # a first push (the remote holds no copy): the whole history
    elif old == ZERO:  # `git update-ref REF NEW` does not say the old value: read it
        current = store.tip(ref)
        old = current if current is not None else ZERO
    if old == new and not out:
        return []  # nothing moves (`git pack-refs` writing packed-refs, say)
    v = Verifier(view or store)
    out += _verify_tip(v, ref, ObjectID(new), None if old == ZERO else ObjectID(old))
    if wrote is not None:
        wrote |= v.wrote
    return out + v.rewound(ref, tips={ref: ObjectID(new)}, exact=True)


def _packing(store: Store, ref: str, old: ObjectID) -> bool:
    """Whether a deletion of ``ref`` is ``git pack-refs`` pruning its loose file: git has already
    written the same value to ``packed-refs`` (a real ``update-ref -d`` of a loose ref finds it
    unpacked; of a packed one, no loose file). The loose file may be gone already: a second
    pack-refs (``git gc`` beside a ``pack-refs``) pruned it first, and git prunes anyway; that
    prune is told apart from a real deletion of a packed ref by ``packed-refs.lock``, which the
    deletion holds and the prune does not."""
    from pathlib import Path

    from dulwich.refs import Ref

    name = Ref(ref.encode())
    try:
        if store.repo.refs.get_packed_refs().get(name) != old:
            return False
        loose = store.repo.refs.read_loose_ref(name)
        return loose == old or (loose is None and not (Path(store.repo.commondir()) / "packed-refs.lock").exists())
    except (OSError, ValueError):
        return False


def _packed_under_loose(store: Store, ref: str, new: bytes) -> bool:
    """Whether this update is ``git pack-refs`` writing ``packed-refs`` while a loose file of
    ``ref`` exists: git reads the loose file first, so the write moves nothing, whatever tip it
    packs. monte may have moved the loose ref on since pack-refs read it; the write then packs
    an older tip, which is not a rewind (and git prunes the loose file only while it still holds
    the packed value: :func:`_packing`). Told apart from a real update of the ref, which writes
    the new value into the ref's own ``.lock`` before the hook runs, by that lock and by
    ``packed-refs.lock``, which pack-refs holds."""
    from pathlib import Path

    git_dir = Path(store.repo.commondir())
    loose = git_dir / ref
    try:
        if (loose.parent / (loose.name + ".lock")).read_bytes().strip() == new:
            return False  # the ref's own update (git update-ref, fetch): judged as any other
    except OSError:
        pass
    return (git_dir / "packed-refs.lock").exists() and loose.is_file()


def _verify_tip(v: Verifier, ref: str, new: ObjectID, since: ObjectID | None) -> list[Violation]:
    parts = ref.split("/")
    if ref == VAULT_REF:
        return v.verify_vault(tip=new, since=since)
    if len(parts) == 5 and parts[4] == "ledger":
        return v.verify(parts[3], tip=new, since=since)
    if len(parts) == 6 and parts[4] == "lineage":
        return v.verify_lineage(parts[3], parts[5], tip=new, since=since)
    if len(parts) == 6 and parts[4] == "base":
        if since is not None:
            return [Violation(new.decode()[:12], "append-only",
                              f"{ref} would move: a cohort's base commit is written once")]
        return []
    return [Violation(new.decode()[:12], "well-formed", f"{ref} is not a ref monte writes")]


PUSH_FIX = ("fetch the remote's records and let them in first (`git fetch REMOTE`, then `git update-ref REF SHA` "
            "when this ledger is behind; two ledgers that diverged are merged by monte through the results bucket: "
            "`monte push`, `monte sync`), then push again; never force-push a monte ref")


def _fast_forward(store: Store, ref: str, remote: ObjectID, new: ObjectID) -> list[Violation]:
    """pre-push: the remote's ``ref`` is at ``remote``; pushing ``new`` must not move it back."""
    if remote == new:
        return []
    if remote not in store.repo.object_store:
        why = f"which this repository does not have: the remote holds records this {ref} lacks"
    elif remote not in Ancestry(store.repo.object_store, new):
        why = f"which is not an ancestor of {new.decode()[:12]}: the push would move it back and lose records"
    else:
        return []
    return [Violation(remote.decode()[:12], "rewound", f"the remote's {ref} is at {remote.decode()[:12]}, {why}; "
                      + PUSH_FIX, PUSH_FIX)]


