"""Benchmark: ``monte.hashing.sha256_files`` against the machine's ``sha256sum``.

Creates files of random bytes in a temporary folder (by default 1 GiB: 64 files of 16 MiB, plus
a mixed-size set of about 232 MiB: 1 x 64 MiB, 8 x 8 MiB, 64 x 1 MiB, 512 x 64 KiB,
2048 x 4 KiB, whose files of at most 64 KiB are also timed alone as "mixed-small"), warms the
page cache so that both read from memory, then, alternating the order in each round, times one
``sha256sum`` invocation over all the files and ``monte.hashing.sha256_files`` over the same
files, checks that the digests agree, and reports the best round of each in MB/s
(1 MB = 10^6 bytes) and the ratio monte/sha256sum (target >= 0.8).

Also timed, as diagnostics: ``sha256_files`` with one worker (the per-core speed of hashlib),
two ``sha256sum`` processes over halves of the files (``sha256sum`` at the machine's parallelism),
and ``hashlib.sha256`` over an in-memory buffer (the CPU ceiling of one core, no I/O).

The machine is shared and noisy: compare the ratios, not the absolute figures.

    .venv/bin/python bench/hash_throughput.py                 # 1 GiB + the mixed set
    .venv/bin/python bench/hash_throughput.py --quick         # 1 MiB files, one round: a smoke run
    .venv/bin/python bench/hash_throughput.py --size-mib 2048 --rounds 5 --json-out /tmp/h.json
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from monte.hashing import sha256_files  # noqa: E402

MiB = 1 << 20
KiB = 1 << 10
# (count, size) of the mixed set at --size-mib 1024; scaled with --size-mib.
MIXED = [(1, 64 * MiB), (8, 8 * MiB), (64, 1 * MiB), (512, 64 * KiB), (2048, 4 * KiB)]
SMALL = 64 * KiB  # the "mixed-small" set: the mixed set's files of at most this size


def write_random(path: Path, size: int) -> None:
    with open(path, "wb") as f:
        left = size
        while left:
            n = min(left, 16 * MiB)
            f.write(os.urandom(n))
            left -= n


def make_uniform(folder: Path, size_mib: int, file_mib: int) -> list[Path]:
    folder.mkdir(parents=True)
    count = max(1, size_mib // file_mib)
    paths = []
    for i in range(count):
        p = folder / f"f{i:04d}.bin"
        write_random(p, file_mib * MiB)
        paths.append(p)
    return paths


def make_mixed(folder: Path, size_mib: int, max_size: int | None = None) -> list[Path]:
    folder.mkdir(parents=True)
    scale = size_mib / 1024
    paths = []
    for count, size in MIXED:
        if max_size is not None and size > max_size:
            continue
        for i in range(max(1, round(count * scale))):
            p = folder / f"s{size}_{i:05d}.bin"
            write_random(p, size)
            paths.append(p)
    return paths


def warm(paths: list[Path]) -> None:
    buf = bytearray(4 * MiB)
    for _ in range(2):
        for p in paths:
            with open(p, "rb", buffering=0) as f:
                while f.readinto(buf):
                    pass


def run_sha256sum(folder: Path, names: list[str]) -> tuple[float, dict[str, str]]:
    t0 = time.perf_counter()
    out = subprocess.run(["sha256sum", "--", *names], cwd=folder, check=True,
                         capture_output=True, text=True).stdout
    dt = time.perf_counter() - t0
    digests = {}
    for line in out.splitlines():
        digest, _, name = line.partition("  ")
        digests[name] = digest
    return dt, digests


def run_sha256sum_parallel(folder: Path, names: list[str], procs: int) -> float:
    shares = [names[i::procs] for i in range(procs)]
    t0 = time.perf_counter()
    running = [subprocess.Popen(["sha256sum", "--", *share], cwd=folder,
                                stdout=subprocess.DEVNULL) for share in shares if share]
    for p in running:
        if p.wait() != 0:
            raise RuntimeError("sha256sum failed")
    return time.perf_counter() - t0


def run_monte(paths: list[Path], workers: int | None = None) -> tuple[float, dict[str, str]]:
    t0 = time.perf_counter()
    digests = sha256_files(paths, workers=workers)
    return time.perf_counter() - t0, digests


def hashlib_ceiling(rounds: int, mib: int = 64) -> float:
    """MB/s of hashlib.sha256 on one core over 4 x ``mib`` MiB already in memory (no I/O)."""
    data = os.urandom(mib * MiB)
    view = memoryview(data)
    best = float("inf")
    for _ in range(rounds):
        t0 = time.perf_counter()
        h = hashlib.sha256()
        for _ in range(4):
            for off in range(0, len(data), MiB):
                h.update(view[off:off + MiB])
        h.hexdigest()
        best = min(best, time.perf_counter() - t0)
    return 4 * len(data) / best / 1e6


def bench_set(name: str, folder: Path, paths: list[Path], rounds: int, procs: int) -> dict:
    names = [p.name for p in paths]
    total = sum(p.stat().st_size for p in paths)
    warm(paths)
    sums, mons, mon1, par = [], [], [], []
    agree = True
    for r in range(rounds):
        order = ["sha256sum", "monte"] if r % 2 == 0 else ["monte", "sha256sum"]
        for which in order:
            if which == "sha256sum":
                dt, ref = run_sha256sum(folder, names)
                sums.append(dt)
            else:
                dt, got = run_monte(paths)
                mons.append(dt)
        agree = agree and all(got[str(p)] == ref[p.name] for p in paths) and len(ref) == len(paths)
        # diagnostics, after the pair
        par.append(run_sha256sum_parallel(folder, names, procs))
        dt, got1 = run_monte(paths, workers=1)
        mon1.append(dt)
        agree = agree and got1 == got
    mbps = {
        "sha256sum": total / min(sums) / 1e6,
        "monte": total / min(mons) / 1e6,
        "monte_1_worker": total / min(mon1) / 1e6,
        f"sha256sum_x{procs}_processes": total / min(par) / 1e6,
    }
    return {
        "set": name,
        "files": len(paths),
        "bytes": total,
        "seconds": {"sha256sum": sums, "monte": mons, "monte_1_worker": mon1,
                    f"sha256sum_x{procs}_processes": par},
        "best_MBps": mbps,
        "ratio_monte_over_sha256sum": mbps["monte"] / mbps["sha256sum"],
        "ratio_monte_over_parallel_sha256sum": mbps["monte"] / mbps[f"sha256sum_x{procs}_processes"],
        "ratio_monte_1_worker_over_sha256sum": mbps["monte_1_worker"] / mbps["sha256sum"],
        "digests_agree": agree,
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--size-mib", type=int, default=None,
                   help="size of the uniform set in MiB (default 1024; the mixed set scales)")
    p.add_argument("--file-mib", type=int, default=16, help="size of each uniform file in MiB")
    p.add_argument("--rounds", type=int, default=3, help="alternating rounds; best of each")
    p.add_argument("--no-mixed", action="store_true", help="skip the mixed-size set")
    p.add_argument("--quick", action="store_true",
                   help="smoke run: one 1 MiB file, the mixed set's files up to 1 MiB, one round")
    p.add_argument("--tmpdir", default=None, help="where to make the temporary folder")
    p.add_argument("--json-out", default=None, help="write the result as JSON to this path")
    args = p.parse_args(argv)
    size_mib = args.size_mib or (1 if args.quick else 1024)
    file_mib = 1 if args.quick else args.file_mib
    rounds = 1 if args.quick and args.rounds == 3 else args.rounds
    procs = os.cpu_count() or 1

    tmp = Path(tempfile.mkdtemp(prefix="monte-bench-hash-", dir=args.tmpdir))
    result: dict = {
        "benchmark": "hash_throughput",
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": {"cpus": procs, "python": platform.python_version(),
                    "openssl": __import__("ssl").OPENSSL_VERSION,
                    "sha256sum": subprocess.run(["sha256sum", "--version"], capture_output=True,
                                                text=True).stdout.splitlines()[0],
                    "platform": platform.platform()},
        "rounds": rounds,
        "sets": [],
    }
    try:
        print(f"writing {size_mib} MiB of random files in {tmp} ...", flush=True)
        sets = [("uniform", tmp / "uniform", make_uniform(tmp / "uniform", size_mib, file_mib))]
        if not args.no_mixed:
            mixed = make_mixed(tmp / "mixed", size_mib, max_size=MiB if args.quick else None)
            sets.append(("mixed", tmp / "mixed", mixed))
            # the small files of the mixed set alone: where per-file overhead shows
            small = [q for q in mixed if q.stat().st_size <= SMALL]
            sets.append(("mixed-small", tmp / "mixed", small))
        for name, folder, paths in sets:
            print(f"timing the {name} set ({len(paths)} files) ...", flush=True)
            result["sets"].append(bench_set(name, folder, paths, rounds, procs))
        result["hashlib_one_core_in_memory_MBps"] = hashlib_ceiling(rounds, 1 if args.quick else 64)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    print_summary(result)
    if args.json_out:
        Path(args.json_out).write_text(json.dumps(result, indent=2) + "\n")
        print(f"wrote {args.json_out}")
    return 0 if all(s["digests_agree"] for s in result["sets"]) else 1


def print_summary(r: dict) -> None:
    m = r["machine"]
    print()
    print(f"hash_throughput: {m['cpus']} cpus, Python {m['python']}, {m['openssl']}, {m['sha256sum']};"
          f" best of {r['rounds']} alternating rounds, page cache warm")
    for s in r["sets"]:
        b = s["best_MBps"]
        print(f"  {s['set']} set: {s['files']} files, {s['bytes'] / MiB:.0f} MiB")
        for k, v in b.items():
            print(f"    {k:<26} {v:8.0f} MB/s")
        print(f"    ratio monte/sha256sum      {s['ratio_monte_over_sha256sum']:.2f}  (target >= 0.8)")
        print(f"    ratio monte/sha256sum x{m['cpus']}   {s['ratio_monte_over_parallel_sha256sum']:.2f}")
        print(f"    ratio monte 1 worker/sha256sum {s['ratio_monte_1_worker_over_sha256sum']:.2f}")
        print(f"    digests agree              {'yes' if s['digests_agree'] else 'NO'}")
    print(f"  hashlib.sha256, one core, in memory: {r['hashlib_one_core_in_memory_MBps']:.0f} MB/s")


if __name__ == "__main__":
    sys.exit(main())
