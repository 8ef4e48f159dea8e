"""Each tool's happy path on the tiny model, through the MCP SDK's own client against the real
``monte mcp`` process: baselines, a chunk (with its loss curve and progress), its dev eval, the
flips and a diff paged to the end, the reads, a nomination, the final claim and a third read
refused. Afterwards, every result is checked: under 8 KB, and holding no item of the frozen
test split (its ids and prompts, read from the data root)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest

from tests.support.agentloop import parity_experiment
from tests.support.mcpclient import LIMIT, Reply, Session, session


@pytest.fixture
def parity_exp(repo: Path, tiny_models: dict[int, Path]) -> Path:
    parity_experiment(repo, tiny_models[0])
    return repo


def sealed_strings(repo: Path) -> set[str]:
    """Every test item's id and prompt, from the frozen split on the data root."""
    out: set[str] = set()
    for path in (repo / ".monte" / "environments").rglob("test.jsonl"):
        for line in path.read_text().splitlines():
            item = json.loads(line)
            out |= {str(item["id"]), str(item["prompt"])}
    assert len(out) >= 400  # 200 items, an id and a prompt each
    return out


def ok(r: Reply) -> dict[str, Any]:
    assert not r.error, r.doc
    return r.doc


async def every_page(s: Session, tool: str, key: str, **args: Any) -> list[Any]:
    rows: list[Any] = []
    cursor = None
    while True:
        doc = ok(await s.call(tool, **args, **({"cursor": cursor} if cursor else {})))
        rows += doc[key]
        cursor = doc["next_cursor"]
        if cursor is None:
            assert len(rows) == doc["total"]
            return rows


def test_the_loop_through_the_door_alone(parity_exp: Path, tmp_path: Path) -> None:
    repo = parity_exp
    replies: list[Reply] = []

    async def body() -> dict[str, Any]:
        got: dict[str, Any] = {}
        async with session(repo, "--allow-test") as s:
            async def call(name: str, /, **args: Any) -> Reply:
                r = await s.call(name, **args)
                replies.append(r)
                return r

            got["dev0"] = ok(await call("eval"))
            got["dev0_progress"] = replies[-1].progress
            got["test0"] = ok(await call("test_baseline"))
            got["plan_train"] = ok(await call("plan_train", recipe="sft-tiny", source="parity-sft", from_base=True))
            got["train"] = ok(await call("train", recipe="sft-tiny", source="parity-sft", from_base=True))
            got["train_progress"] = replies[-1].progress
            ck = got["train"]["checkpoints"][-1]
            got["plan_eval"] = ok(await call("plan_eval", checkpoint=ck))
            got["dev1"] = ok(await call("eval", checkpoint=ck))
            run = got["dev1"]["runs"][0]["run"]
            got["flips"] = await every_page(s, "flips", "items", run=run, limit=7)
            got["flips_head"] = ok(await call("flips", run=run, group_by="number", limit=2))
            got["diff"] = await every_page(s, "diff", "items", run_a=got["dev0"]["runs"][0]["run"], run_b=run,
                                           only="all")
            got["show"] = ok(await call("show", run=got["train"]["run"]))
            got["logs"] = ok(await call("logs", run=got["train"]["run"], tail=5))
            got["events"] = await every_page(s, "logs", "events", run=got["train"]["run"])
            got["status"] = ok(await call("status"))
            got["rows"] = await every_page(s, "status", "rows", section="rows", limit=2)
            got["recipes"] = ok(await call("recipes"))
            got["environments"] = ok(await call("environments"))
            rows = tmp_path / "more.jsonl"
            rows.write_text(json.dumps({"input": "p 1 =", "output": " odd"}) + "\n")
            got["dataset_add"] = ok(await call("dataset_add", name="more", from_file=str(rows), kind="sft"))
            got["datasets"] = ok(await call("datasets"))
            got["nominate"] = ok(await call("nominate", checkpoint=ck))
            got["claim"] = ok(await call("claim"))
            got["claim_progress"] = replies[-1].progress
            got["third"] = await call("claim")
            got["test_diff"] = await call("diff", run_a=got["test0"]["runs"][0]["run"], run_b=run)
            got["status_after"] = ok(await call("status"))
            got["texts"] = s.texts
        return got

    got = anyio.run(body)
    # the baselines, and progress reported while they ran
    assert got["dev0"]["runs"][0]["split"] == "dev" and got["dev0"]["runs"][0]["score"] is not None
    assert got["dev0_progress"] and got["dev0_progress"][-1][0] == got["dev0_progress"][-1][1]
    assert got["test0"]["runs"][0]["role"] == "baseline"
    assert any("sft-tiny" in line for line in got["plan_train"]["plan"])
    # the chunk: its checkpoint and its curve, progress per step
    train = got["train"]
    assert train["status"] == "succeeded" and train["checkpoints"] == [f"{train['run']}@50"]
    curve = train["curve"]
    assert curve["last_loss"] < curve["first_loss"] and curve["samples"] > 0 and curve["seconds"] > 0
    assert got["train_progress"][-1] == (50, 50)
    assert got["logs"]["curve"] == {k: v for k, v in curve.items() if not k.startswith("path_")} and len(got["logs"]["events"]) == 5
    assert got["events"][0]["event"] == "started" and got["events"][-1]["event"] == "succeeded"
    # its dev eval, paired; the flips are the delta's counts, item by item
    d = got["dev1"]["runs"][0]["delta"]
    assert d["paired"] and d["delta"] > 0
    flips = got["flips"]
    assert len(flips) == d["fixed"] + d["broken"]
    assert {f["flip"] for f in flips} <= {"fixed", "broken"}
    assert all(f["prompt"].startswith("p ") and f["expected"] in ("odd", "even") for f in flips)
    head = got["flips_head"]
    # grouped by a field with a value per item: 200 groups, the most flipped shown, within the budget
    assert head["groups_total"] == 200 and 0 < len(head["groups"]) < 200
    assert head["items"][0]["group"] is not None
    assert len(got["diff"]) == 200 and sum(f["flip"] == "fixed" for f in got["diff"]) == d["fixed"]
    # the reads
    assert got["show"]["run"] == train["run"] and got["show"]["kind"] == "train"
    brief = got["status"]
    assert brief["best"]["parity"]["checkpoint"] == f"{train['run']}@50"
    assert brief["test"]["parity"] == {"reads": 1, "left": 1, "claim": None}
    assert len(got["rows"]) == 4  # dev@0, test@0, the chunk, its eval
    assert "sft-tiny" in {x["name"] for x in got["recipes"]["recipes"]}
    assert got["environments"]["environments"][0]["name"] == "parity"
    assert got["dataset_add"]["dataset"]["rows"] == 1
    assert {x["name"] for x in got["datasets"]["datasets"]} == {"parity-sft", "more"}
    assert got["nominate"]["checkpoint"] == f"{train['run']}@50"
    # the claim, then the seal holds
    claim = got["claim"]["runs"][0]
    assert claim["role"] == "claim" and claim["split"] == "test" and claim["delta"]["paired"]
    assert got["claim_progress"]
    assert got["third"].error and got["third"].doc["error"]["code"] == "E_SEALED"
    assert got["test_diff"].error and got["test_diff"].doc["error"]["code"] == "E_SEALED"
    assert got["status_after"]["test"]["parity"]["left"] == 0
    # every result fits, and none holds a sealed item
    assert max(r.wire for r in replies) < LIMIT
    sealed = sealed_strings(repo)
    leaked = [s for text in got["texts"] for s in sealed if s in text]
    assert leaked == []


def test_the_sealed_check_would_see_a_leak(parity_exp: Path) -> None:
    """The check above is not vacuous: the test split's own text holds its items."""
    sealed = sealed_strings(parity_exp)
    text = next((parity_exp / ".monte" / "environments").rglob("test.jsonl")).read_text()
    assert any(s in text for s in sealed)


def test_a_cancelled_chunk_is_recorded_abandoned_as_monte_stop_records_it(parity_exp: Path) -> None:
    """The client cancels ``train`` at its first progress report: the run reads ``abandoned``
    with the client's reason, the session answers the next call, and no checkpoint is recorded."""
    from monte import api
    from monte.workspace import open_workspace

    ws = open_workspace(parity_exp)
    api.evaluate(split="dev", ws=ws)
    api.evaluate(split="test", ws=ws)

    async def body() -> tuple[dict[str, Any], Reply]:
        async with session(parity_exp) as s:
            first = anyio.Event()

            async def on_progress(progress: float, total: float | None, message: str | None) -> None:
                first.set()

            async with anyio.create_task_group() as tg:
                async def train() -> None:
                    await s.client.call_tool("train", {"recipe": "sft-tiny", "source": "parity-sft",
                                                       "from_base": True}, progress_callback=on_progress)
                tg.start_soon(train)
                await first.wait()
                tg.cancel_scope.cancel()
            rows = await s.call("status", section="rows")
            trains = [r for r in rows.doc["rows"] if r["kind"] == "train"]
            assert len(trains) == 1
            for _ in range(600):  # the worker ends at its next step; the record stands as stop left it
                shown = await s.call("show", run=trains[0]["run"])
                if shown.doc["status"] != "started" and shown.doc["status"] != "running":
                    break
                await anyio.sleep(0.1)
            return shown.doc, await s.call("recipes")

    row, after = anyio.run(body)
    assert row["status"] == "abandoned" and "cancelled by the MCP client" in (row["error"] or "")
    assert row["checkpoints"] == []
    assert not after.error  # the session went on
