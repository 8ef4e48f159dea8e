"""What ``monte status`` shows, computed from the rows at the ledger tip (pure; no torch, no walk).

- delta lines: every admissible eval that has a paired (or unpaired) delta against its cohort's
  baseline, with the 95% interval;
- ``lineage:`` lines, one per descent path, in the seeds' notation;
- ``cycles:``: the first admissible dev eval at a new highest step along each path, judged
  ``ok`` / ``STRIKE`` (paired) or unjudged (unpaired);
- the checkpoint list.
"""

from __future__ import annotations

import gc
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from monte.ledger.records import Measurement, RunRow
from monte.ledger.rules import Checkpoint, checkpoints, is_admissible
from monte.manifest import Floor
from monte.workspace import Workspace

LEGEND = "(=move=> is a stage boundary: weights-only warm start, ADR 0002)"


@dataclass(frozen=True)
class Hop:
    run: str
    label: str
    start: int  # absolute step the hop started from
    end: int  # absolute step of the hop's last checkpoint on this path
    boundary: bool
    parent: tuple[str, int] | None


def _hops(cks: Sequence[Checkpoint]) -> dict[str, Hop]:
    by_run: dict[str, list[Checkpoint]] = {}
    for c in cks:
        by_run.setdefault(c.run, []).append(c)
    return {run: Hop(run, cs[0].label, cs[0].start_step, max(c.step for c in cs), cs[0].boundary, cs[0].parent)
            for run, cs in by_run.items()}


def descent_paths(cks: Sequence[Checkpoint]) -> list[list[Hop]]:
    """One path per leaf run (no run continues from its last checkpoint), root first."""
    hops = _hops(cks)
    continued = {h.parent for h in hops.values() if h.parent}
    leaves = [h for h in hops.values() if (h.run, h.end) not in continued]
    order = {c.run: c.seq for c in cks}
    paths = []
    for leaf in sorted(leaves, key=lambda h: order[h.run]):
        path = [leaf]
        seen = {leaf.run}
        while path[0].parent and path[0].parent[0] in hops and path[0].parent[0] not in seen:
            parent = hops[path[0].parent[0]]
            seen.add(parent.run)
            path.insert(0, parent)
        paths.append(path)
    return paths


def render_path(path: Sequence[Hop]) -> str:
    first = path[0]
    if first.parent is None:
        text, prev_end = "base", 0
    else:  # the parent row is not readable here: the path is truncated
        text, prev_end = f"{first.parent[0]}(unread)", first.start
    for hop in path:
        if hop.start != prev_end:
            text += f" from {hop.start}"
        if hop.boundary:
            text += f" ={hop.label}(+{hop.end - hop.start})=> {hop.end}"
        else:
            text += f" -{hop.label}-> {hop.end}"
        prev_end = hop.end
    return text


def by_run(cks: Sequence[Checkpoint]) -> dict[str, list[Checkpoint]]:
    """Checkpoints grouped by run, each run's in step order."""
    out: dict[str, list[Checkpoint]] = {}
    for c in sorted(cks, key=lambda c: c.step):
        out.setdefault(c.run, []).append(c)
    return out


def path_checkpoints(path: Sequence[Hop], runs: dict[str, list[Checkpoint]]) -> list[Checkpoint]:
    """The checkpoints a path passes through, in order (a hop's own, up to where the next hop forks)."""
    out: list[Checkpoint] = []
    for i, hop in enumerate(path):
        limit = path[i + 1].start if i + 1 < len(path) else hop.end
        out += [c for c in runs.get(hop.run, []) if c.step <= limit]
    return out


def first_dev_evals(rows: Sequence[RunRow]) -> dict[tuple[str, int, str], RunRow]:
    """The first admissible dev eval of each (checkpoint run, step, exam), in one pass."""
    first: dict[tuple[str, int, str], RunRow] = {}
    for r in rows:
        t = r.plan.get("target", {})
        if not (is_admissible(r) and r.split == "dev" and t.get("kind") == "checkpoint"):
            continue
        key = (str(t.get("run")), int(t.get("step", -1)), r.exam or "")
        if key not in first or r.seq < first[key].seq:
            first[key] = r
    return first


def cycles(rows: Sequence[RunRow], cks: Sequence[Checkpoint], paths: Sequence[Sequence[Hop]],
           dev_exams: Sequence[str], *, first: dict[tuple[str, int, str], RunRow] | None = None,
           ) -> list[dict[str, Any]]:
    """A Cycle: the first admissible dev eval at a new highest step along one path. Keyed on the
    path, so two branches off one checkpoint each get their own; a shared prefix counts once.
    Linear in rows plus path lengths (``first``: :func:`first_dev_evals`, when already made)."""
    first = first_dev_evals(rows) if first is None else first
    runs = by_run(cks)
    out: dict[tuple[str, str], dict[str, Any]] = {}
    for path in paths:
        on_path = path_checkpoints(path, runs)
        for exam in dev_exams:
            highest = 0
            for ck in on_path:
                ev = first.get((ck.run, ck.step, exam))
                if ev is None or ck.step <= highest:
                    continue
                highest = ck.step
                d = ev.delta or {}
                verdict = d.get("verdict") if d.get("paired") else None
                out.setdefault((ck.ref, exam), {
                    "checkpoint": ck.ref, "exam": exam, "step": ck.step, "eval": ev.run,
                    "verdict": verdict or "unjudged", "delta": d.get("delta"),
                    "lower": d.get("lower"), "upper": d.get("upper"), "seq": ev.seq})
    return sorted(out.values(), key=lambda c: c["seq"])


def build(meas: Measurement, rows: Sequence[Mapping[str, Any]], nominations: dict[str, str]) -> dict[str, Any]:
    """The status document, from the rows as the fan-out indexes hold them (dicts, in record
    order; :meth:`monte.ledger.experiment.Ledger.row_dicts`). One pass over the rows gathers
    what every section needs (each row's target, admissibility, the first dev eval per
    checkpoint), a few dict operations a row: this is the hot loop of ``monte status`` at
    10,000 runs and more, so no row becomes a model object here except the training rows (for
    the lineage) and the evals a cycle names."""
    from monte.ledger.records import row_from_index

    dev_exams = sorted(e for e, x in meas.exams.items() if "dev" in x.splits)
    deltas = []
    cohorts: dict[str, dict[str, Any]] = {}
    dev_scores: dict[str, dict[str, float | None]] = {}
    first: dict[tuple[str, int, str], Mapping[str, Any]] = {}
    trains = []
    out_rows = []
    for r in rows:
        plan = r["plan"]
        kind = r["kind"]
        t = plan.get("target") or {}
        tkind = t.get("kind")
        target = "base" if tkind == "base" else f"{t.get('run')}@{t.get('step')}"
        smoke = r["smoke"]
        if kind == "eval":
            what = f"{r['exam']}/{r['split']}"
            shown = target
        else:
            trains.append(r)
            what = f"{(plan.get('recipe') or {}).get('algorithm', '?')}:{plan.get('source', '?')}"
            shown = "smoke" if smoke else f"-> {r['step']}"
        out_rows.append({"run": r["run"], "kind": kind, "status": r["status"], "what": what, "target": shown,
                         "step": r["step"], "score": None if smoke else r["score"], "n": r["n"], "smoke": smoke,
                         "role": r["role"], "cohort": r["cohort"], "created_at": r["created_at"]})
        cohort = r["cohort"]
        c = cohorts.get(cohort or "-")
        if c is None:
            c = cohorts[cohort or "-"] = {"cohort": cohort, "model": plan.get("base_model", ""),
                                          "test_touches": {}, "baselines": {}}
        if kind != "eval" or smoke:
            continue
        split = r["split"]
        if split == "test":
            c["test_touches"][r["exam"]] = c["test_touches"].get(r["exam"], 0) + 1
        if r["status"] != "succeeded":
            continue
        delta = r["delta"]
        if delta:
            deltas.append({"run": r["run"], "cohort": cohort, "exam": r["exam"], "split": split,
                           "target": target, "role": r["role"], **delta})
        if tkind == "base":
            key = f"{r['exam']}/{split}"
            if key not in c["baselines"]:
                c["baselines"][key] = {"run": r["run"], "score": r["score"], "n": r["n"]}
        elif split == "dev" and tkind == "checkpoint":
            dev_scores.setdefault(target, {}).setdefault(r["exam"] or "", r["score"])
            fkey = (str(t.get("run")), int(t.get("step", -1)), r["exam"] or "")
            if fkey not in first or r["seq"] < first[fkey]["seq"]:
                first[fkey] = r
    for cohort, ck in nominations.items():
        cohorts.setdefault(cohort, {"cohort": cohort})["nomination"] = ck
    train_rows = [row_from_index(dict(r)) for r in trains]
    cks = checkpoints(train_rows)
    paths = descent_paths(cks)
    firsts = {k: row_from_index(dict(v)) for k, v in first.items()}
    return {
        "experiment": meas.experiment,
        "environment": meas.environment,
        "rows": out_rows,
        "cohorts": list(cohorts.values()),
        "deltas": deltas,
        "lineage": _lineage_lines(paths),
        "legend": LEGEND if any(h.boundary for p in paths for h in p) else None,
        "cycles": cycles(train_rows, cks, paths, dev_exams, first=firsts),
        "checkpoints": [{"checkpoint": c.ref, "cohort": c.cohort, "move": c.label, "recipe": c.recipe,
                         "parent": f"{c.parent[0]}@{c.parent[1]}" if c.parent else "base",
                         "boundary": c.boundary, "dev": dev_scores.get(c.ref, {})} for c in cks],
    }


def _lineage_lines(paths: Sequence[list[Hop]]) -> list[str]:
    """One line per descent path; two paths that read the same (two continuations of one
    checkpoint by the same move) are told apart by their leaf run."""
    lines = [render_path(p) for p in paths]
    return [f"{line}  (run {p[-1].run})" if lines.count(line) > 1 and p else line
            for line, p in zip(lines, paths, strict=True)]


def experiment_status(ws: Workspace, experiment: str | None) -> dict[str, Any]:
    """``monte status``: the experiment's state from its ledger tip (one tree), and for each
    exam, how often its test content has been read in this repository across all cohorts."""
    from monte.ledger.experiment import Ledger
    from monte.ledger.records import row_from_index
    from monte.ledger.seal import Seal, is_test_read_dict
    from monte.runs import experiment_name, read_row_dicts

    exp = experiment_name(ws, experiment)
    ledger = Ledger(ws.store, exp)
    snap = ledger.snapshot()
    meas = ledger.measurement(snap)
    collecting = gc.isenabled()
    gc.disable()  # ~10 objects a row, none of them garbage: the collector's scans would be most of the time
    try:
        rows = read_row_dicts(ledger, snap)
        noms = {}
        for cohort in snap.listdir("cohorts"):
            raw = snap.read(f"cohorts/{cohort}/nomination.json")
            if raw:
                noms[cohort] = json.loads(raw)["checkpoint"]
        out = build(meas, rows, noms)
        seal = Seal(ws.store, hash_legacy=False)
        seal.know(exp, [row_from_index(dict(r)) for r in rows if is_test_read_dict(r)])
        out["exams"] = [{"exam": exam, "split_sha256": x.splits["test"].sha256,
                         **_renamed(seal.disclosure(x.splits["test"].sha256))}
                        for exam, x in sorted(meas.exams.items()) if "test" in x.splits]
        from monte.envs.floor import exam_floors

        add_floors_and_reach(out, meas, exam_floors(ws, meas.environment))
    finally:
        if collecting:
            gc.enable()
    return out


def _renamed(d: dict[str, Any]) -> dict[str, Any]:
    return {"test_reads": d["reads"], "cohorts": d["cohorts"], "experiments": d["experiments"]}


def add_floors_and_reach(out: dict[str, Any], meas: Measurement,
                         floors: Mapping[str, Mapping[str, Floor]]) -> None:
    """Beside the scores (issue 18): each exam split's constant-answer floor (``floors``), what a
    test read of each exam can show (``exams[i]["detectable"]``, :func:`monte.stats.power.detectable`),
    and a flag on every checkpoint score at or below its floor (``at_floor`` on delta lines, the
    exams ``at_floor`` on checkpoints): beating a garbage base is not learning."""
    from monte.stats.power import detectable

    out["floors"] = {f"{exam}/{split}": f.model_dump() for exam, splits in sorted(floors.items())
                     for split, f in sorted(splits.items())}
    floor = {k: f["score"] for k, f in out["floors"].items()}
    scores = {r["run"]: r["score"] for r in out["rows"]}
    dev: dict[str, list[dict[str, Any]]] = {}
    for d in out["deltas"]:
        key = f"{d['exam']}/{d['split']}"
        score = scores.get(d["run"])
        d["floor"] = floor.get(key)
        d["at_floor"] = key in floor and score is not None and score <= floor[key]
        if d["split"] == "dev":
            dev.setdefault(d["exam"], []).append(d)
    for c in out["checkpoints"]:
        c["at_floor"] = sorted(e for e, s in c["dev"].items()
                               if s is not None and f"{e}/dev" in floor and s <= floor[f"{e}/dev"])
    for x in out.get("exams", []):
        test = meas.exams[x["exam"]].splits["test"]
        x["detectable"] = detectable(test.n, dev.get(x["exam"], []))
