"""The walk: a ledger's history from its root (or a verified tip, ``--from``) to its tip, merges replayed
as the union monte writes, each record judged by :mod:`monte.ledger.verify.records`.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from dulwich.objects import Commit, ObjectID

from monte.ledger.gitread import Git
from monte.ledger.merge import MERGE_EVENT, Conflict, merge_bases, union_tree
from monte.ledger.predicates import (
    is_test_read,
)
from monte.ledger.refs import (
    experiment_prefix,
    ledger_ref,
)
from monte.ledger.store import parse_trailers
from monte.ledger.verify.model import (
    BULK,
    INDEX,
    MERGED_TOUCH_FIX,
    READ,
    ROW,
    NeedAll,
    Passed,
    Seen,
    Violation,
)
from monte.ledger.verify.records import Records
from monte.ledger.verify.state import (
    Since,
    WalkState,
)
from monte.ledger.views import COHORTS, nomination_path


class Walk(Records):
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
            except NeedAll:
                pass  # a record asked what only every row answers (a test read, a nomination)
        return self._replay(experiment, tip, since, chain, lazy=False)

    def _replay(self, experiment: str, tip: ObjectID, since: ObjectID | None, chain: list[Commit], *,
                lazy: bool) -> list[Violation]:
        """Check ``chain`` (oldest first) on the state at ``since`` (every row read up front, or,
        ``lazy``, only the rows the records ask for: :class:`Since`)."""
        out: list[Violation] = []
        state = WalkState()
        seen = Seen(pending=since)
        self.wrote = set()
        prev_tree: ObjectID | None = None
        if since is not None:
            base = self._obj(since)
            prev_tree = base.tree
            if lazy:
                Since(self.store, since, state)
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
        self.passed = Passed(experiment, tip, dict(dict.items(state.rows)), not lazy) if not out else None
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

    def _merge(self, experiment: str, state: WalkState, c: Commit, prev_tree: ObjectID | None, seen: Seen,
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

    def _side(self, tip: ObjectID, seen: Seen) -> list[Commit]:
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

    def _load(self, state: WalkState, commit: ObjectID, experiment: str) -> None:
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
        for cohort in snap.listdir(COHORTS):
            raw = snap.read(nomination_path(cohort))
            if raw:
                state.nominations[cohort] = json.loads(raw)["checkpoint"]
        raw = snap.read("measurement.json")
        if raw:
            state.meas = json.loads(raw)
        state.since = snap
        for row in sorted(state.rows.values(), key=lambda r: r.seq):
            if is_test_read(row):
                state.touches.setdefault((row.cohort, row.exam or ""), []).append(row.run)
