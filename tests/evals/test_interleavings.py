"""Nothing monte writes ever fails `monte ledger verify`: random interleavings of starts, stops
from a second host, finishes, crashes (a result kept, its process gone) and recoveries, driven
through the same functions `monte eval`, `monte stop` and `monte recover` call."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from monte.errors import MonteError

OPS = st.lists(st.tuples(st.sampled_from(["start", "stop_b", "finish", "crash", "recover"]),
                         st.integers(min_value=0, max_value=5)), min_size=1, max_size=14)


@settings(max_examples=25, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(ops=OPS)
def test_any_interleaving_of_stop_finish_crash_verifies(repo: Path, exp: str, ops: list[tuple[str, int]]) -> None:
    from monte import api
    from monte.evals.run import _record_result, recover, start_row
    from monte.ledger.experiment import Ledger
    from monte.runs.lifecycle import abandon, save_pending, stamp_generated
    from monte.workspace import open_workspace

    ws = open_workspace(repo)
    ledger = Ledger(ws.store, exp)
    plan = api.plan_eval(ws=ws)
    exam = plan.exams[0]
    items = [json.loads(line) for line in (ws.data_root / exam.path).read_text().split("\n") if line.strip()]
    # a whole result, as an eval keeps it: every item answered (right on every other one) and graded
    # by the frozen grader, so that `monte recover`, which grades a kept result again, records it
    from monte.envs import grading

    answers = [str(i.get("answer", "")) if n % 2 else "no" for n, i in enumerate(items)]
    ids = [grading.task_id(it, f"{exam.exam}/{exam.split}", k) for k, it in enumerate(items)]
    with grading.ExamGrader(ledger.measurement().grader, exam.benchmark, exam.exam, config=ws.config,
                            log=repo / "grader.log") as grader:
        tasks = grader.grade(items, answers, ids)
    kept = {"tasks": tasks, "n": len(tasks), "smoke": False, "answers": answers}
    # this host, a process that is gone: what a crashed or still-finishing eval looks like to recover
    who = {"host": __import__("socket").gethostname(), "pid": 2 ** 22 + 7, "proc_start": "0"}
    runs: list[Any] = []
    for op, i in ops:
        try:
            if op == "start":
                runs.append(start_row(ledger, plan, exam, who=who))
            elif not runs:
                continue
            elif op == "stop_b":  # `monte stop` on a second host: it records, it cannot signal
                abandon(ledger, runs[i % len(runs)].run, "stopped on hostB")
            elif op == "finish":
                row = runs[i % len(runs)]
                stamp_generated(ws, exp, row.run, answers)  # as the eval does, before it grades
                save_pending(ws, exp, row.run, kept)
                _record_result(ws, ledger, row, tasks=tasks, smoke=False, n=len(tasks))
            elif op == "crash":
                row = runs[i % len(runs)]
                stamp_generated(ws, exp, row.run, answers)
                save_pending(ws, exp, row.run, kept)
            elif op == "recover":
                recover(ws, exp)
        except MonteError as e:  # refusals are fine; what was written must verify
            assert e.code in ("E_CONFLICT", "E_REFUSED"), e
        assert api.ledger_verify(experiment=exp, ws=ws).ok
    for r in ledger.rows():
        assert r.status in ("started", "succeeded", "abandoned"), r
        if r.status == "succeeded":
            assert r.score == sum(t["score"] for t in tasks) / len(tasks)
