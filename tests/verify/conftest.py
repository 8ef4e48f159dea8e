"""Fixtures for the verifier and hook tests: honest ledgers built once with monte, copied per test.

Three session templates, each built on the one before with monte's own API, without torch: the
models are the folders of ``recorded.py`` (seeds 0..3; seed 0 is the base model), their answers
replayed as recorded (``recorded.recorded_engine``), every record written by monte's own writers:

- ``_exp_template``: the parity environment frozen, experiment ``exp`` created (1 record);
- ``_baselines_template``: plus dev@0 and test@0 (5 records);
- ``_honest_template``: plus checkpoint A (seed 1, from base, step 50), a dev eval of A,
  checkpoint B (seed 2, child of A, step 100), a dev eval of B and a smoke training run
  (17 records). No nomination and no claim yet: forgeries and honest endings start there.

Checkpoints are recorded through the calls `monte train` uses (as in tests/evals): the weights
are differently-seeded models, not trained ones. Each test gets a copy (``honest``, as the cwd,
the recorded models answering its evals too); ``bare`` is a bare repository holding the honest
history with monte's hooks installed. So these tests are on the fast side (no torch); one that
also asks for ``tiny_models`` (tests/conftest.py: real models, torch) is on the slow side.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.helpers import PINNED_ENV, scrubbed
from tests.verify.forgehelp import Honest, checkpoint
from tests.verify.recorded import SEEDS, model_folder, recorded_engine


def _in(repo: Path, home: Path, models: dict[int, Path], build: Callable[[], Any]) -> Any:
    with pytest.MonkeyPatch.context() as mp, recorded_engine(mp, models):
        scrubbed(mp, home)
        mp.chdir(repo)
        return build()


@pytest.fixture(scope="session")
def recorded_models(tmp_path_factory: pytest.TempPathFactory) -> dict[int, Path]:
    """The recorded models' folders (``recorded.model_folder``), seeds 0..3: no torch."""
    root = tmp_path_factory.mktemp("recorded")
    return {seed: model_folder(root / f"seed{seed}", seed) for seed in SEEDS}


@pytest.fixture(scope="session")
def _exp_template(_template: Path, recorded_models: dict[int, Path],
                  tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The parity environment frozen and experiment ``exp`` created (base: seed 0); no run yet."""
    from monte import api
    from monte.workspace import open_workspace

    dest = tmp_path_factory.mktemp("exp") / "repo"
    shutil.copytree(_template, dest, symlinks=True)

    def build() -> None:
        ws = open_workspace(dest)
        api.env_add(server="parity", dev=("parity",), test=("parity",), ws=ws)
        api.experiment_init(name="exp", eval_env="parity", model=str(recorded_models[0]), ws=ws)

    _in(dest, dest.parent / "home", recorded_models, build)
    return dest


@pytest.fixture(scope="session")
def _baselines_template(_exp_template: Path, recorded_models: dict[int, Path],
                        tmp_path_factory: pytest.TempPathFactory) -> Honest:
    """``_exp_template`` plus both baselines: dev@0 and test@0 (5 records)."""
    from monte import api
    from monte.workspace import open_workspace

    dest = tmp_path_factory.mktemp("baselines") / "repo"
    shutil.copytree(_exp_template, dest, symlinks=True)

    def build() -> dict[str, str]:
        ws = open_workspace(dest)
        return {"dev0": api.evaluate(step=0, ws=ws).runs[0]["run"],
                "test0": api.evaluate(split="test", ws=ws).runs[0]["run"]}

    return Honest(dest, _in(dest, dest.parent / "home", recorded_models, build))


def build_honest(repo: Path, models: dict[int, Path], ids: dict[str, str]) -> dict[str, str]:
    from monte import api
    from monte.ledger.lineage import servable_files, weights_identity
    from monte.workspace import open_workspace

    ws = open_workspace(repo)
    ids = dict(ids)
    ids["a"] = checkpoint(repo, models[1])
    ids["dev_a"] = api.evaluate(checkpoint=f"{ids['a']}@50", ws=ws).runs[0]["run"]
    ids["b"] = checkpoint(repo, models[2], parent=(ids["a"], 50))
    ids["dev_b"] = api.evaluate(checkpoint=f"{ids['b']}@100", ws=ws).runs[0]["run"]
    ids["smoke"] = checkpoint(repo, models[3], smoke=True)
    # the checkpoint the final claim would score with no nomination (best paired dev delta)
    selected = api.plan_eval(split="test", ws=ws).target.run
    assert selected is not None
    ids["selected"] = selected
    ids["other"] = ids["b"] if ids["selected"] == ids["a"] else ids["a"]
    ids["cohort"] = weights_identity(models[0], servable_files(models[0]))[:12]
    ids["cohort2"] = weights_identity(models[3], servable_files(models[3]))[:12]  # another base: no baselines
    return ids


@pytest.fixture(scope="session")
def _honest_template(_baselines_template: Honest, recorded_models: dict[int, Path],
                     tmp_path_factory: pytest.TempPathFactory) -> Honest:
    dest = tmp_path_factory.mktemp("honest") / "repo"
    shutil.copytree(_baselines_template.path, dest, symlinks=True)
    ids = _in(dest, dest.parent / "home", recorded_models,
              lambda: build_honest(dest, recorded_models, _baselines_template.ids))
    return Honest(dest, ids)


@pytest.fixture
def honest(_honest_template: Honest, recorded_models: dict[int, Path], tmp_path: Path,
           monkeypatch: pytest.MonkeyPatch) -> Iterator[Honest]:
    """A copy of the honest ledger's repository (data root included), as the cwd; its recorded
    models answer as recorded for the test's own evals too."""
    dest = tmp_path / "repo"
    shutil.copytree(_honest_template.path, dest, symlinks=True)
    monkeypatch.chdir(dest)
    with recorded_engine(monkeypatch, recorded_models):
        yield Honest(dest, dict(_honest_template.ids))


@pytest.fixture(scope="session")
def _bare_template(_honest_template: Honest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A bare repository holding the honest history, with monte's hooks (pre-receive) in it."""
    from monte import api

    bare = tmp_path_factory.mktemp("bare") / "ledger.git"
    env = {**os.environ, **PINNED_ENV, "MONTE_HOOKS": "off"}
    subprocess.run(["git", "init", "-q", "--bare", str(bare)], check=True, env=env)
    subprocess.run(["git", "-C", str(_honest_template.path), "push", "-q", str(bare), "refs/heads/monte/*"],
                   check=True, env=env, capture_output=True)
    api.hooks_install(git_dir=bare)
    return bare


@pytest.fixture
def bare(_bare_template: Path, tmp_path: Path) -> Path:
    dest = tmp_path / "ledger.git"
    shutil.copytree(_bare_template, dest, symlinks=True)
    return dest
