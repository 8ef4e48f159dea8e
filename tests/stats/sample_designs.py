"""K samples per item: the designs and checks shared by tests/stats/test_samples.py,
test_samples_sizes.py, the mutation check and bench/samples_power.py (issue 33). numpy and scipy
here; the module under test only through the functions each check is handed.

A design draws, per item i, the two models' success probabilities ``(p_ai, p_bi)``; each of the K
samples of each model is then Bernoulli of its own probability, independently. The true delta is
``mean_i (p_bi - p_ai)`` over the population of items the design draws from.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import numpy as np
from scipy.stats import hypergeom

Design = Callable[[np.random.Generator, int, int], tuple[np.ndarray, np.ndarray, float]]


def _same(p: np.ndarray) -> tuple[np.ndarray, np.ndarray, float]:
    return p, p, 0.0


#: "No change": both models answer item i correctly with the same p_i (the strong null).
STRONG_NULLS: dict[str, Design] = {
    "p 0.5 every item": lambda rng, reps, n: _same(np.full((reps, n), 0.5)),
    "p 0.1 every item": lambda rng, reps, n: _same(np.full((reps, n), 0.1)),
    "p 0.9 every item": lambda rng, reps, n: _same(np.full((reps, n), 0.9)),
    "p_i ~ Beta(0.5, 0.5)": lambda rng, reps, n: _same(rng.beta(0.5, 0.5, (reps, n))),
    "p_i ~ U(0, 1)": lambda rng, reps, n: _same(rng.random((reps, n))),
}


def _mirror(rng: np.random.Generator, reps: int, n: int) -> tuple[np.ndarray, np.ndarray, float]:
    pa = rng.random((reps, n))
    return pa, 1 - pa, 0.0


def _skewed(rng: np.random.Generator, reps: int, n: int) -> tuple[np.ndarray, np.ndarray, float]:
    up = rng.random((reps, n)) < 0.8  # 80 % of items gain 0.1, 20 % lose 0.4: no change on average
    return np.full((reps, n), 0.5), np.where(up, 0.6, 0.1), 0.0


#: A weaker null: no change on average over items, but items change both ways.
WEAK_NULLS: dict[str, Design] = {
    "mirror: p_b = 1 - p_a, p_a ~ U(0, 1)": _mirror,
    "skewed: 80 % +0.1, 20 % -0.4": _skewed,
}


_STEPS, _WEIGHTS = [-0.2, 0.1, 0.3], [0.3, 0.4, 0.3]


@functools.cache
def _het_truth() -> float:
    """The population mean of ``clip(p_a + step) - p_a`` (2,000,000 seeded draws; se ~2e-4)."""
    rng = np.random.default_rng(99)
    pa = rng.beta(0.5, 0.5, 2_000_000)
    return float(np.mean(np.clip(pa + rng.choice(_STEPS, pa.size, p=_WEIGHTS), 0, 1) - pa))


def _het_gain(rng: np.random.Generator, reps: int, n: int) -> tuple[np.ndarray, np.ndarray, float]:
    pa = rng.beta(0.5, 0.5, (reps, n))
    return pa, np.clip(pa + rng.choice(_STEPS, (reps, n), p=_WEIGHTS), 0, 1), _het_truth()


def _uniform_gain(rng: np.random.Generator, reps: int, n: int) -> tuple[np.ndarray, np.ndarray, float]:
    pa = rng.random((reps, n)) * 0.8
    return pa, pa + 0.1, 0.1


#: Coverage: heterogeneous per-item success rates, with and without a change, and changes that
#: differ by item (what an interval that treats samples as independent misses).
COVERAGE: dict[str, Design] = {
    **STRONG_NULLS,
    **WEAK_NULLS,
    "uniform +0.1, p_a ~ U(0, 0.8)": _uniform_gain,
    "heterogeneous change, p_a ~ Beta(0.5, 0.5)": _het_gain,
}


def draw(design: Design, rng: np.random.Generator, reps: int, n: int, k: int) -> tuple[np.ndarray, np.ndarray, float]:
    """Success counts (reps, n) of each model among K samples, and the true delta."""
    pa, pb, truth = design(rng, reps, n)
    return rng.binomial(k, pa), rng.binomial(k, pb), truth


def per_sample(counts: np.ndarray, k: int, rng: np.random.Generator) -> np.ndarray:
    """(reps, n, K) 0/1 scores with these success counts, in a random order within each item."""
    s = (np.arange(k)[None, None, :] < counts[..., None]).astype(float)
    return np.take_along_axis(s, rng.permuted(np.tile(np.arange(k), (*counts.shape, 1)), axis=-1), axis=-1)


def null_cdf(t: np.ndarray, k: int) -> tuple[int, np.ndarray]:
    """``(first, cdf)`` of ``sum_i a_i`` with ``a_i ~ Hypergeometric(2K, t_i, K)`` independently:
    scipy's pmfs convolved with numpy (an implementation apart from the module's)."""
    dist = np.ones(1)
    first = 0
    for ti in t:
        lo, hi = max(0, ti - k), min(ti, k)
        dist = np.convolve(dist, hypergeom.pmf(np.arange(lo, hi + 1), 2 * k, ti, k))
        first += lo
    return first, np.cumsum(dist)


def conditional_size(rejects: Callable[[list[int], list[int]], bool], t: np.ndarray, k: int) -> float:
    """The exact false-``ok`` rate of a test given the items' totals ``t`` (the null: a_i
    hypergeometric): the test's rejection region in ``A = sum a_i`` is found on its own output
    (it rejects for small A only: checked at the boundary), its probability read off
    :func:`null_cdf`."""
    first, cdf = null_cdf(t, k)

    def split(total: int) -> tuple[list[int], list[int]]:
        a: list[int] = []
        left = total
        for ti in t:  # any a with this sum: the conditional test depends on the sum alone
            lo, hi = max(0, int(ti) - k), min(int(ti), k)
            x = min(hi, max(lo, left - sum(max(0, int(u) - k) for u in t[len(a) + 1:])))
            a.append(x)
            left -= x
        return a, [int(ti) - x for ti, x in zip(t, a, strict=True)]

    lo_a, hi_a = first, first + len(cdf) - 1
    if not rejects(*split(lo_a)):
        return 0.0
    lo, hi = lo_a, hi_a  # the largest A that rejects (monotone: checked below)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if rejects(*split(mid)):
            lo = mid
        else:
            hi = mid - 1
    assert lo == hi_a or not rejects(*split(min(hi_a, lo + 1)))
    return float(cdf[lo - first])


def interval_rates(bounds: Callable[..., tuple[Any, Any]], d: np.ndarray, truth: float) -> tuple[float, float]:
    """(coverage of ``truth``, P(lower > 0)) of an interval from per-item differences ``d``
    (reps, m): ``bounds(m, s1, s2, s3)`` vectorised, joined with the delta as printed."""
    m = d.shape[1]
    lo, hi = bounds(m, d.sum(1), (d * d).sum(1), (d ** 3).sum(1))
    mean = d.mean(1)
    lo, hi = np.minimum(lo, mean), np.maximum(hi, mean)
    return float(np.mean((lo <= truth + 1e-12) & (truth - 1e-12 <= hi))), float(np.mean(lo > 0))
