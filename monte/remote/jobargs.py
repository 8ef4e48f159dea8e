"""The box job's command line, derived from the plan the laptop showed and recorded.

A ``--remote`` run is planned here and planned again on the box from its own checkout of the same
commit. The box's arguments are therefore a function of the plan alone: every field that changes
what runs (the launch: processes, nodes, the accelerate config, the rendezvous port; an eval's
processes) travels, so the row can never name a launch the box did not run. The round trip is
tested: plan -> arguments -> the same plan (tests/remote/test_jobargs.py).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from monte.errors import error
from monte.ledger.predicates import spends_test_read


def train_args(plan: Any, repo_root: Path) -> list[str]:
    """``monte train`` arguments that plan ``plan`` again on a box (a :class:`TrainPlan`)."""
    args = ["--experiment", plan.experiment, "--recipe", plan.recipe.name, "--source", plan.source.name,
            "--model", plan.base_model]
    if plan.parent:
        args += ["--parent", f"{plan.parent['run']}@{plan.parent['step']}"]
    elif not plan.smoke:
        args.append("--from-base")
    if plan.smoke:
        args.append("--smoke")
    launch = plan.launch
    if launch is not None:
        args += ["--processes", str(launch.processes_per_node)]
        if launch.nodes > 1:
            args += ["--nodes", str(launch.nodes)]
        if launch.port is not None:
            args += ["--port", str(launch.port)]
        if launch.config:
            args += ["--accelerate-config", _config_arg(launch.config, launch.config_path, repo_root)]
    return args


def eval_args(plan: Any) -> list[str]:
    """``monte eval`` arguments that plan ``plan`` again on a box (an :class:`EvalPlan`). A test
    read names no target: the box selects it from the same records, as the laptop did."""
    split = plan.exams[0].split if plan.exams else "dev"
    args = ["--experiment", plan.experiment, "--split", split, "--model", plan.base_model]
    test_read = any(spends_test_read(e.split, plan.smoke) for e in plan.exams)
    if not test_read:
        target = plan.target
        args += ["--step", "0"] if target.kind == "base" else ["--checkpoint", f"{target.run}@{target.step}"]
    if plan.smoke:
        args.append("--smoke")
    if plan.processes > 1:
        args += ["--processes", str(plan.processes)]
    return args


def _config_arg(config: dict[str, Any], config_path: str | None, repo_root: Path) -> str:
    """A shipped profile by name; a user's YAML by its path in the commit the box checks out."""
    if config.get("profile"):
        return str(config["profile"])
    path = Path(config_path or str(config.get("name") or ""))
    try:
        return str(path.resolve().relative_to(repo_root.resolve()))
    except ValueError:
        raise error("E_USAGE", f"--remote cannot take the accelerate config {path}: the box plans in its own "
                    "checkout, where a file outside the repository does not exist",
                    "commit the YAML inside the repository and pass its path there, or name a profile "
                    "(--accelerate-config cpu-ddp)") from None
