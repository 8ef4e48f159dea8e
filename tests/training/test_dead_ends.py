"""Refusals that lead somewhere (issue 30.5).

Reproduced on the code before: a second experiment on the same exam and base weights was sent
in a circle: `monte train` refused E_NO_BASELINE "run `monte eval --split test`", which refused
E_SEALED "run the final claim ... in experiment x"; neither said it needs other base weights.
And `monte train --parent RUN@STEP` of a checkpoint in a second cohort refused E_NO_BASELINE for
the experiment's default cohort unless `--model` was repeated; now the checkpoint names its own
cohort's base model, for `train --parent` and `eval --checkpoint` alike.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.support.helpers import checkpoint, snapshot_state


def _err(r: Any) -> dict[str, Any]:
    out: dict[str, Any] = r.json()["error"]
    return out


def test_a_second_experiment_on_the_same_exam_and_weights_is_told_it_needs_other_weights(
        repo: Path, monte, base_model: Path) -> None:
    assert monte("env", "add", "--server", "parity", "--dev", "parity", "--test", "parity").code == 0
    assert monte("experiment", "init", "x", "--eval", "parity", "--model", str(base_model)).code == 0
    assert monte("eval", "-e", "x", "--yes").code == 0
    assert monte("eval", "-e", "x", "--split", "test", "--yes").code == 0
    assert monte("experiment", "init", "y", "--eval", "parity", "--model", str(base_model)).code == 0
    before = snapshot_state(repo)
    r = monte("train", "-e", "y", "--recipe", "grpo-tiny", "--source", "parity", "--from-base", "--yes", "--json")
    err = _err(r)
    assert r.code == 3 and err["code"] == "E_NO_BASELINE", r.out
    assert "experiment x" in err["message"] and "other base weights" in err["fix"], err
    assert "--split test" not in err["fix"].split("`monte eval -e EXP2 --split test`")[0].replace(
        "`monte eval -e EXP2` and ", ""), err  # not "take the test baseline here"
    r = monte("eval", "-e", "y", "--split", "test", "--yes", "--json")
    err = _err(r)
    assert r.code == 3 and err["code"] == "E_SEALED", r.out
    assert "experiment x" in err["message"] and "other base weights" in err["fix"], err
    assert "final claim: monte eval --split test" not in err["fix"], err  # no circle back to train
    assert snapshot_state(repo) == before


def test_a_checkpoint_of_a_second_cohort_names_its_own_base_model(
        repo: Path, monte, tiny_models: dict[int, Path]) -> None:
    assert monte("env", "add", "--server", "parity", "--dev", "parity", "--test", "parity").code == 0
    assert monte("experiment", "init", "exp", "--eval", "parity", "--model", str(tiny_models[0])).code == 0
    other = str(tiny_models[1])  # the second cohort: other base weights, both baselines taken
    assert monte("eval", "--model", other, "--yes").code == 0
    assert monte("eval", "--model", other, "--split", "test", "--yes").code == 0
    cohort = monte("eval", "--model", other, "--dry-run", "--json").json()["plan"]["cohort"]
    a = checkpoint(repo, tiny_models[2], base=tiny_models[1])
    r = monte("train", "--recipe", "grpo-tiny", "--source", "parity", "--parent", f"{a}@50", "--dry-run", "--json")
    assert r.code == 0, r.out
    assert r.json()["plan"]["cohort"] == cohort
    r = monte("eval", "--checkpoint", f"{a}@50", "--dry-run", "--json")
    assert r.code == 0, r.out
    assert r.json()["plan"]["cohort"] == cohort
