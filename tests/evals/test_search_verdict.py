"""Issue 45 through a real ledger: evals recorded by monte's own finish step (the delta against
the base and against the parent checkpoint, from the per-task files), read by `monte status`
(human and --json): K per cohort and dev exam, the best judged as the best of K, and each
move's verdict against its parent. The per-task outcomes are designed (what a model cannot be
made to do on purpose); everything else is monte's own code."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from monte.evals.plan import ExamPlan, _searched
from monte.evals.run import _finish
from monte.ledger.experiment import Ledger
from monte.ledger.ids import new_run_id
from monte.ledger.records import RunRow
from monte.ledger.store import Store
from monte.stats.paired import paired_delta
from monte.status.search import search_line
from tests.support.helpers import as_is
from tests.support.ledger import measurement

MEASUREMENT = measurement("exp", exams=("arith",), split_n=200)
N = 200
BASE = [1.0] * 100 + [0.0] * 100  # the base is right on the first 100 items


def _train(ledger: Ledger, parent: tuple[str, int] | None, step: int) -> str:
    run = new_run_id()
    ledger.append_row(as_is(RunRow(
        run=run, experiment="exp", kind="train", status="succeeded", cohort="c", created_at="t",
        plan={"recipe": {"name": "sft", "algorithm": "sft"}, "source": "d",
              "parent": {"run": parent[0], "step": parent[1]} if parent else None,
              "start_step": parent[1] if parent else 0},
        checkpoints=[{"step": step, "commit": "0" * 40}])), event="finished", summary=lambda r: f"train {r.run}")
    return run


def _eval(ledger: Ledger, target: dict[str, Any], scores: list[float]) -> RunRow:
    row = ledger.append_row(as_is(RunRow(run=new_run_id(), experiment="exp", kind="eval", status="started",
                                         cohort="c", exam="arith", split="dev", created_at="t",
                                         plan={"target": target})),
                            event="started", summary=lambda r: f"eval {r.run} started")
    tasks = [{"id": f"t{i}", "score": s} for i, s in enumerate(scores)]
    return _finish(ledger, row, "succeeded", tasks=tasks)


def _fixed(scores: list[float], items: range) -> list[float]:
    return [1.0 if i in items else s for i, s in enumerate(scores)]


def _broken(scores: list[float], items: range) -> list[float]:
    return [0.0 if i in items else s for i, s in enumerate(scores)]


def test_a_chunk_that_falls_from_its_parent_is_a_regression_there_and_ok_against_the_base(
        store: Store, monte) -> None:
    ledger = Ledger(store, "exp")
    _eval(ledger, {"kind": "base"}, BASE)
    a = _train(ledger, None, 50)
    a_scores = _fixed(BASE, range(100, 140))  # +40 items: +0.20 against the base
    ra = _eval(ledger, {"kind": "checkpoint", "run": a, "step": 50}, a_scores)
    assert ra.delta is not None and "parent" not in ra.delta  # from the base: its delta is the move's
    b = _train(ledger, (a, 50), 100)
    b_scores = _broken(a_scores, range(115, 140))  # 25 of a's gains lost: -0.125 from a, +0.075 from the base
    rb = _eval(ledger, {"kind": "checkpoint", "run": b, "step": 100}, b_scores)
    d = rb.delta
    assert d is not None and d["verdict"] == "ok" and (d["fixed"], d["broken"]) == (15, 0)
    p = d["parent"]
    assert p["checkpoint"] == f"{a}@50" and p["eval"] == ra.run
    assert (p["fixed"], p["broken"], p["delta"]) == (0, 25, -0.125)
    assert p["verdict"] == "STRIKE" and p["regression"] is True
    want = paired_delta(a_scores, b_scores)
    assert (p["lower"], p["upper"]) == (want.lower, want.upper)

    doc = monte("status", "--json").json()
    cycle = next(c for c in doc["cycles"] if c["checkpoint"] == f"{b}@100")
    assert cycle["verdict"] == "ok" and cycle["parent"]["regression"] is True
    out = monte("status", "--wide").out  # whole lines: the default folds at 120 columns
    assert f"cycles vs parent: {b}@100 vs {a}@50 -0.1250 regression" in out
    line = next(x for x in out.splitlines() if x.startswith(f"delta arith/dev {b}@100"))
    assert " ok; vs parent " in line and "(a significant regression)" in line
    # two tries: the best (a) judged as the best of 2, K beside it
    (s,) = doc["search"]
    assert (s["cohort"], s["exam"], s["k"], s["checkpoint"], s["chosen"]) == ("c", "arith", 2, f"{a}@50", "best")
    assert s["verdict"] == s["search_verdict"] == "ok" and s["estimate"] < s["delta"] == 0.2
    assert f"search arith/dev (cohort c): K 2 checkpoint(s) tried; best {a}@50 +0.2000 per cycle ok; " \
           "as the best of 2: ok" in out
    # the report says the same
    r = monte("report", "--out", "report.html")
    assert r.code == 0, r.err
    page = Path("report.html").read_text(encoding="utf-8")
    assert f"cycles vs parent: {b}@100 vs {a}@50 -0.1250 regression" in page
    assert f"K 2 checkpoint(s) tried; best {a}@50 +0.2000 per cycle ok" in page


def test_k1_status_is_todays_verdict(store: Store, monte) -> None:
    ledger = Ledger(store, "exp")
    _eval(ledger, {"kind": "base"}, BASE)
    a = _train(ledger, None, 50)
    r = _eval(ledger, {"kind": "checkpoint", "run": a, "step": 50}, _fixed(BASE, range(100, 106)))
    assert r.delta is not None
    (s,) = monte("status", "--json").json()["search"]
    assert s["k"] == 1 and s["search_verdict"] == s["verdict"] == r.delta["verdict"]
    assert (s["lower"], s["upper"], s["estimate"]) == (r.delta["lower"], r.delta["upper"], r.delta["delta"])
    assert "as the best of 1: the same" in monte("status", "--wide").out


def test_no_move_helped_many_tries_the_best_is_not_ok_as_the_best_of_k(store: Store, monte) -> None:
    # 12 checkpoints, each a different reshuffle of 14 flips (no move helped: the same accuracy);
    # the best of them is ok per cycle (11 fixed, 3 broken), not as the best of 12
    ledger = Ledger(store, "exp")
    _eval(ledger, {"kind": "base"}, BASE)
    parent: tuple[str, int] | None = None
    for j in range(12):
        run = _train(ledger, parent, 10 * (j + 1))
        fixed, broken = (11, 3) if j == 7 else (7, 7)
        scores = _broken(_fixed(BASE, range(100 + j, 100 + j + fixed)), range(j, j + broken))
        _eval(ledger, {"kind": "checkpoint", "run": run, "step": 10 * (j + 1)}, scores)
        parent = (run, 10 * (j + 1))
    doc = monte("status", "--json").json()
    (s,) = doc["search"]
    assert s["k"] == 12 and s["verdict"] == "ok" and s["search_verdict"] == "STRIKE"
    assert s["delta"] == 0.04 and s["estimate"] < 0.04 and s["lower"] <= 0
    assert sum(c["verdict"] == "ok" for c in doc["cycles"]) == 1  # the per-cycle verdict said ok once
    # the cutoff at 0.025 / 12 is kept with the status's fold (no calibration after an append),
    # and `monte ledger verify` derives the kept fold and its figures again: they hold
    from monte.ledger.derived import FOLD_PREFIX, _load, cached_files

    kept = [_load(path)[1] for _, name, path in cached_files(store.repo.commondir()) if name.startswith(FOLD_PREFIX)]
    assert kept and all(("cutoff", N, 0.025 / 12) in payload[-1] for payload in kept)
    from monte.api.verify import _derived_caches
    from monte.cli.runs import STATUS_RENDERERS
    from monte.workspace import open_workspace

    assert _derived_caches(open_workspace(), STATUS_RENDERERS) == []  # what `monte ledger verify` checks
    with pytest.MonkeyPatch.context() as mp:  # a kept cutoff other than the calibration's is named
        mp.setattr("monte.stats.search.recompute_memo", lambda key: (1, 1))
        assert [c["rule"] for c in _derived_caches(open_workspace(), STATUS_RENDERERS)] == ["cache"] * len(kept)
    _eval(ledger, {"kind": "checkpoint", "run": parent[0] if parent else "", "step": parent[1] if parent else 0},
          BASE)  # a re-eval of the last checkpoint: no new try
    again = monte("status", "--json").json()
    assert again["search"] == doc["search"]
    # K so far beside each dev delta: 1 .. 12, and the re-eval of the last checkpoint no new try
    assert [d["tries"] for d in again["deltas"] if d["split"] == "dev"] == [*range(1, 13), 12]



def test_the_final_claims_plan_shows_the_claimed_checkpoint_as_the_best_of_k(store: Store) -> None:
    ledger = Ledger(store, "exp")
    _eval(ledger, {"kind": "base"}, BASE)
    refs = []
    for j, (fixed, broken) in enumerate([(7, 7), (11, 3), (6, 8)]):
        run = _train(ledger, None, 10)
        _eval(ledger, {"kind": "checkpoint", "run": run, "step": 10},
              _broken(_fixed(BASE, range(100, 100 + fixed)), range(j, j + broken)))
        refs.append(f"{run}@10")
    exam = ExamPlan(exam="arith", benchmark="arith", split="test", path="p", sha256="0", n=200)
    exams = [exam]
    _searched(ledger.rows(), "c", exams, refs[1])  # plans are frozen: the list gets the judged copy
    s = exams[0].search
    assert s is not None and (s["k"], s["checkpoint"], s["chosen"], s["verdict"]) == (3, refs[1], "claimed", "ok")
    assert s["search_verdict"] == "STRIKE"
    assert search_line(s).startswith(f"search arith/dev (cohort c): K 3 checkpoint(s) tried; claimed {refs[1]} +0.0400")
