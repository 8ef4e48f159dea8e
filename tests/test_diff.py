"""``monte diff RUN_A RUN_B`` and a chunk's curve on the command line, on the tiny model (issue 49:
an agent joined files by hand for a per-item view, and parsed ``monte logs`` to see any learning,
because ``tasks.jsonl`` holds no prompt or expected answer and ``monte train`` printed no loss)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.support.agentloop import parity_chunk
from tests.support.kept import Kept


@pytest.fixture
def trained(repo: Path, tiny_models: dict[int, Path], monte: Any, tmp_path: Path, kept: Kept) -> dict[str, Any]:
    """Both baselines, one chunk from base (its human output kept), its dev eval. Built once per
    worker (``kept``): both tests below start here, and the chunk is most of their time."""
    def build() -> None:
        state = parity_chunk(repo, tmp_path, kept, monte, tiny_models[0])
        state["dev1"] = monte("eval", "--checkpoint", f"{state['train']}@50", "--yes", "--json").json()["runs"][0]
        (tmp_path / "trained.json").write_text(json.dumps(state))

    kept.restore("diff-trained", repo, tmp_path, build)
    state: dict[str, Any] = json.loads((tmp_path / "trained.json").read_text())
    return state


def test_diff_lists_each_flip_with_its_prompt_expected_and_both_outputs(trained: dict[str, Any], monte: Any,
                                                                        repo: Path) -> None:
    r = monte("diff", trained["dev0"], trained["dev1"]["run"], "--json")
    assert r.code == 0, r.err
    d = r.json()
    delta = trained["dev1"]["delta"]
    assert d["counts"]["fixed"] == delta["fixed"] and d["counts"]["broken"] == delta["broken"]
    assert len(d["items"]) == delta["fixed"] + delta["broken"] > 0
    dev = {json.loads(line)["id"]: json.loads(line)
           for line in (repo / ".monte" / "environments" / "parity" / "exams" / "parity" / "dev.jsonl")
           .read_text().splitlines()}
    for it in d["items"]:  # the frozen item's own prompt and answer, joined by id
        assert (it["prompt"], it["expected"]) == (dev[it["id"]]["prompt"], dev[it["id"]]["answer"])
        assert it["flip"] == ("fixed" if it["b"]["score"] == 1.0 else "broken")
    human = monte("diff", trained["dev0"], trained["dev1"]["run"], "--only", "fixed")
    assert human.code == 0 and human.out.splitlines()[0].startswith("parity/dev")
    assert sum(line.startswith("fixed") for line in human.out.splitlines()) == delta["fixed"]
    grouped = monte("diff", trained["dev0"], trained["dev1"]["run"], "--group-by", "number", "--only", "all",
                    "--json").json()
    assert sum(g["fixed"] + g["broken"] + g["same"] for g in grouped["groups"]) == 200
    assert all(isinstance(it["group"], int) for it in grouped["items"])


def test_diff_refuses_what_it_cannot_show_and_the_chunk_said_its_curve(trained: dict[str, Any], monte: Any) -> None:
    """(One chunk serves these checks: a chunk is most of a test's time on CPU.)"""
    for a, b, code, status in [
        (trained["test0"], trained["dev1"]["run"], "E_SEALED", 3),  # a sealed read never leaves the seal
        (trained["dev0"], trained["train"], "E_USAGE", 2),  # a train run holds no items
        ("nosuchrun", trained["dev0"], "E_NOT_FOUND", 4),
    ]:
        r = monte("diff", a, b, "--json")
        assert r.code == status and r.json()["error"]["code"] == code, (a, b, r.out)
    sealed = monte("diff", trained["test0"], trained["dev1"]["run"])
    assert sealed.out == "" and "E_SEALED" in sealed.err
    line = trained["train_out"][1]  # the line after the run's: its loss curve
    assert line.strip().startswith("loss ") and "samples 6400" in line and "epochs" in line
    text = monte("status", "--brief")
    assert text.code == 0 and f"best dev parity: {trained['train']}@50" in text.out
    assert "1 of 2 reads spent, 1 left" in text.out
    doc = monte("status", "--brief", "--json").json()
    assert doc["test"]["parity"]["left"] == 1 and doc["best"]["parity"]["eval"] == trained["dev1"]["run"]
