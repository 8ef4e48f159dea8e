"""What the statistics accept: the checks on a caller's scores and counts (each refusal a
``ValueError`` naming the argument), and the clip of an interval to [-1, 1]."""

from __future__ import annotations

import operator
from collections.abc import Sequence


def check_counts(fixed: int, broken: int, n: int) -> None:
    if n < 1 or fixed < 0 or broken < 0 or fixed + broken > n:
        raise ValueError(f"need 0 <= fixed + broken <= n, n >= 1 (got {fixed}, {broken}, {n})")


def scores(xs: Sequence[float], name: str) -> list[float]:
    if isinstance(xs, str | bytes):
        raise ValueError(f"{name} must be a sequence of scores, not a string")
    out: list[float] = []
    for i, x in enumerate(xs):
        try:
            v = float(x)
        except (TypeError, ValueError):
            raise ValueError(f"{name}[{i}] = {x!r} is not a number") from None
        # NaN fails both comparisons, so it is refused here too.
        if not 0.0 <= v <= 1.0:
            raise ValueError(f"{name}[{i}] = {x!r}: scores must lie in [0, 1]")
        out.append(v)
    return out


def number(x: object, name: str) -> float:
    """A float in [0, 1] (scores and per-task standard deviations both live there)."""
    if isinstance(x, str | bytes | bool):
        raise ValueError(f"{name} must be a number in [0, 1], got {x!r}")
    try:
        v = float(x)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a number in [0, 1], got {x!r}") from None
    if not 0.0 <= v <= 1.0:
        raise ValueError(f"{name} must be a number in [0, 1], got {x!r}")
    return v


def count(k: object, name: str) -> int:
    if isinstance(k, bool):
        raise ValueError(f"{name} must be a positive int, got {k!r}")
    try:
        v = operator.index(k)  # type: ignore[arg-type]
    except TypeError:
        raise ValueError(f"{name} must be a positive int, got {k!r}") from None
    if v < 1:
        raise ValueError(f"{name} must be a positive int, got {k!r}")
    return v


def clip(lower: float, upper: float) -> tuple[float, float]:
    return max(-1.0, min(1.0, lower)), max(-1.0, min(1.0, upper))
