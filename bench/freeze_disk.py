"""Benchmark: bytes on disk of a frozen Dataset tracked by DVC, with links and with copies.

In a fresh temporary monte repository with a folder Vault, ``monte dataset add`` freezes one
Dataset of SIZE (default 1 GiB: JSONL rows of about 1 KiB of random hex), which also puts it into
DVC's cache, writes its ``.dvc`` pointer and pushes it to the Vault. Measured: the bytes on disk
(allocated blocks, every inode counted once) of the data root and of DVC's cache
(``.dvc/cache``), and what both hold together. Then the repository is committed, cloned with
``git clone``, and ``dvc pull`` fills the clone from the Vault: the same figures for a second
machine.

Two cases in the same run, on the same file system:

- **links**: DVC's ``cache.type`` as ``monte init`` sets it (``reflink,hardlink,copy``): the cache
  object is the frozen file (a reflink where the file system has them, else a hardlink).
- **copies** (the baseline): ``cache.type = copy``. This is what monte did before issue 16 (its
  Vault upload copied the frozen folder into ``.dvc/cache``) and what DVC's default
  (``reflink,copy``) does on a file system without reflinks, such as ext4.

Also timed: the freeze, ``dvc status`` right after it (DVC reuses the hashes monte computed),
and ``dvc pull`` in the clone.

    .venv/bin/python bench/freeze_disk.py                      # 1 GiB
    .venv/bin/python bench/freeze_disk.py --size-mib 256 --json-out /tmp/disk.json
    .venv/bin/python bench/freeze_disk.py --quick              # 1 MiB: a smoke run of seconds
"""

from __future__ import annotations

import argparse
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
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

MiB = 1 << 20
DVC = str(Path(sys.executable).parent / "dvc")
GIT_ENV = {"GIT_AUTHOR_NAME": "bench", "GIT_AUTHOR_EMAIL": "bench@monte.invalid",
           "GIT_COMMITTER_NAME": "bench", "GIT_COMMITTER_EMAIL": "bench@monte.invalid",
           "DVC_NO_ANALYTICS": "1", "MONTE_HOOKS": "off"}


def write_rows(path: Path, size: int) -> int:
    """JSONL rows of about 1 KiB each (random hex: nothing compresses or dedupes), ``size`` bytes."""
    n = 0
    with open(path, "w", encoding="ascii") as f:
        written = 0
        while written < size:
            line = json.dumps({"input": os.urandom(250).hex(), "output": os.urandom(250).hex()}) + "\n"
            f.write(line)
            written += len(line)
            n += 1
    return n


def on_disk(*roots: Path) -> int:
    """Allocated bytes under ``roots``, each inode once (a hardlink is not a second copy)."""
    seen: set[tuple[int, int]] = set()
    total = 0
    for root in roots:
        for here, _dirs, files in os.walk(root):
            for name in files:
                st = os.lstat(os.path.join(here, name))
                if (st.st_dev, st.st_ino) not in seen:
                    seen.add((st.st_dev, st.st_ino))
                    total += st.st_blocks * 512
    return total


def run(cmd: list[str], cwd: Path) -> float:
    t0 = time.perf_counter()
    subprocess.run(cmd, cwd=cwd, check=True, capture_output=True, text=True, env={**os.environ, **GIT_ENV})
    return time.perf_counter() - t0


def case(tmp: Path, name: str, rows: Path, cache_type: str | None) -> dict[str, Any]:
    """One repository: freeze, measure, commit, clone, dvc pull, measure."""
    from monte import api
    from monte.repository import init

    repo = tmp / name / "repo"
    vault = tmp / name / "vault"
    repo.mkdir(parents=True)
    vault.mkdir()
    run(["git", "init", "-q", "-b", "main", str(repo)], tmp)
    cwd = Path.cwd()
    os.chdir(repo)
    try:
        init(repo)
        if cache_type is not None:
            run([DVC, "config", "cache.type", cache_type], repo)
        api.config_set(setting="vault", url=str(vault))
        t0 = time.perf_counter()
        r = api.dataset_add(name="big", from_file=rows)
        freeze_s = time.perf_counter() - t0
        assert r.dataset is not None and "pushed to the Vault" in r.note, r
    finally:
        os.chdir(cwd)
    data_root = repo / ".monte"
    cache = repo / ".dvc" / "cache"
    out: dict[str, Any] = {"cache_type": cache_type or "monte init's (reflink,hardlink,copy)"}
    out["freeze_s"] = round(freeze_s, 2)
    out["dvc_status_s"] = round(run([DVC, "status"], repo), 2)
    out["here"] = {"data_root_bytes": on_disk(data_root), "dvc_cache_bytes": on_disk(cache),
                   "together_bytes": on_disk(data_root, cache)}
    run(["git", "add", "-A"], repo)
    run(["git", "commit", "-q", "-m", "freeze"], repo)
    clone = tmp / name / "clone"
    run(["git", "clone", "-q", str(repo), str(clone)], tmp)
    out["dvc_pull_s"] = round(run([DVC, "pull"], clone), 2)
    out["clone"] = {"data_root_bytes": on_disk(clone / ".monte"), "dvc_cache_bytes": on_disk(clone / ".dvc" / "cache"),
                    "together_bytes": on_disk(clone / ".monte", clone / ".dvc" / "cache")}
    frozen = data_root / "datasets" / "big" / "rows.jsonl"
    pulled = clone / ".monte" / "datasets" / "big" / "rows.jsonl"
    here = pulled.is_file()  # (monte before issue 16 wrote no pointer: `dvc pull` restored nothing)
    out["links"] = {"frozen_file_nlink": frozen.stat().st_nlink,
                    "pulled_file_nlink": pulled.stat().st_nlink if here else None,
                    "pulled_equals_frozen": here and pulled.read_bytes() == frozen.read_bytes()}
    return out


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--size-mib", type=int, default=None, help="the Dataset's size (default 1024)")
    p.add_argument("--quick", action="store_true", help="smoke run: 1 MiB")
    p.add_argument("--tmpdir", default=None, help="where to make the repositories (one file system)")
    p.add_argument("--json-out", default=None, help="write the result as JSON to this path")
    args = p.parse_args()
    size_mib = args.size_mib or (1 if args.quick else 1024)
    tmp = Path(tempfile.mkdtemp(prefix="monte-freeze-disk-", dir=args.tmpdir))
    try:
        rows = tmp / "rows.jsonl"
        n = write_rows(rows, size_mib * MiB)
        size = rows.stat().st_size
        result: dict[str, Any] = {
            "benchmark": "freeze_disk", "when": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "machine": {"python": platform.python_version(), "cpus": os.cpu_count(),
                        "filesystem": subprocess.run(["stat", "-f", "-c", "%T", str(tmp)], capture_output=True,
                                                     text=True).stdout.strip()},
            "dataset": {"rows": n, "bytes": size},
        }
        result["links"] = case(tmp, "links", rows, None)
        shutil.rmtree(tmp / "links")
        result["copies"] = case(tmp, "copies", rows, "copy")
        shutil.rmtree(tmp / "copies")
        for where in ("here", "clone"):
            result[f"ratio_{where}"] = round(result["links"][where]["together_bytes"] / size, 3)
            result[f"ratio_{where}_copies"] = round(result["copies"][where]["together_bytes"] / size, 3)
        print(json.dumps(result, indent=2))
        if args.json_out:
            Path(args.json_out).parent.mkdir(parents=True, exist_ok=True)
            Path(args.json_out).write_text(json.dumps(result, indent=2) + "\n")
            print(f"wrote {args.json_out}")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
