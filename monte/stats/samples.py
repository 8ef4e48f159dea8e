"""K sampled answers per item: the paired delta, its interval and its verdict, with the item as
the unit (the method, its proof and its figures: docs/statistics.md, "K samples per item").

Two evals of the same n items give, per item i, K scores of the baseline ``a_i1 .. a_iK`` and K of
the newer model ``b_i1 .. b_iK``. The delta is the mean over items of the per-item difference of
mean scores, ``mean_i (mean_j b_ij - mean_j a_ij)``; for ``k <= K`` the same with Chen et al.'s
(2021) unbiased pass@k estimate ``1 - C(K - c, k) / C(K, k)`` of each item (``c`` = correct samples).

- **K = 1**: exactly :func:`monte.stats.paired.paired_delta` (the exact unconditional McNemar
  test for pass/fail scores), so every K = 1 verdict, interval and printed line is today's.
- **K > 1, every score 0 or 1**: the verdict is ``ok`` when both (i) the exact *conditional*
  permutation test on the items rejects "no improvement" at :data:`ALPHA`, and (ii) the item-level
  interval's lower end is above 0. (i): given each item's total successes ``t_i = a_i + b_i`` of
  its 2K samples, under "the 2K samples of an item are exchangeable" (in particular: both models
  answer item i correctly with the same probability p_i, samples independent) ``a_i`` is
  Hypergeometric(2K, t_i, K), independently over items; the p-value ``P(sum a_i <= observed)`` is
  the exact convolution of those distributions (:func:`conditional_pvalue`), so its false-``ok``
  rate is at most ALPHA given every ``t``, hence at every p_1 .. p_n. At K = 1 it is the exact
  conditional McNemar test (Binomial(D, 1/2) on the D discordant items). (ii): today's fractional
  interval (augmented, Hall's transformation; :func:`monte.stats.paired.skew_corrected_interval`)
  on the n per-item differences ``d_i``: the item, not the sample, is the independent unit, so
  between-item spread of the change widens it. Where (ii) is above 0 and (i) does not reject,
  the printed lower end is 0 (a ``STRIKE``): the verdict and the printed interval never disagree.
- **K > 1, fractional scores**: today's fractional method on the per-item mean differences.

Pure functions; imports nothing heavier than :mod:`math`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from monte.stats.paired import (
    ALPHA,
    CLUSTERED_SUFFIX,
    SKEW_CORRECTED,
    Delta,
    clustered_t_interval,
    paired_delta,
    skew_corrected_interval,
)

__all__ = ["samples_of", "ITEM_EXACT", "ITEM_FRACTIONAL", "PassAt", "SampledDelta", "conditional_pvalue",
           "design_effect", "hypergeometric_weights", "pass_at_k", "sampled_delta"]

#: Delta.method of a K > 1 delta: the exact test on the items joined with the item-level interval.
ITEM_EXACT = "item-exact-conditional+augmented-hall"
#: K > 1, fractional scores: today's fractional interval on the per-item mean differences.
ITEM_FRACTIONAL = "item-augmented-hall"

#: The p-value is compared with ALPHA less this relative margin: float64 convolution of positive
#: terms errs by ~1e-13 relative at most here, so a rounding error can only make the test reject
#: less, never more (the size stays <= ALPHA; tests/stats/test_samples.py checks against exact
#: fractions).
_MARGIN = 1e-9

Convolve = Callable[[Sequence[float], Sequence[float]], Sequence[float]]


@dataclass(frozen=True)
class PassAt:
    """The pass@k delta (Chen et al.'s unbiased estimator per item), with today's fractional
    interval on the per-item differences. No verdict: the verdict is the mean score's."""

    k: int
    delta: float
    lower: float
    upper: float
    score_a: float
    score_b: float


@dataclass(frozen=True)
class SampledDelta:
    """A paired delta over n items with K samples each: :class:`Delta` (n = items) and what the
    samples add. ``pvalue``: the exact conditional test's one-sided p-value (pass/fail, K > 1);
    ``effective_n``: the number of single-sample items this precision is worth; ``design_effect``:
    Kish's, the variance of the item-level mean against n K independent single answers."""

    d: Delta
    samples: int
    pvalue: float | None
    effective_n: float
    design_effect: float
    sd: float  # the per-item differences' sample sd (what the detectable effect is computed from)
    pass_at: tuple[PassAt, ...] = field(default=())

    def record(self) -> dict[str, object]:
        """What an eval row records beside the delta (``row.delta``), only at K > 1."""
        return {"samples": self.samples, "pvalue": self.pvalue, "effective_n": self.effective_n,
                "design_effect": self.design_effect, "sd": self.sd,
                "pass_at": {str(p.k): {"delta": p.delta, "lower": p.lower, "upper": p.upper,
                                       "score_a": p.score_a, "score_b": p.score_b} for p in self.pass_at}}


def pass_at_k(correct: int, samples: int, k: int) -> float:
    """Chen et al. (2021): ``1 - C(K - c, k) / C(K, k)``, the unbiased estimate of pass@k from
    ``c`` correct of ``K`` samples (exact in integers, one division)."""
    if not 1 <= k <= samples or not 0 <= correct <= samples:
        raise ValueError(f"need 1 <= k <= K and 0 <= c <= K (got k={k}, c={correct}, K={samples})")
    return 1.0 - math.comb(samples - correct, k) / math.comb(samples, k)


def hypergeometric_weights(t: int, k: int) -> tuple[int, list[int]]:
    """``(first, w)``: ``C(t, a) C(2K - t, K - a)`` for a = first, first + 1, ...: the integer
    weights of Hypergeometric(2K, t, K), the baseline's share of an item's t successes under the
    null (divide by ``C(2K, K)`` for probabilities)."""
    lo, hi = max(0, t - k), min(t, k)
    return lo, [math.comb(t, a) * math.comb(2 * k - t, k - a) for a in range(lo, hi + 1)]


def _convolve(p: Sequence[float], q: Sequence[float]) -> list[float]:
    """Plain convolution, the shorter sequence as the taps (one slice sum per tap)."""
    if len(q) > len(p):
        p, q = q, p
    out = [0.0] * (len(p) + len(q) - 1)
    for j, w in enumerate(q):
        if w:
            out[j:j + len(p)] = [x + w * y for x, y in zip(out[j:j + len(p)], p, strict=True)]
    return out


def conditional_pvalue(a: Sequence[int], b: Sequence[int], k: int, *,
                       convolve: Convolve = _convolve) -> float:
    """``P(sum a_i <= observed | t)``: the exact conditional test's one-sided p-value against
    "b is no better" (small when the newer model's successes ``b_i`` outnumber the baseline's).

    ``a_i``, ``b_i``: successes of each model among item i's K samples. Given ``t_i = a_i + b_i``,
    under exchangeable samples ``a_i`` is Hypergeometric(2K, t_i, K); the distribution of the sum
    is their convolution (items with ``t_i`` 0 or 2K are fixed and drop out).
    Each item's pmf is scaled to its largest term 1 (so the distribution's peak never shrinks) and
    the whole is rescaled every 32 items (so it never overflows).
    ``convolve`` may be numpy's (the tests' enumeration); the default is plain Python.
    """
    if len(a) != len(b):
        raise ValueError(f"{len(a)} baseline counts and {len(b)} newer ones")
    observed = 0
    shift = 0  # the smallest possible sum
    dist: Sequence[float] = [1.0]
    steps = 0
    for ai, bi in zip(a, b, strict=True):
        if not (0 <= ai <= k and 0 <= bi <= k):
            raise ValueError(f"success counts must lie in 0..{k} (got {ai}, {bi})")
        t = ai + bi
        first, w = hypergeometric_weights(t, k)
        observed += ai
        shift += first
        if len(w) > 1:
            top = max(w)
            dist = convolve(dist, [x / top for x in w])
            steps += 1
            if steps % 32 == 0:  # the peak grows by at most K + 1 a step: rescale before it overflows
                m = max(dist)
                dist = [x / m for x in dist]
    total = math.fsum(dist)
    return min(1.0, math.fsum(dist[: observed - shift + 1]) / total)


def exact_rejects(a: Sequence[int], b: Sequence[int], k: int, *, convolve: Convolve = _convolve) -> bool:
    """The exact conditional test says "b improved" at :data:`ALPHA` (:func:`conditional_pvalue`;
    the comparison keeps a relative margin of 1e-9 below ALPHA for float rounding)."""
    return sum(b) > sum(a) and conditional_pvalue(a, b, k, convolve=convolve) <= ALPHA * (1 - _MARGIN)


def item_differences(a: Sequence[Sequence[float]], b: Sequence[Sequence[float]]) -> list[float]:
    """``d_i = mean_j b_ij - mean_j a_ij``: one difference per item, the unit of the interval."""
    return [math.fsum(y) / len(y) - math.fsum(x) / len(x) for x, y in zip(a, b, strict=True)]


def design_effect(a: Sequence[Sequence[float]], b: Sequence[Sequence[float]]) -> tuple[float, float, float]:
    """``(effective n, design effect, sd of d)`` of per-item samples.

    With ``d_i`` the per-item mean difference, its sample variance ``S^2`` estimates
    ``tau^2 + sigma^2 / K`` (between-item spread of the change, and the answers' own noise), and
    ``w = mean_i (s_ai^2 + s_bi^2) / K`` (unbiased within-item variances) estimates ``sigma^2 / K``.
    One sample per item would have given ``S^2 + (K - 1) w``; the effective number of items is
    ``n (S^2 + (K - 1) w) / S^2``, clamped to [n, n K] (where the true value lies), and Kish's
    design effect is ``n K / effective n``, in [1, K]. ``S^2 = 0``: n K and 1.
    """
    n = len(a)
    k = len(a[0]) if n else 1
    d = [math.fsum(y) / k - math.fsum(x) / k for x, y in zip(a, b, strict=True)]
    if n < 2:
        return float(n * k), 1.0, 0.0
    mean = math.fsum(d) / n
    s2 = math.fsum((x - mean) ** 2 for x in d) / (n - 1)
    if k < 2:
        return float(n), 1.0, math.sqrt(s2)

    def var(xs: Sequence[float]) -> float:
        m = math.fsum(xs) / k
        return math.fsum((x - m) ** 2 for x in xs) / (k - 1)

    w = math.fsum(var(x) + var(y) for x, y in zip(a, b, strict=True)) / n / k
    if s2 <= 0:
        return float(n * k), 1.0, 0.0
    ratio = min(float(k), max(1.0, (s2 + (k - 1) * w) / s2))
    eff = n * ratio
    return eff, n * k / eff, math.sqrt(s2)


def sampled_delta(a: Sequence[Sequence[float]], b: Sequence[Sequence[float]], *,
                  pass_at: Sequence[int] = (), clusters: Sequence[str] | None = None) -> SampledDelta:
    """The paired delta of two evals of the same n items, K samples per item each.

    ``a[i]``, ``b[i]``: item i's K scores in [0, 1] (the same K for every item and both evals).
    See the module's docstring for the method; ``pass_at`` (each ``k <= K``, pass/fail only)
    adds pass@k deltas. ``clusters`` as in :func:`paired_delta` (the item-level interval is
    widened by the clustered t-interval where they apply).
    """
    n = len(a)
    if n == 0 or len(b) != n:
        raise ValueError(f"a has {n} items and b has {len(b)}: pair them by item")
    k = len(a[0])
    if k < 1 or any(len(x) != k for x in a) or any(len(y) != k for y in b):
        raise ValueError("every item needs the same number K >= 1 of samples in both evals")
    binary = all(s in (0.0, 1.0) for x in a for s in x) and all(s in (0.0, 1.0) for y in b for s in y)
    eff, deff, sd = design_effect(a, b)
    passes: list[PassAt] = []
    for kk in sorted(set(pass_at)):
        if not binary:
            raise ValueError("pass@k needs pass/fail scores")
        pa = [pass_at_k(round(sum(x)), k, kk) for x in a]
        pb = [pass_at_k(round(sum(y)), k, kk) for y in b]
        dd = [y - x for x, y in zip(pa, pb, strict=True)]
        delta = math.fsum(dd) / n
        lo, hi = skew_corrected_interval(dd)
        passes.append(PassAt(kk, delta, min(lo, delta), max(hi, delta), math.fsum(pa) / n, math.fsum(pb) / n))
    if k == 1:  # today's method, exactly: the exact unconditional McNemar test for pass/fail scores
        d = paired_delta([x[0] for x in a], [y[0] for y in b], clusters)
        return SampledDelta(d, 1, None, eff, deff, sd, tuple(passes))
    if not binary:
        item = _item_delta(a, b, clusters)
        d = Delta(item.delta, item.lower, item.upper, n, True, None, None,
                  item.method.replace("augmented-hall", ITEM_FRACTIONAL, 1), item.score_a, item.score_b)
        return SampledDelta(d, k, None, eff, deff, sd, tuple(passes))
    ca = [round(sum(x)) for x in a]
    cb = [round(sum(y)) for y in b]
    item = _item_delta(a, b, clusters)
    lower, upper = item.lower, item.upper
    # the verdict is the exact test *and* the item-level interval; the printed interval says so
    # (a p-value is computed only where it can change the verdict: the interval excludes 0)
    up = conditional_pvalue(ca, cb, k) if sum(cb) > sum(ca) else 1.0  # small: b better
    if lower > 0 and not exact_rejects(ca, cb, k):
        lower = 0.0
    if upper < 0 and not exact_rejects(cb, ca, k):
        upper = 0.0
    d = Delta(item.delta, lower, upper, n, True, None, None,
              item.method.replace("augmented-hall", ITEM_EXACT, 1), item.score_a, item.score_b)
    return SampledDelta(d, k, up, eff, deff, sd, tuple(passes))


def _item_delta(a: Sequence[Sequence[float]], b: Sequence[Sequence[float]], clusters: Sequence[str] | None) -> Delta:
    """Today's fractional interval (:func:`monte.stats.paired.paired_delta`'s case 2, with its
    clusters rule) on the per-item differences of :func:`item_differences`: the item is the unit."""
    d = item_differences(a, b)
    n = len(d)
    delta = math.fsum(d) / n
    lower, upper = skew_corrected_interval(d)
    lower, upper = min(lower, delta), max(upper, delta)
    method = SKEW_CORRECTED
    if clusters is not None and 2 <= len(set(clusters)) < len(clusters):
        c_lower, c_upper = clustered_t_interval(d, list(clusters))
        lower, upper = min(lower, c_lower), max(upper, c_upper)
        method += CLUSTERED_SUFFIX
    score_a = math.fsum(math.fsum(x) / len(x) for x in a) / n
    score_b = math.fsum(math.fsum(y) / len(y) for y in b) / n
    return Delta(delta, lower, upper, n, True, None, None, method, score_a, score_b)


def samples_of(tasks: Sequence[Mapping[str, Any]]) -> dict[str, list[float]] | None:
    """Item id -> its K sample scores, from ``tasks.jsonl`` entries as monte records them at
    K > 1 (``samples``: index, seed, answer, score); ``None`` when the entries hold no samples
    (K = 1) or not the same K > 1 for every item."""
    out: dict[str, list[float]] = {}
    for t in tasks:
        got = t.get("samples")
        if not isinstance(got, list) or not got:
            return None
        out[str(t["id"])] = [float(s["score"]) for s in sorted(got, key=lambda s: int(s["sample"]))]
    ks = {len(v) for v in out.values()}
    return out if len(ks) == 1 and ks != {1} else None
