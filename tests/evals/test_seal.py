"""The seal under ordinary and deliberate bypasses (each one reproduced on the code before this
file existed): a checkpoint passed as a base, a copied base with an extra file, a second
experiment or a re-added environment on the same exam content, and ``--smoke`` on test."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from tests.support.helpers import git, snapshot_state


def _eval(monte, *args: str):
    return monte("eval", "--yes", "--json", *args)


def _error(r: Any) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(r.out)["error"]
    return doc


def test_a_checkpoint_folder_passed_as_model_is_refused(repo: Path, monte, claimed: str) -> None:
    a = claimed
    folder = repo / ".monte" / "runs" / "exp" / a / "checkpoints" / "step-50"
    assert folder.is_dir()
    copy = repo.parent / "ck-copy"  # a copy elsewhere, with a file of its own, is still the checkpoint
    shutil.copytree(folder, copy)
    (copy / "README.md").write_text("my new base model\n")
    before = snapshot_state(repo)
    for model in (folder, copy):
        r = _eval(monte, "--split", "test", "--model", str(model))
        assert r.code == 3, r.out
        err = _error(r)
        assert err["code"] == "E_REFUSED" and f"exp/{a}@50" in err["message"]
        assert "monte eval --checkpoint" in err["fix"]
        r = monte("train", "--recipe", "sft-tiny", "--source", "parity-sft", "--from-base", "--model", str(model),
                  "--dry-run", "--json")
        assert r.code == 3 and _error(r)["code"] == "E_REFUSED"
    assert snapshot_state(repo) == before


def test_a_copy_with_an_extra_file_is_the_same_cohort(repo: Path, monte, exp: str, base_model: Path) -> None:
    assert _eval(monte, "--split", "test").code == 0  # test@0 of the base
    cohort = _eval(monte, "--dry-run").json()["plan"]["cohort"]
    copy = repo.parent / "bm-copy"
    shutil.copytree(base_model, copy)
    (copy / "README.md").write_text("hi\n")  # another generation_config.json is another setup: test_identity.py
    assert monte("eval", "--model", str(copy), "--dry-run", "--json").json()["plan"]["cohort"] == cohort
    before = snapshot_state(repo)
    r = _eval(monte, "--split", "test", "--model", str(copy), "--dry-run")
    assert r.code == 3 and _error(r)["code"] == "E_SEALED", r.out
    assert snapshot_state(repo) == before


def test_the_cohort_survives_a_save_pretrained_round_trip(repo: Path, monte, exp: str, base_model: Path) -> None:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    out = repo.parent / "round-trip"
    AutoModelForCausalLM.from_pretrained(base_model).save_pretrained(out)
    AutoTokenizer.from_pretrained(base_model).save_pretrained(out)
    a = monte("eval", "--dry-run", "--json").json()["plan"]
    b = monte("eval", "--model", str(out), "--dry-run", "--json").json()["plan"]
    assert a["base_files"] != b["base_files"]  # the tokenizer config's bytes changed ...
    assert a["cohort"] == b["cohort"] and a["weights"] == b["weights"]  # ... the weights did not


def test_other_weights_are_another_cohort(repo: Path, monte, exp: str, tiny_models) -> None:
    a = monte("eval", "--dry-run", "--json").json()["plan"]["cohort"]
    b = monte("eval", "--model", str(tiny_models[2]), "--dry-run", "--json").json()["plan"]["cohort"]
    assert a != b


def test_a_second_experiment_on_the_same_exam_and_base_shares_the_seal(repo: Path, monte, claimed: str, tiny_models,
                                                                       base_model: Path) -> None:
    assert monte("experiment", "init", "exp2", "--eval", "parity", "--model", str(base_model)).code == 0
    before = snapshot_state(repo)
    r = _eval(monte, "-e", "exp2", "--split", "test")
    assert r.code == 3, r.out
    err = _error(r)
    assert err["code"] == "E_SEALED" and "exp/" in err["message"] and "spans the repository" in err["message"]
    assert snapshot_state(repo) == before
    # the same frozen content re-added under another name is the same exam
    assert monte("env", "add", "--server", "parity", "--dev", "parity", "--test", "parity", "--as", "parity2").code == 0
    assert monte("experiment", "init", "exp3", "--eval", "parity2", "--model", str(base_model)).code == 0
    before = snapshot_state(repo)
    r = _eval(monte, "-e", "exp3", "--split", "test")
    assert r.code == 3 and _error(r)["code"] == "E_SEALED", r.out
    assert snapshot_state(repo) == before
    # another base model is another cohort: its own two reads are legal
    assert monte("experiment", "init", "exp4", "--eval", "parity", "--model", str(tiny_models[3])).code == 0
    assert _eval(monte, "-e", "exp4", "--split", "test").code == 0


def test_status_discloses_every_read_of_an_exams_content(repo: Path, monte, claimed: str, tiny_models) -> None:
    assert monte("experiment", "init", "exp4", "--eval", "parity", "--model", str(tiny_models[3])).code == 0
    assert _eval(monte, "-e", "exp4", "--split", "test").code == 0
    doc = monte("status", "exp4", "--json").json()
    (exam,) = doc["exams"]
    assert exam["exam"] == "parity" and exam["test_reads"] == 3 and exam["cohorts"] == 2
    assert exam["experiments"] == ["exp", "exp4"]
    human = monte("status", "exp4").out
    assert "test content of parity: read 3 time(s) in this repository, in 2 cohort(s)" in human


def test_smoke_on_test_after_the_seal_records_and_prints_no_grade(repo: Path, monte, claimed: str) -> None:
    a = claimed
    for _ in range(3):
        r = _eval(monte, "--split", "test", "--smoke", "--checkpoint", f"{a}@50")
        assert r.code == 0, r.out
        row = r.json()["runs"][0]
        assert row["smoke"] and row["score"] is None and row["n"] == 5
        run = row["run"]
        tree = git(repo, "ls-tree", "-r", "--name-only", "refs/heads/monte/exp/ledger")
        assert f"/{run}/tasks.jsonl" not in tree  # no per-task score or answer of a sealed item
        shown = git(repo, "show", f"refs/heads/monte/exp/ledger:runs/{run[0]}/{run[1]}/{run}/row.json")
        assert '"score": null' in shown and "answer" not in shown
        events = (repo / ".monte" / "runs" / "exp" / run / "events.jsonl").read_text()
        assert '"score": null' in events and "answer" not in events
    human = monte("eval", "--split", "test", "--smoke", "--checkpoint", f"{a}@50", "--yes").out
    assert "no score" in human and "score 0" not in human and "score 1" not in human
