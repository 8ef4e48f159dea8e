"""Recipes (`monte/training/recipes.py`): what a recipe may say, how a name resolves, what the
row records. Refusals name the key and the fix; a recipe can never change the chunk size."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

import monte
from monte.errors import MonteError
from monte.training.recipes import resolve
from tests.support.trainhelp import GRPO, SFT, refused, write_recipe

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
    assert "a field of trl.GRPOConfig, for a grpo recipe" in e.message and "trl.SFTConfig" in e.fix


@pytest.mark.parametrize(("line", "key"), [
    ("learning_rate: fast", "learning_rate"),
    ("learning_rate: 2.0", "learning_rate"),  # a number, but not a learning rate (lt 1)
    ("per_device_train_batch_size: 2.5", "per_device_train_batch_size"),
    ("per_device_train_batch_size: 0", "per_device_train_batch_size"),
    ("lr_scheduler_type: cosyne", "lr_scheduler_type"),
    ("per_device_train_batch_size: 100000000000000000000000000000000", "per_device_train_batch_size"),
    ("dataloader_num_workers: 100000", "dataloader_num_workers"),  # a fork bomb, not a setting
    ("seed: .inf", "seed"),
    ("packing: 3", "packing"),  # a TRL field, checked against its annotation
    ("optim: nosuch", "optim"),  # a TRL field, checked by TRL's own constructor
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
        # resolve refuses an unknown algorithm by itself; what a user reads is the name's promise
        assert resolve(name, tmp_path).algorithm == name.split("-")[0], name


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


def test_cli_refuses_a_bad_recipe_with_exit_6_and_writes_nothing(repo: Path, monte, ready: str) -> None:
    # baselines first: a missing one is refused before TRL proves the recipe's fields (issue 46.2)
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


def test_config_lists_the_repo_recipe_in_place_of_the_packaged_one(repo: Path, monte) -> None:
    mine = write_recipe(repo, "sft-tiny", SFT)
    recipes = monte("config", "--json").json()["recipes"]
    assert recipes["sft-tiny"] == str(mine)
    assert recipes["grpo-tiny"] == str(PACKAGED / "grpo-tiny.yaml")


def test_the_row_records_the_recipe_name_and_content_hash(repo: Path, monte, trainable: str, tmp_path: Path) -> None:
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


# --- TRL-native recipes: every field of TRL's own config, except what monte owns ---------------------


def _trl_dump(algorithm: str) -> str:
    """Every field of TRL's config class at its default, as `yaml.dump(asdict(config))` would paste
    it, minus the fields monte owns."""
    import dataclasses
    import enum
    import io

    from ruamel.yaml import YAML

    from monte.training.recipes import OWNED, trl_config_class

    dump: dict[str, object] = {}
    for f in dataclasses.fields(trl_config_class(algorithm)):
        if not f.init or f.name in OWNED:
            continue
        value = (f.default if f.default is not dataclasses.MISSING
                 else f.default_factory() if f.default_factory is not dataclasses.MISSING else None)
        dump[f.name] = value.value if isinstance(value, enum.Enum) else value
    out = io.StringIO()
    YAML(typ="safe", pure=True).dump(dump, out)
    return out.getvalue()


@pytest.mark.parametrize("algorithm", ["sft", "dpo", "grpo", "rloo", "distillation"])
def test_a_full_trl_config_dump_is_a_recipe(tmp_path: Path, algorithm: str) -> None:
    import dataclasses

    from monte.training.recipes import OWNED, trl_config_class

    dump = _trl_dump(algorithm)
    # TRL's default schedule is linear, a decaying one: monte asks for its horizon, nothing else
    head = f"algorithm: {algorithm}\nschedule_steps: 1000\n" + (
        f"teacher: {tmp_path}\n" if algorithm == "distillation" else "")
    path = tmp_path / "pasted.yaml"
    path.write_text(head + dump)
    r = resolve(str(path), tmp_path)
    fields = {f.name for f in dataclasses.fields(trl_config_class(algorithm)) if f.init}
    assert len(fields - set(OWNED)) > 100  # not a hand-kept list of a dozen keys
    assert r.settings["lr_scheduler_type"] == "linear" and r.settings["schedule_steps"] == 1000
    assert {"optim", "num_train_epochs", "logging_steps", "gradient_checkpointing"} <= set(r.settings)
    assert r.sha256 == hashlib.sha256(path.read_bytes()).hexdigest()


def test_five_bad_keys_are_named_in_one_refusal(tmp_path: Path) -> None:
    e = _refusal(tmp_path, SFT + "save_steps: 10\nreport_to: wandb\npush_to_hub: true\nbach_size: 4\n"
                 "warmup_ratio: 0.1\n")
    assert "5 bad keys" in e.message
    for key, why in [("save_steps", "one checkpoint per chunk"), ("report_to", "event file"), ("push_to_hub", "--push"),
                     ("bach_size", "unknown key"), ("warmup_ratio", "folded it into warmup_steps")]:
        assert f"'{key}': " in e.message and why in e.message.split(f"'{key}': ")[1], key
        assert f"'{key}'" in e.fix
    assert "per_device_train_batch_size" in e.fix  # bach_size: the likely meaning


def test_trl_keys_users_paste_are_accepted(tmp_path: Path) -> None:
    path = tmp_path / "r.yaml"
    path.write_text(SFT.replace("lr_scheduler_type: constant\n", "") + "lr_scheduler_type: cosine\nschedule_steps: 200\n"
                    "warmup_steps: 0.1\nbf16: false\ngradient_checkpointing: false\npacking: true\n"
                    "num_train_epochs: 1\noptim: adamw_torch\nlogging_steps: 5\nloss_type: nll\n"
                    "lr_scheduler_kwargs: {}\n")
    s = resolve(str(path), tmp_path).settings
    assert s["packing"] is True and s["lr_scheduler_kwargs"] == {} and s["warmup_steps"] == 0.1
    path.write_text(GRPO + "use_vllm: false\nloss_type: dapo\nnum_iterations: 1\nscale_rewards: batch\n"
                    "reward_weights: [1.0]\n")
    s = resolve(str(path), tmp_path).settings
    assert s["scale_rewards"] == "batch" and s["reward_weights"] == [1.0]


def test_an_existing_recipes_identity_and_settings_do_not_change(tmp_path: Path) -> None:
    # the bytes are the identity; the recorded settings of a recipe that sets no new key are as before
    r = resolve("sft-tiny", tmp_path)
    assert r.sha256 == hashlib.sha256((PACKAGED / "sft-tiny.yaml").read_bytes()).hexdigest()
    assert r.settings == {"model": None, "learning_rate": 3e-3, "lr_scheduler_type": "constant_with_warmup",
                          "warmup_steps": 10, "per_device_train_batch_size": 128, "gradient_accumulation_steps": 1,
                          "weight_decay": 0.0, "max_grad_norm": 1.0, "seed": 0, "algorithm": "sft",
                          "max_length": 64, "completion_only_loss": True}


def test_an_alias_bomb_is_refused_before_it_expands(tmp_path: Path) -> None:
    lines = ["algorithm: sft", "a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    lines += [f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 10) + "]" for i in range(1, 9)]
    e = _refusal(tmp_path, "\n".join(lines) + "\nreward_weights: *a8\n")
    assert "more than 10000 values" in e.message


def test_a_pasted_trl_dump_trains(repo: Path, monte, trainable: str) -> None:
    write_recipe(repo, "pasted", "algorithm: sft\nschedule_steps: 1000\n" + _trl_dump("sft"))
    r = monte("train", "--recipe", "pasted", "--source", "parity-sft", "--smoke", "--yes", "--json")
    assert r.code == 0, r.out + r.err
    assert r.json()["run"]["status"] == "succeeded"


def test_every_recipe_setting_reaches_trls_config_and_monte_keeps_its_own(tmp_path: Path) -> None:
    from monte.training.trainers import trainer_args

    path = tmp_path / "r.yaml"
    path.write_text(SFT.replace("lr_scheduler_type: constant\n", "lr_scheduler_type: cosine\nschedule_steps: 100\n")
                    + "optim: adamw_torch\nlogging_steps: 5\nbf16: null\npacking: true\n")
    rec = resolve(str(path), tmp_path)
    args = trainer_args(rec, out=tmp_path / "out", end=8, smoke=False, cuda=False)
    assert (args["optim"], args["logging_steps"], args["packing"], args["lr_scheduler_type"]) == (
        "adamw_torch", 5, True, "cosine")
    assert args["bf16"] is False  # null: monte's default
    assert args["max_steps"] == 100 and args["save_steps"] == 8  # the horizon; the save at the chunk's end
    assert args["report_to"] == [] and args["output_dir"] == str(tmp_path / "out")
    assert not {"algorithm", "model", "schedule_steps"} & set(args)
    from trl import SFTConfig

    SFTConfig(**args)  # TRL takes them as they are


@pytest.mark.parametrize("algorithm", ["grpo", "rloo"])
def test_a_sampling_chunk_may_not_end_inside_a_generation_buffer(tmp_path: Path, algorithm: str) -> None:
    from monte.training.recipes import check_chunk

    path = tmp_path / "g.yaml"
    path.write_text(GRPO.replace("algorithm: grpo", f"algorithm: {algorithm}") + "num_iterations: 2\n")
    rec = resolve(str(path), tmp_path)
    check_chunk(rec, 0, 4)  # two buffers of two micro-batches each
    with pytest.raises(MonteError) as e:
        check_chunk(rec, 0, 3)
    assert e.value.code == "E_REFUSED" and "generation buffer" in e.value.message
