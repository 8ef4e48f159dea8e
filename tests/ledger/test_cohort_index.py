"""The derived cohort index (`cohorts/<cohort>/index.json`, :mod:`monte.ledger.cohorts`): every
record keeps it equal to what the rules read from the rows (a cohort's baselines and test
reads), so finishing an eval and planning a train read it instead of every row. Real temporary
repositories, records appended with the Ledger API, read back with the real git."""

from __future__ import annotations

import json
import os
import random
import socket
import subprocess
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from monte.errors import MonteError
from monte.evals.run import _delta
from monte.ledger import cohorts, rules
from monte.ledger.experiment import Ledger, record_change
from monte.ledger.merge import merge_into_ref, merge_ledgers
from monte.ledger.records import RunRow
from monte.ledger.store import Snapshot, Store
from monte.ledger.verify import Verifier
from monte.runs.lifecycle import CohortReads, read_rows
from monte.training.plan import _require_baselines
from tests.support import ledger as shared
from tests.support.helpers import git

EXP = "exp"
REF = f"refs/heads/monte/{EXP}/ledger"
OTHER = "refs/heads/laptop-ledger"
COHORTS = ("c1", "c2")
EXAMS = ("arith", "logic")


MEASUREMENT = shared.measurement(EXP, exams=EXAMS, split_n=4, created_at="2026-01-01T00:00:00Z")


def tasks(scores: list[float]) -> bytes:
    return "".join(json.dumps({"id": f"t{i}", "score": s}) + "\n" for i, s in enumerate(scores)).encode()


def put(led: Ledger, row: RunRow, body: bytes | None = None) -> RunRow:
    """Append a version of ``row`` (a new run, or its next transition)."""
    def make(snap: Snapshot, seq: int) -> RunRow:
        return row.model_copy()

    return led.append_row(make, event=row.status, summary=lambda r: f"{r.kind} {r.run}: {r.status}",
                          files=(lambda r: {"tasks.jsonl": body}) if body else None)


def eval_row(run: str, *, cohort: str = "c1", exam: str = "arith", split: str = "dev", base: bool = True,
             smoke: bool = False) -> RunRow:
    target = {"kind": "base", "run": None, "step": 0} if base else {"kind": "checkpoint", "run": "tr", "step": 50}
    return RunRow(run=run, experiment=EXP, kind="eval", status="started", cohort=cohort, exam=exam, split=split,
                  smoke=smoke, step=0 if base else 50, plan={"target": target}, host="elsewhere", pid=None)


def finish(led: Ledger, run: str, status: str = "succeeded", scores: list[float] | None = None) -> RunRow:
    now = led.row(run)
    assert now is not None
    scores = scores if scores is not None else [1.0, 0.0, 1.0, 1.0]
    upd: dict[str, Any] = {"status": status}
    if status == "succeeded" and not now.smoke:
        upd.update(score=sum(scores) / len(scores), n=len(scores))
    return put(led, now.model_copy(update=upd), tasks(scores) if status == "succeeded" and not now.smoke else None)


def index_at(repo: Path, rev: str, cohort: str) -> Any:
    out = git(repo, "show", f"{rev}:cohorts/{cohort}/index.json", check=False)
    return json.loads(out) if out.strip() else None


def index_findings(store: Store, **kw: Any) -> list[Any]:
    return [v for v in Verifier(store).verify(EXP, **kw) if "cohorts/" in v.message]


def same_as_rules(led: Ledger, snap: Snapshot | None = None) -> None:
    """The index of every cohort equals the rules over the rows, for every exam and split."""
    rows = led.rows(snap)
    for c in COHORTS:
        index = led.cohort_index(c, snap)
        assert index == cohorts.build(rows, c) or (index is None and not any(r.cohort == c for r in rows))
        for exam in EXAMS:
            for split in ("dev", "test"):
                want = rules.baseline(rows, c, exam, split)
                assert cohorts.baseline(index or {}, exam, split) == (want.run if want else None)
            assert cohorts.test_reads(index or {}, exam) == [r.run for r in rules.test_touches(rows, c, exam)]


# --- the fold equals the rules ------------------------------------------------------------------


@pytest.mark.parametrize("seed", range(6))
def test_the_index_equals_the_rules_after_every_append(repo: Path, store: Store, seed: int) -> None:
    """Random histories: evals of the base and of checkpoints on dev and test in two cohorts,
    smoke, failed and abandoned ones, reruns of the baseline, train rows, and runs that finish
    in another order than they started (a later base eval finishing first)."""
    rng = random.Random(seed)
    led = Ledger(store, EXP)
    live: list[str] = []
    n = 0
    for _ in range(45):
        if live and rng.random() < 0.5:
            run = live.pop(rng.randrange(len(live)))  # any live run: finishes out of order
            row = led.row(run)
            assert row is not None
            if row.status == "started" and rng.random() < 0.3:
                put(led, row.model_copy(update={"status": "running"}))
                live.append(run)
            else:
                finish(led, run, rng.choice(["succeeded", "succeeded", "failed", "abandoned"]))
        else:
            n += 1
            run = f"{rng.choice('0123456789abcdefghjk')}{rng.choice('0123456789abcdefghjk')}{n:010d}"
            if rng.random() < 0.15:
                put(led, RunRow(run=run, experiment=EXP, kind="train", status="started", cohort=rng.choice(COHORTS),
                                smoke=rng.random() < 0.3))
            else:
                put(led, eval_row(run, cohort=rng.choice(COHORTS), exam=rng.choice(EXAMS),
                                  split=rng.choice(["dev", "test"]), base=rng.random() < 0.6, smoke=rng.random() < 0.15))
                live.append(run)
        same_as_rules(led)
    # the reader gives what the rules give over read_rows (liveness included: these processes are gone)
    snap = led.snapshot()
    rows = read_rows(led, snap)
    for c in COHORTS:
        reads = CohortReads(led, snap, c)
        assert reads.index is not None
        for exam in EXAMS:
            for split in ("dev", "test"):
                want = rules.baseline(rows, c, exam, split)
                got = reads.baseline(exam, split)
                assert (got.run if got else None) == (want.run if want else None)
            assert reads.test_touches(exam) == rules.test_touches(rows, c, exam)
    assert index_findings(store) == []  # verify re-derives it record by record: each one matched


@st.composite
def histories(draw: st.DrawFn) -> list[RunRow]:
    """Versions of rows (each run's later versions after its first), any transitions at all."""
    runs = draw(st.lists(st.tuples(st.integers(1, 6), st.sampled_from("abc")), min_size=1, max_size=8, unique=True))
    out = []
    for seq, letter in runs:
        run = f"{letter}x{seq:010d}"
        for _ in range(draw(st.integers(1, 3))):
            out.append(RunRow(run=run, experiment=EXP, seq=seq, kind=draw(st.sampled_from(["eval", "eval", "train"])),
                              status=draw(st.sampled_from(["started", "running", "succeeded", "failed"])),
                              cohort="c1", exam=draw(st.sampled_from(["arith", "logic", None])),
                              split=draw(st.sampled_from(["dev", "test"])), smoke=draw(st.booleans()),
                              plan={"target": {"kind": draw(st.sampled_from(["base", "checkpoint"]))}}))
    return draw(st.permutations(out))


@settings(max_examples=300, deadline=None)
@given(histories())
def test_the_fold_is_the_rules_over_the_latest_versions(versions: list[RunRow]) -> None:
    """A pure property: folding row versions one by one (a row rewritten in place, seqs tied as
    after a merge) gives what the rules give over each run's latest version, in record order."""
    index: dict[str, Any] = cohorts.empty()
    latest: dict[str, RunRow] = {}
    for row in versions:
        before = json.dumps(index, sort_keys=True)
        new = cohorts.fold(index, row)
        assert json.dumps(index, sort_keys=True) == before  # pure: the old index is left as it was
        index, latest[row.run] = new, row
        rows = sorted(latest.values(), key=lambda r: (r.seq, r.run))  # as Ledger.rows orders them
        for exam in ("arith", "logic"):
            for split in ("dev", "test"):
                want = rules.baseline(rows, "c1", exam, split)
                assert cohorts.baseline(index, exam, split) == (want.run if want else None)
            assert cohorts.test_reads(index, exam) == [r.run for r in rules.test_touches(rows, "c1", exam)]
        assert index == cohorts.build(rows, "c1")


def test_a_row_that_changes_nothing_writes_no_index(repo: Path, store: Store) -> None:
    led = Ledger(store, EXP)
    put(led, eval_row("ab0000000001"))
    finish(led, "ab0000000001")
    before = git(repo, "rev-parse", f"{REF}:cohorts/c1/index.json")
    put(led, eval_row("ab0000000002", base=False))  # a checkpoint's dev eval: no baseline, no test read
    assert git(repo, "diff", "--name-only", f"{REF}~1", REF).split() == [
        "meta.json", "runs/a/b/ab0000000002/row.json", "runs/a/b/index.json"]
    assert git(repo, "rev-parse", f"{REF}:cohorts/c1/index.json") == before


# --- a ledger written before the index ----------------------------------------------------------


def old_ledger(store: Store, monkeypatch: pytest.MonkeyPatch) -> Ledger:
    """Records written by a monte that kept no cohort index: base dev evals (the later one
    finishing first), a test@0, a checkpoint eval still running."""
    led = Ledger(store, EXP)
    with monkeypatch.context() as m:
        m.setattr(cohorts, "index_path", lambda cohort: None)
        for run in ("ab0000000001", "cd0000000002"):
            put(led, eval_row(run))
        finish(led, "cd0000000002", scores=[0.0, 0.0, 0.0, 1.0])  # the later one finishes first
        finish(led, "ab0000000001", scores=[1.0, 0.0, 1.0, 0.0])
        put(led, eval_row("ef0000000003", split="test"))
        finish(led, "ef0000000003")
        put(led, eval_row("ab0000000004", exam="logic"))
        finish(led, "ab0000000004")
        put(led, eval_row("ab0000000005", exam="logic", split="test"))
        finish(led, "ab0000000005")
        put(led, eval_row("gh0000000006", base=False))
    return led


def test_an_old_ledger_pairs_and_plans_from_its_rows_then_gains_the_index(
        repo: Path, store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    led = old_ledger(store, monkeypatch)
    assert git(repo, "ls-tree", "-r", "--name-only", REF, "cohorts").split() == []  # no index
    snap = led.snapshot()
    reads = CohortReads(led, snap, "c1")
    assert reads.index is None
    base = reads.baseline("arith", "dev")
    assert base is not None and base.run == "ab0000000001"  # record order, not finishing order
    # an eval's finish pairs against it, from the rows
    row = led.row("gh0000000006")
    assert row is not None
    d = _delta(led, snap, row, [{"id": f"t{i}", "score": 1.0} for i in range(4)])
    assert d is not None and d["baseline"] == "ab0000000001" and d["paired"] and d["delta"] == 0.5
    _require_baselines(reads, MEASUREMENT)  # a train plan: every baseline found
    # the next record of the cohort creates the index from the rows, once; then it is incremental
    finish(led, "gh0000000006")
    want = cohorts.build(led.rows(), "c1")
    assert index_at(repo, REF, "c1") == want
    assert want["base"]["arith"]["dev"][0][1] == "ab0000000001"
    assert [e[1] for e in want["test"]["arith"]] == ["ef0000000003"]
    assert index_at(repo, f"{REF}~1", "c1") is None
    same_as_rules(led)
    snap = led.snapshot()
    reads = CohortReads(led, snap, "c1")
    assert reads.index == want
    row = led.row("gh0000000006")
    assert row is not None
    assert _delta(led, snap, row, [{"id": f"t{i}", "score": 1.0} for i in range(4)]) == d
    _require_baselines(reads, MEASUREMENT)
    put(led, eval_row("jk0000000007"))  # incremental from here
    finish(led, "jk0000000007")
    same_as_rules(led)
    # verify: the index created mid-history is the fold of every row before it
    assert index_findings(store) == []


def test_the_index_is_read_instead_of_the_rows(repo: Path, store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    """With the index, finishing an eval and checking a train's baselines read no row scan."""
    led = Ledger(store, EXP)
    for exam in EXAMS:
        for split in ("dev", "test"):
            run = f"{exam[0]}{split[0]}{len(exam):010d}"
            put(led, eval_row(run, exam=exam, split=split))
            finish(led, run)
    put(led, eval_row("zz0000000009", base=False))

    def no_scan(*a: Any, **kw: Any) -> Any:
        raise AssertionError("read every row")

    monkeypatch.setattr(Ledger, "rows", no_scan)
    snap = led.snapshot()
    row = led.row("zz0000000009")
    assert row is not None
    d = _delta(led, snap, row, [{"id": f"t{i}", "score": 1.0} for i in range(4)])
    assert d is not None and d["baseline"] == "ad0000000005" and d["paired"]
    _require_baselines(CohortReads(led, snap, "c1"), MEASUREMENT)
    monkeypatch.undo()
    with pytest.raises(MonteError) as e:  # a cohort with no record has no index: its rows say no baselines
        _require_baselines(CohortReads(led, snap, "c2"), MEASUREMENT)
    assert e.value.code == "E_NO_BASELINE"


def test_a_dead_test_baseline_still_refuses_a_train(repo: Path, store: Store) -> None:
    """dead_baseline keeps its meaning: the one test@0 read's row, read with its liveness (a
    process that died reads abandoned), ends the cohort's training."""
    led = Ledger(store, EXP)
    put(led, eval_row("ab0000000001"))
    finish(led, "ab0000000001")
    gone = subprocess.Popen(["true"])
    gone.wait()
    put(led, eval_row("cd0000000002", split="test").model_copy(  # its process (on this host) is gone
        update={"host": socket.gethostname(), "pid": gone.pid}))
    snap = led.snapshot()
    reads = CohortReads(led, snap, "c1")
    assert reads.index is not None
    assert [r.status for r in reads.test_touches("arith")] == [
        r.status for r in rules.test_touches(read_rows(led, snap), "c1", "arith")]
    with pytest.raises(MonteError) as e:
        _require_baselines(reads, MEASUREMENT)
    assert e.value.code == "E_NO_BASELINE" and "cd0000000002" in e.value.message


def test_an_index_naming_a_row_that_does_not_fit_refuses(repo: Path, store: Store) -> None:
    led = Ledger(store, EXP)
    put(led, eval_row("ab0000000001", base=False))
    finish(led, "ab0000000001")
    forged = {"base": {"arith": {"dev": [[2, "ab0000000001"]]}}, "test": {}}
    store.append(REF, lambda snap: _write(snap, {"cohorts/c1/index.json": json.dumps(forged).encode()}))
    with pytest.raises(MonteError) as e:
        CohortReads(led, led.snapshot(), "c1").baseline("arith", "dev")
    assert e.value.code == "E_INTEGRITY" and "ab0000000001" in e.value.message


def _write(snap: Snapshot, writes: dict[str, bytes]) -> Any:
    from monte.ledger.store import Change

    return Change(summary="hand-written", writes=dict(writes), trailers={"Monte-Event": "finished"})


# --- bulk builders -------------------------------------------------------------------------------


def test_record_change_builds_the_index_through_read_alone() -> None:
    """A bulk builder gives record_change only ``read``: a cohort with no index is created from the
    fan-out indexes it reads."""
    files: dict[str, bytes] = {}
    rows = [eval_row("ab0000000001").model_copy(update={"status": "succeeded", "seq": 2}),
            eval_row("ab0000000002", split="test").model_copy(update={"seq": 3})]
    files["runs/a/b/index.json"] = json.dumps({r.run: r.model_dump(mode="json") for r in rows}).encode()
    change = record_change(files.get, eval_row("cd0000000003", split="test"), 4, event="started", summary="s")
    index = json.loads(change.writes["cohorts/c1/index.json"] or b"")
    assert index == {"base": {"arith": {"dev": [[2, "ab0000000001"]]}},
                     "test": {"arith": [[3, "ab0000000002"], [4, "cd0000000003"]]}}


# --- merges --------------------------------------------------------------------------------------


def on(store: Store, ref: str) -> Ledger:
    led = Ledger(store, EXP)
    led.ref = ref
    return led


@pytest.mark.parametrize("old", [False, True], ids=["indexed", "old-ledger-base"])
def test_a_merge_unions_the_index(repo: Path, store: Store, monkeypatch: pytest.MonkeyPatch, old: bool) -> None:
    if old:
        old_ledger(store, monkeypatch)  # the fork has no index: each side creates it from the rows
    ours = Ledger(store, EXP)
    with monkeypatch.context() as m:
        if old:
            m.setattr(cohorts, "index_path", lambda cohort: None)
        put(ours, eval_row("aa0000000011"))  # at the fork
    assert (index_at(repo, REF, "c1") is None) == old
    tip = store.tip(REF)
    assert tip is not None and store.set_ref(OTHER, None, tip)
    theirs = on(store, OTHER)
    # each side: base evals of both cohorts (finishing out of order), a test read, a smoke one
    put(theirs, eval_row("ba0000000012", split="test", cohort="c2"))
    put(ours, eval_row("ca0000000012", cohort="c2"))  # the same seq as theirs' (a tie, by run id)
    finish(theirs, "aa0000000011")  # theirs finishes the run from before the fork
    put(ours, eval_row("da0000000013", split="test", smoke=True))
    finish(ours, "ca0000000012")
    put(theirs, eval_row("ea0000000014", exam="logic"))
    finish(theirs, "ea0000000014")
    t = store.tip(OTHER)
    assert t is not None
    res = merge_into_ref(store, REF, t)
    assert res.case == "merged"
    rows = Ledger(store, EXP).rows()
    for c in COHORTS:
        assert index_at(repo, REF, c) == cohorts.build(rows, c)
    same_as_rules(Ledger(store, EXP))
    git(repo, "fsck", "--strict", "--no-progress")
    assert index_findings(store) == []  # verify: the honest union
    # the ledger goes on from the merge
    put(ours, eval_row("fa0000000015", split="test", cohort="c2"))
    same_as_rules(Ledger(store, EXP))
    assert index_findings(store) == []


def fork_and_diverge(store: Store) -> tuple[bytes, bytes]:
    ours = Ledger(store, EXP)
    put(ours, eval_row("aa0000000001"))
    tip = store.tip(REF)
    assert tip is not None and store.set_ref(OTHER, None, tip)
    theirs = on(store, OTHER)
    put(ours, eval_row("ba0000000002", split="test"))
    put(theirs, eval_row("ca0000000002"))
    finish(theirs, "ca0000000002")
    o, t = store.tip(REF), store.tip(OTHER)
    assert o is not None and t is not None
    return o, t


def test_both_sides_changing_the_index_is_no_conflict(repo: Path, store: Store) -> None:
    o, t = fork_and_diverge(store)
    for side in (o, t):
        assert git(repo, "diff", "--name-only", f"{o.decode()}...{t.decode()}").split()  # they diverged
        assert index_at(repo, side.decode(), "c1") is not None
    res = merge_into_ref(store, REF, t)
    assert res.case == "merged"
    merged = index_at(repo, REF, "c1")
    assert merged == {"base": {"arith": {"dev": [[3, "ca0000000002"]]}},
                      "test": {"arith": [[3, "ba0000000002"]]}}



def _git_in(repo: Path, *args: str, data: bytes | None = None, env: dict[str, str] | None = None) -> str:
    r = subprocess.run(["git", "-C", str(repo), *args], input=data, capture_output=True,
                       env={**os.environ, **(env or {})})
    assert r.returncode == 0, r.stderr.decode()
    return r.stdout.decode().strip()


def test_a_forged_merge_index_is_a_violation(repo: Path, store: Store, tmp_path: Path) -> None:
    """A merge commit made with git plumbing whose tree is the union but for the cohort index
    (ours' kept, theirs' baseline dropped) is refused by verify, naming the path."""
    o, t = fork_and_diverge(store)
    honest = merge_ledgers(store, o, t)  # the objects of the honest union (no ref moves)
    env = {"GIT_INDEX_FILE": str(tmp_path / "forge-index")}
    _git_in(repo, "read-tree", honest.commit.decode(), env=env)
    lie = _git_in(repo, "hash-object", "-w", "--stdin", data=git(repo, "show", f"{o.decode()}:cohorts/c1/index.json").encode())
    _git_in(repo, "update-index", "--cacheinfo", f"100644,{lie},cohorts/c1/index.json", env=env)
    tree = _git_in(repo, "write-tree", env=env)
    forged = _git_in(repo, "commit-tree", tree, "-p", o.decode(), "-p", t.decode(),
                     data=b"merge: union\n\nMonte-Event: merge\n")
    _git_in(repo, "update-ref", REF, forged, o.decode(), env={"MONTE_HOOKS": "off"})
    found = Verifier(store).verify(EXP)
    named = [v for v in found if v.rule == "well-formed" and "cohorts/c1/index.json" in v.message]
    assert named and all(v.commit == forged[:12] for v in named), found
    # the honest union in its place passes
    _git_in(repo, "update-ref", REF, honest.commit.decode(), forged, env={"MONTE_HOOKS": "off"})
    assert index_findings(store) == []
