"""Issue 43, case 5: the hooks ignore whoever runs git.

On main a bare repository's hooks took ``MONTE_PYTHON`` and ``PYTHONPATH`` from the pusher (git
hands a local ``receive-pack`` the pushing environment): ``MONTE_HOOKS=off MONTE_PYTHON=/bin/true
git push`` (or a ``PYTHONPATH`` holding a fake ``monte`` whose ``-m monte`` exits 0) landed a
forged forward commit and a forced rewind (over a path and over ``file://``) in a hooked bare
repository, and the same variables let ``git update-ref`` land a forgery in a monte repository.
The hooks now run the python recorded when they were installed, with ``-E -P``, after dropping
every ``PYTHON*`` and ``MONTE_*`` variable (``MONTE_HOOKS=off`` stays a working repository's own
repair switch, read first; a bare repository's is ``git config monte.hooks off``).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.verify.forgehelp import Honest, git_run, ledger_ref, rev
from tests.verify.test_forged_histories import rewritten_finished_row
from tests.verify.test_shared_remote import _monte_refs, _server


def _fake_monte(tmp_path: Path) -> Path:
    """A folder that, on PYTHONPATH, shadows monte with one whose every command says yes."""
    fake = tmp_path / "fake"
    (fake / "monte").mkdir(parents=True)
    (fake / "monte" / "__init__.py").write_text("")
    (fake / "monte" / "__main__.py").write_text("raise SystemExit(0)\n")
    (fake / "monte" / "cli").mkdir()
    (fake / "monte" / "cli" / "__init__.py").write_text("")
    (fake / "monte" / "cli" / "main.py").write_text("")
    return fake


def _pusher_envs(tmp_path: Path) -> dict[str, dict[str, str]]:
    fake = _fake_monte(tmp_path)
    return {"MONTE_PYTHON": {"MONTE_HOOKS": "off", "MONTE_PYTHON": "/bin/true"},
            "PYTHONPATH": {"MONTE_HOOKS": "off", "PYTHONPATH": str(fake)}}


@pytest.mark.parametrize("how", ["MONTE_PYTHON", "PYTHONPATH"])
def test_a_pushers_environment_lands_no_forged_commit_on_a_bare_server(
        honest: Honest, monte, how: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    bare = _server(tmp_path, monte, monkeypatch)
    assert git_run(honest.path, "push", str(bare), "refs/heads/monte/*").returncode == 0
    before = _monte_refs(bare)
    case = rewritten_finished_row(honest)
    env = _pusher_envs(tmp_path)[how]
    for url in (str(bare), bare.as_uri()):
        r = git_run(honest.path, "push", "--no-verify", url, f"{case.forged.sha}:{ledger_ref()}", env=env)
        err = r.stderr.decode()
        assert r.returncode != 0 and "[append-only]" in err, err
        assert _monte_refs(bare) == before


@pytest.mark.parametrize("how", ["MONTE_PYTHON", "PYTHONPATH"])
def test_a_pushers_environment_forces_no_rewind_on_a_bare_server(
        honest: Honest, monte, how: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    bare = _server(tmp_path, monte, monkeypatch)
    assert git_run(honest.path, "push", str(bare), "refs/heads/monte/*").returncode == 0
    before = _monte_refs(bare)
    tip = rev(honest.path, ledger_ref())
    env = _pusher_envs(tmp_path)[how]
    for url in (str(bare), bare.as_uri()):
        r = git_run(honest.path, "push", "-f", url, f"{tip}~1:{ledger_ref()}", env=env)
        err = r.stderr.decode()
        assert r.returncode != 0 and "declined" in err, err
        assert _monte_refs(bare) == before


@pytest.mark.parametrize("how", ["MONTE_PYTHON", "PYTHONPATH"])
def test_the_environment_lands_no_forgery_in_a_monte_repository(honest: Honest, how: str, tmp_path: Path) -> None:
    """A working repository's reference-transaction: MONTE_HOOKS=off is its owner's repair switch,
    but a python or a path from the environment does not stand in for the verifier."""
    case = rewritten_finished_row(honest)
    before = rev(honest.path, ledger_ref())
    env = {k: v for k, v in _pusher_envs(tmp_path)[how].items() if k != "MONTE_HOOKS"}
    r = git_run(honest.path, "update-ref", ledger_ref(), case.forged.sha, env=env)
    err = r.stderr.decode()
    assert r.returncode != 0 and "[append-only]" in err, err
    assert rev(honest.path, ledger_ref()) == before


def test_the_installed_hooks_name_the_python_that_installed_them(honest: Honest) -> None:
    import sys

    for name in ("reference-transaction", "pre-push"):
        text = (honest.path / ".git" / "hooks" / name).read_text()
        assert f"\npy={sys.executable}\n" in text, text
        assert "${MONTE_PYTHON" not in text
