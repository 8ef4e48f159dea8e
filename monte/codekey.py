"""One digest of the code that runs: every derived cache (status facts and views, folds, the
report's facts) is keyed by it, so an edit anywhere in the installed package derives them again.

A hand-kept list of the modules a cache depends on goes stale the day someone edits a helper it
calls (a status line kept after ``stats/paired.py`` changed its interval, which ``monte ledger
verify`` then reports as the user's cache not matching the ledger). The whole package is the
honest key. Its content is hashed at most once per install: a stat listing of the package's
``.py`` files (path, size, mtime; about a millisecond) names a memo in the user's cache folder
holding the content digest, so two installs of the same code share their caches and a touched
file without a change derives nothing again.
"""

from __future__ import annotations

import hashlib
import os
from functools import cache
from pathlib import Path

_ROOT = Path(__file__).resolve().parent  # monte/


def _sources() -> list[tuple[str, os.stat_result]]:
    out = []
    for folder, dirs, files in os.walk(_ROOT):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__")
        for name in sorted(files):
            if name.endswith(".py"):
                path = os.path.join(folder, name)
                out.append((os.path.relpath(path, _ROOT), os.stat(path)))
    return out


def _memo_folder() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "monte" / "code"


@cache
def code_digest() -> str:
    """The sha256 of every ``.py`` file of the installed monte (by path and content), hex."""
    sources = _sources()
    listing = hashlib.sha256(
        "\n".join(f"{_ROOT}\0{rel}\0{st.st_size}\0{st.st_mtime_ns}" for rel, st in sources).encode())
    memo = _memo_folder() / listing.hexdigest()[:32]
    try:
        kept = memo.read_text().strip()
        if len(kept) == 64 and all(c in "0123456789abcdef" for c in kept):
            return kept
    except OSError:
        pass
    h = hashlib.sha256()
    for rel, _ in sources:
        h.update(rel.encode() + b"\0")
        h.update((_ROOT / rel).read_bytes() + b"\0")
    digest = h.hexdigest()
    try:  # a memo that cannot be written costs the next process one hash, nothing else
        memo.parent.mkdir(parents=True, exist_ok=True)
        tmp = memo.with_name(f"{memo.name}.{os.getpid()}.tmp")
        tmp.write_text(digest + "\n")
        os.replace(tmp, memo)
    except OSError:
        pass
    return digest
