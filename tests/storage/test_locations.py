"""``monte config set vault`` names a Vault only when it can be reached (issue 16): a folder
that exists, a bucket that answers when a key resolves. A refusal writes nothing: neither
``.monte.yaml`` nor ``.dvc/config``, and no folder is made."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest


def _files(repo: Path) -> tuple[bytes, bytes]:
    return (repo / ".monte.yaml").read_bytes(), (repo / ".dvc" / "config").read_bytes()


@pytest.mark.parametrize("where", ["missing", "parent-missing", "a-file"])
def test_a_folder_vault_that_is_not_there_is_refused_and_nothing_is_written(
        repo: Path, monte: Any, tmp_path: Path, where: str) -> None:
    target = {"missing": tmp_path / "vault", "parent-missing": tmp_path / "no" / "such" / "vault",
              "a-file": tmp_path / "vault.txt"}[where]
    if where == "a-file":
        target.write_text("not a folder\n")
    before = _files(repo)
    r = monte("config", "set", "vault", str(target), "--json")
    err = r.json()["error"]
    assert r.code == 7 and err["code"] == "E_STORAGE", r.out
    assert str(target) in err["message"] and f"mkdir -p {target}" in err["fix"]
    assert _files(repo) == before
    assert target.is_file() if where == "a-file" else not target.exists()
    # the next freeze is not where it fails: there is no Vault, and it says so
    r = monte("env", "add", "--benchmark", "parity", "--json")
    assert r.code == 0 and "no Vault is configured" in r.json()["note"], r.out


def test_an_existing_folder_vault_is_named_for_monte_and_dvc(repo: Path, monte: Any, tmp_path: Path) -> None:
    (tmp_path / "vault").mkdir()
    r = monte("config", "set", "vault", str(tmp_path / "vault"), "--json")
    assert r.code == 0 and r.json()["note"] == "", r.out
    assert f"url = {tmp_path / 'vault'}" in (repo / ".dvc" / "config").read_text()
    assert monte("env", "add", "--benchmark", "parity", "--json").code == 0


def test_a_bucket_that_does_not_exist_is_refused_when_a_key_resolves(repo: Path, monte: Any,
                                                                     gcs: dict[str, str]) -> None:
    before = _files(repo)
    r = monte("config", "set", "vault", "gs://no-such-vault-bucket/monte", "--json")
    err = r.json()["error"]
    assert r.code == 7 and err["code"] == "E_STORAGE" and "does not exist" in err["message"], r.out
    assert _files(repo) == before
    r = monte("config", "set", "vault", gcs["url"] + "/monte", "--json")
    assert r.code == 0 and r.json()["note"] == "", r.out


def test_a_bucket_is_named_unchecked_when_no_key_resolves_and_the_note_says_so(
        repo: Path, monte: Any, gcs: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> None:
    for k in ("MONTE_GCS_KEY_FILE", "MONTE_GCS_BOX_KEY_FILE"):
        monkeypatch.delenv(k)
    r = monte("config", "set", "vault", "gs://no-such-vault-bucket/monte", "--json")
    assert r.code == 0, r.out
    assert "not checked" in r.json()["note"] and "no GCS key" in r.json()["note"]
    human = monte("config", "set", "vault", "gs://no-such-vault-bucket/monte")
    assert "note: not checked" in human.out
