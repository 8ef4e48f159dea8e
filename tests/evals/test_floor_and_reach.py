"""Issue 18, beside the scores: the constant-answer floor (frozen with the environment:
tests/envs/test_floor.py; printed by `monte status` and `monte eval`, a checkpoint at or below it
flagged) and the smallest effect a test read can see (the plan of `monte eval --split test`, and
`monte status` per exam)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from monte.ledger.records import ExamFreeze, Measurement, SplitFreeze
from monte.manifest import Floor
from monte.stats.power import PRIOR_DISCORDANCE, minimum_detectable_effect
from monte.status import add_floors_and_reach
from tests.support.helpers import checkpoint


def _doc(score: float, floor: float, n_test: int = 200) -> tuple[dict[str, Any], Measurement]:
    meas = Measurement(experiment="e", created_at="", environment="env", environment_fingerprint="",
                       grader={}, exams={"x": ExamFreeze(benchmark="x", splits={
                           "dev": SplitFreeze(path="d", sha256="0", n=100),
                           "test": SplitFreeze(path="t", sha256="1", n=n_test)})})
    out: dict[str, Any] = {
        "rows": [{"run": "r1", "score": score}],
        "deltas": [{"run": "r1", "exam": "x", "split": "dev", "target": "t@5", "delta": 0.1, "paired": True,
                    "fixed": 15, "broken": 5, "n": 100}],
        "checkpoints": [{"checkpoint": "t@5", "dev": {"x": score}}],
        "exams": [{"exam": "x"}],
    }
    return out, meas


def test_status_flags_a_score_at_or_below_the_floor() -> None:
    floors = {"x": {"dev": Floor(score=0.5, answer="yes", n=100, candidates=2)}}
    out, meas = _doc(0.5, 0.5)
    add_floors_and_reach(out, meas, floors)
    assert out["floors"] == {"x/dev": {"score": 0.5, "answer": "yes", "n": 100, "candidates": 2}}
    assert out["deltas"][0]["at_floor"] and out["deltas"][0]["floor"] == 0.5
    assert out["checkpoints"][0]["at_floor"] == ["x"]
    out, meas = _doc(0.51, 0.5)
    add_floors_and_reach(out, meas, floors)
    assert not out["deltas"][0]["at_floor"] and out["checkpoints"][0]["at_floor"] == []
    # what a test read of x can show, from the dev discordance (20 of 100 tasks flipped)
    reach = out["exams"][0]["detectable"]
    assert (reach["n"], reach["discordance"], reach["evals"], reach["prior"]) == (200, 0.2, 1, False)
    assert reach["effect"] == minimum_detectable_effect(200, 0.2)
    # no floors recorded (a freeze older than them): nothing flagged
    out, meas = _doc(0.0, 0.5)
    add_floors_and_reach(out, meas, {})
    assert out["floors"] == {} and not out["deltas"][0]["at_floor"]


def test_status_and_eval_print_the_floor_and_the_reach(
        repo: Path, monte, exp: str, tiny_models) -> None:
    plan = monte("eval", "--split", "test", "--dry-run")
    assert plan.code == 0, plan.err
    effect = minimum_detectable_effect(200, PRIOR_DISCORDANCE)
    assert effect is not None
    assert "constant-answer floor 0.5" in plan.out  # parity: about half the items are odd
    assert (f"a test read (n 200) shows a gain of {effect:+.3f} or more with 80% power "
            "(assumed discordance 0.20: no paired dev eval yet)") in plan.out
    r = monte("eval", "--yes")
    assert r.code == 0, r.err
    assert "constant-answer floor 0." in r.out  # the base (untrained) scores below it
    assert monte("eval", "--yes", "--split", "test").code == 0
    a = checkpoint(repo, tiny_models[0], algorithm="sft", source="parity-sft")
    r = monte("eval", "--yes", "--checkpoint", f"{a}@50")
    assert r.code == 0, r.err
    assert "at or below the constant-answer floor 0." in r.out
    doc = monte("status", "--json").json()
    assert set(doc["floors"]) == {"parity/dev", "parity/test"}
    assert 0.5 <= doc["floors"]["parity/dev"]["score"] <= 0.6
    reach = doc["exams"][0]["detectable"]
    # the tiny checkpoint answers as the base does (no task flipped): the prior, stated as such
    assert reach["n"] == 200 and reach["prior"] and reach["evals"] == 1 and reach["effect"] == effect
    out = monte("status", "--wide").out  # whole lines (the default folds at 120 columns)
    assert "exam parity: constant-answer floor dev 0." in out
    assert (f"a test read (n 200) shows a gain of {effect:+.3f} or more with 80% power (assumed discordance "
            "0.20: no task flipped in 1 paired dev eval(s); best dev delta +0.000)") in out
    assert "; constant-answer floor 0." in next(line for line in out.splitlines() if "baseline parity/dev@0" in line)
    dev_line = next(line for line in out.splitlines() if line.startswith("delta parity/dev"))
    assert "at or below the constant-answer floor" in dev_line
    assert "at or below the constant-answer floor" in next(line for line in out.splitlines() if f"{a}@50" in line
                                                             and "dev:" in line)


def test_status_reads_the_frozen_floors_as_exam_floors_does(repo: Path, exp: str) -> None:
    from monte.envs.floor import exam_floors
    from monte.ledger.experiment import Ledger
    from monte.status import frozen_floors
    from monte.workspace import open_workspace

    ws = open_workspace(repo)
    env = Ledger(ws.store, exp).measurement().environment
    light = frozen_floors(ws, env)  # the vault manifest's JSON, no pydantic
    assert light and light == {e: {s: f.model_dump() for s, f in splits.items()}
                               for e, splits in exam_floors(ws, env).items()}
    assert frozen_floors(ws, "no-such-env") == exam_floors(ws, "no-such-env") == {}
