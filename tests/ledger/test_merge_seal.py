"""The test seal across a merge: `monte.ledger.rules.seal_conflicts` (pure) and
`monte.ledger.merge.check_seal`, which `merge_ledgers` runs before it writes anything.

Each machine's appends are checked on its own tip, so two machines can each spend the same read
(two final claims, two test@0); the union of their ledgers is where the two reads first meet,
and a merge that would bring them together is refused ``E_SEALED`` with no object written and no
ref moved. Real temporary repositories, the ledgers written with the Ledger API (as in
``test_merge.py``)."""

from __future__ import annotations

from pathlib import Path

import pytest
from dulwich.objects import ObjectID

from monte.errors import MonteError
from monte.ledger.experiment import Ledger
from monte.ledger.merge import merge_into_ref, merge_ledgers, union_tree
from monte.ledger.records import RunRow
from monte.ledger.rules import seal_conflicts
from monte.ledger.store import Store, add_object
from tests.support import ledger as shared
from tests.support.helpers import git, snapshot_state

EXP = "arith-sft"
REF = f"refs/heads/monte/{EXP}/ledger"
OTHER = "refs/heads/laptop-ledger"  # the other machine's copy, fetched next to ours
BASE = {"target": {"kind": "base"}}
CKPT = {"target": {"kind": "checkpoint", "run": "tr0000000001", "step": 50}}


MEASUREMENT = shared.measurement(EXP)


def append(led: Ledger, run: str, **kw: object) -> RunRow:
    """A ``started`` eval record (a dev eval unless ``kw`` says otherwise)."""
    fields: dict[str, object] = {"kind": "eval", "split": "dev", "exam": "arith", "cohort": "c1", "model": "base", **kw}
    return led.append_row(lambda _snap, _seq: RunRow(run=run, experiment=EXP, status="started", **fields),  # type: ignore[arg-type]
                          event="started", summary=lambda r: f"eval {r.run}: started")


def fork(store: Store) -> tuple[Ledger, Ledger]:
    """Ours (the experiment's ledger ref) and theirs (a copy of it, as the other machine's)."""
    tip = store.tip(REF)
    assert tip is not None and store.set_ref(OTHER, None, tip)
    theirs = Ledger(store, EXP)
    theirs.ref = OTHER
    return Ledger(store, EXP), theirs


def read(run: str, role: str | None, *, cohort: str = "c1", exam: str = "arith", smoke: bool = False,
         host: str = "", seq: int = 0) -> RunRow:
    return RunRow(run=run, experiment=EXP, kind="eval", status="succeeded", split="test", cohort=cohort,
                  exam=exam, smoke=smoke, role=role, host=host, seq=seq,
                  plan=BASE if role == "baseline" else CKPT)


# --- seal_conflicts: pure -------------------------------------------------------------------------


def test_seal_conflicts_allows_test0_and_one_claim() -> None:
    assert seal_conflicts([read("t0", "baseline"), read("cl", "claim")]) == []
    dev = RunRow(run="dv", experiment=EXP, kind="eval", status="succeeded", split="dev", cohort="c1", exam="arith")
    smoke = read("sm", "claim", smoke=True)
    other = [read("x1", "claim", cohort="c2"), read("x2", "claim", exam="other")]
    assert seal_conflicts([read("t0", "baseline"), read("cl", "claim"), dev, smoke, *other]) == []


@pytest.mark.parametrize(("roles", "what", "named"), [
    (["baseline", "claim", "claim"], "claims", ["c1", "c2"]),
    (["baseline", "baseline"], "baselines", ["b0", "b1"]),
    (["baseline", "baseline", "claim", "claim"], "both", ["b0", "b1", "c2", "c3"]),
])
def test_seal_conflicts_names_the_reads_that_break_it(roles: list[str], what: str, named: list[str]) -> None:
    rows = [read(f"{r[0]}{i}", r, seq=i) for i, r in enumerate(roles)]
    found = seal_conflicts(rows)
    assert {c.what for c in found} == ({"claims", "baselines"} if what == "both" else {what})
    assert sorted(r.run for c in found for r in c.rows) == named
    assert all((c.cohort, c.exam) == ("c1", "arith") for c in found)


def test_seal_conflicts_counts_a_third_read_and_roles_missing_from_old_rows() -> None:
    """A row without a role (written before rows carried one) reads its role off its target;
    three reads that are neither two claims nor two test@0 still break the seal."""
    old = read("t0", None).model_copy(update={"plan": BASE})
    claim = read("cl", None)
    odd = read("zz", "something-else")
    [c] = seal_conflicts([old, claim, odd])
    assert c.what == "reads" and [r.run for r in c.rows] == ["cl", "t0", "zz"]
    [c] = seal_conflicts([old, read("c2", None), claim])
    assert c.what == "claims"


# --- merging -------------------------------------------------------------------------------------


def _objects(repo: Path) -> set[str]:
    out = git(repo, "cat-file", "--batch-all-objects", "--batch-check=%(objectname)")
    return set(out.split())


def _test_read(led: Ledger, run: str, role: str, host: str) -> None:
    append(led, run, split="test", role=role, host=host, plan=BASE if role == "baseline" else CKPT)


def test_two_claims_made_on_two_machines_do_not_merge(repo: Path, store: Store) -> None:
    _test_read(Ledger(store, EXP), "ba0000000001", "baseline", "laptop")
    ours, theirs = fork(store)
    _test_read(ours, "cl0000000001", "claim", "box")
    _test_read(theirs, "cl0000000002", "claim", "laptop")
    before, objects = snapshot_state(repo), _objects(repo)
    for call in (lambda: merge_ledgers(store, store.tip(REF), store.tip(OTHER)),  # type: ignore[arg-type]
                 lambda: merge_into_ref(store, REF, store.tip(OTHER))):  # type: ignore[arg-type]
        with pytest.raises(MonteError) as e:
            call()
        err = e.value
        assert err.code == "E_SEALED" and err.exit_code == 3
        for name in ("cl0000000001", "cl0000000002", "host box", "host laptop", "two final claims"):
            assert name in err.message, err.message
        assert "decide which claim stands" in err.fix and "docs/reliability.md" in err.fix
        assert snapshot_state(repo) == before and _objects(repo) == objects  # nothing written


def test_two_test0_taken_on_two_machines_do_not_merge(repo: Path, store: Store) -> None:
    ours, theirs = fork(store)
    _test_read(ours, "ba0000000001", "baseline", "box")
    _test_read(theirs, "ba0000000002", "baseline", "laptop")
    with pytest.raises(MonteError) as e:
        merge_into_ref(store, REF, store.tip(OTHER))  # type: ignore[arg-type]
    assert e.value.code == "E_SEALED" and "two test@0 reads" in e.value.message
    assert "ba0000000001" in e.value.message and "ba0000000002" in e.value.message


def test_test0_here_and_test0_plus_claim_there_is_a_third_read(repo: Path, store: Store) -> None:
    ours, theirs = fork(store)
    _test_read(ours, "ba0000000001", "baseline", "box")
    _test_read(theirs, "ba0000000002", "baseline", "laptop")
    _test_read(theirs, "cl0000000002", "claim", "laptop")
    with pytest.raises(MonteError) as e:
        merge_into_ref(store, REF, store.tip(OTHER))  # type: ignore[arg-type]
    assert e.value.code == "E_SEALED" and "two test@0 reads" in e.value.message


def test_reads_on_one_side_and_dev_evals_on_both_merge(repo: Path, store: Store) -> None:
    _test_read(Ledger(store, EXP), "ba0000000001", "baseline", "laptop")
    ours, theirs = fork(store)
    append(ours, "dv0000000001")
    append(theirs, "dv0000000002")
    _test_read(theirs, "cl0000000002", "claim", "laptop")  # the claim: on one machine only
    res = merge_into_ref(store, REF, store.tip(OTHER))  # type: ignore[arg-type]
    assert res.case == "merged"
    runs = {r.run for r in Ledger(store, EXP).rows()}
    assert runs == {"ba0000000001", "dv0000000001", "dv0000000002", "cl0000000002"}


def test_a_ledger_already_broken_by_an_old_merge_still_takes_honest_records(repo: Path, store: Store) -> None:
    """Refusing what neither side brought in would block every later sync for good: only a
    conflict between the two sides' own reads is refused."""
    _test_read(Ledger(store, EXP), "ba0000000001", "baseline", "laptop")
    ours, theirs = fork(store)
    _test_read(ours, "cl0000000001", "claim", "box")
    _test_read(theirs, "cl0000000002", "claim", "laptop")
    o, t = store.tip(REF), store.tip(OTHER)
    assert o and t
    objects = store.repo.object_store
    union = union_tree(objects, o, t)  # the old merge: the union, the seal unchecked
    for obj in union.new.values():
        add_object(objects, obj)
    assert union.tree is not None
    old = git(repo, "commit-tree", union.tree.decode(), "-p", o.decode(), "-p", t.decode(),
              "-m", "merge: union\n\nMonte-Event: merge").strip()
    assert store.set_ref(REF, o, ObjectID(old.encode())) and store.set_ref(OTHER, t, ObjectID(old.encode()))
    append(theirs, "dv0000000002")
    append(Ledger(store, EXP), "dv0000000001")
    assert merge_into_ref(store, REF, store.tip(OTHER)).case == "merged"  # type: ignore[arg-type]
