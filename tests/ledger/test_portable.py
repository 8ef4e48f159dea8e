"""A ledger an older monte wrote with absolute folders keeps verifying; ``monte ledger verify``
names its machine-local values as warnings (not violations); new records in it are portable."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from monte.ledger.portable import is_machine_local, local_values


def _legacy(repo: Path, monte: Any, model: Path) -> str:
    """An experiment recorded as monte did before records travelled: the base model by this
    machine's folder in measurement.json, base.json and the rows, a checkpoint's stage start too."""
    from monte.evals import plan_eval, run_eval
    from monte.ledger.experiment import Ledger
    from monte.ledger.lineage import ensure_base, identify_base
    from monte.training.record import finish_chunk, save_checkpoint, start_chunk
    from monte.workspace import open_workspace

    assert monte("env", "add", "--server", "parity", "--dev", "parity", "--test", "parity").code == 0
    assert monte("experiment", "init", "exp", "--eval", "parity").code == 0
    ws = open_workspace(repo)
    ledger = Ledger(ws.store, "exp")
    meas = ledger.measurement().model_copy(update={"model": str(model)})
    ledger2 = Ledger(ws.store, "old")
    ledger2.create(meas.model_copy(update={"experiment": "old"}))
    ident = identify_base(ws.store, "old", model)
    cohort, _ = ensure_base(ws.store, "old", str(model), ident.files, cohort=ident.cohort, weights=ident.weights)
    for split in ("dev", "test"):  # the baselines, their rows naming the folder as the older monte did
        plan = plan_eval(ws, experiment="old", model=str(model), split=split, step=None, checkpoint=None, smoke=False)
        plan = plan.model_copy(update={"base_model": str(model), "base_register": None,
                                       "target": plan.target.model_copy(update={"model": str(model), "folder": ""})})
        run_eval(ws, plan)
    chunk = {"recipe": {"name": "sft-tiny", "sha256": "0" * 64, "algorithm": "sft"}, "source": "parity-sft",
             "parent": None, "boundary": False, "start_step": 0, "steps": 50, "init_model": str(model),
             "resume_from": None}
    row = start_chunk(ws, "old", cohort=cohort, base_model=str(model), plan=chunk)
    tmp = repo.parent / "ck"
    shutil.copytree(model, tmp)
    row = save_checkpoint(ws, "old", row, 50, tmp, extra={"stage_start": str(model)})
    finish_chunk(ws, "old", row, "succeeded")
    return row.run


def test_machine_local_values_are_found() -> None:
    assert is_machine_local("/home/me/models/qwen") and is_machine_local("~/m") and is_machine_local("C:\\m")
    assert is_machine_local("/tmp")
    for portable in ("repo:base-model", "name:qwen", "hf:org/x@" + "0" * 40, "data:runs/x", "exp/ab@50",
                     "runs/exp/ab/checkpoints/step-50", "/", "\n", "base"):
        assert not is_machine_local(portable), portable
    assert list(local_values({"a": ["x", {"b": "/srv/m"}]})) == [("a[1].b", "/srv/m")]


def test_an_older_ledger_verifies_and_its_local_paths_are_warned(repo: Path, monte: Any, base_model: Path) -> None:
    run = _legacy(repo, monte, base_model)
    r = monte("ledger", "verify", "--json")
    assert r.code == 0, r.out
    doc = r.json()
    found = {(w["experiment"], w["record"], w["field"]) for w in doc["warnings"]}
    assert {("old", "measurement.json", "model"), ("old", f"run {run}", "model"),
            ("old", f"run {run}", "plan.base_model"), ("old", f"run {run}", "plan.init_model"),
            ("old", f"checkpoint {run}@50", "stage_start")} <= found
    assert all(w["value"] == str(base_model) for w in doc["warnings"])
    assert not [w for w in doc["warnings"] if w["experiment"] == "exp"]  # written by this monte
    human = monte("ledger", "verify")
    assert human.code == 0 and human.out.startswith("ok:")
    assert f"warning: old: run {run} holds a machine-local path (plan.base_model: {base_model})" in human.out


def test_new_records_in_an_older_ledger_are_portable(repo: Path, monte: Any, base_model: Path,
                                                     tiny_models: dict[int, Path], tmp_path: Path) -> None:
    run = _legacy(repo, monte, base_model)
    before = {(w["record"], w["field"]) for w in monte("ledger", "verify", "--json").json()["warnings"]}
    base = monte("eval", "-e", "old", "--step", "0", "--yes", "--json")
    assert base.code == 0, base.out
    ck = monte("eval", "-e", "old", "--checkpoint", f"{run}@50", "--yes", "--json")
    assert ck.code == 0, ck.out
    for row in (base.json()["runs"][0], ck.json()["runs"][0]):
        assert str(base_model) not in json.dumps(row) and str(repo) not in json.dumps(row)
    assert base.json()["runs"][0]["model"] == "name:seed0"  # the old folder, named on this machine
    after = {(w["record"], w["field"]) for w in monte("ledger", "verify", "--json").json()["warnings"]}
    assert after == before  # nothing new is machine-local


def test_an_older_records_folder_holding_other_weights_is_refused(repo: Path, monte: Any, tiny_models: dict[int, Path],
                                                                  tmp_path: Path) -> None:
    model = tmp_path / "m"
    shutil.copytree(tiny_models[0], model)
    _legacy(repo, monte, model)
    shutil.rmtree(model)
    shutil.copytree(tiny_models[3], model)  # the folder base.json names now holds another model
    r = monte("eval", "-e", "old", "--dry-run", "--json")
    assert r.code == 5 and r.json()["error"]["code"] == "E_INTEGRITY", r.out


def test_a_failed_runs_reason_and_events_name_no_folder_of_this_machine(repo: Path, monte: Any,
                                                                        base_model: Path) -> None:
    from monte.errors import error
    from monte.evals import plan_eval, run_eval
    from monte.workspace import open_workspace

    shutil.copytree(base_model, repo / "base-model")
    assert monte("env", "add", "--server", "parity", "--dev", "parity", "--test", "parity").code == 0
    assert monte("experiment", "init", "exp", "--eval", "parity", "--model", "base-model").code == 0
    ws = open_workspace(repo)
    plan = plan_eval(ws, experiment="exp", model=None, split="dev", step=None, checkpoint=None, smoke=False)

    from monte.models import generate as gen

    folder = repo / "base-model"

    def generate(model: Any, tok: Any, prompts: list[Any], **kw: Any) -> list[str]:
        # the preflight's one prompt passes; the run's generation fails after `started`, naming folders
        if len(prompts) > 1:
            raise error("E_NOT_FOUND", f"{folder} is not loadable; see {ws.data_root / 'runs'}", "fix it")
        return [""] * len(prompts)

    with pytest.MonkeyPatch.context() as mp, pytest.raises(Exception, match="is not loadable"):
        mp.setattr(gen, "generate", generate)
        run_eval(ws, plan)
    row = monte("status", "--json").json()["rows"][0]
    shown = monte("show", row["run"], "--json").out
    assert "E_NOT_FOUND: <repo>/base-model is not loadable; see <data root>/runs" in shown, shown
    events = (repo / ".monte" / "runs" / "exp" / row["run"] / "events.jsonl").read_text()
    assert str(repo) not in events and "<repo>/base-model" in events
