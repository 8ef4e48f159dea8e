"""``monte quickstart``: the whole loop in a fresh folder, offline, on a laptop CPU.

A git repository, a tiny base model built here, the built-in trainable ``parity`` environment
(content-disjoint dev and test exams plus a curriculum), an SFT dataset made from that
curriculum (``monte dataset add --from-env``), an experiment, a commit (so every run records its
code version), both baselines, an SFT chunk from base, its continuation, a stage
boundary to GRPO, a dev eval of every checkpoint, the final test claim on the checkpoint the
selection rule picks (best paired dev delta), a promote, ``monte status``, and the page of it all
(``report.html``, ``monte report``); whatever monte staged after the setup commit is committed
at the end, so a ``git clone`` of the folder checks out and reads the same status.
"""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from monte.errors import error
from monte.stats.paired import format_interval

ENV = "parity"
DATASET = "parity-sft"
EXPERIMENT = "quickstart"


def preference_rows(curriculum: Path, out: Path) -> Path:
    """A ``--kind preference`` pile from an environment's curriculum (what a dpo recipe trains
    on): the prompt, the right answer as ``chosen`` and a wrong one as ``rejected`` (the next
    distinct answer of the curriculum, in sorted order: for parity, the other word). The answer
    follows the prompt's ``=`` after a space, as in the SFT rows the quickstart makes."""
    with open(curriculum, encoding="utf-8") as f:
        items = [json.loads(line) for line in f if line.strip()]
    answers = sorted({str(it["answer"]) for it in items})
    if len(answers) < 2:
        raise error("E_BAD_INPUT", f"{curriculum} has one answer for every item, so no wrong one to reject",
                    "build the pairs from a curriculum with more than one answer")
    wrong = {a: answers[(k + 1) % len(answers)] for k, a in enumerate(answers)}
    with open(out, "w", encoding="utf-8") as f:
        for it in items:
            a = str(it["answer"])
            f.write(json.dumps({"prompt": it["prompt"], "chosen": " " + a, "rejected": " " + wrong[a]}) + "\n")
    return out


def commit(folder: Path, message: str) -> None:
    """Commit what is staged on ``main``, as the user would (their own git identity; a machine
    with none gets monte's, for this throwaway repository only)."""
    def configured(key: str) -> bool:
        return subprocess.run(["git", "-C", str(folder), "config", key], capture_output=True).returncode == 0

    who = [] if configured("user.name") and configured("user.email") else [
        "-c", "user.name=monte quickstart", "-c", "user.email=quickstart@monte.invalid"]
    subprocess.run(["git", "-C", str(folder), *who, "commit", "-q", "--no-verify", "-m", message], check=True,
                   capture_output=True)


def run(folder: Path, *, say: Callable[[str], None] = print,
        progress: Callable[[str], Callable[[int, int], None] | None] = lambda label: None) -> dict[str, Any]:
    from monte import api
    from monte.workspace import open_workspace

    folder = folder.resolve()
    if folder.exists() and any(folder.iterdir()):
        raise error("E_REFUSED", f"{folder} exists and is not empty", "pass a new folder: monte quickstart DIR")
    folder.mkdir(parents=True, exist_ok=True)
    t0 = time.monotonic()
    steps: list[dict[str, Any]] = []

    def step(cmd: str) -> None:
        say(f"\n[{time.monotonic() - t0:6.1f}s] $ {cmd}")
        steps.append({"command": cmd, "at": round(time.monotonic() - t0, 1)})

    step("git init && monte init")
    subprocess.run(["git", "init", "-q", "-b", "main", str(folder)], check=True)
    api.init(folder)
    ws = open_workspace(folder)
    step("monte model init base-model --size tiny --seed 0")
    info = api.model_init(path=folder / "base-model", size="tiny", seed=0)
    say(f"  a {info.parameters:,}-parameter model, built here from a seed (no download)")
    step(f"monte env add --server {ENV} --dev {ENV} --test {ENV}")
    env = api.env_add(server=ENV, dev=(ENV,), test=(ENV,), ws=ws).environment
    assert env is not None
    say(f"  froze {env.name}: {env.files} files, dev/test/curriculum disjoint by content")
    step(f"monte dataset add {DATASET} --from-env {ENV} --kind sft")
    ds = api.dataset_add(name=DATASET, from_env=ENV, kind="sft", ws=ws).dataset
    assert ds is not None
    say(f"  froze {ds.rows} demonstrations from {ENV}'s curriculum, sha256 {ds.sha256[:12]}")
    step(f"monte experiment init {EXPERIMENT} --eval {ENV} --model base-model")
    api.experiment_init(name=EXPERIMENT, eval_env=ENV, model=str(folder / "base-model"), ws=ws)
    step("git commit -m 'monte setup'            # the code version every run records (its git_sha)")
    commit(folder, "monte setup: config, recipes, DVC pointers and CI workflow")

    def evaluate(cmd: str, **kw: Any) -> dict[str, Any]:
        step(cmd)
        res = api.evaluate(ws=ws, experiment=EXPERIMENT, on_progress=progress("eval"), **kw)
        row: dict[str, Any] = res.runs[0]
        d = row.get("delta")
        say(f"  {row['exam']}/{row['split']}@{row['step']}: score {row['score']:.3f} (n={row['n']})"
            + (f", delta {d['delta']:+.3f} {format_interval(d['lower'], d['upper'], 3)} {d.get('verdict') or ''}"
               if d else ""))
        return row

    def train(cmd: str, **kw: Any) -> str:
        step(cmd)
        res = api.train(ws=ws, experiment=EXPERIMENT, on_progress=progress("train"), **kw)
        ref = f"{res.run['run']}@{res.run['checkpoints'][-1]['step']}"
        say(f"  checkpoint {ref}")
        return ref

    evaluate("monte eval --yes                      # dev@0, the baseline")
    evaluate("monte eval --split test --yes         # test@0: the first of two test reads", split="test")
    a = train(f"monte train --recipe sft-tiny --source {DATASET} --from-base --yes",
              recipe="sft-tiny", source=DATASET, from_base=True)
    evaluate(f"monte eval --checkpoint {a} --yes", checkpoint=a)
    b = train(f"monte train --recipe sft-tiny --source {DATASET} --parent {a} --yes   # continue",
              recipe="sft-tiny", source=DATASET, parent=a)
    evaluate(f"monte eval --checkpoint {b} --yes", checkpoint=b)
    c = train(f"monte train --recipe grpo-tiny --source {ENV} --parent {b} --yes      # stage boundary",
              recipe="grpo-tiny", source=ENV, parent=b)
    evaluate(f"monte eval --checkpoint {c} --yes", checkpoint=c)
    claim = evaluate("monte eval --split test --yes         # the final claim: best paired dev delta",
                     split="test")
    target = f"{claim['plan']['target']['run']}@{claim['plan']['target']['step']}"
    step(f"monte promote {target} --dest promoted --confirm {target}")
    promoted = api.promote(ref=target, dest=folder / "promoted", confirm=target, ws=ws)
    say(f"  {promoted.files} files (the model card included), {promoted.bytes:,} bytes "
        f"({promoted.disk / 2**20:.1f} MiB on disk), every sha256 verified")
    if subprocess.run(["git", "-C", str(folder), "diff", "--cached", "--quiet"]).returncode:
        step("git commit -m 'the quickstart'        # main: what monte staged since, so a clone checks out")
        commit(folder, "the quickstart: what monte staged after the setup")
    step("monte report --out report.html          # the page to look at: open it in a browser")
    page = api.report(out=folder / "report.html", experiment=EXPERIMENT, ws=ws)
    say(f"  wrote {page.path} ({page.bytes / 1e3:.0f} kB, one file that requests nothing)")
    elapsed = time.monotonic() - t0
    d = claim.get("delta") or {}
    return {"folder": str(folder), "seconds": round(elapsed, 1), "claim": target,
            "test_delta": d.get("delta"), "test_lower": d.get("lower"), "test_upper": d.get("upper"),
            "verdict": d.get("verdict"), "test_score": claim["score"], "steps": steps, "report": page.path,
            "status": api.status(experiment=EXPERIMENT, ws=ws)}
