"""Past one GPU: the command a multi-GPU box gets (one `monte train --processes N`, which records),
and the rank launchers it starts there (checked by accelerate's own parser), and the rule that
only the main process records. No GPU exists here; the multi-process path itself runs for real on
CPU (gloo) in tests/training/test_launch.py."""

from __future__ import annotations

import sys

import pytest

from monte.remote.submit import gpus_of_type
from monte.training.launch import launch_command
from monte.training.run import process_rank


@pytest.mark.parametrize("name,gpus", [("gpu_8x_h100_sxm5", 8), ("gpu_1x_h100_pcie", 1), ("gpu_2x_a100", 2),
                                       ("cpu_4x_general", 1), ("", 1)])
def test_gpus_of_a_lambda_type(name: str, gpus: int) -> None:
    assert gpus_of_type(name) == gpus


def test_an_eight_gpu_box_runs_the_chunk_under_accelerate_one_process_per_gpu() -> None:
    from accelerate.commands.launch import launch_command_parser

    from monte.training.launch import plan_launch, rank_command

    args = ["--experiment", "exp", "--recipe", "grpo-small", "--source", "parity", "--adopt", "abc", "--push", "--yes"]
    argv = launch_command(sys.executable, args, gpus_of_type("gpu_8x_h100_sxm5"))
    assert argv == [sys.executable, "-m", "monte", "train", *args, "--processes", "8"]
    # that one process plans the launch as a box with GPUs would, and starts accelerate launch
    spec = plan_launch({"per_device_train_batch_size": 64}, "grpo", processes=8, cuda=True)
    assert (spec.launcher, spec.backend, spec.world_size, spec.per_device_batch) == ("accelerate", "nccl", 8, 8)
    ranks = rank_command(spec, 0, 29500, "/runs/exp/abc/launch/job.json")
    assert ranks[:3] == [sys.executable, "-m", "accelerate.commands.launch"]
    parsed = launch_command_parser().parse_args(ranks[3:])
    assert parsed.num_processes == 8 and parsed.multi_gpu and parsed.module
    assert parsed.training_script == "monte.training.launch_rank"
    assert parsed.training_script_args == ["/runs/exp/abc/launch/job.json"]


def test_one_gpu_or_none_runs_one_plain_process() -> None:
    assert launch_command("py", ["--smoke"], 1) == ["py", "-m", "monte", "train", "--smoke"]


def test_only_the_main_process_records(monkeypatch: pytest.MonkeyPatch) -> None:
    from monte.errors import MonteError
    from monte.training.run import run_train

    monkeypatch.setenv("RANK", "3")
    assert process_rank() == 3

    class Plan:  # the rank check comes before anything reads the plan or the ledger
        adopt = None
        experiment = "exp"

    with pytest.raises(MonteError) as e:
        run_train(None, Plan())  # type: ignore[arg-type]
    assert e.value.code == "E_USAGE" and "--remote" in e.value.fix
