"""monte's overhead on one SFT or DPO chunk: `monte train` against the same TRL trainer called
directly.

Both sides run as fresh processes (interpreter start and imports included, as a user pays them),
with the same model, rows, recipe settings and step count, saving a checkpoint at the end; they
alternate, and the best of each is compared. Peak resident memory of each process is reported
beside its time. ``--algorithm dpo``: `monte train --recipe dpo-tiny` on a preference set built
from the parity curriculum (``monte.quickstart.preference_rows``) against ``trl.DPOTrainer``.

    .venv/bin/python bench/train_overhead.py [--algorithm sft|dpo] [--rounds 2] [--steps 50] [--json-out PATH]
    .venv/bin/python bench/train_overhead.py --quick     # 2 steps, 1 round, both algorithms: a smoke run

A smoke run's baselines (setup, not timed) answer a constant rather than generate: they gate the
chunk and are no figure.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent.parent
PY = sys.executable

WRAP = """
import resource, sys, time
t = time.perf_counter()
code = 0
try:
    {body}
except SystemExit as e:
    code = e.code or 0
print("BENCH", time.perf_counter() - t, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, file=sys.stderr)
sys.exit(code)
"""

MONTE = {algo: f"from monte.cli.main import main; main(['train', '--recipe', '{algo}-tiny', '--source', "
               f"'{source}', '--from-base', '--yes', '--json'])"
         for algo, source in (("sft", "parity-sft"), ("dpo", "parity-pref"))}

DIRECT = """import json
    from datasets import Dataset
    from transformers import AutoTokenizer
    from trl import SFTConfig, SFTTrainer
    rows = [json.loads(l) for l in open({rows!r})]
    data = Dataset.from_list([{{"prompt": r["input"], "completion": r["output"]}} for r in rows])
    tok = AutoTokenizer.from_pretrained({model!r})
    cfg = SFTConfig(output_dir={out!r}, max_steps={steps}, learning_rate=3e-3, lr_scheduler_type="constant_with_warmup",
                    warmup_steps=10, per_device_train_batch_size=128, max_length=64, seed=0, data_seed=0, use_cpu=True,
                    bf16=False, activation_checkpointing=False, report_to=[], logging_steps=1, disable_tqdm=True,
                    save_strategy="steps", save_steps={steps}, dataloader_num_workers=0, completion_only_loss=True)
    SFTTrainer(model={model!r}, args=cfg, train_dataset=data, processing_class=tok).train()
    tok.save_pretrained({out!r} + "/checkpoint-{steps}")"""

# dpo-tiny's settings, as monte hands them to TRL (its CPU defaults included)
DIRECT_DPO = """import json
    from datasets import Dataset
    from transformers import AutoTokenizer
    from trl import DPOConfig, DPOTrainer
    rows = [json.loads(l) for l in open({rows!r})]
    data = Dataset.from_list(rows)
    tok = AutoTokenizer.from_pretrained({model!r})
    cfg = DPOConfig(output_dir={out!r}, max_steps={steps}, learning_rate=1e-4, lr_scheduler_type="constant",
                    per_device_train_batch_size=64, beta=0.1, max_length=32, seed=0, data_seed=0, use_cpu=True,
                    bf16=False, activation_checkpointing=False, report_to=[], logging_steps=1, disable_tqdm=True,
                    save_strategy="steps", save_steps={steps}, dataloader_num_workers=0)
    DPOTrainer(model={model!r}, args=cfg, train_dataset=data, processing_class=tok).train()
    tok.save_pretrained({out!r} + "/checkpoint-{steps}")"""


# The setup (not timed) in one interpreter: the commands' imports, torch's above all, paid once.
# --constant-answers (--quick): the baseline evals answer "0" to every item rather than generate:
# they only have to exist for `monte train` to start (as bench/io_campaign.py's template does).
SETUP = str(Path(__file__).resolve().parents[1] / "tests" / "support" / "batch.py")  # the commands in one interpreter


def sh(*args: str, cwd: Path) -> str:
    return subprocess.run(args, cwd=cwd, check=True, capture_output=True, text=True).stdout


def monte(*commands: list[str], cwd: Path, constant: bool = False) -> None:
    """Run monte commands one after another in one process; fail on the first that fails."""
    r = subprocess.run([PY, SETUP, json.dumps(commands), *(["--constant-answers"] if constant else [])],
                       cwd=cwd, capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit(f"setup failed:\n{r.stdout[-2000:]}\n{r.stderr[-3000:]}")


def timed(body: str, cwd: Path) -> tuple[float, int]:
    r = subprocess.run([PY, "-c", WRAP.format(body=body)], cwd=cwd, capture_output=True, text=True,
                       env={**os.environ, "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1")})
    if r.returncode != 0:
        raise SystemExit(f"failed:\n{r.stdout[-2000:]}\n{r.stderr[-3000:]}")
    line = next(x for x in r.stderr.splitlines() if x.startswith("BENCH "))
    _, secs, rss = line.split()
    return float(secs), int(rss)


def _compare(algo: str, steps: int, rounds: int, repo: Path, root: Path, rows: Path) -> dict[str, object]:
    """Alternating rounds of `monte train` and TRL direct for one algorithm; the best of each."""
    direct = DIRECT if algo == "sft" else DIRECT_DPO
    results: dict[str, list[tuple[float, int]]] = {"monte": [], "direct": []}
    for i in range(rounds):
        results["monte"].append(timed(MONTE[algo], repo))
        out = root / f"direct-{algo}-{i}"
        results["direct"].append(timed(direct.format(rows=str(rows), model=str(repo / "base"), out=str(out),
                                                      steps=steps), repo))
        print(f"{algo} round {i + 1}: monte {results['monte'][-1][0]:.1f}s, direct {results['direct'][-1][0]:.1f}s",
              flush=True)
    best = {k: min(v) for k, v in results.items()}
    peak = {k: max(r for _, r in v) for k, v in results.items()}
    ratio = best["monte"][0] / best["direct"][0]
    print(f"one {steps}-step {algo.upper()} chunk, best of {rounds}: monte train {best['monte'][0]:.1f}s, "
          f"TRL direct {best['direct'][0]:.1f}s, ratio {ratio:.3f} (target <= 1.10)")
    print(f"peak RSS: monte {peak['monte'] / 1024:.0f} MiB, direct {peak['direct'] / 1024:.0f} MiB "
          f"(ratio {peak['monte'] / peak['direct']:.2f})")
    return {"monte_s": best["monte"][0], "direct_s": best["direct"][0], "ratio": ratio,
            "monte_peak_rss_kib": peak["monte"], "direct_peak_rss_kib": peak["direct"], "all": results}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--steps", type=int, default=50)
    ap.add_argument("--algorithm", choices=["sft", "dpo"], action="append",
                    help="the chunk's algorithm (repeatable; default sft)")
    ap.add_argument("--quick", action="store_true", help="smoke run: 2 steps, 1 round, sft and dpo")
    ap.add_argument("--json-out")
    a = ap.parse_args()
    if a.quick:
        a.steps, a.rounds = 2, 1
    algorithms = a.algorithm or (["sft", "dpo"] if a.quick else ["sft"])
    root = Path(tempfile.mkdtemp(prefix="monte-bench-train-"))
    repo = root / "repo"
    repo.mkdir()
    sh("git", "init", "-q", "-b", "main", ".", cwd=repo)
    monte(["init"], ["env", "add", "--server", "parity", "--dev", "parity", "--test", "parity"], cwd=repo)
    rows = repo / "sft.jsonl"
    with open(repo / ".monte/environments/parity/curriculum.jsonl") as src, open(rows, "w") as dst:
        for line in src:
            item = json.loads(line)
            dst.write(json.dumps({"input": item["prompt"], "output": " " + item["answer"]}) + "\n")
    sys.path.insert(0, str(HERE))
    from monte.quickstart import preference_rows

    pairs = preference_rows(repo / ".monte/environments/parity/curriculum.jsonl", repo / "pref.jsonl")
    monte(["model", "init", "base"], ["dataset", "add", "parity-sft", "--from-file", str(rows), "--kind", "sft"],
          ["dataset", "add", "parity-pref", "--from-file", str(pairs), "--kind", "preference"],
          ["experiment", "init", "exp", "--eval", "parity", "--model", "base", "--steps-per-chunk", str(a.steps)],
          ["eval", "--yes"], ["eval", "--split", "test", "--yes"], cwd=repo, constant=a.quick)
    report: dict[str, object] = {"steps": a.steps, "rounds": a.rounds}
    for algo in algorithms:
        figures = _compare(algo, a.steps, a.rounds, repo, root, rows if algo == "sft" else pairs)
        report[algo] = figures
        if len(algorithms) == 1:
            report.update(figures)  # the single-algorithm layout, as before
    if a.json_out:
        Path(a.json_out).write_text(json.dumps(report, indent=2))
    shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
