"""The lineage refs (each checkpoint a commit on its run's lineage ref) and the vault ref, walked like a
ledger; :class:`Verifier` is every rule together.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from dulwich.objects import ObjectID, Tree

from monte.ledger.gitread import Git
from monte.ledger.refs import (
    VAULT_REF,
    lineage_ref,
)
from monte.ledger.verify.model import (
    Violation,
)
from monte.ledger.verify.walk import Walk


class Verifier(Walk):
    """Every rule of :mod:`monte.ledger.verify`, re-derived from the commit history."""

    def verify_vault(self, *, tip: ObjectID | None = None, since: ObjectID | None = None) -> list[Violation]:
        """Each vault commit adds exactly one manifest; none is ever changed or removed. Verifying
        the ref itself (no ``tip``) also checks it was not rewound, as :meth:`verify` does."""
        if tip is None:
            current = self.store.tip(VAULT_REF)
            found = self.verify_vault(tip=current, since=since) if current is not None else []
            found += self.rewound(VAULT_REF, exact=True)
            if not found:
                self._remember(VAULT_REF)
            return found
        chain, ok = self._chain(tip, since)
        if not ok:
            return [Violation(tip.decode()[:12], "append-only", "the vault ref's history was rewritten")]
        out: list[Violation] = []
        prev = self._obj(since).tree if since is not None else None
        for c in chain:
            changes = list(self._flat_changes(prev, c.tree))
            cid = c.id.decode()[:12]
            for path, old, new in changes:
                if old is not None:
                    out.append(Violation(cid, "append-only", f"{path} was {'removed' if new is None else 'rewritten'}: "
                                         "frozen means frozen"))
            added = [p for p, o, n in changes if o is None and n is not None]
            if len(added) != 1 or not re.match(r"^(environments|datasets)/[^/]+/manifest\.json$", added[0]):
                out.append(Violation(cid, "one-record", f"a vault record adds one manifest; this adds {added or 'nothing'}"))
            prev = c.tree
        return out

    def verify_lineages(self, experiment: str, refs: Mapping[str, ObjectID], *,
                        own: bool = False) -> dict[str, list[Violation]]:
        """:meth:`verify_lineage` of each lineage ref in ``refs`` (ref: tip), the same findings,
        read at once: every commit below the tips through git in bulk, and each ref's walk cut
        short where it provably finds nothing more (no commit below its run's own is flawed, and
        its run's every checkpoint commit is above the rest), so 1,000 runs cost one pass, not
        one walk of the whole lineage each.

        ``own`` (``verify --from``): each ref's own checkpoints only, and the commit they hang
        off; the lineage below is its parent runs', checked with their records."""
        runs = {ref: ref.rsplit("/", 1)[1] for ref in refs}
        if own:
            out: dict[str, list[Violation]] = {}
            at: ObjectID | None
            for ref, tip in refs.items():
                at = tip
                while at is not None:
                    c = self._commits.get(at) or self._commits.setdefault(at, self._obj(at))
                    has_ck, _, info = self._checkpoint_at(c)
                    at = c.parents[0] if c.parents else None
                    if not (has_ck and isinstance(info, dict) and info.get("run") == runs[ref]):
                        break  # the commit its run's checkpoints hang off: checked too, not below it
                out[ref] = self.verify_lineage(experiment, runs[ref], tip=tip, since=at)
            return out
        self._read_lineage(list(refs.values()))
        count: dict[Any, int] = {}
        odd = False
        for has_ck, _, info, exc in self._checkpoints.values():
            if exc is not None or (has_ck and not isinstance(info, dict)):
                odd = True  # the walk raises, or asks what it cannot: take each ref's walk as it is
            elif has_ck:
                count[info.get("run")] = count.get(info.get("run"), 0) + 1
        flawed: dict[ObjectID, bool] = {}  # a commit on the first-parent line below holds no checkpoint

        def flaw_below(sha: ObjectID) -> bool | None:
            line: list[ObjectID] = []
            at: ObjectID | None = sha
            while at is not None and at not in flawed:
                c, got = self._commits.get(at), self._checkpoints.get(at)
                if c is None or got is None:
                    return None  # not read in bulk: the walk reads it
                line.append(at)
                at = c.parents[0] if c.parents else None
            below = flawed[at] if at is not None else False
            for s in reversed(line):
                c, got = self._commits[s], self._checkpoints[s]
                below = flawed[s] = below or (not got[0] and not (got[1] and not c.parents))
            return below

        out = {}
        for ref, tip in refs.items():
            run = runs[ref]
            if odd or flaw_below(tip) is not False:
                out[ref] = self.verify_lineage(experiment, run, tip=tip)
                continue
            top: list[dict[str, Any]] = []
            at = tip
            while at is not None and (got := self._checkpoints[at])[0] and got[2].get("run") == run:
                top.append(got[2])
                c = self._commits[at]
                at = c.parents[0] if c.parents else None
            if len(top) != count.get(run, 0):
                out[ref] = self.verify_lineage(experiment, run, tip=tip)  # more of its run below
                continue
            found: list[Violation] = []
            last = -1
            for sha, info in zip(self._top_ids(tip, len(top))[::-1], reversed(top), strict=True):
                step = int(info.get("step", -1))
                if step <= last:
                    found.append(Violation(sha.decode()[:12], "lineage",
                                           f"checkpoint {run}@{step} does not follow step {last}"))
                last = step
            out[ref] = found
        return out

    def _top_ids(self, tip: ObjectID, n: int) -> list[ObjectID]:
        ids: list[ObjectID] = []
        at: ObjectID | None = tip
        while at is not None and len(ids) < n:
            ids.append(at)
            c = self._commits[at]
            at = c.parents[0] if c.parents else None
        return ids

    def _read_lineage(self, tips: Sequence[ObjectID], since: ObjectID | None = None) -> None:
        """Every commit on the first-parent lines below ``tips``, its tree and its
        checkpoint.json, read through git in bulk into what :meth:`_chain` and
        :meth:`_checkpoint_at` remember; whatever git does not give as dulwich would read it is
        left for them to read."""
        if not tips or (since is not None and since not in self.objects):
            return
        git = Git(self.store.repo.controldir())
        ids = [ObjectID(x) for x in git.run(["rev-list", "--first-parent", "--stdin"], b"".join(
            t + b"\n" for t in tips) + (b"^" + since + b"\n" if since is not None else b"")).split()]
        commits = {sha: c for sha, c in git.commits([i for i in ids if i not in self._commits]).items()}
        self._commits.update(commits)
        trees: dict[ObjectID, Tree] = {}
        for sha, (kind, raw) in git.objects(list({c.tree for c in commits.values()})).items():
            if kind == b"tree":
                parsed = Tree.from_raw_string(Tree.type_num, raw, sha=ObjectID(sha))
                assert isinstance(parsed, Tree)
                trees[ObjectID(sha)] = parsed
        want: dict[ObjectID, bytes] = {}
        for sha, c in commits.items():
            tree = trees.get(c.tree)
            if tree is not None and sha not in self._checkpoints:
                if b"checkpoint.json" in tree:
                    want[sha] = tree[b"checkpoint.json"][1]
                else:
                    self._checkpoints[sha] = (False, b"base.json" in tree, None, None)
        blobs = git.objects(list(set(want.values())))
        for sha, blob in want.items():
            kind, raw = blobs.get(blob, (b"", b""))
            if kind != b"blob":
                continue  # not there, or not a file: the walk reads it (and fails as it did)
            got: tuple[bool, bool, Any, Exception | None]
            try:
                got = (True, b"base.json" in trees[commits[sha].tree], json.loads(raw), None)
            except Exception as e:  # noqa: BLE001 - kept to raise at the same point of the walk
                got = (True, b"base.json" in trees[commits[sha].tree], None, e)
            self._checkpoints[sha] = got

    def verify_lineage(self, experiment: str, run: str, *, tip: ObjectID | None = None,
                        since: ObjectID | None = None) -> list[Violation]:
        """Every commit new on a lineage ref is a checkpoint of that run, in increasing steps."""

        tip = tip or self.store.tip(lineage_ref(experiment, run))
        if tip is None:
            return []
        chain, ok = self._chain(tip, since)
        if not ok:
            return [Violation(tip.decode()[:12], "append-only", f"the lineage of {run} was rewritten")]
        out: list[Violation] = []
        last = -1
        for c in chain:
            has_ck, has_base, info = self._checkpoint_at(c)
            if not has_ck:
                if has_base and not c.parents:
                    continue  # the chain reached the cohort's base commit
                out.append(Violation(c.id.decode()[:12], "lineage",
                                     f"a commit on the lineage of {run} holds no checkpoint.json"))
                continue
            cid = c.id.decode()[:12]
            if info.get("run") != run:
                continue  # the parent run's checkpoints, below this run's first
            step = int(info.get("step", -1))
            if step <= last:
                out.append(Violation(cid, "lineage", f"checkpoint {run}@{step} does not follow step {last}"))
            last = step
        return out
