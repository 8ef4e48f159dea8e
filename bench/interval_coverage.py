"""Benchmark: the pass/fail verdict and interval by exact enumeration (issue 18), against Bonett-Price.

Two evals of n tasks; each task is fixed (0 -> 1) with probability p_fixed, broken (1 -> 0) with
p_broken, unchanged otherwise, so (fixed, broken) is multinomial. Everything is enumerated
exactly with scipy's pmfs (no simulation, no seed; tests/stats/exact_enum.py), for the printed
interval as monte computes it (``monte.stats.paired.binary_bounds``, vectorised), for
Bonett-Price (what monte printed before issue 18; docs/statistics.md), and for Tango's score interval alone at the
same cutoff (what the printed interval joins with Bonett-Price):

1. cutoffs: the exact unconditional McNemar cutoff c_n, and its size on a 40,001-point grid of
   the discordance (the module searches a grid of 25 sqrt(n) points);
2. false ok: the largest P(verdict ok) at zero true difference over every discordance (1,000
   steps plus 2,001 arcsine points), at every n from 10 to --false-ok-to (nominal 0.025);
3. coverage: the worst P(lower <= p_fixed - p_broken <= upper) over the issue's fine grid
   (steps of 0.01 on the simplex plus the one-directional edges (p, 0), (0, p) in steps of
   0.001 up to 0.1: 5,331 cells), and the cell where it is reached (nominal 0.95; goal 0.93);
4. power: P(ok) at n = 200 for an 8-point gain at 20 % discordance (p_fixed 0.14, p_broken
   0.06), and the mean P(ok) over the coarse grid's cells (``COARSE_P`` x ``COARSE_P``) with
   p_fixed > p_broken.

    .venv/bin/python bench/interval_coverage.py                   # ~15 min on the 2-core machine
    .venv/bin/python bench/interval_coverage.py --n 20 50 --false-ok-to 100 --markdown
    .venv/bin/python bench/interval_coverage.py --quick --json-out /tmp/coverage.json   # seconds
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from scipy.stats import binom

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # monte and the tests' modules, as packages

from monte.stats.paired import (  # noqa: E402
    Z95,
    binary_bounds,
    bonett_price_bounds,
    mcnemar_cutoff,
    mcnemar_rejects,
    score_bounds,
)
from tests.stats.exact_enum import (  # noqa: E402
    Bounds,
    coverage,
    coverage_truncated,
    discordance_grid,
    false_ok,
    fine_cells,
    ok_rate,
    outcome_grid,
)

GRID_N = (20, 30, 50, 75, 100, 150, 200, 300, 500)
COARSE_P = (0.0, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.3)


def monte_bounds(f: Any, b: Any, n: int) -> tuple[Any, Any]:
    return binary_bounds(f, b, n, where=np.where)


def score_alone(f: Any, b: Any, n: int) -> tuple[Any, Any]:
    """Tango's score interval at c_n, without the join with Bonett-Price."""
    return score_bounds(f, b, n, where=np.where)


INTERVALS: dict[str, Bounds] = {"monte": monte_bounds, "bonett-price": bonett_price_bounds, "score alone": score_alone}


def cutoff_size(n: int, points: int = 40001) -> float:
    """The size of monte's verdict at zero difference on a fine grid of the discordance, from
    scipy (the verdict read off ``mcnemar_rejects``, which the tests prove is ``lower > 0``)."""
    d = np.arange(n + 1)
    per_d = np.array([sum(binom.pmf(f, k, 0.5) for f in range(k + 1) if mcnemar_rejects(f, k - f, n))
                      for k in d])
    p = np.sin(np.linspace(0, np.pi / 2, points)) ** 2
    worst = 0.0
    for chunk in np.array_split(p, max(1, points // 2000)):
        worst = max(worst, float((binom.pmf(d[None, :], n, chunk[:, None]) @ per_d).max()))
    return worst


def verdict_false_ok(n: int, bonett_price: bool) -> float:
    """Section 2 at every n, cheaply: the verdict from the exact test (monte) or from Bonett-Price's
    lower end, on every (fixed, broken)."""
    f, b = np.meshgrid(np.arange(n + 1), np.arange(n + 1), indexing="ij")
    valid = f + b <= n
    if bonett_price:
        ok = bonett_price_bounds(f, b, n)[0] > 0
    else:
        ok = mcnemar_rejects(f, b, n)
    return float(false_ok(n, np.where(valid, ok, False), discordance_grid(n)).max())


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, nargs="+", default=None, help="task counts for coverage")
    parser.add_argument("--false-ok-to", type=int, default=500, help="false ok at every n from 10 to this")
    parser.add_argument("--quick", action="store_true", help="smoke run: n = 20, false ok to 20")
    parser.add_argument("--markdown", action="store_true", help="print markdown tables")
    parser.add_argument("--json-out", type=Path, help="also write the figures as JSON here")
    args = parser.parse_args(argv)
    grid_n = args.n or ([20] if args.quick else list(GRID_N))
    last = 20 if args.quick else args.false_ok_to
    start = time.perf_counter()
    out: dict[str, Any] = {"cutoffs": [], "false_ok": {}, "coverage": [], "power": {}}

    # 1. cutoffs
    for n in sorted({10, 11, 19, 20, 25, 50, 100, 200, 500, 1000} if not args.quick else {10, 20}):
        t0 = time.perf_counter()
        c = mcnemar_cutoff(n)
        seconds = time.perf_counter() - t0
        out["cutoffs"].append({"n": n, "cutoff": c, "size_on_40001_points": cutoff_size(n),
                               "seconds_to_compute": seconds})

    # 2. false ok at every n
    for name, bp in (("monte", False), ("bonett-price", True)):
        rates = {n: verdict_false_ok(n, bp) for n in range(10, last + 1)}
        worst = max(rates, key=lambda n: rates[n])
        out["false_ok"][name] = {"max": rates[worst], "at_n": worst,
                                 "n_over_0.025": sum(1 for r in rates.values() if r > 0.025),
                                 "n_checked": len(rates)}
    # the printed lower end itself, at a few n (the tests prove lower > 0 is the exact test)
    out["false_ok"]["monte, from the printed lower end"] = {
        n: float(false_ok(n, outcome_grid(n, monte_bounds)[0], discordance_grid(n)).max())
        for n in grid_n if n <= 200}

    # 3. coverage on the fine grid
    cells = fine_cells()
    for n in grid_n:
        for name, bounds in INTERVALS.items():
            lower, upper = outcome_grid(n, bounds)
            if n <= 100:
                cov, mass = coverage(n, lower, upper, cells), 1.0
            else:
                cov, mass = coverage_truncated(n, lower, upper, cells)
            worst_cell = min(cov, key=lambda c: cov[c])
            out["coverage"].append({"n": n, "interval": name, "min_coverage": cov[worst_cell],
                                    "worst_cell": list(worst_cell), "mean_coverage": float(np.mean(list(cov.values()))),
                                    "cells": len(cov), "min_mass": mass})

    # 4. power
    lowers = {name: outcome_grid(200, INTERVALS[name])[0] for name in ("monte", "bonett-price")}
    out["power"]["n200_gain0.08_discordance0.20"] = {
        name: ok_rate(200, lo, 0.14, 0.06) for name, lo in lowers.items()}
    for n in grid_n:
        for name in ("monte", "bonett-price"):
            lo = outcome_grid(n, INTERVALS[name])[0]
            out["power"][f"mean_coarse_grid_n{n}_{name}"] = float(np.mean(
                [ok_rate(n, lo, pf, pb) for pf in COARSE_P for pb in COARSE_P if pf > pb]))
    out["seconds"] = time.perf_counter() - start

    _print(out, args.markdown)
    if args.json_out:
        args.json_out.write_text(json.dumps(out, indent=2) + "\n")
    return 0


def _print(out: dict[str, Any], markdown: bool) -> None:
    def table(head: list[str], rows: list[list[str]]) -> None:
        if markdown:
            print("| " + " | ".join(head) + " |")
            print("|" + "---|" * len(head))
            for r in rows:
                print("| " + " | ".join(r) + " |")
        else:
            widths = [max(len(x) for x in col) for col in zip(head, *rows, strict=True)]
            for r in (head, *rows):
                print("  ".join(x.rjust(w) for x, w in zip(r, widths, strict=True)))
        print()

    table(["n", "cutoff c_n", "size (40,001 points)", "seconds"],
          [[str(c["n"]), f"{c['cutoff']:.5f}", f"{c['size_on_40001_points']:.5f}", f"{c['seconds_to_compute']:.2f}"]
           for c in out["cutoffs"]])
    fo = out["false_ok"]
    table(["verdict", "max false ok", "at n", "n over 0.025", "n checked"],
          [[k, f"{v['max']:.4f}", str(v["at_n"]), str(v["n_over_0.025"]), str(v["n_checked"])]
           for k, v in fo.items() if "max" in v])
    table(["n", "interval", "min coverage", "worst cell", "mean coverage"],
          [[str(r["n"]), r["interval"], f"{r['min_coverage']:.4f}",
            f"({r['worst_cell'][0]:g}, {r['worst_cell'][1]:g})", f"{r['mean_coverage']:.4f}"]
           for r in out["coverage"]])
    p = out["power"]["n200_gain0.08_discordance0.20"]
    print(f"power at n=200, gain 0.08, discordance 0.20: monte {p['monte']:.4f}, "
          f"Bonett-Price {p['bonett-price']:.4f} (ratio {p['monte'] / p['bonett-price']:.3f})")
    print(f"z95 = {Z95}; {out['seconds']:.0f} s in all (nominal: coverage 0.95, false ok 0.025)")


if __name__ == "__main__":
    raise SystemExit(main())
