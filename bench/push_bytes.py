"""Benchmark: bytes ``monte push`` uploads after one new eval, against the bytes that eval added.

In a fresh temporary monte repository this script builds one experiment of N eval runs (default
1,000), each as monte writes it: a ``started`` record, then a ``succeeded`` record carrying the
run's per-task file (``tasks.jsonl``, 200 tasks) and score, and a run folder with its event file.
It pushes everything to a results bucket (a local folder, or ``--bucket gs://..`` against a
server such as the GCS emulator), then appends **one** more eval the same way and measures:

- *added*: the bytes that eval added: its new git objects (raw, before git's compression: what a
  ``git cat-file`` of each would print) plus its run folder's files;
- *uploaded*: what the second ``monte push`` uploaded (the pack of objects the bucket lacked, the
  ref objects, the changed run files), as reported by push and cross-checked against the bucket;
- the ratio uploaded / added (target <= 2);
- a third push with nothing new: objects uploaded (target 0).

    .venv/bin/python bench/push_bytes.py                 # N=1,000
    .venv/bin/python bench/push_bytes.py --runs 200 --json-out /tmp/push.json
    .venv/bin/python bench/push_bytes.py --quick          # N=50, local folder: a smoke run of seconds
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def _objects(repo: Path) -> dict[str, int]:
    """Every object in the repository -> its raw size."""
    out = subprocess.run(["git", "-C", str(repo), "cat-file", "--batch-all-objects", "--batch-check=%(objectname) %(objectsize)"],
                         capture_output=True, text=True, check=True).stdout
    return {line.split()[0]: int(line.split()[1]) for line in out.splitlines()}


def _eval(ledger: Any, exp: str, repo: Path, rng: random.Random, tasks: int) -> str:
    from monte.ledger.ids import new_run_id
    from monte.ledger.records import RunRow

    rid = new_run_id()
    row = ledger.append_row(lambda snap, seq: RunRow(run=rid, experiment=exp, kind="eval", status="started",
                                                     cohort="c0", exam="parity", split="dev", model="base",
                                                     created_at="2026-11-29T12:00:00Z"),
                            event="started", summary=lambda r: f"eval {r.run} started")
    scores = [float(rng.random() < 0.6) for _ in range(tasks)]
    lines = "".join(json.dumps({"id": f"parity/dev/{i:05d}", "score": s, "answer": str(rng.randint(0, 9))},
                               sort_keys=True) + "\n" for i, s in enumerate(scores)).encode()
    ledger.append_row(lambda snap, seq: row.model_copy(update={"status": "succeeded", "n": tasks,
                                                               "score": sum(scores) / tasks}),
                      event="succeeded", summary=lambda r: f"eval {r.run} succeeded",
                      files=lambda r: {"tasks.jsonl": lines})
    folder = repo / ".monte" / "runs" / exp / rid
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "events.jsonl").write_text("".join(json.dumps({"event": e, "run": rid, "time": "2026-11-29T12:00:00Z"})
                                                 + "\n" for e in ("started", "scored", "succeeded")))
    return rid


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=None, help="eval runs before the measured one (default 1000)")
    ap.add_argument("--quick", action="store_true", help="smoke run: 50 runs")
    ap.add_argument("--tasks", type=int, default=200)
    ap.add_argument("--bucket", help="default: a temporary local folder")
    ap.add_argument("--json-out")
    args = ap.parse_args()
    if args.runs is None:
        args.runs = 50 if args.quick else 1000

    from monte import api
    from monte.ledger.experiment import Ledger
    from monte.ledger.store import Store

    tmp = Path(tempfile.mkdtemp(prefix="monte-push-bench-"))
    repo = tmp / "repo"
    repo.mkdir()
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    os.chdir(repo)
    api.init(repo)
    ws_bucket = args.bucket or str(tmp / "bucket")
    if not args.bucket:
        Path(ws_bucket).mkdir()
    api.env_add(benchmark="parity")
    api.experiment_init(name="exp", eval_env="parity")
    rng = random.Random(0)
    ledger = Ledger(Store(repo), "exp")
    t = time.perf_counter()
    for _ in range(args.runs):
        _eval(ledger, "exp", repo, rng, args.tasks)
    build_s = time.perf_counter() - t
    t = time.perf_counter()
    first = api.push(experiment="exp", bucket=ws_bucket)
    first_s = time.perf_counter() - t

    before = _objects(repo)
    rid = _eval(Ledger(Store(repo), "exp"), "exp", repo, rng, args.tasks)
    after = _objects(repo)
    new_objects = {k: v for k, v in after.items() if k not in before}
    run_files = sum(p.stat().st_size for p in (repo / ".monte" / "runs" / "exp" / rid).rglob("*") if p.is_file())
    added = sum(new_objects.values()) + run_files

    t = time.perf_counter()
    second = api.push(experiment="exp", bucket=ws_bucket)
    second_s = time.perf_counter() - t
    ref_bytes = 41 * second.refs
    uploaded = second.uploaded_bytes + ref_bytes
    t = time.perf_counter()
    third = api.push(experiment="exp", bucket=ws_bucket)
    third_s = time.perf_counter() - t

    result = {
        "runs": args.runs, "tasks_per_eval": args.tasks, "bucket": "gcs" if args.bucket else "local folder",
        "first_push": {"pack_bytes": first.pack_bytes, "files": first.files, "seconds": round(first_s, 2)},
        "one_eval": {"new_git_objects": len(new_objects), "object_bytes_raw": sum(new_objects.values()),
                     "run_file_bytes": run_files, "added_bytes": added},
        "second_push": {"packs": second.packs, "pack_bytes": second.pack_bytes, "refs": second.refs,
                        "ref_bytes": ref_bytes, "files": second.files, "file_bytes": second.file_bytes,
                        "uploaded_bytes": uploaded, "seconds": round(second_s, 2)},
        "ratio_uploaded_over_added": round(uploaded / added, 3),
        "third_push_objects": third.packs + third.refs + third.files,
        "third_push_seconds": round(third_s, 2),
        "build_seconds": round(build_s, 1),
    }
    print(json.dumps(result, indent=2))
    print(f"\nratio uploaded/added = {result['ratio_uploaded_over_added']} (target <= 2); "
          f"push with nothing new uploaded {result['third_push_objects']} objects (target 0)")
    if args.json_out:
        Path(args.json_out).write_text(json.dumps(result, indent=2) + "\n")
    os.chdir("/")
    shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
