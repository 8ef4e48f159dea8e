"""How long `monte train` takes to refuse what needs no model (issue 46.2): each refusal as a fresh
process, as a user meets it, beside `monte status` (a read-only command that imports no torch) and
TRL's SFTConfig imported (what a refusal used to wait for: it imports transformers and torch) in the same run.

The refusals: no starting point (E_USAGE), `--smoke` with `--from-base` (E_USAGE), a missing
baseline (E_NO_BASELINE), and, once the baselines are read, an sft recipe on an environment and a
grpo recipe on a dataset (E_REFUSED). Each must refuse before torch is imported; the goal is under
1 s of wall time.

    .venv/bin/python bench/train_refusals.py [--rounds 5] [--json-out PATH]
    .venv/bin/python bench/train_refusals.py --quick     # 1 round: a smoke run
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

PY = sys.executable
MONTE = [PY, "-c", "from monte.cli.main import main; main()"]
BEFORE_BASELINES = {
    "no starting point (E_USAGE)": ["train", "--recipe", "sft-tiny", "--source", "parity-sft"],
    "--smoke with --from-base (E_USAGE)": ["train", "--recipe", "sft-tiny", "--source", "parity-sft", "--smoke",
                                           "--from-base"],
    "no baseline (E_NO_BASELINE)": ["train", "--recipe", "sft-tiny", "--source", "parity-sft", "--from-base"],
}
AFTER_BASELINES = {
    "sft recipe on an environment (E_REFUSED)": ["train", "--recipe", "sft-tiny", "--source", "parity", "--from-base"],
    "grpo recipe on a dataset (E_REFUSED)": ["train", "--recipe", "grpo-tiny", "--source", "parity-sft", "--from-base"],
}


# The setup (not timed): its commands one after another in one interpreter, their imports (torch's,
# for `model init` and the evals) paid once rather than a fresh process a command; ["copy", DEST]
# copies the repository as it stands then (the refusals before the baselines run in that copy).
# --constant-answers (--quick): the baseline evals answer "0" to every item rather than generate:
# the refusals after them need them to exist, not their scores (as bench/io_campaign.py's template).
SETUP = str(Path(__file__).resolve().parents[1] / "tests" / "support" / "batch.py")  # the commands in one interpreter


def monte(repo: Path, *commands: list[str], constant: bool = False) -> None:
    r = subprocess.run([PY, SETUP, json.dumps(commands), *(["--constant-answers"] if constant else [])],
                       cwd=repo, capture_output=True, text=True)
    if r.returncode:
        raise SystemExit(f"setup failed: {r.stdout[-1000:]}\n{r.stderr[-2000:]}")


def timed(repo: Path, argv: list[str], rounds: int, *, refuses: bool) -> dict[str, float]:
    seconds = []
    for _ in range(rounds):
        t = time.perf_counter()
        r = subprocess.run(argv, cwd=repo, capture_output=True, text=True)
        seconds.append(time.perf_counter() - t)
        if refuses != bool(r.returncode):
            raise SystemExit(f"{argv[3:]} exited {r.returncode}: {r.stdout[-500:]}{r.stderr[-1500:]}")
    return {"best_s": round(min(seconds), 3), "median_s": round(statistics.median(seconds), 3)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--quick", action="store_true", help="1 round: a smoke run of the same path")
    ap.add_argument("--json-out", type=Path)
    a = ap.parse_args()
    rounds = 1 if a.quick else a.rounds
    with tempfile.TemporaryDirectory() as tmp:
        repo, before = Path(tmp) / "repo", Path(tmp) / "before"
        subprocess.run(["git", "init", "-q", "-b", "main", str(repo)], check=True)
        # one setup process (one torch import): the repository is copied to `before` ahead of its baselines
        monte(repo, ["init"], ["model", "init", "base-model"],
              ["env", "add", "--server", "parity", "--dev", "parity", "--test", "parity"],
              ["dataset", "add", "parity-sft", "--from-env", "parity", "--kind", "sft"],
              ["experiment", "init", "exp", "--eval", "parity", "--model", "base-model"], ["copy", str(before)],
              ["eval", "--yes"], ["eval", "--split", "test", "--yes"], constant=a.quick)
        figures: dict[str, dict[str, float]] = {
            "monte status (baseline)": timed(before, [*MONTE, "status"], rounds, refuses=False),
            "trl.SFTConfig, imported (what a refusal waited for)": timed(
                before, [PY, "-c", "import trl; trl.SFTConfig"], rounds, refuses=False),
        }
        for label, args in BEFORE_BASELINES.items():
            figures[label] = timed(before, [*MONTE, *args, "--yes"], rounds, refuses=True)
        for label, args in AFTER_BASELINES.items():
            figures[label] = timed(repo, [*MONTE, *args, "--yes"], rounds, refuses=True)
    base = figures["monte status (baseline)"]["median_s"]
    print(f"{'':52} {'best s':>7} {'median s':>9} {'x status':>9}")
    for label, f in figures.items():
        f["x_status"] = round(f["median_s"] / base, 2)
        print(f"{label:52} {f['best_s']:7.3f} {f['median_s']:9.3f} {f['x_status']:9.2f}")
    out = {"rounds": rounds, "cpus": os.cpu_count(), "load": os.getloadavg()[0], "figures": figures}
    if a.json_out:
        a.json_out.write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
