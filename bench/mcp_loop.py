"""A scripted agent loop through ``monte mcp`` only, against the same moves through the CLI.

One repository is built (a tiny base model, the trainable parity environment, an SFT dataset
from its curriculum, both baselines), then copied twice. On one copy a scripted agent drives the
loop through the MCP SDK's own stdio client, one ``monte mcp --allow-test`` process for all of
it: MOVES moves, each a chunk with a seeded-random recipe (``sft-tiny`` on the dataset or
``grpo-tiny`` on the environment: the recipe picks the source) and parent (the base or any
checkpoint so far), its dev eval, ``status`` and ``flips``; then a nomination of the best
checkpoint and the claim, then a third read (refused). On the other copy the same moves run as
``monte`` commands, a process each, as a shell-driven agent runs them. Checked on the MCP side:
the test budget is never exceeded (``status`` after every move), no result holds an item of the
frozen test split (ids and prompts), every result is under 8 KB.

    .venv/bin/python bench/mcp_loop.py [--moves 50] [--steps 5] [--seed 0] [--json-out PATH]
    .venv/bin/python bench/mcp_loop.py --quick     # 2 moves of 2-step chunks: a smoke run

A smoke run walks both kinds of move through MCP (from the base, from a checkpoint) and replays only
the first through the CLI: the CLI side is the baseline of a ratio a smoke run does not measure,
and each of its commands pays a fresh interpreter's imports.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(HERE))
PY = sys.executable
LIMIT = 8192
RECIPES = {"sft-tiny": "parity-sft", "grpo-tiny": "parity"}


def setup(root: Path, steps: int, constant: bool = False) -> Path:
    """The repository both sides start from: baselines taken, nothing trained. ``constant``
    (``--quick``): the baselines answer "0" to every item rather than generate; a smoke run needs
    them to exist (a chunk needs both), and its scores are no figure."""
    from monte import api
    from monte.models import generate as gen
    from monte.workspace import open_workspace

    repo = root / "repo"
    repo.mkdir()
    subprocess.run(["git", "init", "-q", "-b", "main", str(repo)], check=True)
    api.init(repo)
    ws = open_workspace(repo)
    api.model_init(path=repo / "base-model", size="tiny", seed=0)
    api.env_add(server="parity", dev=("parity",), test=("parity",), ws=ws)
    rows = root / "parity-sft.jsonl"
    with open(ws.env_dir("parity") / "curriculum.jsonl") as src, open(rows, "w") as out:
        for line in src:
            item = json.loads(line)
            out.write(json.dumps({"input": item["prompt"], "output": " " + item["answer"]}) + "\n")
    api.dataset_add(name="parity-sft", from_file=rows, kind="sft", ws=ws)
    api.experiment_init(name="exp", eval_env="parity", model=str(repo / "base-model"), steps_per_chunk=steps, ws=ws)
    real = gen.generate
    if constant:
        gen.generate = lambda model, tok, prompts, **kw: ["0" for _ in prompts]
    try:
        api.evaluate(split="dev", ws=ws)
        api.evaluate(split="test", ws=ws)
    finally:
        gen.generate = real
    return repo


def script(moves: int, seed: int) -> list[tuple[str, int | None]]:
    """Each move's recipe and parent: None (from base) or the index of an earlier move's chunk."""
    rng = random.Random(seed)
    out: list[tuple[str, int | None]] = []
    for i in range(moves):
        parent = None if i == 0 or rng.random() < 0.2 else rng.randrange(i)
        out.append((rng.choice(sorted(RECIPES)), parent))
    return out


def sealed(repo: Path) -> set[str]:
    out: set[str] = set()
    for path in (repo / ".monte" / "environments").rglob("test.jsonl"):
        for line in path.read_text().splitlines():
            item = json.loads(line)
            out |= {str(item["id"]), str(item["prompt"])}
    return out


async def mcp_side(repo: Path, plan: list[tuple[str, int | None]]) -> dict[str, Any]:
    from mcp.client.session import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    params = StdioServerParameters(command=PY, args=["-c", "from monte.cli.main import main; main()", "mcp",
                                                     "--allow-test"], cwd=str(repo), env=dict(os.environ))
    texts: list[str] = []
    sizes: list[int] = []
    reads_seen: list[int] = []
    refused: list[str] = []
    checkpoints: list[str | None] = []

    async with stdio_client(params) as (read, write), ClientSession(read, write) as s:
        await s.initialize()

        async def call(name: str, /, **args: Any) -> tuple[bool, dict[str, Any]]:
            res = await s.call_tool(name, args)
            text = "".join(getattr(c, "text", "") for c in res.content)
            texts.append(text)
            sizes.append(len(res.model_dump_json(by_alias=True, exclude_none=True).encode()))
            return bool(res.is_error), json.loads(text)

        for recipe, parent in plan:
            where = ({"from_base": True} if parent is None or checkpoints[parent] is None
                     else {"parent": checkpoints[parent]})
            err, doc = await call("train", recipe=recipe, source=RECIPES[recipe], **where)
            if err:
                refused.append(doc["error"]["code"])
                checkpoints.append(None)
                continue
            ck = doc["checkpoints"][-1]
            checkpoints.append(ck)
            err, ev = await call("eval", checkpoint=ck)
            if not err and ev["runs"][0].get("delta"):
                await call("flips", run=ev["runs"][0]["run"], limit=10)
            _, st = await call("status")
            reads_seen.append(max((t["reads"] for t in st["test"].values()), default=0))
        _, st = await call("status")
        best = (st["best"] or {}).get("parity")
        if best:
            await call("nominate", checkpoint=best["checkpoint"])
        err, claim = await call("claim")
        third, again = await call("claim")
        _, st = await call("status")
        reads_seen.append(max(t["reads"] for t in st["test"].values()))
    return {"texts": texts, "sizes": sizes, "reads": reads_seen, "refused": refused, "claim_error": err,
            "claim": claim, "third_refused": third and again["error"]["code"] == "E_SEALED"}


def cli(repo: Path, *args: str) -> tuple[int, Any]:
    p = subprocess.run([PY, "-c", "from monte.cli.main import main; main()", *args, "--json"], cwd=repo,
                       capture_output=True, text=True)
    try:
        return p.returncode, json.loads(p.stdout)
    except ValueError:
        raise SystemExit(f"monte {' '.join(args)}: {p.stdout[-1000:]}\n{p.stderr[-2000:]}") from None


def cli_side(repo: Path, plan: list[tuple[str, int | None]]) -> dict[str, Any]:
    checkpoints: list[str | None] = []
    refused: list[str] = []
    for recipe, parent in plan:
        where = (["--from-base"] if parent is None or checkpoints[parent] is None
                 else ["--parent", str(checkpoints[parent])])
        code, doc = cli(repo, "train", "--recipe", recipe, "--source", RECIPES[recipe], *where, "--yes")
        if code:
            refused.append(doc["error"]["code"])
            checkpoints.append(None)
            continue
        row = doc["run"]
        ck = f"{row['run']}@{row['checkpoints'][-1]['step']}"
        checkpoints.append(ck)
        code, ev = cli(repo, "eval", "--checkpoint", ck, "--yes")
        if not code and ev["runs"][0].get("delta"):
            cli(repo, "diff", ev["runs"][0]["delta"]["baseline"], ev["runs"][0]["run"])
        cli(repo, "status", "--brief")
    _, st = cli(repo, "status", "--brief")
    best = (st["best"] or {}).get("parity")
    if best:
        cli(repo, "nominate", best["checkpoint"])
    code, _ = cli(repo, "eval", "--split", "test", "--yes")
    third, _ = cli(repo, "eval", "--split", "test", "--yes")
    cli(repo, "status", "--brief")
    return {"refused": refused, "claim_code": code, "third_code": third}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--moves", type=int, default=50)
    ap.add_argument("--steps", type=int, default=5, help="steps per chunk")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--quick", action="store_true",
                    help="smoke run: 2 moves of 2-step chunks, the first of them through the CLI")
    ap.add_argument("--json-out")
    a = ap.parse_args()
    if a.quick:
        a.moves, a.steps = 2, 2
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    import anyio

    plan = script(a.moves, a.seed)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        base = setup(root, a.steps, constant=a.quick)
        one, two = root / "mcp", root / "cli"
        shutil.copytree(base, one, symlinks=True)
        shutil.copytree(base, two, symlinks=True)
        secret = sealed(one)
        t = time.perf_counter()
        m = anyio.run(mcp_side, one, plan)
        mcp_s = time.perf_counter() - t
        t = time.perf_counter()
        cli_plan = plan[:1] if a.quick else plan
        c = cli_side(two, cli_plan)
        cli_s = time.perf_counter() - t
    leaked = sorted({s for text in m["texts"] for s in secret if s in text})
    figures = {
        "moves": a.moves, "cli_moves": len(cli_plan), "steps_per_chunk": a.steps, "seed": a.seed, "tool_calls": len(m["sizes"]),
        "mcp_seconds": round(mcp_s, 2), "cli_seconds": round(cli_s, 2), "mcp_over_cli": round(mcp_s / cli_s, 3),
        "largest_result_bytes": max(m["sizes"]), "all_under_8kb": max(m["sizes"]) < LIMIT,
        "max_test_reads": max(m["reads"]), "budget_kept": max(m["reads"]) <= 2,
        "sealed_items_returned": len(leaked), "claim_ok": not m["claim_error"], "third_read_refused":
            m["third_refused"], "refused_moves": {"mcp": m["refused"], "cli": c["refused"]},
        "cli_claim_exit": c["claim_code"], "cli_third_exit": c["third_code"],
    }
    print(json.dumps(figures, indent=1))
    if a.json_out:
        Path(a.json_out).write_text(json.dumps(figures, indent=1) + "\n")
    bad = [k for k in ("all_under_8kb", "budget_kept", "claim_ok", "third_read_refused") if not figures[k]]
    if bad or leaked or m["refused"][:len(c["refused"])] != c["refused"]:
        raise SystemExit(f"failed: {bad} leaked={leaked[:3]} refusals mcp={m['refused']} cli={c['refused']}")


if __name__ == "__main__":
    main()
