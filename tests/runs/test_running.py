"""A run's life (:func:`monte.runs.lifecycle.running`), the one way evaluation and training go from a
``started`` record to a finished one: the moments reported, a failure recorded with its reason,
and SIGTERM and Ctrl-C each turned into their refusal. A real ledger in a real repository; the run
is any body of work, so these ask the lifecycle itself, with no model."""

from __future__ import annotations

import json
import os
import signal
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Literal

import pytest

from monte.errors import MonteError, error
from monte.ledger.experiment import Ledger
from monte.ledger.records import RunRow
from monte.ledger.store import Snapshot, Store
from monte.manifest import now
from monte.runs.lifecycle import Run, running
from monte.runs.liveness import this_process
from monte.workspace import Workspace, open_workspace
from tests.support import ledger as shared

EXP = "exp"
MEASUREMENT = shared.measurement(EXP, split_n=4)
Kind = Literal["eval", "train"]


@pytest.fixture
def ws(store: Store, repo: Path) -> Workspace:
    return open_workspace(repo)


def _start(ledger: Ledger, run: str, kind: Kind) -> RunRow:
    def make(snap: Snapshot, seq: int) -> RunRow:
        return RunRow(run=run, experiment=EXP, kind=kind, status="started", created_at=now(), updated_at=now(),
                      cohort="c1", model="base", step=0, exam="arith" if kind == "eval" else None,
                      split="dev" if kind == "eval" else None, plan={}, **this_process())

    return ledger.append_row(make, event="started", summary=lambda r: f"{kind} {run} started")


def _end(ledger: Ledger, row: RunRow, status: str, reason: str | None = None) -> RunRow:
    def make(snap: Snapshot, seq: int) -> RunRow:
        current = ledger.row(row.run, snap)
        assert current is not None
        return current.model_copy(update={"status": status, "updated_at": now(), "error": reason})

    return ledger.append_row(make, event=status, summary=lambda r: f"{r.kind} {r.run} {status}")


class Life:
    """One run through :func:`running`, with what it reported."""

    def __init__(self, ws: Workspace, kind: Kind) -> None:
        self.ws = ws
        self.ledger = Ledger(ws.store, EXP)
        self.kind = kind
        self.moments: list[tuple[str, str]] = []

    def __call__(self) -> AbstractContextManager[Run]:
        return running(self.ws, EXP, lambda: _start(self.ledger, "r1", self.kind),
                       transition=lambda row, moment: self.moments.append((moment, row.status)),
                       fail=lambda row, reason: _end(self.ledger, row, "failed", reason))

    def row(self) -> RunRow:
        row = self.ledger.row("r1")
        assert row is not None
        return row

    def events(self) -> list[dict[str, object]]:
        path = self.ws.run_folder(EXP, "r1") / "events.jsonl"
        return [json.loads(line) for line in path.read_text().splitlines()]


@pytest.mark.parametrize("kind", ["eval", "train"])
def test_ctrl_c_records_the_run_failed_and_refuses_naming_what_its_row_reads(ws: Workspace, kind: Kind) -> None:
    life = Life(ws, kind)
    with pytest.raises(MonteError) as got, life():
        raise KeyboardInterrupt
    assert got.value.code == "E_INTERRUPTED"
    assert "run r1 was interrupted; its row reads failed" in got.value.message
    assert "run the command again" in got.value.fix  # a dev read or a chunk spent nothing
    assert (life.row().status, life.row().error) == ("failed", "interrupted")
    assert life.moments == [("started", "started"), ("finished", "failed")]
    assert [e["event"] for e in life.events()] == ["failed"]


@pytest.mark.parametrize("kind", ["eval", "train"])
def test_sigterm_stops_the_run_through_the_same_failure(ws: Workspace, kind: Kind) -> None:
    life = Life(ws, kind)
    with pytest.raises(MonteError) as got, life():
        os.kill(os.getpid(), signal.SIGTERM)
    assert got.value.code == "E_STOPPED" and "run r1 was stopped" in got.value.message
    assert life.row().status == "failed" and "E_STOPPED" in (life.row().error or "")
    assert signal.getsignal(signal.SIGTERM) is not None  # the handler before the run is back


def test_an_error_is_recorded_with_its_reason_and_raised_as_it_was(ws: Workspace) -> None:
    life = Life(ws, "eval")
    with pytest.raises(ZeroDivisionError), life():
        raise ZeroDivisionError("no items")
    assert life.row().error == "ZeroDivisionError: no items"
    assert life.moments[-1] == ("finished", "failed")


def test_a_finish_is_reported_once_and_its_own_failure_is_not_the_runs(ws: Workspace) -> None:
    life = Life(ws, "train")
    with life() as run:
        assert isinstance(run, Run) and run.row.status == "started"
        done = run.finish(lambda row: _end(life.ledger, row, "succeeded"))
    assert done.status == "succeeded" and life.moments == [("started", "started"), ("finished", "succeeded")]

    other = Life(ws, "eval")
    other.ledger = Ledger(ws.store, EXP)

    def cannot_write(row: RunRow) -> RunRow:
        raise OSError("the disk is full")

    with pytest.raises(OSError), running(ws, EXP, lambda: _start(other.ledger, "r2", "eval"),
                                         transition=lambda row, m: other.moments.append((m, row.status)),
                                         fail=lambda row, reason: _end(other.ledger, row, "failed", reason)) as run:
        run.finish(cannot_write)
    r2 = other.ledger.row("r2")
    assert r2 is not None and r2.status == "started"  # its result is kept elsewhere; no failure is written over it
    assert other.moments == [("started", "started")]


def test_a_start_that_is_refused_reports_nothing_and_records_nothing(ws: Workspace) -> None:
    def refused() -> RunRow:
        raise error("E_SEALED", "the read is spent", "start a new cohort")

    seen: list[str] = []
    with pytest.raises(MonteError) as got, running(ws, EXP, refused, transition=lambda r, m: seen.append(m),
                                                   fail=lambda row, reason: row):
        raise AssertionError("the body does not run")
    assert got.value.code == "E_SEALED" and seen == []
    assert Ledger(ws.store, EXP).row("r1") is None
