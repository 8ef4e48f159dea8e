"""Helpers shared by the tests (importable as ``from helpers import ...``)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from monte.ledger.lineage import servable_files

PINNED_ENV = {
    "GIT_AUTHOR_NAME": "Monte Test",
    "GIT_AUTHOR_EMAIL": "test@monte.invalid",
    "GIT_COMMITTER_NAME": "Monte Test",
    "GIT_COMMITTER_EMAIL": "test@monte.invalid",
    "GIT_AUTHOR_DATE": "1764400000 +0000",
    "GIT_COMMITTER_DATE": "1764400000 +0000",
    "GIT_CONFIG_NOSYSTEM": "1",
    "DVC_NO_ANALYTICS": "1",
    "HF_HUB_OFFLINE": "1",
    "OMP_NUM_THREADS": "1",
}


def scrubbed(mp: pytest.MonkeyPatch, home: Path) -> None:
    """The environment every test runs in: out of $HOME, the real data root and the developer's
    git config; git's author, committer and clock pinned."""
    mp.setenv("HOME", str(home))
    mp.setenv("XDG_CONFIG_HOME", str(home / ".config"))
    mp.setenv("XDG_CACHE_HOME", str(home / ".cache"))
    for k in ("MONTE_DATA_ROOT", "GIT_DIR", "GIT_WORK_TREE", "MONTE_HOOKS"):
        mp.delenv(k, raising=False)
    for k, v in PINNED_ENV.items():
        mp.setenv(k, v)


def git(repo: Path, *args: str, check: bool = True) -> str:
    """The real git binary, as a user would run it."""
    r = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True)
    if check and r.returncode != 0:
        raise AssertionError(f"git {' '.join(args)} failed: {r.stderr}")
    return r.stdout


def monte_proc(*args: str, cwd: Path, env: dict[str, str] | None = None,
               timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """Run ``monte`` as a real subprocess (for races, start-up and crash tests)."""
    return subprocess.run(
        [sys.executable, "-c", "from monte.cli.main import main; main()", *args],
        cwd=cwd, capture_output=True, text=True, timeout=timeout, env={**os.environ, **(env or {})},
    )


def snapshot_state(repo: Path, data_root: Path | None = None) -> dict[str, Any]:
    """Everything a refusal must leave alone: every ref, and every file under the data root."""
    from monte.hashing import sha256_file

    refs = git(repo, "for-each-ref", "--format=%(refname) %(objectname)")
    data_root = data_root or repo / ".monte"
    files = {}
    if data_root.exists():
        for p in sorted(data_root.rglob("*")):
            if p.is_file() or p.is_symlink():
                files[str(p.relative_to(data_root))] = sha256_file(p) if p.is_file() else "link"
    return {"refs": refs, "files": files}


# --- checkpoints, recorded as `monte train` records them ----------------------------------------
# A real, loadable model folder per checkpoint, a train row and a lineage commit, through
# `monte.training.record`. The weights are differently-seeded tiny models rather than trained
# ones: the tests that use this are about the rules of the record, not about learning.


def checkpoint(repo: Path, weights: Path, *, parent: tuple[str, int] | None = None, steps: int = 50,
               algorithm: str = "sft", source: str = "parity-sft", recipe: str = "sft-tiny",
               boundary: bool = False, base: Path | None = None, smoke: bool = False,
               experiment: str = "exp", start_step: int | None = None) -> str:
    """Record a finished training chunk with one checkpoint; return the run id."""
    from monte.ledger.experiment import Ledger
    from monte.ledger.lineage import ensure_base
    from monte.training.record import finish_chunk, save_checkpoint, start_chunk
    from monte.workspace import open_workspace

    ws = open_workspace(repo)
    meas = Ledger(ws.store, experiment).measurement()
    base_dir = base or Path(meas.model or "")
    files = servable_files(base_dir)
    cohort, _ = ensure_base(ws.store, experiment, str(base_dir), files)
    start = start_step if start_step is not None else (parent[1] if parent else 0)
    plan: dict[str, Any] = {"recipe": {"name": recipe, "sha256": "0" * 64, "algorithm": algorithm},
                            "source": source, "parent": {"run": parent[0], "step": parent[1]} if parent else None,
                            "boundary": boundary, "start_step": start, "steps": steps}
    row = start_chunk(ws, experiment, cohort=cohort, base_model=str(base_dir), plan=plan, smoke=smoke)
    if not smoke:
        tmp = repo.parent / f"ck-{row.run}"
        shutil.copytree(weights, tmp)
        row = save_checkpoint(ws, experiment, row, start + steps, tmp)
    finish_chunk(ws, experiment, row, "succeeded")
    return row.run
