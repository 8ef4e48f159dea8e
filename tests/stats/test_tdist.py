"""The pure-Python t quantile the light install uses where scipy is missing (monte/stats/tdist.py)."""

from __future__ import annotations

import pytest

from monte.stats.tdist import t975


@pytest.mark.parametrize("df", [0.5, 1, 1.5, 2, 3, 4.7, 10, 29.9, 57, 100, 1000, 1e5])
def test_t975_agrees_with_scipy(df: float) -> None:
    from scipy.stats import t

    assert t975(df) == pytest.approx(float(t.ppf(0.975, df)), rel=1e-10)


def test_t975_known_values_and_refusal() -> None:
    assert t975(1) == pytest.approx(12.706204736174698, rel=1e-12)
    with pytest.raises(ValueError):
        t975(0)
