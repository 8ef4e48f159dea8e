"""An experiment written with plain git, past the CLI: how a test makes a measurement the CLI
cannot (an edited execution detail, another ``max_new_tokens``)."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.support.helpers import git

LEDGER = "refs/heads/monte/{}/ledger"


def _git_in(repo: Path, *args: str, input_text: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], input=input_text, capture_output=True, text=True,
                          check=True).stdout


def plain_git_experiment(repo: Path, name: str, edit: Callable[[dict[str, Any]], Any]) -> None:
    """Experiment ``name`` written with plain git: ``exp``'s first record, its measurement edited."""
    root = git(repo, "rev-list", "--max-parents=0", LEDGER.format("exp")).strip()
    meas = json.loads(git(repo, "show", f"{root}:measurement.json"))
    meas["experiment"] = name
    edit(meas)
    blob = _git_in(repo, "hash-object", "-w", "--stdin", input_text=json.dumps(meas, indent=2, sort_keys=True) + "\n")
    entries = [line for line in git(repo, "ls-tree", root).splitlines() if not line.endswith("\tmeasurement.json")]
    entries.append(f"100644 blob {blob.strip()}\tmeasurement.json")
    tree = _git_in(repo, "mktree", input_text="\n".join(entries) + "\n").strip()
    msg = git(repo, "log", "-1", "--format=%B", root).replace("exp:", f"{name}:").replace(
        "Monte-Experiment: exp", f"Monte-Experiment: {name}")
    commit = git(repo, "commit-tree", tree, "-m", msg).strip()
    git(repo, "update-ref", LEDGER.format(name), commit)
