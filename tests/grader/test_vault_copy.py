"""Issue 41's Vault copy against a real grader (tests/grader/conftest.py: its own Unix account, a
loopback sshd with the forced command, every agent-side command run as an unprivileged third
account) and a real Vault: a bucket on the GCS emulator and a folder. After `monte grader take`
and `monte env add` with a grader pinned, no Vault and no data root holds a byte of a sealed
item; the Vault keeps the split as an age file encrypted to the grader's key, which decrypts
with that key (pyrage and the real `age` CLI) and with no other; `monte grader restore`, run as
the grader's account, brings custody back from it and trusts no record the grader did not sign.
An lm-eval exam (its split and whole frozen task, the test documents with their gold) is kept as
one such age file: no Vault keeps a byte of a test document, restore rebuilds the task folder and
the grader grades it as before (lm-eval's own code), and an object another frozen file shares is
never deleted. The tests run in order and share the module's grader."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.gcs_emulator import Emulator, write_fake_key
from tests.support.grader import PYTHON, Setup

# the tests build on each other in order: under `-n 2 --dist loadgroup` the module runs whole on one worker
pytestmark = pytest.mark.xdist_group("test_vault_copy")


def _install_elsewhere(s: Setup, tmp_path: Path, env: str) -> Path:
    """Another machine's clone of the agent's repository (no data root) installing ``env`` from the
    Vault: refused unless every file it fetches is proven; returns the folder it made."""
    other = tmp_path / "other"
    shutil.copytree(s.repo, other, symlinks=True, ignore=shutil.ignore_patterns(".monte", "cache"))
    (other / ".monte").mkdir()
    r = subprocess.run([PYTHON, "-m", "monte", "env", "install", env, "--json"], cwd=other, capture_output=True,
                       text=True, env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert r.returncode == 0 and json.loads(r.stdout)[0]["action"] == "fetched", r.stdout + r.stderr
    return other / ".monte" / "environments" / env


@pytest.fixture(scope="module")
def vaults(grader_setup: Setup, emulator: Emulator) -> Iterator[dict[str, Any]]:
    """A bucket Vault on the emulator and a folder Vault, both reachable by the agent and the
    grader accounts (the folder is the agent's: the grader reads it, as a shared mount)."""
    s = grader_setup
    key = write_fake_key(s.base / "gcs-key.json")
    key.chmod(0o644)  # a fake key both accounts read
    env = {"STORAGE_EMULATOR_HOST": emulator.host, "GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT": "false",
           "MONTE_GCS_RETRY_S": "5", "MONTE_GCS_KEY_FILE": str(key), "MONTE_GCS_BOX_KEY_FILE": str(key)}
    folder = s.base / "folder-vault"
    folder.mkdir(mode=0o755)
    shutil.chown(folder, s.agent.name, s.agent.name)
    with pytest.MonkeyPatch.context() as mp:  # this process reads the bucket as the tests' root
        for k, v in env.items():
            mp.setenv(k, v)
        yield {"bucket": f"gs://{emulator.create_bucket()}/vault", "folder": str(folder), "env": env, "key": str(key)}


def _objects(url: str) -> dict[str, bytes]:
    from monte.storage.keys import read_key
    from monte.storage.object_stores import is_gcs, open_store

    store = open_store(url, read_key() if is_gcs(url) else None, what="the Vault")
    return {name: store.get(name) or b"" for name in store.list("")}


def _holding(places: dict[str, bytes], needle: bytes) -> list[str]:
    return sorted(name for name, raw in places.items() if needle in raw)


def _files(*roots: Path) -> dict[str, bytes]:
    return {str(p): p.read_bytes() for root in roots if root.exists() for p in root.rglob("*") if p.is_file()}


def _unset(s: Setup, *keys: str) -> None:
    """The repository as it was before ``keys`` were set (the grader's pin: grader, grader_key)."""
    from ruamel.yaml import YAML

    path = s.repo / ".monte.yaml"
    yaml = YAML()
    data = yaml.load(path.read_text())
    for key in keys:
        data.pop(key, None)
    with open(path, "w") as f:  # written in place: the file stays the agent's
        yaml.dump(data, f)


def _decrypts(blob: bytes, key: Path) -> bytes | None:
    import pyrage

    try:
        return bytes(pyrage.decrypt(blob, [pyrage.ssh.Identity.from_buffer(key.read_bytes())]))
    except pyrage.DecryptError:
        return None


def test_take_replaces_the_buckets_plaintext_split_with_one_encrypted_to_the_grader(
        grader_setup: Setup, vaults: dict[str, Any], tmp_path: Path) -> None:
    s, env = grader_setup, vaults["env"]
    split = s.repo / ".monte" / "environments" / "parity" / "exams" / "parity" / "test.jsonl"
    raw = split.read_bytes()
    item = json.loads(raw.splitlines()[7])["prompt"].encode()  # one sealed item's bytes, to grep for
    content = hashlib.sha256(raw).hexdigest()
    # before the grader: the freeze kept on the data root goes to the bucket Vault, split and all
    _unset(s, "grader", "grader_key")
    s.agent_monte("config", "set", "vault", vaults["bucket"], check=True, **env)
    s.agent_monte("env", "add", "--server", "parity", "--dev", "parity", "--test", "parity", check=True, **env)
    assert _holding(_objects(vaults["bucket"]), item)  # the plaintext is there: what take must undo
    s.agent_monte("config", "set", "grader", s.url, "--key", s.public_key, check=True)
    r = s.agent_monte("grader", "take", "parity", "--json", check=True, **env)
    taken = json.loads(r.stdout)["taken"]
    assert [(t["content"], t["vault"]) for t in taken] == [(content, f"monte/sealed/{content}.age")]
    assert not split.exists()
    objects = _objects(vaults["bucket"])
    assert _holding(objects, item) == [] and _holding(objects, raw[:200]) == []
    blob = objects[f"monte/sealed/{content}.age"]
    # the grader's private key (read here as root: the agent cannot) decrypts it, pyrage and age alike
    assert _decrypts(blob, s.home / "key") == raw
    sealed = tmp_path / "copy.age"
    sealed.write_bytes(blob)
    if shutil.which("age") is not None:
        r2 = subprocess.run(["age", "-d", "-i", str(s.home / "key"), str(sealed)], capture_output=True)
        assert r2.returncode == 0 and r2.stdout == raw
        r3 = subprocess.run(["age", "-d", "-i", str(s.key_file), str(sealed)], capture_output=True)
        assert r3.returncode != 0 and r3.stdout == b""
    assert _decrypts(blob, s.key_file) is None  # the agent's own key: nothing
    # the Vault still lists the environment whole: its split's absence there is the point, not a loss
    r = s.agent_monte("env", "list", "--vault", "--json", check=True, **env)
    assert [(e["name"], e["complete"], e["lost"]) for e in json.loads(r.stdout)] == [("parity", True, 0)]
    # and another machine installs it from there: every other file proven, the split left to the grader
    folder = _install_elsewhere(s, tmp_path, "parity")
    assert (folder / "curriculum.jsonl").is_file() and not (folder / "exams" / "parity" / "test.jsonl").exists()


def test_env_add_with_a_grader_refuses_unreached_and_hands_the_split_over_itself(
        grader_setup: Setup, vaults: dict[str, Any]) -> None:
    s, env = grader_setup, vaults["env"]
    folder_vault = Path(vaults["folder"])
    s.agent_monte("config", "set", "vault", str(folder_vault), check=True)
    add = ("env", "add", "--dev", "spell_backward", "--test", "spell_backward", "--as", "sb", "--json")
    # the grader unreachable: refused before anything is generated or moves
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    s.agent_monte("config", "set", "grader", f"ssh://{s.grader.name}@127.0.0.1:{port}", "--key", s.public_key,
                  check=True)
    before = _files(folder_vault, s.repo / ".monte", s.repo / ".dvc" / "cache")
    r = s.agent_monte(*add)
    assert r.returncode == 8 and "E_BOX" in r.stdout and "nothing was frozen" in r.stdout, r.stdout
    assert _files(folder_vault, s.repo / ".monte", s.repo / ".dvc" / "cache") == before
    s.agent_monte("config", "set", "grader", s.url, "--key", s.public_key, check=True)
    held = set((s.home / "sealed").glob("*.jsonl"))
    r = s.agent_monte(*add, check=True, **env)
    # a catalog exam: the grader drew it with its own seed (it was never generated here) and encrypted the copy
    assert "drawn by the grader" in json.loads(r.stdout)["note"]
    assert "the Vault keeps them encrypted to its key" in json.loads(r.stdout)["note"]
    new = set((s.home / "sealed").glob("*.jsonl")) - held
    assert len(new) == 1
    raw = new.pop().read_bytes()
    content = hashlib.sha256(raw).hexdigest()
    manifest = json.loads((s.repo / ".monte" / "environments" / "sb" / "manifest.json").read_text())
    assert manifest["files"]["exams/spell_backward/test.jsonl"]["sha256"] == content
    assert not (s.repo / ".monte" / "environments" / "sb" / "exams" / "spell_backward" / "test.jsonl").exists()
    # no byte of a sealed item anywhere the agent's account keeps: data root, DVC's cache, the folder Vault
    item = json.loads(raw.splitlines()[11])["prompt"].encode()
    places = _files(folder_vault, s.repo / ".monte", s.repo / ".dvc" / "cache")
    assert _holding(places, item) == [] and _holding(places, raw[:200]) == []
    blob = (folder_vault / "monte" / "sealed" / f"{content}.age").read_bytes()
    assert _decrypts(blob, s.home / "key") == raw and _decrypts(blob, s.key_file) is None
    # the environment stays usable: its other files prove, the split is the grader's to hold
    r = s.agent_monte("env", "install", "sb", "--json", check=True)
    assert json.loads(r.stdout)[0]["action"] == "verified"
    r = s.agent_monte("experiment", "init", "sbexp", "--eval", "sb", "--model", "base-model", "--dry-run", "--json",
                      check=True, **env)  # an experiment on it proves the split by the grader's word
    assert json.loads(r.stdout)["measurement"]["exams"]["spell_backward"]["splits"]["test"]["sha256"] == content


def test_env_add_run_again_to_push_a_freeze_kept_from_before_the_pin_hands_its_split_over_first(
        grader_setup: Setup, vaults: dict[str, Any]) -> None:
    """A freeze kept on the data root (no Vault then, no grader): the same `monte env add` that
    pushes it once a Vault is set hands its test split to the grader first, and pushes the rest."""
    s, folder_vault = grader_setup, Path(vaults["folder"])
    add = ("env", "add", "--dev", "word_sorting", "--test", "word_sorting", "--as", "ws", "--json")
    _unset(s, "grader", "grader_key", "vault")
    s.agent_monte(*add, check=True)
    split = s.repo / ".monte" / "environments" / "ws" / "exams" / "word_sorting" / "test.jsonl"
    raw = split.read_bytes()
    content = hashlib.sha256(raw).hexdigest()
    s.agent_monte("config", "set", "grader", s.url, "--key", s.public_key, check=True)
    s.agent_monte("config", "set", "vault", str(folder_vault), check=True)
    r = s.agent_monte(*add, check=True)
    assert "pushed" in json.loads(r.stdout)["note"]
    assert not split.exists() and (s.home / "sealed" / f"{content}.jsonl").read_bytes() == raw
    places = _files(folder_vault, s.repo / ".monte", s.repo / ".dvc" / "cache")
    assert _holding(places, raw[:200]) == [] and _holding(places, raw.splitlines()[5]) == []
    assert (folder_vault / "monte" / "manifests" / "environments" / "ws.json").is_file()  # the rest went up
    assert _decrypts((folder_vault / "monte" / "sealed" / f"{content}.age").read_bytes(), s.home / "key") == raw


def test_restore_brings_custody_back_from_the_vault_and_trusts_only_the_graders_signature(
        grader_setup: Setup, vaults: dict[str, Any]) -> None:
    s, env = grader_setup, vaults["env"]
    sealed = s.home / "sealed"
    kept = _files(sealed)
    assert len([p for p in kept if p.endswith(".jsonl")]) == 3
    lost = sealed.parent / "sealed-lost"
    os.replace(sealed, lost)  # the grader's disk lost its splits (its key and ledger came back from backup)
    s.grader.run("mkdir", "-m", "700", str(sealed), check=True)
    for url, n in ((vaults["bucket"], 1), (vaults["folder"], 2)):
        r = s.grader.monte("grader", "restore", url, "--home", str(s.home), "--json", check=True, **env)
        assert len(json.loads(r.stdout)["restored"]) == n, r.stdout
    # all but the secret seed of a split the grader drew: it never leaves the home, not even for the Vault
    assert _files(sealed) == {p: b for p, b in kept.items() if not p.endswith(".seed")}
    assert all(oct(p.stat().st_mode & 0o777) == "0o600" for p in sealed.iterdir())
    denied = s.agent.run("cat", str(next(sealed.glob("*.jsonl"))))
    assert denied.returncode != 0 and "Permission denied" in denied.stderr
    # a record edited in the Vault (how the split is graded) is passed over: the grader signed another
    record = next(Path(vaults["folder"], "monte", "sealed").glob("*.json"))
    doc = json.loads(record.read_text())
    doc["meta"]["benchmark"] = "parity"
    s.agent.run("sh", "-c", f"cat > {record}", input=json.dumps(doc), check=True)
    for p in sealed.iterdir():
        if p.name.startswith(doc["meta"]["content"]):
            p.unlink()
    r = s.grader.monte("grader", "restore", vaults["folder"], "--home", str(s.home), "--json", check=True, **env)
    out = json.loads(r.stdout)
    assert out["restored"] == [] and [p["why"] for p in out["passed"]] == [
        "its record is not signed by this grader's key"]
    assert not (sealed / f"{doc['meta']['content']}.jsonl").exists()
    shutil.rmtree(lost)


# --- an lm-eval exam: its split and frozen task kept as one age file ---------------------------

LM_TASK = "own_task"
LM_DOCS = f"lmeval/{LM_TASK}/data/test.jsonl"  # the frozen task's test documents (with their gold)


def _lm_task(s: Setup) -> Path:
    pytest.importorskip("lm_eval")
    from tests.envs.lmeval_tasks import write_own

    folder = s.agent.home / "tasks" / "own"
    if not folder.exists():
        write_own(s.agent.home / "tasks")
        subprocess.run(["chown", "-R", f"{s.agent.name}:{s.agent.name}", str(s.agent.home / "tasks")], check=True)
    return folder


def _tar_members(raw: bytes) -> dict[str, bytes]:
    import io
    import tarfile

    with tarfile.open(fileobj=io.BytesIO(raw)) as tar:
        return {m.name: tar.extractfile(m).read() for m in tar.getmembers()}  # type: ignore[union-attr]


def _lm_needles(s: Setup) -> tuple[bytes, ...]:
    """Byte strings of the lm-eval task's test documents: a whole document and one gold answer."""
    docs = (s.agent.home / "tasks" / "own-data" / "test.jsonl").read_bytes()
    doc = json.loads(docs.splitlines()[3])
    return docs.splitlines()[3], f'"{doc["reversed"]}"'.encode()


def test_an_lm_eval_exams_task_is_kept_as_one_age_file_and_its_plaintext_leaves_both_vaults(
        grader_setup: Setup, vaults: dict[str, Any], tmp_path: Path) -> None:
    s, env = grader_setup, vaults["env"]
    task = _lm_task(s)
    needles = _lm_needles(s)
    add = ("env", "add", "--dev", f"lm-eval:{LM_TASK}", "--test", f"lm-eval:{LM_TASK}", "--include-path", str(task))
    # before the grader: the freeze goes to the bucket Vault whole, test documents and all
    _unset(s, "grader", "grader_key")
    s.agent_monte("config", "set", "vault", vaults["bucket"], check=True, **env)
    s.agent_monte(*add, "--as", "lmb", check=True, **env)
    assert all(_holding(_objects(vaults["bucket"]), n) for n in needles)  # what take must undo
    frozen = s.repo / ".monte" / "environments" / "lmb"
    manifest = json.loads((frozen / "manifest.json").read_text())
    content = manifest["files"][f"exams/{LM_TASK}/test.jsonl"]["sha256"]
    split, docs = (frozen / f"exams/{LM_TASK}/test.jsonl").read_bytes(), (frozen / LM_DOCS).read_bytes()
    s.agent_monte("config", "set", "grader", s.url, "--key", s.public_key, check=True)
    r = s.agent_monte("grader", "take", "lmb", "--json", check=True, **env)
    assert [(t["content"], t.get("vault")) for t in json.loads(r.stdout)["taken"]] == [
        (content, f"monte/sealed/{content}.age")]
    objects = _objects(vaults["bucket"])
    assert [n for n in needles if _holding(objects, n)] == [] and _holding(objects, split[:200]) == []
    # ONE age file: the tar the grader took (the split and the whole frozen task), which only its key opens
    blob = objects[f"monte/sealed/{content}.age"]
    members = _tar_members(_decrypts(blob, s.home / "key") or b"")
    assert members[f"exams/{LM_TASK}/test.jsonl"] == split and members[LM_DOCS] == docs
    assert set(members) - {f"exams/{LM_TASK}/test.jsonl"} == set(manifest["grader"]["tasks"][LM_TASK]["files"])
    assert _decrypts(blob, s.key_file) is None
    if shutil.which("age") is not None:
        sealed = tmp_path / "task.age"
        sealed.write_bytes(blob)
        r2 = subprocess.run(["age", "-d", "-i", str(s.home / "key"), str(sealed)], capture_output=True)
        assert r2.returncode == 0 and _tar_members(r2.stdout)[LM_DOCS] == docs
        assert subprocess.run(["age", "-d", "-i", str(s.key_file), str(sealed)], capture_output=True).returncode != 0
    # the Vault lists it whole (the sealed files' absence is the point) and the record names their md5s
    r = s.agent_monte("env", "list", "--vault", "--json", check=True, **env)
    assert ("lmb", True, 0) in [(e["name"], e["complete"], e["lost"]) for e in json.loads(r.stdout)]
    record = json.loads(objects[f"monte/sealed/{content}.json"])
    assert record["md5s"] == [hashlib.md5(split).hexdigest(), hashlib.md5(docs).hexdigest()]  # noqa: S324
    # the loss check knows them: the encrypted copy gone from the Vault, the test documents are lost
    from monte.storage.keys import read_key
    from monte.storage.object_stores import open_store

    store = open_store(vaults["bucket"], read_key(), what="the Vault")
    store.delete(f"monte/sealed/{content}.age")
    try:
        r = s.agent_monte("env", "list", "--vault", "--json", check=True, **env)
        assert ("lmb", False, 2) in [(e["name"], e["complete"], e["lost"]) for e in json.loads(r.stdout)]
    finally:
        store.put(f"monte/sealed/{content}.age", blob)
    # another machine installs it from there: the task's other files proven, the sealed ones left out
    installed = _install_elsewhere(s, tmp_path, "lmb")
    assert (installed / f"lmeval/{LM_TASK}/data/dev.jsonl").is_file()
    assert not (installed / LM_DOCS).exists() and not (installed / f"exams/{LM_TASK}/test.jsonl").exists()
    # with a grader pinned, `env add` never pushes them: the folder Vault, the data root and DVC's cache
    s.agent_monte("config", "set", "vault", vaults["folder"], check=True)
    s.agent_monte(*add, "--as", "lmf", check=True, **env)
    places = _files(Path(vaults["folder"]), s.repo / ".monte" / "environments" / "lmf", s.repo / ".dvc" / "cache")
    assert [n for n in needles if _holding(places, n)] == [] and _holding(places, split[:200]) == []
    blob = (Path(vaults["folder"]) / "monte" / "sealed" / f"{content}.age").read_bytes()
    assert _tar_members(_decrypts(blob, s.home / "key") or b"")[LM_DOCS] == docs
    s.extra["lm"] = {"content": content, "docs": docs}


def test_restore_rebuilds_an_lm_eval_exams_custody_and_it_grades_the_same(
        grader_setup: Setup, vaults: dict[str, Any]) -> None:
    from tests.support.grader import ROOT

    s, env = grader_setup, vaults["env"]
    content = s.extra["lm"]["content"]
    sealed = s.home / "sealed"
    s.agent_monte("experiment", "init", "lmexp", "--eval", "lmb", "--model", "base-model", check=True, **env)
    s.agent_monte("eval", "-e", "lmexp", "--yes", check=True, **env)  # dev@0 runs here, before any training
    r = s.agent_monte("eval", "-e", "lmexp", "--split", "test", "--yes", "--json", check=True, **env)
    base = json.loads(r.stdout)["runs"][0]
    kept = {p: b for p, b in _files(sealed).items() if Path(p).name.startswith(content) or f"{content}.d" in p}
    assert any(p.endswith(LM_DOCS) for p in kept)
    lost = s.base / "lm-lost"
    lost.mkdir()
    for p in sealed.glob(f"{content}*"):  # the grader's copy of the exam is gone (its key and ledger kept)
        os.replace(p, lost / p.name)
    # a copy in the Vault that is not what the grader signed is refused, named with its code and fix
    folder_blob = Path(vaults["folder"]) / "monte" / "sealed" / f"{content}.age"
    good = folder_blob.read_bytes()
    from monte.storage import sealed_copy

    members = _tar_members(sealed_copy.decrypt(good, (s.home / "key").read_bytes()))
    members[LM_DOCS] += b'{"word": "planted", "reversed": "detnalp"}\n'
    from tests.grader.test_server import _tar

    altered = _tar(members)
    try:
        for planted, why in ((b"age-encryption.org/v1\nnot an age file", "does not decrypt with this grader's key"),
                             (sealed_copy.encrypt(altered, s.public_key), "decrypts to other bytes than the "
                              "content signed")):  # anyone can encrypt to the grader's public key
            folder_blob.write_bytes(planted)
            r = s.grader.monte("grader", "restore", vaults["folder"], "--home", str(s.home), "--json", check=True,
                               **env)
            passed = [p for p in json.loads(r.stdout)["passed"] if p["content"] == content]
            assert [p["code"] for p in passed] == ["E_INTEGRITY"] and why in passed[0]["why"], r.stdout
            assert "monte grader take ENV" in passed[0]["fix"] and not list(sealed.glob(f"{content}*"))
    finally:
        folder_blob.write_bytes(good)
    # the bucket's copy brings the exam back as the grader held it
    r = s.grader.monte("grader", "restore", vaults["bucket"], "--home", str(s.home), "--json", check=True, **env)
    assert content in [t["content"] for t in json.loads(r.stdout)["restored"]], r.stdout
    assert {p: b for p, b in _files(sealed).items() if p in kept} == kept and set(kept) <= set(_files(sealed))
    shutil.rmtree(lost)
    # and grades as before: the same weights read again (a claim on a copy of the base) score the same
    same = s.agent.home / "same-weights"
    s.agent.run("cp", "-r", str(s.repo / "base-model"), str(same), check=True)
    made = s.agent.run(PYTHON, "-c", "from pathlib import Path\nfrom tests.support.helpers import checkpoint\n"
                       f"print(checkpoint(Path({str(s.repo)!r}), Path({str(same)!r}), experiment='lmexp'))",
                       cwd=s.repo, check=True, PYTHONPATH=str(ROOT))
    ck = made.stdout.split()[-1]
    s.agent_monte("eval", "-e", "lmexp", "--checkpoint", f"{ck}@50", "--yes", check=True, **env)
    r = s.agent_monte("eval", "-e", "lmexp", "--split", "test", "--yes", "--json", check=True, **env)
    claim = json.loads(r.stdout)["runs"][0]
    assert claim["role"] == "claim" and (claim["score"], claim["n"]) == (base["score"], base["n"])
    assert s.grader_reads()[claim["run"]]["statement"]["statement"]["read"] == 2


def test_a_sealed_files_object_that_another_frozen_file_needs_stays_in_the_vault(
        grader_setup: Setup, vaults: dict[str, Any]) -> None:
    """DVC keeps one object per content: a dataset frozen from the very test documents shares
    their object, and taking the exam into custody must not delete the dataset's bytes."""
    s, env = grader_setup, vaults["env"]
    task, folder_vault = _lm_task(s), Path(vaults["folder"])
    docs = s.agent.home / "tasks" / "own-data" / "test.jsonl"
    _unset(s, "grader", "grader_key")
    s.agent_monte("config", "set", "vault", str(folder_vault), check=True)
    s.agent_monte("env", "add", "--dev", f"lm-eval:{LM_TASK}", "--test", f"lm-eval:{LM_TASK}", "--as", "lmd",
                  "--include-path", str(task), check=True, **env)
    s.agent_monte("dataset", "add", "docs-copy", "--from-file", str(docs), check=True, **env)
    md5 = hashlib.md5(docs.read_bytes()).hexdigest()  # noqa: S324 - DVC 3's content address
    shared = folder_vault / "files" / "md5" / md5[:2] / md5[2:]
    frozen = s.repo / ".monte" / "environments" / "lmd" / LM_DOCS
    assert shared.is_file() and frozen.read_bytes() == docs.read_bytes()  # one object for both
    s.agent_monte("config", "set", "grader", s.url, "--key", s.public_key, check=True)
    s.agent_monte("grader", "take", "lmd", check=True, **env)
    assert not frozen.exists() and shared.is_file()
    # the split's own object, which nothing else needs, left the folder Vault for the encrypted copy
    manifest = json.loads((s.repo / ".monte" / "environments" / "lmd" / "manifest.json").read_text())
    split = manifest["files"][f"exams/{LM_TASK}/test.jsonl"]["sha256"]
    record = json.loads((folder_vault / "monte" / "sealed" / f"{split}.json").read_text())
    assert record["md5s"][1] == md5 and (folder_vault / "monte" / "sealed" / f"{split}.age").is_file()
    assert not (folder_vault / "files" / "md5" / record["md5s"][0][:2] / record["md5s"][0][2:]).exists()
    r = s.agent_monte("dataset", "list", "--vault", "--json", check=True, **env)
    assert ("docs-copy", True, 0) in [(e["name"], e["complete"], e["lost"]) for e in json.loads(r.stdout)]
