"""Benchmark: a test read through the sealed grader against the same read run locally.

Two fresh monte repositories, each with the built-in ``parity`` environment (a 200-item test
split) and one experiment per round on its own tiny base model (seeds 0, 1, ...: every round is
a new cohort's ``test@0``, so the seal allows it). In one, ``monte grader take parity`` moved the
test split to a grader: ``monte grader init`` in a folder of its own, reached over a real
``sshd`` on loopback whose ``authorized_keys`` gives the client key only the forced command
``monte grader serve`` (the grader runs as the same account here: what is timed is the path, SSH,
the weights sent, the grader's worker, the signature and its check, not the account).

Timed, per round, alternating: ``monte eval -e eN --split test --yes`` as a subprocess in each
repository (what a user runs; each pays its interpreter's start). The local read loads the model
and generates in one process; the grader read starts the client (no torch), sends the weights,
and the grader's worker loads and generates. The report gives each side's seconds (best, median)
and the ratio grader/local; both must record the same score (the same greedy answers).

    .venv/bin/python bench/grader_overhead.py                 # 3 rounds
    .venv/bin/python bench/grader_overhead.py --quick         # 1 round
    .venv/bin/python bench/grader_overhead.py --json-out /tmp/grader.json
    .venv/bin/python bench/grader_overhead.py --exam lm-eval  # a GSM8K-shaped lm-eval task instead

With ``--exam lm-eval`` both repositories freeze the same GSM8K-shaped lm-eval task over local
files (tests/envs/lmeval_tasks.py); ``grader take`` hands the grader the whole frozen task, and
its worker grades with lm-eval's own ``simple_evaluate`` there, as the local read does here.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # monte and tests.support (the loopback sshd of the tests), as packages


def _monte(repo: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    r = subprocess.run([sys.executable, "-m", "monte", *args], cwd=repo, env=env, capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit(f"monte {' '.join(args)} exited {r.returncode}:\n{r.stdout}\n{r.stderr}")
    return r


# Setup commands (not timed) one after another in one interpreter: a fresh one costs a second or
# more a command on a loaded machine, and the reads timed below are each still a fresh process.
BATCH = str(Path(__file__).resolve().parents[1] / "tests" / "support" / "batch.py")  # the commands in one interpreter


def _batch(repo: Path, env: dict[str, str], *commands: list[str]) -> None:
    r = subprocess.run([sys.executable, BATCH, json.dumps(commands)], cwd=repo, env=env, capture_output=True,
                       text=True)
    if r.returncode != 0:
        raise SystemExit(f"setup in {repo} exited {r.returncode}:\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}")


def time_reads(local: Path, graded: Path, env: dict[str, str],
               rounds: int) -> tuple[dict[str, list[float]], dict[str, list[float]]]:
    """Each round's ``test@0`` (experiment ``eK``) in both repositories, alternating: the seconds
    of each ``monte eval --split test`` subprocess and the score it recorded; the two sides must
    record the same scores (the same greedy answers, graded the same)."""
    times: dict[str, list[float]] = {"local": [], "grader": []}
    scores: dict[str, list[float]] = {"local": [], "grader": []}
    for k in range(rounds):
        for side, repo in (("local", local), ("grader", graded)):
            t0 = time.perf_counter()
            r = _monte(repo, env, "eval", "-e", f"e{k}", "--split", "test", "--yes", "--json")
            times[side].append(time.perf_counter() - t0)
            scores[side].append(json.loads(r.stdout)["runs"][0]["score"])
    if scores["local"] != scores["grader"]:
        raise SystemExit(f"the two sides recorded different scores: {scores}")
    return times, scores


def _repo(path: Path, env: dict[str, str], rounds: int, name: str, add: list[str],
          then: tuple[list[str], ...] = ()) -> Path:
    """A repository with one experiment a round, each on its own base (seed k), ``add`` frozen; then
    the commands ``then`` (the grader's: config set, grader take), all in one process."""
    from monte.models.tiny import init_model

    subprocess.run(["git", "init", "-q", "-b", "main", str(path)], check=True)
    for k in range(rounds):
        init_model(path / f"base{k}", seed=k)
    _batch(path, env, ["init", "--no-hooks"], ["env", "add", *add],
           *(["experiment", "init", f"e{k}", "--eval", name, "--model", f"base{k}"] for k in range(rounds)), *then)
    return path


def _exam(kind: str, tmp: Path) -> tuple[str, list[str], str]:
    """The environment each side freezes: (its name, `monte env add`'s arguments, its words)."""
    if kind == "parity":
        return "parity", ["--server", "parity", "--dev", "parity", "--test", "parity"], "200 items"
    from tests.envs.lmeval_tasks import write_gsm

    folder = write_gsm(tmp / "tasks", n_test=80, n_train=20, shots=2, max_gen_toks=12)
    return "lm", ["--dev", "lm-eval:gsm_local", "--test", "lm-eval:gsm_local", "--as", "lm", "--include-path",
                  str(folder)], "40 lm-eval documents (GSM8K-shaped, 2-shot)"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rounds", type=int, default=None, help="timed rounds of each side (default 3)")
    p.add_argument("--quick", action="store_true", help="smoke run: 1 round")
    p.add_argument("--tmpdir", default=None, help="where to make the temporary repositories")
    p.add_argument("--json-out", default=None, help="write the result as JSON to this path")
    p.add_argument("--exam", choices=("parity", "lm-eval"), default="parity",
                   help="the exam read: the built-in parity, or an lm-eval task graded by lm-eval's own code")
    args = p.parse_args(argv)
    rounds = args.rounds or (1 if args.quick else 3)

    from tests.support.sshd import SSHD, Keys, Sshd

    if not os.path.exists(SSHD):
        raise SystemExit(f"{SSHD} is missing: apt-get install openssh-server")
    tmp = Path(tempfile.mkdtemp(prefix="monte-grader-bench-", dir=args.tmpdir))
    server = None
    try:
        env = {**{k: v for k, v in os.environ.items() if not k.startswith("MONTE_")},
               "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1"), "XDG_CONFIG_HOME": str(tmp / "config"),
               "GIT_AUTHOR_NAME": "bench", "GIT_AUTHOR_EMAIL": "bench@localhost", "GIT_COMMITTER_NAME": "bench",
               "GIT_COMMITTER_EMAIL": "bench@localhost"}
        home = tmp / "grader"
        # the grader generates on as many threads as the local read (sshd passes no environment)
        info = json.loads(_monte(tmp, env, "grader", "init", str(home), "--threads", env["OMP_NUM_THREADS"],
                                 "--json").stdout)
        keys = Keys.make(tmp / "keys")
        server = Sshd(tmp / "sshd", keys)
        agent_pub = Path(f"{keys.client_key}.pub").read_text().strip()
        (server.folder / "authorized_keys").write_text(info["authorized_keys"].replace("AGENT_PUBLIC_KEY", agent_pub)
                                                       + "\n")
        server.start()
        env["MONTE_GRADER_KEY_FILE"] = str(keys.client_key)
        name, add, what = _exam(args.exam, tmp)
        local = _repo(tmp / "local", env, rounds, name, add)
        graded = _repo(tmp / "graded", env, rounds, name, add, then=(
            ["config", "set", "grader", f"ssh://{server.user}@127.0.0.1:{server.port}", "--key", info["public_key"]],
            ["grader", "take", name]))
        times, scores = time_reads(local, graded, env, rounds)
        med = {s: statistics.median(v) for s, v in times.items()}
        result: dict[str, Any] = {
            "benchmark": "grader_overhead", "when": datetime.now(UTC).isoformat(timespec="seconds"),
            "exam": args.exam, "rounds": rounds, "items": what, "seconds": times,
            "best": {s: min(v) for s, v in times.items()}, "median": med,
            "ratio_median": med["grader"] / med["local"], "scores": scores,
            "machine": {"cpus": os.cpu_count(), "python": platform.python_version(), "platform": platform.platform()},
        }
        print(f"test read of {what}, {rounds} round(s): local {med['local']:.2f} s, through the grader "
              f"{med['grader']:.2f} s (median); ratio {result['ratio_median']:.2f}x (goal <= 1.5x)")
        if args.json_out:
            Path(args.json_out).write_text(json.dumps(result, indent=2) + "\n")
    finally:
        if server is not None:
            server.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
