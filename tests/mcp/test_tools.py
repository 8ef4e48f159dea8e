"""``monte mcp``'s tool list and its switches, and a refusal per write tool, through the MCP SDK's
own client against the real server process on a real monte repository (no model: the fast side)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import anyio
import pytest

from tests.support.mcpclient import LIMIT, session

GOLDEN = Path(__file__).with_name("tools.golden.json")
READ = ["status", "show", "logs", "flips", "diff", "recipes", "environments", "datasets", "plan_train", "plan_eval"]
WRITE = ["train", "eval", "nominate", "dataset_add", "recipe_add"]
TEST = ["test_baseline", "claim"]


def listed(repo: Path, *flags: str) -> list[dict[str, Any]]:
    async def body() -> list[dict[str, Any]]:
        async with session(repo, *flags) as s:
            return await s.tools()
    return anyio.run(body)


def test_the_tool_list_is_the_golden_file(repo: Path) -> None:
    """Names, titles, descriptions, input schemas and annotations, as an agent's client lists
    them (``MONTE_WRITE_GOLDEN=1`` writes the file again after a deliberate change)."""
    tools = listed(repo, "--allow-test")
    if os.environ.get("MONTE_WRITE_GOLDEN"):
        GOLDEN.write_text(json.dumps(tools, indent=1, sort_keys=True) + "\n")
    assert tools == json.loads(GOLDEN.read_text())
    assert [t["name"] for t in tools] == READ + WRITE + TEST


def test_each_kind_is_annotated_for_what_it_can_change(repo: Path) -> None:
    hints = {t["name"]: t["annotations"] for t in json.loads(GOLDEN.read_text())}
    for name in READ:
        assert hints[name]["readOnlyHint"] is True and hints[name]["destructiveHint"] is False
    for name in WRITE:  # they append to the record and never rewrite it
        assert hints[name]["readOnlyHint"] is False and hints[name]["destructiveHint"] is False
    for name in TEST:  # a test read is spent for good
        assert hints[name]["readOnlyHint"] is False and hints[name]["destructiveHint"] is True


def test_the_switches_decide_what_is_listed(repo: Path) -> None:
    assert [t["name"] for t in listed(repo)] == READ + WRITE  # the test tools are off by default
    assert [t["name"] for t in listed(repo, "--read-only")] == READ  # no write tool at all


@pytest.mark.parametrize(("flags", "tool", "code"), [
    ((), "claim", "E_SEALED"), ((), "test_baseline", "E_SEALED"),
    (("--read-only",), "train", "E_REFUSED"), (("--read-only",), "recipe_add", "E_REFUSED"),
])
def test_a_tool_switched_off_is_refused_not_run(repo: Path, unchanged: None, flags: tuple[str, ...], tool: str,
                                                code: str) -> None:
    """A client that calls a tool the server did not list gets a structured refusal naming the
    switch, and nothing is written."""
    async def body() -> Any:
        async with session(repo, *flags) as s:
            return await s.call(tool, recipe="sft-tiny", source="x", name="r", yaml="algorithm: sft\n")
    r = anyio.run(body)
    assert r.error and r.doc["error"]["code"] == code
    assert "monte mcp" in r.doc["error"]["fix"]


def test_read_only_and_allow_test_together_are_a_usage_error(repo: Path) -> None:
    from tests.support.helpers import monte_proc

    p = monte_proc("mcp", "--read-only", "--allow-test", cwd=repo)
    assert p.returncode == 2 and "E_USAGE" in p.stderr and p.stdout == ""


def test_outside_a_monte_repository_the_server_refuses_to_start(tmp_path: Path) -> None:
    from tests.support.helpers import monte_proc

    p = monte_proc("mcp", cwd=tmp_path)
    assert p.returncode != 0 and "E_NOT_INITIALIZED" in p.stderr and p.stdout == ""


def test_a_refusal_per_write_tool_is_structured_and_writes_nothing(repo: Path, unchanged: None,
                                                                   tmp_path: Path) -> None:
    """Each write tool refused for a reason it names, with a fix that exists; the session goes on
    after each (the next call is answered), and the repository is as it was."""
    bad = tmp_path / "rows.jsonl"
    bad.write_text("not json\n")
    calls: list[tuple[str, dict[str, Any], str]] = [
        ("train", {"recipe": "no-such-recipe", "source": "parity-sft", "from_base": True}, "E_NOT_FOUND"),
        ("eval", {"checkpoint": "nope@50"}, "E_NOT_FOUND"),
        ("nominate", {"checkpoint": "nope@50"}, "E_NOT_FOUND"),
        ("dataset_add", {"name": "demos", "from_file": str(bad), "kind": "sft"}, "E_BAD_INPUT"),
        ("recipe_add", {"name": "sft-tiny", "yaml": "algorithm: sft\n"}, "E_NAME_TAKEN"),
        ("recipe_add", {"name": "mine", "yaml": "algorithm: sft\nno_such_setting: 1\n"}, "E_BAD_INPUT"),
        ("train", {"recipe": "sft-tiny"}, "E_USAGE"),  # the schema's required source
    ]

    async def body() -> list[Any]:
        async with session(repo) as s:
            out = [await s.call(name, **args) for name, args, _ in calls]
            out.append(await s.call("recipes"))  # the session is still up
            return out
    replies = anyio.run(body)
    for (name, _, code), r in zip(calls, replies, strict=False):
        assert r.error, name
        assert r.doc["error"]["code"] == code, (name, r.doc)
        assert r.doc["error"]["message"] and r.doc["error"]["fix"], name
    assert not replies[-1].error and "sft-tiny" in {x["name"] for x in replies[-1].doc["recipes"]}
    assert not (repo / "recipes" / "mine.yaml").exists()


def test_a_new_recipe_is_written_once_and_then_listed(repo: Path) -> None:
    async def body() -> list[Any]:
        async with session(repo) as s:
            return [await s.call("recipe_add", name="mine", yaml="algorithm: sft\nlearning_rate: 1.0e-3\n"),
                    await s.call("recipes"), await s.call("recipe_add", name="mine", yaml="algorithm: sft\n")]
    added, recipes, again = anyio.run(body)
    assert not added.error and added.doc["algorithm"] == "sft"
    assert (repo / "recipes" / "mine.yaml").read_text() == "algorithm: sft\nlearning_rate: 1.0e-3\n"
    assert "mine" in {x["name"] for x in recipes.doc["recipes"]}
    assert again.error and again.doc["error"]["code"] == "E_NAME_TAKEN"


def test_a_bad_cursor_is_a_structured_usage_error(repo: Path) -> None:
    async def body() -> Any:
        async with session(repo, "--read-only") as s:
            return await s.call("recipes", cursor="garbage")
    r = anyio.run(body)
    assert r.error and r.doc["error"]["code"] == "E_USAGE" and r.wire < LIMIT
