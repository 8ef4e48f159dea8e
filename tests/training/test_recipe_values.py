"""A recipe's values (issue 29.1, issue 30.7): every value is checked against its TRL field's
type and a sane range, and against the machine that trains, before the ``started`` record and
with ``--dry-run`` too; a TRL config dumped with ``to_dict()`` pastes as a recipe.

Each case was reproduced on the code before this file: ``per_device_train_batch_size`` of
10**32 and ``dataloader_num_workers: 100000`` passed ``--dry-run``; ``deepspeed: /etc/passwd``
and ``fsdp: full_shard`` on a CPU machine recorded a started row and then failed inside TRL;
``SFTConfig().to_dict()`` was refused with 28 bad keys, ``GRPOConfig``'s with 29, and
``scale_rewards: false`` as "expects str, not bool".
"""

from __future__ import annotations

import importlib.util
import io
import json
import os
from pathlib import Path

import pytest

from monte.errors import MonteError
from monte.training.recipes import check_chunk, resolve
from tests.support.helpers import snapshot_state
from tests.support.trainhelp import SFT, write_recipe


def _dump(algorithm: str, **kw: object) -> str:
    """TRL's own config, as ``.to_dict()`` gives it, written as YAML (what a user pastes)."""
    import warnings

    from ruamel.yaml import YAML

    from monte.training.recipes import trl_config_class

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        d = trl_config_class(algorithm)(use_cpu=True, **kw).to_dict()  # use_cpu: this machine has no GPU
    out = io.StringIO()
    YAML(typ="safe", pure=True).dump({"algorithm": algorithm, **d}, out)
    return out.getvalue()


@pytest.mark.parametrize("algorithm", ["sft", "dpo", "grpo", "rloo"])
def test_a_trl_to_dict_dump_is_a_recipe(tmp_path: Path, algorithm: str) -> None:
    path = tmp_path / "pasted.yaml"
    path.write_text(_dump(algorithm))
    r = resolve(str(path), tmp_path)
    # what monte owns and the dump holds at TRL's default: ignored, with the reason, never a setting
    assert {"output_dir", "max_steps", "save_steps", "save_strategy", "report_to", "hub_token", "eval_strategy",
            "push_to_hub", "resume_from_checkpoint"} <= set(r.ignored)
    assert not set(r.ignored) & set(r.settings)
    assert r.settings["lr_scheduler_type"] == "linear"  # TRL's own default schedule
    assert "schedule_steps" not in r.settings


def test_a_dump_that_asks_for_what_monte_owns_is_still_refused(tmp_path: Path) -> None:
    path = tmp_path / "pasted.yaml"
    path.write_text(_dump("sft").replace("push_to_hub: false", "push_to_hub: true"))
    with pytest.raises(MonteError) as e:
        resolve(str(path), tmp_path)
    assert e.value.code == "E_BAD_INPUT" and "'push_to_hub'" in e.value.message and "True" in e.value.message


def test_every_value_trl_takes_monte_takes(tmp_path: Path) -> None:
    path = tmp_path / "r.yaml"
    path.write_text("algorithm: grpo\nnum_generations: 2\nper_device_train_batch_size: 2\nscale_rewards: false\n"
                    "lr_scheduler_type: linear\n")
    s = resolve(str(path), tmp_path).settings
    assert s["scale_rewards"] is False and s["lr_scheduler_type"] == "linear"


def test_a_decaying_schedule_without_a_horizon_spans_one_chunk_and_is_not_continued(tmp_path: Path) -> None:
    path = tmp_path / "lin.yaml"
    path.write_text(SFT.replace("lr_scheduler_type: constant", "lr_scheduler_type: linear"))
    rec = resolve(str(path), tmp_path)
    check_chunk(rec, 0, 4)  # from the base: the schedule spans the chunk, as TRL's max_steps would
    with pytest.raises(MonteError) as e:
        check_chunk(rec, 4, 4)
    assert e.value.code == "E_REFUSED" and "schedule_steps" in e.value.fix and "stage boundary" in e.value.fix


def test_a_pasted_dump_trains_and_its_plan_names_what_it_ignored(repo: Path, monte, trainable: str) -> None:
    write_recipe(repo, "pasted", _dump("sft", per_device_train_batch_size=8, max_length=32))
    r = monte("train", "--recipe", "pasted", "--source", "parity-sft", "--smoke", "--dry-run")
    assert r.code == 0, r.out + r.err
    assert "recipe keys ignored (TRL's defaults in a pasted dump): " in r.out
    assert "output_dir" in r.out and "save_steps" in r.out
    r = monte("train", "--recipe", "pasted", "--source", "parity-sft", "--smoke", "--yes", "--json")
    assert r.code == 0, r.out + r.err
    assert r.json()["run"]["status"] == "succeeded"
    assert "output_dir" not in r.json()["run"]["plan"]["settings"]


def test_a_pasted_dpo_dump_plans_and_trains(repo: Path, monte, prefs: str) -> None:
    write_recipe(repo, "pasted-dpo", _dump("dpo", per_device_train_batch_size=8, max_length=32))
    r = monte("train", "--recipe", "pasted-dpo", "--source", "parity-pref", "--from-base", "--dry-run")
    assert r.code == 0, r.out + r.err
    assert "plan: train dpo:parity-pref from base" in r.out and "recipe keys ignored" in r.out
    r = monte("train", "--recipe", "pasted-dpo", "--source", "parity-pref", "--smoke", "--yes", "--json")
    assert r.code == 0, r.out + r.err
    assert r.json()["run"]["status"] == "succeeded"
    assert r.json()["run"]["plan"]["settings"]["loss_type"] == ["sigmoid"]


def _cpus_plus_one() -> str:
    return f"dataloader_num_workers: {(os.cpu_count() or 1) + 1}"


HOSTILE = [
    ("per_device_train_batch_size: 100000000000000000000000000000000", "E_BAD_INPUT", "out of range"),
    ("per_device_train_batch_size: 1e32", "E_BAD_INPUT", "1e+32"),
    ("dataloader_num_workers: 100000", "E_BAD_INPUT", "out of range"),
    (_cpus_plus_one(), "E_PREFLIGHT", "CPUs"),
    ("deepspeed: /etc/passwd", "E_BAD_INPUT", "not a readable DeepSpeed JSON config"),
    ("deepspeed: {zero_optimization: {stage: 2}}", "E_PREFLIGHT", "no deepspeed package"),
    ("fsdp: full_shard", "E_PREFLIGHT", "CUDA"),
]


@pytest.mark.parametrize(("line", "code", "why"), HOSTILE, ids=[h[0].split(":")[0] + str(i) for i, h in enumerate(HOSTILE)])
def test_a_hostile_value_refuses_before_anything_is_written(repo: Path, monte, trainable: str, line: str,
                                                            code: str, why: str) -> None:
    key = line.split(":")[0]
    if key == "deepspeed" and code == "E_PREFLIGHT" and importlib.util.find_spec("deepspeed") is not None:
        pytest.skip("deepspeed is installed here")
    if key == "fsdp":
        import torch

        if torch.cuda.is_available():
            pytest.skip("this machine has CUDA")
    text = "\n".join(x for x in SFT.splitlines() if not x.startswith(key + ":")) + "\n" + line + "\n"
    write_recipe(repo, "hostile", text)
    before = snapshot_state(repo)
    for how in ("--dry-run", "--yes"):  # the plan refuses, and so does the real command
        r = monte("train", "--recipe", "hostile", "--source", "parity-sft", "--smoke", how, "--json")
        err = json.loads(r.out)["error"]
        assert err["code"] == code and r.code != 0 and r.code != 1, r.out  # never E_INTERNAL
        assert key in err["message"] and why in err["message"], err
        assert err["fix"], err
        assert snapshot_state(repo) == before  # no started row, no run folder


def test_a_schedule_past_its_horizon_is_refused_saying_the_next_stage_warms_up_again(tmp_path: Path) -> None:
    """Issue 46.14: past schedule_steps the fix said only "raise schedule_steps in a new recipe";
    a new recipe is a new stage, whose schedule restarts its warmup (a 12.5-point dip for the agent
    that followed it). The refusal now says so, and how to go on without the warmup."""
    path = tmp_path / "cos.yaml"
    path.write_text(SFT.replace("lr_scheduler_type: constant", "lr_scheduler_type: cosine\nwarmup_steps: 2\n"
                                "schedule_steps: 8"))
    rec = resolve(str(path), tmp_path)
    check_chunk(rec, 4, 4)  # the horizon's last chunk
    with pytest.raises(MonteError) as e:
        check_chunk(rec, 8, 4)
    assert e.value.code == "E_REFUSED" and "its schedule ends at step 8" in e.value.message
    fix = e.value.fix
    assert "starts afresh at its own step 0, warmup included" in fix and "warmup_steps: 0" in fix
    assert "a new recipe, schedule_steps raised or not, is a new stage" in fix
