"""Rule ``rewound``: every tip monte remembers is still in its ref's history, and no remembered ref is gone;
and ``copies``: a ledger's copies (mirror refs) hold no record the ledger lacks.
"""

from __future__ import annotations

from dulwich.objects import Commit, ObjectID

from monte.ledger.refs import (
    MIRROR,
    VAULT_REF,
    ledger_ref,
)
from monte.ledger.tips import Ancestry, Remembered, restore_fix, rewind_what
from monte.ledger.transaction import Proposed
from monte.ledger.verify.core import Core
from monte.ledger.verify.model import (
    Violation,
)


class Rewinds(Core):
    def rewound(self, prefix: str, *, tips: dict[str, ObjectID | None] | None = None,
                exact: bool = False) -> list[Violation]:
        """``rewound``: each remembered tip of each ref under ``prefix`` (only ``prefix`` itself with
        ``exact``) is an ancestor of, or equal to, the ref's tip (``tips`` overrides it: a hook
        judges the proposed tip), and no remembered ref is gone."""
        out: list[Violation] = []
        remembered = self.store.tips.heads(prefix)
        self._heads = (prefix, remembered)  # what _remember asks next, unchanged until it writes
        for ref, heads in sorted(remembered.items()):
            if exact and ref != prefix:
                continue
            current = tips[ref] if tips is not None and ref in tips else self.store.tip(ref)
            newest = heads[-1]
            if current is None:
                out.append(self._rewind(ref, newest, newest, deleted=True))
                continue
            ancestry = Ancestry(self.objects, current)
            lost = [h for h in heads if h.sha not in ancestry
                    and not (h.source != "tips.log" and self._forgery_put_back(ref, h, ancestry))]
            out += [self._rewind(ref, h, max(lost, key=lambda r: r.when)) for h in lost]
        return out

    def _rewind(self, ref: str, lost: Remembered, restore: Remembered, *, deleted: bool = False) -> Violation:
        fix = restore_fix(ref, restore.sha)
        return Violation(lost.sha.decode()[:12], "rewound",
                         f"{rewind_what(ref, lost.sha, deleted=deleted)} ({lost.source}); {fix}", fix)

    def _forgery_put_back(self, ref: str, lost: Remembered, ancestry: Ancestry) -> bool:
        """Whether the commits ``lost`` held and the ref no longer does were each a forgery: none
        written or seen by monte, every one named by a violation of its own. Putting such a tip
        back by hand (``MONTE_HOOKS=off``) repairs the ref; it loses no record."""
        kept = ancestry.all()
        todo = [lost.sha]
        gone: set[ObjectID] = set()
        while todo:  # the commits only ``lost`` reaches
            sha = todo.pop()
            if sha in kept or sha in gone:
                continue
            gone.add(sha)
            try:
                c = self.objects[sha]
            except KeyError:
                return False  # not here to judge: keep the finding
            if isinstance(c, Commit):
                todo.extend(c.parents)
        if gone & self.store.tips.by_monte(ref):
            return False
        parts = ref.split("/")
        other = type(self)(self.store)
        try:
            if ref == VAULT_REF:
                found = other.verify_vault(tip=lost.sha)
            elif len(parts) == 5 and parts[4] == "ledger":
                found = other.verify(parts[3], tip=lost.sha)
            elif len(parts) == 6 and parts[4] == "lineage":
                found = other.verify_lineage(parts[3], parts[5], tip=lost.sha)
            else:
                return False
        except (KeyError, ValueError, AssertionError):
            return False
        named = {v.commit for v in found}
        return all(sha.decode()[:12] in named for sha in gone)

    def _copies(self, experiment: str) -> list[Violation]:
        """``rewound``: a remote-tracking copy of the ledger (a git remote's, or the results
        bucket's mirror written by ``monte sync``) holds records the local ledger lacks."""
        ref = ledger_ref(experiment)
        suffix = "/" + ref[len("refs/heads/"):]
        local = self.store.tip(ref)
        ancestry = Ancestry(self.objects, local) if local is not None else None
        out = []
        for name, sha in sorted(self.store.refs_under("refs/remotes/").items()):
            if not name.endswith(suffix) or (ancestry is not None and sha in ancestry):
                continue
            mirror = name.startswith(MIRROR + "/")
            if not mirror and (local is None or local in Ancestry(self.objects, sha)):
                continue  # a git remote's copy ahead of this one: let in, or named, by monte.ledger.remotes
            if mirror:
                fix = "`monte sync` merges the bucket's records back into the local ledger"
            else:
                fix = ("two ledgers that diverged are merged by monte through the results bucket (`monte push`, "
                       "`monte sync`), never by force")
            why = ("deleted" if local is None else "moved back by something other than monte, or is behind" if mirror
                   else "moved back and appended to, or the two copies diverged")
            out.append(Violation(sha.decode()[:12], "rewound",
                                 f"{name} holds records that the local ledger {ref} lacks (its tip "
                                 f"{sha.decode()[:12]} is not in the local history): the local ledger was {why}; "
                                 f"{fix}", fix))
        return out

    def _remember(self, ref: str) -> None:
        """Remember the tip this verify saw pass, and that each remembered tip leads to it, so the
        next check walks nothing. A repository verify may not write to (CI) keeps what it had."""
        current = self.store.tip(ref)
        if current is None or isinstance(self.store, Proposed):
            return  # a view's refs are not this repository's: nothing to remember
        known = self._heads[1] if self._heads is not None and ref.startswith(self._heads[0]) else None
        self._heads = None
        olds: list[ObjectID | None] = [h.sha for h in (known if known is not None
                                                       else self.store.tips.heads(ref)).get(ref, [])]
        olds = olds or [None]
        if olds == [current]:
            return
        try:
            for old in olds:
                if old != current:
                    self.store.tips.record(ref, old, current)
        except OSError:
            pass
