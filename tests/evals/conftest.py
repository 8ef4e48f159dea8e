"""The states many eval tests start from, built once per worker (``kept``): experiment ``exp``
(the ``exp`` fixture) with the base model's dev read, and with both of its baselines. Each read
scores 200 items on the real tiny model, most of a short test's time."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.support.helpers import checkpoint
from tests.support.kept import Kept


def _read(monte: Any, *args: str) -> None:
    r = monte("eval", "--yes", "--json", *args)
    assert r.code == 0 and r.json()["runs"][0]["status"] == "succeeded", r.out + r.err


@pytest.fixture
def dev0(repo: Path, monte: Any, exp: str, tmp_path: Path, kept: Kept) -> str:
    """``exp`` plus dev@0: the base model's dev read."""
    kept.restore("exp-dev0", repo, tmp_path, lambda: _read(monte))
    return exp


@pytest.fixture
def baselines(repo: Path, monte: Any, dev0: str, tmp_path: Path, kept: Kept) -> str:
    """``exp`` plus both baselines of the base: dev@0 and test@0 (one of the cohort's two test reads)."""
    kept.restore("exp-baselines", repo, tmp_path, lambda: _read(monte, "--split", "test"))
    return dev0


@pytest.fixture
def claimed(repo: Path, monte: Any, baselines: str, tiny_models: dict[int, Path], tmp_path: Path,
            kept: Kept) -> str:
    """``baselines`` plus a checkpoint (seed-1 weights at step 50) with its dev eval, and the
    final claim on it: the cohort's seal is spent. The checkpoint's run id."""
    def build() -> None:
        a = checkpoint(repo, tiny_models[1])
        _read(monte, "--checkpoint", f"{a}@50")
        r = monte("eval", "--yes", "--json", "--split", "test")
        assert r.code == 0 and r.json()["runs"][0]["role"] == "claim", r.out
        (tmp_path / "claimed.txt").write_text(a)

    kept.restore("exp-claimed", repo, tmp_path, build)
    return (tmp_path / "claimed.txt").read_text()
