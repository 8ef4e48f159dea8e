"""Exact enumeration of paired pass/fail outcomes, with scipy's pmfs: coverage, false ``ok``, power.

Two evals of n tasks; each task is fixed (0 -> 1) with probability p_fixed, broken (1 -> 0) with
p_broken, unchanged otherwise, so (fixed, broken) is multinomial. Nothing here comes from the
module under test except the bounds it is asked to judge (``Bounds``), which are enumerated as
the implemented code computes them (vectorised with ``numpy.where``). Shared by the tests in
tests/stats and by bench/interval_coverage.py.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from scipy.stats import binom

#: (fixed, broken, n) -> (lower, upper), numpy arrays in, numpy arrays out.
Bounds = Callable[[Any, Any, int], tuple[Any, Any]]


def fine_cells(step: float = 0.01, edge_step: float = 0.001, edge_to: float = 0.1) -> list[tuple[float, float]]:
    """The issue's fine grid: (p_fixed, p_broken) in steps of ``step`` over the whole simplex
    (p_fixed + p_broken <= 1), plus the one-directional edges (p, 0) and (0, p) for p in steps
    of ``edge_step`` up to ``edge_to`` (only fixes, or only breaks, at low discordance)."""
    k = round(1 / step)
    cells = {(round(i * step, 6), round(j * step, 6)) for i in range(k + 1) for j in range(k + 1 - i)}
    e = round(edge_to / edge_step)
    for i in range(1, e + 1):
        p = round(i * edge_step, 6)
        cells |= {(p, 0.0), (0.0, p)}
    return sorted(cells)


def outcome_grid(n: int, bounds: Bounds) -> tuple[np.ndarray, np.ndarray]:
    """The bounds for every (fixed, broken) with fixed + broken <= n, as (n+1, n+1) arrays
    (entries with fixed + broken > n are NaN)."""
    f, b = np.meshgrid(np.arange(n + 1), np.arange(n + 1), indexing="ij")
    valid = f + b <= n
    lower, upper = bounds(np.where(valid, f, 0), np.where(valid, b, 0), n)
    return np.where(valid, lower, np.nan), np.where(valid, upper, np.nan)


def coverage(n: int, lower: np.ndarray, upper: np.ndarray,
             cells: list[tuple[float, float]]) -> dict[tuple[float, float], float]:
    """P(lower <= p_fixed - p_broken <= upper) for each cell, exactly (cells grouped by p_fixed,
    each group at once)."""
    f = np.arange(n + 1)
    by_pf: dict[float, list[float]] = {}
    for pf, p_broken in cells:
        by_pf.setdefault(pf, []).append(p_broken)
    out: dict[tuple[float, float], float] = {}
    lo = np.nan_to_num(lower, nan=np.inf)
    hi = np.nan_to_num(upper, nan=-np.inf)
    for pf, pbs in by_pf.items():
        pb = np.array(pbs)
        a = binom.pmf(f, n, pf)
        q = pb / (1 - pf) if pf < 1 else np.zeros_like(pb)
        keep = a > 1e-16
        fk = f[keep]
        # broken | fixed ~ Binomial(n - fixed, p_broken / (1 - p_fixed))
        bmat = binom.pmf(f[None, None, :], (n - fk)[None, :, None], np.minimum(q, 1.0)[:, None, None])
        prob = a[keep][None, :, None] * bmat
        theta = (pf - pb)[:, None, None]
        inside = (lo[keep][None] <= theta + 1e-12) & (theta - 1e-12 <= hi[keep][None])
        cov = np.sum(prob * inside, axis=(1, 2))
        for x, c in zip(pbs, cov, strict=True):
            out[pf, x] = float(c)
    return out


def false_ok(n: int, lower: np.ndarray, discordance: np.ndarray) -> np.ndarray:
    """P(lower > 0) at zero true difference (p_fixed = p_broken = p / 2) for each discordance
    p: D ~ Binomial(n, p) discordant tasks, fixed | D ~ Binomial(D, 1/2)."""
    d = np.arange(n + 1)
    per_d = np.zeros(n + 1)
    for k in range(n + 1):
        f = np.arange(k + 1)
        per_d[k] = np.sum(binom.pmf(f, k, 0.5) * (lower[f, k - f] > 0))
    return binom.pmf(d[None, :], n, np.asarray(discordance)[:, None]) @ per_d


def ok_rate(n: int, lower: np.ndarray, p_fixed: float, p_broken: float) -> float:
    """P(lower > 0) when tasks are fixed with p_fixed and broken with p_broken: the power."""
    f = np.arange(n + 1)
    a = binom.pmf(f, n, p_fixed)
    bmat = binom.pmf(f[None, :], (n - f)[:, None], p_broken / (1 - p_fixed))
    return float(np.sum(a[:, None] * bmat * np.nan_to_num(lower > 0)))


def discordance_grid(n: int) -> np.ndarray:
    """Every discordance in steps of 0.001, plus 2,001 points p = sin^2(theta) (dense near 0
    and 1, where the false-``ok`` rate peaks at large n)."""
    theta = np.linspace(0, np.pi / 2, 2001)
    return np.unique(np.concatenate([np.linspace(0, 1, 1001), np.sin(theta) ** 2]))


def coverage_truncated(n: int, lower: np.ndarray, upper: np.ndarray, cells: list[tuple[float, float]],
                       tail: float = 1e-13) -> tuple[dict[tuple[float, float], float], float]:
    """:func:`coverage` cell by cell over the outcomes within ``tail`` of each binomial's ends
    (fixed ~ Binomial(n, p_fixed), broken ~ Binomial(n, p_broken) marginally): for large n.
    Returns the coverages and the smallest probability mass enumerated."""
    out: dict[tuple[float, float], float] = {}
    least = 1.0
    for pf, pb in cells:
        f = _support(n, pf, tail)
        b = _support(n, pb, tail)
        ff, bb = np.meshgrid(f, b, indexing="ij")
        valid = ff + bb <= n
        q = pb / (1 - pf) if pf < 1 else 0.0
        prob = binom.pmf(ff, n, pf) * np.where(valid, binom.pmf(bb, np.maximum(n - ff, 0), min(q, 1.0)), 0.0)
        theta = pf - pb
        lo = lower[ff, np.where(valid, bb, 0)]
        hi = upper[ff, np.where(valid, bb, 0)]
        out[pf, pb] = float(np.sum(prob * ((lo <= theta + 1e-12) & (theta - 1e-12 <= hi))))
        least = min(least, float(prob.sum()))
    return out, least


def _support(n: int, p: float, tail: float) -> np.ndarray:
    lo = int(binom.ppf(tail, n, p))
    hi = int(binom.isf(tail, n, p)) + 1
    return np.arange(max(lo, 0), min(hi, n) + 1)
