"""The search verdict (docs/statistics.md): the best of K dev evals judged as the best of K.

A driving agent evaluates K checkpoints of one cohort on one dev exam, each against the cohort's
baseline, and keeps the best. Each per-cycle verdict is exact for its own comparison (false
``ok`` at most :data:`~monte.stats.paired.ALPHA`), but the best of K no-op checkpoints says
``ok`` far more often, and its raw delta overstates (the winner's curse). The method (its
figures in docs/statistics.md, ``bench/search_verdict.py``):

- **the verdict**: the exact unconditional McNemar test of the per-cycle verdict, at level
  ``ALPHA / K`` (Bonferroni; for the best candidate, Holm's first step: the step-down test
  judges the most significant candidate at exactly this level). Bonferroni holds at every
  dependence between the candidates, so lineage-correlated checkpoints (one continued from
  another, sharing most of their per-item outcomes) need no model of the correlation. At
  ``K = 1`` it is the per-cycle verdict, bit for bit; the cutoff only rises as K grows, and the
  verdict is also required to be ``ok`` per cycle, so a search ``ok`` never sits beside a
  per-cycle ``STRIKE``;
- **the interval**: the per-cycle interval built at one-sided level ``ALPHA / K`` (Tango's score
  interval at the exact test's cutoff joined with Bonett-Price at ``z_{1 - ALPHA/K}``): with the
  Bonferroni argument, simultaneous for all K deltas, so it holds the chosen one's true delta
  whichever was chosen; its lower end is above 0 exactly when the test says ``ok``;
- **the estimate**: the Bonferroni *median bound*, the score bound at ``z_{1 - 0.5/K}``: with
  probability at least 1/2 every one of the K bounds lies below its true delta, so the chosen
  checkpoint's estimate overstates its true delta at most half the time, whichever was chosen
  (at K = 1, the raw delta itself). It is never above the raw delta.

Pass/fail deltas only (the counts ``fixed``/``broken``): a fractional, sampled (K samples per
item) or unpaired best gets no search verdict beyond K = 1, and says so. Pure functions; imports
nothing heavier than :mod:`math` (:mod:`statistics` for a quantile, once K > 1).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from monte.stats.inputs import check_counts, clip
from monte.stats.paired import (
    ALPHA,
    OK,
    STRIKE,
    binary_bounds,
    level_cutoff,
    mcnemar_rejects,
    normal_quantile,
    score_root,
)

__all__ = ["METHOD", "Candidate", "Search", "adjusted_estimate", "cutoff_memo", "judge", "judge_chosen", "recompute_memo",
           "search_bounds", "search_rejects"]

#: Delta.method-style name of the search verdict, stored in the status JSON.
METHOD = "bonferroni-exact-mcnemar"


def search_rejects(fixed: int, broken: int, n: int, k: int) -> bool:
    """The search verdict's test: the exact unconditional McNemar test at level ``ALPHA / k``."""
    check_counts(fixed, broken, n)
    return bool(mcnemar_rejects(fixed, broken, n, _level(k)))


def search_bounds(fixed: int, broken: int, n: int, k: int) -> tuple[float, float]:
    """The simultaneous interval of the best of ``k``: the per-cycle interval at one-sided level
    ``ALPHA / k``, clipped to [-1, 1]; at ``k = 1`` the per-cycle interval itself."""
    check_counts(fixed, broken, n)
    lower, upper = binary_bounds(fixed, broken, n, alpha=_level(k))
    return clip(float(lower), float(upper))


def adjusted_estimate(fixed: int, broken: int, n: int, k: int) -> float:
    """The selection-adjusted estimate of the best of ``k`` deltas: the Bonferroni median bound
    (Tango's score bound at ``z_{1 - 0.5 / k}``), never above the raw delta; at ``k = 1`` the
    raw delta ``(fixed - broken) / n``."""
    check_counts(fixed, broken, n)
    raw = (fixed - broken) / n
    if _k(k) == 1:
        return raw
    return max(-1.0, min(raw, float(score_root(fixed, broken, n, normal_quantile(1.0 - 0.5 / k)))))


@dataclass(frozen=True)
class Candidate:
    """One checkpoint's first dev delta against the cohort's baseline, as status holds it."""

    checkpoint: str
    delta: float
    lower: float
    upper: float
    n: int
    fixed: int | None
    broken: int | None
    verdict: str | None  # the per-cycle verdict: ok / STRIKE, None when unjudged (unpaired)
    step: int = 0

    @classmethod
    def of(cls, checkpoint: str, d: Mapping[str, Any], step: int = 0) -> Candidate:
        """From a delta line (``monte eval``'s record, status's ``deltas``)."""
        fixed, broken = d.get("fixed"), d.get("broken")
        one_sample = (d.get("samples") or 1) == 1  # K samples an item: the item is the unit, no counts
        return cls(checkpoint, float(d["delta"]), float(d["lower"]), float(d["upper"]), int(d["n"]),
                   int(fixed) if fixed is not None and broken is not None and one_sample else None,
                   int(broken) if fixed is not None and broken is not None and one_sample else None,
                   d.get("verdict") if d.get("paired") else None, step)


@dataclass(frozen=True)
class Search:
    """The search verdict of one cohort's dev exam: ``k`` checkpoints tried, the one judged
    (``chosen``: ``nominated`` or ``best``, the highest raw delta), its raw delta and per-cycle
    verdict, and beside them the search verdict, its simultaneous interval and the
    selection-adjusted estimate (``None`` where the chosen delta has no pass/fail counts and
    ``k > 1``: ``why`` says so)."""

    k: int
    checkpoint: str
    chosen: str
    delta: float
    verdict: str | None
    search_verdict: str | None
    level: float
    lower: float | None
    upper: float | None
    estimate: float | None
    method: str
    why: str | None = None

    def record(self) -> dict[str, Any]:
        """As the status JSON holds it."""
        return asdict(self)


def judge(candidates: Sequence[Candidate], nominated: str | None = None) -> Search | None:
    """The search verdict over ``candidates`` (distinct checkpoints, in the order they were
    evaluated): the nominated one when it is among them, otherwise the best raw delta (of a tie,
    the later step, then the later eval, as the claim's rule picks), judged as the best of ``K = len(candidates)``. None for no candidate."""
    if not candidates:
        return None
    pick = next((c for c in candidates if c.checkpoint == nominated), None) if nominated else None
    chosen = "nominated" if pick is not None else "best"
    if pick is None:
        # as the claim's rule picks (monte/ledger/rules.py): highest delta, then step, then the later eval
        pick = max(enumerate(candidates), key=lambda ic: (ic[1].delta, ic[1].step, ic[0]))[1]
    return judge_chosen(pick, len(candidates), chosen)


def judge_chosen(pick: Candidate, k: int, chosen: str) -> Search:
    """:func:`judge` once the candidate is chosen (``chosen``: how) among ``k`` tried."""
    level = _level(k)

    def made(search_verdict: str | None, lower: float | None, upper: float | None, estimate: float | None,
             why: str | None = None) -> Search:
        return Search(k, pick.checkpoint, chosen, pick.delta, pick.verdict, search_verdict, level, lower, upper,
                      estimate, METHOD, why)

    if pick.verdict is None:
        return made(None, None, None, None, "unjudged: the delta is unpaired")
    if k == 1:  # today's verdict, interval and delta, whatever kind of delta
        return made(pick.verdict, pick.lower, pick.upper, pick.delta)
    if pick.fixed is None or pick.broken is None:
        return made(None, None, None, None, "unjudged: the search verdict needs pass/fail scores, one sample an item")
    lower, upper = search_bounds(pick.fixed, pick.broken, pick.n, k)
    # the per-cycle verdict too: a clustered exam's recorded interval may be wider than the counts'
    ok = pick.verdict == OK and search_rejects(pick.fixed, pick.broken, pick.n, k)
    return made(OK if ok else STRIKE, lower if ok else min(lower, 0.0), upper,
                adjusted_estimate(pick.fixed, pick.broken, pick.n, k))


def cutoff_memo(n: int, k: int, memo: dict[Any, Any] | None) -> None:
    """Know the search test's cutoff for (n, k) through ``memo`` (a status's kept figures,
    :class:`monte.ledger.derived.Fold`): taken from it when there, added to it when not, so a
    status after an append does not calibrate it again (0.1 s at n = 200, K = 900)."""
    if memo is None or _k(k) == 1:
        return
    key = ("cutoff", n, _level(k))
    known = memo.get(key)
    cut = level_cutoff(n, _level(k), seed=known if isinstance(known, tuple) and len(known) == 2 else None)
    if known is None:
        memo[key] = cut


def recompute_memo(key: Any) -> Any:
    """What :func:`cutoff_memo` keeps under ``key``, computed again (for verify)."""
    _, n, alpha = key
    return level_cutoff(int(n), float(alpha), fresh=True)


def _k(k: int) -> int:
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise ValueError(f"K must be a positive int, got {k!r}")
    return k


def _level(k: int) -> float:
    """``ALPHA / k``, with ``k = 1`` exactly :data:`ALPHA` (the per-cycle verdict's table)."""
    return ALPHA if _k(k) == 1 else ALPHA / k
