"""Issue 30 case 8: a NeMo Gym exam's constant-answer floor, graded by its own resources server at
freeze time; and ``env add --dry-run``'s row counts, equal to what the freeze then takes.

The expectations are computed here by another path: the frozen rows read from the folder, the
candidates counted here, every constant answer posted to the server's ``/verify`` with urllib
(not monte's client), one request at a time.
"""

from __future__ import annotations

import json
import urllib.request
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from monte.envs.nemo import server as gym_server
from monte.envs.nemo.stack import Stack, server_entry
from tests.envs.nemo.gymhelp import add_server


def _rows(folder: Path, rel: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (folder / rel).read_text().splitlines() if line.strip()]


def _reward(url: str, row: dict[str, Any], text: str) -> float:
    body = json.dumps({**row, "response": gym_server.response_object(text)}).encode()
    req = urllib.request.Request(url + "/verify", data=body, method="POST", headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=120) as resp:
        return float(json.loads(resp.read())["reward"])


def _by_hand(stack: Stack, server: str, rows: list[dict[str, Any]], texts: list[str]) -> dict[str, float]:
    """Each constant text's mean reward over ``rows``, from a server started here, over urllib."""
    e = server_entry(stack.root, server)
    assert e is not None
    with gym_server.GymServer.start(stack, config=e.config, instance=e.instance, server=e.server) as s:
        with ThreadPoolExecutor(4) as pool:
            return {t: sum(pool.map(lambda r, t=t: _reward(s.url, r, t), rows)) / len(rows) for t in texts}


#: the forms a constant answer could be written in, as this test writes them
FORMS = ("{}", "\\boxed{{{}}}", "<answer>{}</answer>")


def _top(rows: list[dict[str, Any]], field: str, k: int = 3) -> list[str]:
    counts = Counter(str(r[field]) for r in rows)
    return sorted(counts, key=lambda a: (-counts[a], a))[:k]


def test_dry_run_counts_are_the_rows_the_freeze_takes(repo: Path, monte, gym: Stack, frozen) -> None:
    """mcqa ships 5 example rows: two exams of them are 2 + 2, not the sizes' 200 + 200."""
    args = ("env", "add", "--dev", "mcqa", "--test", "mcqa", "--as", "two")
    dry = monte(*args, "--dry-run", "--json")
    assert dry.code == 0, dry.out
    plan = dry.json()["plan"]
    assert plan["tasks"] == {"mcqa/test": 2, "mcqa/dev": 2}
    assert plan["sizes"] == {"mcqa/test": 2, "mcqa/dev": 2}  # no 200 left to mislead
    assert not (repo / ".monte" / "environments" / "two").exists()
    text = monte(*args, "--dry-run")
    assert "200" not in text.out and "'mcqa/test': 2" in text.out
    assert not (repo / ".monte" / "environments" / "two").exists()
    real = frozen(*args[2:])  # the freeze itself (kept: the floor test below makes the same one)
    assert real["environment"]["tasks"] == plan["tasks"]
    assert real["plan"]["tasks"] == plan["tasks"]
    folder = Path(real["environment"]["folder"])
    assert folder == repo / ".monte" / "environments" / "two"
    assert len(_rows(folder, "exams/mcqa/test.jsonl")) == 2 and len(_rows(folder, "exams/mcqa/dev.jsonl")) == 2


def test_the_freeze_prints_its_counts_and_floors(repo: Path, monte, gym: Stack) -> None:
    r = monte("env", "add", "--dev", "mcqa", "--test", "mcqa", "--as", "two")
    assert r.code == 0, r.out
    assert "exam mcqa: dev (2 tasks), test (2 tasks)" in r.out
    assert "floor mcqa/dev: " in r.out and "floor mcqa/test: " in r.out and "(the constant \"\\boxed{" in r.out


def test_an_mcqa_freeze_records_the_floor_its_server_grades(repo: Path, gym: Stack, frozen) -> None:
    said = frozen("--dev", "mcqa", "--test", "mcqa", "--as", "two")
    folder = Path(said["environment"]["folder"])
    m = json.loads((folder / "manifest.json").read_text())
    for split in ("dev", "test"):
        rows = _rows(folder, f"exams/mcqa/{split}.jsonl")
        cands = _top(rows, "expected_answer", 3)
        texts = [form.format(a) for a in cands for form in FORMS]
        got = _by_hand(gym, "mcqa", rows, texts)
        boxed = [f"\\boxed{{{a}}}" for a in cands]  # mcqa's strict mode credits \boxed{} only
        assert all(got[t] == 0.0 for t in texts if t not in boxed)
        best = max(boxed, key=lambda t: got[t])  # the first of the most credited: the most frequent answer
        floor = m["floors"]["mcqa"][split]
        assert floor == {"score": got[best], "answer": best, "n": len(rows), "candidates": len(cands)}
        assert floor["score"] > 0  # each candidate is some row's right answer
        assert said["floors"][f"mcqa/{split}"] == floor
        assert m["provenance"]["floor"][f"mcqa/{split}"]["field"] == "expected_answer"


def test_a_reasoning_gym_freeze_records_the_floor_its_server_grades(repo: Path, gym: Stack, frozen) -> None:
    """200 generated rows, a third of them syllogisms answered Yes or No: a floor well above 0."""
    folder = Path(frozen("--benchmark", "reasoning_gym", "--as", "rg")["environment"]["folder"])
    rows = _rows(folder, "exams/reasoning_gym/dev.jsonl")
    cands = _top(rows, "answer", 3)
    assert cands[0] == "Yes"
    texts = [form.format(a) for a in cands for form in FORMS]
    got = _by_hand(gym, "reasoning_gym", rows, texts)
    floor = json.loads((folder / "manifest.json").read_text())["floors"]["reasoning_gym"]["dev"]
    # the best constant of them all, whichever form it is written in (reasoning_gym credits "Yes"
    # bare, boxed or tagged alike: the first form, bare, wins the tie)
    assert floor["score"] == max(got.values()) and got[floor["answer"]] == floor["score"]
    assert floor["answer"] in ("Yes", "<answer>Yes</answer>") and (floor["n"], floor["candidates"]) == (200, 3)
    assert floor["score"] >= 0.15


def test_rows_without_a_reference_answer_record_no_floor_and_say_why(repo: Path, monte, checkout: Stack) -> None:
    rows = [{"responses_create_params": {"input": [{"role": "user", "content": f"say {i}"}]}, "rubric": f"r{i}"}
            for i in range(4)]
    add_server(checkout.root, "no_reference", None, rows=rows)  # no app.py: no server is started for it
    r = monte("env", "add", "--benchmark", "server:no_reference", "--json")
    assert r.code == 0, r.out
    folder = Path(r.json()["environment"]["folder"])
    m = json.loads((folder / "manifest.json").read_text())
    assert "floors" not in m
    why = m["provenance"]["floor"]["no_reference/dev"]["none"]
    assert "no reference answer" in why
    assert r.json()["floors"] == {"no_reference/dev": {"none": why}}
    text = monte("env", "add", "--benchmark", "server:no_reference", "--as", "again")
    assert "floor no_reference/dev: none (its rows carry no reference answer" in text.out
