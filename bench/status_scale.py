"""Benchmark: how ``monte status``, ``monte ledger verify`` and an eval's finish grow with the
ledger, 1,000 to 100,000 runs, each beside the ``git log`` floor of the same ledger.

For each size N it builds (or, with ``--repos DIR``, builds once and then reuses ``DIR/runs-N``)
``bench/status_10k.py``'s ledger of N runs (base evals, training runs with lineage refs, forks,
stage boundaries, paired deltas, failed, smoke and running rows) through ``bench/bulk_ledger.py``
(one ``git fast-import`` of the records monte's own ``record_change`` writes: the ledger
``Ledger.append_row`` would write, in minutes at 100,000). Then, alternating in rounds so the
machine's load hits all alike, it times as subprocesses (interpreter start and imports included):

- the floor: ``git log --format=%B`` of the ledger ref (every record's message);
- ``monte status --json`` and ``monte status`` (to a pipe), warm: the derived cache of
  :mod:`monte.ledger.derived` describes the tip;
- ``monte status --json`` right after an append (one real record appended each round through
  ``Ledger.append_row``: the cache derives that index again and walks the tree), and once cold
  (both caches removed: every index parsed);
- in one process: an eval's finish (``monte.evals.run._delta`` on a fresh store, pairing with the
  baseline through the cohort index) and a train plan's ledger reads (the baselines, the parent
  checkpoint, its stage start);

and, on the honest ledger of ``bulk_ledger.py --mix honest`` (N <= ``--verify-max``, default
10,000: verify passes on it), ``monte ledger verify --all`` in full and ``--from`` ten records
back. It reports medians, each one's ratio to the floor of the same round, and how each grows
from size to size. On a ledger of 30 runs it also times the read-only commands (``status``,
``show``, ``logs``, ``env list``, ``config``, ``--help``) beside ``python -c pass``.
``--plot PATH`` draws the growth (log-log).

monte runs from two copies of its package made for the run: one compiled (``compileall``: what
an installed wheel has) and one without bytecode, run with ``PYTHONDONTWRITEBYTECODE=1`` (a CI
image or container that never keeps bytecode: every process compiles what it imports). The
status figures and the small repository's commands are timed from both, each beside its own
baseline of the same round, and the summary says which of issue 35's goals hold
(:data:`GOALS`).

    .venv/bin/python bench/status_scale.py --repos /tmp/monte-scale --plot docs/bench/status_scale.png
    .venv/bin/python bench/status_scale.py --sizes 1000,10000          # without 100,000
    .venv/bin/python bench/status_scale.py --quick                     # 30 runs, one round: seconds
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

import bulk_ledger  # noqa: E402 - the bulk builder: monte's own records through one fast-import
import status_10k as st  # noqa: E402 - the ledger's shape, the experiment's name

REF = f"refs/heads/monte/{st.EXPERIMENT}/ledger"

#: issue 35's goals: (figure, size or None for the small repository, most times its baseline)
GOALS = (("status_json", "10000", 3.0), ("status", "10000", 3.0), ("after_append", "10000", 3.5),
         ("status_json", "100000", 2.0), ("status", "100000", 2.0),
         ("monte --help", None, 2.0), ("monte status", None, 4.0), ("monte show RUN", None, 4.0),
         ("monte logs RUN", None, 4.0), ("monte env list", None, 4.0), ("monte config", None, 4.0))

#: how monte is run: from the compiled copy, and from the copy without bytecode (set by main)
VARIANTS: dict[str, tuple[list[str], dict[str, str]]] = {}
#: the variants timed (``--quick``: the compiled copy only, to stay a smoke run of seconds)
TIMED = ["bytecode", "no bytecode"]


def make_variants(root: Path) -> None:
    """Two copies of the monte package under ``root``: ``compiled/`` (compileall'd) and
    ``source/`` (no bytecode, run with PYTHONDONTWRITEBYTECODE=1), and how to run each."""
    import compileall

    src = HERE.parent / "monte"
    for name in ("compiled", "source"):
        dest = root / name / "monte"
        if dest.exists():
            shutil.rmtree(dest)
        shutil.copytree(src, dest, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    compileall.compile_dir(str(root / "compiled" / "monte"), quiet=1)
    cmd = [sys.executable, "-c", "from monte.cli.main import main; main()"]
    base = {k: v for k, v in os.environ.items() if k not in ("PYTHONDONTWRITEBYTECODE", "PYTHONPATH")}
    VARIANTS["bytecode"] = (cmd, {**base, "PYTHONPATH": str(root / "compiled"), "PYTHONDONTWRITEBYTECODE": "1"})
    VARIANTS["no bytecode"] = (cmd, {**base, "PYTHONPATH": str(root / "source"), "PYTHONDONTWRITEBYTECODE": "1"})


def build(repo: Path, n: int, seed: int, mix: str = "status") -> dict[str, Any]:
    print(f"building {n} runs ({mix}) in {repo} ...", flush=True)
    return bulk_ledger.build(repo, mix=mix, records=n, seed=seed)


def timed(cmd: list[str], cwd: Path, env: dict[str, str] | None = None) -> float:
    t0 = time.perf_counter()
    subprocess.run(cmd, cwd=cwd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    return time.perf_counter() - t0


def monte_cmd(variant: str = "bytecode") -> tuple[list[str], dict[str, str] | None]:
    if variant in VARIANTS:
        return VARIANTS[variant]
    return st.monte_bin(), None


def _probe(repo: Path) -> tuple[Any, Any]:
    """The newest admissible dev eval of a checkpoint, and the newest training row with one."""
    from monte.ledger.experiment import Ledger
    from monte.ledger.store import Store

    rows = Ledger(Store(repo), st.EXPERIMENT).rows()
    ev = next(r for r in reversed(rows) if r.kind == "eval" and r.split == "dev" and not r.smoke
              and r.status == "succeeded" and (r.plan.get("target") or {}).get("kind") == "checkpoint")
    tr = next(r for r in reversed(rows) if r.kind == "train" and not r.smoke and r.checkpoints)
    return ev, tr


def finish_cost(repo: Path, probe: Any) -> float:
    """What an eval's finish reads to pair itself: a fresh store, the cohort's baseline (through
    its index) and the baseline's per-task file (``monte.evals.run._delta``, without the append)."""
    from monte.evals.run import _delta
    from monte.ledger.experiment import Ledger
    from monte.ledger.store import Store

    tasks = [{"id": f"t{i}", "score": float(i % 2)} for i in range(200)]
    t0 = time.perf_counter()
    ledger = Ledger(Store(repo), st.EXPERIMENT)
    d = _delta(ledger, ledger.snapshot(), probe, tasks)
    took = time.perf_counter() - t0
    assert d is not None and d["baseline"]
    return took


def plan_cost(repo: Path, train: Any) -> float:
    """A train plan's ledger reads (``monte.training.plan._plan_train``): the measurement, every
    exam's baselines, the parent checkpoint and its stage start, on a fresh store."""
    from monte.ledger.experiment import Ledger
    from monte.ledger.store import Store
    from monte.runs.lifecycle import CohortReads
    from monte.training.plan import _checkpoint, _require_baselines

    step = int(train.checkpoints[-1]["step"])
    t0 = time.perf_counter()
    led = Ledger(Store(repo), st.EXPERIMENT)
    snap = led.snapshot()
    _require_baselines(CohortReads(led, snap, train.cohort), led.measurement(snap))
    ck = _checkpoint(led, snap, train.run, step)
    _checkpoint(led, snap, train.run, step)  # the stage start's lookup
    took = time.perf_counter() - t0
    assert ck.step == step
    return took


def append_one(repo: Path, probe: Any) -> None:
    """One more record, as an eval's start writes it (a new run id, the probe's target)."""
    from monte.ledger.experiment import Ledger
    from monte.ledger.ids import new_run_id
    from monte.ledger.store import Store

    row = probe.model_copy(update={"run": new_run_id(), "seq": 0, "status": "started", "score": None, "n": None,
                                   "delta": None, "host": "bench-elsewhere", "pid": 1})
    Ledger(Store(repo), st.EXPERIMENT).append_row(lambda _s, _q: row.model_copy(), event="started",
                                                   summary=lambda r: f"eval {r.run} started")


def _caches(repo: Path) -> list[Path]:
    folder = repo / ".git" / "monte" / "cache"
    return [p for p in folder.glob(f"{st.EXPERIMENT}.*")] if folder.is_dir() else []


def measure(repo: Path, repeats: int) -> dict[str, Any]:
    monte, env = monte_cmd()
    src, src_env = monte_cmd("no bytecode")
    for p in _caches(repo):
        p.unlink()
    cold = timed([*monte, "status", "--json"], repo, env)  # derives every index, writes the caches
    timed([*monte, "status", "--json"], repo, env)  # warm-up
    probe, train = _probe(repo)
    append_one(repo, probe)  # a ledger built before the cohort index gains it on its next record
    timed([*monte, "status", "--json"], repo, env)
    timed([*monte, "status"], repo, env)
    series: dict[str, list[float]] = {k: [] for k in
                                      ("floor", "status_json", "status", "after_append", "finish", "plan",
                                       "status_json_no_bytecode", "status_no_bytecode")}
    for _ in range(repeats):
        series["floor"].append(timed(["git", "log", "--format=%B", REF], repo))
        series["status_json"].append(timed([*monte, "status", "--json"], repo, env))
        series["status"].append(timed([*monte, "status"], repo, env))
        if "no bytecode" in TIMED:
            series["status_json_no_bytecode"].append(timed([*src, "status", "--json"], repo, src_env))
            series["status_no_bytecode"].append(timed([*src, "status"], repo, src_env))
        append_one(repo, probe)
        series["after_append"].append(timed([*monte, "status", "--json"], repo, env))
        timed([*monte, "status"], repo, env)  # the human view of the new state, kept (not timed)
        series["finish"].append(finish_cost(repo, probe))
        series["plan"].append(plan_cost(repo, train))
    series = {k: v for k, v in series.items() if v}
    med = {k: statistics.median(v) for k, v in series.items()}
    doc = json.loads(subprocess.run([*monte, "status", "--json"], cwd=repo, capture_output=True,
                                    check=True, env=env).stdout)
    return {"rows": len(doc["rows"]), "all": series, "median_s": med, "best_s": {k: min(v) for k, v in series.items()},
            "status_json_cold_s": cold, "cache_bytes": {p.name: p.stat().st_size for p in _caches(repo)},
            "ratio_to_floor": {k: med[k] / med["floor"] for k in
                               ("status_json", "status", "after_append", "status_json_no_bytecode",
                                "status_no_bytecode") if k in med}}


def measure_verify(repo: Path, repeats: int) -> dict[str, Any]:
    """``monte ledger verify --all`` in full, and from ten records back, beside the floor."""
    monte = st.monte_bin()
    back = subprocess.run(["git", "-C", str(repo), "rev-parse", f"{REF}~10"], capture_output=True, text=True,
                          check=True).stdout.strip()
    records = int(subprocess.run(["git", "-C", str(repo), "rev-list", "--count", REF], capture_output=True,
                                 text=True, check=True).stdout)
    timed([*monte, "ledger", "verify", "--all"], repo)  # passes (check=True), and warms the caches
    series: dict[str, list[float]] = {"floor": [], "full": [], "incremental": []}
    for _ in range(repeats):
        series["floor"].append(timed(["git", "log", "--format=%B", REF], repo))
        series["full"].append(timed([*monte, "ledger", "verify", "--all"], repo))
        series["incremental"].append(timed([*monte, "ledger", "verify", st.EXPERIMENT, "--from", back], repo))
    med = {k: statistics.median(v) for k, v in series.items()}
    return {"records": records, "all": series, "median_s": med,
            "ratio_to_floor": {k: med[k] / med["floor"] for k in ("full", "incremental")}}


def small_commands(repo: Path, repeats: int) -> dict[str, Any]:
    """Read-only commands on a small repository, beside the interpreter's own start, from the
    compiled copy and from the one without bytecode (each beside ``python -c pass`` run alike)."""
    monte, env = monte_cmd()
    doc = json.loads(subprocess.run([*monte, "status", "--json"], cwd=repo, capture_output=True, check=True,
                                    env=env).stdout)
    run = doc["rows"][-1]["run"]
    log = repo / ".monte" / "runs" / st.EXPERIMENT / run / "events.jsonl"  # a run's event file, for `logs`
    data_root = json.loads(subprocess.run([*monte, "config", "--json"], cwd=repo, capture_output=True,
                                          check=True, env=env).stdout).get("data_root")
    if data_root:
        log = Path(data_root) / "runs" / st.EXPERIMENT / run / "events.jsonl"
    log.parent.mkdir(parents=True, exist_ok=True)
    if not log.exists():
        log.write_text('{"event": "started"}\n{"event": "succeeded"}\n')
    out: dict[str, Any] = {}
    for variant in TIMED:
        cmd, venv = monte_cmd(variant)
        timed([*cmd, "status"], repo, venv)  # the views kept
        cmds = {"python -c pass": [sys.executable, "-c", "pass"], "monte --help": [*cmd, "--help"],
                "monte status": [*cmd, "status"], "monte status --json": [*cmd, "status", "--json"],
                "monte show RUN": [*cmd, "show", run], "monte logs RUN": [*cmd, "logs", run],
                "monte env list": [*cmd, "env", "list"], "monte config": [*cmd, "config"]}
        times: dict[str, list[float]] = {k: [] for k in cmds}
        for _ in range(repeats):
            for k, c in cmds.items():
                times[k].append(timed(c, repo, venv))
        base = statistics.median(times["python -c pass"])
        out[variant] = {k: {"median_s": statistics.median(v), "best_s": min(v),
                            "ratio_to_python": statistics.median(v) / base} for k, v in times.items()}
    return out


def goals(r: dict[str, Any]) -> list[dict[str, Any]]:
    """Each of :data:`GOALS` measured in this run (both variants), and whether it holds."""
    out = []
    for figure, size, most in GOALS:
        for variant in TIMED:
            if size is None:
                ratio = r["small_repository"][variant][figure]["ratio_to_python"]
                base = "python -c pass"
            else:
                if size not in r["sizes"]:
                    continue
                key = figure if variant == "bytecode" else f"{figure}_no_bytecode"
                if key not in r["sizes"][size]["ratio_to_floor"]:
                    continue
                ratio = r["sizes"][size]["ratio_to_floor"][key]
                base = "git log --format=%B"
            out.append({"figure": figure, "runs": size or "30", "variant": variant, "ratio": ratio,
                        "baseline": base, "goal": most, "holds": ratio <= most})
    return out


def plot(result: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    sizes = sorted(int(n) for n in result["sizes"])
    fig, ax = plt.subplots(figsize=(6.8, 4.4))
    for key, label in (("status_json", "monte status --json (warm)"), ("status", "monte status (warm)"),
                       ("after_append", "monte status --json after an append"),
                       ("floor", "git log --format=%B (floor)"), ("finish", "eval finish: pairing reads (in process)")):
        ax.plot(sizes, [result["sizes"][str(n)]["median_s"][key] for n in sizes], marker="o", label=label)
    vsizes = sorted(int(n) for n in result.get("verify", {}))
    if vsizes:
        for key, label in (("full", "monte ledger verify --all"), ("incremental", "verify --from 10 back")):
            ax.plot(vsizes, [result["verify"][str(n)]["median_s"][key] for n in vsizes], marker="s",
                    linestyle="--", label=label)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("runs in the ledger")
    ax.set_ylabel("seconds, median (commands: whole process)")
    ax.set_title(f"monte status and verify as the ledger grows ({result['date'][:10]})")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--sizes", default="1000,10000,100000", help="ledger sizes, comma-separated")
    p.add_argument("--verify-max", type=int, default=10_000, help="verify the honest ledgers up to this size")
    p.add_argument("--quick", action="store_true", help="smoke run: 30 runs, one round, the compiled copy only")
    p.add_argument("--repeats", type=int, default=None, help="rounds, medians (default 5)")
    p.add_argument("--repos", default=None, help="keep the ledgers in DIR/runs-N (DIR/honest-N) and reuse them")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--plot", default=None, help="write the growth plot (PNG) here")
    p.add_argument("--json-out", default=None, help="write the result as JSON to this path")
    args = p.parse_args(argv)
    sizes = [30] if args.quick else [int(x) for x in args.sizes.split(",")]
    repeats = args.repeats or (1 if args.quick else 5)
    if args.quick:
        TIMED[:] = ["bytecode"]
    os.environ.setdefault("DVC_NO_ANALYTICS", "1")
    result: dict[str, Any] = {
        "benchmark": "status_scale", "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(),
                    "loadavg": os.getloadavg()}, "repeats": repeats, "sizes": {}, "verify": {}}
    tmp = Path(tempfile.mkdtemp(prefix="monte-bench-scale-")) if not args.repos else None
    root = Path(args.repos).resolve() if args.repos else tmp
    assert root is not None
    code = Path(tempfile.mkdtemp(prefix="monte-bench-code-"))
    make_variants(code)
    try:
        for n in sizes:
            repo = root / f"runs-{n}"
            built = None if (repo / ".git").is_dir() else build(repo, n, args.seed)
            print(f"measuring status at {n} runs ({repeats} rounds) ...", flush=True)
            r = measure(repo, repeats)
            if built:
                r["build"] = {k: built[k] for k in ("build_s", "ms_per_record")}
            result["sizes"][str(n)] = r
            if n <= args.verify_max:
                honest = root / f"honest-{n}"
                if not (honest / ".git").is_dir():
                    build(honest, n, args.seed, mix="honest")
                print(f"measuring verify at {n} records ({repeats} rounds) ...", flush=True)
                result["verify"][str(n)] = measure_verify(honest, repeats)
        small = root / "runs-30"
        if not (small / ".git").is_dir():
            build(small, 30, args.seed)
        result["small_repository"] = small_commands(small, repeats)
    finally:
        shutil.rmtree(code, ignore_errors=True)
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)
    result["goals"] = goals(result)
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
    print("| runs | floor `git log` | `status --json` | ratio | `status` | ratio | after an append | cold `--json` "
          "| eval finish | train plan |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for n, s in r["sizes"].items():
        m, q = s["median_s"], s["ratio_to_floor"]
        print(f"| {int(n):,} | {m['floor']:.3f} s | {m['status_json']:.3f} s | {q['status_json']:.1f}x |"
              f" {m['status']:.3f} s | {q['status']:.1f}x | {m['after_append']:.3f} s ({q['after_append']:.1f}x) |"
              f" {s['status_json_cold_s']:.3f} s | {m['finish'] * 1e3:.1f} ms | {m['plan'] * 1e3:.1f} ms |")
    if r.get("verify"):
        print("| records (honest) | floor `git log` | `ledger verify --all` | ratio | `--from` 10 back | ratio |")
        print("|---|---|---|---|---|---|")
        for v in r["verify"].values():
            m, q = v["median_s"], v["ratio_to_floor"]
            print(f"| {v['records']:,} | {m['floor']:.3f} s | {m['full']:.3f} s | {q['full']:.1f}x |"
                  f" {m['incremental']:.3f} s | {q['incremental']:.1f}x |")
    if "no bytecode" in r["small_repository"]:
        print("| runs | `status --json` without bytecode | /floor | `status` without bytecode | /floor |")
        print("|---|---|---|---|---|")
        for n, s in r["sizes"].items():
            m, q = s["median_s"], s["ratio_to_floor"]
            print(f"| {int(n):,} | {m['status_json_no_bytecode']:.3f} s | {q['status_json_no_bytecode']:.1f}x |"
                  f" {m['status_no_bytecode']:.3f} s | {q['status_no_bytecode']:.1f}x |")
    small = r["small_repository"]
    variants = list(small)
    print("small repository (30 runs), read-only commands, median (x `python -c pass` run alike):")
    print("| command | " + " | ".join(f"{'with' if v == 'bytecode' else 'without'} bytecode" for v in variants) + " |")
    print("|---" * (len(variants) + 1) + "|")
    for k in small[variants[0]]:
        print(f"| `{k}` | " + " | ".join(f"{small[v][k]['median_s']:.3f} s ({small[v][k]['ratio_to_python']:.1f}x)"
                                       for v in variants) + " |")
    print("goals (issue 35):")
    for g in r["goals"]:
        print(f"  {g['figure']:20s} {g['runs']:>6s} runs, {g['variant']:11s}: {g['ratio']:.2f}x {g['baseline']}"
              f" (goal <= {g['goal']:.1f}x): {'holds' if g['holds'] else 'MISSED'}")


if __name__ == "__main__":
    sys.exit(main())
