"""Benchmark: grading through NeMo Gym's own resources server, as monte does it.

Two figures, each in the same run against the same real server (NeMo Gym 0.4.0's reasoning_gym,
started from the unmodified wheel in the venv ``make nemo-gym`` builds, or ``--python``):

- verifies per second through monte's adapter (``GymServer.verify_many``: a bounded pool of
  keep-alive connections, each answer wrapped as an OpenAI Responses object) against calling the
  server directly with one client (one keep-alive ``http.client`` connection, one request after
  another, the same bodies). Rounds alternate after one untimed warm-up of each; the report
  gives the best and median rates and their ratio (goal: adapter >= 0.9x direct).
- eval wall time of the same frozen rows (``monte env add --benchmark reasoning_gym``: 200 dev
  rows, the tiny model, ``evals.run_eval``), graded by the server (its start included) against
  graded in-process by reasoning-gym's own ``score_answer`` (monte's catalog grader for its
  reasoning-gym tasks), the model loaded once beforehand for both (``--quick``: a smoke eval,
  5 rows).

Answers are the rows' own answers in ``<answer>`` tags for half the rows and a wrong one for the
rest, so every verify does the server's full scoring; both sides must agree on every reward.

    .venv/bin/python bench/nemo_verify.py                   # 400 rows, 5 rounds
    .venv/bin/python bench/nemo_verify.py --quick           # 40 rows, 1 round: a smoke run
    .venv/bin/python bench/nemo_verify.py --json-out /tmp/nemo.json
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import platform
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def answers_for(rows: list[dict[str, Any]]) -> list[str]:
    return [f"<answer>{r['answer']}</answer>" if i % 2 == 0 else "<answer>not this</answer>" for i, r in enumerate(rows)]


def direct(url: str, rows: list[dict[str, Any]], answers: list[str]) -> tuple[float, list[float]]:
    """One client, one keep-alive connection, one request after another."""
    from monte.envs.nemo.server import response_object

    host, port = url.removeprefix("http://").split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=300)
    conn.connect()
    conn.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # a good client: no Nagle stall
    rewards = []
    t0 = time.perf_counter()
    for row, a in zip(rows, answers, strict=True):
        conn.request("POST", "/verify", body=json.dumps({**row, "response": response_object(a)}).encode(),
                     headers={"Content-Type": "application/json"})
        resp = conn.getresponse()
        rewards.append(float(json.loads(resp.read())["reward"]))
    dt = time.perf_counter() - t0
    conn.close()
    return dt, rewards


def adapter(server: Any, rows: list[dict[str, Any]], answers: list[str]) -> tuple[float, list[float]]:
    t0 = time.perf_counter()
    got = server.verify_many(rows, answers)
    return time.perf_counter() - t0, [float(g["reward"]) for g in got]


def eval_times(root: Path, model_dir: Path, smoke: bool) -> dict[str, Any]:
    """One eval graded by the server, one graded in-process, same rows, same loaded model."""
    from monte import api
    from monte.envs import grading
    from monte.evals.run import run_eval
    from monte.models import generate as gen
    from monte.workspace import open_workspace

    repo = root / "repo"
    subprocess.run(["git", "init", "-q", "-b", "main", str(repo)], check=True)
    api.init(repo)
    ws = open_workspace(repo)
    api.env_add(benchmark="reasoning_gym", name="rg", ws=ws)  # 200 dev rows from NeMo Gym's generator
    api.experiment_init(name="exp", eval_env="rg", model=str(model_dir), ws=ws)
    model, tok = gen.load(model_dir)

    def load(_: Path) -> tuple[Any, Any]:
        return model, tok

    out: dict[str, Any] = {}
    t0 = time.perf_counter()
    res = run_eval(ws, api.plan_eval(experiment="exp", split="dev", smoke=smoke, ws=ws), load=load)
    out["server_s"] = round(time.perf_counter() - t0, 3)
    out["n"] = res.runs[0]["n"]

    real = grading.ExamGrader

    class InProcess(real):  # type: ignore[misc, valid-type]
        """reasoning-gym's own score_answer on the same rows, in monte's process."""

        def __init__(self, *a: Any, **k: Any) -> None:
            super().__init__(*a, **{**k, "needed": False})
            self.gym = True

        def grade(self, items: Any, answers: Any, ids: Any) -> list[dict[str, Any]]:
            import reasoning_gym
            from reasoning_gym.utils import extract_answer

            out = []
            for i, item, a in zip(ids, items, answers, strict=True):
                fn = reasoning_gym.get_score_answer_fn(item["metadata"]["source_dataset"])
                out.append({"id": i, "score": float(fn(extract_answer(a) or a, item)), "answer": a[:200]})
            return out

    grading.ExamGrader = InProcess  # type: ignore[misc]
    try:
        t0 = time.perf_counter()
        run_eval(ws, api.plan_eval(experiment="exp", split="dev", smoke=smoke, ws=ws), load=load)
        out["in_process_s"] = round(time.perf_counter() - t0, 3)
    finally:
        grading.ExamGrader = real  # type: ignore[misc]
    out["overhead_s"] = round(out["server_s"] - out["in_process_s"], 3)
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rows", type=int, default=None, help="verifies per round (default 400)")
    p.add_argument("--rounds", type=int, default=None, help="timed rounds of each side (default 5)")
    p.add_argument("--python", default=None, help="NeMo Gym's interpreter (default: the venv `make nemo-gym` builds)")
    p.add_argument("--quick", action="store_true", help="40 rows, 1 round, a 5-row smoke eval: a smoke run")
    p.add_argument("--no-eval", action="store_true", help="skip the eval wall-time figure")
    p.add_argument("--json-out", default=None, help="write the result as JSON to this path")
    args = p.parse_args(argv)
    n = args.rows or (40 if args.quick else 400)
    rounds = args.rounds or (1 if args.quick else 5)
    python = args.python or os.environ.get("MONTE_NEMO_GYM_PYTHON") or str(ROOT / ".nemo-gym" / "bin" / "python")
    if not Path(python).exists():
        print(f"no NeMo Gym interpreter at {python}: run `make nemo-gym` (or pass --python)", file=sys.stderr)
        return 2
    os.environ["MONTE_NEMO_GYM_PYTHON"] = python
    for k in ("MONTE_LOCAL", "HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "MONTE_GYM_SERVER_URL", "MONTE_GYM_PORT"):
        os.environ.pop(k, None)
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    from monte.envs.nemo import server as gym_server
    from monte.envs.nemo import stack as gym_stack

    stack = gym_stack.find()
    assert stack is not None
    e = gym_stack.server_entry(stack.root, "reasoning_gym")
    assert e is not None
    with tempfile.TemporaryDirectory(prefix="monte-bench-nemo-") as tmp:
        gen = Path(tmp) / "rows.jsonl"
        subprocess.run([python, str(stack.root / "resources_servers/reasoning_gym/scripts/create_dataset.py"),
                        "--tasks", "knights_knaves,basic_arithmetic,syllogism", "--size", str(n), "--seed", "7",
                        "--output", str(gen)], check=True, capture_output=True)
        rows = [json.loads(line) for line in gen.read_text().splitlines()]
        answers = answers_for(rows)
        t0 = time.perf_counter()
        with gym_server.GymServer.start(stack, config=e.config, instance=e.instance, server=e.server) as s:
            start_s = time.perf_counter() - t0
            adapter(s, rows, answers)  # warm-up, untimed
            direct(s.url, rows, answers)
            a_rates, d_rates = [], []
            for _ in range(rounds):
                dt, ra = adapter(s, rows, answers)
                a_rates.append(n / dt)
                dt, rd = direct(s.url, rows, answers)
                d_rates.append(n / dt)
                if ra != rd:
                    print("the adapter and the direct client disagree on a reward", file=sys.stderr)
                    return 1
        result: dict[str, Any] = {
            "bench": "nemo_verify", "when": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "machine": {"python": platform.python_version(), "cpus": os.cpu_count(), "platform": platform.platform()},
            "nemo_gym": stack.version, "server": "reasoning_gym", "rows": n, "rounds": rounds,
            "server_start_s": round(start_s, 2), "rewarded": sum(rd),
            "adapter_verifies_per_s": {"best": round(max(a_rates), 1), "median": round(statistics.median(a_rates), 1)},
            "direct_verifies_per_s": {"best": round(max(d_rates), 1), "median": round(statistics.median(d_rates), 1)},
        }
        result["ratio_median"] = round(result["adapter_verifies_per_s"]["median"] /
                                       result["direct_verifies_per_s"]["median"], 2)
        result["goal"] = "adapter >= 0.9x direct"
        if not args.no_eval:
            from monte.models.tiny import init_model

            model_dir = Path(tmp) / "model"
            init_model(model_dir, seed=0)
            result["eval"] = eval_times(Path(tmp), model_dir, smoke=args.quick)
    print(f"verify through monte's adapter: {result['adapter_verifies_per_s']['median']}/s median "
          f"(best {result['adapter_verifies_per_s']['best']}); one direct client: "
          f"{result['direct_verifies_per_s']['median']}/s median; ratio {result['ratio_median']} "
          f"({result['goal']}); server ready in {result['server_start_s']} s")
    if "eval" in result:
        ev = result["eval"]
        print(f"eval of {ev['n']} rows: graded by the server {ev['server_s']} s, in-process {ev['in_process_s']} s "
              f"(+{ev['overhead_s']} s, the server's start included)")
    if args.json_out:
        Path(args.json_out).write_text(json.dumps(result, indent=2) + "\n")
        print(f"wrote {args.json_out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
