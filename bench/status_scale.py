"""Benchmark: how ``monte status`` and an eval's finish grow with the ledger, 1,000 to 100,000 runs.

For each size N it builds (or, with ``--repos DIR``, builds once and then reuses
``DIR/runs-N``) the ledger ``bench/status_10k.py`` builds: N Run rows appended one record each
with ``Ledger.append_row`` in a realistic mix (base evals, a training run with a lineage ref per
10 dev evals, forks, stage boundaries, paired deltas, a few failed, smoke and running rows). Then,
alternating in rounds so that the machine's load hits all alike, it times as subprocesses
(interpreter start and imports included):

- the floor: ``git log --format=%B refs/heads/monte/exp/ledger`` (every record's message);
- ``monte status --json`` and ``monte status`` (human, to a pipe), both warm (the object cache
  of :mod:`monte.ledger.objcache` in place) and once cold (its file removed first);
- an eval's finish: in one process, what ``monte.evals.run._delta`` reads to pair a new dev
  eval against its baseline, on a fresh store (the rows at the tip, the baseline, its tasks);

and reports medians and each one's ratio to the floor of the same round. On a ledger of
30 runs it also times the read-only commands (``status``, ``show``, ``env list``, ``config``,
``--help``) beside ``python -c pass``. ``--plot PATH`` draws the growth (log-log).

    .venv/bin/python bench/status_scale.py --repos /tmp/monte-scale --plot docs/status_scale.png
    .venv/bin/python bench/status_scale.py --sizes 1000,10000          # without 100,000 (minutes)
    .venv/bin/python bench/status_scale.py --quick                     # 30 and 120 runs: seconds
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

import status_10k as st  # noqa: E402 - the ledger builder, shared

REF = f"refs/heads/monte/{st.EXPERIMENT}/ledger"


def build(repo: Path, n: int, seed: int) -> dict[str, Any]:
    from monte import api

    subprocess.run(["git", "init", "-q", "-b", "main", str(repo)], check=True)
    subprocess.run(["git", "-C", str(repo), "config", "user.name", "bench"], check=True)
    subprocess.run(["git", "-C", str(repo), "config", "user.email", "bench@localhost"], check=True)
    api.init(repo)
    print(f"building {n} runs in {repo} ...", flush=True)
    return st.build_ledger(repo, n, seed, 10, 50, progress_every=max(n // 5, 1))


def timed(cmd: list[str], cwd: Path) -> float:
    t0 = time.perf_counter()
    subprocess.run(cmd, cwd=cwd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - t0


def finish_cost(repo: Path) -> float:
    """What an eval's finish reads to pair itself: a fresh store, the rows at the tip, the
    cohort's baseline and its per-task file (``monte.evals.run._delta``, without the append)."""
    from monte.evals.run import _delta
    from monte.ledger.experiment import Ledger
    from monte.ledger.store import Store

    ledger = Ledger(Store(repo), st.EXPERIMENT)
    snap = ledger.snapshot()
    probe = next(r for r in reversed(ledger.rows(snap)) if r.kind == "eval" and r.split == "dev"
                 and (r.plan.get("target") or {}).get("kind") == "checkpoint")
    tasks = [{"id": f"t{i}", "score": float(i % 2)} for i in range(200)]
    t0 = time.perf_counter()
    ledger = Ledger(Store(repo), st.EXPERIMENT)
    _delta(ledger, ledger.snapshot(), probe, tasks)
    return time.perf_counter() - t0


def measure(repo: Path, repeats: int) -> dict[str, Any]:
    monte = st.monte_bin()
    cache = repo / ".git" / "monte" / "cache" / f"{st.EXPERIMENT}.objects"
    cache.unlink(missing_ok=True)
    cold = timed([*monte, "status", "--json"], repo)  # writes the cache file
    timed([*monte, "status", "--json"], repo)  # warm-up
    series: dict[str, list[float]] = {"floor": [], "status_json": [], "status": [], "finish": []}
    for _ in range(repeats):
        series["floor"].append(timed(["git", "log", "--format=%B", REF], repo))
        series["status_json"].append(timed([*monte, "status", "--json"], repo))
        series["status"].append(timed([*monte, "status"], repo))
        series["finish"].append(finish_cost(repo))
    med = {k: statistics.median(v) for k, v in series.items()}
    doc = json.loads(subprocess.run([*monte, "status", "--json"], cwd=repo, capture_output=True,
                                    check=True).stdout)
    return {"rows": len(doc["rows"]), "all": series, "median_s": med, "best_s": {k: min(v) for k, v in series.items()},
            "status_json_cold_s": cold, "cache_bytes": cache.stat().st_size if cache.exists() else 0,
            "ratio_to_floor": {k: med[k] / med["floor"] for k in ("status_json", "status")}}


def small_commands(repo: Path, repeats: int) -> dict[str, Any]:
    """Read-only commands on a small repository, beside the interpreter's own start."""
    monte = st.monte_bin()
    doc = json.loads(subprocess.run([*monte, "status", "--json"], cwd=repo, capture_output=True, check=True).stdout)
    run = doc["rows"][-1]["run"]
    cmds = {"python -c pass": [sys.executable, "-c", "pass"], "monte --help": [*monte, "--help"],
            "monte status": [*monte, "status"], "monte status --json": [*monte, "status", "--json"],
            "monte show RUN": [*monte, "show", run], "monte env list": [*monte, "env", "list"],
            "monte config": [*monte, "config"]}
    out: dict[str, list[float]] = {k: [] for k in cmds}
    for _ in range(repeats):
        for k, c in cmds.items():
            out[k].append(timed(c, repo))
    return {k: {"median_s": statistics.median(v), "best_s": min(v)} for k, v in out.items()}


def plot(result: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    sizes = sorted(int(n) for n in result["sizes"])
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    for key, label in (("status_json", "monte status --json"), ("status", "monte status"),
                       ("floor", "git log --format=%B (floor)"), ("finish", "eval finish: pairing reads (in process)")):
        ax.plot(sizes, [result["sizes"][str(n)]["median_s"][key] for n in sizes], marker="o", label=label)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("runs in the ledger")
    ax.set_ylabel("seconds, median (commands: whole process)")
    ax.set_title(f"monte status as the ledger grows ({result['date'][:10]})")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--sizes", default="1000,10000,100000", help="ledger sizes, comma-separated")
    p.add_argument("--quick", action="store_true", help="smoke run: 30 and 120 runs, one round")
    p.add_argument("--repeats", type=int, default=None, help="rounds, medians (default 5)")
    p.add_argument("--repos", default=None, help="keep the ledgers in DIR/runs-N and reuse them on the next run")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--plot", default=None, help="write the growth plot (PNG) here")
    p.add_argument("--json-out", default=None, help="write the result as JSON to this path")
    args = p.parse_args(argv)
    sizes = [30, 120] if args.quick else [int(x) for x in args.sizes.split(",")]
    repeats = args.repeats or (1 if args.quick else 5)
    os.environ.setdefault("DVC_NO_ANALYTICS", "1")
    result: dict[str, Any] = {
        "benchmark": "status_scale", "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(),
                    "loadavg": os.getloadavg()}, "repeats": repeats, "sizes": {}}
    tmp = Path(tempfile.mkdtemp(prefix="monte-bench-scale-")) if not args.repos else None
    root = Path(args.repos).resolve() if args.repos else tmp
    assert root is not None
    try:
        for n in sizes:
            repo = root / f"runs-{n}"
            built = None
            if not (repo / ".git").is_dir():
                built = build(repo, n, args.seed)
            print(f"measuring {n} runs ({repeats} rounds) ...", flush=True)
            r = measure(repo, repeats)
            if built:
                r["build"] = {k: built[k] for k in ("build_s", "append_ms_mean")}
            result["sizes"][str(n)] = r
        small = root / "runs-30"
        if not (small / ".git").is_dir():
            build(small, 30, args.seed)
        result["small_repository"] = small_commands(small, repeats)
    finally:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)
    result["machine"]["loadavg_end"] = os.getloadavg()
    print_summary(result)
    if args.plot:
        plot(result, Path(args.plot))
        print(f"wrote {args.plot}")
    if args.json_out:
        Path(args.json_out).write_text(json.dumps(result, indent=2) + "\n")
        print(f"wrote {args.json_out}")
    return 0


def print_summary(r: dict[str, Any]) -> None:
    print(f"\nstatus_scale: {r['machine']['cpus']} cpus, Python {r['machine']['python']}, {r['repeats']} rounds,"
          f" load {r['machine']['loadavg'][0]:.1f} -> {r['machine']['loadavg_end'][0]:.1f}")
    print("| runs | floor `git log` | `status --json` | ratio | `status` | ratio | cold `--json` | eval finish reads |")
    print("|---|---|---|---|---|---|---|---|")
    for n, s in r["sizes"].items():
        m, q = s["median_s"], s["ratio_to_floor"]
        print(f"| {int(n):,} | {m['floor']:.3f} s | {m['status_json']:.3f} s | {q['status_json']:.1f}x |"
              f" {m['status']:.3f} s | {q['status']:.1f}x | {s['status_json_cold_s']:.3f} s | {m['finish'] * 1e3:.0f} ms |")
    print("small repository (30 runs), read-only commands (median / best):")
    for k, v in r["small_repository"].items():
        print(f"  {k:22s} {v['median_s']:.3f} s / {v['best_s']:.3f} s")


if __name__ == "__main__":
    sys.exit(main())
