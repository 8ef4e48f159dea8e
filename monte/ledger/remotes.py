"""Ledgers that arrived by git: remote-tracking copies of monte's refs, let in.

After ``git clone`` (or a plain ``git fetch``) the records of another repository are at
``refs/remotes/<remote>/monte/...``, not at the ``refs/heads/monte/...`` refs monte reads. So
before a command reads the ledgers, :func:`let_in_remotes` brings them in, remote by remote:

- a monte ref missing here is created at the remote's tip;
- a ref here that is an ancestor of the remote's tip is fast-forwarded to it (the remote holds
  records this copy lacks: what a plain ``git fetch`` leaves);
- a ref here that already holds the remote's tip (ahead, or equal) stays;
- a ref that diverged from the remote's stays: ``monte ledger verify`` names it (rule
  ``rewound``); monte merges diverged ledgers through the results bucket (``push``, ``sync``).

The moves from one remote are judged together before any is made, as a push into this
repository would be (:func:`monte.ledger.verify.verify_updates`): a forged record in a remote's
copy is reported and never let in. Each ref moves by compare-and-swap and is remembered
(:mod:`monte.ledger.tips`). The results bucket's mirror (``refs/remotes/results/...``) is
``monte sync``'s to merge, not let in here.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from dulwich.objects import ObjectID

from monte.errors import MonteError
from monte.ledger.refs import MIRROR, PREFIX, ZERO
from monte.ledger.store import Store
from monte.ledger.tips import Ancestry

if TYPE_CHECKING:
    from monte.ledger.verify import Violation

REMOTES = "refs/remotes/"
_MIRROR_REMOTE = MIRROR[len(REMOTES):].split("/")[0]  # "results"


@dataclass
class RemotesLetIn:
    """What :func:`let_in_remotes` did: refs created or fast-forwarded (``ref: remote ref``), copies that
    diverged from the local ref, copies whose records break a rule (with the violations), and
    copies it could not let in (a repository it may not write: read them directly)."""

    moved: dict[str, str] = field(default_factory=dict)
    diverged: dict[str, str] = field(default_factory=dict)
    refused: dict[str, list[Violation]] = field(default_factory=dict)
    unwritable: dict[str, ObjectID] = field(default_factory=dict)


def copies(store: Store) -> dict[str, dict[str, ObjectID]]:
    """Per remote (``origin``), the monte refs its remote-tracking refs hold: local name -> tip."""
    out: dict[str, dict[str, ObjectID]] = {}
    for name, sha in store.refs_under(REMOTES).items():
        remote, _, rest = name[len(REMOTES):].partition("/")
        if remote == _MIRROR_REMOTE or not rest.startswith("monte/"):
            continue
        out.setdefault(remote, {})["refs/heads/" + rest] = sha
    return out


def let_in_remotes(store: Store) -> RemotesLetIn:
    """Create or fast-forward the local monte refs from every remote's copy (see the module)."""
    report = RemotesLetIn()
    for remote, refs in sorted(copies(store).items()):
        moves: dict[str, tuple[ObjectID | None, ObjectID]] = {}
        for ref, theirs in sorted(refs.items()):
            if not ref.startswith(PREFIX):
                continue
            ours = store.tip(ref)
            if ours == theirs:
                continue
            if ours is not None:
                if theirs in Ancestry(store.repo.object_store, ours):
                    continue  # this copy is ahead: the push sends the rest
                if ours not in Ancestry(store.repo.object_store, theirs):
                    report.diverged[ref] = _copy(remote, ref)
                    continue
            moves[ref] = (ours, theirs)
        if not moves:
            continue
        # imported only when there is something to judge: most commands have nothing to let in
        from monte.ledger.verify import verify_updates

        updates = [(ref, ours or ZERO, theirs) for ref, (ours, theirs) in moves.items()]
        found = verify_updates(store, updates)
        if found:
            for ref, v in found:
                report.refused.setdefault(_copy(remote, ref), []).append(v)
            continue
        for ref, (ours, theirs) in moves.items():
            try:
                moved = store.set_ref(ref, ours, theirs, message=f"records from {_copy(remote, ref)}")
            except (OSError, MonteError):  # a read-only repository; a ref rewound meanwhile
                moved = False
            if moved:
                report.moved[ref] = _copy(remote, ref)
            elif store.tip(ref) == ours:
                report.unwritable[ref] = theirs
    return report


def _copy(remote: str, ref: str) -> str:
    """The remote-tracking name of ``remote``'s copy of the monte ref ``ref``."""
    return f"{REMOTES}{remote}/{ref[len('refs/heads/'):]}"


def refused_violations(report: RemotesLetIn | None) -> list[dict[str, Any]]:
    """The records of remote copies that were not let in because they break a rule, as
    ``monte ledger verify`` lists violations (the message names the copy)."""
    out = []
    for copy, found in sorted((report.refused if report else {}).items()):
        parts = copy.split("/")
        exp = parts[4] if len(parts) > 5 else ""
        for v in found:
            out.append({"experiment": exp, **v.to_dict(),
                        "message": f"{copy} (not let in): {v.message}"})
    return out


def unchecked(store: Store, report: RemotesLetIn | None) -> dict[str, str]:
    """Refs that hold monte records which verifying the ``refs/heads/monte/`` refs does not
    read, each with why: a remote's copy that diverged from the local ref (a ledger's is also a
    ``rewound`` finding), and monte-named refs outside both namespaces (``refs/original/``
    after a history rewrite, a stash of refs, ...)."""
    out: dict[str, str] = {}
    for ref, copy in sorted((report.diverged if report else {}).items()):
        out[copy] = f"diverged from {ref}"
    for name in store.refs_under("refs/"):
        if name.startswith((PREFIX, REMOTES)) or "/monte/" not in name:
            continue
        out[name] = "not a ref monte reads"
    return out
