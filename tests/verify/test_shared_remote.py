"""A shared bare repository with monte's hooks: one push is judged as one transaction.

What a team does: `git init --bare` on a server, `monte hooks install` inside it, then
`git push --all` from a laptop. The bugs pinned here: pre-receive judged each ref of the push
against the others as they were before it (a first push of an honest history was refused: "no
vault ref holds environment 'parity'", "lineage commit ... hangs off ..."); `monte hooks install`
in a bare repository said it "is not inside a git repository"; and a hook whose python could not
import monte declined every push, monte's or not, with "No module named monte".

Every forgery of the verify suite (``test_forged_histories.FORGERIES``), pushed the same way
along with the honest history it sits on, is still refused, and nothing of the push lands.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from monte.api import HOOK_MARK, HOOKS
from tests.verify.forgehelp import Honest, checkpoint, g, git_run, ledger_ref, rev, update_ref
from tests.verify.test_forged_histories import FORGERIES, _honest_claim, rewritten_finished_row


def _server(tmp_path: Path, monte, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh bare repository with monte's hooks, installed as a person would: inside it."""
    bare = tmp_path / "server.git"
    g(tmp_path, "init", "-q", "--bare", str(bare))
    with monkeypatch.context() as mp:
        mp.chdir(bare)
        r = monte("hooks", "install", "--json")
    assert r.code == 0, r.out
    assert sorted(Path(p).name for p in r.json()["installed"]) == sorted(HOOKS)
    return bare


def _monte_refs(repo: Path) -> dict[str, str]:
    return {k: v for k, v in (line.split() for line in g(repo, "for-each-ref", "--format=%(refname) %(objectname)",
                                                         "refs/heads/monte/").splitlines())}


def _commit_main(h: Honest) -> None:
    """The repository's own branch, as a team has it (monte's config committed)."""
    g(h.path, "add", "-A")
    g(h.path, "commit", "-q", "-m", "the experiment's repository")


def test_monte_hooks_install_inside_a_bare_repository(tmp_path: Path, monte, monkeypatch: pytest.MonkeyPatch) -> None:
    bare = _server(tmp_path, monte, monkeypatch)
    for name in HOOKS:
        assert HOOK_MARK in (bare / "hooks" / name).read_text()
    # again (idempotent), and uninstall there too
    with monkeypatch.context() as mp:
        mp.chdir(bare)
        assert monte("hooks", "install").code == 0
        assert not (bare / "hooks" / "pre-receive.local").exists()
        r = monte("hooks", "uninstall", "--json")
    assert r.code == 0 and sorted(Path(p).name for p in r.json()["removed"]) == sorted(HOOKS)


def test_git_push_all_of_an_honest_history_is_accepted(honest: Honest, monte, tmp_path: Path,
                                                      recorded_models: dict[int, Path],
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    # the quickstart's story: baselines, a chunk from base, its continuation, a stage boundary to
    # GRPO, dev evals, a nomination and the final claim
    checkpoint(honest.path, recorded_models[3], parent=(honest["b"], 100), algorithm="grpo", source="parity",
               recipe="grpo-tiny", boundary=True)
    _honest_claim(honest)
    _commit_main(honest)
    bare = _server(tmp_path, monte, monkeypatch)
    r = git_run(honest.path, "push", str(bare), "--all")
    assert r.returncode == 0, r.stderr.decode()
    assert _monte_refs(bare) == _monte_refs(honest.path)
    assert rev(bare, "refs/heads/main") == rev(honest.path, "refs/heads/main")
    # the glob refspec docs/hooks-and-ci.md shows, to another fresh server: the same
    bare2 = tmp_path / "second"
    bare2.mkdir()
    bare2 = _server(bare2, monte, monkeypatch)
    r = git_run(honest.path, "push", str(bare2), "refs/heads/monte/*:refs/heads/monte/*")
    assert r.returncode == 0, r.stderr.decode()
    assert _monte_refs(bare2) == _monte_refs(honest.path)
    # and the server verifies what it holds
    with monkeypatch.context() as mp:
        mp.chdir(bare)
        r = monte("ledger", "verify", "--all", "--json")
    assert r.code == 0 and r.json()["records"] > 0, r.out


@pytest.mark.parametrize("name", list(FORGERIES))
def test_git_push_all_with_a_forgery_is_refused_whole(honest: Honest, monte, name: str, tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    case = FORGERIES[name](honest)
    assert update_ref(honest.path, case.ref, case.forged.sha, hooks=False).returncode == 0
    bare = _server(tmp_path, monte, monkeypatch)
    r = git_run(honest.path, "push", "--no-verify", str(bare), "--all", env={"MONTE_HOOKS": "on"})
    err = r.stderr.decode()
    assert r.returncode != 0 and "pre-receive hook declined" in err, err
    assert f"[{case.rule}]" in err and case.forged.short in err, err
    assert _monte_refs(bare) == {}  # nothing of the push landed


def test_after_a_push_the_server_still_refuses_a_forged_update_ref(honest: Honest, monte, tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """pre-receive's judgement covers exactly the updates it accepted; anything else that moves a
    monte ref on the server (`git update-ref` there) is judged on its own by reference-transaction."""
    bare = _server(tmp_path, monte, monkeypatch)
    assert git_run(honest.path, "push", str(bare), "refs/heads/monte/*").returncode == 0
    case = rewritten_finished_row(honest)
    assert git_run(honest.path, "push", "-q", str(bare), f"{case.forged.sha}:refs/heads/forged",
                   env={"MONTE_HOOKS": "off"}).returncode == 0
    before = rev(bare, ledger_ref())
    r = git_run(bare, "update-ref", ledger_ref(), case.forged.sha)
    assert r.returncode != 0 and rev(bare, ledger_ref()) == before
    assert "[append-only]" in r.stderr.decode()


def test_a_hook_that_cannot_import_monte_fails_closed_and_says_how_to_install_it(
        honest: Honest, tmp_path: Path) -> None:
    from monte import githooks

    bare = tmp_path / "server.git"
    g(tmp_path, "init", "-q", "--bare", str(bare))
    python = shutil.which("python3", path="/usr/bin") or "/usr/bin/python3"
    githooks.install(bare, python=python)  # a server python without monte
    _commit_main(honest)
    r = git_run(honest.path, "push", str(bare), "refs/heads/monte/*")
    err = r.stderr.decode()
    assert r.returncode != 0 and _monte_refs(bare) == {}, err
    assert "cannot import monte" in err and "pip install" in err and "monte hooks install" in err, err
    # a push of nothing of monte's is not monte's business
    r = git_run(honest.path, "push", str(bare), "main")
    assert r.returncode == 0, r.stderr.decode()
    # the same from the scripts a person copies by hand (hooks/ in monte's repository)
    plain = tmp_path / "plain.git"
    g(tmp_path, "init", "-q", "--bare", str(plain))
    shutil.copy(githooks.TEMPLATES / "pre-receive", plain / "hooks" / "pre-receive")
    # (a copy made by hand runs python3 from the system's folders first: /usr/bin's has no monte)
    r = git_run(honest.path, "push", str(plain), "refs/heads/monte/*")
    err = r.stderr.decode()
    assert r.returncode != 0 and "cannot import monte" in err and "pip install monte" in err, err
