"""`monte ledger verify` on merged ledgers: two copies of the honest ledger grew apart (a laptop's
and a box's, each recording with monte itself) and were merged with `monte.ledger.merge`.

An honest union passes (in full, with ``--from``, and through the reference-transaction hook).
The verifier re-derives the union from the merge's parents and replays the records merged in on
top of the state before the merge, so it flags: a merge whose tree drops a run, a merge without
the ``Monte-Event: merge`` trailer (or of three parents), a forged record on the merged-in side,
and two machines that each spent the final test read (``two-touch``, at the merge, with a fix that
names the merge: monte's own merge refuses that union, so such a ledger was merged by an older
monte or by git).
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from typing import Any

import pytest

from monte.errors import MonteError
from monte.ledger.experiment import Ledger
from monte.ledger.merge import merge_into_ref, union_tree
from monte.ledger.store import Store, add_object
from tests.verify.forgehelp import (
    Honest,
    another_machine,
    commit_tree,
    g,
    index_for,
    index_path,
    ledger_ref,
    message,
    rev,
    run_dir,
    short,
    update_ref,
    write_tree,
)
from tests.verify.test_forged_histories import rewritten_finished_row


@dataclass
class Fork:
    base: str  # the common tip
    ours: str  # the ledger ref's tip before the merge (first parent)
    theirs: str  # the other machine's tip (second parent)
    our_runs: list[str]
    their_runs: list[str]


def _set(h: Honest, sha: str) -> None:
    assert update_ref(h.path, ledger_ref(), sha, hooks=False).returncode == 0


def _runs(h: Honest, record: Any) -> list[str]:
    before = {r.run for r in Ledger(Store(h.path), "exp").rows()}
    record()
    return sorted({r.run for r in Ledger(Store(h.path), "exp").rows()} - before)


def diverge(h: Honest, ours: Any, theirs: Any) -> Fork:
    """Record ``ours()`` on the ledger, then (the ref put back at the fork) ``theirs()``, as two
    machines would; leave the ref at ours' tip."""
    base = rev(h.path, ledger_ref())
    assert base is not None
    mine = _runs(h, ours)
    o = rev(h.path, ledger_ref())
    with another_machine(h.path):
        _set(h, base)
        # the other clone never held ours: git's reflog of that swing back is this simulation's
        shutil.rmtree(h.path / ".git" / "logs" / "refs" / "heads" / "monte", ignore_errors=True)
        yours = _runs(h, theirs)
        t = rev(h.path, ledger_ref())
        assert o and t and o != t
        _set(h, o)
    return Fork(base, o, t, mine, yours)


def dev_evals(h: Honest) -> Fork:
    """Each machine scores a checkpoint on dev (a started and a finished record each)."""
    from monte import api

    return diverge(h, lambda: api.evaluate(checkpoint=f"{h['a']}@50"), lambda: api.evaluate(checkpoint=f"{h['b']}@100"))


def merged(h: Honest, fork: Fork) -> str:
    res = merge_into_ref(Store(h.path), ledger_ref(), fork.theirs.encode())
    assert res.case == "merged"
    return res.commit.decode()


def merged_unchecked(h: Honest, fork: Fork) -> str:
    """The union commit as monte's merge wrote it before it checked the seal (and as anyone can
    write it with git): the union tree, both tips as parents, the merge trailer; the ref moved."""
    objects = Store(h.path).repo.object_store
    union = union_tree(objects, fork.ours.encode(), fork.theirs.encode())  # type: ignore[arg-type]
    for obj in union.new.values():
        add_object(objects, obj)
    assert union.tree is not None
    m = commit_tree(h.path, union.tree.decode(), [fork.ours, fork.theirs],
                    message(f"merge: union of {short(fork.ours)} and {short(fork.theirs)}", event="merge"))
    _set(h, m)
    return m


def verify(monte, *args: str) -> tuple[int, dict[str, Any]]:
    r = monte("ledger", "verify", "--json", *args)
    return r.code, r.json()


def found(out: dict[str, Any], commit: str, rule: str) -> list[str]:
    return [d["message"] for d in out["error"]["details"] if d["commit"] == short(commit) and d["rule"] == rule]


# --- honest --------------------------------------------------------------------------------------


def test_an_honest_merge_verifies(honest: Honest, monte) -> None:
    code, out = verify(monte, "exp")
    assert code == 0, out
    before = out["records"]
    fork = dev_evals(honest)
    m = merged(honest, fork)
    rows = {r.run for r in Ledger(Store(honest.path), "exp").rows()}
    assert set(fork.our_runs) | set(fork.their_runs) <= rows
    code, out = verify(monte, "exp")
    assert code == 0 and out["ok"] is True, out
    assert out["records"] == before + 2 + 1 + 2  # ours, the merge, theirs (replayed)
    # incrementally: from our tip before the merge, from the fork, and from their tip (the
    # second parent: not on the first-parent line, but an ancestor: the full walk checks it)
    for since in (fork.ours, fork.base, fork.theirs):
        code, out = verify(monte, "exp", "--from", since)
        assert code == 0, (since, out)
    # the ledger goes on after the merge, and still verifies
    from monte import api

    api.nominate(ref=f"{honest['a']}@50")
    code, out = verify(monte, "exp", "--from", m)
    assert code == 0 and out["records"] == 1, out
    assert verify(monte, "exp")[0] == 0


def test_merging_again_verifies_each_record_once(honest: Honest, monte) -> None:
    """Their machine did not pull and recorded again; the second merge brings in only what is new
    (a record replayed twice would read as a reused run id)."""
    from monte import api

    fork = dev_evals(honest)
    merged(honest, fork)
    code, out = verify(monte, "exp")
    assert code == 0, out
    n = out["records"]
    ours = rev(honest.path, ledger_ref())
    assert ours is not None
    with another_machine(honest.path):
        _set(honest, fork.theirs)
        api.nominate(ref=f"{honest['a']}@50")
        theirs = rev(honest.path, ledger_ref())
        assert theirs is not None
        _set(honest, ours)
    second = merged(honest, Fork(fork.theirs, ours, theirs, [], []))
    code, out = verify(monte, "exp")
    assert code == 0 and out["records"] == n + 2, out  # the merge and the nomination
    assert verify(monte, "exp", "--from", ours)[0] == 0
    assert g(honest.path, "rev-list", "--count", "--merges", second) == "2"


def test_the_hook_lets_an_honest_merge_through_and_refuses_a_forged_one(honest: Honest, monte) -> None:
    fork = dev_evals(honest)
    m = merged(honest, fork)
    forged = _dropping_merge(honest, fork, m)
    _set(honest, fork.ours)
    assert monte("hooks", "install").code == 0
    r = update_ref(honest.path, ledger_ref(), forged, fork.ours)
    assert r.returncode != 0 and rev(honest.path, ledger_ref()) == fork.ours
    assert "[well-formed]" in r.stderr.decode() and short(forged) in r.stderr.decode()
    r = update_ref(honest.path, ledger_ref(), m, fork.ours)
    assert r.returncode == 0, r.stderr.decode()
    assert rev(honest.path, ledger_ref()) == m


# --- forged merges ------------------------------------------------------------------------------


def _dropping_merge(h: Honest, fork: Fork, m: str) -> str:
    """The honest merge's parents and message, with one of their runs left out of the tree (its
    row, its per-task file and its index entry: the derived files kept consistent)."""
    run = fork.their_runs[0]
    changes: dict[str, bytes | None] = {f"{run_dir(run)}/row.json": None, f"{run_dir(run)}/tasks.jsonl": None,
                                        index_path(run): index_for(h.path, m, run, None)}
    tree = write_tree(h.path, m, changes)
    return commit_tree(h.path, tree, [fork.ours, fork.theirs], g(h.path, "log", "-1", "--format=%B", m) + "\n")


def test_a_merge_whose_tree_drops_a_run_is_flagged(honest: Honest, monte) -> None:
    fork = dev_evals(honest)
    m = merged(honest, fork)
    forged = _dropping_merge(honest, fork, m)
    _set(honest, forged)
    code, out = verify(monte, "exp")
    assert code == 5 and out["error"]["code"] == "E_VERIFY"
    hits = found(out, forged, "well-formed")
    assert any("not the union" in x and fork.their_runs[0] in x for x in hits), out
    code, out = verify(monte, "exp", "--from", fork.ours)
    assert code == 5 and found(out, forged, "well-formed"), out


def test_a_merge_without_the_trailer_or_of_three_parents_is_flagged(honest: Honest, monte) -> None:
    fork = dev_evals(honest)
    m = merged(honest, fork)
    tree = g(honest.path, "rev-parse", f"{m}^{{tree}}")
    bare = commit_tree(honest.path, tree, [fork.ours, fork.theirs], "merge the laptop's ledger\n")
    _set(honest, bare)
    code, out = verify(monte, "exp")
    assert code == 5 and any("trailer" in x for x in found(out, bare, "one-record")), out
    octopus = commit_tree(honest.path, tree, [fork.ours, fork.theirs, fork.base],
                          g(honest.path, "log", "-1", "--format=%B", m) + "\n")
    _set(honest, octopus)
    code, out = verify(monte, "exp")
    assert code == 5 and any("3 parents" in x for x in found(out, octopus, "one-record")), out


def test_a_forged_record_merged_in_is_flagged_at_the_merge(honest: Honest, monte) -> None:
    """The other machine's ledger holds a forgery (a finished row rewritten); the honest union
    brings it in, and the replay of the merged-in records finds it."""
    from monte import api

    base = rev(honest.path, ledger_ref())
    assert base is not None
    api.evaluate(checkpoint=f"{honest['a']}@50")
    ours = rev(honest.path, ledger_ref())
    assert ours is not None
    _set(honest, base)
    case = rewritten_finished_row(honest)
    _set(honest, ours)
    m = merged(honest, Fork(base, ours, case.forged.sha, [], []))
    code, out = verify(monte, "exp")
    assert code == 5, out
    hits = found(out, m, "append-only")
    assert any("never rewritten" in x and f"record {case.forged.short}, merged in" in x for x in hits), out


# --- the rules across the merge ------------------------------------------------------------------


def test_two_machines_that_each_claimed_the_final_read_break_two_touch_at_the_merge(honest: Honest, monte) -> None:
    from monte import api

    fork = diverge(honest, lambda: api.evaluate(split="test"), lambda: api.evaluate(split="test"))
    # each machine alone kept the rule
    from monte.ledger.verify import Verifier

    for tip in (fork.ours, fork.theirs):
        assert Verifier(Store(honest.path)).verify("exp", tip=tip.encode()) == []  # type: ignore[arg-type]
    # monte's own merge refuses the union now (push and sync merge through it)
    with pytest.raises(MonteError) as e:
        merged(honest, fork)
    assert e.value.code == "E_SEALED" and fork.our_runs[0] in e.value.message and fork.their_runs[0] in e.value.message
    assert rev(honest.path, ledger_ref()) == fork.ours
    # a ledger merged before that check existed (or by git): verify names the merge, and says so
    m = merged_unchecked(honest, fork)
    code, out = verify(monte, "exp")
    assert code == 5 and out["error"]["code"] == "E_VERIFY"
    hits = found(out, m, "two-touch")
    assert any("third read" in x and "merged in" in x for x in hits), out
    fixes = [d.get("fix", "") for d in out["error"]["details"] if d["commit"] == short(m) and d["rule"] == "two-touch"]
    assert fixes and all(f.startswith("two ledgers that each spent this read were merged (by monte sync/push "
                                      "before this check existed, or by git)") for f in fixes), out
    assert not any("outside monte" in f for f in fixes)
    # the incremental check a hook runs (from our tip before the merge) finds it too
    code, out = verify(monte, "exp", "--from", fork.ours)
    assert code == 5 and found(out, m, "two-touch"), out
