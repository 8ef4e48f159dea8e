"""Benchmark: exact coverage of monte's paired interval for pass/fail scores, against plain Wald.

Two evals of n tasks; per task the pair (a, b) is a fixed (0 -> 1) with probability p_fixed, a
broken (1 -> 0) with probability p_broken, and unchanged otherwise. The counts (fixed, broken) are
then multinomial, and this script enumerates them exactly (no simulation, no seed) for every cell
of STATS.md's grid: p_fixed, p_broken in {0, .005, .01, .02, .05, .1, .2, .3}, n in
{20, 50, 100, 200, 500, 1000, 5000}. Counts whose probability lies beyond 1e-13 in either
binomial tail are skipped; the "mass" column shows how much probability was enumerated.

For each n it prints, for the implemented interval (``monte.stats.paired.bonett_price_bounds``,
the very function ``paired_delta`` uses for 0/1 scores) and for plain Wald:

- min cov: the smallest probability, over the 64 cells, that the 95% interval holds the true
  difference p_fixed - p_broken (nominal 0.95);
- mean cov: the mean of that probability over the cells;
- false ok: the largest P(lower > 0) over the cells with p_fixed = p_broken, i.e. how often the
  verdict says "ok" when nothing changed (nominal 0.025);
- over-claim: the largest P(lower > p_fixed - p_broken) over all cells, the one-sided miss that
  overstates an improvement (STATS.md's "worst false ok" column: 0.069 at n=20, 0.905 for Wald);
- power: the mean P(lower > 0) over the cells with p_fixed > p_broken.

    .venv/bin/python bench/interval_coverage.py
    .venv/bin/python bench/interval_coverage.py --n 20 100 --markdown
    .venv/bin/python bench/interval_coverage.py --json-out /tmp/coverage.json
    .venv/bin/python bench/interval_coverage.py --quick     # n=20 only: a smoke run of a second
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
from scipy.stats import binom

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from monte.stats.paired import Z95, bonett_price_bounds  # noqa: E402

GRID_P = (0.0, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.3)
GRID_N = (20, 50, 100, 200, 500, 1000, 5000)
TAIL = 1e-13

Bounds = Callable[[Any, Any, int], tuple[Any, Any]]


def wald_bounds(fixed: Any, broken: Any, n: int) -> tuple[Any, Any]:
    """Plain Wald for paired proportions: what a naive tool prints."""
    centre = (fixed - broken) / n
    se = np.sqrt(np.maximum((fixed + broken) / n - centre**2, 0.0) / n)
    return centre - Z95 * se, centre + Z95 * se


INTERVALS: dict[str, Bounds] = {"bonett-price": bonett_price_bounds, "wald": wald_bounds}


def _support(n: int, p: float) -> np.ndarray:
    lo = int(binom.ppf(TAIL, n, p))
    hi = int(binom.isf(TAIL, n, p)) + 1
    return np.arange(max(lo, 0), min(hi, n) + 1)


def outcomes(n: int, p_fixed: float, p_broken: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Every (fixed, broken) with non-negligible probability, as a grid, and its probability."""
    f = _support(n, p_fixed)
    b = _support(n, p_broken)
    ff, bb = np.meshgrid(f, b, indexing="ij")
    valid = ff + bb <= n
    # broken | fixed ~ Binomial(n - fixed, p_broken / (1 - p_fixed)).
    q = p_broken / (1 - p_fixed)
    prob = binom.pmf(ff, n, p_fixed) * np.where(valid, binom.pmf(bb, n - ff, q), 0.0)
    return ff, bb, prob


@dataclass
class Row:
    n: int
    interval: str
    min_coverage: float
    worst_cell: tuple[float, float]
    mean_coverage: float
    false_ok: float
    over_claim: float
    power: float
    min_mass: float


def evaluate(n: int, name: str, bounds: Bounds, grid_p: Sequence[float]) -> Row:
    covs: dict[tuple[float, float], float] = {}
    oks: dict[tuple[float, float], float] = {}
    over_claim = 0.0
    min_mass = 1.0
    for pf in grid_p:
        for pb in grid_p:
            ff, bb, prob = outcomes(n, pf, pb)
            lower, upper = bounds(ff, bb, n)
            theta = pf - pb
            covs[pf, pb] = float(np.sum(prob * ((lower <= theta) & (theta <= upper))))
            oks[pf, pb] = float(np.sum(prob * (lower > 0)))
            over_claim = max(over_claim, float(np.sum(prob * (lower > theta))))
            min_mass = min(min_mass, float(prob.sum()))
    worst = min(covs, key=lambda k: covs[k])
    return Row(
        n=n,
        interval=name,
        min_coverage=covs[worst],
        worst_cell=worst,
        mean_coverage=float(np.mean(list(covs.values()))),
        false_ok=max(v for (pf, pb), v in oks.items() if pf == pb),
        over_claim=over_claim,
        power=float(np.mean([v for (pf, pb), v in oks.items() if pf > pb])),
        min_mass=min_mass,
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, nargs="+", default=None, help="task counts (default: the grid)")
    parser.add_argument("--quick", action="store_true", help="smoke run: n=20 only")
    parser.add_argument("--markdown", action="store_true", help="print a markdown table")
    parser.add_argument("--json-out", type=Path, help="also write the rows as JSON here")
    args = parser.parse_args(argv)
    args.n = args.n or ([20] if args.quick else list(GRID_N))

    start = time.perf_counter()
    rows = [evaluate(n, name, bounds, GRID_P) for n in args.n for name, bounds in INTERVALS.items()]
    elapsed = time.perf_counter() - start

    cols = (
        "n",
        "interval",
        "min cov",
        "worst cell",
        "mean cov",
        "false ok",
        "over-claim",
        "power",
        "mass",
    )
    cells = [
        (
            str(r.n),
            r.interval,
            f"{r.min_coverage:.4f}",
            f"({r.worst_cell[0]:g}, {r.worst_cell[1]:g})",
            f"{r.mean_coverage:.4f}",
            f"{r.false_ok:.4f}",
            f"{r.over_claim:.4f}",
            f"{r.power:.3f}",
            f"{r.min_mass:.12f}",
        )
        for r in rows
    ]
    if args.markdown:
        print("| " + " | ".join(cols) + " |")
        print("|" + "---|" * len(cols))
        for c in cells:
            print("| " + " | ".join(c) + " |")
    else:
        widths = [max(len(x) for x in col) for col in zip(cols, *cells, strict=True)]
        for line in (cols, *cells):
            print("  ".join(x.rjust(w) for x, w in zip(line, widths, strict=True)))
    print(
        f"\n{len(GRID_P) ** 2} cells per n, exact enumeration, {elapsed:.1f} s. "
        "Nominal: coverage 0.95, false ok 0.025."
    )
    if args.json_out:
        args.json_out.write_text(json.dumps([asdict(r) for r in rows], indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
