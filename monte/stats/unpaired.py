"""The delta of two evals whose per-task scores cannot be paired: Agresti-Caffo for pass/fail
scores, Welch for fractional ones (with both standard deviations). Unjudged: no ok/STRIKE."""

from __future__ import annotations

import math

from monte.stats.inputs import clip, count, number
from monte.stats.paired import Z95, Delta
from monte.stats.t_intervals import t975

__all__ = ["AGRESTI_CAFFO", "AGRESTI_CAFFO_BOUND", "WELCH", "agresti_caffo_interval", "unpaired_delta",
           "welch_interval"]

AGRESTI_CAFFO = "agresti-caffo"
#: Fractional scores without standard deviations: the pass/fail interval, which is conservative
#: because no score in [0, 1] with mean p varies more than a pass/fail score does (p(1 - p)).
AGRESTI_CAFFO_BOUND = "agresti-caffo-bound (fractional, no sd)"
WELCH = "welch"


def agresti_caffo_interval(
    score_a: float, n_a: int, score_b: float, n_b: int
) -> tuple[float, float]:
    """Agresti-Caffo 95% interval for ``p_b - p_a`` from two independent evals, clipped.

    One success and one failure are added to each eval (``p~ = (score·n + 1) / (n + 2)``), then
    Wald: ``p~_b - p~_a ± z · sqrt(p~_a(1 - p~_a)/(n_a + 2) + p~_b(1 - p~_b)/(n_b + 2))``.
    """
    pa = (score_a * n_a + 1) / (n_a + 2)
    pb = (score_b * n_b + 1) / (n_b + 2)
    se = math.sqrt(pa * (1 - pa) / (n_a + 2) + pb * (1 - pb) / (n_b + 2))
    centre = pb - pa
    return clip(centre - Z95 * se, centre + Z95 * se)


def welch_interval(
    score_a: float, sd_a: float, n_a: int, score_b: float, sd_b: float, n_b: int
) -> tuple[float, float]:
    """Welch's 95% interval for ``mean_b - mean_a`` (Welch-Satterthwaite degrees of freedom).

    ``sd_a``/``sd_b`` are the per-task sample standard deviations. When both are 0 the interval
    is the single point ``score_b - score_a``.
    """
    va = sd_a * sd_a / n_a
    vb = sd_b * sd_b / n_b
    centre = score_b - score_a
    if va + vb == 0:
        return clip(centre, centre)
    df = (va + vb) ** 2 / (va * va / (n_a - 1) + vb * vb / (n_b - 1))
    half = t975(df) * math.sqrt(va + vb)
    return clip(centre - half, centre + half)



def unpaired_delta(
    score_a: float,
    n_a: int,
    score_b: float,
    n_b: int,
    binary: bool = True,
    sd_a: float | None = None,
    sd_b: float | None = None,
) -> Delta:
    """The delta ``score_b - score_a`` of two evals whose per-task scores cannot be paired.

    ``binary=True`` (pass/fail scores): Agresti-Caffo (``method="agresti-caffo"``).
    ``binary=False``: Welch's interval (``"welch"``) when both per-task sample standard deviations
    are given and each eval has at least 2 tasks; otherwise the Agresti-Caffo interval as a
    conservative bound (``"agresti-caffo-bound (fractional, no sd)"``: a score in [0, 1] with
    mean p has variance at most p(1 - p), the pass/fail variance).

    The result has ``paired=False``, ``fixed``/``broken`` ``None`` and ``n = min(n_a, n_b)``;
    :func:`verdict` gives it no ok/STRIKE.
    """
    score_a = number(score_a, "score_a")
    score_b = number(score_b, "score_b")
    n_a = count(n_a, "n_a")
    n_b = count(n_b, "n_b")
    sd_a = None if sd_a is None else number(sd_a, "sd_a")
    sd_b = None if sd_b is None else number(sd_b, "sd_b")

    if not binary and sd_a is not None and sd_b is not None and n_a >= 2 and n_b >= 2:
        lower, upper = welch_interval(score_a, sd_a, n_a, score_b, sd_b, n_b)
        method = WELCH
    else:
        lower, upper = agresti_caffo_interval(score_a, n_a, score_b, n_b)
        method = AGRESTI_CAFFO if binary else AGRESTI_CAFFO_BOUND
    return Delta(
        delta=score_b - score_a,
        lower=lower,
        upper=upper,
        n=min(n_a, n_b),
        paired=False,
        fixed=None,
        broken=None,
        method=method,
        score_a=score_a,
        score_b=score_b,
    )


# --- printing ----------------------------------------------------------------------------------

