"""`monte ledger verify` on an honest 10,000-record ledger: the full walk, and incrementally
(`--from`) over the last 10 records, beside `git log --format=%B` over the same ref as the floor.

The ledger is written through monte's own store with the shapes `monte eval` and `monte train`
write (a `started` record, then `finished` with per-task results; train rows with a real lineage
commit per checkpoint), against a real frozen environment, so the verifier checks every rule on it
(the script asserts that it passes). Model work is skipped: scores are synthetic.

    .venv/bin/python bench/verify_10k.py [--records 10000] [--json-out PATH]
    .venv/bin/python bench/verify_10k.py --quick     # 50 records, one round: a smoke run of seconds
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--records", type=int, default=10_000)
    ap.add_argument("--quick", action="store_true", help="smoke run: 50 records, one round")
    ap.add_argument("--json-out")
    a = ap.parse_args()
    n = 50 if a.quick else a.records

    from monte import api
    from monte.ledger.experiment import Ledger
    from monte.ledger.ids import new_run_id
    from monte.ledger.lineage import ensure_base, record_checkpoint
    from monte.ledger.records import RunRow
    from monte.ledger.verify import Verifier
    from monte.manifest import now
    from monte.workspace import open_workspace

    root = Path(tempfile.mkdtemp(prefix="monte-bench-verify-"))
    subprocess.run(["git", "init", "-q", "-b", "main", str(root)], check=True)
    api.init(root)
    ws = open_workspace(root)
    api.env_add(server="parity", dev=("parity",), test=("parity",), ws=ws)
    api.experiment_init(name="exp", eval_env="parity", ws=ws)
    ledger = Ledger(ws.store, "exp")
    meas = ledger.measurement()
    ids = {s: [json.loads(x)["id"] for x in open(ws.data_root / meas.exams["parity"].splits[s].path)]
           for s in ("dev", "test")}
    cohort, _ = ensure_base(ws.store, "exp", "/models/base", {"config.json": "0" * 64})
    rng = random.Random(0)
    records = 1

    def append(row: RunRow, event: str, files: dict[str, bytes] | None = None) -> RunRow:
        nonlocal records
        records += 1
        return ledger.append_row(lambda s, q: row.model_copy(), event=event, summary=lambda r: f"{r.kind} {r.run} {event}",
                                 files=(lambda r: files) if files else None)

    def evaluate(split: str, target: dict[str, Any], p: float) -> None:
        row = RunRow(run=new_run_id(), experiment="exp", kind="eval", status="started", created_at=now(),
                     cohort=cohort, exam="parity", split=split, step=int(target.get("step", 0)),
                     role=("baseline" if target["kind"] == "base" else "claim") if split == "test" else None,
                     plan={"target": target, "benchmark": "parity"})
        row = append(row, "started")
        tasks = [{"id": i, "score": float(rng.random() < p), "answer": ""} for i in ids[split]]
        body = "".join(json.dumps(t, separators=(",", ":")) + "\n" for t in tasks).encode()
        done = row.model_copy(update={"status": "succeeded", "n": len(tasks),
                                      "score": sum(t["score"] for t in tasks) / len(tasks)})
        append(done, "finished", {"tasks.jsonl": body})

    evaluate("dev", {"kind": "base", "step": 0}, 0.1)
    evaluate("test", {"kind": "base", "step": 0}, 0.1)
    parent: dict[str, Any] | None = None
    parent_commit = ensure_base(ws.store, "exp", "/models/base", {"config.json": "0" * 64})[1]
    t0 = time.perf_counter()
    while records < n:
        run = new_run_id()
        start = parent["step"] if parent else 0
        plan = {"recipe": {"name": "sft-tiny", "sha256": "0" * 64, "algorithm": "sft"}, "source": "d",
                "parent": parent, "boundary": False, "start_step": start, "steps": 50}
        row = append(RunRow(run=run, experiment="exp", kind="train", status="started", created_at=now(),
                            cohort=cohort, step=start, plan=plan), "started")
        info = {"experiment": "exp", "run": run, "step": start + 50, "cohort": cohort, "recipe": plan["recipe"],
                "source": "d", "boundary": False, "parent": parent, "weights": "w", "files": {}}
        commit = record_checkpoint(ws.store, "exp", info, parent_commit)
        row = append(row.model_copy(update={"status": "running", "step": start + 50,
                                            "checkpoints": [{"step": start + 50, "commit": commit.decode()}]}),
                     "checkpoint")
        append(row.model_copy(update={"status": "succeeded"}), "finished")
        parent, parent_commit = {"run": run, "step": start + 50}, commit
        for _ in range(8):
            if records >= n:
                break
            evaluate("dev", {"kind": "checkpoint", "run": run, "step": start + 50}, min(0.9, 0.1 + start / 20000))
    build_s = time.perf_counter() - t0
    ref = "refs/heads/monte/exp/ledger"
    tip = ws.store.tip(ref)
    assert tip is not None
    last10 = subprocess.run(["git", "-C", str(root), "rev-parse", f"{ref}~10"], capture_output=True, text=True,
                            check=True).stdout.strip()

    def full() -> float:
        t = time.perf_counter()
        v = Verifier(open_workspace(root).store)
        assert v.verify("exp") == [], "the honest ledger must pass"
        return time.perf_counter() - t

    def incremental() -> float:
        t = time.perf_counter()
        v = Verifier(open_workspace(root).store)
        assert v.verify("exp", since=last10.encode()) == []  # type: ignore[arg-type]
        return time.perf_counter() - t

    def floor() -> float:
        t = time.perf_counter()
        subprocess.run(["git", "-C", str(root), "log", "--format=%B", ref], capture_output=True, check=True)
        return time.perf_counter() - t

    rounds = {"full": [], "incremental": [], "floor": []}  # type: dict[str, list[float]]
    for _ in range(1 if a.quick else 3):
        rounds["floor"].append(floor())
        rounds["full"].append(full())
        rounds["incremental"].append(incremental())
    med = {k: statistics.median(v) for k, v in rounds.items()}
    cli = subprocess.run([sys.executable, "-c", "from monte.cli.main import main; main()", "ledger", "verify",
                          "--json"], cwd=root, capture_output=True, text=True)
    report = {"records": records, "build_s": build_s, "full_s": med["full"], "incremental_last10_s": med["incremental"],
              "git_log_floor_s": med["floor"], "full_over_floor": med["full"] / med["floor"],
              "cli_exit": cli.returncode, "rounds": rounds}
    print(f"{records} records (built in {build_s:.0f}s): verify full {med['full']:.2f}s, "
          f"incremental (last 10) {med['incremental'] * 1e3:.0f} ms, git log floor {med['floor'] * 1e3:.0f} ms "
          f"(full/floor {med['full'] / med['floor']:.1f}); `monte ledger verify` exit {cli.returncode}")
    if a.json_out:
        Path(a.json_out).write_text(json.dumps(report, indent=2))
    shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
