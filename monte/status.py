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


def build(meas: Measurement, rows: Sequence[RunRow], nominations: dict[str, str]) -> dict[str, Any]:
    """The status document. One pass over the rows gathers what every section needs (each
    row's target, admissibility, the first dev eval per checkpoint), so the cost per row is a
    few dict operations: this is the hot loop of ``monte status`` at 10,000 runs and more."""
    cks = checkpoints(rows)
    paths = descent_paths(cks)
    dev_exams = sorted(e for e, x in meas.exams.items() if "dev" in x.splits)
    deltas = []
    cohorts: dict[str, dict[str, Any]] = {}
    dev_scores: dict[str, dict[str, float | None]] = {}
    first: dict[tuple[str, int, str], RunRow] = {}
    out_rows = []
    for r in rows:
        t = r.plan.get("target", {})
        kind = t.get("kind")
        target = "base" if kind == "base" else f"{t.get('run')}@{t.get('step')}"
        admissible = r.kind == "eval" and r.status == "succeeded" and not r.smoke
        out_rows.append(_row(r, target))
        if admissible and r.delta:
            deltas.append({"run": r.run, "cohort": r.cohort, "exam": r.exam, "split": r.split,
                           "target": target, "role": r.role, **r.delta})
        c = cohorts.get(r.cohort or "-")
        if c is None:
            c = cohorts[r.cohort or "-"] = {"cohort": r.cohort, "model": r.plan.get("base_model", ""),
                                            "test_touches": {}, "baselines": {}}
        if r.kind == "eval" and r.split == "test" and not r.smoke:
            c["test_touches"][r.exam] = c["test_touches"].get(r.exam, 0) + 1
        if admissible and kind == "base" and f"{r.exam}/{r.split}" not in c["baselines"]:
            c["baselines"][f"{r.exam}/{r.split}"] = {"run": r.run, "score": r.score, "n": r.n}
        if admissible and r.split == "dev" and kind == "checkpoint":
            dev_scores.setdefault(target, {}).setdefault(r.exam or "", r.score)
            key = (str(t.get("run")), int(t.get("step", -1)), r.exam or "")
            if key not in first or r.seq < first[key].seq:
                first[key] = r
    for cohort, ck in nominations.items():
        cohorts.setdefault(cohort, {"cohort": cohort})["nomination"] = ck
    return {
        "experiment": meas.experiment,
        "environment": meas.environment,
        "rows": out_rows,
        "cohorts": list(cohorts.values()),
        "deltas": deltas,
        "lineage": _lineage_lines(paths),
        "legend": LEGEND if any(h.boundary for p in paths for h in p) else None,
        "cycles": cycles(rows, cks, paths, dev_exams, first=first),
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


def _target(r: RunRow) -> str:
    t = r.plan.get("target", {})
    return "base" if t.get("kind") == "base" else f"{t.get('run')}@{t.get('step')}"


def _row(r: RunRow, target: str) -> dict[str, Any]:
    what = f"{r.exam}/{r.split}" if r.kind == "eval" else f"{r.plan.get('recipe', {}).get('algorithm', '?')}:{r.plan.get('source', '?')}"
    return {"run": r.run, "kind": r.kind, "status": r.status, "what": what,
            "target": target if r.kind == "eval" else ("smoke" if r.smoke else f"-> {r.step}"),
            "step": r.step,
            "score": None if r.smoke else r.score, "n": r.n, "smoke": r.smoke, "role": r.role,
            "cohort": r.cohort, "created_at": r.created_at}


def experiment_status(ws: Workspace, experiment: str | None) -> dict[str, Any]:
    """``monte status``: the experiment's state from its ledger tip (one tree), and for each
    exam, how often its test content has been read in this repository across all cohorts."""
    from monte.ledger.experiment import Ledger
    from monte.ledger.seal import Seal
    from monte.runs import experiment_name, read_rows

    exp = experiment_name(ws, experiment)
    ledger = Ledger(ws.store, exp)
    snap = ledger.snapshot()
    meas = ledger.measurement(snap)
    collecting = gc.isenabled()
    gc.disable()  # ~10 objects a row, none of them garbage: the collector's scans would be most of the time
    try:
        rows = read_rows(ledger, snap)
        noms = {}
        for cohort in snap.listdir("cohorts"):
            raw = snap.read(f"cohorts/{cohort}/nomination.json")
            if raw:
                noms[cohort] = json.loads(raw)["checkpoint"]
        out = build(meas, rows, noms)
        seal = Seal(ws.store, hash_legacy=False)
        seal.know(exp, rows)
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
