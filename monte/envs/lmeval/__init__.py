"""lm-evaluation-harness tasks as exams: ``monte env add --dev lm-eval:TASK --test lm-eval:TASK``.

:mod:`.freeze` freezes a task's whole closure (its YAML and ``include:`` parents, its
``!function`` modules, its documents rewritten to local JSON lines, its few-shot pool) and
records, per document, lm-eval's own ``doc_hash``/``prompt_hash``/``target_hash`` and the task
hash. :mod:`.evaluate` grades with lm-eval's own code: an ``lm_eval.api.model.LM`` backed by
monte's loaded model is handed to ``simple_evaluate``, so lm-eval's filters, ``process_results``
and metrics score every document, and every hash is proven again before anything is spent.

This module imports nothing of lm-eval: ``monte --help`` and the read-only commands never do.
"""

from __future__ import annotations

PREFIX = "lm-eval:"
KIND = "lm-eval"


def is_task_spec(spec: str | None) -> bool:
    return bool(spec) and str(spec).startswith(PREFIX)
