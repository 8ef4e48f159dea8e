"""Paired statistics for monte: pure functions, no I/O (the method is in docs/statistics.md)."""

from __future__ import annotations

from monte.stats.paired import (
    Z95,
    Delta,
    format_bound,
    format_interval,
    mcnemar_cutoff,
    paired_delta,
    verdict,
)
from monte.stats.unpaired import unpaired_delta

__all__ = ["Z95", "Delta", "format_bound", "format_interval", "mcnemar_cutoff", "paired_delta",
           "unpaired_delta", "verdict"]
