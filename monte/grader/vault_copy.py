"""The Vault's side of handing a sealed split to the grader (the agent's account): the Vault's
copy replaced by one encrypted to the grader's pinned key (:mod:`monte.storage.sealed_copy`).
Two callers in :mod:`monte.grader.client`: ``monte grader take ENV`` (an environment frozen
before the grader was pinned) and ``monte env add`` with a grader pinned (the split leaves the
freeze's staging folder before anything is recorded, so no frozen environment, DVC cache or
Vault ever holds it in plaintext).
"""

from __future__ import annotations

import hashlib
import json
from typing import TYPE_CHECKING, Any

from monte.errors import error
from monte.workspace import Workspace

if TYPE_CHECKING:
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


def keep(writer: VaultRemote | None, key: str, raw: bytes, answer: dict[str, Any]) -> str | None:
    """The grader's answer to a ``take`` of ``raw``: with a Vault, the split is kept there
    encrypted to the pinned ``key`` beside the record the grader signed, and its plaintext
    object deleted. Returns the encrypted copy's name (None: no Vault)."""
    from monte.storage import sealed_copy

    if writer is None:
        return None
    if not isinstance(answer.get("meta"), dict) or not isinstance(answer.get("signature"), str):
        raise error("E_BOX", "the grader signs no record of the split it took (an older monte there?); the split "
                    "is in its custody, the Vault's copy was left as it was",
                    "upgrade monte on the grader's account, then run `monte grader take ENV` again")
    sealed_copy.put(writer.store, raw, key, answer["meta"], answer["signature"])
    return sealed_copy.blob_name(str(answer["meta"]["content"]))


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
