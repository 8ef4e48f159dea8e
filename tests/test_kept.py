"""The states tests start from, built once and copied (tests/support/kept.py): a copy is what the
build made (the repository and its refs, the files beside it, ``$HOME``), and it replaces what the
test had; a build that fails keeps nothing; another environment is another state."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.support.helpers import git, snapshot_state
from tests.support.kept import Kept


def _test_folder(base: Path, name: str, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path]:
    """A test's tmp_path with a fresh repository as its cwd, as ``repo`` gives one."""
    tmp = base / name
    repo = tmp / "repo"
    repo.mkdir(parents=True)
    git(repo, "init", "-q", "-b", "main")
    monkeypatch.chdir(repo)
    return tmp, repo


def _build(repo: Path, tmp: Path, calls: list[str]) -> None:
    calls.append(str(repo))
    (repo / "state.txt").write_text("built\n")
    git(repo, "add", "state.txt")
    git(repo, "commit", "-q", "-m", "the state")
    git(repo, "update-ref", "refs/heads/monte/exp/ledger", "HEAD")
    (tmp / "rows.jsonl").write_text('{"input": "p 1 =", "output": "odd"}\n')
    (Path(os.environ["HOME"]) / ".config").mkdir(exist_ok=True)
    (Path(os.environ["HOME"]) / ".config" / "setting").write_text("kept\n")


def test_a_kept_state_is_built_once_and_copied_whole(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    kept, calls = Kept(tmp_path / "kept"), list[str]()
    (tmp_path / "kept").mkdir()
    tmp_a, repo_a = _test_folder(tmp_path, "a", monkeypatch)
    kept.restore("state", repo_a, tmp_a, lambda: _build(repo_a, tmp_a, calls))
    built = snapshot_state(repo_a)
    monkeypatch.setenv("HOME", str(tmp_path / "home-b"))
    (tmp_path / "home-b").mkdir()
    tmp_b, repo_b = _test_folder(tmp_path, "b", monkeypatch)
    (repo_b / "stray.txt").write_text("the test's own folder is replaced\n")
    kept.restore("state", repo_b, tmp_b, lambda: _build(repo_b, tmp_b, calls))
    assert calls == [str(repo_a)]  # built once
    assert Path.cwd() == repo_b and (repo_b / "state.txt").read_text() == "built\n"
    assert not (repo_b / "stray.txt").exists()
    assert snapshot_state(repo_b) == built
    assert git(repo_b, "rev-parse", "monte/exp/ledger").strip() == git(repo_a, "rev-parse", "HEAD").strip()
    assert (tmp_b / "rows.jsonl").read_text() == (tmp_a / "rows.jsonl").read_text()
    assert (tmp_path / "home-b" / ".config" / "setting").read_text() == "kept\n"


def test_a_failed_build_keeps_nothing_and_another_environment_builds_its_own(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    kept, calls = Kept(tmp_path / "kept"), list[str]()
    (tmp_path / "kept").mkdir()

    def broken() -> None:
        calls.append("broken")
        raise AssertionError("the build failed")

    tmp_a, repo_a = _test_folder(tmp_path, "a", monkeypatch)
    with pytest.raises(AssertionError, match="the build failed"):
        kept.restore("state", repo_a, tmp_a, broken)
    assert list((tmp_path / "kept").iterdir()) == []
    tmp_b, repo_b = _test_folder(tmp_path, "b", monkeypatch)
    kept.restore("state", repo_b, tmp_b, lambda: _build(repo_b, tmp_b, calls))
    monkeypatch.setenv("MONTE_BUCKET", str(tmp_path / "bucket"))
    tmp_c, repo_c = _test_folder(tmp_path, "c", monkeypatch)
    kept.restore("state", repo_c, tmp_c, lambda: _build(repo_c, tmp_c, calls))
    assert calls == ["broken", str(repo_b), str(repo_c)]  # built again after the failure, and per environment
