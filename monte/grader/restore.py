"""``monte grader restore``: the grader's custody brought back from the Vault's encrypted copies
(:mod:`monte.storage.sealed_copy`), run as the grader's account into its home.

Each copy is used only when the grader's own key signed its record (what grades it) and its
bytes decrypt with the grader's private key to exactly the content the record names: a Vault the
agent can write can withhold a copy, never plant or alter one. The ledger of reads is not in the
Vault: it comes back from the grader's own backup (docs/grader.md, "Backup").
"""

from __future__ import annotations

import hashlib
import json
import os
from typing import Any

from monte.grader import home as homes
from monte.grader.home import Home


def restore(home: Home, url: str) -> dict[str, Any]:
    """Every sealed split the Vault at ``url`` keeps for this grader, written into its home when
    missing there. Returns what was restored, what was already held, and what was passed over (why)."""
    from monte.ledger.grader_statement import check_signature
    from monte.storage import sealed_copy
    from monte.storage.keys import read_key
    from monte.storage.object_stores import is_gcs, open_store

    store = open_store(url, read_key() if is_gcs(url) else None, what="the Vault")
    store.check()
    public, private = home.public_key(), home.key.read_bytes()
    restored, held, passed = [], [], []
    for content, rec in sorted(sealed_copy.records(store).items()):
        meta = rec.get("meta")
        path = home.sealed / f"{content}.jsonl"
        if path.is_file() and hashlib.sha256(path.read_bytes()).hexdigest() == content:
            held.append(content)
            continue
        if " ".join(str(rec.get("recipient", "")).split()[:2]) != public:
            passed.append({"content": content, "why": "encrypted to another grader's key"})
            continue
        if not isinstance(meta, dict) or not check_signature(public, meta, str(rec.get("signature", "")),
                                                             namespace=sealed_copy.NAMESPACE):
            passed.append({"content": content, "why": "its record is not signed by this grader's key"})
            continue
        blob = store.get(sealed_copy.blob_name(content))
        if blob is None:
            passed.append({"content": content, "why": "its encrypted copy is missing from the Vault"})
            continue
        raw = sealed_copy.decrypt(blob, private)
        if hashlib.sha256(raw).hexdigest() != content:
            passed.append({"content": content, "why": "it decrypts to other bytes than the content signed"})
            continue
        old = os.umask(0o077)  # nothing in the home is readable by another account
        try:
            with homes.locked(home):
                path.write_bytes(raw)
                (home.sealed / f"{content}.json").write_text(json.dumps(meta, sort_keys=True) + "\n")
        finally:
            os.umask(old)
        restored.append({"content": content, "exam": meta.get("exam"), "n": meta.get("n")})
    return {"home": str(home.root), "vault": url, "restored": restored, "held": held, "passed": passed}
