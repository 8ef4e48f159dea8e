"""A mutation check for K samples per item (issue 33): each plausible bug in
monte/stats/samples.py must make one of the compact checks below fail; the unmodified module
passes them all. Each mutant is the module's source with one edit (which must apply exactly once,
so a mutant cannot rot silently), loaded as a module of its own.

The checks, cheapest first: the K = 1 delta is today's on the reference vectors; the p-value is
exact (against rationals); the exact test's false-``ok`` rate given t is <= 0.025 (exact, on its
own rejection region); the verdict implies the exact test; the item-level interval covers >= 0.94
where the change differs by item (mirror: half the items better, half worse; and a heterogeneous
change), simulated on the module's own per-item differences.
"""

from __future__ import annotations

import random
import sys
import types
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from monte.stats import samples
from monte.stats.paired import ALPHA, paired_delta, skew_corrected_bounds
from tests.stats.sample_designs import (
    COVERAGE,
    STRONG_NULLS,
    conditional_size,
    draw,
    interval_rates,
)
from tests.stats.test_paired_stats import VECTORS, flips
from tests.stats.test_samples import fraction_pvalue

SOURCE = Path(samples.__file__).read_text()
#: K = 2, n = 30 successes of each model per item (what the clamp is for)
CLAMPED = ([1, 2, 0, 1, 1, 1, 2, 1, 1, 1, 0, 0, 2, 0, 2, 0, 0, 0, 2, 0, 1, 2, 1, 2, 1, 0, 2, 2, 1, 1],
           [1, 2, 1, 2, 1, 0, 2, 1, 1, 1, 1, 0, 1, 0, 2, 1, 2, 1, 2, 1, 1, 2, 1, 2, 2, 2, 2, 2, 2, 1])

MUTANTS = {
    # the one the issue names: every sample its own unit (n K differences, not n)
    "samples treated as independent": (
        "    return [math.fsum(y) / len(y) - math.fsum(x) / len(x) for x, y in zip(a, b, strict=True)]",
        "    return [v - u for x, y in zip(a, b, strict=True) for u, v in zip(x, y, strict=True)]"),
    "a binomial, not a hypergeometric, null": (
        "[math.comb(t, a) * math.comb(2 * k - t, k - a) for a in range(lo, hi + 1)]",
        "[math.comb(t, a) for a in range(lo, hi + 1)]"),
    "the p-value at 2 alpha": ("<= ALPHA * (1 - _MARGIN)", "<= 2 * ALPHA * (1 - _MARGIN)"),
    "the p-value one step too far (P(A < observed))": (
        "math.fsum(dist[: observed - shift + 1])", "math.fsum(dist[: observed - shift])"),
    "the interval alone (no exact test)": (
        "    if lower > 0 and not exact_rejects(ca, cb, k):\n        lower = 0.0",
        "    if False:\n        lower = 0.0"),
    "K = 1 through the item-level method": ("    if k == 1:  # today's", "    if k == 0:  # today's"),
}


def mutant(name: str) -> Any:
    old, new = MUTANTS[name]
    assert SOURCE.count(old) == 1, f"mutant {name!r} no longer applies"
    mod = types.ModuleType(f"samples_mutant_{abs(hash(name))}")
    mod.__dict__["__file__"] = samples.__file__
    sys.modules[mod.__name__] = mod  # dataclasses look their module up
    exec(compile(SOURCE.replace(old, new), samples.__file__, "exec"), mod.__dict__)
    return mod


def _counts(mod: Any, a: np.ndarray, b: np.ndarray, k: int) -> tuple[list[list[float]], list[list[float]]]:
    return ([[1.0] * int(c) + [0.0] * (k - int(c)) for c in a], [[1.0] * int(c) + [0.0] * (k - int(c)) for c in b])


def failures(mod: Any, stop: bool = True) -> list[str]:
    out: list[str] = []

    def fail(what: str) -> bool:
        out.append(what)
        return stop

    for n, fixed, broken, *_ in VECTORS[:6]:
        fa, fb = flips(n, fixed, broken)
        if mod.sampled_delta([[x] for x in fa], [[y] for y in fb]).d != paired_delta(fa, fb) and fail(
                f"K = 1 is not today's delta (n {n}, fixed {fixed}, broken {broken})"):
            return out
    rng = random.Random(3)
    for k in (2, 4):
        for _ in range(4):
            ta = [rng.randint(0, k) for _ in range(10)]
            tb = [rng.randint(0, k) for _ in range(10)]
            if mod.conditional_pvalue(ta, tb, k) != pytest.approx(float(fraction_pvalue(ta, tb, k)), rel=1e-12) and fail(
                    f"the p-value is not exact (K {k})"):
                return out
    nrng = np.random.default_rng(5)
    worst = 0.0
    for design in STRONG_NULLS.values():
        a, b, _ = draw(design, nrng, 3, 30, 4)
        for t in a + b:
            worst = max(worst, conditional_size(lambda x, y: mod.exact_rejects(x, y, 4, convolve=np.convolve), t, 4))
    if worst > ALPHA and fail(f"false ok given t {worst:.4f} > 0.025 (n 30, K 4)"):
        return out
    # a rare case (2 in 20,000 random draws): the item-level interval's lower end is above 0
    # (+0.0070) and the exact test does not reject: the verdict is a STRIKE, the lower end 0
    if mod.sampled_delta(*_counts(mod, np.array(CLAMPED[0]), np.array(CLAMPED[1]), 2)).d.verdict == "ok" and fail(
            "an ok the exact test does not give"):
        return out
    for name in ("mirror: p_b = 1 - p_a, p_a ~ U(0, 1)", "heterogeneous change, p_a ~ Beta(0.5, 0.5)"):
        a, b, truth = draw(COVERAGE[name], nrng, 600, 50, 8)
        sa = [_counts(mod, x, y, 8) for x, y in zip(a, b, strict=True)]
        d = np.array([mod.item_differences(x, y) for x, y in sa])
        cov, _ = interval_rates(skew_corrected_bounds, d, truth)
        if cov < 0.94 and fail(f"coverage {cov:.3f} < 0.94 ({name}, n 50, K 8)"):
            return out
    return out


def test_the_module_passes_every_check() -> None:
    assert failures(samples, stop=False) == []


@pytest.mark.parametrize("name", list(MUTANTS))
def test_each_mutant_fails_a_check(name: str) -> None:
    assert failures(mutant(name)), f"mutant {name!r} passes every check"
