"""Student's t quantile in pure Python, for the light install (no scipy).

``t975(df)`` is the 0.975 quantile of Student's t with ``df`` degrees of freedom (``df`` may be
fractional: Welch-Satterthwaite), found by bisection on the distribution function, which is the
regularized incomplete beta function ``I_x(df/2, 1/2)`` with ``x = df / (df + t^2)`` (Abramowitz
and Stegun 26.7.1), evaluated by its continued fraction (modified Lentz; Press et al., Numerical
Recipes, 3rd ed., 6.4). For ``df`` up to 1e6 (a Welch df is at most the two splits' sizes) it
agrees with ``scipy.stats.t.ppf(0.975, df)`` to about 1e-10 (tests/stats/test_tdist.py);
:mod:`monte.stats.t_intervals` uses scipy where it is installed.
"""

from __future__ import annotations

import math

_TINY = 1e-300
_EPS = 1e-15


def _betacf(a: float, b: float, x: float) -> float:
    """The continued fraction of the incomplete beta function (modified Lentz)."""
    qab, qap, qam = a + b, a + 1.0, a - 1.0
    c, d = 1.0, 1.0 - qab * x / qap
    d = 1.0 / (d if abs(d) > _TINY else _TINY)
    h = d
    for m in range(1, 10_000):
        m2 = 2 * m
        aa = m * (b - m) * x / ((qam + m2) * (a + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > _TINY else _TINY)
        c = 1.0 + aa / c
        c = c if abs(c) > _TINY else _TINY
        h *= d * c
        aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > _TINY else _TINY)
        c = 1.0 + aa / c
        c = c if abs(c) > _TINY else _TINY
        delta = d * c
        h *= delta
        if abs(delta - 1.0) < _EPS:
            break
    return h


def betainc(a: float, b: float, x: float, y: float | None = None) -> float:
    """The regularized incomplete beta function ``I_x(a, b)``, for ``0 <= x <= 1``; ``y`` is
    ``1 - x`` when the caller knows it more precisely than the subtraction would give."""
    y = 1.0 - x if y is None else y
    if x <= 0.0:
        return 0.0
    if y <= 0.0:
        return 1.0
    front = math.exp(math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log(y))
    if x < (a + 1.0) / (a + b + 2.0):
        return front * _betacf(a, b, x) / a
    return 1.0 - front * _betacf(b, a, y) / b


def t_upper_tail(t: float, df: float) -> float:
    """``P(T > t)`` for ``t >= 0``."""
    return 0.5 * betainc(df / 2.0, 0.5, df / (df + t * t), t * t / (df + t * t))


def t975(df: float) -> float:
    """The 0.975 quantile of Student's t with ``df > 0`` degrees of freedom."""
    if not df > 0:
        raise ValueError(f"degrees of freedom must be positive, not {df}")
    lo, hi = 0.0, 1.0
    while t_upper_tail(hi, df) > 0.025:  # 12.7 at df=1; grows fast below
        lo, hi = hi, hi * 2.0
    for _ in range(200):
        mid = (lo + hi) / 2.0
        if mid in (lo, hi):
            break
        if t_upper_tail(mid, df) > 0.025:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2.0
