"""Helpers shared by the tests (importable as ``from helpers import ...``)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any


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
