"""Benchmark (issue 33): what K samples per item buy and cost.

1. **Power at equal item count**, by seeded simulation: n items, per-item success rates of the
   baseline p_ai ~ U(0.1, 0.8) (heterogeneous difficulty) and of the newer model p_ai + gain (a
   fixed true gain), each sample Bernoulli. K = 1 is judged as monte judges it (the exact
   unconditional McNemar test, vectorised through ``mcnemar_rejects``); K = 4, 8 and 16 by monte's
   verdict (the exact conditional test on the items *and* the item-level interval): the interval
   vectorised on every replicate, the exact test on the first --exact-reps of them (numpy's
   convolution), so P(ok) = P(both) is measured there. Also the detectable effect monte states
   (``detectable_items``) against the simulated power at it, and the measured design effect.
2. **Size and coverage grid**: the exact test's false-ok rate given t and the printed interval's
   worst coverage for K = 4, 8, 16 and n = 20 .. 200 (tests/stats/sample_designs.py's designs).
3. **Eval cost of K** on this machine: seconds to answer N prompts of the parity exam with the
   real tiny model (``monte model init``'s; parity-like prompts), greedy (one batched pass) and sampled K = 1, 4, 8.

    .venv/bin/python bench/samples_power.py               # ~3 min on the 2-core machine
    .venv/bin/python bench/samples_power.py --quick --json-out /tmp/k.json   # seconds
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # monte and the tests' modules, as packages

from monte.stats.paired import mcnemar_rejects, skew_corrected_bounds  # noqa: E402
from monte.stats.power import detectable_items  # noqa: E402
from monte.stats.samples import design_effect, exact_rejects  # noqa: E402
from tests.stats.sample_designs import (  # noqa: E402
    COVERAGE,
    STRONG_NULLS,
    conditional_size,
    draw,
    interval_rates,
)


def power(rng: np.random.Generator, n: int, k: int, gain: float, reps: int, exact_reps: int) -> dict[str, Any]:
    pa = rng.uniform(0.1, 0.8, (reps, n))
    a, b = rng.binomial(k, pa), rng.binomial(k, pa + gain)
    if k == 1:
        fixed, broken = np.sum((b == 1) & (a == 0), 1), np.sum((b == 0) & (a == 1), 1)
        ok = mcnemar_rejects(fixed, broken, n)
        return {"n": n, "K": 1, "gain": gain, "power": float(np.mean(ok)), "se": _se(np.mean(ok), reps)}
    d = (b - a) / k
    lo, _ = skew_corrected_bounds(n, d.sum(1), (d * d).sum(1), (d ** 3).sum(1))
    interval = np.minimum(lo, d.mean(1)) > 0
    m = min(exact_reps, reps)
    # numpy's convolve: it returns an ndarray, which typing does not call a Sequence
    exact = np.array([exact_rejects(list(x), list(y), k, convolve=np.convolve)  # type: ignore[arg-type]
                      for x, y in zip(a[:m], b[:m], strict=True)])
    both = exact & interval[:m]
    one = [[1.0] * int(c) + [0.0] * (k - int(c)) for c in a[0]], [[1.0] * int(c) + [0.0] * (k - int(c)) for c in b[0]]
    eff, deff, _ = design_effect(*one)
    return {"n": n, "K": k, "gain": gain, "power": float(np.mean(both)), "se": _se(np.mean(both), m),
            "interval_alone": float(np.mean(interval)), "exact_alone": float(np.mean(exact)),
            "effective_n": eff, "design_effect": deff, "sd": float(np.mean(d.std(1, ddof=1)))}


#: t-vectors drawn per strong-null design (as tests/stats/test_samples_sizes.py, same seeds)
DRAWS = {20: 6, 50: 4, 100: 3, 200: 2}


def size_and_coverage(k: int, n: int, reps: int) -> dict[str, Any]:
    """The exact test's false-ok rate given t (exact, per t) and the printed interval's worst
    coverage over sample_designs.COVERAGE: what docs/statistics.md tabulates."""
    rng = np.random.default_rng(1000 * k + n)
    sizes = []
    for design in STRONG_NULLS.values():
        a, b, _ = draw(design, rng, DRAWS[n], n, k)
        sizes += [conditional_size(lambda x, y: exact_rejects(x, y, k, convolve=np.convolve), t, k)  # type: ignore[arg-type]
                  for t in a + b]
    rng = np.random.default_rng(k * 7 + n)
    cov = {}
    for name, design in COVERAGE.items():
        a, b, truth = draw(design, rng, reps, n, k)
        cov[name] = interval_rates(skew_corrected_bounds, (b - a) / k, truth)[0]
    worst = min(cov, key=lambda x: cov[x])
    return {"K": k, "n": n, "max_false_ok_given_t": max(sizes), "mean_false_ok_given_t": float(np.mean(sizes)),
            "t_vectors": len(sizes), "min_coverage": cov[worst], "worst_design": worst}


def stated_vs_simulated(rng: np.random.Generator, n: int, k: int, reps: int) -> dict[str, Any]:
    """The effect monte states for 80 % power (from the per-item sd at no gain) and the power
    of the item-level interval simulated at that gain."""
    pa = rng.uniform(0.1, 0.8, (reps, n))
    a0, b0 = rng.binomial(k, pa), rng.binomial(k, pa)
    sd = float(np.sqrt(np.mean(((b0 - a0) / k).var(1, ddof=1))))
    effect = detectable_items(n, sd)
    a, b = rng.binomial(k, pa), rng.binomial(k, np.clip(pa + effect, 0, 1))
    d = (b - a) / k
    lo, _ = skew_corrected_bounds(n, d.sum(1), (d * d).sum(1), (d ** 3).sum(1))
    hit = np.mean(np.minimum(lo, d.mean(1)) > 0)
    return {"n": n, "K": k, "sd": sd, "stated_effect": effect, "simulated_power": float(hit), "se": _se(hit, reps)}


def eval_cost(prompts: int, ks: Sequence[int], max_new_tokens: int) -> list[dict[str, Any]]:
    import torch

    from monte.models import generate as gen
    from monte.models.tiny import init_model

    torch.set_num_threads(1)
    # parity-like prompts (bits, then an arrow), lengths 4 to 9
    texts = [" ".join("01"[(i * 2654435761 >> j) & 1] for j in range(4 + i % 6)) + " ->" for i in range(prompts)]
    out = []
    with tempfile.TemporaryDirectory(prefix="monte-bench-k-") as tmp:
        init_model(Path(tmp) / "m", seed=0)
        model, tok = gen.load(Path(tmp) / "m")
        t0 = time.perf_counter()
        gen.generate(model, tok, texts, max_new_tokens=max_new_tokens, batch_size=32)
        greedy = time.perf_counter() - t0
        out.append({"mode": "greedy (batched, K = 1)", "K": 1, "prompts": prompts, "seconds": greedy,
                    "per_answer_ms": 1000 * greedy / prompts})
        for k in ks:
            seeds = [gen.sample_seed(t) for t in texts]
            t0 = time.perf_counter()
            gen.sample(model, tok, texts, seeds, k=k, max_new_tokens=max_new_tokens, temperature=1.0)
            s = time.perf_counter() - t0
            out.append({"mode": f"sampled K = {k} (one call an item)", "K": k, "prompts": prompts, "seconds": s,
                        "per_answer_ms": 1000 * s / (prompts * k), "vs_greedy": s / greedy})
    return out


def _se(p: float, reps: int) -> float:
    return math.sqrt(max(p * (1 - p), 1e-12) / reps)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reps", type=int, default=20000, help="replicates per power cell (the interval)")
    parser.add_argument("--exact-reps", type=int, default=1000, help="of which judged by the exact test too")
    parser.add_argument("--gain", type=float, default=0.05)
    parser.add_argument("--prompts", type=int, default=100, help="prompts timed for the eval cost")
    parser.add_argument("--quick", action="store_true", help="a smoke run of seconds")
    parser.add_argument("--json-out", type=Path)
    args = parser.parse_args(argv)
    ns: tuple[int, ...] = (100, 200)
    ks: tuple[int, ...] = (1, 4, 8, 16)
    if args.quick:
        args.reps, args.exact_reps, args.prompts, ns, ks = 300, 20, 4, (50,), (1, 8)
    rng = np.random.default_rng(33)
    t0 = time.perf_counter()
    rows = [power(rng, n, k, args.gain, args.reps, args.exact_reps) for n in ns for k in ks]
    for r in rows:
        extra = (f"  (interval alone {r['interval_alone']:.3f}, exact test alone {r['exact_alone']:.3f}; "
                 f"effective n {r['effective_n']:.0f}, design effect {r['design_effect']:.2f})" if r["K"] > 1 else "")
        print(f"power n {r['n']:4d} K {r['K']:2d} gain {r['gain']:+.3f}: {r['power']:.4f} ± {r['se']:.4f}{extra}")
    grid = [size_and_coverage(k, n, 4000 if not args.quick else 300)
            for k in ((4, 8, 16) if not args.quick else (4,)) for n in ((20, 50, 100, 200) if not args.quick else (20,))]
    for g in grid:
        print(f"K {g['K']:2d} n {g['n']:3d}: exact test's false ok given t max {g['max_false_ok_given_t']:.4f}, mean "
              f"{g['mean_false_ok_given_t']:.4f} ({g['t_vectors']} t); min coverage {g['min_coverage']:.4f} "
              f"({g['worst_design']})")
    stated = [stated_vs_simulated(rng, n, k, args.reps) for n in ns for k in ks if k > 1]
    for s in stated:
        print(f"stated 80%-power effect n {s['n']} K {s['K']}: {s['stated_effect']:+.4f} (per-item sd "
              f"{s['sd']:.3f}); simulated power there {s['simulated_power']:.4f} ± {s['se']:.4f}")
    cost = eval_cost(args.prompts, (1, 4, 8) if not args.quick else (8,), 16)
    for c in cost:
        print(f"eval cost, {c['mode']}: {c['seconds']:.2f} s for {c['prompts']} prompts, "
              f"{c['per_answer_ms']:.1f} ms an answer" + (f", {c['vs_greedy']:.1f}x greedy" if "vs_greedy" in c else ""))
    took = time.perf_counter() - t0
    print(f"took {took:.0f} s")
    if args.json_out:
        args.json_out.write_text(json.dumps({"power": rows, "grid": grid, "stated": stated, "cost": cost, "seconds": took}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
