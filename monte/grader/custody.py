"""Handing a sealed split to the grader, the agent's side: the split sent over the forced command,
its copy in the Vault replaced by one encrypted to the grader's pinned key, its plaintext copies
here removed. Two callers: ``monte grader take ENV`` (an environment frozen before the grader was
pinned: :func:`monte.grader.client.take`) and ``monte env add`` with a grader pinned
(:func:`freeze_environment`: the split leaves the freeze's staging folder before anything is
recorded, so no frozen environment, DVC cache or Vault ever holds it in plaintext).
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from monte.errors import MonteError, error
from monte.workspace import Workspace

if TYPE_CHECKING:
    from monte.grader.client import Grader
    from monte.manifest import Manifest
    from monte.storage.vault_remote import VaultRemote


def vault_writer(ws: Workspace) -> VaultRemote | None:
    """The Vault a hand-over keeps its encrypted copy in, or None where none is configured. A
    Vault this machine cannot write is refused before anything moves: its plaintext copy (if
    it holds one) could not be replaced."""
    from monte.storage import vault_remote as remote_vault

    where = remote_vault.access(ws, write=True)
    if where.url is None:
        return None
    if where.writer is None:
        raise error("E_STORAGE", f"the Vault {where.url} cannot be written from here ({where.note}); nothing was "
                    "handed to the grader", "set MONTE_GCS_BOX_KEY_FILE (a key that writes the Vault), then run the "
                    "same command again")
    return where.writer


def send(g: Grader, raw: bytes, *, exam: str, benchmark: str, grader: Any, writer: VaultRemote | None) -> dict[str, Any]:
    """One split into custody: the grader keeps it and signs what grades it; the Vault keeps it
    encrypted to the pinned key, and its plaintext object there is deleted."""
    from monte.grader.client import call
    from monte.storage import sealed_copy

    content = hashlib.sha256(raw).hexdigest()
    answer = call(g, {"op": "take", "content": content, "exam": exam, "benchmark": benchmark, "grader": grader}, raw)
    out: dict[str, Any] = {"exam": exam, "content": content, "n": int(answer.get("n", raw.count(b"\n")))}
    if writer is not None:
        if not isinstance(answer.get("meta"), dict) or not isinstance(answer.get("signature"), str):
            raise error("E_BOX", f"the grader at {g.label} signs no record of the split it took (an older monte "
                        "there?); the split is in its custody, the Vault's copy was left as it was",
                        "upgrade monte on the grader's account, then run `monte grader take ENV` again")
        sealed_copy.put(writer.store, raw, g.key, answer["meta"], answer["signature"])
        out["vault"] = sealed_copy.blob_name(content)
    return out


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


def freeze_environment(ws: Workspace, add: Any, *, dry_run: bool) -> Any:
    """``monte env add`` with a grader pinned. ``add(hand_over=...)`` freezes the environment,
    calling ``hand_over(staged, manifest, writer)`` once the freeze is prepared in its staging
    folder and before anything is recorded or committed to DVC's cache.

    Order, so every refusal fires before anything moves: the grader must answer with the pinned
    key (else ``E_BOX``/``E_INTEGRITY``, nothing frozen); the freeze checks its name, the Vault and
    prepares; each test split goes to the grader and its encrypted copy to the Vault, and leaves
    the staging folder; then the freeze is recorded, tracked and pushed without it."""
    from monte.grader.client import proven_hello, require

    if dry_run:
        return add(hand_over=None)
    g = require(ws)
    try:
        proven_hello(g, what="nothing was frozen")
    except MonteError as exc:
        if exc.code != "E_BOX":
            raise
        raise error("E_BOX", f"{exc.message}; nothing was frozen (a grader-pinned repository freezes a test split "
                    "only into the grader's custody)", "start the grader's sshd and check its authorized_keys line, "
                    "then run `monte env add` again (`monte config show` shows the address pinned)") from None

    def hand_over(staged: Path, m: Manifest, writer: VaultRemote | None) -> list[dict[str, Any]]:
        taken = []
        for exam, splits in sorted(m.exams.items()):
            rel = splits.get("test")
            if rel is None or not (staged / rel).is_file():
                continue
            raw = (staged / rel).read_bytes()
            benchmark = (m.grader or {}).get("benchmarks", {}).get(exam, exam)
            taken.append(send(g, raw, exam=exam, benchmark=benchmark, grader=m.grader, writer=writer))
            (staged / rel).unlink()  # before DVC's cache or the Vault ever sees the folder
        return taken

    return add(hand_over=hand_over)
