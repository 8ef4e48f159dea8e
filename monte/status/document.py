"""``monte status``'s document of one experiment: its rows gathered (:mod:`monte.status.fold`,
continued from a kept fold when the ledger only appended rows), the seal's disclosure of each
exam's test reads, and the floors beside the scores (the constant-answer floor, docs/statistics.md)."""

from __future__ import annotations

import gc
import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, cast

from monte.jsonl import RawJson
from monte.ledger.views import COHORTS, MeasurementLike, nomination_path
from monte.status.facts import JSON_ROW, SEQ, by_seq, derive_facts, facts_version, row_fact
from monte.status.fold import Dead, Unserialized, finish, fold, lineage_section, new_fold
from monte.workspace import Workspace

if TYPE_CHECKING:  # annotations only: a status reads no model object (pydantic costs ~50 ms to import)
    from monte.ledger.derived import Fold
    from monte.ledger.experiment import Ledger
    from monte.ledger.records import RunRow
    from monte.ledger.store import Snapshot
    from monte.manifest import Floor


def experiment_status(ws: Workspace, experiment: str | None, *, json_rows: bool = False,
                      table: bool = False, dead: Dead | None = None,
                      made: dict[str, Any] | None = None, kept: Fold | None = None,
                      at: bytes | None = None) -> dict[str, Any]:
    """``monte status``: the experiment's state from its ledger tip (one tree), and for each
    exam, how often its test content has been read in this repository across all cohorts.
    ``dead``, as :func:`from_facts`; ``made``, when given, gets what the status was made from
    beyond the refs (``judged``: the liveness judgements; ``depends``: what it read outside git;
    ``fold``: what it gathered of the rows, to continue from, :class:`monte.ledger.derived.Fold`).
    ``kept``: a fold of this experiment made by this code (:func:`fold_view`), continued with the
    rows appended since when the ledger only appended rows to its tip, and each live-looking run
    it judged is judged the same; otherwise every row is gathered again. ``at``: the ledger
    commit to read instead of the tip (verify re-derives a fold at its own)."""
    import marshal
    from types import SimpleNamespace

    from monte.ledger.derived import Fold
    from monte.ledger.experiment import Ledger, one_experiment
    from monte.ledger.seal import Seal, leak_refusals
    from monte.ledger.store import Snapshot

    exp = one_experiment(ws.store, experiment)
    ledger = Ledger(ws.store, exp)
    snap = ledger.snapshot() if at is None else Snapshot(ws.store.repo, at)  # type: ignore[arg-type]
    meas: MeasurementLike = ledger.measurement_view(snap)
    collecting = gc.isenabled()
    gc.disable()  # ~10 objects a row, none of them garbage: the collector's scans would be most of the time
    try:
        floors, source = floors_and_source(ws, meas.environment)
        floor = {f"{exam}/{split}": float(f["score"] if isinstance(f, Mapping) else f.score)
                 for exam, splits in floors.items() for split, f in splits.items()}
        try:
            acc = _continued(ledger, snap, kept, dead, floor if json_rows else None) if kept is not None else None
        except Unserialized:
            acc = None
        if acc is None:
            facts = (ledger.derived(snap, "status", facts_version(), derive_facts) if at is None
                     else [row_fact(entry) for entry in ledger.entries(snap)])
            facts.sort(key=by_seq)
            try:
                acc = new_fold(facts, json_rows=json_rows, table=table, floors=floor if json_rows else None)
                fold(acc, facts, dead=dead)
            except Unserialized:  # a delta line orjson refuses: the deltas as dicts, floors noted after
                acc = new_fold(facts, json_rows=json_rows, table=table)
                fold(acc, facts, dead=dead)
        memo: dict[Any, Any] = dict(kept.memo) if kept is not None else {}
        lineage_section(meas, acc)  # (kept with the fold)
        state = marshal.dumps(acc) if made is not None else b""
        noms = {}
        for cohort in snap.listdir(COHORTS):
            raw = snap.read(nomination_path(cohort))
            if raw:
                noms[cohort] = json.loads(raw)["checkpoint"]
        judged = list(acc["judged"])
        out = finish(meas, acc, noms, memo)
        seal = Seal(ws.store, hash_legacy=False)
        # the seal reads a test read's run, experiment, cohort, plan, kind, split and smoke: the
        # index's dicts as attributes (no model object)
        seal.know(exp, cast("list[RunRow]", [SimpleNamespace(**r) for r in out.pop("_test_reads")]))
        out["exams"] = [{"exam": exam, "split_sha256": x.splits["test"].sha256,
                         **_renamed(seal.disclosure(x.splits["test"].sha256)),
                         # each leak refusal answered "are these rows in test?": disclosed beside the reads
                         "leak_refusals": leak_refusals(ws.store, x.splits["test"].sha256)}
                        for exam, x in sorted(meas.exams.items()) if "test" in x.splits]
        add_floors_and_reach(out, meas, floors, scores=out.pop("_scores"), memo=memo,
                             summaries=out.pop("_dev_summary"))
        if made is not None:
            made["judged"] = judged
            made["depends"] = [("floors", source)]
            made["fold"] = Fold("", bytes(snap.commit_id or b""), state, memo)
    finally:
        if collecting:
            gc.enable()
    return out


def _continued(ledger: Ledger, snap: Snapshot, kept: Fold, dead: Dead | None,
               floor: dict[str, float] | None = None) -> dict[str, Any] | None:
    """``kept``'s accumulators with the rows appended since its tip folded in, or None when the
    ledger did more than append rows (:meth:`monte.ledger.experiment.Ledger.appended`), a run
    it judged is judged otherwise now, or an appended row cannot follow (a record number not
    after every row kept, a row without the serialized form the kept rows have)."""
    import marshal

    if dead is None:
        from monte.processes import is_dead_at

        dead = is_dead_at
    entries = ledger.appended(kept.tip, snap)
    if entries is None:
        return None
    try:
        acc: dict[str, Any] = marshal.loads(kept.state)
    except (ValueError, EOFError, TypeError):
        return None
    if any(dead(recorded, *who) != gone for recorded, who, gone in acc["judged"]):
        return None
    if acc.get("floor") is not None and acc["floor"] != floor:  # its delta lines hold other floors
        return None
    facts = derive_facts({str(i): e for i, e in enumerate(entries)})
    facts.sort(key=by_seq)
    seqs = [f[SEQ] for f in facts]
    last = acc["max_seq"]
    if (any(type(q) is not int for q in seqs) or len(set(seqs)) != len(seqs)
            or (facts and last is not None and seqs[0] <= last)
            or (acc["serialized"] and any(f[JSON_ROW] is None for f in facts))):
        return None
    fold(acc, facts, dead=dead)
    return acc


def frozen_floors(ws: Workspace, environment: str) -> Mapping[str, Mapping[str, Any]]:
    """:func:`monte.envs.floor.exam_floors` for a read-only view: the floors the vault's manifest
    of ``environment`` records, read as JSON (no pydantic); without them (a freeze older than
    floors, or no vault), ``exam_floors`` itself (the data root's manifest)."""
    return floors_and_source(ws, environment)[0]


def floors_and_source(ws: Workspace, environment: str) -> tuple[Mapping[str, Mapping[str, Any]], str]:
    """:func:`frozen_floors`, and where they came from: ``vault`` (the vault ref's manifest),
    ``none`` (no vault manifest and no environment folder on the data root) or ``data-root``
    (the data root's manifest: files outside git, which no view of the ledger can key)."""
    import json

    from monte.ledger.refs import VAULT_REF
    from monte.ledger.views import manifest_path

    raw = ws.store.snapshot(VAULT_REF).read(manifest_path("environment", environment))
    try:
        floors = json.loads(raw).get("floors") if raw else None
        if floors:
            return ({exam: {split: {"score": float(f["score"]), "answer": str(f["answer"]), "n": int(f["n"]),
                                    "candidates": int(f["candidates"])} for split, f in splits.items()}
                     for exam, splits in floors.items()}, "vault")
    except (ValueError, TypeError, KeyError, AttributeError):
        pass  # not the shape monte writes: validated below, reported as exam_floors reports it
    if not raw and not ws.env_dir(environment).is_dir():
        return {}, "none"
    from monte.envs.floor import exam_floors

    return exam_floors(ws, environment), "data-root"


def _renamed(d: dict[str, Any]) -> dict[str, Any]:
    return {"test_reads": d["reads"], "cohorts": d["cohorts"], "experiments": d["experiments"]}


def add_floors_and_reach(out: dict[str, Any], meas: MeasurementLike,
                         floors: Mapping[str, Mapping[str, Floor | Mapping[str, Any]]], *,
                         scores: Mapping[str, Any] | None = None, memo: dict[Any, Any] | None = None,
                         summaries: Mapping[str, list[Any]] | None = None) -> None:
    """Beside the scores (docs/statistics.md): each exam split's constant-answer floor (``floors``), what a
    test read of each exam can show (``exams[i]["detectable"]``, :func:`monte.stats.power.detectable`),
    and a flag on every checkpoint score at or below its floor (``at_floor`` on delta lines, the
    exams ``at_floor`` on checkpoints): beating a garbage base is not learning. ``memo``: as
    :func:`monte.stats.power.detectable`'s; ``summaries``: each exam's dev deltas as
    :func:`monte.stats.power.add_to_summary` gathered them (:func:`fold` does), instead of the deltas."""
    from monte.stats.power import detectable, detectable_from, new_summary

    out["floors"] = {f"{exam}/{split}": dict(f) if isinstance(f, Mapping) else f.model_dump()
                     for exam, splits in sorted(floors.items()) for split, f in sorted(splits.items())}
    floor = {k: f["score"] for k, f in out["floors"].items()}
    if scores is None:  # each delta's own score (``out["rows"]`` as a list)
        scores = {r["run"]: r["score"] for r in out["rows"]}
    dev: dict[str, list[dict[str, Any]]] = {}
    keys: dict[tuple[str, str], tuple[Any, list[dict[str, Any]] | None]] = {}
    for d in () if isinstance(out["deltas"], RawJson) else out["deltas"]:  # (serialized: noted by fold)
        exam, split = d["exam"], d["split"]
        found = keys.get((exam, split))
        if found is None:
            found = keys[exam, split] = (floor.get(f"{exam}/{split}"),
                                         dev.setdefault(exam, []) if split == "dev" and summaries is None else None)
        at, dev_list = found
        d["floor"] = at
        score = scores.get(d["run"])
        d["at_floor"] = at is not None and score is not None and score <= at
        if dev_list is not None:
            dev_list.append(d)
    for c in out["checkpoints"]:
        c["at_floor"] = sorted(e for e, s in c["dev"].items()
                               if s is not None and f"{e}/dev" in floor and s <= floor[f"{e}/dev"])
    at_floor = {c["checkpoint"]: c["at_floor"] for c in out["checkpoints"]}
    for cy in out.get("cycles", ()):  # beating a garbage base at or below the floor is no learning (the constant-answer floor, docs/statistics.md)
        cy["not_learning"] = cy["exam"] in at_floor.get(cy["checkpoint"], ())
    for x in out.get("exams", []):
        test = meas.exams[x["exam"]].splits["test"]
        summary = summaries.get(x["exam"]) if summaries is not None else None
        x["detectable"] = (detectable(test.n, dev.get(x["exam"], []), memo=memo) if summaries is None
                           else detectable_from(test.n, summary or new_summary(), memo=memo))

