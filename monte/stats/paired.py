"""Paired statistics for two evals of the same frozen split: the delta, its 95% interval, the verdict.

For per-task scores ``a`` (baseline) and ``b`` (newer) aligned by task, ``d_i = b_i - a_i``. The
method, its figures and why it replaced monte's first (Bonett-Price-only) method are in
``docs/statistics.md``. In short:

- **pass/fail scores** (every score 0 or 1), with ``fixed`` = #(0 -> 1) and ``broken`` = #(1 -> 0):
  the verdict is the *exact unconditional* McNemar test of Suissa and Shuster (1991, Biometrics
  47:361-372): reject "no improvement" when ``z = (fixed - broken) / sqrt(fixed + broken)``
  exceeds a cutoff ``c_n >= 1.96`` chosen, for this n, as the smallest one whose false-``ok``
  rate at zero true difference is at most 2.5 % at *every* discordance (:func:`mcnemar_cutoff`).
  The printed interval is Tango's (1998, Stat Med 17:891-908) score interval inverted at that same
  ``c_n``, joined with Bonett-Price (2012) wherever the join does not move a bound across 0, so
  ``lower > 0`` *is* the exact test (:func:`binary_bounds`);
- **fractional scores**: the augmented sample (as the first method: two pseudo-tasks with ``d = +1`` and
  ``d = -1``) with Hall's (1992, JRSS B 54:221-228) skewness-removing transformation of the
  studentized mean (:func:`skew_corrected_bounds`); never zero-width;
- tasks that carry a cluster key: see :func:`paired_delta` for when the clustered standard error
  (Miller, "Adding Error Bars to Evals", 2024) widens the interval;
- no per-task files (unpaired): Agresti-Caffo for pass/fail, Welch for fractional scores
  (:mod:`monte.stats.unpaired`).

The verdict is ``ok`` when the interval's lower end is above zero, otherwise ``STRIKE``; an
unpaired delta is unjudged. :func:`format_bound` prints a bound so that a non-zero one never
reads as 0. Everything here is a pure function of its arguments. This module imports nothing
heavier than :mod:`math`; scipy (the t quantile) is imported inside the functions that need it,
so importing :mod:`monte.stats` stays cheap.

The interval formulas are written with plain arithmetic, ``** 0.5`` and an injectable ``where``
so that :func:`bonett_price_bounds`, :func:`binary_bounds` and :func:`skew_corrected_bounds` also
accept numpy arrays: the coverage benchmark and tests enumerate the implemented formula itself,
vectorised, instead of a copy of it.
"""

from __future__ import annotations

import functools
import math
import operator
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from typing import Any

from monte.stats.inputs import check_counts, clip, scores
from monte.stats.printing import format_bound, format_interval
from monte.stats.t_intervals import clustered_t_interval, paired_t_interval

__all__ = [
    "ALPHA",
    "Z95",
    "Delta",
    "augmented_interval",
    "binary_bounds",
    "binary_interval",
    "bonett_price_bounds",
    "bonett_price_interval",
    "level_cutoff",
    "normal_quantile",
    "clustered_t_interval",
    "format_bound",
    "format_interval",
    "binomial_window",
    "mcnemar_critical",
    "mcnemar_cutoff",
    "mcnemar_rejects",
    "paired_delta",
    "paired_t_interval",
    "score_bounds",
    "score_root",
    "skew_corrected_bounds",
    "skew_corrected_interval",
    "verdict",
]

#: The 0.975 quantile of the standard normal: the z of every two-sided 95% interval here.
Z95 = 1.959963984540054

#: The verdict's one-sided level: at most this false-``ok`` rate when nothing changed.
ALPHA = 0.025

# The strings stored in Delta.method. Callers print them; keep them stable.
EXACT_SCORE = "exact-mcnemar+score"
SKEW_CORRECTED = "augmented-hall"
CLUSTERED_SUFFIX = "+clustered"

OK = "ok"
STRIKE = "STRIKE"

Where = Callable[[Any, Any, Any], Any]


def _where(cond: Any, yes: Any, no: Any) -> Any:
    """``yes if cond else no``; the vectorised callers pass ``numpy.where`` instead."""
    return yes if cond else no


@dataclass(frozen=True)
class Delta:
    """A delta between two evals, ``score_b - score_a``, with its 95% interval.

    ``fixed`` and ``broken`` count the tasks that flipped (0 -> 1 and 1 -> 0) and are ``None``
    unless the delta is paired and every score is 0 or 1. ``n`` is the number of tasks scored
    (unpaired: the smaller of the two evals' task counts). ``method`` names the interval.
    """

    delta: float
    lower: float
    upper: float
    n: int
    paired: bool
    fixed: int | None
    broken: int | None
    method: str
    score_a: float
    score_b: float

    @property
    def verdict(self) -> str:
        """``"ok"`` if the interval's lower end is above 0, else ``"STRIKE"``.

        Meaningful only for a paired delta; :func:`verdict` returns ``None`` for unpaired ones.
        """
        return OK if self.lower > 0 else STRIKE

    @property
    def significant_regression(self) -> bool:
        """The whole interval is below 0 (this is a strike too)."""
        return self.upper < 0


def verdict(d: Delta) -> str | None:
    """``"ok"`` / ``"STRIKE"`` for a paired delta; ``None`` (unjudged) for an unpaired one."""
    return d.verdict if d.paired else None


# --- the exact unconditional McNemar test ------------------------------------------------------

#: A cutoff is the boundary point ``(k0, d0)``: reject when ``k = fixed - broken > 0`` and
#: ``k^2 d0 > k0^2 (fixed + broken)``, i.e. ``z > k0 / sqrt(d0)``, in exact integers.
Cutoff = tuple[int, int]
_NEVER: Cutoff = (1, 0)  # k^2 * 0 > D never holds: rejects nothing
#: Cutoffs are searched in [1.96, 2.5] first (every n >= 10 measured needs <= 2.14), then up to 3.
_Z_RANGES = (2.5, 3.0)
#: Nuisance grid: p = sin^2(theta), theta uniform, 25 sqrt(n) steps, so that a step is < 0.13
#: standard deviations of the discordance everywhere (bench/interval_coverage.py checks each
#: cutoff on a grid of 40,001 points; 10 sqrt(n) steps already gave the same cutoffs).
_GRID_PER_ROOT_N = 25
_PMF_FLOOR = 1e-14  # relative; the mass left out is added to the size as if every task flipped


def mcnemar_rejects(fixed: Any, broken: Any, n: int, alpha: float = ALPHA) -> Any:
    """The exact unconditional test at level ``alpha`` (:data:`ALPHA`: the verdict's) says
    "improved": ``z > c_n``.

    ``z = (fixed - broken) / sqrt(fixed + broken)`` is McNemar's statistic; the comparison is
    done in exact integers against the cutoff's boundary point. Ints or numpy int arrays.
    """
    k0, d0 = _cutoff(n) if alpha == ALPHA else level_cutoff(n, alpha)
    k = fixed - broken
    return (k > 0) & (k * k * d0 > k0 * k0 * (fixed + broken))


def mcnemar_cutoff(n: int, alpha: float = ALPHA) -> float:
    """``c_n``: the smallest cutoff ``>= 1.96`` for McNemar's z whose size is at most 2.5 %.

    Suissa and Shuster (1991): under "no difference" (p_fixed = p_broken = p / 2) the number of
    discordant tasks D is Binomial(n, p) and, given D, fixed is Binomial(D, 1/2); the size of
    "reject when z > c" is ``sup_p sum_D Binom(D; n, p) P(z > c | D)``. Among the values z takes
    (and 1.96 itself), ``c_n`` is the smallest whose size is <= :data:`ALPHA` at every p of the
    nuisance grid. Conditional sizes are exact (integer binomial sums); the grid is
    ``p = sin^2(theta)`` with ``25 sqrt(n)`` steps in theta, and the probability mass a window
    leaves out counts as a rejection. ``inf`` when no cutoff up to 3 has that size (no n >= 10
    measured). Computed once per n and cached (0.03 s at n = 200, 0.25 s at n = 1,000).

    ``alpha`` below :data:`ALPHA` (the search verdict's ``ALPHA / K``, :mod:`monte.stats.search`):
    the same calibration at that level, searched from the normal quantile ``z_{1 - alpha}`` up.
    """
    k0, d0 = _cutoff(n) if alpha == ALPHA else level_cutoff(n, alpha)
    return math.inf if d0 == 0 else k0 / math.sqrt(d0)


@functools.lru_cache(maxsize=512)
def _cutoff(n: int) -> Cutoff:
    if isinstance(n, bool) or operator.index(n) < 1:
        raise ValueError(f"n must be a positive int, got {n!r}")
    n = operator.index(n)
    from monte.stats._cutoffs import CUTOFFS  # _computed_cutoff's own output for n <= 1,024

    return CUTOFFS[n - 1] if n <= len(CUTOFFS) else _computed_cutoff(n)


def normal_quantile(p: float) -> float:
    """The standard normal's ``p`` quantile (:mod:`statistics`, imported here: ~3 ms that a
    status at K = 1 skips)."""
    from statistics import NormalDist

    return NormalDist().inv_cdf(p)


#: level_cutoff's, by (n, alpha): computed here, or seeded from a kept memo (monte.stats.search.cutoff_memo)
_LEVELS: dict[tuple[int, float], Cutoff] = {}


def level_cutoff(n: int, alpha: float, *, fresh: bool = False, seed: Cutoff | None = None) -> Cutoff:
    """The boundary point of the exact test at level ``alpha`` (``0 < alpha <= ALPHA``): the
    smallest cutoff ``>= z_{1 - alpha}`` whose size is at most ``alpha`` at every discordance of
    the nuisance grid (:func:`_computed_cutoff`); :data:`ALPHA` reads the table, as the verdict does.
    The cutoff only rises as ``alpha`` falls (a larger cutoff rejects a subset at every
    discordance), so a test at ``alpha < ALPHA`` never says "improved" where the verdict does not.
    Computed once per (n, alpha) in a process (0.01 s at n = 200 and K = 200, 0.1 s at K = 900);
    ``seed``: a value kept from an earlier computation (a status's memo) to use instead;
    ``fresh``: compute it again, whatever is known (verify)."""
    if not 0.0 < alpha <= ALPHA:
        raise ValueError(f"alpha must be in (0, {ALPHA}], got {alpha!r}")
    if alpha == ALPHA and not fresh:
        return _cutoff(n)
    if isinstance(n, bool) or operator.index(n) < 1:
        raise ValueError(f"n must be a positive int, got {n!r}")
    n = operator.index(n)
    if fresh:
        return _computed_cutoff(n, alpha)
    if seed is not None:
        _LEVELS.setdefault((n, alpha), (int(seed[0]), int(seed[1])))
    cut = _LEVELS.get((n, alpha))
    if cut is None:
        cut = _LEVELS[n, alpha] = _computed_cutoff(n, alpha)
    return cut


def _computed_cutoff(n: int, alpha: float = ALPHA) -> Cutoff:
    """The calibration itself (what ``monte.stats._cutoffs`` holds for n <= 1,024 at :data:`ALPHA`)."""
    grid = _null_grid(n)
    z_lo = Z95 if alpha == ALPHA else normal_quantile(1.0 - alpha)
    for z_max in _Z_RANGES:
        candidates = _candidates(n, z_max + z_lo - Z95, z_lo)
        lo, hi = 0, len(candidates)  # candidates[len] stands for "none feasible up to z_max"
        while lo < hi:
            mid = (lo + hi) // 2
            if _size(n, candidates[mid], grid, alpha) <= alpha:
                hi = mid
            else:
                lo = mid + 1
        if lo < len(candidates):
            return candidates[lo]
    return _NEVER


def cutoff_table_source(n_max: int) -> str:
    """The source of ``monte/stats/_cutoffs.py``: :func:`_computed_cutoff` for n = 1 .. n_max."""
    import inspect

    from monte.stats import _cutoffs

    head = inspect.getsource(_cutoffs).split("CUTOFFS:", 1)[0]
    items = [f"({k}, {d}), " for k, d in (_computed_cutoff(n) for n in range(1, n_max + 1))]
    lines, line = [], "    "
    for item in items:
        if len(line) + len(item) > 110:
            lines.append(line.rstrip())
            line = "    "
        line += item
    lines.append(line.rstrip())
    return head + "CUTOFFS: tuple[tuple[int, int], ...] = (\n" + "\n".join(lines) + "\n)\n"


def _candidates(n: int, z_max: float, z_lo: float = Z95) -> list[Cutoff]:
    """Every boundary point whose z lies in (z_lo, z_max], plus the largest z <= z_lo (which
    cuts like z_lo itself), in increasing order of z, equal values once (z_lo: 1.96)."""
    below: Cutoff | None = None
    pairs: list[tuple[float, int, int]] = []
    for d in range(1, n + 1):
        root = math.sqrt(d)
        k = math.floor(z_lo * root)
        if (k - d) % 2:
            k -= 1
        if k >= 1 and (below is None or k * k * below[1] > below[0] ** 2 * d):
            below = (k, d)
        k += 2
        while k <= d and k <= z_max * root:
            pairs.append((k / root, k, d))
            k += 2
    pairs.sort()
    out: list[Cutoff] = [below] if below is not None else []
    for _, k, d in pairs:
        if not out or k * k * out[-1][1] != out[-1][0] ** 2 * d:
            out.append((k, d))
    return out


def _conditional_sizes(n: int, cut: Cutoff) -> list[float]:
    """``P(reject | D)`` for D = 0 .. n: Binomial(D, 1/2) tails, summed in exact integers.

    Keeps ``tail = sum_{j >= f} C(D, j)`` and ``c = C(D, f - 1)`` as D grows by one
    (``tail <- 2 tail + c``) and as the critical count f rises (``tail <- tail - C(D, f)``).
    """
    k0, d0 = cut
    out = [0.0]
    f, tail, c = 1, 0, 1  # D = 0: the critical count 1 is out of reach; C(0, 0) = 1
    for d in range(1, n + 1):
        tail = 2 * tail + c
        if f - 1 == d:
            c = 1
        elif f - 1 < d:
            c = c * d // (d + 1 - f)
        # the smallest k of D's parity with k^2 d0 > k0^2 D, and f = (D + k) / 2
        t = k0 * k0 * d // d0 + 1
        k = math.isqrt(t)
        if k * k < t:
            k += 1
        if (k - d) % 2:
            k += 1
        target = (d + k) // 2
        while f < target:
            c = c * (d - f + 1) // f  # C(D, f) from C(D, f - 1)
            tail -= c
            f += 1
        out.append(tail / (1 << d))
    return out


def _null_grid(n: int) -> list[tuple[int, list[float], float]]:
    """Binomial(n, p) pmf windows on the nuisance grid: (first D, pmf, mass left out)."""
    steps = math.ceil(_GRID_PER_ROOT_N * math.sqrt(n))
    out = []
    for j in range(steps + 1):
        start, pmf = binomial_window(n, 1.0 if j == steps else math.sin(math.pi / 2 * j / steps) ** 2)
        out.append((start, pmf, max(0.0, 1.0 - math.fsum(pmf))))
    return out


def binomial_window(n: int, p: float, floor: float = _PMF_FLOOR) -> tuple[int, list[float]]:
    """``(first, pmf)``: the Binomial(n, p) probabilities of ``first, first + 1, ...`` down to
    ``floor`` times the largest on either side of the mode (lgamma once, then ratios)."""
    if p <= 0.0:
        return 0, [1.0]
    if p >= 1.0:
        return n, [1.0]
    mode = min(n, int((n + 1) * p))
    top = math.exp(math.lgamma(n + 1) - math.lgamma(mode + 1) - math.lgamma(n - mode + 1)
                   + mode * math.log(p) + (n - mode) * math.log1p(-p))
    odds = p / (1 - p)
    right: list[float] = []
    x, d = top, mode
    while d < n:
        x *= (n - d) / (d + 1) * odds
        d += 1
        if x < top * floor:
            break
        right.append(x)
    left: list[float] = []
    x, d = top, mode
    while d > 0:
        x *= d / (n - d + 1) / odds
        d -= 1
        if x < top * floor:
            break
        left.append(x)
    return mode - len(left), [*left[::-1], top, *right]


def mcnemar_critical(n: int, alpha: float = ALPHA) -> list[int]:
    """For D = 0 .. n discordant tasks, the smallest ``fixed`` the exact test (at level
    ``alpha``) calls an improvement (``D + 1`` where none is): what the power of the verdict is
    computed from."""
    k0, d0 = _cutoff(n) if alpha == ALPHA else level_cutoff(n, alpha)
    out = []
    for d in range(n + 1):
        f = d // 2 + 1
        while f <= d and not ((2 * f - d) ** 2 * d0 > k0 * k0 * d):
            f += 1
        out.append(f)
    return out


def _size(n: int, cut: Cutoff, grid: list[tuple[int, list[float], float]], alpha: float = ALPHA) -> float:
    """The largest rejection rate at zero difference over the grid (stops once above ``alpha``)."""
    s = _conditional_sizes(n, cut)
    worst = 0.0
    for start, pmf, left_out in grid:
        size = sum(map(operator.mul, pmf, s[start:start + len(pmf)])) + left_out
        if size > worst:
            worst = size
            if worst > alpha:
                break
    return worst


# --- intervals: (lower, upper), not yet clipped to [-1, 1] ---------------------------------------


def bonett_price_bounds(fixed: Any, broken: Any, n: Any, z: float = Z95) -> tuple[Any, Any]:
    """Bonett-Price 95% bounds for paired proportions, unclipped (the first method's formula).

    Plain arithmetic, so ``fixed``, ``broken`` and ``n`` may be ints or numpy arrays (the coverage
    check enumerates every outcome at once). Clipping to [-1, 1] changes neither coverage of a
    difference in [-1, 1] nor the sign of the lower end, so the enumeration may skip it.
    """
    m = n + 2
    p12 = (fixed + 1) / m
    p21 = (broken + 1) / m
    centre = p12 - p21
    se = (((p12 + p21) - centre**2) / m) ** 0.5
    return centre - z * se, centre + z * se


def bonett_price_interval(fixed: int, broken: int, n: int) -> tuple[float, float]:
    """Bonett-Price (2012) 95% interval for paired proportions, clipped to [-1, 1].

    ``fixed`` = #(a=0, b=1), ``broken`` = #(a=1, b=0), ``n`` = tasks scored.
    """
    check_counts(fixed, broken, n)
    lower, upper = bonett_price_bounds(fixed, broken, n)
    return clip(float(lower), float(upper))


def _score(fixed: Any, broken: Any, n: int, d0: Any) -> Any:
    """Tango's (1998) score statistic for ``H0: p_fixed - p_broken = d0``, for ``d0 >= 0``.

    ``(fixed - broken - n d0) / sqrt(n (2 q + d0 (1 - d0)))`` with ``q`` the maximum likelihood
    p_broken under H0, the positive root of ``2n q^2 - K q - broken d0 (1 - d0) = 0``,
    ``K = fixed (1 - d0) + broken (1 - 3 d0) - 2 (n - fixed - broken) d0``. At ``d0 = 0`` it is
    McNemar's z. (The 1e-300 makes 0/0 read 0: no discordant task is no evidence.)
    """
    k = fixed * (1 - d0) + broken * (1 - 3 * d0) - 2 * (n - fixed - broken) * d0
    q = (k + (k * k + 8 * n * broken * d0 * (1 - d0)) ** 0.5) / (4 * n)
    return (fixed - broken - n * d0) / (n * (2 * q + d0 * (1 - d0)) + 1e-300) ** 0.5


def _score_lower(fixed: Any, broken: Any, n: int, c: float, up: Any, where: Where) -> Any:
    """The smallest d0 whose score statistic is at most ``c``: Tango's lower bound at ``c``.

    Bisection, 64 halvings, inside [0, 1] when the exact test says "improved" (``up``) and inside
    [-1, 0] otherwise, so that the bound's sign is the test's, to the last bit. The statistic
    decreases in d0; for d0 < 0 it is ``-score(broken, fixed, -d0)``.
    """
    lo = where(up, 0.0, -1.0)
    hi = where(up, 1.0, 0.0)
    for _ in range(64):
        mid = (lo + hi) / 2
        t = where(up, _score(fixed, broken, n, abs(mid)), -_score(broken, fixed, n, abs(mid)))
        go = t > c
        lo = where(go, mid, lo)
        hi = where(go, hi, mid)
    return (lo + hi) / 2


def score_bounds(fixed: Any, broken: Any, n: int, where: Where = _where, alpha: float = ALPHA) -> tuple[Any, Any]:
    """Tango's (1998) score interval inverted at the exact test's cutoff ``c_n`` (not joined
    with Bonett-Price: :func:`binary_bounds` is what is printed). Its lower end is above 0
    exactly when :func:`mcnemar_rejects`, its upper end below 0 exactly when the mirrored test
    does. Ints or numpy arrays (then pass ``where=numpy.where``)."""
    c = mcnemar_cutoff(n, alpha)
    lower = _score_lower(fixed, broken, n, c, mcnemar_rejects(fixed, broken, n, alpha), where)
    upper = -_score_lower(broken, fixed, n, c, mcnemar_rejects(broken, fixed, n, alpha), where)
    return lower, upper


def score_root(fixed: Any, broken: Any, n: int, c: float, where: Where = _where) -> Any:
    """The d0 at which Tango's score statistic equals ``c`` (it decreases in d0): the lower
    score bound at the normal quantile ``c``, searched on whichever side of 0 it lies. Ints or
    numpy arrays (then pass ``where=numpy.where``)."""
    return _score_lower(fixed, broken, n, c, _score(fixed, broken, n, 0.0) > c, where)


def binary_bounds(fixed: Any, broken: Any, n: int, where: Where = _where, alpha: float = ALPHA) -> tuple[Any, Any]:
    """The printed pass/fail interval, unclipped; ``lower > 0`` exactly when the exact test says
    "improved" (:func:`mcnemar_rejects`), ``upper < 0`` exactly when it says "regressed".

    Tango's score interval inverted at the exact test's cutoff ``c_n`` (>= 1.96: a touch wider than
    a 95% score interval), joined with Bonett-Price's interval except where the join would move
    a bound across 0. The score interval alone covers as little as 0.91 when nearly every task
    flips, Bonett-Price alone 0.92-0.93 on one-directional changes; the join keeps >= 0.93 on a
    fine grid at every n from 20 to 500 (docs/statistics.md). Ints or numpy arrays (then pass
    ``where=numpy.where``). ``alpha`` below :data:`ALPHA`: the same construction at that
    one-sided level (the search verdict's simultaneous interval, :mod:`monte.stats.search`).
    """
    up = mcnemar_rejects(fixed, broken, n, alpha)
    down = mcnemar_rejects(broken, fixed, n, alpha)
    score_lo, score_hi = score_bounds(fixed, broken, n, where, alpha)
    bp_lo, bp_hi = bonett_price_bounds(fixed, broken, n, Z95 if alpha == ALPHA else normal_quantile(1 - alpha))
    lower = where(up & (bp_lo <= 0), score_lo, where(bp_lo < score_lo, bp_lo, score_lo))
    upper = where(down & (bp_hi >= 0), score_hi, where(bp_hi > score_hi, bp_hi, score_hi))
    return lower, upper


def binary_interval(fixed: int, broken: int, n: int) -> tuple[float, float]:
    """:func:`binary_bounds` for one outcome, clipped to [-1, 1]."""
    check_counts(fixed, broken, n)
    lower, upper = binary_bounds(fixed, broken, n)
    return clip(float(lower), float(upper))


def _cbrt(x: Any) -> Any:
    """The real cube root, in plain arithmetic (floats or arrays); 0 stays 0."""
    return x / (abs(x) ** (2 / 3) + 1e-300)


def skew_corrected_bounds(n: Any, s1: Any, s2: Any, s3: Any, z: float = Z95) -> tuple[Any, Any]:
    """The fractional-score interval from ``n`` and the sums of ``d``, ``d^2``, ``d^3``.

    1. Augment (as the first method): two pseudo-tasks with ``d = +1`` and ``d = -1``, so ``m = n + 2``,
       ``S1 = s1``, ``S2 = s2 + 2``, ``S3 = s3``. Their variance keeps the interval open when
       every real difference is equal, and they stand for the large change a few tasks can
       hide (a rare 1 -> 0 among many small gains).
    2. Hall (1992): with the mean ``x``, the sample sd ``s`` and the skewness ``g`` of the
       augmented sample, ``T = sqrt(m) (x - mu) / s`` is made nearly normal by the monotone
       ``h(T) = T + a T^2 + a^2 T^3 / 3 + b``, ``a = g / (3 sqrt(m))``, ``b = g / (6 sqrt(m))``;
       the interval is ``x - s h^{-1}(+-z) / sqrt(m)`` with
       ``h^{-1}(y) = 3 (y - b) / (u^2 + u + 1)``, ``u = cbrt(1 + 3 a (y - b))`` (the closed form
       without a division by ``a``, so ``g = 0`` gives the plain interval).

    Plain arithmetic: scalars or numpy arrays. Simulated false-``ok`` and coverage are in
    docs/statistics.md.
    """
    m = n + 2
    mean = s1 / m
    m2 = (s2 + 2) / m - mean * mean
    m3 = s3 / m - 3 * mean * (s2 + 2) / m + 2 * mean**3
    sd = (m2 * m / (m - 1)) ** 0.5
    g = m3 / (m2 ** 1.5 + 1e-300)
    root = m**0.5
    a = g / (3 * root)
    b = g / (6 * root)

    def h_inv(y: Any) -> Any:
        u = _cbrt(1 + 3 * a * (y - b))
        return 3 * (y - b) / (u * u + u + 1)

    return mean - sd * h_inv(z) / root, mean - sd * h_inv(-z) / root


def skew_corrected_interval(d: Sequence[float]) -> tuple[float, float]:
    """:func:`skew_corrected_bounds` for a list of differences, clipped to [-1, 1]."""
    n = len(d)
    if n < 1:
        raise ValueError("no differences")
    lower, upper = skew_corrected_bounds(n, math.fsum(d), math.fsum(x * x for x in d),
                                         math.fsum(x * x * x for x in d))
    return clip(lower, upper)


def augmented_interval(d: Sequence[float]) -> tuple[float, float]:
    """The first method's augmented paired interval (no longer printed; kept for comparison).

    ``m = n + 2``, ``dbar = sum(d) / m``, ``var = (sum(d^2) + 2) / m - dbar^2``,
    ``se = sqrt(var / m)``. On 0/1 scores this is exactly Bonett-Price.
    """
    n = len(d)
    if n < 1:
        raise ValueError("no differences")
    m = n + 2
    dbar = math.fsum(d) / m
    var = (math.fsum(x * x for x in d) + 2) / m - dbar * dbar
    se = math.sqrt(max(var, 0.0) / m)
    return clip(dbar - Z95 * se, dbar + Z95 * se)



# --- the deltas --------------------------------------------------------------------------------


def paired_delta(
    a: Sequence[float], b: Sequence[float], clusters: Sequence[str] | None = None
) -> Delta:
    """The paired delta ``score_b - score_a`` of two evals of the same tasks, with its interval.

    ``a`` and ``b`` are per-task scores in [0, 1], aligned by task (same length, same order).
    The interval (95%, clipped to [-1, 1]) is, with ``d_i = b_i - a_i``:

    1. every score 0 or 1: :func:`binary_interval` (``method="exact-mcnemar+score"``): its lower
       end is above 0 exactly when the exact unconditional McNemar test says "improved";
    2. otherwise: :func:`skew_corrected_interval` (``"augmented-hall"``), joined with the delta
       itself so the printed delta always lies inside its interval.

    ``clusters`` (one key per task, e.g. the passage a question came from) applies when it holds
    at least 2 distinct keys and at least one key shared by 2 or more tasks; otherwise it carries
    no information beyond the tasks themselves and is ignored. When it applies, the interval is
    the union of the interval above and the clustered t-interval (Miller's clustered SE,
    C - 1 degrees of freedom, :func:`clustered_t_interval`), so clustering only ever widens it
    (and an ``ok`` only ever becomes a ``STRIKE``); ``method`` gets ``"+clustered"``.

    ``fixed``/``broken`` are set in case 1 (also with clusters), ``None`` otherwise.
    Raises ValueError for empty or misaligned input, or a score that is NaN or outside [0, 1].
    """
    xa = scores(a, "a")
    xb = scores(b, "b")
    if len(xa) != len(xb):
        raise ValueError(f"a has {len(xa)} scores and b has {len(xb)}: pair them by task")
    n = len(xa)
    if n == 0:
        raise ValueError("no tasks to compare")
    keys: list[str] | None = None
    if clusters is not None:
        if isinstance(clusters, str | bytes):
            raise ValueError("clusters must be one key per task, not a single string")
        keys = list(clusters)
        if len(keys) != n:
            raise ValueError(f"{len(keys)} cluster keys for {n} tasks")

    score_a = math.fsum(xa) / n
    score_b = math.fsum(xb) / n
    d = [y - x for x, y in zip(xa, xb, strict=True)]
    binary = all(x in (0.0, 1.0) for x in xa) and all(y in (0.0, 1.0) for y in xb)

    fixed: int | None = None
    broken: int | None = None
    if binary:
        fixed = sum(1 for x in d if x > 0)
        broken = sum(1 for x in d if x < 0)
        delta = (fixed - broken) / n
        lower, upper = binary_interval(fixed, broken, n)
        method = EXACT_SCORE
    else:
        delta = math.fsum(d) / n
        lower, upper = skew_corrected_interval(d)
        lower, upper = min(lower, delta), max(upper, delta)
        method = SKEW_CORRECTED

    if keys is not None and _clusters_apply(keys):
        c_lower, c_upper = clustered_t_interval(d, keys)
        lower, upper = min(lower, c_lower), max(upper, c_upper)
        method += CLUSTERED_SUFFIX

    return Delta(
        delta=delta,
        lower=lower,
        upper=upper,
        n=n,
        paired=True,
        fixed=fixed,
        broken=broken,
        method=method,
        score_a=score_a,
        score_b=score_b,
    )


def _clusters_apply(keys: Sequence[Hashable]) -> bool:
    """At least 2 clusters, and at least one holding 2 or more tasks."""
    distinct = len(set(keys))
    return 2 <= distinct < len(keys)

