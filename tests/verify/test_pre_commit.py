"""The pre-commit framework's hook (``.pre-commit-hooks.yaml``): only a push of monte refs is checked.

The bug pinned here: the hook ran ``monte ledger verify --all`` on every push (``git push origin
main`` too), in an environment with the whole training stack. Now its entry,
``python -m monte.githooks.pre_commit``, reads what pre-commit tells a pre-push hook
(``PRE_COMMIT_REMOTE_BRANCH``, ``PRE_COMMIT_REMOTE_NAME``: pre-commit's ``hook_impl`` gives the
first ref of the push that sends anything) and verifies the monte refs the push sends, together.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.verify.forgehelp import Honest, g, ledger_ref, update_ref
from tests.verify.test_forged_histories import rewritten_finished_row

ROOT = Path(__file__).resolve().parents[2]


def _hook(repo: Path, remote_branch: str, remote: str = "origin") -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PRE_COMMIT": "1", "PRE_COMMIT_REMOTE_BRANCH": remote_branch,
           "PRE_COMMIT_REMOTE_NAME": remote, "PRE_COMMIT_LOCAL_BRANCH": remote_branch}
    return subprocess.run([sys.executable, "-m", "monte.githooks.pre_commit"], cwd=repo, env=env,
                          capture_output=True, text=True, timeout=120)


def test_the_hook_definition_runs_the_module_on_pre_push_only() -> None:
    from ruamel.yaml import YAML

    hooks = YAML(typ="safe").load((ROOT / ".pre-commit-hooks.yaml").read_text())
    (hook,) = hooks
    assert hook["entry"] == "python -m monte.githooks.pre_commit" and hook["language"] == "python"
    assert hook["stages"] == ["pre-push"] and hook["pass_filenames"] is False


def test_a_push_of_another_branch_is_not_checked(honest: Honest) -> None:
    case = rewritten_finished_row(honest)  # even with a forged ledger here
    assert update_ref(honest.path, ledger_ref(), case.forged.sha, hooks=False).returncode == 0
    r = _hook(honest.path, "refs/heads/main")
    assert r.returncode == 0 and r.stdout == "" and r.stderr == "", r


def test_a_push_of_monte_refs_is_verified_together(honest: Honest, tmp_path: Path) -> None:
    bare = tmp_path / "origin.git"
    g(tmp_path, "init", "-q", "--bare", str(bare))
    g(honest.path, "remote", "add", "origin", str(bare))
    r = _hook(honest.path, "refs/heads/monte/exp/base/x")  # a first push: every ref, the vault with them
    assert r.returncode == 0 and "keep every rule" in r.stdout, r
    g(honest.path, "push", "-q", "--no-verify", "origin", "refs/heads/monte/*:refs/heads/monte/*")
    g(honest.path, "fetch", "-q", "origin")
    r = _hook(honest.path, "refs/heads/monte/exp/ledger")  # nothing new to send
    assert r.returncode == 0 and r.stdout == "", r
    case = rewritten_finished_row(honest)
    assert update_ref(honest.path, ledger_ref(), case.forged.sha, hooks=False).returncode == 0
    r = _hook(honest.path, "refs/heads/monte/exp/ledger")
    assert r.returncode == 5 and "[append-only]" in r.stderr and case.forged.short in r.stderr, r
