"""Ledger commits signed with SSH where the repository asks git to sign: `git verify-commit` holds.

monte writes commits with dulwich, not `git commit`; a repository set up for SSH-signed commits
(``gpg.format ssh``, ``commit.gpgSign true``, ``user.signingKey``) gets monte's commits signed the
way git signs its own, checked here by the real ``git verify-commit`` against an allowed_signers
file. A repository without that config is unchanged (no signature, same commit ids).
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from monte.ledger.store import Change, Snapshot, Store
from tests.support.helpers import git

REF = "refs/heads/monte/t/ledger"


def put(writes: dict[str, bytes | None], summary: str) -> Callable[[Snapshot], Change]:
    return lambda _snap: Change(summary=summary, writes=writes, trailers={})

pytestmark = pytest.mark.skipif(shutil.which("ssh-keygen") is None, reason="needs OpenSSH's ssh-keygen")


def _signing(repo: Path, tmp_path: Path) -> Path:
    key = tmp_path / "key"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True)
    allowed = tmp_path / "allowed_signers"
    allowed.write_text("signer@example.org " + " ".join(Path(f"{key}.pub").read_text().split()[:2]) + "\n")
    for k, v in (("gpg.format", "ssh"), ("commit.gpgSign", "true"), ("user.signingKey", str(key)),
                 ("gpg.ssh.allowedSignersFile", str(allowed))):
        git(repo, "config", k, v)
    return key


def test_commits_are_signed_when_git_is_set_to_sign_with_ssh(repo: Path, tmp_path: Path) -> None:
    _signing(repo, tmp_path)
    store = Store(repo)
    first = store.append(REF, put({"a": b"1"}, "first"))
    second = store.append(REF, put({"b": b"2"}, "second"))
    for sha in (first, second):
        r = subprocess.run(["git", "-C", str(repo), "verify-commit", sha.decode()], capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
        assert 'Good "git" signature for signer@example.org' in r.stderr
    assert subprocess.run(["git", "-C", str(repo), "fsck", "--strict"], capture_output=True).returncode == 0


def test_an_unsigned_repository_is_unchanged(repo: Path) -> None:
    sha = Store(repo).append(REF, put({"a": b"1"}, "first"))
    assert "gpgsig" not in git(repo, "cat-file", "-p", sha.decode())
    r = subprocess.run(["git", "-C", str(repo), "verify-commit", sha.decode()], capture_output=True, text=True)
    assert r.returncode != 0


def test_a_signing_config_without_a_key_refuses_before_any_record(repo: Path) -> None:
    from monte.errors import MonteError

    git(repo, "config", "gpg.format", "ssh")
    git(repo, "config", "commit.gpgSign", "true")
    with pytest.raises(MonteError) as e:
        Store(repo).append(REF, put({"a": b"1"}, "first"))
    assert e.value.code == "E_USAGE" and "user.signingKey" in e.value.fix
    assert subprocess.run(["git", "-C", str(repo), "rev-parse", "--verify", "-q", REF],
                          capture_output=True).returncode != 0
