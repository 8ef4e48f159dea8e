"""The Vault's copy of a sealed split in a grader's custody: the split encrypted to the grader's
pinned ssh-ed25519 key with age (``pyrage``, the ``storage`` extra), so the Vault keeps a
backup of what the grader holds and never the plaintext.

Layout under the Vault URL (beside DVC's ``files/md5/..``):

- ``monte/sealed/<sha256>.age``: the split's bytes, encrypted to the grader's key (a plain age
  file: ``age -d -i GRADER_KEY FILE`` decrypts it, as :func:`decrypt` does);
- ``monte/sealed/<sha256>.json``: what grades it, as the grader signed it when it took the split
  (``meta``: content, exam, benchmark, grader, n; ``signature``: the grader's SSH signature
  under :data:`NAMESPACE`), the public key it was encrypted to, and the md5 of its plaintext (the
  object DVC would name it by: :func:`sealed_md5s` tells the Vault's loss check that its absence
  from ``files/md5/..`` is the point, not a loss).

An lm-eval exam's copy is one age file too: the tar its hand-over sent the grader (the split and
the frozen task, :func:`monte.grader.lmeval.pack`), whose sha256 the grader signs as
``meta.bundle``; its record's ``md5s`` name every sealed file's plaintext object (the split and
the task's test documents).

Nothing here reads an item: the agent's side encrypts bytes it holds for a moment, and only the
grader's private key turns them back into a split (``monte grader restore``).
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from monte.errors import error
from monte.storage.object_stores import ObjectStore

PREFIX = "monte/sealed/"
#: the SSH signature namespace of a sealed split's ``meta`` (not a read's statement)
NAMESPACE = "monte-grader-sealed"


def blob_name(content: str) -> str:
    return f"{PREFIX}{content}.age"


def record_name(content: str) -> str:
    return f"{PREFIX}{content}.json"


def object_name(md5: str) -> str:
    """Where DVC 3 keeps a file's object in a remote (the plaintext a hand-over deletes)."""
    return f"files/md5/{md5[:2]}/{md5[2:]}"


def encrypt(raw: bytes, recipient: str) -> bytes:
    """``raw`` encrypted to ``recipient`` (``ssh-ed25519 AAAA...``), as ``age -R`` would."""
    import pyrage

    try:
        to = pyrage.ssh.Recipient.from_str(" ".join(recipient.split()[:2]))
    except Exception:  # pyrage raises its own RecipientError for a key age cannot encrypt to
        raise error("E_USAGE", "the pinned grader key is not one age can encrypt to (an ssh-ed25519 or ssh-rsa "
                    "public key)", "pin the key `monte grader init` printed: `monte config set grader URL --key "
                    "'ssh-ed25519 AAAA...'`") from None
    return bytes(pyrage.encrypt(raw, [to]))


def decrypt(blob: bytes, private_key: bytes) -> bytes:
    """The plaintext of ``blob`` with the grader's private key (its home's ``key``)."""
    import pyrage

    try:
        return bytes(pyrage.decrypt(blob, [pyrage.ssh.Identity.from_buffer(private_key)]))
    except Exception as e:
        raise error("E_INTEGRITY", f"a sealed copy in the Vault does not decrypt with this grader's key "
                    f"({type(e).__name__}: {e})", "restore with the home whose key the repository pins") from None


def put(store: ObjectStore, raw: bytes, recipient: str, meta: dict[str, Any], signature: str, *,
        plaintexts: list[bytes] | None = None, needed: frozenset[str] | set[str] = frozenset()) -> list[str]:
    """Keep the encrypted copy of ``raw`` (whose grader-signed ``meta`` names its content, or for an
    lm-eval exam's tar its ``bundle``) and delete the plaintext objects the Vault may hold of the
    sealed files (``plaintexts``, else ``raw`` itself), except those whose md5 is ``needed`` by
    another file; returns the objects written."""
    content = str(meta["content"])
    if hashlib.sha256(raw).hexdigest() != str(meta.get("bundle") or content):
        raise error("E_INTEGRITY", "the split to keep does not hash to the content the grader signed",
                    "run `monte grader take ENV` again from a repository whose frozen split is intact")
    sealed = [raw] if plaintexts is None else plaintexts
    md5s = list(dict.fromkeys(hashlib.md5(p).hexdigest() for p in sealed))  # noqa: S324 - DVC 3's content address
    store.put(blob_name(content), encrypt(raw, recipient))
    doc = {"meta": meta, "signature": signature, "recipient": " ".join(recipient.split()[:2]), "md5": md5s[0],
           "md5s": md5s}
    store.put(record_name(content), (json.dumps(doc, sort_keys=True, indent=2) + "\n").encode())
    for md5 in md5s:
        if md5 not in needed:
            drop_plaintext(store, md5)
    return [blob_name(content), record_name(content)]


def put_drawn(store: ObjectStore, blob: bytes, recipient: str, meta: dict[str, Any], signature: str,
              md5: str) -> str:
    """Keep a split the grader drew itself (a catalog exam's test split, ``draw``): encrypted
    there to its own key, so the agent's side never held the plaintext and keeps only ``blob``,
    beside the record the grader signed, as :func:`put` keeps one. Returns the copy's name."""
    content = str(meta["content"])
    store.put(blob_name(content), blob)
    doc = {"meta": meta, "signature": signature, "recipient": " ".join(recipient.split()[:2]), "md5": md5}
    store.put(record_name(content), (json.dumps(doc, sort_keys=True, indent=2) + "\n").encode())
    return blob_name(content)


def drop_plaintext(store: ObjectStore, md5: str) -> bool:
    """Delete DVC's object of a sealed file from the Vault; True when there was one."""
    name = object_name(md5)
    if store.stat(name) is None:
        return False
    store.delete(name)
    return True


def records(store: ObjectStore) -> dict[str, dict[str, Any]]:
    """Every sealed copy the Vault keeps: content sha256 -> its record (unreadable ones skipped:
    a restore proves each one it uses against the grader's own signature)."""
    out: dict[str, dict[str, Any]] = {}
    for name in sorted(store.list(PREFIX)):
        if not name.endswith(".json"):
            continue
        raw = store.get(name)
        try:
            doc = json.loads(raw or b"")
            out[str(doc["meta"]["content"])] = dict(doc)
        except (ValueError, KeyError, TypeError):
            continue
    return out


def sealed_md5s(store: ObjectStore) -> set[str]:
    """The md5s of the sealed files the Vault keeps encrypted: their plaintext objects are gone on
    purpose. A record whose age file is missing covers nothing: the file is then lost, as any
    object deleted behind monte's back is (the loss check counts it)."""
    present = set(store.list(PREFIX))
    out: set[str] = set()
    for content, r in records(store).items():
        if blob_name(content) in present:
            md5s = r.get("md5s")
            out |= {str(x) for x in md5s} if isinstance(md5s, list) else {str(r.get("md5", ""))}
    return out
