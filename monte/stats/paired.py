"""Paired statistics for two evals of the same frozen split: the delta, its 95% interval, the verdict.

The method, and why it was chosen, is in STATS.md. In short, for per-task scores ``a`` (baseline)
and ``b`` (newer) aligned by task, ``d_i = b_i - a_i``:

- pass/fail scores (every score 0 or 1): the Bonett-Price (2012) adjusted Wald interval for paired
  proportions;
- fractional scores: the same interval generalised (two pseudo-tasks with ``d = +1`` and ``d = -1``
  are added; on 0/1 data this *is* Bonett-Price), until at least 40 of the ``d_i`` are non-zero,
  from which on the plain paired t-interval (Miller, "Adding Error Bars to Evals", 2024);
- tasks that carry a cluster key: see :func:`paired_delta` for exactly when and how the clustered
  standard error enters;
- no per-task files (unpaired): Agresti-Caffo for pass/fail, Welch for fractional scores.

The verdict is ``ok`` when the interval's lower end is above zero, otherwise ``STRIKE``; an
unpaired delta is unjudged. Everything here is a pure function of its arguments. This module
imports nothing heavier than :mod:`math`; scipy (the t quantile) is imported inside the one
function that needs it, so importing :mod:`monte.stats` stays cheap.

The interval formulas are written with plain arithmetic and ``** 0.5`` so that
:func:`bonett_price_bounds` also accepts numpy arrays: the coverage benchmark and test enumerate
the implemented formula itself, vectorised, instead of a copy of it.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = [
    "MIN_NONZERO_FOR_T",
    "Z95",
    "Delta",
    "agresti_caffo_interval",
    "augmented_interval",
    "bonett_price_bounds",
    "bonett_price_interval",
    "clustered_t_interval",
    "paired_delta",
    "paired_t_interval",
    "unpaired_delta",
    "verdict",
    "welch_interval",
]

#: The 0.975 quantile of the standard normal: the z of every two-sided 95% interval here.
Z95 = 1.959963984540054

#: From this many non-zero per-task differences on, fractional scores use the paired t-interval.
MIN_NONZERO_FOR_T = 40

# The strings stored in Delta.method. Callers print them; keep them stable.
BONETT_PRICE = "bonett-price"
AUGMENTED = "augmented-paired"
PAIRED_T = "paired-t"
CLUSTERED_T = "clustered-t"
CLUSTERED_SUFFIX = "+clustered"
AGRESTI_CAFFO = "agresti-caffo"
#: Fractional scores without standard deviations: the pass/fail interval, which is conservative
#: because no score in [0, 1] with mean p varies more than a pass/fail score does (p(1 - p)).
AGRESTI_CAFFO_BOUND = "agresti-caffo-bound (fractional, no sd)"
WELCH = "welch"

OK = "ok"
STRIKE = "STRIKE"


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


# --- intervals: (lower, upper), not yet clipped to [-1, 1] ---------------------------------------


def bonett_price_bounds(fixed: Any, broken: Any, n: Any) -> tuple[Any, Any]:
    """Bonett-Price 95% bounds for paired proportions, unclipped.

    Plain arithmetic, so ``fixed``, ``broken`` and ``n`` may be ints or numpy arrays (the coverage
    check enumerates every outcome at once). Clipping to [-1, 1] changes neither coverage of a
    difference in [-1, 1] nor the sign of the lower end, so the enumeration may skip it.
    """
    m = n + 2
    p12 = (fixed + 1) / m
    p21 = (broken + 1) / m
    centre = p12 - p21
    se = (((p12 + p21) - centre**2) / m) ** 0.5
    return centre - Z95 * se, centre + Z95 * se


def bonett_price_interval(fixed: int, broken: int, n: int) -> tuple[float, float]:
    """Bonett-Price (2012) 95% interval for paired proportions, clipped to [-1, 1].

    ``fixed`` = #(a=0, b=1), ``broken`` = #(a=1, b=0), ``n`` = tasks scored.
    """
    if n < 1 or fixed < 0 or broken < 0 or fixed + broken > n:
        raise ValueError(f"need 0 <= fixed + broken <= n, n >= 1 (got {fixed}, {broken}, {n})")
    lower, upper = bonett_price_bounds(fixed, broken, n)
    return _clip(float(lower), float(upper))


def augmented_interval(d: Sequence[float]) -> tuple[float, float]:
    """The augmented paired interval: add two pseudo-tasks with d = +1 and d = -1, then Wald.

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
    return _clip(dbar - Z95 * se, dbar + Z95 * se)


def paired_t_interval(d: Sequence[float]) -> tuple[float, float]:
    """``mean(d) ± t_{0.975, n-1} · sd(d) / sqrt(n)`` (sample sd, n - 1 in the denominator)."""
    n = len(d)
    if n < 2:
        raise ValueError("the t-interval needs at least 2 differences")
    mean = math.fsum(d) / n
    ss = math.fsum((x - mean) ** 2 for x in d)
    se = math.sqrt(ss / (n - 1) / n)
    half = _t975(n - 1) * se
    return _clip(mean - half, mean + half)


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
    half = _t975(c - 1) * math.sqrt(var)
    return _clip(mean - half, mean + half)


def agresti_caffo_interval(
    score_a: float, n_a: int, score_b: float, n_b: int
) -> tuple[float, float]:
    """Agresti-Caffo 95% interval for ``p_b - p_a`` from two independent evals, clipped.

    One success and one failure are added to each eval (``p~ = (score·n + 1) / (n + 2)``), then
    Wald: ``p~_b - p~_a ± z · sqrt(p~_a(1 - p~_a)/(n_a + 2) + p~_b(1 - p~_b)/(n_b + 2))``.
    """
    pa = (score_a * n_a + 1) / (n_a + 2)
    pb = (score_b * n_b + 1) / (n_b + 2)
    se = math.sqrt(pa * (1 - pa) / (n_a + 2) + pb * (1 - pb) / (n_b + 2))
    centre = pb - pa
    return _clip(centre - Z95 * se, centre + Z95 * se)


def welch_interval(
    score_a: float, sd_a: float, n_a: int, score_b: float, sd_b: float, n_b: int
) -> tuple[float, float]:
    """Welch's 95% interval for ``mean_b - mean_a`` (Welch-Satterthwaite degrees of freedom).

    ``sd_a``/``sd_b`` are the per-task sample standard deviations. When both are 0 the interval
    is the single point ``score_b - score_a``.
    """
    va = sd_a * sd_a / n_a
    vb = sd_b * sd_b / n_b
    centre = score_b - score_a
    if va + vb == 0:
        return _clip(centre, centre)
    df = (va + vb) ** 2 / (va * va / (n_a - 1) + vb * vb / (n_b - 1))
    half = _t975(df) * math.sqrt(va + vb)
    return _clip(centre - half, centre + half)


# --- the deltas --------------------------------------------------------------------------------


def paired_delta(
    a: Sequence[float], b: Sequence[float], clusters: Sequence[str] | None = None
) -> Delta:
    """The paired delta ``score_b - score_a`` of two evals of the same tasks, with its interval.

    ``a`` and ``b`` are per-task scores in [0, 1], aligned by task (same length, same order).
    The interval (95%, clipped to [-1, 1]) is chosen as follows, ``d_i = b_i - a_i``:

    1. every score 0 or 1: Bonett-Price (``method="bonett-price"``), at any number of flips;
    2. otherwise, fewer than 40 non-zero ``d_i``: the augmented interval
       (``"augmented-paired"``);
    3. otherwise: the paired t-interval (``"paired-t"``).

    ``clusters`` (one key per task, e.g. the passage a question came from) applies when it holds
    at least 2 distinct keys and at least one key shared by 2 or more tasks; otherwise it carries
    no information beyond the tasks themselves and is ignored. When it applies, the interval is
    the union of the interval above and the clustered t-interval (Miller's clustered SE,
    C - 1 degrees of freedom, :func:`clustered_t_interval`), so clustering only ever widens it:
    the small-sample intervals are what stays safe when few tasks change, and the clustered SE is
    the only part that sees correlation within a cluster. ``method`` is then ``"clustered-t"`` in
    case 3 and ``"<method>+clustered"`` in cases 1 and 2.

    ``fixed``/``broken`` are set in case 1 (also with clusters), ``None`` otherwise.
    Raises ValueError for empty or misaligned input, or a score that is NaN or outside [0, 1].
    """
    xa = _scores(a, "a")
    xb = _scores(b, "b")
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
        lower, upper = bonett_price_interval(fixed, broken, n)
        method = BONETT_PRICE
    else:
        delta = math.fsum(d) / n
        if sum(1 for x in d if x != 0) < MIN_NONZERO_FOR_T:
            lower, upper = augmented_interval(d)
            method = AUGMENTED
        else:
            lower, upper = paired_t_interval(d)
            method = PAIRED_T

    if keys is not None and _clusters_apply(keys):
        c_lower, c_upper = clustered_t_interval(d, keys)
        lower, upper = min(lower, c_lower), max(upper, c_upper)
        method = CLUSTERED_T if method == PAIRED_T else method + CLUSTERED_SUFFIX

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


def unpaired_delta(
    score_a: float,
    n_a: int,
    score_b: float,
    n_b: int,
    binary: bool = True,
    sd_a: float | None = None,
    sd_b: float | None = None,
) -> Delta:
    """The delta ``score_b - score_a`` of two evals whose per-task scores cannot be paired.

    ``binary=True`` (pass/fail scores): Agresti-Caffo (``method="agresti-caffo"``).
    ``binary=False``: Welch's interval (``"welch"``) when both per-task sample standard deviations
    are given and each eval has at least 2 tasks; otherwise the Agresti-Caffo interval as a
    conservative bound (``"agresti-caffo-bound (fractional, no sd)"``: a score in [0, 1] with
    mean p has variance at most p(1 - p), the pass/fail variance).

    The result has ``paired=False``, ``fixed``/``broken`` ``None`` and ``n = min(n_a, n_b)``;
    :func:`verdict` gives it no ok/STRIKE.
    """
    score_a = _number(score_a, "score_a")
    score_b = _number(score_b, "score_b")
    n_a = _count(n_a, "n_a")
    n_b = _count(n_b, "n_b")
    sd_a = None if sd_a is None else _number(sd_a, "sd_a")
    sd_b = None if sd_b is None else _number(sd_b, "sd_b")

    if not binary and sd_a is not None and sd_b is not None and n_a >= 2 and n_b >= 2:
        lower, upper = welch_interval(score_a, sd_a, n_a, score_b, sd_b, n_b)
        method = WELCH
    else:
        lower, upper = agresti_caffo_interval(score_a, n_a, score_b, n_b)
        method = AGRESTI_CAFFO if binary else AGRESTI_CAFFO_BOUND
    return Delta(
        delta=score_b - score_a,
        lower=lower,
        upper=upper,
        n=min(n_a, n_b),
        paired=False,
        fixed=None,
        broken=None,
        method=method,
        score_a=score_a,
        score_b=score_b,
    )


# --- helpers -----------------------------------------------------------------------------------


def _scores(xs: Sequence[float], name: str) -> list[float]:
    if isinstance(xs, str | bytes):
        raise ValueError(f"{name} must be a sequence of scores, not a string")
    out: list[float] = []
    for i, x in enumerate(xs):
        try:
            v = float(x)
        except (TypeError, ValueError):
            raise ValueError(f"{name}[{i}] = {x!r} is not a number") from None
        # NaN fails both comparisons, so it is refused here too.
        if not 0.0 <= v <= 1.0:
            raise ValueError(f"{name}[{i}] = {x!r}: scores must lie in [0, 1]")
        out.append(v)
    return out


def _number(x: object, name: str) -> float:
    """A float in [0, 1] (scores and per-task standard deviations both live there)."""
    if isinstance(x, str | bytes | bool):
        raise ValueError(f"{name} must be a number in [0, 1], got {x!r}")
    try:
        v = float(x)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a number in [0, 1], got {x!r}") from None
    if not 0.0 <= v <= 1.0:
        raise ValueError(f"{name} must be a number in [0, 1], got {x!r}")
    return v


def _count(k: object, name: str) -> int:
    if isinstance(k, bool):
        raise ValueError(f"{name} must be a positive int, got {k!r}")
    try:
        v = operator.index(k)  # type: ignore[arg-type]
    except TypeError:
        raise ValueError(f"{name} must be a positive int, got {k!r}") from None
    if v < 1:
        raise ValueError(f"{name} must be a positive int, got {k!r}")
    return v


def _clusters_apply(keys: Sequence[Hashable]) -> bool:
    """At least 2 clusters, and at least one holding 2 or more tasks."""
    distinct = len(set(keys))
    return 2 <= distinct < len(keys)


def _clip(lower: float, upper: float) -> tuple[float, float]:
    return max(-1.0, min(1.0, lower)), max(-1.0, min(1.0, upper))


def _t975(df: float) -> float:
    # scipy is heavy; import it only where a t quantile is actually needed.
    from scipy.stats import t

    return float(t.ppf(0.975, df))
