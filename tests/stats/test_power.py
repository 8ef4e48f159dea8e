"""The smallest effect a test read can see (issue 18): monte/stats/power.py.

The stated power must be the power of the verdict monte prints: checked here by simulating
outcomes and judging each with the printed interval (``binary_bounds``), at n = 50, 200, 1,000,
within 3 points. Seeded; 8,000 replicates (standard error at 0.8: 0.0045).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from scipy.stats import binom

from monte.stats.paired import binary_bounds, mcnemar_critical, mcnemar_rejects
from monte.stats.power import (
    PRIOR_DISCORDANCE,
    describe_detectable,
    detectable,
    minimum_detectable_effect,
    pooled_discordance,
    power,
)


def simulated_power(n: int, discordance: float, effect: float, reps: int = 8000, seed: int = 0) -> float:
    rng = np.random.default_rng(seed)
    p_fixed, p_broken = (discordance + effect) / 2, (discordance - effect) / 2
    counts = rng.multinomial(n, [p_fixed, p_broken, 1 - p_fixed - p_broken], size=reps)
    lower, _ = binary_bounds(counts[:, 0], counts[:, 1], n, where=np.where)
    return float(np.mean(lower > 0))


@pytest.mark.parametrize(("n", "discordance"), [(50, 0.3), (200, 0.2), (1000, 0.1)])
def test_the_stated_power_is_the_simulated_power(n: int, discordance: float) -> None:
    effect = minimum_detectable_effect(n, discordance)
    assert effect is not None and 0 < effect < discordance
    assert power(n, discordance, effect) == pytest.approx(0.8, abs=1e-4)
    assert abs(simulated_power(n, discordance, effect) - 0.8) <= 0.03
    # and away from 80 % too
    for share in (0.5, 1.2):
        e = min(discordance, effect * share)
        assert abs(simulated_power(n, discordance, e, seed=1) - power(n, discordance, e)) <= 0.03


def test_power_is_an_exact_sum() -> None:
    # independent: scipy's pmfs over the critical counts
    n, q, e = 120, 0.25, 0.1
    crit = np.array(mcnemar_critical(n))
    d = np.arange(n + 1)
    expected = binom.pmf(d, n, q) @ binom.sf(crit - 1, d, (1 + e / q) / 2)
    assert power(n, q, e) == pytest.approx(expected, abs=1e-12)
    # the critical counts are the verdict's
    for k in range(n + 1):
        for f in range(k + 1):
            assert bool(mcnemar_rejects(f, k - f, n)) == (f >= crit[k])


def test_power_at_zero_effect_is_the_false_ok_rate() -> None:
    for n in (20, 200):
        assert power(n, 0.3, 0.0) <= 0.025
    assert power(200, 0.0, 0.0) == 0.0


def test_no_effect_is_detectable_when_too_few_tasks_flip() -> None:
    assert minimum_detectable_effect(20, 0.1) is None
    assert minimum_detectable_effect(200, 0.0) is None
    # more tasks, smaller effects
    effects = [minimum_detectable_effect(n, 0.2) for n in (50, 200, 1000)]
    assert effects[0] > effects[1] > effects[2]  # type: ignore[operator]


def test_pooled_discordance_counts_paired_pass_fail_deltas_only() -> None:
    deltas: list[dict[str, Any]] = [{"paired": True, "fixed": 30, "broken": 10, "n": 200, "delta": 0.1},
              {"paired": True, "fixed": 20, "broken": 12, "n": 200, "delta": 0.04},
              {"paired": False, "fixed": None, "broken": None, "n": 200, "delta": 0.3},
              {"paired": True, "fixed": None, "broken": None, "n": 200, "delta": 0.2}]
    assert pooled_discordance(deltas) == (72 / 400, 2)
    assert pooled_discordance([]) is None


def test_detectable_states_its_discordance() -> None:
    prior = detectable(200, [])
    assert prior["prior"] and prior["discordance"] == PRIOR_DISCORDANCE and prior["evals"] == 0
    assert prior["effect"] == pytest.approx(minimum_detectable_effect(200, PRIOR_DISCORDANCE))
    assert "assumed discordance 0.20" in describe_detectable(prior)
    seen = detectable(200, [{"paired": True, "fixed": 30, "broken": 10, "n": 200, "delta": 0.1}])
    assert not seen["prior"] and seen["discordance"] == 0.2 and seen["best_dev_delta"] == 0.1
    text = describe_detectable(seen)
    assert text.startswith("a test read (n 200) shows a gain of +0.0") and "best dev delta +0.100" in text
    still = detectable(200, [{"paired": True, "fixed": 0, "broken": 0, "n": 200, "delta": 0.0}])
    assert still["prior"] and still["evals"] == 1 and still["discordance"] == PRIOR_DISCORDANCE
    assert "no task flipped in 1 paired dev eval(s)" in describe_detectable(still)
    frac = detectable(200, [{"paired": True, "fixed": None, "broken": None, "n": 200, "delta": 0.1}])
    assert frac["fractional"] and frac["effect"] is None
    assert "cannot reach" in describe_detectable(detectable(20, [{"paired": True, "fixed": 1, "broken": 0,
                                                                   "n": 20, "delta": 0.05}]))
