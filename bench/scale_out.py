"""Past one process: a chunk's wall time on 1 and 2 processes, and an eval's on 1 and 2 shards,
measured in the same run on the same repository.

Each figure is a fresh `monte train` / `monte eval` process (interpreter start, imports, the
ranks' own start-up and the rendezvous included, as a user pays them), best of ``--rounds``; the
ratios are 2-process time / 1-process time. ``--quick`` is a smoke run of the same commands and
the same launches (3-step smoke chunks, smoke evals, one round), timed inside one warm monte
process, so only the ranks and shards pay a start-up: its figures prove the path runs, not speed. On this kind of machine (2 CPU cores, gloo) the
second process mostly adds its start-up; on a GPU box the same script measures GPU scaling
(one rank per GPU, nccl). For real chunks it also reports how far the 2-process checkpoint is
from the 1-process one (the equivalence: same effective batch, same data order).

    .venv/bin/python bench/scale_out.py [--steps 20] [--rounds 1] [--json-out PATH]
    .venv/bin/python bench/scale_out.py --quick     # smoke chunks and smoke evals: the same launches
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

PY = sys.executable

SETUP = str(Path(__file__).resolve().parents[1] / "tests" / "support" / "batch.py")  # the commands in one interpreter

RECIPE = """algorithm: sft
learning_rate: 3.0e-3
lr_scheduler_type: constant
per_device_train_batch_size: 32
max_length: 32
"""


WARM = """import contextlib, io, json, sys, time
from monte.cli.main import main
out = []
setup, timed = json.loads(sys.argv[1])
for args in setup:
    with contextlib.redirect_stdout(io.StringIO()):
        try:
            main(args)
        except SystemExit as e:
            if e.code:
                sys.exit(f"monte {' '.join(args)} exited {e.code}")
for args in timed:
    buf = io.StringIO()
    t = time.perf_counter()
    with contextlib.redirect_stdout(buf):
        try:
            main(args + ["--yes", "--json"])
        except SystemExit as e:
            if e.code:
                sys.exit(f"monte {' '.join(args)} exited {e.code}: {buf.getvalue()[-3000:]}")
    out.append([time.perf_counter() - t, json.loads(buf.getvalue())])
print("RESULTS=" + json.dumps(out))
"""


def warm(setup: list[list[str]], commands: list[list[str]], cwd: Path) -> list[tuple[float, dict]]:
    """The setup (not timed), then the commands, one after another in one monte process
    (``--quick``): (wall seconds, JSON) of each command."""
    env = {**os.environ, "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1")}
    r = subprocess.run([PY, "-c", WARM, json.dumps([setup, commands])], cwd=cwd, capture_output=True, text=True, env=env)
    line = next((x for x in r.stdout.splitlines() if x.startswith("RESULTS=")), None)
    if r.returncode != 0 or line is None:
        raise SystemExit(f"quick run failed ({r.returncode}):\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}")
    return [(float(secs), out) for secs, out in json.loads(line[len("RESULTS="):])]


def monte(*commands: list[str], cwd: Path) -> None:
    """Run monte commands one after another in one process (setup: not timed)."""
    r = subprocess.run([PY, SETUP, json.dumps(commands)], cwd=cwd, capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit(f"setup failed:\n{r.stdout[-2000:]}\n{r.stderr[-3000:]}")


def timed(args: list[str], cwd: Path) -> tuple[float, dict]:
    """One fresh `monte ARGS --yes --json` process: (wall seconds, its JSON answer)."""
    env = {**os.environ, "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1")}
    t = time.perf_counter()
    r = subprocess.run([PY, "-m", "monte", *args, "--yes", "--json"], cwd=cwd, capture_output=True, text=True,
                       env=env)
    secs = time.perf_counter() - t
    if r.returncode != 0:
        raise SystemExit(f"monte {' '.join(args)} failed ({r.returncode}):\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}")
    return secs, json.loads(r.stdout)


def max_weight_diff(a: Path, b: Path) -> float:
    from safetensors.torch import load_file

    wa, wb = load_file(str(a / "model.safetensors")), load_file(str(b / "model.safetensors"))
    return max(float((wa[k] - wb[k]).abs().max()) for k in wa)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--steps", type=int, default=20, help="steps per chunk (a real chunk)")
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--quick", action="store_true", help="smoke chunks (3 steps) and smoke evals (5 tasks), 1 round")
    ap.add_argument("--json-out")
    a = ap.parse_args()
    if a.quick:
        a.rounds = 1
    root = Path(tempfile.mkdtemp(prefix="monte-bench-scale-"))
    repo = root / "repo"
    repo.mkdir()
    subprocess.run(["git", "init", "-q", "-b", "main", "."], cwd=repo, check=True)
    monte(["init"], ["env", "add", "--server", "parity", "--dev", "parity", "--test", "parity"], cwd=repo)
    rows = repo / "sft.jsonl"
    with open(repo / ".monte/environments/parity/curriculum.jsonl") as src, open(rows, "w") as dst:
        for line in src:
            item = json.loads(line)
            dst.write(json.dumps({"input": item["prompt"], "output": " " + item["answer"]}) + "\n")
    (repo / "recipes").mkdir(exist_ok=True)
    (repo / "recipes" / "sft-scale.yaml").write_text(RECIPE)
    setup = [["model", "init", "base"], ["dataset", "add", "parity-sft", "--from-file", str(rows), "--kind", "sft"],
             ["experiment", "init", "exp", "--eval", "parity", "--model", "base", "--steps-per-chunk", str(a.steps)]]
    if not a.quick:
        setup += [["eval", "--yes"], ["eval", "--split", "test", "--yes"]]
    if not a.quick:
        monte(*setup, cwd=repo)
    start = ["--smoke"] if a.quick else ["--from-base"]
    train = ["train", "--recipe", "sft-scale", "--source", "parity-sft", *start]
    evaluate = ["eval", *(["--smoke"] if a.quick else [])]
    times: dict[str, list[float]] = {"train_1": [], "train_2": [], "eval_1": [], "eval_2": []}
    runs: dict[str, dict] = {}
    plan = (("train_1", train), ("train_2", [*train, "--processes", "2"]),
            ("eval_1", evaluate), ("eval_2", [*evaluate, "--processes", "2"]))
    if a.quick:  # one warm process: the launches are the real ones, the interpreter starts once
        for (key, _), (secs, out) in zip(plan, warm(setup, [args for _, args in plan], repo), strict=True):
            times[key].append(secs)
            runs[key] = out
            print(f"quick: {key} {secs:.1f}s", flush=True)
    for i in range(0 if a.quick else a.rounds):  # alternate, so a busy minute does not land on one side only
        for key, args in plan:
            secs, out = timed(args, repo)
            times[key].append(secs)
            runs[key] = out
            print(f"round {i + 1}: {key} {secs:.1f}s", flush=True)
    best = {k: min(v) for k, v in times.items()}
    report: dict[str, object] = {
        "quick": a.quick, "steps": 3 if a.quick else a.steps, "rounds": a.rounds, "cpus": os.cpu_count(),
        "train_1_s": best["train_1"], "train_2_s": best["train_2"], "train_ratio": best["train_2"] / best["train_1"],
        "eval_1_s": best["eval_1"], "eval_2_s": best["eval_2"], "eval_ratio": best["eval_2"] / best["eval_1"],
        "all": times}
    e1, e2 = runs["eval_1"]["runs"][0], runs["eval_2"]["runs"][0]
    report["eval_same_score"] = e1.get("score") == e2.get("score") and e1.get("n") == e2.get("n")
    if not a.quick:
        ck = {k: repo / ".monte" / "runs" / "exp" / runs[k]["run"]["run"] / "checkpoints" / f"step-{a.steps}"
              for k in ("train_1", "train_2")}
        report["max_weight_diff_1_vs_2"] = max_weight_diff(ck["train_1"], ck["train_2"])
    print(f"chunk ({report['steps']} steps): 1 process {best['train_1']:.1f}s, 2 processes {best['train_2']:.1f}s, "
          f"ratio {report['train_ratio']:.2f}")
    print(f"eval: 1 shard {best['eval_1']:.1f}s, 2 shards {best['eval_2']:.1f}s, ratio {report['eval_ratio']:.2f}, "
          f"same result: {report['eval_same_score']}")
    if "max_weight_diff_1_vs_2" in report:
        print(f"largest weight difference, 1 vs 2 processes: {report['max_weight_diff_1_vs_2']:.2e}")
    if a.json_out:
        Path(a.json_out).write_text(json.dumps(report, indent=2))
    shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
