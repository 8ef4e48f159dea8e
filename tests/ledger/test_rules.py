"""`monte.ledger.rules`: the rules of the record as pure functions over Run rows.

No repository here: the rows are built directly (``monte.ledger.records.RunRow``), as a ledger tip
would hold them, and each rule is asked about them. The end-to-end versions, through `monte eval`
on a real ledger, are in ``tests/evals/test_eval_rules.py``.
"""

from __future__ import annotations

from typing import Any

import pytest

from monte.errors import Exit, MonteError
from monte.ledger import rules
from monte.ledger.records import RunRow
from monte.ledger.rules import Checkpoint

COHORT = "c0"
EXAM = "parity"


def train(run: str, *steps: int, seq: int, cohort: str = COHORT, smoke: bool = False,
          parent: tuple[str, int] | None = None, start_step: int = 0, boundary: bool = False,
          plan: dict[str, Any] | None = None) -> RunRow:
    """A finished training chunk that saved a checkpoint at each of ``steps``."""
    if plan is None:
        plan = {"recipe": {"name": "sft-t", "sha256": "0" * 64, "algorithm": "sft"}, "source": "parity-sft",
                "parent": {"run": parent[0], "step": parent[1]} if parent else None,
                "boundary": boundary, "start_step": start_step, "steps": 4}
    return RunRow(run=run, experiment="exp", kind="train", status="succeeded", seq=seq, cohort=cohort,
                  smoke=smoke, step=max(steps, default=0), plan=plan,
                  checkpoints=[{"step": s, "commit": f"{run}-{s}".ljust(40, "0")} for s in steps])


def ev(run: str, *, seq: int, split: str = "dev", on: tuple[str, int] | None = None, cohort: str = COHORT,
       exam: str = EXAM, status: str = "succeeded", smoke: bool = False, delta: float | None = None,
       paired: bool = True) -> RunRow:
    """An eval of the base model (``on=None``) or of the checkpoint ``on=(run, step)``; ``delta``:
    its paired dev delta over the baseline (``paired=False``: it could not be paired)."""
    target = {"kind": "base"} if on is None else {"kind": "checkpoint", "run": on[0], "step": on[1]}
    return RunRow(run=run, experiment="exp", kind="eval", status=status, seq=seq, cohort=cohort, exam=exam,  # type: ignore[arg-type]
                  split=split, smoke=smoke, step=on[1] if on else 0, plan={"target": target},
                  score=0.5 if status == "succeeded" else None,
                  delta=None if delta is None else {"paired": paired, "delta": delta})


def ref(ck: Checkpoint | None) -> str | None:
    return ck.ref if ck else None


def run_of(row: RunRow | None) -> str | None:
    return row.run if row else None


def refused(code: str, call: Any, *args: Any, **kw: Any) -> MonteError:
    with pytest.raises(MonteError) as e:
        call(*args, **kw)
    assert e.value.code == code, e.value
    assert e.value.fix, "a refusal names its fix"
    return e.value


# --- checkpoints -----------------------------------------------------------------------------------


def test_checkpoints_are_every_saved_step_of_real_training_runs_in_record_order() -> None:
    rows = [ev("e0", seq=1), train("a", 4, 8, seq=2), train("s", 4, seq=3, smoke=True),
            train("b", 12, seq=4, parent=("a", 8), start_step=8, boundary=True)]
    cks = rules.checkpoints(rows)
    assert [c.ref for c in cks] == ["a@4", "a@8", "b@12"]  # not the eval, not the smoke chunk
    b = cks[-1]
    assert b == Checkpoint(run="b", step=12, seq=4, cohort=COHORT, label="sft:parity-sft", recipe="sft-t",
                           parent=("a", 8), start_step=8, boundary=True, commit="b-12".ljust(40, "0"))
    assert cks[0].parent is None and cks[0].start_step == 0 and cks[0].boundary is False


def test_checkpoints_of_one_cohort() -> None:
    rows = [train("a", 4, seq=1), train("x", 4, seq=2, cohort="c1")]
    assert [c.run for c in rules.checkpoints(rows, COHORT)] == ["a"]
    assert [c.run for c in rules.checkpoints(rows, "c1")] == ["x"]
    assert [c.run for c in rules.checkpoints(rows)] == ["a", "x"]
    assert rules.checkpoints(rows, "c9") == []


def test_a_checkpoint_of_a_plan_without_recipe_or_source_is_labelled_unknown() -> None:
    (c,) = rules.checkpoints([train("a", 4, seq=1, plan={})])
    assert (c.label, c.recipe, c.parent, c.start_step, c.boundary) == ("?:?", "?", None, 0, False)


# --- find_checkpoint, checkpoint_at_step, newest_checkpoint -----------------------------------------


def test_find_checkpoint_by_step_or_the_run_s_last() -> None:
    rows = [train("a", 4, 8, seq=1), train("b", 12, seq=2)]
    assert rules.find_checkpoint(rows, "a", 4).ref == "a@4"
    assert rules.find_checkpoint(rows, "a", None).ref == "a@8"  # no step: the run's highest
    assert rules.find_checkpoint(rows, "b", None).ref == "b@12"


def test_find_checkpoint_refuses_a_step_the_run_did_not_save_and_names_those_it_did() -> None:
    e = refused("E_NOT_FOUND", rules.find_checkpoint, [train("a", 4, 8, seq=1)], "a", 6)
    assert "step 6" in e.message and "a@4, a@8" in e.message and e.exit_code == Exit.NOT_FOUND


def test_find_checkpoint_refuses_an_unknown_run_and_an_eval_run() -> None:
    rows = [train("a", 4, seq=1), ev("e0", seq=2)]
    assert "'zz'" in refused("E_NOT_FOUND", rules.find_checkpoint, rows, "zz", None).message
    refused("E_NOT_FOUND", rules.find_checkpoint, rows, "e0", None)


def test_find_checkpoint_refuses_a_smoke_run_as_never_evidence() -> None:
    rows = [train("s", 4, seq=1, smoke=True)]
    e = refused("E_NOT_EVIDENCE", rules.find_checkpoint, rows, "s", 4)
    assert "smoke" in e.message and e.exit_code == Exit.REFUSED


def test_checkpoint_at_step_in_the_cohort() -> None:
    rows = [train("a", 4, 8, seq=1), train("x", 8, seq=2, cohort="c1")]
    assert rules.checkpoint_at_step(rows, COHORT, 8).ref == "a@8"  # another cohort's step 8 is no rival
    assert rules.checkpoint_at_step(rows, "c1", 8).ref == "x@8"
    refused("E_NOT_FOUND", rules.checkpoint_at_step, rows, COHORT, 12)
    refused("E_NOT_FOUND", rules.checkpoint_at_step, rows, "c1", 4)


def test_checkpoint_at_step_refuses_a_step_two_branches_hold() -> None:
    rows = [train("a", 4, 8, seq=1), train("b", 8, seq=2, parent=("a", 4), start_step=4)]
    e = refused("E_USAGE", rules.checkpoint_at_step, rows, COHORT, 8)
    assert "2 branches" in e.message and "a@8" in e.message and "b@8" in e.message
    assert "--checkpoint RUN@STEP" in e.fix and e.exit_code == Exit.USAGE
    assert rules.checkpoint_at_step(rows, COHORT, 4).ref == "a@4"


def test_newest_checkpoint_is_the_newest_run_s_highest_step() -> None:
    assert rules.newest_checkpoint([], COHORT) is None
    rows = [train("a", 4, 8, 12, seq=1), train("b", 4, 8, seq=2, parent=("a", 4), start_step=4)]
    assert ref(rules.newest_checkpoint(rows, COHORT)) == "b@8"  # the newer run beats the higher step
    rows.append(train("x", 4, seq=3, cohort="c1"))  # another cohort's newer chunk does not count
    assert ref(rules.newest_checkpoint(rows, COHORT)) == "b@8"
    assert ref(rules.newest_checkpoint(rows, "c1")) == "x@4"
    assert rules.newest_checkpoint([train("s", 4, seq=1, smoke=True)], COHORT) is None


# --- baselines and admissibility --------------------------------------------------------------------


def test_only_a_finished_real_eval_is_admissible() -> None:
    assert rules.is_admissible(ev("e", seq=1))
    assert not rules.is_admissible(ev("e", seq=1, status="failed"))
    assert not rules.is_admissible(ev("e", seq=1, status="started"))
    assert not rules.is_admissible(ev("e", seq=1, smoke=True))
    assert not rules.is_admissible(train("a", 4, seq=1))


def test_the_baseline_is_the_first_admissible_base_eval_on_that_exam_and_split() -> None:
    rows = [ev("failed", seq=1, status="failed"), ev("smoke", seq=2, smoke=True),
            ev("other-cohort", seq=3, cohort="c1"), ev("other-exam", seq=4, exam="gsm8k"),
            ev("test0", seq=5, split="test"), train("a", 4, seq=6), ev("on-ck", seq=7, on=("a", 4)),
            ev("dev0", seq=8), ev("dev0-again", seq=9)]
    assert run_of(rules.baseline(rows, COHORT, EXAM, "dev")) == "dev0"
    assert run_of(rules.baseline(rows, COHORT, EXAM, "test")) == "test0"
    assert run_of(rules.baseline(rows, "c1", EXAM, "dev")) == "other-cohort"
    assert rules.baseline(rows, COHORT, "gsm8k", "test") is None
    assert rules.baseline(rows[:7], COHORT, EXAM, "dev") is None  # a checkpoint's eval is no baseline


def test_every_real_test_eval_spends_a_touch_whatever_became_of_it() -> None:
    rows = [ev("t-failed", seq=1, split="test", status="failed"), ev("t-started", seq=2, split="test", status="started"),
            ev("t-smoke", seq=3, split="test", smoke=True), ev("dev", seq=4),
            ev("t-c1", seq=5, split="test", cohort="c1"), ev("t-gsm", seq=6, split="test", exam="gsm8k")]
    assert [r.run for r in rules.test_touches(rows, COHORT, EXAM)] == ["t-failed", "t-started"]
    assert [r.run for r in rules.test_touches(rows, "c1", EXAM)] == ["t-c1"]


# --- the seal: check_test_read ----------------------------------------------------------------------


def test_the_first_test_read_of_a_fresh_cohort_is_the_baseline() -> None:
    assert rules.check_test_read([], COHORT, EXAM, on_checkpoint=False) == "baseline"
    rows = [ev("dev0", seq=1), ev("t-c1", seq=2, split="test", cohort="c1"), ev("t-smoke", seq=3, split="test", smoke=True)]
    assert rules.check_test_read(rows, COHORT, EXAM, on_checkpoint=False) == "baseline"  # none of these is a touch


def test_after_the_baseline_the_one_remaining_read_is_the_claim() -> None:
    rows = [ev("dev0", seq=1), ev("test0", seq=2, split="test"), train("a", 4, seq=3)]
    assert rules.check_test_read(rows, COHORT, EXAM, on_checkpoint=True) == "claim"


def test_a_second_base_read_is_refused_the_remaining_read_belongs_to_the_claim() -> None:
    rows = [ev("test0", seq=1, split="test")]
    e = refused("E_SEALED", rules.check_test_read, rows, COHORT, EXAM, on_checkpoint=False)
    assert "test0" in e.message and "final claim" in e.message and e.exit_code == Exit.REFUSED


def test_a_test0_that_ended_without_a_score_is_a_dead_end_that_says_so() -> None:
    rows = [ev("test0", seq=1, split="test", status="failed")]  # a crashed test@0 still spent its touch
    e = refused("E_SEALED", rules.check_test_read, rows, COHORT, EXAM, on_checkpoint=False)
    assert "test0" in e.message and "cannot train" in e.message and "start a new cohort" in e.fix
    assert "final claim" not in e.message  # no circular advice


def test_a_base_read_after_training_is_refused() -> None:
    rows = [ev("dev0", seq=1), train("a", 4, seq=2)]
    e = refused("E_SEALED", rules.check_test_read, rows, COHORT, EXAM, on_checkpoint=False)
    assert "before any training" in e.message
    # a smoke chunk is no training, and another cohort's checkpoints are not this cohort's
    rows = [ev("dev0", seq=1), train("s", 4, seq=2, smoke=True), train("x", 4, seq=3, cohort="c1")]
    assert rules.check_test_read(rows, COHORT, EXAM, on_checkpoint=False) == "baseline"


def test_a_claim_without_test0_is_refused_in_preflight() -> None:
    rows = [ev("dev0", seq=1), train("a", 4, seq=2), ev("t-c1", seq=3, split="test", cohort="c1")]
    e = refused("E_PREFLIGHT", rules.check_test_read, rows, COHORT, EXAM, on_checkpoint=True)
    assert e.message == rules.E_PREFLIGHT_MESSAGE and "baselines" in e.fix


@pytest.mark.parametrize("on_checkpoint", [False, True])
def test_a_third_read_is_refused(on_checkpoint: bool) -> None:
    rows = [ev("test0", seq=1, split="test"), train("a", 4, seq=2),
            ev("t-claim", seq=3, split="test", on=("a", 4), status="started")]
    e = refused("E_SEALED", rules.check_test_read, rows, COHORT, EXAM, on_checkpoint=on_checkpoint)
    assert "read twice" in e.message and "(test0, t-claim)" in e.message and "new cohort" in e.fix
    # the seal is per cohort and exam: another exam of the cohort has no test@0 yet
    refused("E_PREFLIGHT", rules.check_test_read, rows, COHORT, "gsm8k", on_checkpoint=True)
    assert rules.check_test_read(rows, "c1", EXAM, on_checkpoint=False) == "baseline"


# --- the final claim: nominee_is_admissible, select_for_claim ---------------------------------------


def _ck(rows: list[RunRow], ref: str) -> Checkpoint:
    run, _, step = ref.partition("@")
    return rules.find_checkpoint(rows, run, int(step))


def test_a_nominee_needs_an_admissible_dev_eval_of_itself_on_every_exam() -> None:
    rows = [train("a", 4, 8, seq=1), ev("d-a4", seq=2, on=("a", 4)),
            ev("d-a4-gsm", seq=3, on=("a", 4), exam="gsm8k")]
    rules.nominee_is_admissible(rows, _ck(rows, "a@4"), [EXAM, "gsm8k"])  # no refusal
    e = refused("E_REFUSED", rules.nominee_is_admissible, rows, _ck(rows, "a@8"), [EXAM])
    assert "a@8" in e.message and "monte eval --checkpoint a@8" in e.fix
    e = refused("E_REFUSED", rules.nominee_is_admissible, rows, _ck(rows, "a@4"), [EXAM, "math"])
    assert "'math'" in e.message


@pytest.mark.parametrize("inadmissible", [
    {"status": "failed"}, {"smoke": True}, {"split": "test"}, {"on": ("a", 8)}, {"on": None}, {"exam": "gsm8k"}])
def test_a_nominee_s_dev_eval_must_be_real_finished_on_dev_and_of_that_checkpoint(inadmissible: dict[str, Any]) -> None:
    rows = [train("a", 4, 8, seq=1), ev("d", seq=2, **{"on": ("a", 4), **inadmissible})]
    refused("E_REFUSED", rules.nominee_is_admissible, rows, _ck(rows, "a@4"), [EXAM])


def _claimable(*evals: RunRow) -> list[RunRow]:
    """A cohort with its dev baseline, test@0, three checkpoints (a@4, a@8, and b@8 branched from
    a@4) and the given dev evals."""
    return [ev("dev0", seq=1), ev("test0", seq=2, split="test"), train("a", 4, 8, seq=3),
            train("b", 8, seq=4, parent=("a", 4), start_step=4), *evals]


def test_the_nomination_is_claimed_whatever_the_deltas() -> None:
    rows = _claimable(ev("d-a4", seq=5, on=("a", 4), delta=0.2), ev("d-a8", seq=6, on=("a", 8), delta=-0.1))
    assert rules.select_for_claim(rows, COHORT, [EXAM], "a@8").ref == "a@8"
    assert rules.select_for_claim(rows, COHORT, [EXAM, "gsm8k"], "b@8").ref == "b@8"  # any number of exams


def test_a_nomination_that_names_no_checkpoint_of_the_cohort_is_refused() -> None:
    rows = _claimable(ev("d-a4", seq=5, on=("a", 4), delta=0.2), train("x", 4, seq=6, cohort="c1"))
    for nomination in ("a@12", "zz@4", "x@4"):
        e = refused("E_INTEGRITY", rules.select_for_claim, rows, COHORT, [EXAM], nomination)
        assert nomination in e.message and "monte nominate" in e.fix


def test_without_a_nomination_the_best_paired_dev_delta_is_claimed() -> None:
    rows = _claimable(ev("d-a4", seq=5, on=("a", 4), delta=0.05), ev("d-a8", seq=6, on=("a", 8), delta=0.2),
                      ev("d-b8", seq=7, on=("b", 8), delta=0.1))
    assert rules.select_for_claim(rows, COHORT, [EXAM], None).ref == "a@8"
    assert rules.select_for_claim(rows[::-1], COHORT, [EXAM], None).ref == "a@8"


def test_inadmissible_and_foreign_evals_are_no_candidates() -> None:
    rows = _claimable(ev("d-a4", seq=5, on=("a", 4), delta=0.05),
                      ev("failed", seq=6, on=("a", 8), delta=0.9, status="failed"),
                      ev("smoke", seq=7, on=("a", 8), delta=0.9, smoke=True),
                      ev("gsm", seq=8, on=("a", 8), delta=0.9, exam="gsm8k"),
                      ev("test", seq=9, on=("b", 8), delta=0.9, split="test"),
                      ev("dev0-c1", seq=10, cohort="c1"), train("x", 4, seq=11, cohort="c1"),
                      ev("d-x4", seq=12, on=("x", 4), delta=0.9, cohort="c1"))
    assert rules.select_for_claim(rows, COHORT, [EXAM], None).ref == "a@4"
    assert rules.select_for_claim(rows, "c1", [EXAM], None).ref == "x@4"


def test_a_tie_goes_to_the_higher_step() -> None:
    rows = _claimable(ev("d-a8", seq=5, on=("a", 8), delta=0.1), ev("d-a4", seq=6, on=("a", 4), delta=0.1))
    assert rules.select_for_claim(rows, COHORT, [EXAM], None).ref == "a@8"
    assert rules.select_for_claim(rows[::-1], COHORT, [EXAM], None).ref == "a@8"


def test_a_tie_on_delta_and_step_goes_to_the_newer_run() -> None:
    rows = _claimable(ev("d-a8", seq=5, on=("a", 8), delta=0.1), ev("d-b8", seq=6, on=("b", 8), delta=0.1))
    assert rules.select_for_claim(rows, COHORT, [EXAM], None).ref == "b@8"
    assert rules.select_for_claim(rows[::-1], COHORT, [EXAM], None).ref == "b@8"


@pytest.mark.parametrize("exams", [[], [EXAM, "gsm8k"]])
def test_without_a_nomination_not_exactly_one_dev_exam_is_refused(exams: list[str]) -> None:
    rows = _claimable(ev("d-a4", seq=5, on=("a", 4), delta=0.2))
    e = refused("E_REFUSED", rules.select_for_claim, rows, COHORT, exams, None)
    assert f"{len(exams)} dev exams" in e.message and "monte nominate" in e.fix


def test_without_a_dev_baseline_nothing_is_claimed() -> None:
    rows = _claimable(ev("d-a4", seq=5, on=("a", 4), delta=0.2))[1:]  # no dev0
    e = refused("E_NO_BASELINE", rules.select_for_claim, rows, COHORT, [EXAM], None)
    assert COHORT in e.message and e.exit_code == Exit.REFUSED


def test_without_a_candidate_nothing_is_claimed() -> None:
    e = refused("E_REFUSED", rules.select_for_claim, _claimable(), COHORT, [EXAM], None)
    assert "no checkpoint" in e.message


def test_an_unpairable_candidate_refuses_the_choice_even_beside_a_better_paired_one() -> None:
    rows = _claimable(ev("d-a8", seq=5, on=("a", 8), delta=0.5),
                      ev("d-a4", seq=6, on=("a", 4), delta=0.1, paired=False),
                      ev("d-b8", seq=7, on=("b", 8)))  # no delta at all
    e = refused("E_UNPAIRABLE", rules.select_for_claim, rows, COHORT, [EXAM], None)
    assert "2 candidate" in e.message and "d-a4" in e.message and "d-b8" in e.message and "d-a8" not in e.message
    assert "nominate" in e.fix
    assert rules.select_for_claim(rows, COHORT, [EXAM], "a@4").ref == "a@4"  # a nomination still stands
