"""Intervals on the mean difference with Student's t: the plain paired t-interval and Miller's
(2024) clustered one (the clusters, not the tasks, are the independent units), and the t quantile
they share (scipy where it is installed, :mod:`monte.stats.tdist` on the light install)."""

from __future__ import annotations

import math
from collections.abc import Hashable, Sequence

from monte.stats.inputs import clip


def t975(df: float) -> float:
    """The 0.975 quantile of Student's t with ``df`` (possibly fractional) degrees of freedom."""
    # scipy is heavy; import it only where a t quantile is actually needed. The light install
    # has none (monte/extras.py): the same quantile in pure Python (agrees to ~1e-12).
    try:
        from scipy.stats import t
    except ModuleNotFoundError:
        from monte.stats.tdist import t975 as pure_t975

        return pure_t975(df)

    return float(t.ppf(0.975, df))


def paired_t_interval(d: Sequence[float]) -> tuple[float, float]:
    """``mean(d) ± t_{0.975, n-1} · sd(d) / sqrt(n)`` (no longer printed; kept for comparison)."""
    n = len(d)
    if n < 2:
        raise ValueError("the t-interval needs at least 2 differences")
    mean = math.fsum(d) / n
    ss = math.fsum((x - mean) ** 2 for x in d)
    se = math.sqrt(ss / (n - 1) / n)
    half = t975(n - 1) * se
    return clip(mean - half, mean + half)


def clustered_t_interval(d: Sequence[float], clusters: Sequence[Hashable]) -> tuple[float, float]:
    """The t-interval with Miller's (2024) clustered standard error of the mean difference.

    ``SE^2 = s^2 / n + (1 / n^2) · Σ_c Σ_{i≠j in c} e_i e_j`` with ``e_i = d_i - mean(d)`` and
    ``s^2`` the sample variance, i.e. ``s^2 / n + (Σ_c E_c^2 - Σ_i e_i^2) / n^2`` where ``E_c`` is
    cluster c's sum of ``e_i``. The t quantile has C - 1 degrees of freedom (C clusters): the
    clusters, not the tasks, are the independent units. With every task its own cluster this is
    exactly :func:`paired_t_interval`.
    """
    n = len(d)
    if len(clusters) != n:
        raise ValueError(f"{len(clusters)} cluster keys for {n} differences")
    sums: dict[Hashable, list[float]] = {}
    mean = math.fsum(d) / n if n else 0.0
    for x, key in zip(d, clusters, strict=True):
        sums.setdefault(key, []).append(x - mean)
    c = len(sums)
    if c < 2:
        raise ValueError("the clustered t-interval needs at least 2 clusters")
    ss = math.fsum(e * e for e in (x - mean for x in d))
    between = math.fsum(math.fsum(es) ** 2 for es in sums.values())
    # Σe² / (n(n-1)) + (between - Σe²) / n² = Σe² / (n²(n-1)) + between / n²: never negative.
    var = ss / (n * n * (n - 1)) + between / (n * n)
    half = t975(c - 1) * math.sqrt(var)
    return clip(mean - half, mean + half)

