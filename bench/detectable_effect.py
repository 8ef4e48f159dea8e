"""Benchmark: the smallest effect a test read can see (issue 18) - stated against simulated power.

For each n and discordance q (the share of tasks that flip between two evals),
``monte.stats.power.minimum_detectable_effect`` states the smallest true gain the pass/fail
verdict calls ``ok`` with 80 % power. This draws --reps paired evals (seeded) at that gain
(p_fixed = (q + gain) / 2, p_broken = (q - gain) / 2) and at half and 1.5 times it, judges each
with the printed interval (``binary_bounds``, vectorised: ok when its lower end is above 0), and
reports stated and simulated power with the simulation's standard error.

    .venv/bin/python bench/detectable_effect.py                # 20,000 reps a point, ~1 min
    .venv/bin/python bench/detectable_effect.py --quick --json-out /tmp/power.json   # seconds
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

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from monte.stats.paired import binary_bounds  # noqa: E402
from monte.stats.power import minimum_detectable_effect, power  # noqa: E402


def simulated(n: int, q: float, gain: float, reps: int, rng: np.random.Generator) -> float:
    pf, pb = (q + gain) / 2, (q - gain) / 2
    counts = rng.multinomial(n, [pf, pb, 1 - pf - pb], size=reps)
    lower, _ = binary_bounds(counts[:, 0], counts[:, 1], n, where=np.where)
    return float(np.mean(lower > 0))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reps", type=int, default=20000)
    parser.add_argument("--seed", type=int, default=19)
    parser.add_argument("--quick", action="store_true", help="smoke run: n = 50, 1,000 reps")
    parser.add_argument("--json-out", type=Path)
    args = parser.parse_args(argv)
    ns, qs, reps = ([50], [0.3], 1000) if args.quick else ([50, 200, 1000], [0.05, 0.1, 0.2, 0.4], args.reps)
    rng = np.random.default_rng(args.seed)
    start = time.perf_counter()
    rows: list[dict[str, Any]] = []
    for n in ns:
        for q in qs:
            t0 = time.perf_counter()
            mde = minimum_detectable_effect(n, q)
            took = time.perf_counter() - t0
            if mde is None:
                rows.append({"n": n, "discordance": q, "mde": None, "seconds": took})
                continue
            for share in (0.5, 1.0, 1.5):
                gain = min(q, mde * share)
                stated = power(n, q, gain)
                sim = simulated(n, q, gain, reps, rng)
                rows.append({"n": n, "discordance": q, "mde": mde, "gain": gain, "stated": stated,
                             "simulated": sim, "se": math.sqrt(sim * (1 - sim) / reps), "seconds": took})
    print(f"{'n':>5} {'q':>5} {'MDE (80%)':>10} {'gain':>7} {'stated':>7} {'simulated':>14}")
    for r in rows:
        if r["mde"] is None:
            print(f"{r['n']:>5} {r['discordance']:>5.2f} {'none':>10}")
            continue
        print(f"{r['n']:>5} {r['discordance']:>5.2f} {r['mde']:>10.4f} {r['gain']:>7.4f} {r['stated']:>7.4f} "
              f"{r['simulated']:>7.4f} ± {r['se']:.4f}")
    worst = max((abs(r["stated"] - r["simulated"]) for r in rows if r["mde"] is not None), default=0.0)
    print(f"\nlargest |stated - simulated| {worst:.4f} (goal <= 0.03); {reps} reps a point, "
          f"{time.perf_counter() - start:.0f} s")
    if args.json_out:
        args.json_out.write_text(json.dumps({"rows": rows, "largest_gap": worst}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
