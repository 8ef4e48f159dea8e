"""Fractional-score designs and intervals, shared by tests/stats/test_fractional.py and
bench/fractional_false_ok.py (issue 18). The designs and the old methods are written here; the
interval judged is the implemented one (``skew_corrected_bounds``, vectorised over replicates,
joined with the delta as ``paired_delta`` does)."""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
from scipy import stats as sps

from monte.stats.paired import Z95, skew_corrected_bounds

Design = Callable[[np.random.Generator, int, int], tuple[np.ndarray, np.ndarray]]
Method = Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]]


def skewed(changed: float) -> Design:
    """The issue's design: scores in {0, .25, ..., 1}; a changed task either gains 0.25 (80 %)
    or drops 1 -> 0 (20 %); true delta 0.8 * 0.25 - 0.2 = 0."""

    def draw(rng: np.random.Generator, reps: int, n: int) -> tuple[np.ndarray, np.ndarray]:
        a = rng.integers(0, 5, (reps, n)) / 4
        low = rng.integers(0, 4, (reps, n)) / 4
        ch = rng.random((reps, n)) < changed
        up = rng.random((reps, n)) < 0.8
        return (np.where(ch, np.where(up, low, 1.0), a),
                np.where(ch, np.where(up, low + 0.25, 0.0), a))

    return draw


def rubric_skewed(rng: np.random.Generator, reps: int, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Rubric scores, half the tasks change: +0.25 (75 %) or -0.75 (25 %); true delta 0."""
    a = rng.integers(0, 5, (reps, n)) / 4
    low, high = rng.integers(0, 4, (reps, n)) / 4, rng.integers(3, 5, (reps, n)) / 4
    ch, up = rng.random((reps, n)) < 0.5, rng.random((reps, n)) < 0.75
    return (np.where(ch, np.where(up, low, high), a),
            np.where(ch, np.where(up, low + 0.25, high - 0.75), a))


def rubric(rng: np.random.Generator, reps: int, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Rubric scores, 30 % of tasks re-scored from the same distribution (exchangeable)."""
    a = rng.integers(0, 5, (reps, n)) / 4
    return a, np.where(rng.random((reps, n)) < 0.3, rng.integers(0, 5, (reps, n)) / 4, a)


def ties(rng: np.random.Generator, reps: int, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Many ties at 0 and 1 (40 % each, the rest uniform), 40 % of tasks re-drawn."""

    def draw() -> np.ndarray:
        u = rng.random((reps, n))
        return np.where(u < 0.4, 0.0, np.where(u < 0.8, 1.0, rng.random((reps, n))))

    a = draw()
    return a, np.where(rng.random((reps, n)) < 0.4, draw(), a)


def beta(rng: np.random.Generator, reps: int, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Beta scores of different shapes, equal means: a ~ Beta(5, 2), b ~ Beta(2, 0.8)."""
    return rng.beta(5, 2, (reps, n)), rng.beta(2, 0.8, (reps, n))


def beta_rare(rng: np.random.Generator, reps: int, n: int) -> tuple[np.ndarray, np.ndarray]:
    """20 % of tasks change, from Beta(5, 2) to Beta(2, 0.8) (equal means)."""
    a = rng.beta(5, 2, (reps, n))
    return a, np.where(rng.random((reps, n)) < 0.2, rng.beta(2, 0.8, (reps, n)), a)


NULL_DESIGNS: dict[str, Design] = {
    "skewed, 25 % changed": skewed(0.25), "skewed, all changed": skewed(1.0),
    "rubric, skewed": rubric_skewed, "rubric": rubric, "ties at 0 and 1": ties,
    "beta": beta, "beta, 20 % changed": beta_rare,
}


def implemented(d: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    n = d.shape[1]
    s1 = d.sum(axis=1)
    lower, upper = skew_corrected_bounds(n, s1, (d * d).sum(axis=1), (d**3).sum(axis=1))
    return np.minimum(lower, s1 / n), np.maximum(upper, s1 / n)


def paired_t(d: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    n = d.shape[1]
    half = sps.t.ppf(0.975, n - 1) * d.std(axis=1, ddof=1) / math.sqrt(n)
    return d.mean(axis=1) - half, d.mean(axis=1) + half


def augmented(d: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    m = d.shape[1] + 2
    dbar = d.sum(axis=1) / m
    se = np.sqrt(((d * d).sum(axis=1) + 2) / m - dbar**2) / math.sqrt(m)
    return dbar - Z95 * se, dbar + Z95 * se


def old_method(d: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """What monte printed before issue 18: augmented below 40 changed tasks, t from 40 on."""
    lo_a, hi_a = augmented(d)
    lo_t, hi_t = paired_t(d)
    use_t = (np.count_nonzero(d, axis=1) >= 40)
    return np.where(use_t, lo_t, lo_a), np.where(use_t, hi_t, hi_a)


def shifted(rng: np.random.Generator, reps: int, n: int) -> tuple[np.ndarray, np.ndarray]:
    """A real gain: rubric scores, 30 % of tasks gain 0.25 (capped at 1); delta 0.06."""
    a = rng.integers(0, 5, (reps, n)) / 4
    return a, np.where(rng.random((reps, n)) < 0.3, np.minimum(a + 0.25, 1.0), a)


def beta_gain(rng: np.random.Generator, reps: int, n: int) -> tuple[np.ndarray, np.ndarray]:
    """a ~ Beta(2, 2), b ~ Beta(2.5, 2): delta 2.5 / 4.5 - 0.5."""
    return rng.beta(2, 2, (reps, n)), rng.beta(2.5, 2, (reps, n))


#: designs with a real gain, and their true delta
GAIN_DESIGNS: dict[str, tuple[Design, float]] = {
    "rubric, 30 % gain 0.25": (shifted, 0.06), "beta(2.5, 2) vs beta(2, 2)": (beta_gain, 2.5 / 4.5 - 0.5),
}
METHODS: dict[str, Method] = {"monte (augmented-hall)": implemented, "before issue 18": old_method,
                              "paired t": paired_t, "augmented": augmented}
