"""The record rules as plain functions (:mod:`monte.ledger.verify.rules`): asked about rows held in
memory, with no repository and no walk, they give the violations the walk gives, and the walk
applies exactly :data:`NEW_ROW_RULES`."""

from __future__ import annotations

from typing import Any

import pytest

from monte.ledger.records import RunRow
from monte.ledger.verify import NEW_ROW_RULES, Violation, WalkState, new_row_violations
from monte.ledger.verify.rules import (
    baselines_first,
    changed_row,
    first_record,
    no_smoke_evidence,
    two_touch,
)

MEAS: dict[str, Any] = {"exams": {"arith": {"splits": {"dev": {}, "test": {}}}}}


def _eval(run: str, split: str, *, step: int = 0, of: str | None = None, smoke: bool = False) -> RunRow:
    target = {"kind": "checkpoint", "run": of, "step": step} if of else {"kind": "base", "run": None, "step": 0}
    return RunRow(run=run, experiment="exp", kind="eval", status="succeeded", cohort="c1", exam="arith", split=split,
                  step=step, smoke=smoke, plan={"target": target}, host="h", pid=None)


def _train(run: str, *, smoke: bool = False, parent: dict[str, Any] | None = None, ckpts: int = 0) -> RunRow:
    return RunRow(run=run, experiment="exp", kind="train", status="succeeded", cohort="c1", smoke=smoke,
                  plan={"parent": parent}, checkpoints=[{"step": 4 * (i + 1), "commit": "0" * 40} for i in range(ckpts)],
                  host="h", pid=None)


def _state(*rows: RunRow) -> WalkState:
    state = WalkState(meas=MEAS)
    for r in rows:
        state.put(r)
    return state


def _nothing_chosen(cohort: str) -> str | None:
    return None


def _said(found: list[Violation]) -> list[tuple[str, str]]:
    return [(v.rule, v.message) for v in found]


def test_a_chunk_before_its_baselines_is_named_with_what_is_missing() -> None:
    state = _state(_eval("d0", "dev"))
    assert _said(baselines_first(state, "c9", _train("t1"), chosen=_nothing_chosen)) == [
        ("baselines-first", "train t1 started before the baselines arith/test@0")]
    assert baselines_first(state, "c9", _train("t1", smoke=True), chosen=_nothing_chosen) == []  # smoke needs none
    state.put(_eval("x0", "test"))
    assert baselines_first(state, "c9", _train("t1"), chosen=_nothing_chosen) == []


def test_smoke_is_never_evidence() -> None:
    state = _state(_train("s1", smoke=True))
    assert _said(no_smoke_evidence(state, "c9", _eval("e1", "dev", step=4, of="s1"), chosen=_nothing_chosen)) == [
        ("no-smoke-evidence", "eval e1 scores smoke run s1")]
    assert _said(no_smoke_evidence(state, "c9", _train("t2", parent={"run": "s1", "step": 4}),
                                   chosen=_nothing_chosen)) == [
        ("no-smoke-evidence", "train t2 continues smoke run s1")]


@pytest.mark.parametrize(("before", "new", "says"), [
    ([], _eval("x0", "test"), []),
    ([_eval("x0", "test")], _eval("x1", "test"), ["test@0 of arith read a second time"]),
    ([_train("t1", ckpts=1)], _eval("x0", "test"), ["test@0 of arith read after the cohort has checkpoints"]),
    ([], _eval("x2", "test", step=4, of="t1"), ["a checkpoint test read of arith before test@0"]),
    ([_eval("x0", "test"), _eval("x2", "test", step=4, of="t1")], _eval("x3", "test", step=8, of="t1"),
     ["a third read of arith/test in cohort c1 (after x0, x2)"]),
])
def test_two_touch_on_rows(before: list[RunRow], new: RunRow, says: list[str]) -> None:
    state = _state()
    for r in before:  # each earlier read counted as the walk counts it
        two_touch(state, "c0", r, chosen=_nothing_chosen)
        state.put(r)
    found = two_touch(state, "c9", new, chosen=_nothing_chosen)
    assert [v.message for v in found] == says
    assert {(v.rule, v.commit) for v in found} <= {("two-touch", "c9")}
    assert state.touches[("c1", "arith")][-1] == new.run  # the read is counted, refused or not


def test_the_claim_must_read_the_chosen_checkpoint() -> None:
    state = _state()
    two_touch(state, "c0", _eval("x0", "test"), chosen=_nothing_chosen)
    claim = _eval("x2", "test", step=4, of="t1")
    assert _said(two_touch(state, "c9", claim, chosen=lambda cohort: "t1@8")) == [
        ("two-touch", "the claim reads t1@4, but the nominated or rule-selected checkpoint is t1@8")]


def test_the_walk_composes_the_listed_rules_in_order() -> None:
    assert [r.__name__ for r in NEW_ROW_RULES] == ["no_smoke_evidence", "baselines_first", "two_touch"]  # type: ignore[attr-defined]
    state = _state(_train("s1", smoke=True))
    found = new_row_violations(state, "c9", _train("t2", parent={"run": "s1", "step": 4}), chosen=_nothing_chosen)
    assert [v.rule for v in found] == ["no-smoke-evidence", "baselines-first"]
    # a rule is a function named in the list: one more, and the walk's answer grows by its own
    def no_train(state: WalkState, cid: str, row: RunRow, *, chosen: Any) -> list[Violation]:
        return [Violation(cid, "no-train", row.run)] if row.kind == "train" else []

    more = new_row_violations(state, "c9", _train("t3"), chosen=_nothing_chosen, rules=(*NEW_ROW_RULES, no_train))
    assert [v.rule for v in more] == ["baselines-first", "no-train"]


def test_docs_records_lists_every_rule_verify_names() -> None:
    """docs/records.md's table of rules is the rules the code reports: one row per rule name a
    violation carries, and none the code never gives."""
    import ast
    import re
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    text = (root / "docs" / "records.md").read_text(encoding="utf-8")
    table = text[text.index("## The rules `monte ledger verify` checks"):]
    documented = set(re.findall(r"^\| `([a-z-]+)` \|", table, flags=re.M))
    given: set[str] = set()
    for path in (root / "monte").rglob("*.py"):  # Violation(commit, RULE, ...), and a report's {"rule": RULE}
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "Violation" and len(node.args) > 1 \
                    and isinstance(node.args[1], ast.Constant):
                given.add(str(node.args[1].value))
            if isinstance(node, ast.Dict):
                given |= {str(v.value) for k, v in zip(node.keys, node.values, strict=True) if isinstance(k, ast.Constant)
                          and k.value == "rule" and isinstance(v, ast.Constant)}
    assert given and documented == given, (sorted(given - documented), sorted(documented - given))


def test_a_first_record_is_a_new_started_run_with_no_checkpoint() -> None:
    state = _state(_eval("d0", "dev"))
    started = _eval("d1", "dev").model_copy(update={"status": "started"})
    assert first_record(state, "c9", started) == []
    again = _eval("d0", "dev").model_copy(update={"status": "started"})
    assert _said(first_record(state, "c9", again)) == [("unique-run-id", "run id d0 is used again")]
    born_done = _train("t1", ckpts=1)
    assert _said(first_record(state, "c9", born_done)) == [
        ("one-record", "run t1 appears as succeeded, not started"),
        ("lineage", "run t1 starts with checkpoints already on it")]


def test_a_changed_row_moves_forward_and_keeps_what_it_was() -> None:
    started = _train("t1").model_copy(update={"status": "started"})
    assert changed_row(started, _train("t1", ckpts=1).model_copy(update={"status": "running"}), "c9") == []
    assert _said(changed_row(_train("t1"), _train("t1"), "c9")) == [
        ("append-only", "run t1 had succeeded; a finished row is never rewritten")]
    moved = started.model_copy(update={"status": "running", "cohort": "c2", "plan": {"parent": None, "x": 1}})
    assert _said(changed_row(started, moved, "c9")) == [("append-only", "run t1: cohort changed"),
                                                        ("append-only", "run t1: its plan changed")]
    two = _train("t1", ckpts=2).model_copy(update={"status": "running"})
    rewritten = two.model_copy(update={"checkpoints": [{"step": 4, "commit": "1" * 40}, *two.checkpoints[1:]]})
    assert _said(changed_row(two, rewritten, "c9")) == [("append-only", "run t1: a checkpoint was rewritten")]
