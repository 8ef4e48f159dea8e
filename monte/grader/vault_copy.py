"""The Vault's side of handing a sealed split to the grader (the agent's account): the Vault's
copy replaced by one encrypted to the grader's pinned key (:mod:`monte.storage.sealed_copy`).
Two callers in :mod:`monte.grader.client`: ``monte grader take ENV`` (an environment frozen
before the grader was pinned) and ``monte env add`` with a grader pinned (the split leaves the
freeze's staging folder before anything is recorded, so no frozen environment, DVC cache or
Vault ever holds it in plaintext). An lm-eval exam's copy is the tar its hand-over sent (the split
and the frozen task, :func:`monte.grader.lmeval.pack`), and the plaintext objects deleted are
those of its split and its test documents.
"""

from __future__ import annotations

import hashlib
import json
from typing import TYPE_CHECKING, Any

from monte.errors import MonteError, error
from monte.workspace import Workspace

if TYPE_CHECKING:
    from monte.manifest import Manifest
    from monte.storage.vault_remote import VaultRemote


def vault_writer(ws: Workspace, *, required: bool = True) -> VaultRemote | None:
    """The Vault a hand-over keeps its encrypted copy in, or None where none is configured. A
    Vault this machine cannot write is refused (``required``: a split is about to be sent, and
    the Vault's plaintext copy of it could not be replaced), else None."""
    from monte.storage import vault_remote as remote_vault

    where = remote_vault.access(ws, write=True)
    if where.url is None:
        return None
    if where.writer is None and required:
        raise error("E_STORAGE", f"the Vault {where.url} cannot be written from here ({where.note}); nothing was "
                    "handed to the grader", "set MONTE_GCS_BOX_KEY_FILE (a key that writes the Vault), then run the "
                    "same command again")
    return where.writer


def keep(writer: VaultRemote | None, key: str, raw: bytes, answer: dict[str, Any], *,
         plaintexts: list[bytes] | None = None, needed: set[str] | None = None) -> str | None:
    """The grader's answer to a ``take`` of ``raw``: with a Vault, it is kept there encrypted to
    the pinned ``key`` beside the record the grader signed, and the plaintext objects of the
    sealed files (``plaintexts``: an lm-eval exam's split and test documents, ``raw`` being the
    tar sent; else ``raw`` itself) deleted, but for those another file still needs (``needed``,
    and :func:`needed_elsewhere`). Returns the encrypted copy's name (None: no Vault)."""
    from monte.storage import sealed_copy

    if writer is None:
        return None
    meta = answer.get("meta")
    if not isinstance(meta, dict) or not isinstance(answer.get("signature"), str) or (
            plaintexts is not None and not meta.get("bundle")):
        raise error("E_BOX", "the grader signs no record of the split it took (an older monte there?); the split "
                    "is in its custody, the Vault's copy was left as it was",
                    "upgrade monte on the grader's account, then run `monte grader take ENV` again")
    sealed_copy.put(writer.store, raw, key, meta, answer["signature"], plaintexts=plaintexts,
                    needed=(needed or set()) | needed_elsewhere(writer))
    return sealed_copy.blob_name(str(meta["content"]))


def needed_elsewhere(writer: VaultRemote) -> set[str]:
    """The md5 of every file a folder in the Vault lists that is not one of its own sealed files.

    DVC keeps one object per md5 under ``files/md5/..``, shared by every file with those bytes
    (a dev document identical to a test document, the same split frozen under two names): a sealed
    file's object is deleted only when no listed file outside the sealed ones names its md5, so
    no other folder loses a byte. The folders are the Vault's own listings (every manifest monte
    pushed and the ``.dir`` object its DVC entry names); one that cannot be read is passed over
    (a folder monte did not push, whose files the Vault's loss check reports as ever)."""
    from monte.manifest import parse_manifest, sealed_files
    from monte.storage import sealed_copy

    out: set[str] = set()
    for name in sorted(writer.store.list("monte/manifests/")):
        try:
            doc = json.loads(writer.store.get(name) or b"")
            m = parse_manifest(json.dumps(doc["manifest"]).encode(), name)
            entries = json.loads(writer.store.get(sealed_copy.object_name(str(doc["dvc"]["md5"]))) or b"[]")
            sealed = {rel for files in sealed_files(m).values() for rel in files}
            out |= {str(e["md5"]) for e in entries if e.get("relpath") not in sealed}
        except (MonteError, ValueError, KeyError, TypeError, AttributeError):
            continue
    return out


def shared_md5s(m: Manifest, files: dict[str, bytes]) -> set[str]:
    """The md5s of the sealed ``files`` (relpath -> bytes) whose bytes another file of the same
    freeze also holds (the same sha256 in its manifest): their objects stay in DVC's cache and the
    Vault, since that file needs them."""
    from monte.manifest import sealed_files

    sealed = {rel for listed in sealed_files(m).values() for rel in listed}
    others = {f.sha256 for rel, f in m.files.items() if rel not in sealed}
    return {hashlib.md5(raw).hexdigest() for rel, raw in files.items()  # noqa: S324 - DVC 3's address
            if rel in m.files and m.files[rel].sha256 in others}


def vault_plaintext(writer: VaultRemote, kind: str, name: str, rel: str, sha256: str) -> bytes | None:
    """The plaintext of ``rel`` the Vault still holds for a frozen folder (its DVC object), proven
    against the manifest's sha256; None where the Vault holds none."""
    from monte.storage import sealed_copy

    found = writer.manifest(kind, name)
    if found is None:
        return None
    listing = writer.store.get(sealed_copy.object_name(str(found[1].get("md5", ""))))
    try:
        md5 = next(str(e["md5"]) for e in json.loads(listing or b"[]") if e.get("relpath") == rel)
    except (StopIteration, ValueError, KeyError, TypeError, AttributeError):
        return None
    raw = writer.store.get(sealed_copy.object_name(md5))
    if raw is None or hashlib.sha256(raw).hexdigest() != sha256:
        return None
    return raw
