"""Recipes (`monte/training/recipes.py`): what a recipe may say, how a name resolves, what the
row records. Refusals name the key and the fix; a recipe can never change the chunk size."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
from trainhelp import SFT, refused, write_recipe

import monte
from monte.errors import MonteError
from monte.training.recipes import resolve

PACKAGED = Path(monte.__file__).parent / "recipes"


def _refusal(tmp_path: Path, text: str) -> MonteError:
    path = tmp_path / "r.yaml"
    path.write_text(text)
    with pytest.raises(MonteError) as e:
        resolve(str(path), tmp_path)
    assert e.value.code == "E_BAD_INPUT" and int(e.value.exit_code) == 6
    assert str(path) in e.value.message  # which file
    return e.value


def test_a_valid_recipe_resolves_with_defaults_filled_in(tmp_path: Path) -> None:
    path = tmp_path / "mine.yaml"
    path.write_text(SFT)
    r = resolve(str(path), tmp_path)
    assert (r.name, r.algorithm, r.spelled_as_path) == ("mine", "sft", True)
    assert r.sha256 == hashlib.sha256(path.read_bytes()).hexdigest()
    assert r.settings["per_device_train_batch_size"] == 16 and r.settings["learning_rate"] == 3e-3
    assert r.settings["warmup_steps"] == 0 and r.settings["seed"] == 0  # defaults are recorded too
    assert r.identity() == {"name": "mine", "sha256": r.sha256, "algorithm": "sft"}


def test_unknown_key_is_refused_naming_the_key_and_the_keys_allowed(tmp_path: Path) -> None:
    e = _refusal(tmp_path, SFT + "batch_size: 16\n")
    assert "'batch_size'" in e.message and "unknown key" in e.message
    assert "batch_size" in e.fix and "per_device_train_batch_size" in e.fix


def test_a_key_of_another_algorithm_is_unknown_here(tmp_path: Path) -> None:
    e = _refusal(tmp_path, SFT + "num_generations: 4\n")
    assert "'num_generations'" in e.message and "unknown key" in e.message
    assert "max_length" in e.fix and "num_generations" not in e.fix.split(":")[-1]


@pytest.mark.parametrize(("line", "key"), [
    ("learning_rate: fast", "learning_rate"),
    ("learning_rate: 2.0", "learning_rate"),  # a number, but not a learning rate (lt 1)
    ("per_device_train_batch_size: 2.5", "per_device_train_batch_size"),
    ("per_device_train_batch_size: 0", "per_device_train_batch_size"),
    ("lr_scheduler_type: cosine", "lr_scheduler_type"),  # decaying schedules jump at chunk edges
    ("max_length: [32]", "max_length"),
])
def test_wrong_type_or_value_is_refused_naming_the_key(tmp_path: Path, line: str, key: str) -> None:
    text = "\n".join(x for x in SFT.splitlines() if not x.startswith(key + ":")) + "\n" + line + "\n"
    e = _refusal(tmp_path, text)
    assert f"'{key}'" in e.message
    assert f"fix or remove '{key}'" in e.fix


def test_missing_algorithm_is_refused(tmp_path: Path) -> None:
    e = _refusal(tmp_path, "learning_rate: 1.0e-4\n")
    assert "no 'algorithm'" in e.message
    assert "algorithm: sft" in e.fix


def test_unknown_algorithm_is_refused_listing_the_known_ones(tmp_path: Path) -> None:
    e = _refusal(tmp_path, "algorithm: ppo\n")
    assert "'ppo'" in e.message
    assert all(a in e.fix for a in ("sft", "grpo", "distillation"))


@pytest.mark.parametrize("key", ["steps", "max_steps", "steps_per_chunk"])
def test_a_recipe_cannot_change_the_chunk_size(tmp_path: Path, key: str) -> None:
    e = _refusal(tmp_path, SFT + f"{key}: 100\n")
    assert f"'{key}'" in e.message and "cannot be set by a recipe" in e.message
    assert "steps_per_chunk" in e.fix and "remove the key" in e.fix


@pytest.mark.parametrize(("text", "what"), [
    ("algorithm: sft\nlearning_rate: [1\n", "not valid YAML"),
    ("algorithm: sft\nalgorithm: grpo\n", "not valid YAML"),  # a duplicate key is not a choice
    ("algorithm: sft\n\tmax_length: 3\n", "not valid YAML"),
    ("", "must be a mapping"),
    ("- algorithm: sft\n", "must be a mapping"),
])
def test_invalid_yaml_is_refused(tmp_path: Path, text: str, what: str) -> None:
    e = _refusal(tmp_path, text)
    assert what in e.message and e.fix


def test_a_list_as_algorithm_is_refused_not_a_crash(tmp_path: Path) -> None:
    e = _refusal(tmp_path, "algorithm: [sft]\n")
    assert "algorithm" in e.message


def test_a_boolean_batch_size_is_a_wrong_type(tmp_path: Path) -> None:
    text = SFT.replace("per_device_train_batch_size: 16", "per_device_train_batch_size: true")
    e = _refusal(tmp_path, text)
    assert "'per_device_train_batch_size'" in e.message


def test_names_resolve_repo_first_then_packaged(tmp_path: Path) -> None:
    packaged = resolve("sft-tiny", tmp_path)
    assert packaged.path == str(PACKAGED / "sft-tiny.yaml") and not packaged.spelled_as_path
    assert packaged.sha256 == hashlib.sha256((PACKAGED / "sft-tiny.yaml").read_bytes()).hexdigest()
    mine = write_recipe(tmp_path, "sft-tiny", SFT)  # the repo's own recipe of the same name
    shadow = resolve("sft-tiny", tmp_path)
    assert shadow.path == str(mine) and shadow.name == "sft-tiny"
    assert shadow.sha256 == hashlib.sha256(SFT.encode()).hexdigest() != packaged.sha256
    assert shadow.settings["per_device_train_batch_size"] == 16
    (tmp_path / "recipes" / "other.yml").write_text(SFT)  # .yml resolves too
    assert resolve("other", tmp_path).path == str(tmp_path / "recipes" / "other.yml")


def test_every_packaged_recipe_is_valid(tmp_path: Path) -> None:
    names = sorted(p.stem for p in PACKAGED.glob("*.y*ml"))
    assert names
    for name in names:
        assert resolve(name, tmp_path).algorithm in ("sft", "grpo", "distillation")


def test_path_spelled_recipes_resolve_relative_to_cwd(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "elsewhere" / "sft-tiny.yaml").write_text(SFT)
    monkeypatch.chdir(tmp_path)
    r = resolve("elsewhere/sft-tiny.yaml", tmp_path / "some-repo")
    assert r.spelled_as_path and r.path == str(tmp_path / "elsewhere" / "sft-tiny.yaml")
    assert r.name == "sft-tiny"  # the stem, but its own bytes: not the packaged recipe
    assert r.sha256 == hashlib.sha256(SFT.encode()).hexdigest()


def test_missing_recipes_are_not_found(tmp_path: Path) -> None:
    with pytest.raises(MonteError) as e:
        resolve("no-such-recipe", tmp_path)
    assert e.value.code == "E_NOT_FOUND" and "monte config" in e.value.fix
    with pytest.raises(MonteError) as e:
        resolve(str(tmp_path / "nope.yaml"), tmp_path)
    assert e.value.code == "E_NOT_FOUND" and "nope.yaml" in e.value.message


def test_cli_refuses_a_bad_recipe_with_exit_6_and_writes_nothing(repo: Path, monte, trainable: str) -> None:  # type: ignore[no-untyped-def]
    write_recipe(repo, "bad", SFT + "bach_size: 4\n")
    for extra in (["--from-base"], ["--smoke"]):
        err = refused(monte, repo, "train", "--recipe", "bad", "--source", "parity-sft", "--yes", *extra,
                      code="E_BAD_INPUT", exit_code=6)
        assert "'bach_size'" in err["message"] and "per_device_train_batch_size" in err["fix"]
    write_recipe(repo, "long", SFT + "max_steps: 100\n")
    err = refused(monte, repo, "train", "--recipe", "long", "--source", "parity-sft", "--smoke", "--yes",
                  code="E_BAD_INPUT", exit_code=6)
    assert "steps_per_chunk" in err["fix"]
    err = refused(monte, repo, "train", "--recipe", "nope", "--source", "parity-sft", "--smoke", "--yes",
                  code="E_NOT_FOUND", exit_code=4)
    assert "monte config" in err["fix"]


def test_config_lists_the_repo_recipe_in_place_of_the_packaged_one(repo: Path, monte) -> None:  # type: ignore[no-untyped-def]
    mine = write_recipe(repo, "sft-tiny", SFT)
    recipes = monte("config", "--json").json()["recipes"]
    assert recipes["sft-tiny"] == str(mine)
    assert recipes["grpo-tiny"] == str(PACKAGED / "grpo-tiny.yaml")


def test_the_row_records_the_recipe_name_and_content_hash(repo: Path, monte, trainable: str, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    # a path-spelled recipe (smoke: no baseline needed, and it is the cheapest real run)
    path = tmp_path / "outside" / "my-sft.yaml"
    path.parent.mkdir()
    path.write_text(SFT.replace("# small SFT", "# another comment, another hash"))
    r = monte("train", "--recipe", str(path), "--source", "parity-sft", "--smoke", "--yes", "--json")
    assert r.code == 0, r.out + r.err
    run = r.json()["run"]["run"]
    shown = monte("show", run, "--json").json()
    assert shown["plan"]["recipe"] == {"name": "my-sft", "algorithm": "sft",
                                       "sha256": hashlib.sha256(path.read_bytes()).hexdigest()}
    assert shown["plan"]["settings"]["max_length"] == 32
    # a bare name: the repo's file, hashed as it is on disk
    plan = monte("train", "--recipe", "sft-t", "--source", "parity-sft", "--smoke", "--dry-run", "--json")
    assert plan.code == 0, plan.out
    rec = plan.json()["plan"]["recipe"]
    assert rec["name"] == "sft-t" and rec["path"] == str(repo / "recipes" / "sft-t.yaml")
    assert rec["sha256"] == hashlib.sha256((repo / "recipes" / "sft-t.yaml").read_bytes()).hexdigest()
