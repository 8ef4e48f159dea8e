"""Benchmark: monte's eval path against one-prompt-at-a-time ``model.generate``.

In a fresh temporary monte repository (``git init``, ``monte init``,
``monte env add --server parity --dev parity --test parity``, ``monte experiment init exp
--eval parity --model DIR``, with a tiny model built here by ``monte.models.tiny.init_model``, no
download), this script measures in the same run, with the same model object and thread count:

- monte: ``evals.run_eval(ws, api.plan_eval(split="dev"), load=...)`` over the dev split (200
  tasks): plan, the ``started`` record, batched left-padded greedy generation with the KV cache,
  grading, the ``tasks.jsonl`` + finished record (the time inside ``generate`` is taken too, so
  what the plan, the record and the grading add is reported on its own). The model is loaded
  once beforehand and handed in through ``load=`` (``api.run_eval`` has no ``load`` argument;
  ``monte.evals.run_eval`` does), so the one-time import and load are not timed;
- plain: a loop over the same 200 prompts, ``model.generate(**tok(prompt, return_tensors="pt"),
  max_new_tokens=N, do_sample=False)``, one prompt at a time, where N is the experiment's
  ``eval.max_new_tokens`` (measurement.json, 16).

Rounds alternate monte/plain after one untimed warm-up of each, so that machine noise hits both
alike; the report gives tasks/s (best and median) and the ratio monte/plain (target >= 4 on CPU).
It also checks that both give the same greedy answers: monte's recorded answers (``tasks.jsonl``,
cut at the stop string) against the plain loop's text cut the same way, the grades, and the raw
generated text before the cut.

    .venv/bin/python bench/eval_throughput.py                  # 5 rounds, tiny model
    .venv/bin/python bench/eval_throughput.py --size small     # the 3.2M-parameter model
    .venv/bin/python bench/eval_throughput.py --quick          # 1 round, a smoke run of seconds
    .venv/bin/python bench/eval_throughput.py --json-out /tmp/eval.json
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

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

EXPERIMENT = "exp"


def setup_repo(root: Path, size: str, seed: int) -> tuple[Any, Path]:
    """A monte repository with the parity environment and experiment ``exp``; (workspace, model dir)."""
    from monte import api
    from monte.models.tiny import init_model
    from monte.workspace import open_workspace

    repo = root / "repo"
    subprocess.run(["git", "init", "-q", "-b", "main", str(repo)], check=True)
    subprocess.run(["git", "-C", str(repo), "config", "user.name", "bench"], check=True)
    subprocess.run(["git", "-C", str(repo), "config", "user.email", "bench@localhost"], check=True)
    api.init(repo)
    ws = open_workspace(repo)
    api.env_add(server="parity", dev=("parity",), test=("parity",), ws=ws)
    model_dir = root / f"model-{size}"
    init_model(model_dir, size=size, seed=seed)
    api.experiment_init(name=EXPERIMENT, eval_env="parity", model=str(model_dir), ws=ws)
    return ws, model_dir


def cut(text: str, stop: list[str]) -> str:
    """The plain loop's answers cut as monte documents its cut (each stop string ends the text,
    a leading one skipped, as the model's first token is often a newline): written out here, not
    imported, so that a change in monte's cut shows up as a disagreement."""
    for s in stop:
        pos = text.find(s, 1 if text.startswith(s) else 0)
        if pos >= 0:
            text = text[:pos]
    return text


def run_monte(ws: Any, load: Any, smoke: bool = False) -> tuple[float, float, float, dict[str, Any]]:
    """One ``plan_eval`` + ``run_eval`` on dev; (plan seconds, run seconds, seconds inside
    ``generate`` during the run, the finished row). The rest of the run is the record
    (started + finished commits, tasks.jsonl, events) and the grading."""
    from monte import api, evals
    from monte.models import generate as gen

    inside: list[float] = []
    generate = gen.generate

    def timed(*a: Any, **k: Any) -> Any:
        t = time.perf_counter()
        try:
            return generate(*a, **k)
        finally:
            inside.append(time.perf_counter() - t)

    gen.generate = timed  # run_eval looks it up at call time
    try:
        t0 = time.perf_counter()
        plan = api.plan_eval(experiment=EXPERIMENT, split="dev", smoke=smoke, ws=ws)
        t1 = time.perf_counter()
        result = evals.run_eval(ws, plan, load=load)
        t2 = time.perf_counter()
    finally:
        gen.generate = generate
    # the preflight's one-prompt generation (before ``started``) is monte's overhead, not the run's
    # generation: only the last call, the run's, counts as time inside generate
    assert len(inside) in (1, 2), inside
    (row,) = result.runs
    return t1 - t0, t2 - t1, inside[-1], row


def run_plain(model: Any, tok: Any, prompts: list[str], max_new_tokens: int) -> tuple[float, list[str]]:
    """One prompt at a time, as a first script would; (seconds, raw generated text per prompt)."""
    t0 = time.perf_counter()
    out = []
    for p in prompts:
        enc = tok(p, return_tensors="pt")
        gen = model.generate(**enc, max_new_tokens=max_new_tokens, do_sample=False)
        out.append(tok.decode(gen[0, enc["input_ids"].shape[1]:], skip_special_tokens=True))
    return time.perf_counter() - t0, out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--size", default="tiny", choices=("tiny", "small"), help="the tiny model's size")
    p.add_argument("--seed", type=int, default=0, help="the model's seed")
    p.add_argument("--rounds", type=int, default=None, help="timed rounds of each side (default 5)")
    p.add_argument("--threads", type=int, default=1, help="torch threads, the same for both sides")
    p.add_argument("--quick", action="store_true",
                   help="smoke run: 1 round, the plain loop over the first 40 prompts, 8 in the padding check")
    p.add_argument("--tmpdir", default=None, help="where to make the temporary repository")
    p.add_argument("--keep", action="store_true", help="keep the repository and print its path")
    p.add_argument("--json-out", default=None, help="write the result as JSON to this path")
    args = p.parse_args(argv)
    rounds = args.rounds or (1 if args.quick else 5)

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("DVC_NO_ANALYTICS", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    import torch

    torch.set_num_threads(args.threads)
    from monte.ledger.experiment import Ledger
    from monte.models import generate as gen

    tmp = Path(tempfile.mkdtemp(prefix="monte-bench-eval-", dir=args.tmpdir))
    result: dict[str, Any] = {
        "benchmark": "eval_throughput",
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(),
                    "platform": platform.platform(), "torch": torch.__version__,
                    "torch_threads": torch.get_num_threads()},
        "size": args.size,
        "rounds": rounds,
    }
    try:
        print(f"building the experiment in {tmp} ...", flush=True)
        t0 = time.perf_counter()
        ws, model_dir = setup_repo(tmp, args.size, args.seed)
        result["setup_s"] = time.perf_counter() - t0
        ledger = Ledger(ws.store, EXPERIMENT)
        meas = ledger.measurement()
        settings = {**meas.eval.model_dump(), **meas.execution.model_dump()}
        split = meas.exams["parity"].splits["dev"]
        items = [json.loads(line) for line in (ws.data_root / split.path).read_text().splitlines()
                 if line.strip()]
        prompts = [str(i["prompt"]) for i in items]
        max_new = int(settings["max_new_tokens"])
        result["settings"] = settings
        result["tasks"] = n = len(items)
        # the plain loop, one prompt at a time, is the slow side: a smoke run times it on a few
        n_plain = min(40, n) if args.quick else n
        result["plain_tasks"] = n_plain

        t0 = time.perf_counter()
        model, tok = gen.load(model_dir)  # the one-time load, outside every timed region
        result["load_s"] = time.perf_counter() - t0
        result["parameters"] = sum(p.numel() for p in model.parameters())
        loaded_from: list[str] = []

        def load(folder: Path) -> tuple[Any, Any]:
            loaded_from.append(str(folder))
            return model, tok

        # Warm-up, untimed: a smoke eval (5 tasks) and 5 plain generations.
        run_monte(ws, load, smoke=True)
        run_plain(model, tok, prompts[:5], max_new)
        # monte loads the private copy it hashed as it read it (the proven bytes), in the data root
        assert all(Path(f).resolve() == model_dir.resolve() or Path(f).parent.name == "tmp" for f in loaded_from), \
            loaded_from

        monte_plan, monte_run, monte_total, monte_gen, plain_total = [], [], [], [], []
        rows: list[dict[str, Any]] = []
        plain_raw: list[str] = []
        for r in range(rounds):
            tp, tr, tg, row = run_monte(ws, load)
            monte_plan.append(tp)
            monte_run.append(tr)
            monte_total.append(tp + tr)
            monte_gen.append(tg)
            rows.append(row)
            tq, plain_raw = run_plain(model, tok, prompts[:n_plain], max_new)
            plain_total.append(tq)
            print(f"  round {r + 1}/{rounds}: monte {tp + tr:.2f} s (generate {tg:.2f} s, plan {tp * 1e3:.0f} ms,"
                  f" record + grading {(tr - tg) * 1e3:.0f} ms), plain {tq:.2f} s", flush=True)

        best_m, best_p = min(monte_total), min(plain_total)
        med_m, med_p = statistics.median(monte_total), statistics.median(plain_total)
        result["monte"] = {
            "total_s": monte_total, "plan_s": monte_plan, "run_s": monte_run,
            "tasks_per_s_best": n / best_m, "tasks_per_s_median": n / med_m,
        }
        overhead = [t - g for t, g in zip(monte_total, monte_gen, strict=True)]
        result["monte_breakdown"] = {
            "generate_s": monte_gen,
            "plan_record_grading_s": overhead,
            "plan_record_grading_s_median": statistics.median(overhead),
            "share_of_total_median": statistics.median(o / t for o, t in zip(overhead, monte_total, strict=True)),
        }
        result["plain"] = {
            "total_s": plain_total,
            "tasks_per_s_best": n_plain / best_p, "tasks_per_s_median": n_plain / med_p,
        }
        # tasks/s against tasks/s (the same time per task when n_plain == n)
        per_round = [(n / m) / (n_plain / p_) for m, p_ in zip(monte_total, plain_total, strict=True)]
        result["ratio"] = {
            "best": (n / best_m) / (n_plain / best_p),
            "median": (n / med_m) / (n_plain / med_p),
            "per_round": per_round,
            "median_of_per_round": statistics.median(per_round),
            "target": 4.0,
        }

        # Agreement: what monte recorded against the plain loop, answer by answer.
        from monte.envs.registry import get as get_bench
        from monte.runs import read_tasks

        snap = ledger.snapshot()
        bench = get_bench("parity").benchmark
        recorded = [read_tasks(snap, row["run"]) for row in rows]
        stop = list(settings["stop"])
        plain_cut = [cut(t, stop)[:200] for t in plain_raw]
        plain_scores = [float(bench.grade(i, a)) for i, a in zip(items[:n_plain], plain_cut, strict=True)]
        first = recorded[0]
        assert first is not None and [t["id"] for t in first] == [i["id"] for i in items]
        same_answer = sum(t["answer"] == a for t, a in zip(first[:n_plain], plain_cut, strict=True))
        same_score = sum(t["score"] == s for t, s in zip(first[:n_plain], plain_scores, strict=True))
        rounds_identical = all(r_ is not None and [t["answer"] for t in r_] == [t["answer"] for t in first]
                               for r_ in recorded)
        # The raw text before the stop cut: monte's generate with no stop string, untimed.
        monte_raw = gen.generate(model, tok, prompts[:n_plain], max_new_tokens=max_new,
                                 batch_size=int(settings["batch_size"]), stop=())
        same_raw = sum(a == b for a, b in zip(monte_raw, plain_raw, strict=True))
        diffs = [{"id": i["id"], "prompt": i["prompt"], "monte": a, "plain": b}
                 for i, a, b in zip(items[:n_plain], monte_raw, plain_raw, strict=True) if a != b][:5]
        lengths = sorted({len(tok(p_)["input_ids"]) for p_ in prompts})
        # The dev prompts all have one length, so no batch above is padded. Left padding is
        # checked here on prompts of mixed lengths (untimed): batched against one at a time.
        mixed = [f"{'x' * (j % 13)}{prompts[j]}" for j in range(min(8 if args.quick else 64, n))]
        mixed_batched = gen.generate(model, tok, mixed, max_new_tokens=max_new,
                                     batch_size=int(settings["batch_size"]), stop=())
        _, mixed_single = run_plain(model, tok, mixed, max_new)
        mixed_same = sum(a == b for a, b in zip(mixed_batched, mixed_single, strict=True))
        result["agreement"] = {
            "answers_same": same_answer, "scores_same": same_score, "raw_same": same_raw, "n": n_plain,
            "answer_rate": same_answer / n_plain, "raw_rate": same_raw / n_plain,
            "monte_score": (rows[0]["score"] if n_plain == n
                            else sum(t["score"] for t in first[:n_plain]) / n_plain),
            "plain_score": sum(plain_scores) / n_plain,
            "monte_rounds_identical": rounds_identical,
            "prompt_token_lengths": lengths,
            "padded_check": {"n": len(mixed), "raw_same": mixed_same,
                             "prompt_token_lengths": [min(len(tok(x)["input_ids"]) for x in mixed),
                                                      max(len(tok(x)["input_ids"]) for x in mixed)]},
            "examples_of_differences": diffs,
        }
    finally:
        if args.keep:
            print(f"kept {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)

    print_summary(result)
    if args.json_out:
        Path(args.json_out).write_text(json.dumps(result, indent=2) + "\n")
        print(f"wrote {args.json_out}")
    return 0


def print_summary(r: dict[str, Any]) -> None:
    m, p, ra, a = r["monte"], r["plain"], r["ratio"], r["agreement"]
    s = r["settings"]
    print()
    print(f"eval_throughput: {r['size']} model ({r['parameters']:,} parameters), {r['tasks']} dev tasks,"
          f" max_new_tokens {s['max_new_tokens']}, batch_size {s['batch_size']},"
          f" {r['machine']['torch_threads']} torch thread(s), {r['rounds']} rounds")
    print(f"  one-time load (not timed below)  {r['load_s']:.2f} s")
    print(f"  monte plan_eval + run_eval       best {min(m['total_s']):.2f} s  median {statistics.median(m['total_s']):.2f} s"
          f"  -> {m['tasks_per_s_best']:.1f} tasks/s best, {m['tasks_per_s_median']:.1f} median"
          f"  (plan {statistics.median(m['plan_s']) * 1e3:.0f} ms)")
    g = r["monte_breakdown"]
    print(f"    of which generate()            median {statistics.median(g['generate_s']):.2f} s;"
          f" plan + ledger record + grading {g['plan_record_grading_s_median'] * 1e3:.0f} ms"
          f" ({g['share_of_total_median']:.0%} of the call)")
    print(f"  plain generate, one at a time    best {min(p['total_s']):.2f} s  median {statistics.median(p['total_s']):.2f} s"
          f"  -> {p['tasks_per_s_best']:.1f} tasks/s best, {p['tasks_per_s_median']:.1f} median"
          + (f"  (the first {r['plain_tasks']} prompts)" if r["plain_tasks"] < r["tasks"] else ""))
    print(f"  ratio monte/plain                best {ra['best']:.1f}x  median {ra['median']:.1f}x"
          f"  (per round {', '.join(f'{x:.1f}' for x in ra['per_round'])}; target >= {ra['target']:.0f})")
    print(f"  agreement: answers {a['answers_same']}/{a['n']}, grades {a['scores_same']}/{a['n']},"
          f" raw text {a['raw_same']}/{a['n']}; score monte {a['monte_score']:.3f} plain {a['plain_score']:.3f};"
          f" prompt lengths {a['prompt_token_lengths']} tokens;"
          f" monte rounds identical: {a['monte_rounds_identical']}")
    pc = a["padded_check"]
    print(f"  left padding: {pc['raw_same']}/{pc['n']} raw answers the same batched (padded) and one at a time,"
          f" prompts of {pc['prompt_token_lengths'][0]}-{pc['prompt_token_lengths'][1]} tokens")
    for d in a["examples_of_differences"]:
        print(f"    differs: {d['prompt']!r}: monte {d['monte']!r} plain {d['plain']!r}")


if __name__ == "__main__":
    sys.exit(main())
