"""DVC really tracks the frozen folders (issue 16), checked with the real ``dvc`` CLI against a
folder Vault and the GCS emulator: every freeze has a committed ``.dvc`` pointer (DVC 3,
``hash: md5``) that plain ``dvc status``/``dvc data status``/``dvc list`` see; a fresh clone's
``dvc pull`` restores the frozen files; ``dvc gc -c`` in any of its scopes keeps every object of
every freeze; the DVC cache links the data root's files instead of copying them; and objects
deleted from the Vault behind monte's back are reported as lost, never as a network error."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.support.helpers import git, run_dvc, snapshot_state

DvcCli = Callable[..., str]  # the ``dvc_cli`` fixture: DVC's own command line (tests/conftest.py)
GC_SCOPES = [["-w"], ["-a", "-T"], ["--all-commits"]]
ROWS = '{"input": "2+2", "output": "4"}\n{"input": "3+3", "output": "6"}\n'


@pytest.fixture(params=["folder", "gcs"])
def vault(request: pytest.FixtureRequest, repo: Path, monte: Any, tmp_path: Path) -> dict[str, Any]:
    """A Vault named with `monte config set vault`: a folder, or a bucket on the GCS emulator.
    ``objects()`` lists its DVC objects; ``dvc_remote(clone)`` gives a clone's DVC what a user's
    machine has (for the emulator: its endpoint, no credentials)."""
    if request.param == "folder":
        url = str(tmp_path / "vault")
        Path(url).mkdir()

        def objects() -> set[str]:
            root = Path(url) / "files" / "md5"
            return {p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file()}

        def dvc_remote(clone: Path) -> None:
            pass
    else:
        g = request.getfixturevalue("gcs")
        url = g["url"] + "/vault"

        def objects() -> set[str]:
            from monte.storage.keys import write_key
            from monte.storage.object_stores import open_store

            return {n.removeprefix("files/md5/") for n in open_store(url, write_key()).list("files/md5/")}

        def dvc_remote(clone: Path) -> None:
            run_dvc(clone, "remote", "modify", "--local", "vault", "endpointurl", g["host"])
            run_dvc(clone, "remote", "modify", "--local", "vault", "allow_anonymous_login", "true")
    r = monte("config", "set", "vault", url, "--json")
    assert r.code == 0, r.out
    dvc_remote(repo)
    return {"url": url, "objects": objects, "dvc_remote": dvc_remote, "kind": request.param}


def _freeze(repo: Path, monte: Any, tmp_path: Path) -> list[str | None]:
    rows = tmp_path / "rows.jsonl"
    rows.write_text(ROWS)
    r = monte("env", "add", "--benchmark", "parity", "--as", "par", "--json")
    assert r.code == 0 and "pushed to the Vault" in r.json()["note"], r.out
    pointers = [r.json().get("dvc_pointer")]
    r = monte("dataset", "add", "pairs", "--from-file", str(rows), "--kind", "sft", "--json")
    assert r.code == 0 and "pushed to the Vault" in r.json()["note"], r.out
    return [*pointers, r.json().get("dvc_pointer")]


def _commit(repo: Path) -> None:
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "frozen splits, with their DVC pointers")


def _sha256(p: Path) -> str:
    return hashlib.sha256(p.read_bytes()).hexdigest()


def _manifests(repo: Path, ref: str = "monte/vault") -> dict[str, dict[str, Any]]:
    return {f"{kind}/{name}": json.loads(git(repo, "show", f"{ref}:{kind}/{name}/manifest.json"))
            for kind, name in (("environments", "par"), ("datasets", "pairs"))}


def _assert_restored(clone: Path, manifests: dict[str, dict[str, Any]]) -> None:
    for folder, m in manifests.items():
        root = clone / ".monte" / folder
        assert m["files"], folder
        for rel, entry in m["files"].items():
            assert _sha256(root / rel) == entry["sha256"], f"{folder}/{rel}"


def test_a_freeze_is_a_dvc_output_that_plain_dvc_sees(repo: Path, vault: dict[str, Any], monte: Any,
                                                      tmp_path: Path, dvc_cli: DvcCli) -> None:
    from monte.storage.keys import write_key
    from monte.storage.object_stores import open_store

    assert _freeze(repo, monte, tmp_path) == [".monte/environments/par.dvc", ".monte/datasets/pairs.dvc"]
    for kind, name in (("environments", "par"), ("datasets", "pairs")):
        pointer = repo / ".monte" / kind / f"{name}.dvc"
        text = pointer.read_text()
        assert "hash: md5" in text and f"path: {name}" in text and ".dir" in text, text
        # the Vault's own record of it carries the same DVC 3 entry
        doc = json.loads(open_store(vault["url"], write_key()).get(f"monte/manifests/{kind}/{name}.json") or b"")
        assert doc["dvc"]["hash"] == "md5" and f"md5: {doc['dvc']['md5']}" in text
    # staged, as `dvc add` asks the user to do
    staged = git(repo, "diff", "--cached", "--name-only").split()
    assert {".monte/environments/par.dvc", ".monte/datasets/pairs.dvc"} <= set(staged)
    _commit(repo)
    assert "Data and pipelines are up to date" in dvc_cli(repo, "status")
    assert json.loads(dvc_cli(repo, "data", "status", "--json").splitlines()[-1] or "{}") == {}
    listed = set(dvc_cli(repo, "list", ".", "-R", "--dvc-only").split())
    assert {".monte/environments/par/exams/parity/dev.jsonl", ".monte/environments/par/manifest.json",
            ".monte/datasets/pairs/rows.jsonl", ".monte/datasets/pairs/manifest.json"} <= listed


def test_the_dvc_cache_links_the_frozen_files_instead_of_copying_them(repo: Path, vault: dict[str, Any],
                                                                      monte: Any, tmp_path: Path) -> None:
    """One copy on disk: DVC's cache object *is* the frozen file (a hardlink on this file system;
    a reflink first where the file system has them), protected read-only as DVC protects its
    cache. Before, the Vault upload copied the data root into .dvc/cache."""
    _freeze(repo, monte, tmp_path)
    frozen = repo / ".monte" / "datasets" / "pairs" / "rows.jsonl"
    md5 = hashlib.md5(frozen.read_bytes()).hexdigest()
    cached = repo / ".dvc" / "cache" / "files" / "md5" / md5[:2] / md5[2:]
    assert os.path.samefile(frozen, cached)
    assert not frozen.stat().st_mode & 0o222


def test_a_fresh_clone_dvc_pull_restores_every_frozen_file(repo: Path, vault: dict[str, Any], monte: Any,
                                                           tmp_path: Path, dvc_cli: DvcCli) -> None:
    _freeze(repo, monte, tmp_path)
    _commit(repo)
    clone = tmp_path / "clone"
    git(tmp_path, "clone", "-q", str(repo), str(clone))
    vault["dvc_remote"](clone)
    assert not (clone / ".monte" / "environments" / "par").exists()
    dvc_cli(clone, "pull")
    _assert_restored(clone, _manifests(clone, "origin/monte/vault"))
    assert "Data and pipelines are up to date" in dvc_cli(clone, "status")
    # the clone holds each frozen byte once too (the committed cache.type links)
    rows = clone / ".monte" / "datasets" / "pairs" / "rows.jsonl"
    assert rows.stat().st_nlink == 2


@pytest.mark.parametrize("scope", GC_SCOPES, ids=lambda s: " ".join(s))
def test_dvc_gc_keeps_every_frozen_object(repo: Path, vault: dict[str, Any], monte: Any, tmp_path: Path,
                                          scope: list[str], dvc_cli: DvcCli) -> None:
    _freeze(repo, monte, tmp_path)
    _commit(repo)
    before = vault["objects"]()
    assert len(before) >= 6  # two folders: two .dir listings, four files
    cache = {p.name for p in (repo / ".dvc" / "cache").rglob("*") if p.is_file()}
    dvc_cli(repo, "gc", *scope, "-c", "-f")
    assert vault["objects"]() == before
    assert {p.name for p in (repo / ".dvc" / "cache").rglob("*") if p.is_file()} == cache
    # another machine: a fresh clone, no DVC cache at all
    clone = tmp_path / "clone"
    git(tmp_path, "clone", "-q", str(repo), str(clone))
    vault["dvc_remote"](clone)
    dvc_cli(clone, "gc", *scope, "-c", "-f")
    assert vault["objects"]() == before
    dvc_cli(clone, "pull")
    _assert_restored(clone, _manifests(repo))


def test_monte_init_writes_the_pointers_a_clone_lacks(repo: Path, vault: dict[str, Any], monte: Any,
                                                      tmp_path: Path, monkeypatch: pytest.MonkeyPatch, dvc_cli: DvcCli) -> None:
    """A machine that has the vault ref but neither the pointers (never committed) nor the
    bytes: `monte init` writes each pointer from the DVC hash its vault commit carries, and then
    `dvc gc` keeps the objects and `dvc pull` restores them."""
    _freeze(repo, monte, tmp_path)
    other = tmp_path / "other"
    shutil.copytree(repo, other, symlinks=True, ignore=shutil.ignore_patterns(".monte", "cache"))
    monkeypatch.chdir(other)
    assert not (other / ".monte").exists()
    before = vault["objects"]()
    r = monte("init", "--json")
    assert r.code == 0, r.out
    assert {".monte/environments/par.dvc", ".monte/datasets/pairs.dvc"} <= set(r.json()["created"])
    assert (other / ".monte" / "environments" / "par.dvc").read_text() == \
        (repo / ".monte" / "environments" / "par.dvc").read_text()
    for scope in GC_SCOPES:
        dvc_cli(other, "gc", *scope, "-c", "-f")
    assert vault["objects"]() == before
    dvc_cli(other, "pull")
    _assert_restored(other, _manifests(repo))
    # monte agrees with what DVC put there
    assert monte("env", "install", "par", "--json").json()[0]["action"] == "verified"
    assert monte("dataset", "show", "pairs", "--json").json()["verified"] is True


def test_objects_deleted_from_the_vault_are_reported_lost(repo: Path, vault: dict[str, Any], monte: Any,
                                                          tmp_path: Path, monkeypatch: pytest.MonkeyPatch, dvc_cli: DvcCli) -> None:
    from monte.storage.keys import write_key
    from monte.storage.object_stores import open_store

    _freeze(repo, monte, tmp_path)
    store = open_store(vault["url"], write_key())
    env_dir = json.loads(store.get("monte/manifests/environments/par.json") or b"")["dvc"]["md5"]
    data_dir = json.loads(store.get("monte/manifests/datasets/pairs.json") or b"")["dvc"]["md5"]
    # deleted by hand: one file of the environment, the listing of the dataset
    listing = json.loads(store.get(f"files/md5/{env_dir[:2]}/{env_dir[2:]}") or b"")
    gone = next(e["md5"] for e in listing if e["relpath"].endswith("dev.jsonl"))
    store.delete(f"files/md5/{gone[:2]}/{gone[2:]}")
    store.delete(f"files/md5/{data_dir[:2]}/{data_dir[2:]}")
    other = tmp_path / "other"
    shutil.copytree(repo, other, symlinks=True, ignore=shutil.ignore_patterns(".monte", "cache"))
    (other / ".monte").mkdir()
    monkeypatch.chdir(other)
    listed = {e["name"]: e for e in monte("env", "list", "--vault", "--json").json()}
    assert listed["par"]["complete"] is False and listed["par"]["lost"] == 1
    assert monte("dataset", "list", "--vault", "--json").json()[0]["complete"] is False
    before = snapshot_state(other)
    for argv in (("env", "install", "par"), ("dataset", "show", "pairs")):
        r = monte(*argv, "--json")
        err = r.json()["error"]
        assert r.code == 5 and err["code"] == "E_INTEGRITY", r.out
        assert "lost" in err["message"] and "connection" not in err["message"] + err["fix"], err
        assert snapshot_state(other) == before
    # the machine that froze them uploads what the Vault lost, and the other machine installs
    monkeypatch.chdir(repo)
    r = monte("env", "add", "--benchmark", "parity", "--as", "par", "--json")
    assert r.code == 0 and "uploaded again the 1 object(s)" in r.json()["note"], r.out
    r = monte("dataset", "add", "pairs", "--from-file", str(tmp_path / "rows.jsonl"), "--json")
    assert r.code == 0 and "had lost" in r.json()["note"], r.out
    monkeypatch.chdir(other)
    listed = {e["name"]: e for e in monte("env", "list", "--vault", "--json").json()}
    assert listed["par"]["complete"] is True and listed["par"]["lost"] == 0, listed  # whole again
    assert [(e["name"], e["complete"]) for e in monte("dataset", "list", "--vault", "--json").json()] == \
        [("pairs", True)]
    assert monte("env", "install", "par", "--json").json()[0]["action"] == "fetched"
    assert monte("dataset", "show", "pairs", "--json").json()["verified"] is True
    for pointer in (".monte/environments/par.dvc", ".monte/datasets/pairs.dvc"):  # the same DVC output
        assert (other / pointer).read_text() == (repo / pointer).read_text()
    assert "Data and pipelines are up to date" in dvc_cli(other, "status")


def test_a_frozen_name_ending_in_dvc_is_refused(repo: Path, monte: Any, tmp_path: Path) -> None:
    rows = tmp_path / "rows.jsonl"
    rows.write_text(ROWS)
    before = snapshot_state(repo)
    r = monte("dataset", "add", "x.dvc", "--from-file", str(rows), "--json")
    assert r.code == 2 and r.json()["error"]["code"] == "E_INVALID_NAME"
    r = monte("env", "add", "--benchmark", "parity", "--as", "par.DVC", "--json")
    assert r.code == 2 and r.json()["error"]["code"] == "E_INVALID_NAME"
    assert snapshot_state(repo) == before


def test_a_data_root_outside_the_repository(repo: Path, monte: Any, tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch, dvc_cli: DvcCli) -> None:
    """DVC tracks nothing outside its repository: the pointers stay in the repository's
    .monte/, so `dvc gc` keeps every object (and `dvc status` says the folder is not here);
    monte's own path (freeze, push, install from the Vault on another machine) works as ever."""
    (tmp_path / "vault").mkdir()
    assert monte("config", "set", "vault", str(tmp_path / "vault")).code == 0
    monkeypatch.setenv("MONTE_DATA_ROOT", str(tmp_path / "data"))
    (tmp_path / "data").mkdir()
    r = monte("env", "add", "--benchmark", "parity", "--as", "par", "--json")
    assert r.code == 0 and r.json()["dvc_pointer"] == ".monte/environments/par.dvc", r.out
    assert (tmp_path / "data" / "environments" / "par" / "manifest.json").is_file()
    assert not (repo / ".monte" / "environments" / "par").exists()
    _commit(repo)
    objects = {p.name for p in (tmp_path / "vault" / "files").rglob("*") if p.is_file()}
    for scope in GC_SCOPES:
        dvc_cli(repo, "gc", *scope, "-c", "-f")
    assert {p.name for p in (tmp_path / "vault" / "files").rglob("*") if p.is_file()} == objects
    assert "deleted" in dvc_cli(repo, "status")
    other = tmp_path / "other"
    git(tmp_path, "clone", "-q", str(repo), str(other))
    git(other, "fetch", "-q", "origin", "refs/heads/monte/vault:refs/heads/monte/vault")
    monkeypatch.setenv("MONTE_DATA_ROOT", str(tmp_path / "other-data"))
    (tmp_path / "other-data").mkdir()
    monkeypatch.chdir(other)
    assert monte("env", "install", "par", "--json").json()[0]["action"] == "fetched"
    assert (other / ".monte" / "environments" / "par.dvc").read_text() == \
        (repo / ".monte" / "environments" / "par.dvc").read_text()
