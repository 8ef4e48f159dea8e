"""`monte init` turns any git repository into a monte repository, idempotently."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.support.helpers import git


@pytest.fixture
def bare_git(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    repo = tmp_path / "r"
    subprocess.run(["git", "init", "-q", "-b", "main", str(repo)], check=True)
    monkeypatch.chdir(repo)
    return repo


def test_init_sets_up_everything_and_is_idempotent(bare_git: Path, monte) -> None:
    r = monte("init", "--json")
    assert r.code == 0, r.out + r.err
    assert (bare_git / ".monte.yaml").is_file()
    assert (bare_git / ".monte").is_dir()
    assert (bare_git / "recipes").is_dir()
    assert (bare_git / ".dvc" / "config").is_file()  # made by DVC itself
    assert "analytics = False" in (bare_git / ".dvc" / "config").read_text()
    staged = git(bare_git, "diff", "--cached", "--name-only").split()
    assert {".monte.yaml", ".dvc/config", "recipes/README.md"} <= set(staged)
    # the data root is ignored by git: nothing under it shows as untracked
    (bare_git / ".monte" / "scratch.txt").write_text("x")
    assert ".monte/scratch.txt" not in git(bare_git, "status", "--porcelain")
    again = monte("init", "--json").json()
    assert again["already_initialized"] is True and again["created"] == []


def test_init_from_a_subfolder_uses_the_repository_root(bare_git: Path, monte, monkeypatch: pytest.MonkeyPatch) -> None:
    sub = bare_git / "a" / "b"
    sub.mkdir(parents=True)
    monkeypatch.chdir(sub)
    assert monte("init").code == 0
    assert (bare_git / ".monte.yaml").exists() and not (sub / ".monte.yaml").exists()


def test_init_outside_git_refuses(tmp_path: Path, monte, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    r = monte("init", "--json")
    assert r.code == 3 and r.json()["error"]["code"] == "E_NOT_INITIALIZED"
    assert list(tmp_path.iterdir()) == []


def test_init_honours_monte_data_root(bare_git: Path, monte, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    root = tmp_path / "elsewhere"
    monkeypatch.setenv("MONTE_DATA_ROOT", str(root))
    assert monte("init").code == 0
    assert root.is_dir()
    assert monte("env", "add", "--benchmark", "parity").code == 0
    assert (root / "environments" / "parity" / "manifest.json").is_file()


def test_config_lists_recipe_path_and_names(bare_git: Path, monte) -> None:
    monte("init")
    (bare_git / "recipes" / "my-sft.yaml").write_text("algorithm: sft\n")
    (bare_git / "recipes" / "sft-tiny.yaml").write_text("algorithm: sft\n")  # shadows the packaged one
    r = monte("config", "--json").json()
    assert r["recipe_path"][0] == str(bare_git / "recipes")
    assert r["recipes"]["my-sft"] == str(bare_git / "recipes" / "my-sft.yaml")
    assert r["recipes"]["sft-tiny"] == str(bare_git / "recipes" / "sft-tiny.yaml")
    assert r["recipes"]["grpo-tiny"].endswith("monte/recipes/grpo-tiny.yaml")


def test_init_installs_the_git_hooks_by_default(bare_git: Path, monte) -> None:
    from monte.api import HOOK_MARK, HOOKS

    r = monte("init", "--json")
    assert r.code == 0, r.out
    out = r.json()
    hooks = bare_git / ".git" / "hooks"
    assert out["hooks"] == [str(hooks / name) for name in HOOKS]
    assert "installed" in out["hooks_note"] and "monte hooks uninstall" in out["hooks_note"]
    for name in HOOKS:
        assert HOOK_MARK in (hooks / name).read_text()
    human = monte("init")  # again: idempotent, and says so
    assert human.code == 0 and "git hooks installed" in human.out
    assert not any(p.name.endswith(".local") for p in hooks.iterdir())


def test_init_no_hooks_installs_none_and_says_how_to_later(bare_git: Path, monte) -> None:
    from monte.api import HOOKS

    r = monte("init", "--no-hooks", "--json")
    assert r.code == 0, r.out
    assert r.json()["hooks"] == [] and "monte hooks install" in r.json()["hooks_note"]
    assert not any((bare_git / ".git" / "hooks" / name).exists() for name in HOOKS)
    (bare_git / ".monte.yaml").unlink()
    human = monte("init", "--no-hooks")
    assert human.code == 0 and "not installed" in human.out and "`monte hooks install`" in human.out


def test_init_keeps_a_teams_hook_and_chains_it(bare_git: Path, monte) -> None:
    hook = bare_git / ".git" / "hooks" / "pre-push"
    hook.parent.mkdir(parents=True, exist_ok=True)
    hook.write_text("#!/bin/sh\nexit 0\n")
    hook.chmod(0o755)
    r = monte("init", "--json")
    assert r.code == 0, r.out
    assert (hook.parent / "pre-push.local").read_text() == "#!/bin/sh\nexit 0\n"


def test_init_still_succeeds_when_hooks_are_in_the_way(bare_git: Path, monte) -> None:
    hooks = bare_git / ".git" / "hooks"
    hooks.mkdir(parents=True, exist_ok=True)
    for name in ("pre-push", "pre-push.local"):
        (hooks / name).write_text("#!/bin/sh\nexit 0\n")
    r = monte("init", "--json")
    assert r.code == 0, r.out
    assert r.json()["hooks"] == [] and "not installed" in r.json()["hooks_note"]
    assert (bare_git / ".monte.yaml").is_file() and not (hooks / "reference-transaction").exists()


def test_init_points_at_the_trainable_form_and_no_release_that_does_not_exist(
        bare_git: Path, monte, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 46.6/14: `monte init`'s "next:" pointed at the eval-only `env add --benchmark`, and a
    pin's fix suggested 'monte==VERSION', which no package index serves."""
    monkeypatch.chdir(bare_git)
    monkeypatch.delenv("MONTE_CI_INSTALL", raising=False)
    r = monte("init")
    assert r.code == 0, r.err
    nxt = next(line for line in r.out.splitlines() if line.startswith("next:"))
    assert "monte env add --server NAME --dev NAME --test NAME" in nxt, nxt
    err = monte("init", "--ci-install", "other-package", "--json").json()["error"]
    assert err["code"] == "E_USAGE" and "monte==" not in err["fix"], err
