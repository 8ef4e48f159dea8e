"""Model references that mean the same thing on every machine (``monte.models.locate``).

Each test reproduces what monte recorded before: ``--model DIR`` went into measurement.json,
base.json and every row as this machine's absolute folder, a hub id was never pinned, and a
folder that moved was read wherever the old path pointed.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from tests.support.helpers import git, snapshot_state


def _eval(monte: Any, *args: str) -> Any:
    return monte("eval", "--yes", "--json", *args)


@pytest.fixture
def env(repo: Path, monte: Any) -> None:
    assert monte("env", "add", "--server", "parity", "--dev", "parity", "--test", "parity").code == 0


def _base_json(repo: Path, cohort: str, exp: str = "exp") -> dict[str, Any]:
    out: dict[str, Any] = json.loads(git(repo, "show", f"refs/heads/monte/{exp}/base/{cohort}:base.json"))
    return out


def test_a_model_inside_the_repository_is_recorded_relative_to_it(repo: Path, monte: Any, env: None,
                                                                  base_model: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    shutil.copytree(base_model, repo / "models" / "base")
    # typed relative to the working directory (a subfolder), it is still the repository's folder
    monkeypatch.chdir(repo / "recipes")
    r = monte("experiment", "init", "exp", "--eval", "parity", "--model", "../models/base", "--json")
    assert r.code == 0, r.out
    assert r.json()["measurement"]["model"] == "repo:models/base"
    monkeypatch.chdir(repo)
    r = _eval(monte)
    assert r.code == 0, r.out
    row = r.json()["runs"][0]
    assert row["model"] == "repo:models/base" and row["plan"]["base_model"] == "repo:models/base"
    assert row["plan"]["target"] == {"kind": "base", "run": None, "step": 0, "model": "repo:models/base",
                                     "recipe": None, "commit": None}
    assert _base_json(repo, row["cohort"])["model"] == "repo:models/base"
    assert "name:" not in (repo / ".monte.yaml").read_text()  # nothing to name


def test_a_folder_outside_is_named_in_the_config_only_when_recorded(repo: Path, monte: Any, env: None,
                                                                    base_model: Path) -> None:
    config = (repo / ".monte.yaml").read_text()
    r = monte("experiment", "init", "exp", "--eval", "parity", "--model", str(base_model), "--dry-run", "--json")
    assert r.code == 0 and r.json()["measurement"]["model"] == "name:seed0"
    assert (repo / ".monte.yaml").read_text() == config  # a dry run writes nothing
    assert monte("experiment", "init", "exp", "--eval", "parity", "--model", str(base_model)).code == 0
    assert f"seed0: {base_model}" in (repo / ".monte.yaml").read_text()
    plan = _eval(monte, "--dry-run").json()["plan"]
    assert plan["base_model"] == "name:seed0" and plan["base_folder"] == str(base_model)
    assert plan["target"]["folder"] == str(base_model)  # the plan shows the folder; rows never do
    row = _eval(monte).json()["runs"][0]
    assert row["model"] == "name:seed0" and str(base_model) not in json.dumps(row)


def test_a_name_resolves_through_the_environment_on_another_machine(repo: Path, monte: Any, env: None,
                                                                    base_model: Path, tiny_models: dict[int, Path],
                                                                    tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    assert monte("experiment", "init", "exp", "--eval", "parity", "--model", str(base_model)).code == 0
    cohort = _eval(monte).json()["runs"][0]["cohort"]
    # another machine: the same model elsewhere, said with MONTE_MODEL_SEED0 (it wins over .monte.yaml)
    there = tmp_path / "elsewhere" / "m"
    shutil.copytree(base_model, there)
    monkeypatch.setenv("MONTE_MODEL_SEED0", str(there))
    plan = _eval(monte, "--dry-run").json()["plan"]
    assert plan["cohort"] == cohort and plan["base_folder"] == str(there)
    # the name pointing at other weights is refused: a reference never silently reads another model
    monkeypatch.setenv("MONTE_MODEL_SEED0", str(tiny_models[1]))
    before = snapshot_state(repo)
    r = _eval(monte)
    assert r.code == 5, r.out
    err = r.json()["error"]
    assert err["code"] == "E_INTEGRITY" and "name:seed0" in err["message"] and str(tiny_models[1]) in err["message"]
    assert snapshot_state(repo) == before
    # unnamed here: the refusal says how to name it
    monkeypatch.delenv("MONTE_MODEL_SEED0")
    (repo / ".monte.yaml").write_text("version: 1\n")
    r = _eval(monte, "--dry-run")
    assert r.code == 4 and "MONTE_MODEL_SEED0=PATH" in r.json()["error"]["fix"]


def test_a_model_changed_in_place_is_refused(repo: Path, monte: Any, env: None, base_model: Path,
                                             tiny_models: dict[int, Path]) -> None:
    shutil.copytree(base_model, repo / "base-model")
    assert monte("experiment", "init", "exp", "--eval", "parity", "--model", "base-model").code == 0
    assert _eval(monte).code == 0
    shutil.rmtree(repo / "base-model")
    shutil.copytree(tiny_models[2], repo / "base-model")  # other weights where the ledger recorded seed 0
    for args in ((), ("--model", "base-model"), ("--model", str(repo / "base-model"))):
        r = _eval(monte, "--dry-run", *args)
        assert r.code == 5 and r.json()["error"]["code"] == "E_INTEGRITY", r.out
        assert "repo:base-model" in r.json()["error"]["message"]
    r = monte("train", "--recipe", "grpo-tiny", "--source", "parity", "--from-base", "--dry-run", "--json")
    assert r.code == 5 and r.json()["error"]["code"] == "E_INTEGRITY", r.out
    # other weights in a folder of their own are another cohort, as before
    shutil.copytree(tiny_models[2], repo / "other-model")
    assert _eval(monte, "--dry-run", "--model", "other-model").code == 0


def test_a_hub_model_is_recorded_at_its_pinned_commit(repo: Path, monte: Any, env: None, base_model: Path,
                                                      tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from monte.storage import hub

    sha = "c0ffee" + "0" * 34
    calls: list[tuple[str, str, str | None]] = []

    class Info:
        def __init__(self, sha: str) -> None:
            self.sha = sha

    class FakeHub:  # the hub cannot be reached here: it answers as huggingface_hub does
        def model_info(self, repo: str, revision: str | None = None) -> Info:
            calls.append(("model_info", repo, revision))
            return Info(sha)

        def snapshot_download(self, repo_id: str, revision: str | None = None) -> str:
            calls.append(("snapshot_download", repo_id, revision))
            folder = tmp_path / "hub-cache" / "snapshots" / str(revision)
            if not folder.exists():
                shutil.copytree(base_model, folder)
            return str(folder)

    monkeypatch.setattr(hub, "HfApi", FakeHub)
    r = monte("experiment", "init", "exp", "--eval", "parity", "--model", "org/tiny@main", "--json")
    assert r.code == 0, r.out
    assert r.json()["measurement"]["model"] == f"hf:org/tiny@{sha}"  # pinned, not downloaded
    assert calls == [("model_info", "org/tiny", "main")]
    row = _eval(monte).json()["runs"][0]
    assert row["model"] == f"hf:org/tiny@{sha}"
    assert calls[-1] == ("snapshot_download", "org/tiny", sha)  # the pinned commit, no second lookup
    assert ("model_info", "org/tiny", sha) not in calls


def test_a_bad_models_mapping_is_refused(repo: Path, monte: Any, env: None, base_model: Path) -> None:
    (repo / ".monte.yaml").write_text("version: 1\nmodels: [1, 2]\n")
    r = monte("experiment", "init", "exp", "--eval", "parity", "--model", str(base_model), "--json")
    assert r.code == 6 and r.json()["error"]["code"] == "E_BAD_INPUT", r.out
