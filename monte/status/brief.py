"""``monte status --brief`` (and the MCP ``status`` tool): one screen that leads with what the
driving agent decides on, folded from the status document (:func:`brief`). Pure: no I/O.

The schema (docs/agents.md keeps it in words):

- ``experiment``, ``environment``;
- ``best``: per dev exam, the best paired dev delta (``checkpoint``, ``delta``, ``lower``, ``upper``,
  ``verdict``, ``n``, ``fixed``, ``broken``), with ``floor`` and ``at_floor``, and every search field
  the delta carries (``search*``, ``k``: the verdict that stays honest over the K dev reads,
  where status derives one); null where no checkpoint has a paired dev delta yet;
- ``test``: per exam with a sealed split, ``reads`` spent in the newest cohort, ``left`` of its
  budget, and the ``claim`` (delta, interval, verdict) once made;
- ``last``: the newest run (``run``, ``kind``, ``what``, ``target``, ``status``, ``score``) and, for an
  eval with a delta, its ``delta`` and ``verdict``;
- ``runs``: how many rows, by kind and status; ``checkpoints``: how many; ``lineage``: how many paths.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from monte.ledger.predicates import is_sealed
from monte.ledger.rules import TEST_READS
from monte.result_type import Result

#: the delta fields the brief keeps (a search verdict's fields, ``search*`` / ``k``, ride along)
DELTA_KEYS = ("delta", "lower", "upper", "verdict", "n", "fixed", "broken", "at_floor", "floor")


def _delta(d: Mapping[str, Any]) -> dict[str, Any]:
    out = {k: d.get(k) for k in DELTA_KEYS}
    out.update({k: v for k, v in d.items() if k.startswith("search") or k in ("k", "K")})
    return out


@dataclass(frozen=True)
class TestBudget(Result):
    """One exam's sealed split in the newest cohort: test reads spent, left, and the claim (its
    checkpoint, delta, interval and verdict) once made."""

    reads: int
    left: int
    claim: dict[str, Any] | None


@dataclass(frozen=True)
class StatusBrief(Result):
    """``monte status --brief`` (the module's docstring is its schema). ``best`` per dev exam and
    ``last`` stay dicts: the search fields a delta carries ride along in them."""

    experiment: str | None
    environment: str | None
    best: dict[str, dict[str, Any]] | None
    test: dict[str, TestBudget]
    last: dict[str, Any] | None
    runs: dict[str, int]
    checkpoints: int
    lineage: int


def brief(doc: Mapping[str, Any]) -> StatusBrief:
    """The compact summary of one experiment's status document (``monte status --json``)."""
    rows = list(doc.get("rows") or [])
    deltas = [d for d in doc.get("deltas") or () if d.get("split") == "dev" and d.get("paired")
              and d.get("target") != "base"]
    best: dict[str, Any] = {}
    for d in deltas:  # the selection rule's order: delta, then the higher step, then the newer run
        exam = str(d["exam"])
        if exam not in best or (d["delta"], _step(d["target"])) > (best[exam]["delta"], _step(best[exam]["checkpoint"])):
            best[exam] = {"checkpoint": d["target"], "eval": d["run"], **_delta(d)}
    cohorts = list(doc.get("cohorts") or [])
    newest = cohorts[-1] if cohorts else {}
    claims = {str(d["exam"]): d for d in doc.get("deltas") or () if is_sealed(d.get("split"))}
    test: dict[str, TestBudget] = {}
    for key in (newest.get("baselines") or {}):
        exam, _, split = key.partition("/")
        if not is_sealed(split):
            continue
        reads = int((newest.get("test_touches") or {}).get(exam, 0))
        claim = claims.get(exam)
        test[exam] = TestBudget(reads=reads, left=max(0, TEST_READS - reads),
                                claim=({"checkpoint": claim["target"], **_delta(claim)} if claim else None))
    for exam, reads in (newest.get("test_touches") or {}).items():
        test.setdefault(str(exam), TestBudget(reads=int(reads), left=max(0, TEST_READS - int(reads)), claim=None))
    last = None
    if rows:
        r = rows[-1]
        last = {k: r.get(k) for k in ("run", "kind", "what", "target", "status", "score")}
        mine = [d for d in doc.get("deltas") or () if d.get("run") == r.get("run")]
        if mine:
            last.update({"delta": mine[0]["delta"], "verdict": mine[0].get("verdict")})
    counts: dict[str, int] = {}
    for r in rows:
        for key in (str(r.get("kind")), f"{r.get('kind')}:{r.get('status')}"):
            counts[key] = counts.get(key, 0) + 1
    return StatusBrief(experiment=doc.get("experiment"), environment=doc.get("environment"),
                       best=best or None, test=test, last=last,
                       runs={"total": len(rows), **dict(sorted(counts.items()))},
                       checkpoints=len(doc.get("checkpoints") or ()), lineage=len(doc.get("lineage") or ()))


def _step(target: str) -> int:
    _, _, step = str(target).rpartition("@")
    return int(step) if step.isdigit() else -1


def brief_text(b: StatusBrief) -> str:
    """The brief as a person reads it: a handful of short lines."""
    lines = [f"experiment {b.experiment} (environment {b.environment})"]
    for exam, d in (b.best or {}).items():
        lines.append(f"best dev {exam}: {d['checkpoint']} delta {d['delta']:+.4f} "
                     f"[{d['lower']:+.4f}, {d['upper']:+.4f}] {d['verdict'] or 'unjudged'}"
                     + (f" (floor {d['floor']:.4f}{', at floor' if d['at_floor'] else ''})"
                        if d.get("floor") is not None else ""))
    if not b.best:
        lines.append("best dev: none yet (no checkpoint has a paired dev delta)")
    for exam, t in b.test.items():
        claim = t.claim
        lines.append(f"test {exam}: {t.reads} of {TEST_READS} reads spent, {t.left} left"
                     + (f"; claim {claim['checkpoint']} delta {claim['delta']:+.4f} {claim['verdict'] or ''}".rstrip()
                        if claim else ""))
    if b.last:
        r = b.last
        lines.append(f"last: {r['run']} {r['kind']} {r['what']} {r['target']} {r['status']}"
                     + (f" score {r['score']:.4f}" if isinstance(r["score"], float) else "")
                     + (f" delta {r['delta']:+.4f} {r.get('verdict') or ''}".rstrip() if "delta" in r else ""))
    runs = b.runs
    lines.append(f"runs: {runs['total']} ({runs.get('train', 0)} train, {runs.get('eval', 0)} eval), "
                 f"{b.checkpoints} checkpoints, {b.lineage} lineage paths")
    return "\n".join(lines) + "\n"
