"""The state a walk re-derives, record by record: the rows, the test touches, the baselines and
checkpoints per cohort, and (with ``--from``) what it reads lazily from the tip it starts at.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, cast

from dulwich.objects import ObjectID

from monte.ledger import cohorts as cohort_index
from monte.ledger.predicates import (
    is_base_eval,
)
from monte.ledger.records import RunRow
from monte.ledger.store import Store
from monte.ledger.verify.model import (
    NeedAll,
)
from monte.ledger.views import bucket_index


class Since:
    """The verified state at a ``--from`` commit, read as the records after it ask: a run's row
    from its fan-out folder's index (every row of that folder at once: the index check needs
    them all), a cohort's baselines and index from that cohort's derived index. Only what
    :meth:`Verifier._load` would have read, from the same files; a question they cannot answer
    alone (every row, a count over the cohort, a cohort without an index) raises
    :class:`NeedAll`, and the records are checked again on the whole state."""

    def __init__(self, store: Store, commit: ObjectID, state: WalkState) -> None:
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
            raise NeedAll
        self.bucket(run[:2])

    def bucket(self, bucket: str) -> None:
        if bucket in self.loaded:
            return
        if len(bucket) != 2:
            raise NeedAll
        from monte.ledger.records import row_from_index

        self.loaded.add(bucket)
        raw = self.snap.read(bucket_index(bucket))
        if not raw:
            return
        try:
            rows = [row_from_index(d) for d in json.loads(raw).values()]
            if any(row.run[:2] != bucket for row in rows):
                raise NeedAll  # not a row this folder holds: let the whole read judge it
        except (ValueError, TypeError, AttributeError):
            raise NeedAll from None  # not an index monte writes: the whole read fails as it did
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
                raise NeedAll
            self.indexes[cohort] = index
        return self.indexes[cohort]

class _LazyRows(dict[str, RunRow]):
    def __init__(self, since: Since) -> None:
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
        raise NeedAll

    pop = values = items = keys = __iter__ = __len__ = _all

class _LazySeen(set[str]):
    def __init__(self, since: Since) -> None:
        super().__init__()
        self.since = since

    def __contains__(self, run: object) -> bool:
        self.since.run(run)
        return super().__contains__(run)

class _LazyBuckets(dict[str, set[str]]):
    def __init__(self, since: Since) -> None:
        super().__init__()
        self.since = since

    def get(self, bucket: str, default: Any = None) -> Any:
        self.since.bucket(bucket)
        return super().get(bucket, default)

    def setdefault(self, bucket: str, default: Any = None) -> Any:
        self.since.bucket(bucket)
        return super().setdefault(bucket, default)

class _LazyCohorts(dict[str, dict[str, Any]]):
    def __init__(self, since: Since) -> None:
        super().__init__()
        self.since = since

    def get(self, cohort: str, default: Any = None) -> Any:
        if not super().__contains__(cohort):
            dict.__setitem__(self, cohort, self.since.cohort_index(cohort))
        return super().get(cohort, default)

class _LazyBaselines(set[tuple[str, str, str]]):
    def __init__(self, since: Since) -> None:
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
        raise NeedAll  # no baseline in the index: the rows say so, or not

@dataclass
class WalkState:
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
    lazy: bool = False  # the state at --from, read as asked (Since): some questions need it all
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
            raise NeedAll
