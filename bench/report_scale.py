"""``monte report`` at scale: the page's size and the time to write it, for an experiment of
``--runs`` runs whose evals each grade the 200 tasks of the frozen parity exam.

The ledger is monte's own, built fast: the real frozen ``parity`` environment and experiment
(``api.env_add``, ``api.experiment_init``), the cohort's base commit and one lineage commit per
training run (``ensure_base``, ``record_checkpoint``), and every record through monte's
``record_change`` streamed into one ``git fast-import`` (``bulk_ledger.BulkLedger``). Each eval
leaves a ``tasks.jsonl`` of the 200 tasks (id, score, answer) and, off the base, its paired delta
against the cohort's dev baseline by ``monte.stats.paired`` (as ``monte eval`` records it).
A training run every ``--evals-per-train`` evals: mostly continuations, every 5th a branch off an
older checkpoint, every 7th a stage boundary (``grpo:parity``); test@0 first, the final claim on
the best dev checkpoint last. Scores come from a latent difficulty per task and a skill per
checkpoint (with noise), answers from a few phrasings per task, the expected one when right, so
that answers repeat across evals as a model's do.

The figures: bytes of the page (against a 2 MB goal), seconds of ``monte report`` in-process
(``api.report``, the best of ``--repeat``), and, as the baseline measured in the same run, the
seconds of ``monte status --json``'s document (``api.status``) on the same ledger: the page is a
view of it.

    .venv/bin/python bench/report_scale.py --runs 1000 --json-out /tmp/report-1000.json
    .venv/bin/python bench/report_scale.py --quick --json-out /tmp/report-quick.json
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[0]))
sys.path.insert(0, str(HERE))

EXPERIMENT = "exp"
GOAL_BYTES = 2_000_000


def build(repo: Path, runs: int, *, seed: int = 0, evals_per_train: int = 4, unread: bool = False) -> dict[str, Any]:
    """A monte repository at ``repo`` (new) with one experiment of ``runs`` runs (see the module's
    docstring). ``unread``: one more training run whose parent run is not in the ledger (a
    truncated path). Returns what was built (checkpoints, evals, the claim)."""
    from bulk_ledger import BulkLedger, new_repo
    from status_10k import run_id

    from monte import api
    from monte.ledger.experiment import Ledger
    from monte.ledger.lineage import ensure_base, record_checkpoint
    from monte.ledger.records import RunRow
    from monte.ledger.refs import ledger_ref
    from monte.ledger.store import Store
    from monte.stats.paired import paired_delta, verdict
    from monte.workspace import open_workspace

    new_repo(repo)
    ws = open_workspace(repo)
    api.env_add(server="parity", dev=("parity",), test=("parity",), ws=ws)
    api.experiment_init(name=EXPERIMENT, eval_env="parity", ws=ws)
    store = Store(repo)
    m = Ledger(store, EXPERIMENT).measurement()
    items = {s: [json.loads(x) for x in open(ws.data_root / m.exams["parity"].splits[s].path)] for s in ("dev", "test")}
    cohort, base_commit = ensure_base(store, EXPERIMENT, "repo:base-model", {"config.json": "0" * 64})
    rng = random.Random(seed)
    ids_rng = random.Random(f"report ids {seed}")
    hard = {s: [rng.random() for _ in items[s]] for s in items}
    phrasing = {s: [[f"{x['answer']}", f"it is {x['answer']}", f"{x['prompt']} {x['answer']}"] for x in items[s]]
                for s in items}
    wrong = {s: [["=" * rng.randint(3, 24), f"{'odd' if x['answer'] == 'even' else 'even'}",
                  f"{x['prompt']} {rng.randint(0, 99)}"] for x in items[s]] for s in items}
    clock = datetime(2026, 1, 5, 9, 0, tzinfo=UTC)
    ledger = BulkLedger(store, ledger_ref(EXPERIMENT))
    count = {"runs": 0, "evals": 0, "checkpoints": 0}
    baseline: dict[str, tuple[str, list[float]]] = {}  # split -> (the base eval, its scores)
    skill: dict[str, float] = {}  # checkpoint ref -> its skill
    dev_delta: dict[str, float] = {}

    def now() -> str:
        nonlocal clock
        clock += timedelta(seconds=ids_rng.randint(5, 300))
        return clock.strftime("%Y-%m-%dT%H:%M:%SZ")

    def append(row: RunRow, event: str, files: dict[str, bytes] | None = None) -> RunRow:
        made: RunRow = ledger.append_row(lambda s, q: row.model_copy(), event=event,
                                         summary=lambda r: f"{r.kind} {r.run} {event}",
                                         files=(lambda r: files) if files else None)
        return made

    def evaluate(split: str, target: dict[str, Any], level: float) -> RunRow:
        count["runs"] += 1
        count["evals"] += 1
        role = ("baseline" if target["kind"] == "base" else "claim") if split == "test" else None
        row = append(RunRow(run=run_id(ids_rng), experiment=EXPERIMENT, kind="eval", status="started",
                            created_at=now(), cohort=cohort, model="repo:base-model", exam="parity", split=split,
                            step=int(target.get("step", 0)), role=role, host="bench",
                            plan={"target": target, "benchmark": "parity", "base_model": "repo:base-model"}),
                     "started")
        tasks = []
        for i, x in enumerate(items[split]):
            right = (hard[split][i] < level) != (rng.random() < 0.06)
            answer = rng.choice(phrasing[split][i] if right else wrong[split][i])
            tasks.append({"id": x["id"], "score": float(right), "answer": answer})
        scores = [t["score"] for t in tasks]
        delta = None
        if target["kind"] == "base":
            baseline[split] = (row.run, scores)
        else:
            d = paired_delta(baseline[split][1], scores)
            delta = {"baseline": baseline[split][0], "delta": d.delta, "lower": d.lower, "upper": d.upper, "n": d.n, "fixed": d.fixed,
                     "broken": d.broken, "paired": d.paired, "method": d.method, "verdict": verdict(d)}
        body = "".join(json.dumps(t, separators=(",", ":")) + "\n" for t in tasks).encode()
        return append(row.model_copy(update={"status": "succeeded", "n": len(tasks), "score": sum(scores) / len(scores),
                                             "delta": delta}), "finished", {"tasks.jsonl": body})

    def train(parent: dict[str, Any] | None, parent_commit: Any, boundary: bool,
              fake_parent: dict[str, Any] | None = None) -> tuple[str, int, Any]:
        count["runs"] += 1
        count["checkpoints"] += 1
        run = run_id(ids_rng)
        named = fake_parent or parent
        start = named["step"] if named else 0
        algo, source, recipe = ("grpo", "parity", "grpo-tiny") if boundary else ("sft", "parity-sft", "sft-tiny")
        plan = {"recipe": {"name": recipe, "sha256": f"{ids_rng.getrandbits(256):064x}", "algorithm": algo},
                "source": source, "parent": named, "boundary": boundary, "start_step": start, "steps": 50,
                "base_model": "repo:base-model"}
        row = append(RunRow(run=run, experiment=EXPERIMENT, kind="train", status="started", created_at=now(),
                            cohort=cohort, model="repo:base-model", step=start, plan=plan, host="bench"), "started")
        info = {"experiment": EXPERIMENT, "run": run, "step": start + 50, "cohort": cohort, "recipe": plan["recipe"],
                "source": source, "boundary": boundary, "parent": named, "weights": "w", "files": {}}
        commit = record_checkpoint(store, EXPERIMENT, info, parent_commit)
        row = append(row.model_copy(update={"status": "running", "step": start + 50,
                                            "checkpoints": [{"step": start + 50, "commit": commit.decode()}]}),
                     "checkpoint")
        append(row.model_copy(update={"status": "succeeded"}), "finished")
        return run, start + 50, commit

    try:
        evaluate("dev", {"kind": "base", "step": 0}, 0.1)
        evaluate("test", {"kind": "base", "step": 0}, 0.1)
        cks: list[tuple[str, int, Any]] = []  # (run, step, commit) in order
        n_train = 0
        while count["runs"] < runs - 1:
            if not cks or n_train % 5 != 4:
                parent = cks[-1] if cks else None
            else:
                parent = cks[rng.randrange(len(cks))]
            boundary = n_train % 7 == 6
            run, step, commit = train({"run": parent[0], "step": parent[1]} if parent else None,
                                      parent[2] if parent else base_commit, boundary)
            n_train += 1
            cks.append((run, step, commit))
            up = skill.get(f"{parent[0]}@{parent[1]}", 0.1) if parent else 0.1
            skill[f"{run}@{step}"] = min(0.95, up + rng.uniform(-0.03, 0.08))
            for _ in range(evals_per_train):
                if count["runs"] >= runs - 1:
                    break
                r = evaluate("dev", {"kind": "checkpoint", "run": run, "step": step}, skill[f"{run}@{step}"])
                dev_delta.setdefault(f"{run}@{step}", (r.delta or {}).get("delta", 0.0))
        if unread:
            train(None, base_commit, False, fake_parent={"run": "gone0unread0", "step": 50})
        best = max(dev_delta, key=lambda k: (dev_delta[k], int(k.rsplit("@", 1)[1]))) if dev_delta else None
        claim = None
        if best:
            best_run, best_step = best.rsplit("@", 1)
            evaluate("test", {"kind": "checkpoint", "run": best_run, "step": int(best_step)}, skill[best])
            claim = best
    except BaseException:
        ledger.abort()
        raise
    ledger.finish()
    return {**count, "claim": claim}


def measure(repo: Path, out: Path, repeat: int) -> dict[str, Any]:
    from monte import api
    from monte.workspace import open_workspace

    ws = open_workspace(repo)
    api.status(experiment=EXPERIMENT, ws=ws)  # warm: the derived cache, as a second status finds it
    status_s, report_s = [], []
    for _ in range(repeat):
        t0 = time.perf_counter()
        api.status(experiment=EXPERIMENT, ws=ws)
        status_s.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        res = api.report(experiment=EXPERIMENT, out=out, ws=ws)
        report_s.append(time.perf_counter() - t0)
    first = out.read_bytes()
    api.report(experiment=EXPERIMENT, out=out, ws=ws)
    return {"bytes": res.bytes, "goal_bytes": GOAL_BYTES, "under_goal": res.bytes < GOAL_BYTES,
            "report_s": min(report_s), "status_s": min(status_s), "ratio": min(report_s) / max(min(status_s), 1e-9),
            "identical_again": out.read_bytes() == first, "page_runs": res.runs, "page_evals": res.evals,
            "page_checkpoints": res.checkpoints}


#: in the page at 1400 x 1000 px: each section's top (px down the page) and, per runs-table column,
#: the rows whose text breaks over more than one line
LAYOUT_JS = """() => {
  const top = (id) => Math.round(document.getElementById(id).getBoundingClientRect().top + scrollY);
  const cols = [...document.querySelectorAll('table.runs th')].map((th) => th.textContent);
  const wrapped = {};
  for (const tr of document.querySelectorAll('#runrows tr')) {
    tr.querySelectorAll('td').forEach((td, i) => {
      const r = document.createRange(); r.selectNodeContents(td);
      if (new Set([...r.getClientRects()].map((x) => Math.round(x.top))).size > 1) wrapped[cols[i]] = (wrapped[cols[i]] || 0) + 1;
    });
  }
  return {budget_px: top('budget'), runs_px: top('runs'), page_px: document.body.scrollHeight, wrapped};
}"""


def layout(page: Path) -> dict[str, Any] | None:
    """Where the test reads sit and which runs-table columns wrap, in headless Chromium at
    1400 x 1000 px; None where Chromium or playwright is not installed (`make test-deps`)."""
    import os
    import shutil

    chromium = os.environ.get("MONTE_CHROMIUM", "/usr/bin/chromium")
    chromium = chromium if os.access(chromium, os.X_OK) else (shutil.which("chromium") or "")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        return None
    if not chromium:
        return None
    import tempfile

    flags = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
             "--disable-background-networking", "--disable-component-update", "--disable-sync"]
    # Chromium's singleton socket lives under $TMPDIR and a Unix socket path holds at most 107
    # bytes: a deep TMPDIR (a test's folder) makes the browser exit at start, so /tmp it is
    short = "/tmp" if os.path.isdir("/tmp") else None
    with tempfile.TemporaryDirectory(prefix="monte-chromium-", dir=short) as profile, sync_playwright() as p:
        ctx = p.chromium.launch_persistent_context(profile, executable_path=chromium, headless=True, args=flags,
                                                   viewport={"width": 1400, "height": 1000},
                                                   env={**os.environ, **({"TMPDIR": short} if short else {})})
        try:
            tab = ctx.pages[0] if ctx.pages else ctx.new_page()
            tab.goto(page.resolve().as_uri(), wait_until="load")
            tab.wait_for_function("document.body.dataset.runs === 'shown'")
            out: dict[str, Any] = tab.evaluate(LAYOUT_JS)
        finally:
            ctx.close()
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=1000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--quick", action="store_true", help="40 runs, one round")
    ap.add_argument("--json-out", type=Path)
    ap.add_argument("--keep", type=Path, help="build the repository here (a new folder) and keep it")
    args = ap.parse_args()
    runs, repeat = (40, 1) if args.quick else (args.runs, args.repeat)
    with tempfile.TemporaryDirectory(prefix="monte-report-") as tmp:
        repo = args.keep or Path(tmp) / "repo"
        t0 = time.perf_counter()
        built = build(repo, runs, seed=args.seed)
        build_s = time.perf_counter() - t0
        figures = measure(repo, Path(tmp) / "report.html", repeat)
        figures["layout"] = layout(Path(tmp) / "report.html")
    out = {"runs": runs, "tasks": 200, "seed": args.seed, "repeat": repeat, "build_s": build_s, **built, **figures}
    print(f"{runs} runs ({built['evals']} evals x 200 tasks, {built['checkpoints']} checkpoints): page "
          f"{figures['bytes'] / 1e6:.2f} MB (goal < 2 MB), monte report {figures['report_s']:.2f} s, "
          f"monte status {figures['status_s']:.2f} s ({figures['ratio']:.1f}x), identical again: "
          f"{figures['identical_again']}; built in {build_s:.0f} s")
    seen = figures["layout"]
    if seen is None:
        print("layout: not measured (no Chromium or playwright)")
    else:
        print(f"layout at 1400 px: test reads {seen['budget_px']} px down a page of {seen['page_px']} px; "
              f"runs-table cells on more than one line: {seen['wrapped'] or 'none'}")
    if args.json_out:
        args.json_out.write_text(json.dumps(out, indent=2, sort_keys=True) + "\n")


if __name__ == "__main__":
    main()
