"""`monte.ledger.experiment` and `monte.ledger.ids`: an experiment's ledger ref, its Run rows
under a fanned-out `runs/` tree, and the run ids that key them, checked with the real git."""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from monte.errors import MonteError
from monte.ledger.experiment import Ledger
from monte.ledger.ids import new_run_id
from monte.ledger.records import RunRow
from monte.ledger.store import Snapshot, Store
from tests.support import ledger as shared
from tests.support.helpers import git, snapshot_state

EXP = "arith-sft"
REF = f"monte/{EXP}/ledger"
RUN_ID = re.compile(r"^[0-9a-hjkmnp-tv-z]{12}$")  # lowercase Crockford base32


MEASUREMENT = shared.measurement(EXP, split_n=200)


def row(run: str, status: str = "succeeded", **kw: object) -> Callable[[Snapshot, int], RunRow]:
    fields: dict[str, object] = {"kind": "eval", "split": "dev", "exam": "arith", "cohort": "c1",
                                 "model": "base", "score": 0.5, "n": 200, **kw}
    return lambda _snap, _seq: RunRow(run=run, experiment=EXP, status=status, **fields)  # type: ignore[arg-type]


def append(ledger: Ledger, make: Callable[[Snapshot, int], RunRow], event: str = "finished") -> RunRow:
    return ledger.append_row(make, event=event, summary=lambda r: f"{r.kind} {r.run}: {r.status}")


def show_json(repo: Path, path: str) -> Any:
    return json.loads(git(repo, "show", f"{REF}:{path}"))


@pytest.fixture
def ledger(store: Store) -> Ledger:
    return Ledger(store, EXP)


# --- creation --------------------------------------------------------------------------------


def test_create_freezes_the_measurement_in_the_first_commit(repo: Path, ledger: Ledger) -> None:
    assert git(repo, "rev-list", "--count", REF).strip() == "1"
    assert show_json(repo, "measurement.json") == MEASUREMENT.model_dump(mode="json")
    assert show_json(repo, "meta.json") == {"records": 1}
    assert git(repo, "log", "-1", "--format=%(trailers:key=Monte-Event,valueonly)", REF).strip() \
        == "created"
    assert f"refs/heads/{REF}" in git(repo, "branch", "--list", "--format=%(refname)", "monte/*")
    assert ledger.measurement() == MEASUREMENT


def test_creating_it_again_refuses_and_writes_nothing(repo: Path, ledger: Ledger) -> None:
    before = snapshot_state(repo)
    objects = git(repo, "count-objects", "-v")
    for again in (Ledger(Store(repo), EXP), ledger):
        with pytest.raises(MonteError) as e:
            again.create(MEASUREMENT.model_copy(update={"environment": "another-env"}))  # a changed measurement is refused too
        assert e.value.code == "E_MEASUREMENT_EXISTS" and e.value.exit_code == 3
    assert snapshot_state(repo) == before
    assert git(repo, "count-objects", "-v") == objects
    assert show_json(repo, "measurement.json")["environment"] == "arith"


# --- rows --------------------------------------------------------------------------------------


def test_append_row_writes_the_row_and_its_fanout_index(repo: Path, ledger: Ledger,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MONTE_CI_INSTALL", "monte==0.1.0")  # a pin CI can install (monte.ci)
    a, b, c = "ab0000000001", "ab0000000002", "cd0000000003"  # a and b share a bucket
    for run in (a, b, c):
        append(ledger, row(run))
    listed = git(repo, "ls-tree", "-r", "--name-only", REF).split()
    # every ledger commit carries the CI workflow GitHub runs on a push of the ledger branch; a
    # cohort's rows keep its derived index (baselines and test reads: monte.ledger.cohorts)
    assert listed == [".github/workflows/monte-ledger.yml", "cohorts/c1/index.json", "measurement.json", "meta.json",
                      f"runs/a/b/{a}/row.json", f"runs/a/b/{b}/row.json", "runs/a/b/index.json",
                      f"runs/c/d/{c}/row.json", "runs/c/d/index.json"]
    # `git show` prints a row as JSON, exactly what the ledger reads back
    shown = show_json(repo, f"runs/a/b/{a}/row.json")
    assert shown == ledger.row(a).model_dump(mode="json")  # type: ignore[union-attr]
    assert shown["run"] == a and shown["status"] == "succeeded"
    # each bucket's index holds exactly that bucket's rows, equal to their row.json
    for bucket, runs in (("a/b", [a, b]), ("c/d", [c])):
        index = show_json(repo, f"runs/{bucket}/index.json")
        assert sorted(index) == runs
        for run in runs:
            assert index[run] == show_json(repo, f"runs/{bucket}/{run}/row.json")
    assert show_json(repo, "meta.json") == {"records": 4}


def test_append_row_trailers_make_the_log_searchable(repo: Path, ledger: Ledger) -> None:
    append(ledger, row("ab0000000001", status="started", kind="train", split=None, step=50,
                       cohort="c7"), event="started")
    out = git(repo, "log", "-1", "--format=%(trailers:only,unfold)", REF).strip().splitlines()
    assert out == ["Monte-Event: started", "Monte-Run: ab0000000001", "Monte-Kind: train",
                   "Monte-Step: 50", "Monte-Cohort: c7"]
    assert git(repo, "log", "--format=%s", "--grep=^Monte-Run: ab0000000001$", REF).strip() == \
        "train ab0000000001: started"


def test_rows_come_back_in_record_order_and_equal_every_row_json(repo: Path, ledger: Ledger) -> None:
    ids = ["zz0000000001", "000000000002", "mm0000000003", "zz0000000004"]
    for run in ids:
        append(ledger, row(run, status="started"), event="started")
    append(ledger, row(ids[1], status="succeeded", score=0.75), event="finished")  # a transition
    rows = Ledger(Store(repo), EXP).rows()  # a fresh reader
    # record order: each run where its latest record put it; the rewritten run moved last
    assert [r.run for r in rows] == [ids[0], ids[2], ids[3], ids[1]]
    assert [r.seq for r in rows] == [2, 4, 5, 6]
    assert rows[-1].status == "succeeded" and rows[-1].score == 0.75
    on_disk = {path.split("/")[3]: show_json(repo, path)
               for path in git(repo, "ls-tree", "-r", "--name-only", REF, "runs").split()
               if path.endswith("/row.json")}
    assert {r.run: r.model_dump(mode="json") for r in rows} == on_disk
    assert show_json(repo, "meta.json") == {"records": 6}
    assert git(repo, "rev-list", "--count", REF).strip() == "6"


def test_a_refused_row_writes_nothing(repo: Path, ledger: Ledger) -> None:
    append(ledger, row("ab0000000001"))
    before = snapshot_state(repo)

    def refuse(snap: Snapshot, seq: int) -> RunRow:
        raise MonteError("a rule says no", code="E_REFUSED")

    with pytest.raises(MonteError):
        append(ledger, refuse)
    with pytest.raises(MonteError) as e:
        append(Ledger(Store(repo), "no-such-exp"), row("ab0000000002"))
    assert e.value.code == "E_NOT_FOUND"
    assert snapshot_state(repo) == before


def test_a_lost_race_reapplies_the_row_on_the_new_tip(repo: Path, ledger: Ledger) -> None:
    """The bucket index is derived from the tip: a writer that lost the race must rebuild it
    there, or the other writer's row would vanish from `rows()`."""
    other = Ledger(Store(repo), EXP)
    seqs: list[int] = []

    def make(snap: Snapshot, seq: int) -> RunRow:
        seqs.append(seq)
        if len(seqs) == 1:
            append(other, row("ab0000000009"))  # lands between our read and our swap
        return row("ab0000000001")(snap, seq)

    mine = append(ledger, make)
    assert seqs == [2, 3] and mine.seq == 3
    assert [(r.run, r.seq) for r in ledger.rows()] == [("ab0000000009", 2), ("ab0000000001", 3)]
    assert sorted(show_json(repo, "runs/a/b/index.json")) == ["ab0000000001", "ab0000000009"]


# --- run ids and the fan-out -------------------------------------------------------------------


def test_run_ids_are_short_unique_and_spread_over_every_bucket() -> None:
    n = 100_000
    ids = [new_run_id() for _ in range(n)]
    assert all(RUN_ID.match(i) for i in ids)
    assert len(set(ids)) == n
    buckets = Counter(i[:2] for i in ids)
    assert len(buckets) == 32 * 32  # ~98 per bucket expected: all 1024 are used
    assert max(buckets.values()) < 2 * n / 1024
    first = Counter(i[0] for i in ids)
    assert len(first) == 32 and all(abs(c - n / 32) < 0.15 * n / 32 for c in first.values())


def test_the_runs_tree_stays_fanned_out(repo: Path, ledger: Ledger) -> None:
    n = 200
    ids = [new_run_id() for _ in range(n)]
    for run in ids:
        append(ledger, row(run))
    # two fan-out levels of one base32 character each: no tree under runs/ ever has more than
    # 32 folders, however many runs the ledger gathers
    first = git(repo, "ls-tree", f"{REF}:runs").splitlines()
    assert all(line.split()[1] == "tree" for line in first)
    assert {line.split("\t")[1] for line in first} == {i[0] for i in ids} and len(first) <= 32
    for line in first[:8]:
        a = line.split("\t")[1]
        second = git(repo, "ls-tree", f"{REF}:runs/{a}").splitlines()
        assert len(second) <= 32 and all(entry.split()[1] == "tree" for entry in second)
        for entry in second[:5]:
            b = entry.split("\t")[1]
            names = git(repo, "ls-tree", "--name-only", f"{REF}:runs/{a}/{b}").split()
            # each bucket holds its index and its own runs only
            assert sorted(names) == sorted(["index.json", *(i for i in ids if i[:2] == a + b)])
    assert len(ledger.rows()) == n
