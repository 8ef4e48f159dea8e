"""A freeze kept on this data root reaches the Vault under its name, and an edited frozen folder
is restored by the command its refusal names (issue 46.4). Reproduced on the code before:

- a freeze made with no Vault key (or a key that cannot write) was kept here; once a writing key
  was set, the same `monte env add` refused E_NAME_TAKEN (the vault ref holds the name), and the
  note's own advice ("move the folder out of the data root and freeze again") refused the same
  way: the name could never reach the Vault;
- after a frozen split was edited, the refusal's fix `monte env install NAME` refused E_INTEGRITY
  too, until the folder was moved aside by hand.

The Vault is the real GCS emulator; the other machine is a copy of the repository with its own
data root.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from monte.storage.keys import write_key
from monte.storage.object_stores import open_store
from tests.support.helpers import snapshot_state, vault_machine


def test_a_keyless_freeze_is_pushed_under_its_name_by_the_same_command_once_a_key_is_set(
        repo: Path, vault: str, gcs: dict[str, str], monte: Any, monkeypatch: pytest.MonkeyPatch,
        tmp_path: Path) -> None:
    monkeypatch.delenv("MONTE_GCS_BOX_KEY_FILE")
    monkeypatch.delenv("MONTE_GCS_KEY_FILE")
    r = monte("env", "add", "--benchmark", "parity", "--as", "par", "--json")
    assert r.code == 0, r.out
    note = r.json()["note"]
    assert "kept on this data root only" in note and "run the same command again" in note
    fingerprint = r.json()["environment"]["fingerprint"]
    monkeypatch.setenv("MONTE_GCS_BOX_KEY_FILE", gcs["key"])
    monkeypatch.setenv("MONTE_GCS_KEY_FILE", gcs["key"])
    r = monte("env", "add", "--benchmark", "parity", "--as", "par", "--json")
    assert r.code == 0, r.out
    assert "pushed the freeze kept on this data root" in r.json()["note"]
    assert r.json()["environment"]["fingerprint"] == fingerprint
    store = open_store(vault, write_key(gcs["key"]))
    assert store.get("monte/claims/environments/par.json") is not None
    # another machine installs it from the Vault, every hash proven
    other = vault_machine(repo, tmp_path / "other")
    monkeypatch.chdir(other)
    r = monte("env", "install", "par", "--json")
    assert r.code == 0, r.out
    assert r.json()[0]["action"] == "fetched"
    # and once pushed, the name is guarded as ever
    monkeypatch.chdir(repo)
    r = monte("env", "add", "--benchmark", "chain_sum", "--as", "par", "--json")
    assert r.json()["error"]["code"] == "E_NAME_TAKEN"


def test_a_kept_freeze_whose_name_the_vault_gave_to_another_is_refused_and_nothing_moves(
        repo: Path, vault: str, gcs: dict[str, str], monte: Any, monkeypatch: pytest.MonkeyPatch,
        tmp_path: Path) -> None:
    monkeypatch.delenv("MONTE_GCS_BOX_KEY_FILE")
    monkeypatch.delenv("MONTE_GCS_KEY_FILE")
    assert monte("env", "add", "--benchmark", "parity", "--as", "par").code == 0
    monkeypatch.setenv("MONTE_GCS_BOX_KEY_FILE", gcs["key"])
    monkeypatch.setenv("MONTE_GCS_KEY_FILE", gcs["key"])
    other = vault_machine(repo, tmp_path / "other")
    monkeypatch.chdir(other)
    assert monte("env", "add", "--benchmark", "chain_sum", "--as", "par").code == 0  # another freeze, first
    monkeypatch.chdir(repo)
    before = snapshot_state(repo)
    r = monte("env", "add", "--benchmark", "parity", "--as", "par", "--json")
    err = r.json()["error"]
    assert r.code != 0 and err["code"] == "E_NAME_TAKEN", r.out
    assert "the Vault" in err["message"] and "--as NEW_NAME" in err["fix"]
    assert snapshot_state(repo) == before


def test_env_install_restores_an_edited_split_and_keeps_the_edit_aside(repo: Path, monte: Any) -> None:
    assert monte("env", "add", "--server", "parity", "--dev", "parity", "--test", "parity").code == 0
    dev = repo / ".monte" / "environments" / "parity" / "exams" / "parity" / "dev.jsonl"
    frozen = dev.read_bytes()
    dev.unlink()  # the frozen file is read-only (DVC's cache holds it): an editor writes a new one
    dev.write_bytes(frozen.replace(b'"odd"', b'"even"', 1))
    r = monte("env", "install", "parity", "--json")  # an experiment would refuse E_INTEGRITY, naming this
    assert r.code == 0, r.out
    row = r.json()[0]
    assert row["action"] == "restored"
    assert "exams/parity/dev.jsonl does not match its frozen sha256" in row["changed"]
    assert dev.read_bytes() == frozen
    aside = Path(row["set_aside"])
    assert (aside / "exams" / "parity" / "dev.jsonl").read_bytes() != frozen  # the edit is kept, not lost
    assert monte("env", "install", "parity", "--json").json()[0]["action"] == "verified"
    human = monte("env", "install", "parity")
    assert human.code == 0 and "edited" not in human.out
