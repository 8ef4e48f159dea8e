"""K samples per item (issue 33), simulated: the verdict's false-``ok`` rate at no change (exact
given the items' totals, and the item-level interval's over 20,000 seeded reps) and the printed
interval's coverage, on every design of ``sample_designs.py``. The exact checks of the same
functions (the p-value in rationals, the K = 1 reduction, pass@k) are ``test_samples.py``.

These are the slow side of the suite by their file name (tests/conftest.py): ~15 s of numpy."""

from __future__ import annotations

import math

import numpy as np
import pytest

from monte.stats.paired import ALPHA, binary_bounds, skew_corrected_bounds
from monte.stats.samples import exact_rejects, sampled_delta
from tests.stats.exact_enum import discordance_grid, false_ok, outcome_grid
from tests.stats.sample_designs import (
    COVERAGE,
    STRONG_NULLS,
    WEAK_NULLS,
    conditional_size,
    draw,
    interval_rates,
)
from tests.stats.test_samples import _samples

# --- the false-ok rate at no change ------------------------------------------------------------

#: t-vectors drawn per (design, K, n) cell: each one's false-ok rate is computed exactly
DRAWS = {20: 6, 50: 4, 100: 3, 200: 2}


@pytest.mark.parametrize("n", [20, 50, 100, 200])
def test_false_ok_k1_exact(n: int) -> None:
    # K = 1 is today's verdict: exact enumeration over every outcome, at every discordance
    lower, _ = outcome_grid(n, lambda f, b, m: binary_bounds(f, b, m, where=np.where))
    assert float(np.max(false_ok(n, lower, discordance_grid(n)))) <= ALPHA


@pytest.mark.parametrize("k", [4, 8, 16])
@pytest.mark.parametrize("n", [20, 50, 100, 200])
def test_false_ok_exact_given_t(k: int, n: int) -> None:
    """Under "no change" (each item's 2K samples iid Bernoulli(p_i), p_i any), the verdict's
    false-``ok`` rate given the items' totals t is at most the exact test's, which is computed
    exactly (scipy's hypergeometric pmfs, numpy's convolution) on the test's own rejection region
    for t-vectors drawn from every strong-null design (equal and heterogeneous p_i). Each is
    <= 0.025, so is their mean over t: the false-ok rate at those p_i."""
    rng = np.random.default_rng(1000 * k + n)
    worst = 0.0
    for design in STRONG_NULLS.values():
        a, b, _ = draw(design, rng, DRAWS[n], n, k)
        for t in a + b:
            size = conditional_size(lambda x, y: exact_rejects(x, y, k, convolve=np.convolve), t, k)  # type: ignore[arg-type]
            worst = max(worst, size)
    assert worst <= ALPHA
    assert worst > 0.5 * ALPHA  # not vacuous: the test spends most of its level


@pytest.mark.parametrize("n", [50, 200])
@pytest.mark.parametrize("name", list(STRONG_NULLS) + list(WEAK_NULLS))
def test_false_ok_of_the_interval(name: str, n: int) -> None:
    """The second half of the verdict, simulated (20,000 reps, K = 8): the item-level interval's
    P(lower > 0) at no change, also where items change both ways (the weaker null, where the
    exact test alone does not hold: test_exact_test_alone_fails_the_weak_null)."""
    rng = np.random.default_rng(7)
    a, b, truth = draw(STRONG_NULLS.get(name) or WEAK_NULLS[name], rng, 20_000, n, 8)
    _, ok = interval_rates(skew_corrected_bounds, (b - a) / 8, truth)
    assert ok <= ALPHA + 2 * math.sqrt(ALPHA * (1 - ALPHA) / 20_000)


def test_exact_test_alone_fails_the_weak_null() -> None:
    # half the items get better and half worse: the hypergeometric null is false for each item,
    # and the exact test alone says "ok" far more often than 2.5 %; the verdict needs the interval
    rng = np.random.default_rng(11)
    a, b, _ = draw(WEAK_NULLS["mirror: p_b = 1 - p_a, p_a ~ U(0, 1)"], rng, 200, 50, 8)
    rate = np.mean([exact_rejects(list(x), list(y), 8, convolve=np.convolve)  # type: ignore[arg-type]
                    for x, y in zip(a, b, strict=True)])
    assert rate > 0.1
    verdicts = [sampled_delta(_samples(x, 8), _samples(y, 8)).d.verdict == "ok" for x, y in zip(a[:60], b[:60], strict=True)]
    assert sum(verdicts) <= 3  # what the interval allows: 0.024 on 20,000 reps (above)


# --- coverage of the printed interval ----------------------------------------------------------


@pytest.mark.parametrize("k", [4, 8, 16])
@pytest.mark.parametrize("n", [20, 50, 100, 200])
def test_coverage(k: int, n: int) -> None:
    """The printed interval holds the item-level interval (it can only be widened to 0), so its
    coverage is at least that one's: >= 0.94 in every design, 4,000 seeded reps a cell (se 0.004)."""
    rng = np.random.default_rng(k * 7 + n)
    for name, design in COVERAGE.items():
        a, b, truth = draw(design, rng, 4_000, n, k)
        cov, _ = interval_rates(skew_corrected_bounds, (b - a) / k, truth)
        assert cov >= 0.94, (name, cov)
