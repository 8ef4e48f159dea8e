"""Evaluation: ``monte eval`` (plan, then run) and ``monte nominate``.

Built on :mod:`monte.runs` (a run's life) beside :mod:`monte.training`; neither imports the other.
"""

from __future__ import annotations

from monte.evals.nominate import nominate
from monte.evals.plan import SMOKE_TASKS, EvalPlan, ExamPlan, Target, plan_eval
from monte.evals.run import EvalResult, recover, run_eval, start_row

__all__ = ["SMOKE_TASKS", "EvalPlan", "EvalResult", "ExamPlan", "Target", "nominate", "plan_eval", "recover",
           "run_eval", "start_row"]
