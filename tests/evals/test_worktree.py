"""monte from a linked worktree (``git worktree add``), issue 29.2: refs, objects, the tip log and
the write probe are the common git folder's, where git keeps them.

Reproduced on the code before this file: every ``monte eval`` from a worktree folder refused
E_STORAGE "refs cannot be written", because the write probe looked at the worktree's own git
folder (``.git/worktrees/<name>``), which holds no refs.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.support.helpers import git
from tests.support.kept import Kept

GRPO = ("algorithm: grpo\nlearning_rate: 1.0e-4\nlr_scheduler_type: constant\nper_device_train_batch_size: 4\n"
        "num_generations: 2\nmax_completion_length: 4\n")


@pytest.fixture
def worktree(repo: Path, exp: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "the experiment's repository")
    wt = tmp_path / "side"
    git(repo, "worktree", "add", "-q", str(wt), "-b", "side")
    monkeypatch.setenv("MONTE_DATA_ROOT", str(repo / ".monte"))  # the frozen exams (DVC-tracked, not in git)
    monkeypatch.chdir(wt)
    return wt


def test_eval_train_status_verify_and_the_hooks_work_from_a_worktree(repo: Path, monte, worktree: Path) -> None:
    r = monte("eval", "--yes", "--json")
    assert r.code == 0, r.out
    run = r.json()["runs"][0]["run"]
    assert r.json()["runs"][0]["status"] == "succeeded"
    (worktree / "recipes").mkdir(exist_ok=True)
    (worktree / "recipes" / "g.yaml").write_text(GRPO)
    r = monte("train", "--recipe", "g", "--source", "parity", "--smoke", "--yes", "--json")
    assert r.code == 0, r.out + r.err
    assert r.json()["run"]["status"] == "succeeded"
    status = monte("status", "--json")
    assert status.code == 0 and run in status.out, status.out
    assert monte("ledger", "verify", "--all", "--json").code == 0
    # the records are the main repository's (one set of refs), and so is monte's memory of their tips
    common = repo / ".git"
    assert run in git(repo, "log", "--format=%s", "monte/exp/ledger")
    assert "refs/heads/monte/exp/ledger" in (common / "monte" / "tips.log").read_text()
    own = common / "worktrees" / "side"
    assert not (own / "monte").exists() and not (own / "objects").exists() and not (own / "refs" / "heads").exists()
    # the hooks judge a move made from the worktree: moving the ledger back is refused by git
    old = git(worktree, "rev-parse", "monte/exp/ledger~2").strip()
    tip = git(worktree, "rev-parse", "monte/exp/ledger").strip()
    moved = subprocess.run(["git", "update-ref", "refs/heads/monte/exp/ledger", old], cwd=worktree,
                           capture_output=True, text=True)
    assert moved.returncode != 0 and "E_VERIFY" in moved.stderr, moved.stderr
    assert git(worktree, "rev-parse", "monte/exp/ledger").strip() == tip
    assert subprocess.run(["git", "fsck", "--strict"], cwd=repo, capture_output=True).returncode == 0
    assert json.loads(monte("show", run, "--json").out)["status"] == "succeeded"


def test_a_worktree_reads_the_main_trees_data_root_without_monte_data_root(
        repo: Path, tiny_models: dict[int, Path], monte, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        kept: Kept) -> None:
    """Issue 46.11: a checkpoint trained in the main working tree is evaluated from a ``git worktree
    add`` folder with no ``MONTE_DATA_ROOT``. Before, it refused E_NOT_FOUND ("weights ... not on this
    data root"): the worktree looked at its own ``.monte/``, which git checks out without bytes."""
    from tests.support.agentloop import parity_chunk

    run = parity_chunk(repo, tmp_path, kept, monte, tiny_models[0])["train"]  # both baselines, one chunk
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "the experiment's repository")
    wt = tmp_path / "side"
    git(repo, "worktree", "add", "-q", str(wt), "-b", "side")
    monkeypatch.delenv("MONTE_DATA_ROOT", raising=False)
    monkeypatch.chdir(wt)
    assert (wt / ".monte").is_dir()  # git checked out the data root's pointers, not its bytes
    r = monte("eval", "--checkpoint", f"{run}@50", "--yes", "--json")
    assert r.code == 0, r.out + r.err
    row = r.json()["runs"][0]
    assert row["status"] == "succeeded" and row["delta"] is not None
    # one data root: the eval's run folder is the main tree's, beside the chunk's weights
    assert (repo / ".monte" / "runs" / "exp" / row["run"]).is_dir()
    assert not (wt / ".monte" / "runs").exists()
    assert monte("config", "--json").json()["data_root"] == str(repo / ".monte")
