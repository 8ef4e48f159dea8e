"""How a bound and an interval print: never a non-zero bound as 0."""

from __future__ import annotations


def format_bound(x: float, digits: int = 4) -> str:
    """``x`` signed with ``digits`` decimals, or more where that would print a non-zero ``x`` as
    zero: ``format_bound(1.7e-05)`` is ``"+0.00002"``, not ``"+0.0000"``, so an ``ok`` never sits
    beside a lower end that reads 0 (and a regression beside an upper end that reads 0)."""
    text = f"{x:+.{digits}f}"
    if abs(x) >= 10.0 ** -digits:  # prints non-zero as it is (the check below, skipped: status formats ~20,000)
        return text
    while x != 0 and float(text) == 0:
        if digits >= 9:  # beyond that a reader counts zeros: say it in powers of ten
            return f"{x:+.1e}"
        digits += 1
        text = f"{x:+.{digits}f}"
    return text


def format_interval(lower: float, upper: float, digits: int = 4) -> str:
    """``[lower, upper]`` with :func:`format_bound`."""
    return f"[{format_bound(lower, digits)}, {format_bound(upper, digits)}]"


# --- helpers -----------------------------------------------------------------------------------
