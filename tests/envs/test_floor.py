"""The constant-answer floor of an exam split (monte/envs/floor.py), frozen with the environment
(issue 18). What status and eval print of it: tests/evals/test_floor_and_reach.py."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from monte.envs.floor import constant_floor
from monte.envs.registry import get
from monte.ledger.vault_ref import Vault
from monte.manifest import read_manifest
from monte.workspace import open_workspace


def test_the_floor_is_the_best_constant_answer() -> None:
    bench = get("parity").benchmark
    items = bench.generate(7, 200)
    share_odd = sum(i["answer"] == "odd" for i in items) / 200
    floor = constant_floor(bench, items)
    assert floor is not None and floor.n == 200 and floor.candidates == 2
    assert floor.score == max(share_odd, 1 - share_odd)
    assert floor.answer == ("odd" if share_odd >= 0.5 else "even")
    assert constant_floor(bench, []) is None


def test_a_graded_floor_takes_the_best_of_a_few_candidates() -> None:
    class Partial:  # partial credit: the grader's score, not the answer's share, decides
        def grade(self, item: dict[str, Any], answer: str) -> float:
            if answer == "boom":
                raise ValueError("a grader that chokes scores 0")
            return 0.5 if answer == "b" else float(answer == item["answer"])

    items = [{"answer": "a"}] * 3 + [{"answer": "b"}] * 2 + [{"answer": "boom"}] * 5
    floor = constant_floor(Partial(), items)  # type: ignore[arg-type]
    assert floor is not None and (floor.answer, floor.score) == ("b", 0.5)


def test_freeze_records_floors_outside_the_fingerprint(repo: Path, monte) -> None:
    assert monte("env", "add", "--server", "parity", "--dev", "parity", "--test", "parity").code == 0
    ws = open_workspace(repo)
    here = read_manifest(ws.env_dir("parity"))
    vault = Vault(ws.store).get("environment", "parity")
    assert here is not None and vault is not None
    assert vault.floors == here.floors
    for split in ("dev", "test"):
        f = here.floors["parity"][split]
        assert 0.5 <= f.score <= 0.6 and f.answer in ("odd", "even") and f.n == 200
    # derived data: the identity of the freeze does not depend on it
    assert here.model_copy(update={"floors": {}}).fingerprint == here.fingerprint
    assert b'"floors"' not in here.model_copy(update={"floors": {}}).dumps()
