"""The lineage a status shows: descent paths of the checkpoints, their ``lineage:`` lines in the
notation of docs/commands.md, and the cycles (the first admissible dev eval at a new highest step
along each path). Pure: from checkpoints and rows, no I/O."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NamedTuple

from monte.ledger.predicates import is_admissible
from monte.ledger.rules import Checkpoint

if TYPE_CHECKING:  # annotations only: a status reads no model object (pydantic costs ~50 ms to import)
    from monte.ledger.records import RunRow

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

class FirstEval(NamedTuple):
    """What a cycle reads of the first admissible dev eval of a checkpoint (a RunRow has these too)."""

    run: str
    seq: int
    delta: dict[str, Any] | None


def cycles(rows: Sequence[RunRow], cks: Sequence[Checkpoint], paths: Sequence[Sequence[Hop]],
           dev_exams: Sequence[str], *, first: Mapping[tuple[str, int, str], RunRow | FirstEval] | None = None,
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
                    "lower": d.get("lower"), "upper": d.get("upper"), "seq": ev.seq,
                    "parent": d.get("parent")})  # against its parent checkpoint (the search verdict, docs/statistics.md), when recorded
    return sorted(out.values(), key=lambda c: c["seq"])

def lineage_lines(paths: Sequence[list[Hop]]) -> list[str]:
    """One line per descent path. In a tree of several paths, each line ends with its leaf
    checkpoint (``(leaf RUN@STEP)``): paths that share a prefix, or read the same (two
    continuations of one checkpoint by the same move), are told apart by it."""
    lines = [render_path(p) for p in paths]
    if len(lines) < 2:
        return lines
    return [f"{line}  (leaf {p[-1].run}@{p[-1].end})" if p else line for line, p in zip(lines, paths, strict=True)]
