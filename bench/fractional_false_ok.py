"""Benchmark: fractional scores by Monte Carlo (issue 18) - false ok at zero difference and coverage.

For each design of tests/stats/fractional_designs.py (the issue's skewed one at 25 % and 100 %
of tasks changed, a skewed rubric, an exchangeable rubric, ties at 0 and 1, Beta scores, Beta
scores with 20 % changed; and two with a real gain) and n = 20, 50, 200, it draws --reps paired
evals (seeded), and judges each with monte's interval (``skew_corrected_bounds``, vectorised,
joined with the delta as ``paired_delta`` does), with what monte printed before issue 18
(augmented below 40 changed tasks, paired t from 40), with the paired t alone and with the
augmented interval alone. It reports P(ok) (the false ok rate where the true delta is 0, the
power otherwise) and the coverage of the true delta, each with its standard error
sqrt(p (1 - p) / reps).

    .venv/bin/python bench/fractional_false_ok.py                  # 20,000 reps a cell, ~2 min
    .venv/bin/python bench/fractional_false_ok.py --markdown
    .venv/bin/python bench/fractional_false_ok.py --quick --json-out /tmp/frac.json   # seconds
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # monte and the tests' modules, as packages

from tests.stats.fractional_designs import GAIN_DESIGNS, METHODS, NULL_DESIGNS  # noqa: E402


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reps", type=int, default=20000, help="replicates per cell")
    parser.add_argument("--n", type=int, nargs="+", default=[20, 50, 200])
    parser.add_argument("--seed", type=int, default=18)
    parser.add_argument("--quick", action="store_true", help="smoke run: 500 reps, n = 20")
    parser.add_argument("--markdown", action="store_true")
    parser.add_argument("--json-out", type=Path)
    args = parser.parse_args(argv)
    reps, ns = (500, [20]) if args.quick else (args.reps, args.n)
    start = time.perf_counter()
    designs = [(name, d, 0.0) for name, d in NULL_DESIGNS.items()]
    designs += [(name, d, truth) for name, (d, truth) in GAIN_DESIGNS.items()]
    rows: list[dict[str, Any]] = []
    for name, design, truth in designs:
        for n in ns:
            a, b = design(np.random.default_rng([args.seed, n, len(rows)]), reps, n)
            for method, interval in METHODS.items():
                lower, upper = interval(b - a)
                ok = float(np.mean(lower > 0))
                cov = float(np.mean((lower <= truth) & (truth <= upper)))
                rows.append({"design": name, "true_delta": truth, "n": n, "method": method, "reps": reps,
                             "ok": ok, "ok_se": math.sqrt(ok * (1 - ok) / reps),
                             "coverage": cov, "coverage_se": math.sqrt(cov * (1 - cov) / reps)})
    seconds = time.perf_counter() - start

    head = ["design", "n", "method", "P(ok)", "coverage"]
    cells = [[r["design"] + (f" (delta {r['true_delta']:.3f})" if r["true_delta"] else ""), str(r["n"]),
              r["method"], f"{r['ok']:.4f} ± {r['ok_se']:.4f}", f"{r['coverage']:.4f} ± {r['coverage_se']:.4f}"]
             for r in rows]
    if args.markdown:
        print("| " + " | ".join(head) + " |")
        print("|" + "---|" * len(head))
        for c in cells:
            print("| " + " | ".join(c) + " |")
    else:
        widths = [max(len(x) for x in col) for col in zip(head, *cells, strict=True)]
        for line in (head, *cells):
            print("  ".join(x.rjust(w) for x, w in zip(line, widths, strict=True)))
    mine = [r for r in rows if r["method"].startswith("monte") and r["true_delta"] == 0]
    worst = max(mine, key=lambda r: r["ok"])
    print(f"\nmonte: worst false ok {worst['ok']:.4f} ± {worst['ok_se']:.4f} ({worst['design']}, n {worst['n']}); "
          f"worst coverage {min(r['coverage'] for r in rows if r['method'].startswith('monte')):.4f}; "
          f"{reps} reps a cell, {seconds:.0f} s. Goal: false ok <= 0.03, coverage >= 0.93.")
    if args.json_out:
        args.json_out.write_text(json.dumps({"rows": rows, "seconds": seconds}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
