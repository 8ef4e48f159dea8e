"""One transaction, one judgement: the ref updates git hands a hook, judged together.

A push of an honest history brings the vault, the base commits, the lineage and the ledger refs
at once; each record of the ledger refers to the others (its split hashes to the vault's
manifest, its checkpoints to the lineage commits, their first hop to the cohort's base commit).
Judged one ref at a time against the refs *as they were*, a first push is refused ("no vault ref
holds environment ..."). So a hook judges every update of its input against :class:`Proposed`:
the repository as it would be with all of them in place.

``git receive-pack`` runs ``pre-receive`` once with every update of the push, then applies them
one transaction per ref (a push is not atomic unless asked), and a ``reference-transaction``
hook sees each alone. ``pre-receive`` therefore remembers what it accepted
(:class:`Accepted`, ``<git dir>/monte/accepted.log``); ``reference-transaction`` lets exactly
those updates (ref, old, new) through and judges anything else (``git update-ref`` on the
server, say) as before.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from pathlib import Path

from dulwich.objects import ObjectID

from monte.ledger.refs import ZERO
from monte.ledger.store import Store
from monte.ledger.views import OWN_DIR

ACCEPTED = f"{OWN_DIR}/accepted.log"
_ACCEPTED_MAX = 1 << 20  # past this the log is cut to its newer half (a push's updates are a few lines)


class Proposed(Store):
    """``store`` as it would be once the refs in ``tips`` moved there (None: deleted). Objects,
    the remembered tips and everything else are the store's own; only ref reads differ."""

    def __init__(self, store: Store, tips: Mapping[str, ObjectID | None]) -> None:
        # a view, not a second repository: share the open repository (and its finaliser)
        self.__dict__.update(store.__dict__)
        self.real = store
        self.proposed = dict(tips)

    def tip(self, ref: str) -> ObjectID | None:
        if ref in self.proposed:
            return self.proposed[ref]
        return self.real.tip(ref)

    def refs_under(self, prefix: str) -> dict[str, ObjectID]:
        out = self.real.refs_under(prefix)
        folder = prefix.rstrip("/") + "/"
        for ref, sha in self.proposed.items():
            if not ref.startswith(folder):
                continue
            if sha is None:
                out.pop(ref, None)
            else:
                out[ref] = sha
        return out


def parse_updates(lines: Iterable[str]) -> list[tuple[str, bytes, bytes]]:
    """``old new ref`` lines (git's hook input) as (ref, old, new); blank lines are skipped.

    A line that is not two object ids and a ref (typed by hand, or a hook's input fed in another
    order) refuses: skipping it would let its update through unjudged."""
    from monte.errors import UsageError

    out = []
    for line in lines:
        parts = line.split()
        if not parts:
            continue
        if len(parts) < 3 or not all(_is_object_id(p) for p in parts[:2]):
            raise UsageError(f"not an update line: {line.strip()[:200]!r}",
                             fix="give each update as `OLD NEW REF` (two full object ids, then the ref), "
                                 "as git gives a pre-receive hook")
        out.append((parts[2], parts[0].encode(), parts[1].encode()))
    return out


def _is_object_id(word: str) -> bool:
    return len(word) in (40, 64) and all(c in "0123456789abcdef" for c in word)


def proposed(store: Store, updates: Iterable[tuple[str, bytes, bytes]]) -> Proposed:
    """The repository with every update applied (a new value of all zeros deletes the ref)."""
    return Proposed(store, {ref: None if new == ZERO else ObjectID(new) for ref, _, new in updates})


class Accepted:
    """The updates ``pre-receive`` accepted, so the per-ref transactions that apply them pass."""

    def __init__(self, git_dir: str | os.PathLike[str]) -> None:
        self.path = Path(git_dir) / ACCEPTED

    @staticmethod
    def _line(ref: str, old: bytes, new: bytes) -> bytes:
        return b"%s %s %s\n" % (old, new, ref.encode())

    def record(self, updates: Iterable[tuple[str, bytes, bytes]]) -> None:
        data = b"".join(self._line(*u) for u in updates)
        if not data:
            return
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            if self.path.exists() and self.path.stat().st_size > _ACCEPTED_MAX:
                keep = self.path.read_bytes()[-_ACCEPTED_MAX // 2:]
                tmp = self.path.with_name(f"{self.path.name}.{os.getpid()}")
                tmp.write_bytes(keep[keep.find(b"\n") + 1:])
                os.replace(tmp, self.path)
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            try:
                os.write(fd, data)  # one write: the push's updates land together
            finally:
                os.close(fd)
        except OSError:
            pass  # a server whose git dir monte cannot write: each ref is judged alone, as before

    def holds(self, update: tuple[str, bytes, bytes]) -> bool:
        try:
            data = self.path.read_bytes()
        except OSError:
            return False
        return self._line(*update) in data.splitlines(keepends=True)
