"""The shipped dpo-tiny and rloo-tiny recipes on parity: the dev gain of each, measured.

A fresh repository (tiny model from a seed, the parity environment, an SFT Dataset and a
preference Dataset built from its curriculum with ``monte.quickstart.preference_rows``, both
baselines), then, every chunk ``--steps`` steps long: dpo-tiny from base; sft-tiny from base (the
parent); from that SFT checkpoint, across a stage boundary, dpo-tiny, rloo-tiny, and as a control
sft-tiny continued the same number of steps. Each checkpoint's dev score and its paired delta
against the cohort's dev@0 baseline (with its verdict) is printed and written.

    OMP_NUM_THREADS=1 .venv/bin/python bench/dpo_gain.py [--steps 30] [--json-out PATH]
    .venv/bin/python bench/dpo_gain.py --quick     # 2-step chunks, no control: a smoke run of the same path

A smoke run leaves out dpo-tiny from base as well: dpo-tiny still runs (from the SFT checkpoint,
across the stage boundary, the harder path), and ``bench/train_overhead.py --quick`` trains
dpo-tiny from base.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent.parent


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--quick", action="store_true",
                    help="2-step chunks, no control chunk and no dpo-tiny from base: a smoke run")
    ap.add_argument("--json-out")
    a = ap.parse_args()
    if a.quick:
        a.steps = 2
    sys.path.insert(0, str(HERE))
    import torch

    torch.set_num_threads(1)
    from monte import api
    from monte.quickstart import preference_rows
    from monte.workspace import open_workspace

    root = Path(tempfile.mkdtemp(prefix="monte-bench-dpo-"))
    folder = root / "repo"
    folder.mkdir()
    subprocess.run(["git", "init", "-q", "-b", "main", str(folder)], check=True)
    api.init(folder)
    ws = open_workspace(folder)
    api.model_init(path=folder / "base-model", size="tiny", seed=0)
    api.env_add(server="parity", dev=("parity",), test=("parity",), ws=ws)
    curriculum = ws.env_dir("parity") / "curriculum.jsonl"
    sft = folder / "parity-sft.jsonl"
    with open(curriculum, encoding="utf-8") as src, open(sft, "w", encoding="utf-8") as out:
        for line in src:
            item = json.loads(line)
            out.write(json.dumps({"input": item["prompt"], "output": " " + item["answer"]}) + "\n")
    api.dataset_add(name="parity-sft", from_file=sft, kind="sft", ws=ws)
    api.dataset_add(name="parity-pref", from_file=preference_rows(curriculum, folder / "parity-pref.jsonl"),
                    kind="preference", ws=ws)
    api.experiment_init(name="gain", eval_env="parity", model=str(folder / "base-model"), steps_per_chunk=a.steps,
                        ws=ws)
    rows: list[dict[str, Any]] = []

    def measure(label: str, **train: Any) -> str:
        t = time.monotonic()
        res = api.train(ws=ws, experiment="gain", **train)
        seconds = time.monotonic() - t
        ref = f"{res.run['run']}@{res.run['checkpoints'][-1]['step']}"
        r = api.evaluate(ws=ws, experiment="gain", checkpoint=ref).runs[0]
        d = r.get("delta") or {}
        rows.append({"chunk": label, "checkpoint": ref, "train_s": round(seconds, 1), "dev": r["score"], "n": r["n"],
                     "delta": d.get("delta"), "lower": d.get("lower"), "upper": d.get("upper"),
                     "verdict": d.get("verdict")})
        print(f"{label:<44} dev {r['score']:.3f}  delta {d.get('delta', 0):+.3f} "
              f"[{d.get('lower', 0):+.3f}, {d.get('upper', 0):+.3f}] {d.get('verdict')}  ({seconds:.0f} s)",
              flush=True)
        return ref

    api.evaluate(ws=ws, experiment="gain")
    api.evaluate(ws=ws, experiment="gain", split="test")
    if not a.quick:  # dpo-tiny's own path is the chunk from the SFT checkpoint below
        measure("dpo-tiny from base", recipe="dpo-tiny", source="parity-pref", from_base=True)
    parent = measure("sft-tiny from base (the parent)", recipe="sft-tiny", source="parity-sft", from_base=True)
    measure("dpo-tiny from the SFT checkpoint", recipe="dpo-tiny", source="parity-pref", parent=parent)
    measure("rloo-tiny from the SFT checkpoint", recipe="rloo-tiny", source="parity", parent=parent)
    if not a.quick:  # the control runs sft-tiny again: no path the chunks above did not take
        measure("control: sft-tiny continued", recipe="sft-tiny", source="parity-sft", parent=parent)
    if a.json_out:
        Path(a.json_out).write_text(json.dumps({"steps_per_chunk": a.steps, "rows": rows}, indent=2))
    shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
