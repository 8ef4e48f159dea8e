"""A mutation check (issue 18): each plausible bug in monte/stats/paired.py must make a check fail.

Each mutant is monte/stats/paired.py with a source edit (each must apply exactly where it is
meant to, so a mutant cannot rot silently), loaded as a module of its own. ``failures(module)`` runs the suite's
checks in compact form, cheapest first, and stops at the first that fails: the reference vectors,
verdict/interval/print agreement, the fractional simulation, false ``ok`` <= 0.025 at every n from
10 to 30, power at n = 200 against Bonett-Price's, fine-grid coverage >= 0.93 at n = 20 and 50.
The unmutated module must pass all of them; every mutant must fail one. The issue's four (z = 1.90,
the interval [-1, 1], SE over n, ``lower >= 0``) are here, each where it applies in the new code.
"""

from __future__ import annotations

import functools
import sys
import types
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from monte.stats import paired
from tests.stats.exact_enum import (
    coverage,
    discordance_grid,
    false_ok,
    fine_cells,
    ok_rate,
    outcome_grid,
)

VECTORS = [  # the reference vectors (docs/statistics.md): n, fixed, broken, Bonett-Price lower, upper
    (20, 5, 0, 0.011544, 0.443002), (50, 2, 7, -0.218400, 0.026093), (100, 10, 2, 0.008164, 0.148699),
    (500, 20, 10, -0.002097, 0.041938), (5000, 130, 95, 0.001097, 0.012898),
]
BONETT_PRICE_POWER_N200 = 0.7193  # test_exact.py computes it from the first method's formula


def skewed(rng: np.random.Generator, reps: int, n: int, share: float) -> tuple[np.ndarray, np.ndarray]:
    """The issue's skewed fractional design, ``share`` of the tasks changed (true delta 0)."""
    a = rng.integers(0, 5, (reps, n)) / 4
    low = rng.integers(0, 4, (reps, n)) / 4
    changed, up = rng.random((reps, n)) < share, rng.random((reps, n)) < 0.8
    return (np.where(changed, np.where(up, low, 1.0), a),
            np.where(changed, np.where(up, low + 0.25, 0.0), a))


def gain(rng: np.random.Generator, reps: int, n: int) -> tuple[np.ndarray, np.ndarray]:
    a = rng.integers(0, 5, (reps, n)) / 4
    return a, np.where(rng.random((reps, n)) < 0.3, np.minimum(a + 0.25, 1.0), a)


def failures(mod: Any, stop: bool = True) -> list[str]:
    """The checks ``mod`` fails, in order; with ``stop``, only the first."""
    out: list[str] = []

    def printed(f: Any, b: Any, n: int) -> tuple[Any, Any]:
        return mod.binary_bounds(f, b, n, where=np.where)

    for n, fixed, broken, lo, hi in VECTORS:
        if mod.bonett_price_interval(fixed, broken, n) != pytest.approx((lo, hi), abs=5e-7):
            out.append(f"reference vector n={n} fixed={fixed} broken={broken}")
            if stop:
                return out
    zero = mod.Delta(delta=0.1, lower=0.0, upper=0.2, n=20, paired=True, fixed=3, broken=1, method="m",
                     score_a=0.0, score_b=0.1)
    if zero.verdict != "STRIKE":
        out.append("a lower end of 0 is called ok")
        if stop:
            return out
    for n in (20, 55):
        f, b = np.meshgrid(np.arange(n + 1), np.arange(n + 1), indexing="ij")
        f, b = f[f + b <= n], b[f + b <= n]
        lower, upper = printed(f, b, n)
        if not np.array_equal(lower > 0, mod.mcnemar_rejects(f, b, n)):
            out.append(f"verdict and interval disagree at n={n}")
            if stop:
                return out
        if any(float(mod.format_bound(float(x))) <= 0 for x in lower[lower > 0]):
            out.append(f"an ok beside a lower end that prints <= 0 at n={n}")
            if stop:
                return out
    same = mod.paired_delta([0.3] * 50, [0.31] * 50)
    if not same.upper - same.lower > 0.01:
        out.append("equal fractional differences give a (nearly) zero-width interval")
        if stop:
            return out
    for n, share in ((20, 0.25), (50, 0.25), (200, 0.25), (20, 1.0), (50, 1.0)):
        a, b = skewed(np.random.default_rng(n), 2000, n, share)
        d = b - a
        s1 = d.sum(axis=1)
        lower, upper = mod.skew_corrected_bounds(n, s1, (d * d).sum(axis=1), (d**3).sum(axis=1))
        lower = np.minimum(lower, s1 / n)
        if np.mean(lower > 0) > 0.03:
            out.append(f"fractional false ok {np.mean(lower > 0):.3f} at n={n}, {share:.0%} changed")
            if stop:
                return out
    a, b = gain(np.random.default_rng(0), 2000, 200)
    d = b - a
    lower, _ = mod.skew_corrected_bounds(200, d.sum(axis=1), (d * d).sum(axis=1), (d**3).sum(axis=1))
    if np.mean(lower > 0) < 0.99:
        out.append("a clear fractional gain at n = 200 is not seen")
        if stop:
            return out
    for n in range(10, 31):
        rate = false_ok(n, outcome_grid(n, printed)[0], discordance_grid(n)).max()
        if rate > 0.025:
            out.append(f"false ok {rate:.4f} at n={n}")
            if stop:
                return out
            break
    if ok_rate(200, outcome_grid(200, printed)[0], 0.14, 0.06) < BONETT_PRICE_POWER_N200:
        out.append("power at n=200 below Bonett-Price's")
        if stop:
            return out
    for n in (20, 50):
        cov = min(coverage(n, *outcome_grid(n, printed), fine_cells()).values())
        if cov < 0.93:
            out.append(f"fine-grid coverage {cov:.4f} at n={n}")
            if stop:
                return out
    return out


MUTANTS: dict[str, list[tuple[str, str]]] = {
    # the four
    "z = 1.90": [("Z95 = 1.959963984540054", "Z95 = 1.90")],
    "the verdict's cutoff at z = 1.90": [("    k0, d0 = _cutoff(n) if alpha == ALPHA else level_cutoff(n, alpha)\n"
                                          "    k = fixed - broken",
                                          "    k0, d0 = 19, 100\n    k = fixed - broken")],
    "interval [-1, 1] (pass/fail)": [("    return lower, upper\n\n\ndef binary_interval",
                                      "    return lower * 0 - 1, upper * 0 + 1\n\n\ndef binary_interval")],
    "interval [-1, 1] (fractional)": [("    return mean - sd * h_inv(z) / root, mean - sd * h_inv(-z) / root",
                                       "    return mean * 0 - 1, mean * 0 + 1")],
    "SE over n (Bonett-Price)": [("    se = (((p12 + p21) - centre**2) / m) ** 0.5",
                                  "    se = (((p12 + p21) - centre**2) / (m * m)) ** 0.5")],
    "SE over n (score statistic)": [("    return (fixed - broken - n * d0) / (n * (2 * q + d0 * (1 - d0)) + 1e-300) ** 0.5",
                                     "    return (fixed - broken - n * d0) / (2 * q + d0 * (1 - d0) + 1e-300) ** 0.5")],
    "SE over n (fractional)": [("    root = m**0.5", "    root = m")],
    "lower >= 0": [("return OK if self.lower > 0 else STRIKE", "return OK if self.lower >= 0 else STRIKE")],
    # and the new method's own
    "size allowed 2 alpha": [("            if _size(n, candidates[mid], grid, alpha) <= alpha:",
                              "            if _size(n, candidates[mid], grid, alpha) <= 2 * alpha:")],
    "no join with Bonett-Price": [("    lower = where(up & (bp_lo <= 0), score_lo, where(bp_lo < score_lo, bp_lo, score_lo))",
                                   "    lower = score_lo")],
    "no skewness correction": [("    g = m3 / (m2 ** 1.5 + 1e-300)", "    g = m3 * 0")],
    "no pseudo-tasks": [("(s2 + 2)", "s2"), ("    m = n + 2\n    mean = s1 / m", "    m = n\n    mean = s1 / m")],
}


def load(name: str, edits: list[tuple[str, str]], monkeypatch: pytest.MonkeyPatch) -> types.ModuleType:
    source = Path(paired.__file__).read_text(encoding="utf-8")
    for old, new in edits:
        assert source.count(old) == (2 if old == "(s2 + 2)" else 1), f"mutant {name!r}: {old!r} moved"
        source = source.replace(old, new)
    module = types.ModuleType(f"paired_mutant_{abs(hash(name))}")
    monkeypatch.setitem(sys.modules, module.__name__, module)  # dataclasses look their module up
    exec(compile(source, f"<mutant {name}>", "exec"), module.__dict__)
    # the mutant calibrates its own cutoffs: the precomputed table (monte.stats._cutoffs) is the
    # real module's output, checked against the calibration by tests/stats/test_cutoff_table.py
    module.__dict__["_cutoff"] = functools.lru_cache(maxsize=512)(module._computed_cutoff)
    return module


def test_the_checks_pass_on_the_real_module() -> None:
    assert failures(paired) == []


@pytest.mark.parametrize("name", list(MUTANTS))
def test_every_mutant_fails_a_check(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    with np.errstate(all="ignore"):  # a mutant may overflow on its way to failing
        assert failures(load(name, MUTANTS[name], monkeypatch)), f"mutant {name!r} passes every check"
