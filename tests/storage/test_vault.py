"""The Vault on DVC + GCS (the real emulator), as two machines see it: two clones of one
repository with separate data roots sharing one Vault bucket."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from monte.storage.keys import write_key
from monte.storage.object_stores import open_store
from tests.support.helpers import git, snapshot_state, vault_machine


def test_env_add_pushes_and_another_machine_installs_with_every_hash_proven(
        repo: Path, vault: str, monte: Any, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    other = vault_machine(repo, tmp_path / "other")
    r = monte("env", "add", "--benchmark", "chain_sum", "--as", "cs", "--json")
    assert r.code == 0, r.out
    assert "pushed to the Vault" in r.json()["note"]
    # DVC's own remote layout, named in .dvc/config
    assert 'url = ' + vault in (repo / ".dvc" / "config").read_text()
    objects = open_store(vault, write_key()).list("files/md5/")
    assert any(n.endswith(".dir") for n in objects) and len(objects) >= 3

    monkeypatch.chdir(other)
    assert monte("env", "list", "--json").json() == []  # bare list: this data root only
    r = monte("env", "list", "--vault", "--json")
    assert r.code == 0, r.out
    listed = r.json()
    assert [(e["name"], e["complete"]) for e in listed] == [("cs", True)]
    r = monte("env", "install", "cs", "--json")
    assert r.code == 0, r.out
    assert r.json()[0]["action"] == "fetched"
    ours = repo / ".monte" / "environments" / "cs"
    theirs = other / ".monte" / "environments" / "cs"
    for f in ours.rglob("*.jsonl"):
        assert (theirs / f.relative_to(ours)).read_bytes() == f.read_bytes()
    assert json.loads(git(other, "show", "monte/vault:environments/cs/manifest.json"))["name"] == "cs"
    assert monte("env", "install", "cs", "--json").json()[0]["action"] == "verified"  # idempotent
    # the name is claimed in every region: re-adding it from this machine refuses
    r = monte("env", "add", "--benchmark", "chain_sum", "--as", "cs", "--json")
    assert r.code == 3 and r.json()["error"]["code"] == "E_NAME_TAKEN"


def test_a_read_only_key_still_refuses_a_held_name_and_keeps_a_new_freeze_local(
        repo: Path, vault: str, monte: Any, monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
        read_only_gcs: Any, gcs: dict[str, str]) -> None:
    other = vault_machine(repo, tmp_path / "other")
    assert monte("env", "add", "--benchmark", "chain_sum", "--as", "cs").code == 0
    monkeypatch.chdir(other)
    monkeypatch.setenv("STORAGE_EMULATOR_HOST", read_only_gcs.host)  # this machine's key cannot write
    monkeypatch.delenv("MONTE_GCS_BOX_KEY_FILE")
    monkeypatch.setenv("MONTE_GCS_KEY_FILE", gcs["key"])
    before = snapshot_state(other)
    r = monte("env", "add", "--benchmark", "chain_sum", "--as", "cs", "--json")
    assert r.json()["error"]["code"] == "E_NAME_TAKEN" and "Vault" in r.json()["error"]["message"]
    assert snapshot_state(other) == before
    r = monte("env", "add", "--benchmark", "parity", "--as", "par", "--json")
    assert r.code == 0, r.out
    note = r.json()["note"]
    assert "MONTE_GCS_KEY_FILE" in note and "cannot write" in note and "BOX_KEY" in note
    assert (other / ".monte" / "environments" / "par" / "manifest.json").is_file()
    assert open_store(vault, write_key(gcs["key"])).get("monte/claims/environments/par.json") is None


def test_keyless_freeze_checks_this_data_root_only_and_says_so(repo: Path, vault: str, monte: Any,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MONTE_GCS_BOX_KEY_FILE")
    monkeypatch.delenv("MONTE_GCS_KEY_FILE")
    r = monte("env", "add", "--benchmark", "parity", "--as", "par", "--json")
    assert r.code == 0, r.out
    assert "no GCS key resolved" in r.json()["note"]
    r = monte("env", "add", "--benchmark", "parity", "--as", "par", "--json")  # the local half still guards
    assert r.json()["error"]["code"] == "E_NAME_TAKEN"
    r = monte("env", "list", "--vault", "--json")
    assert r.code == 7 and r.json()["error"]["code"] == "E_STORAGE"


def test_losing_the_name_to_another_writer_writes_nothing_here(repo: Path, vault: str, monte: Any,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """Another region claims the name while prepare runs here (a real race, timed by wrapping
    prepare): the freeze is discarded and the refusal names both halves of the fix."""
    from monte.envs import freeze

    real = freeze.prepare

    def prepare_while_another_claims(plan: Any, folder: Path, **kw: Any) -> Any:
        m = real(plan, folder, **kw)
        open_store(vault, write_key()).create("monte/claims/environments/par.json",
                                              json.dumps({"fingerprint": "0" * 64, "host": "elsewhere"}).encode())
        return m

    monkeypatch.setattr(freeze, "prepare", prepare_while_another_claims)
    before = snapshot_state(repo)
    r = monte("env", "add", "--benchmark", "parity", "--as", "par", "--json")
    err = r.json()["error"]
    assert err["code"] == "E_NAME_TAKEN" and "--as" in err["fix"] and "monte env install par" in err["fix"]
    after = snapshot_state(repo)
    assert after["refs"] == before["refs"]
    assert not (repo / ".monte" / "environments" / "par").exists()


def test_an_interrupted_upload_keeps_the_freeze_and_the_same_command_finishes_it(
        repo: Path, vault: str, monte: Any, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from monte.storage import vault_remote as remote_vault

    real = remote_vault.VaultRemote.upload

    def ctrl_c(self: Any, manifest: Any, folder: Path, out: Any = None) -> Any:
        raise KeyboardInterrupt

    monkeypatch.setattr(remote_vault.VaultRemote, "upload", ctrl_c)
    r = monte("env", "add", "--benchmark", "parity", "--as", "par", "--json")
    err = r.json()["error"]
    assert r.code == 7 and err["code"] == "E_STORAGE"
    folder = repo / ".monte" / "environments" / "par"
    assert str(folder) in err["message"] and "survived" in err["message"]
    assert (folder / "manifest.json").is_file()
    monkeypatch.setattr(remote_vault.VaultRemote, "upload", real)
    r = monte("env", "add", "--benchmark", "parity", "--as", "par", "--json")
    assert r.code == 0, r.out
    assert "finished the Vault upload" in r.json()["note"]
    other = vault_machine(repo, tmp_path / "other")
    monkeypatch.chdir(other)
    assert monte("env", "install", "par", "--json").json()[0]["action"] == "fetched"


def test_a_tampered_vault_object_is_refused_and_nothing_is_written(
        repo: Path, vault: str, monte: Any, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    other = vault_machine(repo, tmp_path / "other")
    assert monte("env", "add", "--benchmark", "parity", "--as", "par").code == 0
    store = open_store(vault, write_key())
    target = next(n for n in store.list("files/md5/") if not n.endswith(".dir"))
    store.put(target, (store.get(target) or b"") + b'{"id": "smuggled"}\n')
    monkeypatch.chdir(other)
    before = snapshot_state(other)
    r = monte("env", "install", "par", "--json")
    assert r.code == 5 and r.json()["error"]["code"] == "E_INTEGRITY", r.out
    after = snapshot_state(other)
    assert after["refs"] == before["refs"]
    assert not (other / ".monte" / "environments" / "par").exists()


def test_dataset_guards_ask_the_vault_and_show_fetches(repo: Path, vault: str, monte: Any,
                                                     monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    rows = tmp_path / "rows.jsonl"
    rows.write_text('{"input": "2+2", "output": "4"}\n{"input": "3+3", "output": "6"}\n')
    other = vault_machine(repo, tmp_path / "other")
    assert monte("env", "add", "--benchmark", "parity", "--as", "shared").code == 0
    assert monte("dataset", "add", "pairs", "--from-file", str(rows), "--kind", "sft").code == 0
    monkeypatch.chdir(other)
    # this data root has never heard of "shared": the Vault is asked first
    r = monte("dataset", "add", "shared", "--from-file", str(rows), "--json")
    assert r.json()["error"]["code"] == "E_SOURCE_CONFLICT"
    r = monte("env", "add", "--server", "parity", "--dev", "parity", "--test", "parity", "--as", "pairs", "--json")
    assert r.json()["error"]["code"] == "E_SOURCE_CONFLICT"
    assert [d["name"] for d in monte("dataset", "list", "--vault", "--json").json()] == ["pairs"]
    r = monte("dataset", "show", "pairs", "--json")
    assert r.code == 0, r.out
    assert r.json()["verified"] and r.json()["rows"] == 2
    assert (other / ".monte" / "datasets" / "pairs" / "rows.jsonl").read_bytes() == rows.read_bytes()


def test_a_vault_bucket_that_does_not_exist_refuses_before_prepare(repo: Path, gcs: dict[str, str],
                                                                  monte: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    # `config set vault` refuses such a bucket itself (tests/storage/test_locations.py); one
    # shell's MONTE_VAULT is not checked until a freeze asks it
    monkeypatch.setenv("MONTE_VAULT", "gs://no-such-vault-bucket")
    before = snapshot_state(repo)
    r = monte("env", "add", "--benchmark", "parity", "--json")
    assert r.code == 7 and r.json()["error"]["code"] == "E_STORAGE"
    assert "does not exist" in r.json()["error"]["message"]
    assert snapshot_state(repo)["refs"] == before["refs"]
    assert not (repo / ".monte" / "environments" / "parity").exists()


def test_a_local_folder_vault_works_the_same_way(repo: Path, monte: Any, monkeypatch: pytest.MonkeyPatch,
                                                 tmp_path: Path) -> None:
    (tmp_path / "vault").mkdir()
    other = vault_machine(repo, tmp_path / "other")
    monkeypatch.setenv("MONTE_VAULT", str(tmp_path / "vault"))
    assert monte("env", "add", "--benchmark", "parity", "--as", "par").code == 0
    assert (tmp_path / "vault" / "monte" / "claims" / "environments" / "par.json").is_file()
    monkeypatch.chdir(other)
    assert monte("env", "install", "par", "--json").json()[0]["action"] == "fetched"
