"""Tests for monte/stats/paired.py: the reference test vectors (docs/statistics.md), the method's rules, the printing.

The expected numbers come from the reference vectors of docs/statistics.md, from hand computation, or from an independent
implementation (numpy / scipy.stats) written here, never from the module under test. The exact
enumerations on the fine grid are in test_exact.py, the fractional simulations in
test_fractional.py, the mutation check in test_mutations.py.
"""

from __future__ import annotations

import math
import subprocess
import sys
from typing import Any

import numpy as np
import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from scipy import stats as sps

from monte.stats import Z95, Delta, paired_delta, unpaired_delta, verdict
from monte.stats.paired import (
    augmented_interval,
    binary_interval,
    bonett_price_interval,
    clustered_t_interval,
    format_bound,
    format_interval,
    mcnemar_rejects,
    paired_t_interval,
    skew_corrected_interval,
)

TOL = 5e-7  # "must match to 6 decimals"


def flips(n: int, fixed: int, broken: int) -> tuple[list[int], list[int]]:
    """Pass/fail scores for n tasks with exactly these flips; the unchanged tasks alternate 0/1."""
    a = [0] * fixed + [1] * broken
    b = [1] * fixed + [0] * broken
    for i in range(n - fixed - broken):
        a.append(i % 2)
        b.append(i % 2)
    return a, b


# --- the reference test vectors (docs/statistics.md) ---------------------------------------------------------------------

VECTORS = [
    # n, fixed, broken, delta, lower, upper, verdict
    (20, 0, 0, 0.000000, -0.125991, 0.125991, "STRIKE"),
    (20, 3, 0, 0.150000, -0.054523, 0.327250, "STRIKE"),
    (20, 5, 0, 0.250000, 0.011544, 0.443002, "ok"),
    (20, 6, 1, 0.250000, -0.022553, 0.477098, "STRIKE"),
    (50, 2, 7, -0.100000, -0.218400, 0.026093, "STRIKE"),
    (100, 10, 2, 0.080000, 0.008164, 0.148699, "ok"),
    (164, 9, 4, 0.030488, -0.015378, 0.075619, "STRIKE"),
    (500, 20, 10, 0.020000, -0.002097, 0.041938, "STRIKE"),
    (1000, 0, 5, -0.005000, -0.010156, 0.000176, "STRIKE"),
    (5000, 130, 95, 0.007000, 0.001097, 0.012898, "ok"),
]


@pytest.mark.parametrize(("n", "fixed", "broken", "delta", "lower", "upper", "word"), VECTORS)
def test_stats_md_vectors(
    n: int, fixed: int, broken: int, delta: float, lower: float, upper: float, word: str
) -> None:
    # Bonett-Price itself still matches the reference vectors to 6 decimals ...
    assert bonett_price_interval(fixed, broken, n) == pytest.approx((lower, upper), abs=TOL)
    # ... and the printed delta keeps every vector's delta and verdict. Its interval is no longer
    # Bonett-Price alone (issue 18): it holds Bonett-Price's, except that a bound sits on the
    # exact test's side of 0. One vector changes that way: n = 1000, 0 fixed, 5 broken is a
    # significant regression by the exact unconditional test (z = -2.24 < -c_1000 = -1.97), so
    # its upper end is below 0 where Bonett-Price's was +0.000176; the verdict is STRIKE either way.
    a, b = flips(n, fixed, broken)
    d = paired_delta(a, b)
    assert d.delta == pytest.approx(delta, abs=TOL)
    assert d.verdict == word
    assert verdict(d) == word
    improved = bool(mcnemar_rejects(fixed, broken, n))
    regressed = bool(mcnemar_rejects(broken, fixed, n))
    assert improved == (word == "ok")
    assert d.lower > 0 if improved and lower <= 0 else d.lower <= lower + TOL
    assert d.upper < 0 if regressed and upper >= 0 else d.upper >= upper - TOL
    assert d.significant_regression == regressed == ((n, fixed, broken) == (1000, 0, 5))
    assert (d.n, d.fixed, d.broken, d.paired, d.method) == (n, fixed, broken, True, "exact-mcnemar+score")
    assert (d.lower, d.upper) == binary_interval(fixed, broken, n)


def test_task_order_does_not_matter() -> None:
    a, b = flips(100, 10, 2)
    perm = np.random.default_rng(0).permutation(100)
    shuffled = paired_delta([a[i] for i in perm], [b[i] for i in perm])
    assert shuffled == paired_delta(a, b)


# --- delta, symmetry, identical inputs ---------------------------------------------------------


@st.composite
def binary_pairs(draw: st.DrawFn) -> tuple[list[int], list[int]]:
    """0/1 scores drawn as flip counts, then shuffled (quicker than drawing 2n booleans)."""
    n = draw(st.integers(1, 400))
    fixed = draw(st.integers(0, n))
    broken = draw(st.integers(0, n - fixed))
    ones = draw(st.integers(0, n - fixed - broken))
    a = [0] * fixed + [1] * broken + [1] * ones + [0] * (n - fixed - broken - ones)
    b = [1] * fixed + [0] * broken + [1] * ones + [0] * (n - fixed - broken - ones)
    perm = np.random.default_rng(draw(st.integers(0, 2**32 - 1))).permutation(n)
    return [a[i] for i in perm], [b[i] for i in perm]


unit = st.floats(0.0, 1.0, allow_nan=False, allow_subnormal=False)


# Fractional scores, with 0 and 1 mixed in; a share of b copied from a so that both sides of
# the 40-non-zero switch get exercised.
@st.composite
def fractional_pairs(draw: st.DrawFn) -> tuple[list[float], list[float]]:
    n = draw(st.integers(1, 150))
    elements = unit | st.sampled_from([0.0, 1.0])
    a = draw(hnp.arrays(np.float64, n, elements=elements))
    b = draw(hnp.arrays(np.float64, n, elements=elements))
    same = draw(hnp.arrays(np.bool_, n))
    b = np.where(same, a, b)
    return a.tolist(), b.tolist()


any_pairs = binary_pairs() | fractional_pairs()


@given(binary_pairs())
def test_binary_delta_is_score_difference_and_flip_count(ab: tuple[list[int], list[int]]) -> None:
    a, b = ab
    d = paired_delta(a, b)
    n = len(a)
    fixed = sum(1 for x, y in zip(a, b, strict=True) if (x, y) == (0, 1))
    broken = sum(1 for x, y in zip(a, b, strict=True) if (x, y) == (1, 0))
    assert (d.fixed, d.broken, d.n) == (fixed, broken, n)
    assert d.delta == (fixed - broken) / n
    assert d.delta == pytest.approx(d.score_b - d.score_a, abs=1e-12)
    assert d.score_a == pytest.approx(sum(a) / n) and d.score_b == pytest.approx(sum(b) / n)


@given(any_pairs)
def test_swapping_a_and_b_negates_everything(ab: tuple[list[float], list[float]]) -> None:
    a, b = ab
    fwd, back = paired_delta(a, b), paired_delta(b, a)
    assert back.delta == pytest.approx(-fwd.delta, abs=1e-12)
    assert back.lower == pytest.approx(-fwd.upper, abs=1e-12)
    assert back.upper == pytest.approx(-fwd.lower, abs=1e-12)
    assert (back.fixed, back.broken) == (fwd.broken, fwd.fixed)
    assert back.method == fwd.method


@pytest.mark.parametrize(
    "scores",
    [[1, 0, 1, 1, 0], [0.0] * 30, [1.0] * 300, [0.25, 0.5, 0.75, 1.0] * 50, [0.3]],
)
def test_identical_inputs_are_a_strike(scores: list[float]) -> None:
    d = paired_delta(scores, list(scores))
    assert d.delta == 0
    assert d.lower < 0 < d.upper
    assert d.verdict == "STRIKE" and verdict(d) == "STRIKE"
    assert not d.significant_regression


def test_significant_regression_is_a_strike() -> None:
    a, b = flips(200, 2, 30)
    d = paired_delta(a, b)
    assert d.upper < 0 and d.significant_regression
    assert d.verdict == "STRIKE"


# --- which interval ----------------------------------------------------------------------------


def hall_by_hand(d: np.ndarray) -> tuple[float, float]:
    """Augment with +1 and -1, then Hall's (1992) transformation of the studentized mean,
    inverted numerically (bisection on the monotone cubic), with numpy's moments."""
    x = np.concatenate([d, [1.0, -1.0]])
    m = len(x)
    mean, sd = x.mean(), x.std(ddof=1)
    g = np.mean((x - mean) ** 3) / np.mean((x - mean) ** 2) ** 1.5
    a, b = g / (3 * math.sqrt(m)), g / (6 * math.sqrt(m))

    def h(t: float) -> float:
        return t + a * t * t + a * a * t**3 / 3 + b

    def inv(y: float) -> float:
        lo, hi = -1e3, 1e3
        for _ in range(200):
            mid = (lo + hi) / 2
            lo, hi = (mid, hi) if h(mid) < y else (lo, mid)
        return (lo + hi) / 2

    return mean - sd * inv(Z95) / math.sqrt(m), mean - sd * inv(-Z95) / math.sqrt(m)


def fractional_with_nonzero(k: int, n: int = 120) -> tuple[list[float], list[float]]:
    """n tasks with fractional scores, of which exactly k change between a and b."""
    rng = np.random.default_rng(k)
    a = rng.uniform(0.1, 0.6, n).round(3)
    b = a.copy()
    b[:k] += rng.uniform(-0.05, 0.35, k).round(3)
    b[:k][b[:k] == a[:k]] += 0.01
    return a.tolist(), b.tolist()


@pytest.mark.parametrize("k", [0, 1, 5, 39, 40, 41, 120])
def test_fractional_scores_use_the_skew_corrected_interval_at_any_count(k: int) -> None:
    # Issue 18: no switch to the plain t-interval at 40 changed tasks any more; it gave false
    # ok under skewed changes (see test_fractional.py).
    a, b = fractional_with_nonzero(k)
    d = paired_delta(a, b)
    assert d.method == "augmented-hall"
    assert (d.fixed, d.broken) == (None, None)
    diffs = np.array(b) - np.array(a)
    assert np.count_nonzero(diffs) == k
    assert d.delta == pytest.approx(diffs.mean(), abs=1e-12)
    lo, hi = hall_by_hand(diffs)
    assert skew_corrected_interval(diffs.tolist()) == pytest.approx((lo, hi), abs=1e-9)
    # the printed interval also holds the printed delta
    assert (d.lower, d.upper) == pytest.approx((min(lo, d.delta), max(hi, d.delta)), abs=1e-9)


@pytest.mark.parametrize("n", [2, 39, 40, 50, 1000])
def test_equal_differences_never_give_a_zero_width_interval(n: int) -> None:
    # Issue 18, point 3: [0.3]*50 -> [0.31]*50 printed [+0.0100, +0.0100] ok.
    d = paired_delta([0.3] * n, [0.31] * n)
    assert d.lower < 0.01 < d.upper
    if n <= 50:  # as few tasks cannot rule out a rare large drop (the pseudo-task d = -1)
        assert d.upper - d.lower > 0.08 and d.verdict == "STRIKE"
    else:
        assert d.upper - d.lower > 0.005


def test_binary_keeps_its_interval_at_any_number_of_flips() -> None:
    a, b = flips(400, 60, 30)
    assert paired_delta(a, b).method == "exact-mcnemar+score"


def test_augmented_interval_on_binary_data_is_bonett_price() -> None:
    # the first method's claim: "this reproduces Bonett-Price exactly when scores are 0/1". Every outcome, n = 20.
    n = 20
    for fixed in range(n + 1):
        for broken in range(n + 1 - fixed):
            d = [1.0] * fixed + [-1.0] * broken + [0.0] * (n - fixed - broken)
            assert augmented_interval(d) == pytest.approx(
                bonett_price_interval(fixed, broken, n), abs=1e-12
            )


def test_one_fractional_score_switches_to_the_fractional_interval() -> None:
    a, b01 = flips(100, 10, 2)
    b: list[float] = [*b01[:-1], 0.5]
    d = paired_delta(a, b)
    assert d.method == "augmented-hall" and d.fixed is None
    # Near the pass/fail answer: the same data, nearly.
    assert d.lower == pytest.approx(binary_interval(10, 2, 100)[0], abs=0.02)


def test_paired_t_interval_matches_scipy() -> None:
    a, b = fractional_with_nonzero(80)
    ci = sps.ttest_rel(b, a).confidence_interval(0.95)
    assert paired_t_interval(np.subtract(b, a).tolist()) == pytest.approx((ci.low, ci.high), abs=1e-10)


# --- clusters ----------------------------------------------------------------------------------


def miller_clustered_se(d: np.ndarray, clusters: list[str]) -> float:
    """Miller (2024): SE^2 = SE_CLT^2 + 1/n^2 sum_c sum_i sum_{j != i} e_ic e_jc."""
    n = len(d)
    e = d - d.mean()
    cross = 0.0
    keys = np.array(clusters)
    for c in set(clusters):
        ec = e[keys == c]
        cross += np.sum(np.outer(ec, ec)) - np.sum(ec**2)
    return math.sqrt(d.var(ddof=1) / n + cross / n**2)


def clustered_data(seed: int, n_clusters: int = 30, size: int = 8) -> tuple[Any, Any, list[str]]:
    """Fractional scores whose change is shared within a passage (strong clustering)."""
    rng = np.random.default_rng(seed)
    shift = np.repeat(rng.normal(0.0, 0.15, n_clusters), size)
    a = rng.uniform(0.2, 0.8, n_clusters * size)
    b = np.clip(a + 0.02 + shift + rng.normal(0, 0.02, a.size), 0, 1)
    keys = [f"passage-{i}" for i in range(n_clusters) for _ in range(size)]
    return a.tolist(), b.tolist(), keys


def test_clustered_t_interval_is_miller_with_clusters_as_units() -> None:
    a, b, keys = clustered_data(1)
    diffs = np.subtract(b, a)
    se = miller_clustered_se(diffs, keys)
    half = sps.t.ppf(0.975, 30 - 1) * se
    lower, upper = clustered_t_interval(diffs.tolist(), keys)
    assert (lower, upper) == pytest.approx((diffs.mean() - half, diffs.mean() + half), abs=1e-12)
    # Correlated passages: the clustered interval is much wider than the plain one.
    plain = paired_t_interval(diffs.tolist())
    assert upper - lower > 2 * (plain[1] - plain[0])
    d = paired_delta(a, b, clusters=keys)
    assert d.method == "augmented-hall+clustered"
    plain_d = paired_delta(a, b)
    assert plain_d.method == "augmented-hall"
    # the union of the two: clustering only widens
    assert (d.lower, d.upper) == pytest.approx((min(lower, plain_d.lower), max(upper, plain_d.upper)))
    assert d.lower == pytest.approx(lower)  # here the clustered SE is what sets the width


def test_singleton_clusters_reduce_to_the_plain_interval() -> None:
    a, b = fractional_with_nonzero(80)
    diffs = np.subtract(b, a).tolist()
    keys = [str(i) for i in range(len(a))]
    assert clustered_t_interval(diffs, keys) == pytest.approx(paired_t_interval(diffs), abs=1e-12)
    assert paired_delta(a, b, clusters=keys) == paired_delta(a, b)


def test_a_single_cluster_carries_no_information_and_is_ignored() -> None:
    a, b = fractional_with_nonzero(80)
    assert paired_delta(a, b, clusters=["p"] * len(a)) == paired_delta(a, b)


@given(any_pairs, st.integers(1, 6), st.randoms(use_true_random=False))
def test_clusters_only_ever_widen(
    ab: tuple[list[float], list[float]], n_keys: int, rnd: Any
) -> None:
    a, b = ab
    keys = [str(rnd.randrange(n_keys)) for _ in a]
    plain, clustered = paired_delta(a, b), paired_delta(a, b, clusters=keys)
    assert clustered.lower <= plain.lower and clustered.upper >= plain.upper
    assert clustered.delta == plain.delta
    assert (clustered.fixed, clustered.broken) == (plain.fixed, plain.broken)
    if 2 <= len(set(keys)) < len(keys):
        assert clustered.method == plain.method + "+clustered"
    else:
        assert clustered == plain


def test_small_binary_clustered_keeps_the_binary_interval_inside() -> None:
    a, b = flips(60, 8, 1)
    keys = [f"p{i // 6}" for i in range(60)]
    d = paired_delta(a, b, clusters=keys)
    assert d.method == "exact-mcnemar+score+clustered"
    inner = binary_interval(8, 1, 60)
    assert d.lower <= inner[0] and d.upper >= inner[1]
    assert (d.fixed, d.broken) == (8, 1)


# --- unpaired ----------------------------------------------------------------------------------


def test_unpaired_agresti_caffo_by_hand() -> None:
    # a: 30/50 passed, b: 35/50. Add a success and a failure to each: 31/52 and 36/52.
    # centre = 5/52; se = sqrt((31*21 + 36*16) / 52**3) = sqrt(1227 / 140608).
    d = unpaired_delta(0.6, 50, 0.7, 50)
    se = math.sqrt(1227 / 140608)
    assert d.delta == pytest.approx(0.1, abs=1e-12)
    assert d.lower == pytest.approx(5 / 52 - 1.959963984540054 * se, abs=1e-12)
    assert d.upper == pytest.approx(5 / 52 + 1.959963984540054 * se, abs=1e-12)
    assert d.lower == pytest.approx(-0.086936, abs=TOL)
    assert d.upper == pytest.approx(0.279244, abs=TOL)
    assert (d.paired, d.fixed, d.broken, d.n, d.method) == (False, None, None, 50, "agresti-caffo")
    assert verdict(d) is None


def test_unpaired_unequal_sizes() -> None:
    # 12/40 and 27/60: 13/42 and 28/62.
    d = unpaired_delta(0.3, 40, 0.45, 60)
    pa, pb = 13 / 42, 28 / 62
    se = math.sqrt(pa * (1 - pa) / 42 + pb * (1 - pb) / 62)
    assert (d.lower, d.upper) == pytest.approx((pb - pa - Z95 * se, pb - pa + Z95 * se))
    assert d.n == 40


def test_unpaired_welch_matches_scipy() -> None:
    rng = np.random.default_rng(3)
    a = rng.beta(2, 3, 80)
    b = rng.beta(3, 3, 50)
    sd_a, sd_b = float(a.std(ddof=1)), float(b.std(ddof=1))
    d = unpaired_delta(float(a.mean()), 80, float(b.mean()), 50, False, sd_a, sd_b)
    ci = sps.ttest_ind(b, a, equal_var=False).confidence_interval(0.95)
    assert d.method == "welch"
    assert (d.lower, d.upper) == pytest.approx((ci.low, ci.high), abs=1e-10)
    assert verdict(d) is None


def test_unpaired_fractional_without_sd_is_the_conservative_bound() -> None:
    d = unpaired_delta(0.42, 100, 0.5, 100, binary=False)
    assert "agresti-caffo" in d.method and "no sd" in d.method
    ac = unpaired_delta(0.42, 100, 0.5, 100)
    assert (d.lower, d.upper) == (ac.lower, ac.upper)


def test_intervals_are_clipped() -> None:
    d = unpaired_delta(0.0, 3, 1.0, 3)
    assert -1 <= d.lower <= d.upper <= 1
    assert paired_delta([0] * 3, [1] * 3).upper == 1.0


# --- bad input ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ([0, 1], [0]),
        ([], []),
        ([0.5, 1.2], [0.5, 0.5]),
        ([0.5, 0.5], [-0.1, 0.5]),
        ([0.5, float("nan")], [0.5, 0.5]),
        ([0.5, 0.5], [0.5, float("inf")]),
        (["x"], [1]),
        ("01", "10"),
    ],
)
def test_bad_paired_input_raises(a: Any, b: Any) -> None:
    with pytest.raises(ValueError):
        paired_delta(a, b)


def test_bad_clusters_raise() -> None:
    with pytest.raises(ValueError):
        paired_delta([0, 1], [1, 1], clusters=["a"])
    with pytest.raises(ValueError):
        paired_delta([0, 1], [1, 1], clusters="ab")


@pytest.mark.parametrize(
    "kwargs",
    [
        {"score_a": 1.5, "n_a": 10, "score_b": 0.5, "n_b": 10},
        {"score_a": float("nan"), "n_a": 10, "score_b": 0.5, "n_b": 10},
        {"score_a": 0.5, "n_a": 0, "score_b": 0.5, "n_b": 10},
        {"score_a": 0.5, "n_a": 10, "score_b": 0.5, "n_b": 2.5},
        {"score_a": 0.5, "n_a": 10, "score_b": 0.5, "n_b": 10, "sd_a": -0.1, "sd_b": 0.1},
    ],
)
def test_bad_unpaired_input_raises(kwargs: dict[str, Any]) -> None:
    with pytest.raises(ValueError):
        unpaired_delta(**kwargs)


# --- properties --------------------------------------------------------------------------------


@settings(max_examples=200)
@given(any_pairs)
def test_interval_properties(ab: tuple[list[float], list[float]]) -> None:
    a, b = ab
    d = paired_delta(a, b)
    event(d.method)
    assert isinstance(d, Delta)
    assert -1.0 <= d.lower <= d.upper <= 1.0
    # The printed delta lies inside its own interval (the adjusted centre is pulled toward 0 by
    # less than the half-width), so the line never reads as self-contradictory.
    assert d.lower <= d.delta <= d.upper
    assert d.verdict == ("ok" if d.lower > 0 else "STRIKE")
    assert d.significant_regression == (d.upper < 0)
    assert not (d.verdict == "ok" and d.significant_regression)


@given(
    st.floats(0, 1), st.integers(1, 10_000), st.floats(0, 1), st.integers(1, 10_000), st.booleans()
)
def test_unpaired_properties(sa: float, na: int, sb: float, nb: int, binary: bool) -> None:
    d = unpaired_delta(sa, na, sb, nb, binary=binary)
    assert -1.0 <= d.lower <= d.upper <= 1.0
    assert d.delta == sb - sa
    assert verdict(d) is None


# --- verdict, interval and what is printed ----------------------------------------------------


def test_a_lower_end_of_exactly_zero_is_a_strike() -> None:
    # "ok" is lower > 0, never lower >= 0 (the mutation check in test_mutations.py relies on it)
    d = Delta(delta=0.1, lower=0.0, upper=0.2, n=20, paired=True, fixed=3, broken=1,
              method="m", score_a=0.0, score_b=0.1)
    assert d.verdict == "STRIKE" and verdict(d) == "STRIKE"
    assert Delta(**{**d.__dict__, "lower": 1e-300}).verdict == "ok"
    assert not Delta(**{**d.__dict__, "upper": 0.0}).significant_regression


def test_issue_example_prints_a_positive_lower_end_beside_ok() -> None:
    # Issue 18, point 4: n = 55, fixed 7, broken 1 printed "+0.1091 [+0.0000, +0.2105] ... ok".
    a, b = flips(55, 7, 1)
    d = paired_delta(a, b)
    assert d.verdict == "ok" and 0 < d.lower < 5e-5
    text = format_interval(d.lower, d.upper)
    assert text.startswith("[+0.0000") and float(text[1:].split(",")[0]) > 0
    assert text == "[+0.00002, +0.2305]"


@given(st.floats(-1, 1, allow_nan=False, allow_subnormal=False), st.integers(0, 6))
def test_format_bound_never_prints_a_non_zero_bound_as_zero(x: float, digits: int) -> None:
    text = format_bound(x, digits)
    assert (float(text) > 0) == (x > 0) and (float(text) < 0) == (x < 0)
    assert "e" in text or len(text.split(".")[-1]) >= digits
    if abs(x) >= 10 ** -digits:
        assert text == f"{x:+.{digits}f}"  # nothing changes where the plain format already reads right


# --- import cost -------------------------------------------------------------------------------


def test_importing_monte_stats_does_not_import_scipy() -> None:
    code = (
        "import sys, monte.stats; print(sorted(m for m in ('scipy', 'numpy') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
