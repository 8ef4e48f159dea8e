"""Benchmark: the private copy an eval or a training chunk loads, against hashing the same file.

Before its ``started`` record an eval (and a training chunk) copies each model file it proved
into a staging folder of the data root, hashing the bytes in the one read that copies them
(``monte.hashing.copy_hashed``, fsync included), and loads the copy. Before that change the
process hashed the file where it lay (``monte.hashing.sha256_file``) and loaded it by path. This
times both on one file of random bytes (by default 512 MiB, a small model's ``model.safetensors``),
its pages warmed so both read it from memory, alternating which goes first in each round, checks
that the digests agree, and reports the best and the median round of each and the ratio
copy/hash (the extra cost of proving by copying: the write and its fsync).

The machine is shared and noisy: compare the ratio, not the absolute figures.

    .venv/bin/python bench/private_copy.py                       # 512 MiB, 5 rounds
    .venv/bin/python bench/private_copy.py --quick               # 1 MiB, one round: a smoke run
    .venv/bin/python bench/private_copy.py --size-mib 2048 --rounds 3 --json-out /tmp/p.json
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from monte.hashing import copy_hashed, sha256_file  # noqa: E402

MiB = 1 << 20


def write_random(path: Path, size: int) -> None:
    with open(path, "wb") as f:
        left = size
        while left:
            n = min(left, 16 * MiB)
            f.write(os.urandom(n))
            left -= n


def warm(path: Path) -> None:
    buf = bytearray(4 * MiB)
    with open(path, "rb", buffering=0) as f:
        while f.readinto(buf):
            pass


def time_hash(path: Path) -> tuple[float, str]:
    t0 = time.perf_counter()
    digest = sha256_file(path)
    return time.perf_counter() - t0, digest


def time_copy(path: Path, dest: Path) -> tuple[float, str]:
    t0 = time.perf_counter()
    digest = copy_hashed(path, dest)
    dt = time.perf_counter() - t0
    dest.unlink()  # each round copies into an empty place, as a fresh staging folder is
    return dt, digest


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--size-mib", type=int, default=512, help="the file's size (default 512)")
    p.add_argument("--rounds", type=int, default=5, help="rounds of each, alternating (default 5)")
    p.add_argument("--quick", action="store_true", help="1 MiB, one round: a smoke run")
    p.add_argument("--dir", default=None, help="where the file and its copy live (default: a temporary folder)")
    p.add_argument("--json-out", default=None, help="write the result as JSON to this path")
    a = p.parse_args(argv)
    size_mib, rounds = (1, 1) if a.quick else (a.size_mib, a.rounds)
    hashes: list[float] = []
    copies: list[float] = []
    with tempfile.TemporaryDirectory(dir=a.dir) as tmp:
        src, dest = Path(tmp) / "model.safetensors", Path(tmp) / "copy.safetensors"
        write_random(src, size_mib * MiB)
        warm(src)
        for r in range(rounds):
            order = (("hash", "copy") if r % 2 == 0 else ("copy", "hash"))
            found = {}
            for what in order:
                dt, digest = time_hash(src) if what == "hash" else time_copy(src, dest)
                (hashes if what == "hash" else copies).append(dt)
                found[what] = digest
            if found["hash"] != found["copy"]:
                raise SystemExit(f"the copy's digest {found['copy']} is not the file's {found['hash']}")
    mb = size_mib * MiB / 1e6
    result = {
        "benchmark": "private_copy", "when": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(), "system": platform.platform()},
        "size_mib": size_mib, "rounds": rounds,
        "hash_s": {"best": min(hashes), "median": statistics.median(hashes)},
        "copy_s": {"best": min(copies), "median": statistics.median(copies)},
        "hash_mb_s": mb / min(hashes), "copy_mb_s": mb / min(copies),
        "ratio_best": min(copies) / min(hashes),
        "ratio_median": statistics.median(copies) / statistics.median(hashes),
    }
    print(f"{size_mib} MiB, {rounds} round(s): sha256_file best {min(hashes):.3f} s "
          f"({result['hash_mb_s']:.0f} MB/s), copy_hashed best {min(copies):.3f} s ({result['copy_mb_s']:.0f} MB/s); "
          f"copy/hash {result['ratio_best']:.2f}x best, {result['ratio_median']:.2f}x median")
    if a.json_out:
        Path(a.json_out).write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
