"""Issue 43, case 1 for training: a chunk trains on the parent it proved.

On main the plan proved the parent's files (against its lineage commit) and the trainer then
loaded the folder by path, after the ``started`` record: a ``model.safetensors`` swapped in
between was what the chunk trained from, while its lineage named the proven parent. A chunk now
copies the folders it loads (the initial model, the parent's trainer state, a teacher) into a
private staging folder before ``started``, hashing each file in the one read that copies it; a
mismatch refuses ``E_INTEGRITY`` with nothing written, and the copy is what this process and
every rank of a launch load.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from tests.support.helpers import snapshot_state
from tests.support.trainhelp import distill, write_recipe

SFT_OTHER = """\
# another SFT recipe: crossing to it from an sft-t checkpoint is a stage boundary
algorithm: sft
learning_rate: 1.0e-3
lr_scheduler_type: constant
per_device_train_batch_size: 16
max_length: 32
"""


def _parent(sft_chunk: dict[str, Any]) -> str:
    """The parent: sft-t from the base model, 4 steps (``sft_chunk``, trained once per worker)."""
    return str(sft_chunk["run"])


def _run_folder(repo: Path, run: str) -> Path:
    return repo / ".monte" / "runs" / "exp" / run


def _refused_before_started(repo: Path, plan: Any) -> Any:
    from monte import api

    before = snapshot_state(repo)
    try:
        api.run_train(plan)
    except Exception as e:  # noqa: BLE001 - the refusal, checked by the caller
        after = snapshot_state(repo)
        assert after["refs"] == before["refs"]  # no started record: nothing written to the ledger
        assert not list((repo / ".monte" / "tmp").glob("freeze-*"))  # no private copy left behind
        return e
    raise AssertionError("a chunk trained from weights swapped after its plan proved them")


def test_a_parent_swapped_after_the_plan_is_refused_at_a_stage_boundary(sft_chunk: dict[str, Any], repo: Path, monte,
                                                                        tiny_models) -> None:
    from monte import api

    run = _parent(sft_chunk)
    write_recipe(repo, "sft-other", SFT_OTHER)
    plan = api.plan_train(recipe="sft-other", source="parity-sft", parent=f"{run}@4")
    assert plan.boundary  # the parent's servable folder is the initial model
    ck = _run_folder(repo, run) / "checkpoints" / "step-4"
    shutil.copyfile(tiny_models[1] / "model.safetensors", ck / "model.safetensors")  # the swap
    err = _refused_before_started(repo, plan)
    assert getattr(err, "code", None) == "E_INTEGRITY" and "model.safetensors" in str(err), err


def test_a_trainer_state_swapped_after_the_plan_is_refused_in_a_continuation(sft_chunk: dict[str, Any], repo: Path, monte,
                                                                             tiny_models) -> None:
    """A same-recipe continuation loads the parent's weights from its trainer state (resume),
    not from the servable folder: those bytes are proven too."""
    from monte import api

    run = _parent(sft_chunk)
    plan = api.plan_train(recipe="sft-t", source="parity-sft", parent=f"{run}@4")
    assert plan.resume_from and not plan.boundary
    state = _run_folder(repo, run) / "trainer" / "checkpoint-4"
    shutil.copyfile(tiny_models[1] / "model.safetensors", state / "model.safetensors")
    err = _refused_before_started(repo, plan)
    assert getattr(err, "code", None) == "E_INTEGRITY" and "model.safetensors" in str(err), err
    assert "trainer state" in str(err)


def _corrupt_at_started(paths: list[Path]) -> Any:
    """An ``on_transition`` that ruins the proven files right after ``started`` lands: loaded by
    path, the chunk would read garbage and fail."""
    def hook(row: Any, transition: str) -> None:
        if transition == "started":
            for p in paths:
                p.write_bytes(b"not a safetensors file")

    return hook


def test_a_continuation_trains_on_the_copy_it_proved_not_the_path(sft_chunk: dict[str, Any], repo: Path, monte) -> None:
    from monte import api

    run = _parent(sft_chunk)
    plan = api.plan_train(recipe="sft-t", source="parity-sft", parent=f"{run}@4")
    folder = _run_folder(repo, run)
    ruined = [folder / "trainer" / "checkpoint-4" / "model.safetensors",
              folder / "checkpoints" / "step-4" / "model.safetensors"]
    res = api.run_train(plan, on_transition=_corrupt_at_started(ruined))
    assert res.run["status"] == "succeeded", res.run
    assert [c["step"] for c in res.run["checkpoints"]] == [8]
    assert not list((repo / ".monte" / "tmp").glob("freeze-*"))  # the copies are removed after the chunk


def test_every_rank_of_a_launch_loads_the_proven_copy(sft_chunk: dict[str, Any], repo: Path, monte) -> None:
    """Two ranks under torchrun: each loads the main process's private copy of the parent, so
    a parent ruined after ``started`` is not what either rank trains from."""
    from monte import api

    run = _parent(sft_chunk)
    write_recipe(repo, "sft-other", SFT_OTHER)
    plan = api.plan_train(recipe="sft-other", source="parity-sft", parent=f"{run}@4", processes=2)
    ck = _run_folder(repo, run) / "checkpoints" / "step-4"
    res = api.run_train(plan, on_transition=_corrupt_at_started([ck / "model.safetensors"]))
    assert res.run["status"] == "succeeded", res.run
    assert res.run["plan"]["launch"]["world_size"] == 2
    assert not list((repo / ".monte" / "tmp").glob("freeze-*"))


def test_a_teacher_swapped_after_the_plan_is_refused(ready: str, repo: Path, monte, tiny_models,
                                                     tmp_path: Path) -> None:
    """A distillation chunk's teacher is loaded from a private copy too, hashed against the
    files its plan proved."""
    from monte import api

    teacher = tmp_path / "my-teacher"
    shutil.copytree(tiny_models[1], teacher)
    write_recipe(repo, "distill-mine", distill(teacher))
    plan = api.plan_train(recipe="distill-mine", source="parity", from_base=True)
    shutil.copyfile(tiny_models[2] / "model.safetensors", teacher / "model.safetensors")
    err = _refused_before_started(repo, plan)
    assert getattr(err, "code", None) == "E_INTEGRITY" and "the teacher" in str(err), err
