"""``monte grader restore``: the grader's custody brought back from the Vault's encrypted copies
(:mod:`monte.storage.sealed_copy`), run as the grader's account into its home.

Each copy is used only when the grader's own key signed its record (what grades it) and its
bytes decrypt with the grader's private key to exactly the content the record names (an lm-eval
exam: the tar whose sha256 the record's ``bundle`` names, every file of which is proven again
against the task it records): a Vault the agent can write can withhold a copy, never plant or
alter one. A copy passed over is named with why, an ``E_*`` code and the fix. The ledger of
reads is not in the Vault: it comes back from the grader's own backup (docs/grader.md, "Backup").
"""

from __future__ import annotations

import hashlib
import json
import os
from typing import Any

from monte.errors import MonteError
from monte.grader import home as homes
from monte.grader.home import Home

#: what a copy passed over asks of whoever restores (the Vault's copy cannot be trusted or opened)
FIX = ("restore the grader's sealed/ from its own backup (docs/grader.md, \"Backup\"), or hand the exam over "
       "again with `monte grader take ENV` from a repository that still holds it")


def restore(home: Home, url: str) -> dict[str, Any]:
    """Every sealed split the Vault at ``url`` keeps for this grader, written into its home when
    missing there (an lm-eval exam: its split and its frozen task folder, from the one tar its
    hand-over sent). Returns what was restored, what was already held, and what was passed over:
    each with why, its code and the fix."""
    from monte.grader import lmeval
    from monte.ledger.grader_statement import check_signature
    from monte.storage import sealed_copy
    from monte.storage.keys import read_key
    from monte.storage.object_stores import is_gcs, open_store

    store = open_store(url, read_key() if is_gcs(url) else None, what="the Vault")
    store.check()
    public, private = home.public_key(), home.key.read_bytes()
    restored, held, passed = [], [], []

    def pass_over(content: str, why: str, code: str = "E_INTEGRITY") -> None:
        passed.append({"content": content, "why": why, "code": code, "fix": FIX})

    for content, rec in sorted(sealed_copy.records(store).items()):
        meta = rec.get("meta")
        task = isinstance(meta, dict) and lmeval.is_lmeval(meta.get("grader"))
        path = home.sealed / f"{content}.jsonl"
        if path.is_file() and hashlib.sha256(path.read_bytes()).hexdigest() == content and (
                not task or (home.sealed / f"{content}.d").is_dir()):
            held.append(content)
            continue
        if " ".join(str(rec.get("recipient", "")).split()[:2]) != public:
            passed.append({"content": content, "why": "encrypted to another grader's key", "code": "E_USAGE",
                           "fix": "restore it with the home whose key it is encrypted to"})
            continue
        if not isinstance(meta, dict) or not check_signature(public, meta, str(rec.get("signature", "")),
                                                             namespace=sealed_copy.NAMESPACE):
            pass_over(content, "its record is not signed by this grader's key")
            continue
        blob = store.get(sealed_copy.blob_name(content))
        if blob is None:
            pass_over(content, "its encrypted copy is missing from the Vault", "E_NOT_FOUND")
            continue
        try:
            raw = sealed_copy.decrypt(blob, private)
        except MonteError:
            pass_over(content, "its encrypted copy does not decrypt with this grader's key")
            continue
        # an lm-eval exam's copy is the tar its hand-over sent: the grader signed its hash
        if hashlib.sha256(raw).hexdigest() != str(meta.get("bundle") if task else content):
            pass_over(content, "it decrypts to other bytes than the content signed")
            continue
        old = os.umask(0o077)  # nothing in the home is readable by another account
        try:
            with homes.locked(home):
                if task:  # every file proven again against the task the grader signed, then landed
                    lmeval.unpack(home.sealed, meta, raw)
                else:
                    path.write_bytes(raw)
                (home.sealed / f"{content}.json").write_text(json.dumps(meta, sort_keys=True) + "\n")
        except MonteError as e:
            pass_over(content, f"its files are not the task signed: {e.message}")
            continue
        finally:
            os.umask(old)
        restored.append({"content": content, "exam": meta.get("exam"), "n": meta.get("n")})
    return {"home": str(home.root), "vault": url, "restored": restored, "held": held, "passed": passed}
