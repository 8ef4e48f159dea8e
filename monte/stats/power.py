"""What a test read can see before it is spent: the power of the pass/fail verdict and the
smallest effect it detects (the method: docs/statistics.md, "The smallest effect a test read can see").

Two evals of the same n tasks differ on a share ``q`` of them (the *discordance*: fixed plus
broken over n). For a true gain ``delta`` the fixed rate is ``(q + delta) / 2`` and the broken rate
``(q - delta) / 2``. The number of discordant tasks D is then Binomial(n, q) and, given D, the
fixed count is Binomial(D, (1 + delta / q) / 2); the verdict is ``ok`` exactly when the fixed
count reaches the exact test's critical count for that D (:func:`monte.stats.paired.mcnemar_critical`).
:func:`power` sums this exactly (no normal approximation), so the power it states is the power of
the verdict monte prints, which tests/stats/test_power.py checks by simulation.

Pure functions; imports nothing heavier than :mod:`math`.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any

from monte.stats.paired import ALPHA, binomial_window, mcnemar_critical

__all__ = ["PRIOR_DISCORDANCE", "TARGET_POWER", "add_to_summary", "describe_detectable", "detectable",
           "detectable_from", "detectable_items", "memo_effect", "minimum_detectable_effect", "new_summary",
           "pooled_discordance", "power", "recompute_memo"]

#: The power a "smallest detectable effect" is stated at.
TARGET_POWER = 0.8
#: The discordance assumed before any paired dev eval has been seen (stated wherever it is used).
PRIOR_DISCORDANCE = 0.2


def power(n: int, discordance: float, effect: float, alpha: float = ALPHA) -> float:
    """The probability that the pass/fail verdict says ``ok`` for a true gain ``effect`` when a
    share ``discordance`` of the n tasks flip (``0 <= effect <= discordance <= 1``). ``alpha``:
    the test's level (the search verdict of the best of K: ``ALPHA / K``)."""
    if not 0.0 <= effect <= discordance <= 1.0:
        raise ValueError(f"need 0 <= effect <= discordance <= 1 (got {effect}, {discordance})")
    if discordance == 0.0:
        return 0.0
    return _power(mcnemar_critical(n, alpha), *binomial_window(n, discordance), discordance, effect)


def _power(critical: list[int], start: int, pmf: list[float], discordance: float, effect: float) -> float:
    """:func:`power` with the exact test's critical counts and the discordance's binomial
    window already computed (they do not depend on the effect: a bisection computes them once)."""
    theta = min(1.0, (1.0 + effect / discordance) / 2)
    return math.fsum(w * _binomial_sf(critical[start + i], start + i, theta)
                     for i, w in enumerate(pmf))


def minimum_detectable_effect(n: int, discordance: float, target: float = TARGET_POWER) -> float | None:
    """The smallest true gain the verdict calls ``ok`` with probability ``target`` at this n and
    discordance (to 1e-6, on :func:`power`), or ``None`` when even a gain of the whole
    discordance (every flip a fix) is called ``ok`` less often than that."""
    if not 0.0 < discordance <= 1.0:
        return None
    critical = mcnemar_critical(n)
    start, pmf = binomial_window(n, discordance)

    def at(effect: float) -> float:
        return _power(critical, start, pmf, discordance, effect)

    f_hi = at(discordance) - target
    if f_hi < 0:
        return None
    lo, hi, f_lo = 0.0, discordance, at(0.0) - target
    if f_lo >= 0:
        return 0.0
    # the Illinois variant of regula falsi on a smooth increasing power curve: the bracket
    # [lo, hi] (power below / at or above the target) shrinks to 1e-6 in ~6 evaluations where
    # bisection takes ~18; each probe is kept 5e-7 inside the bracket so both ends move
    side = 0
    while hi - lo > 1e-6:
        x = (lo * f_hi - hi * f_lo) / (f_hi - f_lo)
        x = min(max(x, lo + 5e-7), hi - 5e-7)
        fx = at(x) - target
        if fx >= 0:
            hi, f_hi = x, fx
            if side == 1:
                f_lo /= 2
            side = 1
        else:
            lo, f_lo = x, fx
            if side == -1:
                f_hi /= 2
            side = -1
    return hi


def pooled_discordance(deltas: Iterable[Mapping[str, Any]]) -> tuple[float, int] | None:
    """``(sum(fixed + broken) / sum(n), how many deltas)`` over the paired pass/fail deltas
    given (dicts as monte records them: ``fixed``, ``broken``, ``n``); ``None`` without any."""
    flips = tasks = count = 0
    for d in deltas:
        if d.get("paired") and d.get("fixed") is not None and d.get("broken") is not None and d.get("n"):
            flips += int(d["fixed"]) + int(d["broken"])
            tasks += int(d["n"])
            count += 1
    return (flips / tasks, count) if count else None


def detectable_items(n: int, sd: float, target: float = TARGET_POWER) -> float:
    """K samples per item (docs/statistics.md): the smallest gain whose item-level interval's lower end is
    above 0 with probability ``target``, by the normal approximation of that interval: with the
    two pseudo-items its standard error is about ``sqrt(((n - 1) sd^2 + 2) / (n + 1) / (n + 2))`` and its
    mean ``n / (n + 2)`` of the delta, so the effect is ``(n + 2) / n (z_0.975 + z_target) se``.
    (The exact test beside it binds less: bench/samples_power.py measures both.)"""
    from statistics import NormalDist

    se = math.sqrt(((n - 1) * sd * sd + 2) / (n + 1) / (n + 2))
    return (n + 2) / n * (NormalDist().inv_cdf(0.975) + NormalDist().inv_cdf(target)) * se


def detectable(n: int, dev_deltas: Iterable[Mapping[str, Any]], samples: int = 1, *,
               memo: dict[Any, Any] | None = None) -> dict[str, Any]:
    """What a test read of ``n`` tasks can show, from the exam's paired dev deltas so far (dicts
    as recorded: ``delta``, ``paired``, ``fixed``, ``broken``, ``n``).

    ``effect``: the smallest gain called ``ok`` with 80 % power at the pooled dev discordance (or
    :data:`PRIOR_DISCORDANCE` when no paired pass/fail dev delta exists yet, or none flipped a
    task: ``prior`` is then true), ``None`` when no gain can reach that power; ``best_dev_delta``: the largest paired dev
    delta, to hold it against. Fractional exams (paired dev deltas without flip counts) get no
    ``effect``: the exact power computation is for pass/fail scores (``fractional`` is true).
    ``memo``: effects already computed, by (n, discordance, power) (:func:`memo_effect`); it
    gains the ones computed here (``monte status`` keeps it between reads).
    """
    summary = new_summary()
    for d in dev_deltas:
        add_to_summary(summary, d)
    return detectable_from(n, summary, samples, memo=memo)


def new_summary() -> list[Any]:
    """What :func:`detectable` reads of an exam's dev deltas, gathered one delta at a time
    (:func:`add_to_summary`; ``monte status`` keeps it with the rows): paired deltas, their
    flips and tasks and how many had flip counts, the per-item sd and K of those with K > 1
    samples, the best paired delta. Plain values (``marshal`` keeps them)."""
    return [0, 0, 0, 0, [], None, None]


def add_to_summary(summary: list[Any], d: Mapping[str, Any]) -> None:
    if not d.get("paired"):
        return
    summary[0] += 1
    if d.get("fixed") is not None and d.get("broken") is not None and d.get("n"):
        summary[1] += int(d["fixed"]) + int(d["broken"])
        summary[2] += int(d["n"])
        summary[3] += 1
    if (d.get("samples") or 1) > 1 and d.get("sd") is not None:
        summary[4].append(float(d["sd"]))
        if summary[5] is None:
            summary[5] = int(d["samples"])
    if d.get("delta") is not None:
        summary[6] = float(d["delta"]) if summary[6] is None else max(summary[6], float(d["delta"]))


def detectable_from(n: int, summary: list[Any], samples: int = 1, *,
                    memo: dict[Any, Any] | None = None) -> dict[str, Any]:
    """:func:`detectable` from an exam's dev deltas as :func:`add_to_summary` gathered them."""
    paired, flips, tasks, pooled_count, sds, k, best = summary
    if sds or samples > 1:
        prior = not sds
        sd = math.sqrt(math.fsum(s ** 2 for s in sds) / len(sds)) if sds else math.sqrt(PRIOR_DISCORDANCE)
        effect = detectable_items(n, sd)
        return {"n": n, "power": TARGET_POWER, "samples": k if sds else samples, "sd": sd, "evals": len(sds),
                "prior": prior, "fractional": False, "best_dev_delta": best, "discordance": None,
                "effect": effect if effect <= 1 else None}
    pooled = (flips / tasks, pooled_count) if pooled_count else None
    fractional = pooled is None and bool(paired)
    evals = pooled[1] if pooled is not None else 0
    # no task flipped yet says nothing about how many will: the prior, stated as such
    prior = pooled is None or pooled[0] == 0
    discordance = PRIOR_DISCORDANCE if prior or pooled is None else pooled[0]
    return {"n": n, "power": TARGET_POWER, "discordance": discordance, "evals": evals,
            "prior": prior, "fractional": fractional, "best_dev_delta": best,
            "effect": None if fractional else memo_effect(n, discordance, memo)}


def memo_effect(n: int, discordance: float, memo: dict[Any, Any] | None) -> float | None:
    """:func:`minimum_detectable_effect` at :data:`TARGET_POWER`, looked up in (and added to)
    ``memo`` by its inputs: a pure function of them, so a kept entry is never stale."""
    if memo is None:
        return minimum_detectable_effect(n, discordance)
    key = ("effect", n, discordance, TARGET_POWER)
    if key not in memo:
        memo[key] = minimum_detectable_effect(n, discordance)
    found: float | None = memo[key]
    return found


def recompute_memo(key: Any) -> Any:
    """What :func:`memo_effect` keeps under ``key``, computed again (for verify); a search
    cutoff's key, :func:`monte.stats.search.recompute_memo`'s."""
    if key[0] == "cutoff":
        from monte.stats.search import recompute_memo as cutoff

        return cutoff(key)
    _, n, discordance, target = key
    return minimum_detectable_effect(int(n), float(discordance), float(target))


def describe_detectable(x: Mapping[str, Any]) -> str:
    """One line for a :func:`detectable` result, e.g. ``a test read (n 200) shows a gain of
    +0.087 or more with 80% power (dev discordance 0.20 over 3 paired evals; best dev delta
    +0.120)``."""
    head = f"a test read (n {x['n']})"
    if (x.get("samples") or 1) > 1:  # K samples per item: the item-level figure (docs/statistics.md)
        head = f"a test read (n {x['n']} items, K {x['samples']})"
        where = (f"assumed per-item sd {x['sd']:.2f}, as at K = 1: no paired dev eval yet" if x["prior"]
                 else f"per-item sd {x['sd']:.3f} over {x['evals']} paired dev eval(s)")
        best = x.get("best_dev_delta")
        where += f"; best dev delta {best:+.3f}" if best is not None else ""
        if x["effect"] is None:
            return f"{head} cannot reach {x['power']:.0%} power for any gain ({where})"
        return f"{head} shows a gain of about {x['effect']:+.3f} or more with {x['power']:.0%} power ({where})"
    if x.get("fractional"):
        return f"{head}: no detectable-effect figure for fractional scores (pass/fail only)"
    if x["prior"]:
        seen = f"no task flipped in {x['evals']} paired dev eval(s)" if x["evals"] else "no paired dev eval yet"
        where = f"assumed discordance {x['discordance']:.2f}: {seen}"
    else:
        where = f"dev discordance {x['discordance']:.2f} over {x['evals']} paired eval(s)"
    best = x.get("best_dev_delta")
    where += f"; best dev delta {best:+.3f}" if best is not None else ""
    if x["effect"] is None:
        return f"{head} cannot reach {x['power']:.0%} power for any gain ({where})"
    return f"{head} shows a gain of {x['effect']:+.3f} or more with {x['power']:.0%} power ({where})"


def _binomial_sf(k: int, n: int, p: float) -> float:
    """``P(Binomial(n, p) >= k)``: terms summed away from the mode until they no longer count."""
    if k <= 0:
        return 1.0
    if k > n or p <= 0.0:
        return 0.0
    if p >= 1.0:
        return 1.0
    mode = int((n + 1) * p)
    upward = k > mode
    j = k if upward else k - 1
    term = math.exp(math.lgamma(n + 1) - math.lgamma(j + 1) - math.lgamma(n - j + 1)
                    + j * math.log(p) + (n - j) * math.log1p(-p))
    odds = p / (1 - p)
    total = 0.0
    while term > total * 1e-17 and 0 <= j <= n:
        total += term
        if upward:
            term *= (n - j) / (j + 1) * odds
            j += 1
        else:
            term *= j / (n - j + 1) / odds
            j -= 1
    return total if upward else max(0.0, 1.0 - total)
