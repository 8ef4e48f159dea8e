"""`monte.ledger.merge`: two ledgers that diverged (a laptop's and a box's) merge into a commit
whose tree is the union. Real temporary repositories; records appended with the Ledger API on
two refs that grew apart from a common tip; results read back with the real git."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from monte.errors import MonteError
from monte.ledger.experiment import Ledger, compact_json, dumps, meta_json
from monte.ledger.merge import merge_bases, merge_into_ref, merge_ledgers
from monte.ledger.records import RunRow, bucket_index, run_dir
from monte.ledger.store import Change, Snapshot, Store
from tests.support import ledger as shared
from tests.support.helpers import git, snapshot_state

EXP = "arith-sft"
REF = f"refs/heads/monte/{EXP}/ledger"
OTHER = "refs/heads/laptop-ledger"  # the other machine's copy, fetched next to ours


MEASUREMENT = shared.measurement(EXP)


def row(run: str, status: str = "started", **kw: object) -> Callable[[Snapshot, int], RunRow]:
    fields: dict[str, object] = {"kind": "eval", "split": "dev", "exam": "arith", "cohort": "c1",
                                 "model": "base", **kw}
    return lambda _snap, _seq: RunRow(run=run, experiment=EXP, status=status, **fields)  # type: ignore[arg-type]


def on(store: Store, ref: str) -> Ledger:
    """The Ledger API, writing to ``ref`` (the other machine's copy)."""
    led = Ledger(store, EXP)
    led.ref = ref
    return led


def append(led: Ledger, run: str, status: str = "started", **kw: object) -> RunRow:
    return led.append_row(row(run, status, **kw), event=status, summary=lambda r: f"eval {r.run}: {r.status}")


def show(repo: Path, rev: str, path: str) -> Any:
    return json.loads(git(repo, "show", f"{rev}:{path}"))


def fork(store: Store) -> tuple[Ledger, Ledger]:
    """Ours (the experiment's ledger ref) and theirs (a copy of it, as the other machine's)."""
    tip = store.tip(REF)
    assert tip is not None and store.set_ref(OTHER, None, tip)
    return Ledger(store, EXP), on(store, OTHER)


def records(repo: Path, rev: str) -> int:
    return int(show(repo, rev, "meta.json")["records"])


# --- the easy cases ----------------------------------------------------------------------------


def test_fast_forward_when_ours_is_behind_or_absent(repo: Path, store: Store) -> None:
    ours, theirs = fork(store)
    old = store.tip(REF)
    append(theirs, "ab0000000001")
    append(theirs, "ab0000000001", "succeeded")
    new = store.tip(OTHER)
    assert new is not None
    before = snapshot_state(repo)
    res = merge_ledgers(store, old, new)
    assert (res.case, res.commit, res.base) == ("fast-forward", new, old)
    assert snapshot_state(repo) == before  # merge_ledgers moves no ref
    assert merge_ledgers(store, None, new).case == "fast-forward"
    res = merge_into_ref(store, REF, new)
    assert res.case == "fast-forward" and store.tip(REF) == new
    assert [r.run for r in ours.rows()] == ["ab0000000001"]
    assert git(repo, "rev-list", "--merges", REF).strip() == ""  # no merge commit


def test_up_to_date_when_theirs_is_ours_or_behind(repo: Path, store: Store) -> None:
    ours, _ = fork(store)
    theirs_tip = store.tip(OTHER)
    assert theirs_tip is not None
    append(ours, "ab0000000001")
    tip = store.tip(REF)
    assert tip is not None
    before = snapshot_state(repo)
    for other in (theirs_tip, tip):
        res = merge_into_ref(store, REF, other)
        assert res.case == "up-to-date" and res.commit == tip
    assert snapshot_state(repo) == before


# --- diverged: the union ---------------------------------------------------------------------


def diverge(store: Store) -> tuple[Ledger, Ledger]:
    """A run at the fork; then each side adds two records, one of them in a fan-out folder that
    the other side also adds to, and theirs finishes the run from before the fork."""
    append(Ledger(store, EXP), "ab0000000001")  # at the fork: records 2
    ours, theirs = fork(store)
    append(ours, "ab0000000002")  # same bucket (a/b) as theirs' ab...3
    append(ours, "cd0000000004")
    append(theirs, "ab0000000003")
    append(theirs, "ab0000000001", "succeeded", score=0.5, n=10)
    return ours, theirs


def test_diverged_ledgers_merge_into_the_union(repo: Path, store: Store) -> None:
    ours, theirs = diverge(store)
    o, t = store.tip(REF), store.tip(OTHER)
    assert o is not None and t is not None
    base = git(repo, "merge-base", REF, OTHER).strip()
    res = merge_into_ref(store, REF, t)
    assert res.case == "merged" and res.base is not None and res.base.decode() == base
    tip = store.tip(REF)
    assert tip == res.commit
    # a merge commit: parents ours then theirs, one summary line and the merge trailer
    assert git(repo, "rev-parse", f"{REF}^1", f"{REF}^2").split() == [o.decode(), t.decode()]
    assert git(repo, "log", "-1", "--format=%s", REF).strip() == \
        f"merge: union of {o.decode()[:12]} and {t.decode()[:12]}"
    assert git(repo, "log", "-1", "--format=%(trailers:only,unfold)", REF).strip() == "Monte-Event: merge"
    # status sees both sides: every run, theirs' transition of the run from before the fork
    led = Ledger(store, EXP)
    runs = {r.run: r for r in led.rows()}
    assert set(runs) == {"ab0000000001", "ab0000000002", "ab0000000003", "cd0000000004"}
    assert runs["ab0000000001"].status == "succeeded" and runs["ab0000000001"].score == 0.5
    # each fan-out index equals its folder's row.json files, byte for byte as monte encodes it
    for bucket, names in (("a/b", ["ab0000000001", "ab0000000002", "ab0000000003"]), ("c/d", ["cd0000000004"])):
        want = {n: show(repo, REF, f"runs/{bucket}/{n}/row.json") for n in names}
        assert git(repo, "show", f"{REF}:runs/{bucket}/index.json").encode() == compact_json(want)
    # records: ours (4) + theirs (4) - base (2)
    assert records(repo, REF) == records(repo, o.decode()) + records(repo, t.decode()) - records(repo, base) == 6
    # the union is a well-formed git history
    git(repo, "fsck", "--strict", "--no-progress")
    # and the ledger goes on from it
    append(led, "ef0000000005")
    assert records(repo, REF) == 7 and led.row("ef0000000005").seq == 7  # type: ignore[union-attr]


def test_merging_is_symmetric_in_content(repo: Path, store: Store) -> None:
    diverge(store)
    o, t = store.tip(REF), store.tip(OTHER)
    assert o is not None and t is not None
    a, b = merge_ledgers(store, o, t), merge_ledgers(store, t, o)
    assert a.case == b.case == "merged"
    assert git(repo, "rev-parse", f"{a.commit.decode()}^{{tree}}") == git(repo, "rev-parse", f"{b.commit.decode()}^{{tree}}")


def test_merging_again_after_more_records_uses_the_last_merge(repo: Path, store: Store) -> None:
    """Merge; theirs (which did not pull) goes on; merge again; then a criss-cross: each side
    merged the other before seeing the other's merge, so there are two best bases."""
    ours, theirs = diverge(store)
    merge_into_ref(store, REF, store.tip(OTHER))  # type: ignore[arg-type]
    append(theirs, "gh0000000006")
    res = merge_into_ref(store, REF, store.tip(OTHER))  # type: ignore[arg-type]
    assert res.case == "merged" and res.base is not None
    assert res.base.decode() == git(repo, "rev-parse", f"{REF}^2^").strip()  # theirs' previous tip
    assert records(repo, REF) == 7
    assert len(ours.rows()) == 5
    # criss-cross
    append(ours, "jk0000000007")
    append(theirs, "mn0000000008")
    crossed = [store.tip(REF), store.tip(OTHER)]
    x = merge_ledgers(store, store.tip(REF), store.tip(OTHER))  # type: ignore[arg-type]
    y = merge_ledgers(store, store.tip(OTHER), store.tip(REF))  # type: ignore[arg-type]
    assert store.set_ref(REF, store.tip(REF), x.commit) and store.set_ref(OTHER, store.tip(OTHER), y.commit)
    append(ours, "pq0000000009")
    append(theirs, "rs0000000010")
    bases = merge_bases(store.repo.object_store, store.tip(REF), store.tip(OTHER))  # type: ignore[arg-type]
    assert bases == sorted(crossed)  # type: ignore[type-var]
    assert [b.decode() for b in bases] == sorted(git(repo, "merge-base", "--all", REF, OTHER).split())
    res = merge_into_ref(store, REF, store.tip(OTHER))  # type: ignore[arg-type]
    assert res.case == "merged" and res.base is None
    assert {r.run for r in ours.rows()} >= {"jk0000000007", "mn0000000008", "pq0000000009", "rs0000000010"}
    assert len(ours.rows()) == 9 and records(repo, REF) == 11  # 1 creation + 10 records
    git(repo, "fsck", "--strict", "--no-progress")


# --- conflicts ---------------------------------------------------------------------------------


def test_a_row_both_sides_rewrote_is_a_conflict_and_nothing_moves(repo: Path, store: Store) -> None:
    append(Ledger(store, EXP), "ab0000000001")
    ours, theirs = fork(store)
    append(ours, "ab0000000001", "succeeded", score=0.5, n=10)
    append(theirs, "ab0000000001", "failed", error="boom")
    before = snapshot_state(repo)
    for call in (lambda: merge_ledgers(store, store.tip(REF), store.tip(OTHER)),  # type: ignore[arg-type]
                 lambda: merge_into_ref(store, REF, store.tip(OTHER))):  # type: ignore[arg-type]
        with pytest.raises(MonteError) as e:
            call()
        assert e.value.code == "E_CONFLICT" and e.value.exit_code == 3
        path = f"{run_dir('ab0000000001')}/row.json"
        assert path in e.value.message
        assert e.value.fix == (f"the two ledgers disagree about {path}; run `monte ledger verify` on both "
                               "and keep the honest one")
    assert snapshot_state(repo) == before


def _nominate(store: Store, ref: str, checkpoint: str) -> None:
    store.append(ref, lambda snap: Change(summary=f"nominate {checkpoint}",
                                          writes={"cohorts/c1/nomination.json": dumps({"checkpoint": checkpoint}),
                                                  "meta.json": meta_json(int(json.loads(snap.read("meta.json") or b"{}")["records"]) + 1)},
                                          trailers={"Monte-Event": "nominate"}))


def test_the_same_change_on_both_sides_is_fine_a_different_one_is_not(repo: Path, store: Store) -> None:
    ours, _ = fork(store)
    append(ours, "cd0000000002")  # (the clock is pinned: without it both sides' commits are one)
    _nominate(store, REF, "ab0000000001@50")
    _nominate(store, OTHER, "ab0000000001@50")
    res = merge_ledgers(store, store.tip(REF), store.tip(OTHER))  # type: ignore[arg-type]
    assert res.case == "merged"
    assert show(repo, res.commit.decode(), "cohorts/c1/nomination.json") == {"checkpoint": "ab0000000001@50"}
    _nominate(store, REF, "ab0000000001@100")
    _nominate(store, OTHER, "ab0000000001@150")
    with pytest.raises(MonteError) as e:
        merge_into_ref(store, REF, store.tip(OTHER))  # type: ignore[arg-type]
    assert e.value.code == "E_CONFLICT" and "cohorts/c1/nomination.json" in e.value.message


def test_unrelated_histories_do_not_merge(repo: Path, store: Store) -> None:
    other = store.write_commit({"measurement.json": b"{}\n", "meta.json": meta_json(1)}, "another experiment",
                               {"Monte-Event": "created"}, [])
    with pytest.raises(MonteError) as e:
        merge_into_ref(store, REF, other)
    assert e.value.code == "E_CONFLICT" and "no history" in e.value.message


# --- cost: O(changed), not O(runs) -----------------------------------------------------------


def test_merging_two_big_ledgers_reads_only_the_changed_trees(repo: Path, store: Store) -> None:
    """Two 2,000-run ledgers that differ by three runs each: the merge reads a few dozen trees
    (the folders on the changed paths), not the ~3,000 of either ledger."""
    from monte.ledger.ids import new_run_id

    tip = store.tip(REF)
    assert tip is not None
    writes: dict[str, bytes | None] = {}
    indexes: dict[str, dict[str, object]] = {}
    for seq in range(2, 2002):
        r = RunRow(run=new_run_id(), experiment=EXP, kind="eval", status="started", seq=seq, split="dev")
        writes[f"{run_dir(r.run)}/row.json"] = dumps(r.model_dump(mode="json"))
        indexes.setdefault(bucket_index(r.run), {})[r.run] = r.model_dump(mode="json")
    writes.update({path: compact_json(index) for path, index in indexes.items()})
    writes["meta.json"] = meta_json(2001)
    big = store._commit(Snapshot(store.repo, tip)._tree_id, writes, "2,000 runs", {"Monte-Event": "bulk"}, [tip])
    assert store.set_ref(REF, tip, big)
    ours, theirs = fork(store)
    # one run of each side in the same fan-out folder: its index is rebuilt from its rows
    mine = [append(ours, run).run for run in (new_run_id(), new_run_id(), "zz" + new_run_id()[2:])]
    yours = [append(theirs, run).run for run in (new_run_id(), new_run_id(), "zz" + new_run_id()[2:])]
    total = int(git(repo, "rev-list", "--objects", REF).count("\n"))
    res = merge_into_ref(store, REF, store.tip(OTHER))  # type: ignore[arg-type]
    assert res.case == "merged"
    assert 0 < res.trees_read < 100 < total
    runs = {r.run for r in ours.rows()}
    assert len(runs) == 2006 and set(mine + yours) <= runs
    assert records(repo, REF) == 2007
    zz = show(repo, REF, "runs/z/z/index.json")
    assert {mine[2], yours[2]} <= set(zz)
