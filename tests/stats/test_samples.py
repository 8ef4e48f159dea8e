"""K samples per item (issue 33): the exact conditional test, its size, the K = 1 reduction, the
item-level interval's coverage, pass@k and the design effect (monte/stats/samples.py)."""

from __future__ import annotations

import math
import random
from fractions import Fraction

import numpy as np
import pytest

from monte.stats import samples
from monte.stats.paired import paired_delta, skew_corrected_bounds
from monte.stats.samples import (
    conditional_pvalue,
    design_effect,
    exact_rejects,
    hypergeometric_weights,
    pass_at_k,
    sampled_delta,
)
from tests.stats.sample_designs import COVERAGE, STRONG_NULLS, WEAK_NULLS, draw
from tests.stats.test_paired_stats import VECTORS, flips


def fraction_pvalue(a: list[int], b: list[int], k: int) -> Fraction:
    """The p-value in exact rationals: the convolution of Hypergeometric(2K, t_i, K)."""
    dist = {0: Fraction(1)}
    total = math.comb(2 * k, k)
    for ai, bi in zip(a, b, strict=True):
        first, w = hypergeometric_weights(ai + bi, k)
        new: dict[int, Fraction] = {}
        for s, p in dist.items():
            for j, x in enumerate(w):
                new[s + first + j] = new.get(s + first + j, Fraction(0)) + p * Fraction(x, total)
        dist = new
    return sum((p for s, p in dist.items() if s <= sum(a)), Fraction(0))


@pytest.mark.parametrize("k", [1, 2, 3, 4, 8])
def test_pvalue_is_exact(k: int) -> None:
    rng = random.Random(k)
    for _ in range(6):
        n = rng.randint(1, 14)
        a = [rng.randint(0, k) for _ in range(n)]
        b = [rng.randint(0, k) for _ in range(n)]
        exact = fraction_pvalue(a, b, k)
        got = conditional_pvalue(a, b, k)
        assert got == pytest.approx(float(exact), rel=1e-12, abs=1e-300)


def test_pvalue_large_matches_numpy_and_is_fast() -> None:
    import time

    rng = random.Random(5)
    a = [rng.randint(0, 16) for _ in range(200)]
    b = [min(16, x + rng.randint(0, 2)) for x in a]
    t0 = time.perf_counter()
    p = conditional_pvalue(a, b, 16)
    took = time.perf_counter() - t0
    # numpy's convolve, the reference: it returns an ndarray, which typing does not call a Sequence
    assert p == pytest.approx(conditional_pvalue(a, b, 16, convolve=np.convolve), rel=1e-10)  # type: ignore[arg-type]
    assert 0 < p < 1e-6
    assert took < 10  # ~0.4 s idle on the 2-core machine (K = 16, n = 200: the largest grid cell)


def test_k1_is_the_conditional_mcnemar_test() -> None:
    # at K = 1 the hypergeometric of a discordant item (t = 1) is a fair coin, of a concordant one
    # a point mass: P(broken <= observed) = P(Binomial(D, 1/2) >= fixed), the exact conditional McNemar
    for n, fixed, broken, *_ in VECTORS:
        if n > 600:
            continue
        a, b = flips(n, fixed, broken)
        d = fixed + broken
        binom = sum(math.comb(d, j) for j in range(fixed, d + 1)) / 2 ** d
        assert conditional_pvalue(a, b, 1) == pytest.approx(binom, rel=1e-12)


@pytest.mark.parametrize(("n", "fixed", "broken"), [v[:3] for v in VECTORS])
def test_k1_is_todays_delta_on_every_vector(n: int, fixed: int, broken: int) -> None:
    a, b = flips(n, fixed, broken)
    s = sampled_delta([[x] for x in a], [[y] for y in b])
    assert s.d == paired_delta(a, b)  # every field: delta, interval, verdict, method, counts
    assert s.samples == 1 and s.pvalue is None and s.effective_n == n and s.design_effect == 1.0


def test_k1_is_todays_delta_fractional_and_clustered() -> None:
    rng = np.random.default_rng(3)
    a = list(rng.integers(0, 5, 60) / 4)
    b = list(np.clip(np.array(a) + rng.choice([0, 0.25], 60), 0, 1))
    keys = [f"c{i // 3}" for i in range(60)]
    assert sampled_delta([[x] for x in a], [[y] for y in b]).d == paired_delta(a, b)
    assert sampled_delta([[x] for x in a], [[y] for y in b], clusters=keys).d == paired_delta(a, b, keys)


def test_k1_outcome_grid_is_todays() -> None:
    # every (fixed, broken) at n = 20: the K = 1 verdict and interval are today's, outcome by outcome
    for fixed in range(21):
        for broken in range(21 - fixed):
            a, b = flips(20, fixed, broken)
            assert sampled_delta([[x] for x in a], [[y] for y in b]).d == paired_delta(a, b)


def _samples(counts: np.ndarray, k: int) -> list[list[float]]:
    return [[1.0] * int(c) + [0.0] * (k - int(c)) for c in counts]



# --- the printed interval and the verdict, case by case -----------------------------------------


def test_the_item_level_interval_is_the_printed_one() -> None:
    rng = np.random.default_rng(2)
    for _ in range(30):
        a, b, _ = draw(COVERAGE["heterogeneous change, p_a ~ Beta(0.5, 0.5)"], rng, 1, 30, 4)
        s = sampled_delta(_samples(a[0], 4), _samples(b[0], 4))
        d = (b[0] - a[0]) / 4
        lo, hi = skew_corrected_bounds(30, d.sum(), (d * d).sum(), (d ** 3).sum())
        lo, hi = min(max(lo, -1), d.mean()), max(min(hi, 1), d.mean())
        assert s.d.lower == pytest.approx(lo, abs=1e-12) or s.d.lower == 0.0 < lo
        assert s.d.upper == pytest.approx(hi, abs=1e-12) or s.d.upper == 0.0 > hi


def test_verdict_is_the_exact_test_and_the_interval() -> None:
    rng = np.random.default_rng(4)
    seen = {"ok": 0, "clamped": 0}
    for _ in range(150):
        a, b, _ = draw(COVERAGE["uniform +0.1, p_a ~ U(0, 0.8)"], rng, 1, int(rng.integers(8, 40)), 4)
        s = sampled_delta(_samples(a[0], 4), _samples(b[0], 4))
        rejects = exact_rejects(list(a[0]), list(b[0]), 4)
        if s.d.verdict == "ok":
            seen["ok"] += 1
            assert rejects and s.d.lower > 0
        if s.d.lower == 0.0:
            seen["clamped"] += 1
            assert not rejects
        assert s.d.lower <= s.d.delta <= s.d.upper
    assert seen["ok"] > 20


def test_fractional_samples_keep_todays_method_per_item() -> None:
    rng = np.random.default_rng(6)
    a = (rng.integers(0, 5, (40, 4)) / 4).tolist()
    b = (np.clip(np.array(a) + 0.25, 0, 1)).tolist()
    s = sampled_delta(a, b)
    d = [np.mean(y) - np.mean(x) for x, y in zip(a, b, strict=True)]
    lo, hi = skew_corrected_bounds(40, sum(d), sum(x * x for x in d), sum(x ** 3 for x in d))
    assert s.pvalue is None and s.d.method == samples.ITEM_FRACTIONAL
    assert (s.d.lower, s.d.upper) == pytest.approx((min(lo, s.d.delta), max(hi, s.d.delta)))


# --- pass@k and the design effect --------------------------------------------------------------


def test_pass_at_k_is_chen_et_al() -> None:
    assert pass_at_k(0, 8, 1) == 0 and pass_at_k(8, 8, 8) == 1
    assert pass_at_k(3, 8, 1) == pytest.approx(3 / 8)
    assert pass_at_k(1, 8, 8) == 1.0  # one correct among 8: pass@8 is certain
    assert pass_at_k(2, 4, 2) == pytest.approx(1 - 1 / 6)
    # unbiased: E[pass@k estimate] = 1 - (1 - p)^k for c ~ Binomial(K, p)
    p, k, kk = 0.3, 8, 4
    mean = sum(math.comb(k, c) * p ** c * (1 - p) ** (k - c) * pass_at_k(c, k, kk) for c in range(k + 1))
    assert mean == pytest.approx(1 - (1 - p) ** kk, rel=1e-12)
    with pytest.raises(ValueError):
        pass_at_k(1, 4, 5)


def test_pass_at_deltas() -> None:
    a = [[1.0, 0, 0, 0]] * 10 + [[0.0] * 4] * 10
    b = [[1.0, 1, 0, 0]] * 10 + [[1.0, 0, 0, 0]] * 10
    s = sampled_delta(a, b, pass_at=[1, 4])
    one, four = s.pass_at
    assert one.delta == pytest.approx(s.d.delta) == pytest.approx(0.5 * 0.25 + 0.5 * 0.25)
    assert four.k == 4 and four.delta == pytest.approx(0.5) and four.lower <= four.delta <= four.upper


def test_design_effect() -> None:
    rng = np.random.default_rng(8)
    # the same p for every item and no change: K samples are worth n K single answers
    a, b, _ = draw(STRONG_NULLS["p 0.5 every item"], rng, 1, 400, 8)
    eff, deff, _ = design_effect(_samples(a[0], 8), _samples(b[0], 8))
    assert 0.8 * 3200 <= eff <= 3200 and 1 <= deff <= 1.25
    # every item changes by +-0.4: the between-item spread dominates, K buys little
    a, b, _ = draw(WEAK_NULLS["mirror: p_b = 1 - p_a, p_a ~ U(0, 1)"], rng, 1, 400, 8)
    eff, deff, _ = design_effect(_samples(a[0], 8), _samples(b[0], 8))
    assert 400 <= eff < 1000 and deff > 3
    assert design_effect([[1.0]] * 5, [[0.0]] * 5)[:2] == (5.0, 1.0)


def test_the_exact_test_can_hold_back_an_interval_above_zero() -> None:
    from tests.stats.test_sample_mutations import CLAMPED

    a, b = (_samples(np.array(x), 2) for x in CLAMPED)
    item = samples._item_delta(a, b, None)
    assert item.lower > 0 and not exact_rejects(*CLAMPED, 2)
    s = sampled_delta(a, b)
    assert s.d.lower == 0.0 and s.d.verdict == "STRIKE" and s.d.upper == item.upper
