"""`monte.ledger.vault_ref` and manifest parsing: one commit per freeze on `refs/heads/monte/vault`,
names that stay frozen, and manifests that may not point outside their folder."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from monte.errors import MonteError
from monte.ledger.store import Snapshot, Store
from monte.ledger.vault_ref import Vault
from monte.manifest import FileEntry, Manifest, parse_manifest
from tests.support.helpers import git, snapshot_state

VAULT = "monte/vault"


def manifest(name: str = "arith", kind: str = "environment", content: str = "a") -> Manifest:
    return Manifest(kind=kind, name=name, frozen_at="2025-11-29T00:00:00Z",  # type: ignore[arg-type]
                    files={"exams/arith/dev.jsonl": FileEntry(sha256=content * 64, size=10),
                           "grader.json": FileEntry(sha256="b" * 64, size=2)})


def raw_manifest(*paths: str) -> bytes:
    """A manifest as the bytes a tampered file or a hand-made commit would hold."""
    return json.dumps({
        "schema_version": 1, "kind": "environment", "name": "evil",
        "frozen_at": "2025-11-29T00:00:00Z",
        "files": {p: {"sha256": "0" * 64, "size": 1} for p in paths},
    }).encode()


def test_record_commits_the_manifest_on_the_vault_ref(repo: Path) -> None:
    vault = Vault(Store(repo))
    env = manifest()
    commit = vault.record(env)
    assert git(repo, "rev-parse", VAULT).strip() == commit.decode()
    shown = subprocess.run(["git", "-C", str(repo), "show",
                            f"{VAULT}:environments/arith/manifest.json"],
                           capture_output=True, check=True).stdout
    assert shown == env.dumps()
    assert Manifest.model_validate_json(shown) == env
    trailers = git(repo, "log", "-1", "--format=%(trailers:only,unfold)", VAULT).strip()
    assert trailers.splitlines() == ["Monte-Event: freeze", "Monte-Kind: environment",
                                     "Monte-Name: arith", f"Monte-Fingerprint: {env.fingerprint}"]
    assert git(repo, "log", "-1", "--format=%s", VAULT).strip() == \
        "freeze environment arith: 2 file(s)"
    # a second freeze is a second commit on top of the first; a dataset lives beside it
    vault.record(manifest("sft-mix", kind="dataset"))
    assert git(repo, "rev-list", "--count", VAULT).strip() == "2"
    assert git(repo, "rev-parse", f"{VAULT}~1").strip() == commit.decode()
    assert git(repo, "ls-tree", "-r", "--name-only", VAULT).split() == \
        ["datasets/sft-mix/manifest.json", "environments/arith/manifest.json"]
    fresh = Vault(Store(repo))
    assert fresh.get("environment", "arith") == env
    assert fresh.names("environment") == ["arith"] and fresh.names("dataset") == ["sft-mix"]
    assert fresh.get("environment", "sft-mix") is None


def test_recording_a_taken_name_refuses_and_writes_nothing(repo: Path) -> None:
    Vault(Store(repo)).record(manifest())
    before = snapshot_state(repo)
    objects = git(repo, "count-objects", "-v")
    for again in (manifest(), manifest(content="c")):  # the same freeze, or different bytes
        with pytest.raises(MonteError) as e:
            Vault(Store(repo)).record(again)
        assert e.value.code == "E_NAME_TAKEN" and e.value.exit_code == 3
        assert "--as" in e.value.fix  # says how to freeze it under another name
    assert snapshot_state(repo) == before
    assert git(repo, "count-objects", "-v") == objects
    assert Vault(Store(repo)).get("environment", "arith") == manifest()


def test_a_name_taken_during_a_lost_race_is_refused(repo: Path) -> None:
    """Two freezes of one name race: the loser re-checks on the winner's tip and refuses."""
    winner, loser = Vault(Store(repo)), Vault(Store(repo))
    calls: list[bytes | None] = []

    def check(snap: Snapshot) -> None:
        calls.append(snap.commit_id)
        if len(calls) == 1:
            winner.record(manifest(content="w"))  # lands between the loser's read and swap

    with pytest.raises(MonteError) as e:
        loser.record(manifest(content="l"), check)
    assert e.value.code == "E_NAME_TAKEN"
    assert calls == [None]  # the retry refused on the name before asking check again
    assert git(repo, "rev-list", "--count", VAULT).strip() == "1"
    assert Vault(Store(repo)).get("environment", "arith") == manifest(content="w")


@pytest.mark.parametrize("path", ["../escape", "/etc/passwd", "exams/../../escape",
                                  "exams/./dev.jsonl", "exams//dev.jsonl", "..\\escape", ""])
def test_a_manifest_listing_a_path_outside_its_folder_is_refused(path: str) -> None:
    with pytest.raises(MonteError) as e:
        parse_manifest(raw_manifest("grader.json", path), "environments/evil/manifest.json")
    assert e.value.code == "E_UNSAFE_PATH" and e.value.exit_code == 6
    assert repr(path) in e.value.message


def test_a_manifest_listing_only_inside_paths_parses() -> None:
    parsed = parse_manifest(raw_manifest("grader.json", "exams/arith/dev.jsonl", "a..b/c.txt"),
                            "environments/evil/manifest.json")
    assert sorted(parsed.files) == ["a..b/c.txt", "exams/arith/dev.jsonl", "grader.json"]


def test_an_unsafe_path_refusal_names_the_manifest() -> None:
    where = "refs/heads/monte/vault:environments/evil/manifest.json"
    with pytest.raises(MonteError) as e:
        parse_manifest(raw_manifest("../escape"), where)
    assert where in e.value.message


def test_a_hand_forged_vault_commit_with_an_escaping_path_is_refused_on_read(repo: Path,
                                                                             tmp_path: Path) -> None:
    """Someone commits a manifest to the vault ref with plain git, bypassing monte."""
    Vault(Store(repo)).record(manifest())
    env = {**os.environ, "GIT_INDEX_FILE": str(tmp_path / "index")}

    def plumb(*args: str, data: bytes | None = None) -> str:
        return subprocess.run(["git", "-C", str(repo), *args], input=data, env=env,
                              capture_output=True, check=True).stdout.decode().strip()

    blob = plumb("hash-object", "-w", "--stdin", data=raw_manifest("../../.ssh/authorized_keys"))
    plumb("read-tree", VAULT)
    plumb("update-index", "--add", "--cacheinfo", f"100644,{blob},environments/evil/manifest.json")
    tree = plumb("write-tree")
    old = plumb("rev-parse", VAULT)
    forged = plumb("commit-tree", tree, "-p", old, "-m", "freeze environment evil")
    plumb("update-ref", f"refs/heads/{VAULT}", forged, old)

    vault = Vault(Store(repo))
    assert vault.names("environment") == ["arith", "evil"]
    with pytest.raises(MonteError) as e:
        vault.get("environment", "evil")
    assert e.value.code == "E_UNSAFE_PATH"
    assert vault.get("environment", "arith") == manifest()  # the honest freeze still reads
