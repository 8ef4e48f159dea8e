"""Benchmark: appending Run rows to an experiment's ledger, and reading the state back.

In a fresh temporary git repository this script creates one experiment and appends N Run rows
with ``Ledger.append_row`` (one git commit each, written by dulwich). It reports:

- the append cost per record for the first and the last window of appends, and their ratio
  (the design asks for O(log n) appends, so the ratio should stay near 1.0), per-window figures
  in between with the number of ``runs/<c0>/<c1>/`` buckets made so far (at most 32 x 32), and
  the pauses where the store packed its loose objects;
- the state read (``Ledger.rows()`` over all rows plus ``Ledger.measurement()``, what
  ``monte status`` reads), against a floor measured in the same run: ``git log --format=%B`` over
  the same ref;
- the objects on disk (``git count-objects -v``), the sizes (``git cat-file``) of the trees an
  append rewrites (root, ``runs/``, a first-level folder ``runs/<c0>/``, a bucket
  ``runs/<c0>/<c1>/``, the run's folder), of the biggest ``index.json``, and the bytes the last
  append wrote; ``git fsck --strict`` and the commit count.

Layout measured (``monte/ledger/records.py``): ``runs/<id[0]>/<id[1]>/<id>/row.json`` with the
derived ``runs/<id[0]>/<id[1]>/index.json``; ids are base32, so every tree under ``runs/`` has at
most 32 entries (plus ``index.json`` in a bucket).

The machine is shared and noisy: compare the ratios, not the absolute times.

    .venv/bin/python bench/ledger_append.py               # N=10,000 (several minutes)
    .venv/bin/python bench/ledger_append.py --quick       # N=50, one read: a smoke run of seconds
    .venv/bin/python bench/ledger_append.py --json-out /tmp/ledger.json
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, cast

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from monte.ledger.experiment import Ledger  # noqa: E402
from monte.ledger.ids import new_run_id  # noqa: E402
from monte.ledger.records import (  # noqa: E402
    ExamFreeze,
    Measurement,
    RunRow,
    SplitFreeze,
)
from monte.ledger.refs import ledger_ref  # noqa: E402
from monte.ledger.store import Store  # noqa: E402

EXPERIMENT = "bench"


def git(repo: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["git", "-C", str(repo), *args], check=check, capture_output=True,
                          text=True)


def measurement() -> Measurement:
    now = datetime.now(UTC).isoformat(timespec="seconds")
    return Measurement(
        experiment=EXPERIMENT,
        created_at=now,
        environment="bench-arith",
        environment_fingerprint="sha256:" + "ab" * 32,
        grader={"name": "exact_match", "normalize": True},
        exams={
            "arith": ExamFreeze(
                benchmark="arith",
                splits={
                    "dev": SplitFreeze(path="arith/dev.jsonl", sha256="cd" * 32, n=500),
                    "test": SplitFreeze(path="arith/test.jsonl", sha256="ef" * 32, n=500),
                },
            )
        },
        model="bench/base-model",
    )


def pack_count(repo: Path) -> int:
    try:
        return sum(1 for n in os.listdir(repo / ".git" / "objects" / "pack") if n.endswith(".pack"))
    except FileNotFoundError:
        return 0


def count_buckets(ledger: Ledger) -> int:
    """``runs/<c0>/<c1>/`` folders at the tip (at most 32 x 32)."""
    snap = ledger.snapshot()
    return sum(len([b for b in snap.listdir(f"runs/{first}") if b != "index.json"])
               for first in snap.listdir("runs"))


def summary_stats(xs: list[float]) -> dict[str, float]:
    return {
        "mean_ms": statistics.fmean(xs) * 1e3,
        "median_ms": statistics.median(xs) * 1e3,
        "max_ms": max(xs) * 1e3,
    }


def new_ledger(repo: Path) -> Ledger:
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    git(repo, "config", "user.name", "bench")
    git(repo, "config", "user.email", "bench@localhost")
    ledger = Ledger(Store(repo), EXPERIMENT)
    ledger.create(measurement())
    return ledger


def append_one(ledger: Ledger, rng: random.Random, now: str) -> tuple[float, str]:
    """Append one eval row; returns the seconds ``append_row`` took and the run id."""
    run_id = new_run_id()
    score = round(rng.random(), 4)

    def make(_snap, _seq) -> RunRow:  # noqa: ANN001
        return RunRow(
            run=run_id, experiment=EXPERIMENT, kind="eval", status="succeeded",
            created_at=now, updated_at=now, cohort="c1", model="bench/base-model",
            exam="arith", split="dev", step=0, score=score, n=500, host="bench", pid=1,
        )

    t0 = time.perf_counter()
    ledger.append_row(make, event="finished",
                      summary=lambda r: f"eval {r.run} on arith/dev: {r.score:.4f}")
    return time.perf_counter() - t0, run_id


def append_rows(repo: Path, n: int, seed: int, window: int = 0, reference: Path | None = None,
                ) -> tuple[list[float], list[dict], list[str], dict[int, int], list[float]]:
    """Append ``n`` rows to a new ledger in ``repo``.

    Returns per-append seconds, the pack events, the run ids, the number of
    ``runs/<c0>/<c1>/`` buckets after each ``window`` appends, and, with ``reference``, the seconds of ``window`` appends
    to a fresh ledger there, each made right after one of the last ``window`` appends here: the
    cost of an append to a small ledger under the same machine load as the last window.
    """
    rng = random.Random(seed)
    ledger = new_ledger(repo)
    ref_ledger = new_ledger(reference) if reference is not None and window else None
    times: list[float] = []
    ref_times: list[float] = []
    events: list[dict] = []
    ids: list[str] = []
    buckets: dict[int, int] = {}
    packs = pack_count(repo)
    now = datetime.now(UTC).isoformat(timespec="seconds")
    for i in range(n):
        dt, run_id = append_one(ledger, rng, now)
        times.append(dt)
        ids.append(run_id)
        now_packs = pack_count(repo)  # outside the timed region
        if now_packs != packs:
            events.append({"append": i + 1, "packs_before": packs, "packs_after": now_packs,
                           "ms": dt * 1e3})
            packs = now_packs
        if window and (i + 1) % window == 0:
            buckets[i + 1] = count_buckets(ledger)  # outside the timed region
        if ref_ledger is not None and i >= n - window:
            ref_times.append(append_one(ref_ledger, rng, now)[0])
    return times, events, ids, buckets, ref_times


def read_state(repo: Path, repeats: int) -> tuple[list[float], int]:
    """Time what ``monte status`` reads: a fresh Store, every row, the measurement."""
    times = []
    count = 0
    for _ in range(repeats):
        t0 = time.perf_counter()
        ledger = Ledger(Store(repo), EXPERIMENT)
        rows = ledger.rows()
        ledger.measurement()
        times.append(time.perf_counter() - t0)
        count = len(rows)
    return times, count


def read_state_single_walk(repo: Path, repeats: int) -> list[float]:
    """A diagnostic floor in Python: the same index blobs read with one walk of
    ``runs/<c0>/<c1>/`` (each tree parsed once) and ``json.loads``, without pydantic."""
    from dulwich.objects import Blob, Commit, Tree

    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        store = Store(repo)
        objs = store.repo.object_store
        tip = store.tip(ledger_ref(EXPERIMENT))
        assert tip is not None
        root = objs[cast(Commit, objs[tip]).tree]
        assert isinstance(root, Tree)
        runs = cast(Tree, objs[root[b"runs"][1]])
        total = 0
        for first in runs.iteritems():
            for second in cast(Tree, objs[first.sha]).iteritems():
                bucket = cast(Tree, objs[second.sha])
                try:
                    total += len(json.loads(cast(Blob, objs[bucket[b"index.json"][1]]).data))
                except KeyError:
                    pass
        json.loads(cast(Blob, objs[root[b"measurement.json"][1]]).data)
        times.append(time.perf_counter() - t0)
    return times


def git_log_floor(repo: Path, repeats: int) -> tuple[list[float], int]:
    times = []
    size = 0
    for _ in range(repeats):
        t0 = time.perf_counter()
        out = subprocess.run(["git", "-C", str(repo), "log", "--format=%B",
                              ledger_ref(EXPERIMENT)], check=True, capture_output=True)
        times.append(time.perf_counter() - t0)
        size = len(out.stdout)
    return times, size


def count_objects(repo: Path) -> dict[str, int]:
    out = git(repo, "count-objects", "-v").stdout
    return {k.strip(): int(v) for k, v in (line.split(":") for line in out.splitlines())}


def tree_sizes(repo: Path, last_run: str) -> dict[str, object]:
    """Sizes (``git cat-file``, uncompressed) at the tip: the five trees and three blobs the last
    append rewrote, and the biggest first-level folder, bucket and ``index.json``."""
    ref = ledger_ref(EXPERIMENT)
    # every tree down to the buckets, and the indexes: `ls-tree -r -t` lists each tree it enters
    first_level: dict[str, str] = {}
    bucket_trees: dict[str, str] = {}
    indexes: dict[str, str] = {}
    for line in git(repo, "ls-tree", "-r", "-t", ref, "runs").stdout.splitlines():
        meta, path = line.split("\t", 1)
        _mode, kind, sha = meta.split()
        parts = path.split("/")
        if kind == "tree" and len(parts) == 2:
            first_level[path] = sha
        elif kind == "tree" and len(parts) == 3:
            bucket_trees[path] = sha
        elif kind == "blob" and len(parts) == 4 and parts[3] == "index.json":
            indexes[path] = sha
    c0, c1 = last_run[0], last_run[1]
    last = {  # what the last append rewrote
        "root": f"{ref}:",
        "runs": f"{ref}:runs",
        "first_level": f"{ref}:runs/{c0}",
        "bucket": f"{ref}:runs/{c0}/{c1}",
        "run_dir": f"{ref}:runs/{c0}/{c1}/{last_run}",
        "row_json": f"{ref}:runs/{c0}/{c1}/{last_run}/row.json",
        "index_json": f"{ref}:runs/{c0}/{c1}/index.json",
        "meta_json": f"{ref}:meta.json",
    }
    names = [*last.values(), *first_level.values(), *bucket_trees.values(), *indexes.values()]
    out = subprocess.run(["git", "-C", str(repo), "cat-file", "--batch-check=%(objectsize)"],
                         input="\n".join(names) + "\n", capture_output=True, text=True,
                         check=True).stdout.split()
    sizes = list(map(int, out))
    assert len(sizes) == len(names), (len(sizes), len(names))
    size = dict(zip(names, sizes, strict=True))
    wrote = {k: size[v] for k, v in last.items()}
    first_sizes = [size[v] for v in first_level.values()]
    bucket_sizes = [size[v] for v in bucket_trees.values()]
    index_sizes = [size[v] for v in indexes.values()]
    return {
        "first_level_folders": len(first_level),
        "buckets": len(bucket_trees),
        "root_tree_bytes": wrote["root"],
        "runs_tree_bytes": wrote["runs"],
        "runs_tree_entries": len(first_level),
        "first_level_tree_bytes_max": max(first_sizes),
        "first_level_tree_bytes_mean": round(statistics.fmean(first_sizes)),
        "bucket_tree_bytes_max": max(bucket_sizes),
        "bucket_tree_bytes_mean": round(statistics.fmean(bucket_sizes)),
        "run_tree_bytes": wrote["run_dir"],
        "row_json_bytes": wrote["row_json"],
        "index_json_bytes_max": max(index_sizes),
        "index_json_bytes_mean": round(statistics.fmean(index_sizes)),
        "last_append_objects": wrote,
        "bytes_written_by_last_append_uncompressed": sum(wrote.values()),
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--n", type=int, default=None, help="rows to append (default 10000)")
    p.add_argument("--window", type=int, default=None,
                   help="appends per window for first/last (default 1000)")
    p.add_argument("--repeats", type=int, default=None, help="repeats of each read timing (default 5)")
    p.add_argument("--quick", action="store_true", help="smoke run: N=50, window=10, one read")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--tmpdir", default=None, help="where to make the temporary repository")
    p.add_argument("--keep", action="store_true", help="keep the repository and print its path")
    p.add_argument("--no-reference", action="store_true",
                   help="skip the fresh reference ledger appended to alongside the last window")
    p.add_argument("--no-git-repack", action="store_true",
                   help="skip the final `git repack -adf` (how small git itself packs it)")
    p.add_argument("--json-out", default=None, help="write the result as JSON to this path")
    args = p.parse_args(argv)
    n = args.n or (50 if args.quick else 10_000)
    window = args.window or (10 if args.quick else 1000)
    args.repeats = args.repeats or (1 if args.quick else 5)
    if n < 2 * window:
        p.error("--n must be at least twice --window")

    tmp = Path(tempfile.mkdtemp(prefix="monte-bench-ledger-", dir=args.tmpdir))
    repo = tmp / "repo"
    result: dict[str, object] = {
        "benchmark": "ledger_append",
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(),
                    "platform": platform.platform()},
        "n": n,
        "window": window,
    }
    try:
        print(f"appending {n} rows in {repo} ...", flush=True)
        t0 = time.perf_counter()
        reference = None if args.no_reference else tmp / "reference"
        times, events, ids, buckets, ref_times = append_rows(repo, n, args.seed, window,
                                                             reference)
        total = time.perf_counter() - t0
        first, last = times[:window], times[-window:]
        pack_idx = {e["append"] - 1 for e in events}
        first_np = [t for i, t in enumerate(times[:window]) if i not in pack_idx]
        last_np = [t for i, t in enumerate(times[-window:], start=n - window) if i not in pack_idx]
        windows: list[dict[str, Any]] = [
            {"from": i + 1, "to": min(i + window, n), **summary_stats(times[i:i + window]),
             "buckets_after": buckets.get(min(i + window, n))}
            for i in range(0, n, window)
        ]
        appends = {
            "total_s": total,
            "sum_of_appends_s": sum(times),
            "first": summary_stats(first),
            "last": summary_stats(last),
            "ratio_last_first_mean": statistics.fmean(last) / statistics.fmean(first),
            "ratio_last_first_median": statistics.median(last) / statistics.median(first),
            "ratio_last_first_mean_without_pack_pauses":
                statistics.fmean(last_np) / statistics.fmean(first_np),
            # the second window starts with most of the 1,024 runs/<c0>/<c1>/ buckets made
            # (1 - e^-1 ~ 63%): last/second separates growth with n from the fan-out filling up
            "ratio_last_second_mean": statistics.fmean(last) / windows[1]["mean_ms"] * 1e3,
            "ratio_last_second_median": statistics.median(last) / windows[1]["median_ms"] * 1e3,
            "windows": windows,
            "pack_events": events,
            "reference_fresh_ledger_interleaved_with_last": (
                {**summary_stats(ref_times),
                 "ratio_last_over_reference_mean":
                     statistics.fmean(last) / statistics.fmean(ref_times),
                 "ratio_last_over_reference_median":
                     statistics.median(last) / statistics.median(ref_times)}
                if ref_times else None),
            "pack_pause_total_s": sum(e["ms"] for e in events) / 1e3,
        }
        result["appends"] = appends

        print("reading the state ...", flush=True)
        # alternate the three reads so that noise hits them alike
        rt, gt, wt = [], [], []
        rows = 0
        log_bytes = 0
        for _ in range(args.repeats):
            t, rows = read_state(repo, 1)
            rt += t
            t, log_bytes = git_log_floor(repo, 1)
            gt += t
            wt += read_state_single_walk(repo, 1)
        assert rows == n, (rows, n)
        result["read"] = {
            "rows": rows,
            "monte_rows_plus_measurement_s": {"best": min(rt), "median": statistics.median(rt)},
            "git_log_format_B_s": {"best": min(gt), "median": statistics.median(gt),
                                   "stdout_bytes": log_bytes},
            "single_walk_json_only_s": {"best": min(wt), "median": statistics.median(wt)},
            "ratio_read_over_git_log_best": min(rt) / min(gt),
            "ratio_read_over_single_walk_best": min(rt) / min(wt),
        }

        print("checking the repository with git ...", flush=True)
        result["count_objects"] = count_objects(repo)
        result["trees"] = tree_sizes(repo, ids[-1])
        fsck = git(repo, "fsck", "--strict", check=False)
        commits = len(git(repo, "log", "--oneline", ledger_ref(EXPERIMENT)).stdout.splitlines())
        result["verify"] = {
            "fsck_strict_ok": fsck.returncode == 0,
            "fsck_output": (fsck.stdout + fsck.stderr).strip()[-2000:],
            "commits": commits,
            "commits_expected": n + 1,
            "ok": fsck.returncode == 0 and commits == n + 1,
        }
        if not args.no_git_repack:
            t0 = time.perf_counter()
            git(repo, "repack", "-adfq")
            result["git_repack_adf"] = {"s": time.perf_counter() - t0,
                                        "count_objects": count_objects(repo)}
    finally:
        if args.keep:
            print(f"kept {repo}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)

    print_summary(result)
    if args.json_out:
        Path(args.json_out).write_text(json.dumps(result, indent=2) + "\n")
        print(f"wrote {args.json_out}")
    return 0 if result["verify"]["ok"] else 1  # type: ignore[index]


def print_summary(r: dict) -> None:
    a, rd, co, tr, v = r["appends"], r["read"], r["count_objects"], r["trees"], r["verify"]
    w = r["window"]
    print()
    print(f"ledger_append: {r['n']} rows, {r['machine']['cpus']} cpus, Python {r['machine']['python']}")
    print(f"  total append time        {a['total_s']:.1f} s  ({a['total_s'] / r['n'] * 1e3:.2f} ms/record)")
    print(f"  first {w:>5} appends       mean {a['first']['mean_ms']:.2f} ms  median {a['first']['median_ms']:.2f} ms")
    print(f"  last  {w:>5} appends       mean {a['last']['mean_ms']:.2f} ms  median {a['last']['median_ms']:.2f} ms")
    print(f"  ratio last/first         mean {a['ratio_last_first_mean']:.2f}  median {a['ratio_last_first_median']:.2f}"
          f"  mean w/o pack pauses {a['ratio_last_first_mean_without_pack_pauses']:.2f}  (target ~1.0)")
    print(f"  ratio last/second window mean {a['ratio_last_second_mean']:.2f}  median {a['ratio_last_second_median']:.2f}"
          "  (growth once the fan-out is mostly made)")
    ref = a["reference_fresh_ledger_interleaved_with_last"]
    if ref:
        print(f"  fresh ledger, {w} appends interleaved with the last {w}: mean {ref['mean_ms']:.2f} ms"
              f"  median {ref['median_ms']:.2f} ms")
        print(f"  ratio last/fresh-interleaved mean {ref['ratio_last_over_reference_mean']:.2f}"
              f"  median {ref['ratio_last_over_reference_median']:.2f}  (same load; like last/first)")
    print("  per window (mean / median / max ms, runs/<c0>/<c1>/ buckets after, of 1024):")
    for win in a["windows"]:
        print(f"    {win['from']:>6}-{win['to']:<6} {win['mean_ms']:7.2f} {win['median_ms']:7.2f} {win['max_ms']:8.1f}"
              f"  {win['buckets_after']}")
    ev = a["pack_events"]
    if ev:
        ms = [e["ms"] for e in ev]
        print(f"  pack pauses              {len(ev)} (at appends {', '.join(str(e['append']) for e in ev)});"
              f" {min(ms):.0f}-{max(ms):.0f} ms each, {a['pack_pause_total_s']:.1f} s in all")
    else:
        print("  pack pauses              none")
    print(f"  state read (rows+measurement of {rd['rows']}): best {rd['monte_rows_plus_measurement_s']['best'] * 1e3:.0f} ms,"
          f" median {rd['monte_rows_plus_measurement_s']['median'] * 1e3:.0f} ms")
    print(f"  floor: git log --format=%B  best {rd['git_log_format_B_s']['best'] * 1e3:.0f} ms"
          f"  -> ratio read/floor {rd['ratio_read_over_git_log_best']:.2f}")
    print(f"  one-walk json-only read    best {rd['single_walk_json_only_s']['best'] * 1e3:.0f} ms"
          f"  -> ratio read/one-walk {rd['ratio_read_over_single_walk_best']:.2f}")
    print(f"  objects: {co['count']} loose ({co['size']} KiB), {co['in-pack']} in {co['packs']} packs"
          f" ({co['size-pack']} KiB); {(co['size'] + co['size-pack']) * 1024 / r['n']:.0f} bytes/record on disk")
    if "git_repack_adf" in r:
        g = r["git_repack_adf"]["count_objects"]
        print(f"  after git repack -adf: {g['packs']} pack, {g['size-pack']} KiB"
              f" ({g['size-pack'] * 1024 / r['n']:.0f} bytes/record), {r['git_repack_adf']['s']:.1f} s")
    print(f"  trees at the tip: root {tr['root_tree_bytes']} B; runs/ {tr['runs_tree_bytes']} B"
          f" ({tr['runs_tree_entries']} entries); runs/<c0>/ max {tr['first_level_tree_bytes_max']} B"
          f" (mean {tr['first_level_tree_bytes_mean']}); bucket runs/<c0>/<c1>/ max"
          f" {tr['bucket_tree_bytes_max']} B (mean {tr['bucket_tree_bytes_mean']}, {tr['buckets']} buckets);"
          f" run dir {tr['run_tree_bytes']} B")
    print(f"  index.json: max {tr['index_json_bytes_max']} B, mean {tr['index_json_bytes_mean']} B;"
          f" row.json {tr['row_json_bytes']} B")
    lw = tr["last_append_objects"]
    print(f"  bytes the last append wrote (uncompressed, 5 trees + 3 blobs, commit not counted):"
          f" {tr['bytes_written_by_last_append_uncompressed']}"
          f" = {' + '.join(f'{k} {v}' for k, v in lw.items())}")
    print(f"  verify: fsck --strict {'ok' if v['fsck_strict_ok'] else 'FAILED'};"
          f" commits {v['commits']} (expected {v['commits_expected']}) -> {'OK' if v['ok'] else 'FAILED'}")
    if not v["fsck_strict_ok"]:
        print(v["fsck_output"])


if __name__ == "__main__":
    sys.exit(main())
