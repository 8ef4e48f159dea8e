"""The Vault's copy of a sealed split (monte.storage.sealed_copy) on a folder Vault, without a grader
account: encrypted to an ssh-ed25519 key with age, it opens with that key (pyrage and the real
`age` CLI) and no other, the plaintext object is deleted, and bytes that are not the content the
grader signed are refused with nothing written. tests/grader/test_vault_copy.py runs the whole
hand-over against a real grader, a bucket and a folder Vault."""

from __future__ import annotations

import hashlib
import shutil
import subprocess
from pathlib import Path

import pytest

from monte.errors import MonteError
from monte.storage import sealed_copy
from monte.storage.object_stores import LocalStore
from tests.support.sshd import keygen


def test_a_sealed_copy_opens_with_the_graders_key_only(tmp_path: Path) -> None:
    grader, other = keygen(tmp_path / "grader"), keygen(tmp_path / "other")
    store = LocalStore(tmp_path / "vault", what="the Vault")
    (tmp_path / "vault").mkdir()
    raw = b'{"answer": "odd", "id": "parity/test/00000", "prompt": "p 48213 ="}\n'
    md5 = hashlib.md5(raw).hexdigest()
    store.put(sealed_copy.object_name(md5), raw)  # DVC's plaintext object, as a push before the grader left it
    content = hashlib.sha256(raw).hexdigest()
    meta: dict[str, object] = {"content": content, "exam": "parity", "n": 1}
    with pytest.raises(MonteError) as e:  # bytes that are not the content signed: nothing written
        sealed_copy.put(store, raw + b"x", Path(f"{grader}.pub").read_text(), meta, "sig")
    assert e.value.code == "E_INTEGRITY" and store.list("monte/") == {}
    sealed_copy.put(store, raw, Path(f"{grader}.pub").read_text(), meta, "sig")
    assert store.get(sealed_copy.object_name(md5)) is None  # the plaintext is gone
    assert not any(b"48213" in (store.get(n) or b"") for n in store.list(""))
    blob = store.get(sealed_copy.blob_name(content))
    assert blob is not None and blob.startswith(b"age-encryption.org/v1\n-> ssh-ed25519 ")
    assert sealed_copy.decrypt(blob, grader.read_bytes()) == raw
    with pytest.raises(MonteError) as e:
        sealed_copy.decrypt(blob, other.read_bytes())
    assert e.value.code == "E_INTEGRITY"
    assert sealed_copy.sealed_md5s(store) == {md5}
    assert sealed_copy.records(store)[content]["recipient"] == " ".join(
        Path(f"{grader}.pub").read_text().split()[:2])
    if shutil.which("age") is None:
        pytest.skip("the age CLI is not installed (apt-get install age): pyrage alone decrypted the copy")
    copy = tmp_path / "copy.age"
    copy.write_bytes(blob)
    opened = subprocess.run(["age", "-d", "-i", str(grader), str(copy)], capture_output=True)
    assert opened.returncode == 0 and opened.stdout == raw
    refused = subprocess.run(["age", "-d", "-i", str(other), str(copy)], capture_output=True)
    assert refused.returncode != 0 and refused.stdout == b""


def test_an_lm_eval_copy_seals_every_file_it_names_but_keeps_an_object_another_file_needs(tmp_path: Path) -> None:
    grader = keygen(tmp_path / "grader")
    store = LocalStore(tmp_path / "vault", what="the Vault")
    (tmp_path / "vault").mkdir()
    split, docs = b'{"id": "t/test/0", "prompt": "olleh"}\n', b'{"word": "hello", "reversed": "olleh"}\n'
    md5s = [hashlib.md5(x).hexdigest() for x in (split, docs)]
    for md5, raw in zip(md5s, (split, docs), strict=True):
        store.put(sealed_copy.object_name(md5), raw)
    tar = b"the tar of the split and the frozen task"  # what the copy encrypts: the grader signed its hash
    meta: dict[str, object] = {"content": hashlib.sha256(split).hexdigest(), "n": 1,
                               "bundle": hashlib.sha256(tar).hexdigest()}
    key = Path(f"{grader}.pub").read_text()
    with pytest.raises(MonteError) as e:  # the split alone is not what the grader signed for this exam
        sealed_copy.put(store, split, key, meta, "sig", plaintexts=[split, docs])
    assert e.value.code == "E_INTEGRITY" and store.list("monte/") == {}
    # the documents' bytes are another frozen file's too (a dataset made from them): that object stays
    sealed_copy.put(store, tar, key, meta, "sig", plaintexts=[split, docs], needed={md5s[1]})
    assert store.get(sealed_copy.object_name(md5s[0])) is None
    assert store.get(sealed_copy.object_name(md5s[1])) == docs
    blob = store.get(sealed_copy.blob_name(str(meta["content"])))
    assert blob is not None and sealed_copy.decrypt(blob, grader.read_bytes()) == tar
    assert sealed_copy.sealed_md5s(store) == set(md5s)
    # the encrypted copy gone, its files are covered by nothing: the loss check counts them lost
    store.delete(sealed_copy.blob_name(str(meta["content"])))
    assert sealed_copy.sealed_md5s(store) == set()
