"""`--remote` runs what the plan showed: the box's command line is derived from the plan
(monte/remote/jobargs.py), and planning it again gives the same plan. Before, the CLI rebuilt the
box's arguments by hand and dropped --processes, --nodes, --port and --accelerate-config (train)
and --processes (eval): the laptop recorded a launch the box never ran."""

from __future__ import annotations

import socket
from pathlib import Path
from typing import Any

import pytest

from monte import api
from monte.errors import MonteError
from monte.remote import jobargs

#: what a train plan decides (execution details that each machine picks itself are left out:
#: versions, python, GPUs)
LAUNCH = ("world_size", "nodes", "processes_per_node", "backend", "launcher", "port", "config_sha256",
          "effective_batch", "per_device_batch", "gradient_accumulation_steps")


@pytest.fixture(autouse=True)
def _remote_needs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A ``--remote`` run pushes its results and its checkpoints: the plan refuses without a results
    bucket (a folder here) and a hub repo (named only; nothing is uploaded by a plan)."""
    monkeypatch.setenv("MONTE_BUCKET", str(tmp_path / "bucket"))
    monkeypatch.setenv("MONTE_HUB_REPO", "someone/tiny")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _same_train(a: dict[str, Any], b: dict[str, Any]) -> None:
    for key in ("experiment", "cohort", "base_model", "parent", "boundary", "start_step", "steps", "smoke"):
        assert a[key] == b[key], key
    assert a["recipe"]["sha256"] == b["recipe"]["sha256"] and a["source"]["name"] == b["source"]["name"]
    for key in LAUNCH:
        assert a["launch"][key] == b["launch"][key], key


def test_every_launch_flag_round_trips_through_the_box_job(ready: str, repo: Path, monte) -> None:
    cfg = repo / "configs" / "two.yaml"
    cfg.parent.mkdir()
    cfg.write_text("compute_environment: LOCAL_MACHINE\ndistributed_type: MULTI_CPU\nnum_machines: 1\n"
                   "num_processes: 2\nmixed_precision: 'no'\nuse_cpu: true\n")
    for kw in ({"processes": 2}, {"processes": 1, "nodes": 2}, {"processes": None, "accelerate_config": "cpu-ddp"},
               {"processes": 2, "port": _free_port()}, {"processes": None, "accelerate_config": str(cfg)}):
        plan = api.plan_train(recipe="sft-t", source="parity-sft", from_base=True, remote=True, **kw)
        args = jobargs.train_args(plan, repo)
        again = monte("train", *args, "--dry-run", "--json")
        assert again.code == 0, (kw, again.out + again.err)
        _same_train(plan.model_dump(mode="json"), again.json()["plan"])


def test_a_yaml_outside_the_repository_refuses_before_anything_is_submitted(ready: str, repo: Path,
                                                                            tmp_path: Path) -> None:
    cfg = tmp_path / "elsewhere.yaml"
    cfg.write_text("distributed_type: MULTI_CPU\nnum_machines: 1\nnum_processes: 2\nuse_cpu: true\n")
    plan = api.plan_train(recipe="sft-t", source="parity-sft", from_base=True, remote=True, processes=None,
                          accelerate_config=str(cfg))
    with pytest.raises(MonteError) as e:
        jobargs.train_args(plan, repo)
    assert e.value.code == "E_USAGE" and "inside the repository" in (e.value.fix or "")
    assert plan.launch is not None and "config_path" not in plan.launch.record()  # never recorded


def test_an_eval_plan_round_trips_through_the_box_job(ready: str, monte) -> None:
    for kw in ({}, {"processes": 2}, {"step": 0}, {"smoke": True}, {"split": "test", "smoke": True}):
        plan = api.plan_eval(**kw)
        args = jobargs.eval_args(plan)
        again = monte("eval", *args, "--dry-run", "--json")
        assert again.code == 0, (kw, again.out + again.err)
        a, b = plan.model_dump(mode="json"), again.json()["plan"]
        for key in ("experiment", "cohort", "base_model", "smoke", "processes", "settings"):
            assert a[key] == b[key], (kw, key)
        assert a["target"] == b["target"], kw
        assert [(e["exam"], e["split"]) for e in a["exams"]] == [(e["exam"], e["split"]) for e in b["exams"]]
