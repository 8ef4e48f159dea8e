"""Issue 43, case 1: what is measured is what was proven.

On main the proof (the plan hashes the target's files) and the load (transformers reads the
folder by path, after the ``started`` record) were two reads of one path: a ``model.safetensors``
swapped while ``monte eval --split test`` waited at its prompt was what got measured, and the
record named the proven weights. An eval now copies the target's files into a private folder,
hashing each file as it reads it, before ``started``; a mismatch refuses ``E_INTEGRITY`` and
spends nothing, and the copy is what this process (and every shard) loads.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from tests.support.helpers import snapshot_state


def _own_base(repo: Path, monte: Any, tiny_models: dict[int, Path]) -> Path:
    base = repo.parent / "my-base"
    shutil.copytree(tiny_models[0], base)
    assert monte("env", "add", "--server", "parity", "--dev", "parity", "--test", "parity").code == 0
    r = monte("experiment", "init", "exp", "--eval", "parity", "--model", str(base))
    assert r.code == 0, r.out
    return base


def test_weights_swapped_after_the_plan_are_refused_before_started(repo: Path, monte, tiny_models) -> None:
    from monte import api

    base = _own_base(repo, monte, tiny_models)
    plan = api.plan_eval(split="test")  # test@0 on the base: proven here, as at the prompt
    shutil.copyfile(tiny_models[1] / "model.safetensors", base / "model.safetensors")  # the swap
    before = snapshot_state(repo)
    try:
        api.run_eval(plan)
    except Exception as e:  # noqa: BLE001 - the refusal, checked below
        err = e
    else:
        raise AssertionError("a swapped model was measured")
    assert getattr(err, "code", None) == "E_INTEGRITY" and "model.safetensors" in str(err), err
    assert snapshot_state(repo)["refs"] == before["refs"]  # no started record: nothing spent
    assert not list(repo.rglob("freeze-*"))  # the private copy is not left behind


def test_an_eval_loads_the_private_copy_it_hashed(repo: Path, monte, tiny_models) -> None:
    """The folder the model is loaded from is the private copy, not the path that was proven."""
    from monte import api
    from monte.evals import run as evals_run
    from monte.models import generate as gen

    base = _own_base(repo, monte, tiny_models)
    plan = api.plan_eval(split="dev")
    loaded: list[Path] = []

    def load(folder: Path) -> Any:
        loaded.append(folder)
        return gen.load(folder)

    from monte.workspace import open_workspace

    res = evals_run.run_eval(open_workspace(), plan, load=load)
    assert res.runs and res.runs[0]["status"] == "succeeded", res
    assert loaded and loaded[0] != base and loaded[0].name.startswith("freeze-"), loaded
    assert not loaded[0].exists()  # removed after the eval
