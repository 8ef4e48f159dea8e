"""``monte status --brief``'s document (:mod:`monte.status.brief`): what an agent decides on, one
screen however long the record (issue 49: status ran to 147 lines after 35 runs, its lineage
and cycles lines over 660 characters each, with no summary)."""

from __future__ import annotations

import json
from typing import Any

from monte.status.brief import brief, brief_text


def doc(runs: int) -> dict[str, Any]:
    """A status document of ``runs`` chunks, each with a dev eval; a test@0 and no claim yet."""
    rows: list[dict[str, Any]] = [
        {"run": "dev0", "kind": "eval", "what": "parity/dev", "target": "base", "status": "succeeded", "score": 0.1},
        {"run": "test0", "kind": "eval", "what": "parity/test", "target": "base", "status": "succeeded",
         "score": 0.1}]
    deltas = []
    for i in range(runs):
        rows.append({"run": f"t{i}", "kind": "train", "what": "sft:s", "target": f"-> {50 * (i + 1)}",
                     "status": "succeeded", "score": None})
        rows.append({"run": f"e{i}", "kind": "eval", "what": "parity/dev", "target": f"t{i}@{50 * (i + 1)}",
                     "status": "succeeded", "score": 0.5})
        deltas.append({"run": f"e{i}", "exam": "parity", "split": "dev", "paired": True, "target": f"t{i}@{50 * (i + 1)}",
                       "delta": 0.3 if i != 7 else 0.4, "lower": 0.1, "upper": 0.5, "verdict": "ok", "n": 200,
                       "fixed": 70, "broken": 10, "floor": 0.5, "at_floor": False})
    return {"experiment": "exp", "environment": "parity", "rows": rows, "deltas": deltas,
            "cohorts": [{"cohort": "c", "baselines": {"parity/dev": {}, "parity/test": {}},
                         "test_touches": {"parity": 1}}],
            "checkpoints": [{}] * runs, "lineage": ["base -sft:s-> " + " -sft:s-> ".join(str(50 * (i + 1))
                                                                                     for i in range(runs))]}


def test_the_brief_leads_with_the_best_delta_and_the_test_budget() -> None:
    b = brief(doc(35))
    assert b.best is not None
    assert b.best["parity"]["checkpoint"] == "t7@400" and b.best["parity"]["delta"] == 0.4
    assert (b.best["parity"]["lower"], b.best["parity"]["upper"], b.best["parity"]["verdict"]) == (0.1, 0.5, "ok")
    assert b.best["parity"]["floor"] == 0.5
    assert b.to_dict()["test"] == {"parity": {"reads": 1, "left": 1, "claim": None}}
    assert b.last is not None and b.last["run"] == "e34" and b.last["delta"] == 0.3
    assert b.runs["total"] == 72 and b.runs["train"] == 35


def test_the_brief_stays_one_screen_however_long_the_record() -> None:
    for runs in (1, 35, 1000):
        text = brief_text(brief(doc(runs)))
        assert len(text.splitlines()) <= 8 and max(len(line) for line in text.splitlines()) < 120
        assert len(json.dumps(brief(doc(runs)).to_dict())) < 1500


def test_a_search_verdict_rides_along_where_status_has_one() -> None:
    d = doc(2)
    d["deltas"][0].update({"search_verdict": "ok", "k": 2, "delta": 0.9})
    best = (brief(d).best or {})["parity"]
    assert best["search_verdict"] == "ok" and best["k"] == 2


def test_no_checkpoint_yet_reads_none() -> None:
    b = brief(doc(0))
    assert b.best is None and "none yet" in brief_text(b)
