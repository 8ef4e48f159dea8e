"""Benchmark: an lm-eval exam evaluated through monte against ``lm_eval`` run directly.

In a fresh temporary monte repository with a tiny model (``monte.models.tiny.init_model``, no
download), a GSM8K-shaped lm-eval task over local files (``tests/envs/lmeval_tasks.py``:
``generate_until``, 2-shot from ``train``, its two regex filters, ``exact_match``) is frozen with
``monte env add --dev lm-eval:gsm_local --test lm-eval:gsm_local`` and an experiment made on it.
Then, in the same run, with the same loaded model object and thread count, over the same dev
documents (200 by default):

- monte: ``api.plan_eval`` + ``evals.run_eval`` on dev: the plan, the proof of every frozen file
  and every document's three lm-eval hashes, the ``started`` record, lm-eval's
  ``simple_evaluate`` with monte's ``LM`` (generation through ``monte.models.generate``), the
  re-proof of the logged samples, ``tasks.jsonl`` and the finished record;
- direct: ``lm_eval.simple_evaluate`` with lm-eval's own ``HFLM`` wrapping the same model object
  (``batch_size`` the experiment's), on the original task YAML, restricted to the same documents
  (``samples=``): the same work. (Restricted, lm-eval's sampler draws other few-shot examples for
  most of them than in its run of the whole split, which monte's prompts equal.)

Rounds alternate monte/direct after one untimed warm-up of each; the report gives each side's
seconds (best and median) and the ratio monte/direct, and checks, against one untimed ``lm_eval``
run of the whole split (no ``samples=``: what a team's plain run is), that monte scored every dev
document alike (per-document ``exact_match``, generation and prompt hash).

    .venv/bin/python bench/lmeval_overhead.py                 # 3 rounds, 200 documents
    .venv/bin/python bench/lmeval_overhead.py --quick         # 1 round, 6 documents
    .venv/bin/python bench/lmeval_overhead.py --json-out /tmp/lmeval.json
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
sys.path.insert(0, str(ROOT))  # monte and the tests' modules, as packages

EXPERIMENT = "exp"
TASK = "gsm_local"


def setup(root: Path, docs: int, max_gen_toks: int) -> tuple[Any, Path, Path, list[dict[str, Any]]]:
    """(workspace, model folder, task folder, the frozen dev items)."""
    from monte import api
    from monte.models.tiny import init_model
    from monte.workspace import open_workspace
    from tests.envs.lmeval_tasks import write_gsm

    repo = root / "repo"
    subprocess.run(["git", "init", "-q", "-b", "main", str(repo)], check=True)
    subprocess.run(["git", "-C", str(repo), "config", "user.name", "bench"], check=True)
    subprocess.run(["git", "-C", str(repo), "config", "user.email", "bench@localhost"], check=True)
    api.init(repo)
    ws = open_workspace(repo)
    folder = write_gsm(root / "tasks", n_test=2 * docs + 8, n_train=20, shots=2, max_gen_toks=max_gen_toks)
    api.env_add(dev=(f"lm-eval:{TASK}",), test=(f"lm-eval:{TASK}",), name="gsm", include_path=str(folder), ws=ws)
    model_dir = root / "model"
    init_model(model_dir)
    api.experiment_init(name=EXPERIMENT, eval_env="gsm", model=str(model_dir), ws=ws)
    items = [json.loads(x) for x in (ws.env_dir("gsm") / f"exams/{TASK}/dev.jsonl").read_text().splitlines()]
    return ws, model_dir, folder, items


def run_monte(ws: Any, load: Any) -> tuple[float, dict[str, Any]]:
    from monte import api, evals

    t0 = time.perf_counter()
    plan = api.plan_eval(experiment=EXPERIMENT, split="dev", ws=ws)
    result = evals.run_eval(ws, plan, load=load)
    return time.perf_counter() - t0, result.runs[0]


def run_direct(model: Any, tok: Any, folder: Path, indices: list[int] | None,
               batch_size: int) -> tuple[float, list[dict[str, Any]]]:
    from lm_eval import simple_evaluate
    from lm_eval.models.huggingface import HFLM
    from lm_eval.tasks import TaskManager

    t0 = time.perf_counter()
    lm = HFLM(pretrained=model, tokenizer=tok, batch_size=batch_size)
    tm = TaskManager(include_path=str(folder), include_defaults=False)
    res = simple_evaluate(model=lm, tasks=[TASK], task_manager=tm, log_samples=True, bootstrap_iters=0,
                          samples={TASK: indices} if indices is not None else None)
    assert res is not None
    return time.perf_counter() - t0, list(res["samples"][TASK])


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--docs", type=int, default=None, help="dev documents (default 200; --quick 6)")
    p.add_argument("--rounds", type=int, default=None, help="timed rounds of each side (default 3)")
    p.add_argument("--max-gen-toks", type=int, default=16, help="the task's generation_kwargs.max_gen_toks")
    p.add_argument("--threads", type=int, default=1, help="torch threads, the same for both sides")
    p.add_argument("--quick", action="store_true", help="smoke run: 1 round, 6 documents, 4 new tokens, no warm-up")
    p.add_argument("--tmpdir", default=None, help="where to make the temporary repository")
    p.add_argument("--json-out", default=None, help="write the result as JSON to this path")
    args = p.parse_args(argv)
    docs = args.docs or (6 if args.quick else 200)
    rounds = args.rounds or (1 if args.quick else 3)
    max_gen = 4 if args.quick else args.max_gen_toks

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("DVC_NO_ANALYTICS", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    import lm_eval
    import torch

    torch.set_num_threads(args.threads)
    from monte.ledger.experiment import Ledger
    from monte.ledger.views import run_dir
    from monte.models import generate as gen

    tmp = Path(tempfile.mkdtemp(prefix="monte-bench-lmeval-", dir=args.tmpdir))
    result: dict[str, Any] = {
        "benchmark": "lmeval_overhead",
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(), "platform": platform.platform(),
                    "torch": torch.__version__, "torch_threads": torch.get_num_threads(),
                    "lm_eval": lm_eval.__version__},
        "rounds": rounds, "max_gen_toks": max_gen,
    }
    try:
        t0 = time.perf_counter()
        ws, model_dir, folder, items = setup(tmp, docs, max_gen)
        result["setup_s"] = time.perf_counter() - t0
        indices = [int(i["source"]["index"]) for i in items]
        result["docs"] = len(items)
        batch = int(Ledger(ws.store, EXPERIMENT).measurement().execution.batch_size)
        result["batch_size"] = batch
        model, tok = gen.load(model_dir)  # once, outside every timed region, for both sides

        def load(folder: Path) -> tuple[Any, Any]:
            return model, tok

        if not args.quick:  # warm-up, untimed
            run_monte(ws, load)
            run_direct(model, tok, folder, indices, batch)
        monte_s, direct_s = [], []
        row: dict[str, Any] = {}
        samples: list[dict[str, Any]] = []
        for _ in range(rounds):
            t, row = run_monte(ws, load)
            monte_s.append(t)
            t, samples = run_direct(model, tok, folder, indices, batch)
            direct_s.append(t)
        _, samples = run_direct(model, tok, folder, None, batch)  # the plain run, whole split, untimed
        tree = Ledger(ws.store, EXPERIMENT).snapshot()
        raw = tree.read(f"{run_dir(row['run'])}/tasks.jsonl")
        assert raw is not None
        tasks = [json.loads(x) for x in raw.decode().splitlines()]
        strict = {int(s["doc_id"]): s for s in samples if s["filter"] == "strict-match"}
        same = len(tasks) == len(items) and all(
            t["score"] == float(strict[i["source"]["index"]]["exact_match"])
            and t["answer"] == strict[i["source"]["index"]]["filtered_resps"][0][:200]
            and i["lm_eval"]["prompt_hash"] == strict[i["source"]["index"]]["prompt_hash"]
            for t, i in zip(tasks, items, strict=True))
        result.update(
            monte_s={"best": min(monte_s), "median": statistics.median(monte_s), "all": monte_s},
            direct_s={"best": min(direct_s), "median": statistics.median(direct_s), "all": direct_s},
            ratio_best=min(monte_s) / min(direct_s),
            ratio_median=statistics.median(monte_s) / statistics.median(direct_s),
            same_scores=same,
        )
        print(f"{len(items)} documents, {rounds} round(s): monte {min(monte_s):.2f} s best / "
              f"{statistics.median(monte_s):.2f} s median; lm_eval directly {min(direct_s):.2f} s / "
              f"{statistics.median(direct_s):.2f} s; monte/direct {result['ratio_best']:.2f}x best, "
              f"{result['ratio_median']:.2f}x median; same per-document scores: {same}")
        if args.json_out:
            Path(args.json_out).write_text(json.dumps(result, indent=2) + "\n")
        return 0 if same else 1
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
