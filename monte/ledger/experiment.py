"""An experiment's ledger: the measurement, the Run rows, reading the state from the tip."""

from __future__ import annotations

import gc
import json
import os
import re
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dulwich.objects import Commit, ObjectID

from monte.errors import MonteError, error
from monte.jsonl import escape_unsafe
from monte.ledger import cohorts
from monte.ledger.objcache import ObjectCache, cache_path
from monte.ledger.refs import PREFIX, experiment_of_ledger, ledger_ref
from monte.ledger.store import Change, Snapshot, Store
from monte.ledger.views import RUNS, MeasurementView, bucket_index, fanout_index, run_dir

if TYPE_CHECKING:  # the models: imported where a record is validated or built (pydantic, ~50 ms)
    from monte.ledger.derived import Derive
    from monte.ledger.records import Measurement, RunRow


def experiment_names(store: Store) -> list[str]:
    """Every experiment in the repository: the ``refs/heads/monte/<exp>/ledger`` refs.

    Read from git's files directly (one folder listing and ``packed-refs``) rather than by
    listing every ref under ``refs/heads/monte/``: a repository holds one lineage ref per
    training run (~900 at 10,000 runs), and ``monte status`` only needs the ledgers."""
    heads = os.path.join(store.repo.commondir(), *PREFIX.rstrip("/").split("/"))
    try:
        loose = [n for n in os.listdir(heads) if os.path.isfile(os.path.join(heads, n, "ledger"))]
    except OSError:
        loose = []
    names = {experiment_of_ledger(f"{PREFIX}{n}/ledger") for n in loose}
    names |= {experiment_of_ledger(ref.decode(errors="replace")) for ref in store.repo.refs.get_packed_refs()}
    # a view's refs (monte.ledger.transaction.Proposed: a clone's copies read where they are)
    names |= {experiment_of_ledger(ref) for ref in getattr(store, "proposed", {})}
    return sorted(n for n in names if n and store.tip(ledger_ref(n)) is not None)


def one_experiment(store: Store, given: str | None) -> str:
    """The experiment named, or the only one in the repository."""
    if given:
        from monte.names import check_name

        return check_name(given, "experiment name")
    names = experiment_names(store)
    if len(names) == 1:
        return names[0]
    if not names:
        raise error("E_NOT_FOUND", "this repository has no experiment yet",
                    "create one with `monte experiment init NAME --eval ENV`")
    raise error("E_USAGE", f"this repository has {len(names)} experiments: {', '.join(names)}",
                "name one: `-e NAME` (or --experiment NAME; status, push, plot and ledger verify also take it "
                "as their argument)")


def dumps(obj: object) -> bytes:
    """The one JSON encoding monte writes: sorted keys, indented, trailing newline. A lone
    surrogate (from undecodable argv or a model's text) is escaped, not a crash (:mod:`monte.jsonl`)."""
    return (escape_unsafe(json.dumps(obj, indent=2, sort_keys=True, ensure_ascii=False)) + "\n").encode()


def compact_json(obj: object) -> bytes:
    """Derived indexes: compact (C encoder), one line; they are for monte, not for reading."""
    return (escape_unsafe(json.dumps(obj, sort_keys=True, ensure_ascii=False, separators=(",", ":")))
            + "\n").encode()


#: orjson's ``loads`` (a C JSON parser, 3-4x faster on the fan-out indexes), when installed
#: (optional); looked for at the first parse (a read served from a kept view parses none)
_orjson_loads: list[Callable[[bytes], Any] | None] = []


def _loads(raw: bytes) -> Any:
    """``json.loads``, through orjson when it is there; what orjson refuses and json reads (an
    integer beyond 64 bits, an escaped lone surrogate) falls back to json, so both agree."""
    if not _orjson_loads:
        try:
            from orjson import loads
        except ImportError:  # pragma: no cover - depends on the environment
            loads = None  # type: ignore[assignment]
        _orjson_loads.append(loads)
    fast = _orjson_loads[0]
    if fast is not None:
        try:
            return fast(raw)
        except ValueError:
            pass
    return json.loads(raw)


_TREE_ENTRY = re.compile(rb"[0-7]+ ([^\0]*)\0(.{20})", re.DOTALL)


def tree_entries(raw: bytes) -> list[tuple[bytes, bytes]]:
    """(name, hex id) of each entry of a raw git tree (``<mode> <name>\\0<20-byte id>``...)."""
    return [(m.group(1), m.group(2).hex().encode()) for m in _TREE_ENTRY.finditer(raw)]


def _records(snap: Snapshot) -> int:
    raw = snap.read("meta.json")
    return int(json.loads(raw)["records"]) if raw else 0


def meta_json(n: int) -> bytes:
    return dumps({"records": n})


def record_change(read: Callable[[str], bytes | None], row: RunRow, seq: int, *, event: str, summary: str,
                  files: dict[str, bytes] | None = None, trailers: dict[str, str] | None = None,
                  scan: Callable[[], Iterable[RunRow]] | None = None,
                  workflow_root: Path | None = None) -> Change:
    """What the record that writes ``row`` as record number ``seq`` changes, given ``read`` (a
    path's bytes at the tip it is appended to): the row, the derived indexes (the row's fan-out
    folder's, its cohort's), the count, the trailers. Pure: the one place a row becomes files,
    shared by ``Ledger.append_row`` and the benchmarks' bulk builders (so a ledger built in bulk
    is the ledger monte would have written).

    ``scan()`` gives every row at that tip; it is called only when the row's cohort has no index
    yet (a ledger written before there was one, or the cohort's first record), to create it
    once. By default the rows are read through ``read`` from the fan-out indexes.
    ``workflow_root``: the repository whose pin the CI workflow carries (:func:`monte.ci.resolve`)."""
    if not row.seq:  # a row keeps the number of the record that created it
        row.seq = seq
    index_path = bucket_index(row.run)
    raw = read(index_path)
    index = json.loads(raw) if raw else {}
    index[row.run] = row.model_dump(mode="json")
    writes: dict[str, bytes | None] = {
        f"{run_dir(row.run)}/row.json": dumps(row.model_dump(mode="json")),
        index_path: compact_json(index),
        "meta.json": meta_json(seq),
    }
    cohort_path = cohorts.index_path(row.cohort)
    if cohort_path is not None:
        raw = read(cohort_path)
        try:
            stored = json.loads(raw) if raw is not None else None
        except ValueError:
            stored = None  # not JSON: re-derived below (verify names the record that wrote it)
        try:
            new = cohorts.fold(stored, row) if isinstance(stored, dict) else None
        except (TypeError, ValueError, AttributeError, IndexError, KeyError):
            new = None  # not the shape monte writes: re-derived, as above
        if new is None:
            new = cohorts.fold(cohorts.build(scan() if scan is not None else _scan(read), row.cohort), row)
        if new != stored:
            writes[cohort_path] = compact_json(new)
    for name, data in (files or {}).items():
        writes[f"{run_dir(row.run)}/{name}"] = data
    # (imported here: a writer's, ~10 ms that a read-only command skips)
    from monte.ci import LEDGER_WORKFLOW, ledger_workflow

    workflow = ledger_workflow(root=workflow_root)  # derived: carried by every record, for CI (monte.ci)
    if workflow is not None and read(LEDGER_WORKFLOW) != workflow:
        writes[LEDGER_WORKFLOW] = workflow
    base = {
        "Monte-Event": event,
        "Monte-Run": row.run,
        "Monte-Kind": row.kind,
    }
    if row.split:
        base["Monte-Split"] = row.split
    base["Monte-Step"] = str(row.step)
    if row.cohort:
        base["Monte-Cohort"] = row.cohort
    base.update(trailers or {})
    return Change(summary=summary, writes=writes, trailers=base)


def next_record(snap: Snapshot, make: Callable[[Snapshot, int], RunRow], *, event: str,
                summary: Callable[[RunRow], str], files: Callable[[RunRow], dict[str, bytes]] | None = None,
                trailers: Callable[[RunRow], dict[str, str]] | None = None,
                scan: Callable[[], Iterable[RunRow]] | None = None,
                workflow_root: Path | None = None) -> tuple[RunRow, Change]:
    """The row ``make`` writes as the next record on ``snap`` and that record's change
    (:func:`record_change`): what :meth:`Ledger.append_row` appends, and the benchmarks' bulk
    builder streams."""
    seq = _records(snap) + 1
    row = make(snap, seq)
    if not row.seq:  # a row keeps the number of the record that created it (``summary`` reads it)
        row.seq = seq
    return row, record_change(snap.read, row, seq, event=event, summary=summary(row),
                              files=files(row) if files else None,
                              trailers=trailers(row) if trailers else None, scan=scan,
                              workflow_root=workflow_root)


_FANOUT = "0123456789abcdefghijklmnopqrstuvwxyz"  # every first character verify lets a run id have


def _scan(read: Callable[[str], bytes | None]) -> list[RunRow]:
    """Every row at a tip, from its fan-out indexes, through ``read`` alone."""
    from monte.ledger.records import row_from_index

    rows: list[RunRow] = []
    for a in _FANOUT:
        for b in _FANOUT:
            raw = read(fanout_index(a, b))
            if raw:
                rows.extend(row_from_index(r) for r in _loads(raw).values())
    return rows


class Ledger:
    def __init__(self, store: Store, experiment: str) -> None:
        self.store = store
        self.experiment = experiment
        self.ref = ledger_ref(experiment)

    # --- creation ----------------------------------------------------------------------------

    def exists(self) -> bool:
        return self.store.tip(self.ref) is not None

    def create(self, measurement: Measurement) -> bytes:
        from monte.ci import LEDGER_WORKFLOW, ledger_workflow

        def build(snap: Snapshot) -> Change:
            if not snap.empty:
                raise _exists(self.experiment)
            writes = {"measurement.json": dumps(measurement.model_dump(mode="json")), "meta.json": meta_json(1)}
            workflow = ledger_workflow(root=self.store.root)
            if workflow is not None:  # so a push of this branch runs verify in CI
                writes[LEDGER_WORKFLOW] = workflow
            return Change(
                summary=f"experiment {self.experiment}: measurement frozen "
                f"({measurement.environment}, {len(measurement.exams)} exam(s))",
                writes=writes,
                trailers={"Monte-Event": "created", "Monte-Experiment": self.experiment},
            )

        if self.exists():
            raise _exists(self.experiment)
        return self.store.append(self.ref, build, create=True)

    # --- reading: one tree, the tip -------------------------------------------------------------

    def snapshot(self) -> Snapshot:
        snap = self.store.snapshot(self.ref)
        if snap.empty:
            raise error(
                "E_NOT_FOUND",
                f"no experiment named {self.experiment!r}",
                "list experiments with `monte experiment list`, or create it with "
                f"`monte experiment init {self.experiment} --eval ENV`",
            )
        return snap

    def measurement(self, snap: Snapshot | None = None) -> Measurement:
        from monte.ledger.records import Measurement

        return Measurement.model_validate_json(self._measurement_json(snap or self.snapshot()))

    def measurement_view(self, snap: Snapshot | None = None) -> MeasurementView | Measurement:
        """The frozen measurement for a read-only view (``monte status``): its fields as plain
        data, without pydantic (~50 ms of a process: its import, the schema, its plugin scan);
        one not of the shape monte writes is validated instead, and fails as it would have."""
        snap = snap or self.snapshot()
        raw = self._measurement_json(snap)
        try:
            return MeasurementView.parse(raw)
        except (KeyError, TypeError, AttributeError, ValueError):
            return self.measurement(snap)

    def _measurement_json(self, snap: Snapshot) -> bytes:
        raw = snap.read("measurement.json")
        if raw is None:
            raise error("E_INTEGRITY", f"experiment {self.experiment!r} has no measurement.json",
                        "the ledger ref was written by hand; run `monte ledger verify`")
        return raw

    def rows(self, snap: Snapshot | None = None) -> list[RunRow]:
        """Every Run row, in record order, built from the fan-out indexes (<= 1,024 blobs, read
        as raw objects through the experiment's object cache, :mod:`monte.ledger.objcache`:
        verified bytes, so never stale) without validating each: the indexes are derived data
        `monte ledger verify` checks against every ``row.json``, and 10,000 rows stay fast."""
        from monte.ledger.records import row_from_index

        snap = snap or self.snapshot()
        paused = gc.isenabled()
        gc.disable()  # tens of thousands of small objects, none of them garbage: skip the scans
        try:
            cache = ObjectCache(cache_path(self.store.repo.commondir(), self.experiment))
            rows = [row_from_index(d) for _, index in self._indexes(snap, cache)
                    for d in _loads(self._object(snap, index, cache)).values()]
            cache.save()
        finally:
            if paused:
                gc.enable()
        rows.sort(key=lambda r: r.seq)
        return rows

    def _runs_tree(self, snap: Snapshot) -> bytes | None:
        if snap.commit_id is None:
            return None
        commit = self.store.repo.object_store[snap.commit_id]
        assert isinstance(commit, Commit)
        return self._entry(snap, commit.tree, RUNS.encode(), None)

    def _indexes(self, snap: Snapshot, cache: ObjectCache, top: bytes | None = None) -> Iterator[tuple[bytes, bytes]]:
        """(folder tree id, ``index.json`` blob id) of each fan-out folder ``runs/<c0>/<c1>/``
        under ``top`` (default: the snapshot's ``runs/``), trees read through ``cache``."""
        top = top or self._runs_tree(snap)
        if not top:
            return
        for _, first in self._tree(snap, top, cache):
            for _, second in self._tree(snap, first, cache):
                index = self._entry(snap, second, b"index.json", cache)
                if index:
                    yield second, index

    def derived(self, snap: Snapshot, name: str, version: str, derive: Derive) -> list[Any]:
        """Everything ``derive`` makes of each fan-out index at ``snap`` (its parsed entries ->
        a list), concatenated in no particular order, through the reader's derived cache
        (:mod:`monte.ledger.derived`): an index derived before is not parsed again, and a
        ``runs/`` tree read before is not walked again. An append changes one index, so the
        read after it derives one index's rows."""
        top = self._runs_tree(snap)
        if not top:
            return []
        git_dir = self.store.repo.commondir()
        # (imported here: status's, ~10 ms that `show` and `logs` skip)
        from monte.ledger.derived import DerivedCache

        cache = DerivedCache(git_dir, self.experiment, name, version)
        if cache.runs_tree == top:
            return [f for facts in cache.entries.values() for f in facts]
        objects = ObjectCache(cache_path(git_dir, self.experiment))
        entries: dict[bytes, list[Any]] = {}
        for _, index in self._indexes(snap, objects, top):
            found = cache.entries.get(index)
            entries[index] = derive(_loads(self._object(snap, index, objects))) if found is None else found
        objects.save()
        cache.save(top, entries)
        return [f for facts in entries.values() for f in facts]

    def appended(self, since: bytes, snap: Snapshot, *, most: int = 1000) -> list[dict[str, Any]] | None:
        """The fan-out index entries (rows) that ``snap`` holds and the commit ``since`` did not,
        when ``snap`` only appended rows to it: ``since`` is reached from ``snap``'s commit
        through at most ``most`` single-parent commits (no merge, no rewrite), and every fan-out
        index of ``since`` is still there with each of its entries unchanged. None otherwise (a
        rewritten history, a changed or removed row, a folder gone): read every index again."""
        tip = snap.commit_id
        if tip is None:
            return None
        objects = self.store.repo.object_store
        at = tip
        for _ in range(most):
            if at == since:
                break
            commit = objects[at]
            if not isinstance(commit, Commit) or len(commit.parents) != 1:
                return None
            at = commit.parents[0]
        else:
            return None
        if at != since:
            return None
        old = objects[ObjectID(since)]
        if not isinstance(old, Commit):
            return None
        old_runs = self._entry(snap, old.tree, RUNS.encode(), None)
        new_runs = self._runs_tree(snap)
        if old_runs == new_runs:
            return []
        if old_runs is None or new_runs is None:
            return None  # a ledger's first row: read it whole
        out: list[dict[str, Any]] = []
        old_first = dict(self._tree(snap, old_runs, None))
        new_first = dict(self._tree(snap, new_runs, None))
        if not old_first.keys() <= new_first.keys():
            return None
        for name, sha in new_first.items():
            was = old_first.get(name)
            if was == sha:
                continue
            old_second = dict(self._tree(snap, was, None)) if was is not None else {}
            new_second = dict(self._tree(snap, sha, None))
            if not old_second.keys() <= new_second.keys():
                return None
            for sub, folder in new_second.items():
                before = old_second.get(sub)
                if before == folder:
                    continue
                new_index = self._entry(snap, folder, b"index.json", None)
                old_index = self._entry(snap, before, b"index.json", None) if before is not None else None
                if new_index == old_index:
                    continue  # a row's other files: nothing a reader of the indexes sees
                if new_index is None:
                    return None
                now = _loads(self._object(snap, new_index, None))
                then = _loads(self._object(snap, old_index, None)) if old_index is not None else {}
                if not isinstance(now, dict) or not isinstance(then, dict):
                    return None
                if any(run not in now or now[run] != entry for run, entry in then.items()):
                    return None
                out += [entry for run, entry in now.items() if run not in then]
        return out

    def entries(self, snap: Snapshot) -> list[dict[str, Any]]:
        """Every fan-out index entry (row) at ``snap``, parsed, read without a derived cache
        (what verify gathers a kept fold from)."""
        objects = ObjectCache(cache_path(self.store.repo.commondir(), self.experiment))
        return [e for _, index in self._indexes(snap, objects) for e in _loads(self._object(snap, index, objects)).values()]

    def _object(self, snap: Snapshot, sha: bytes, cache: ObjectCache | None) -> bytes:
        found = cache.get(sha) if cache is not None else None
        if found is None:
            found = self.store.repo.object_store.get_raw(ObjectID(sha))  # raw bytes, unparsed
            if cache is not None:
                cache.put(sha, *found)
        return found[1]

    def _tree(self, snap: Snapshot, sha: bytes, cache: ObjectCache | None) -> list[tuple[bytes, bytes]]:
        return tree_entries(self._object(snap, sha, cache))

    def _entry(self, snap: Snapshot, tree: bytes, name: bytes, cache: ObjectCache | None) -> bytes | None:
        return next((sha for n, sha in self._tree(snap, tree, cache) if n == name), None)

    def row(self, run_id: str, snap: Snapshot | None = None) -> RunRow | None:
        snap = snap or self.snapshot()
        if len(run_id) < 2:  # no run id is this short, and the tree fans out on two characters
            return None
        raw = snap.read(f"{run_dir(run_id)}/row.json")
        if not raw:
            return None
        from monte.ledger.records import RunRow

        return RunRow.model_validate_json(raw)

    def cohort_index(self, cohort: str, snap: Snapshot | None = None) -> dict[str, Any] | None:
        """The derived index of a cohort's baselines and test reads (:mod:`monte.ledger.cohorts`),
        one blob; None where there is none (a ledger written before it, a cohort with no record,
        a name that cannot be a folder) or it is not one monte writes: then read the rows."""
        path = cohorts.index_path(cohort)
        if path is None:
            return None
        raw = (snap or self.snapshot()).read(path)
        try:
            index = _loads(raw) if raw is not None else None
        except ValueError:
            return None
        return index if isinstance(index, dict) else None

    # --- appending ----------------------------------------------------------------------------

    def append_row(
        self,
        make: Callable[[Snapshot, int], RunRow],
        *,
        event: str,
        summary: Callable[[RunRow], str],
        files: Callable[[RunRow], dict[str, bytes]] | None = None,
        trailers: Callable[[RunRow], dict[str, str]] | None = None,
    ) -> RunRow:
        """Append a record that writes one Run row.

        ``make(snapshot, seq)`` returns the row to write; it runs again on the new tip after a
        lost race, so it is where rules are checked (raise to refuse).
        """
        made: list[RunRow] = []

        def build(snap: Snapshot) -> Change:
            if snap.empty:
                raise self._missing()
            row, change = next_record(snap, make, event=event, summary=summary, files=files, trailers=trailers,
                                      scan=lambda: self.rows(snap), workflow_root=self.store.root)
            made[:] = [row]
            return change

        self.store.append(self.ref, build)
        return made[0]

    def _missing(self) -> MonteError:
        return error(
            "E_NOT_FOUND",
            f"no experiment named {self.experiment!r}",
            f"create it with `monte experiment init {self.experiment} --eval ENV`",
        )


def _exists(name: str):  # type: ignore[no-untyped-def]
    return error(
        "E_MEASUREMENT_EXISTS",
        f"experiment {name!r} already exists; its measurement is frozen",
        "choose another experiment name; a changed measurement is a new experiment",
    )
