"""lm-evaluation-harness tasks as exams: ``monte env add --dev lm-eval:TASK --test lm-eval:TASK``.

:mod:`.freeze` freezes a task's whole closure (its YAML and ``include:`` parents, its
``!function`` modules, its documents rewritten to local JSON lines, its few-shot pool) and
records, per document, lm-eval's own ``doc_hash``/``prompt_hash``/``target_hash`` and the task
hash; :mod:`.imports` follows what its ``!function`` modules import. :mod:`.evaluate` grades with lm-eval's own code: an ``lm_eval.api.model.LM`` backed by
monte's loaded model is handed to ``simple_evaluate``, so lm-eval's filters, ``process_results``
and metrics score every document, and every hash is proven again before anything is spent.

This module imports nothing of lm-eval: ``monte --help`` and the read-only commands never do.
"""

from __future__ import annotations

from typing import Any

PREFIX = "lm-eval:"
KIND = "lm-eval"


def is_task_spec(spec: str | None) -> bool:
    return bool(spec) and str(spec).startswith(PREFIX)


#: the requests lm-eval sends the model for each output type
REQUEST_TYPES = {"generate_until": "generate_until", "multiple_choice": "loglikelihood",
                 "loglikelihood": "loglikelihood"}
#: lm-eval's max_gen_toks when a task's generation_kwargs name none (HFLM's and MonteLM's default)
MAX_GEN_TOKS = 256


def requests(spec: dict[str, Any]) -> dict[str, Any]:
    """What an eval of this frozen task asks the model (a plan's and a row's account of it): the
    task's output type, lm-eval's request type, and for generation the task's own
    ``generation_kwargs`` (not the experiment's generation defaults, which it does not use)."""
    kind = str(spec.get("output_type", "generate_until"))
    gen = dict(spec.get("generation_kwargs") or {}) if kind == "generate_until" else None
    if gen is not None:
        gen.setdefault("max_gen_toks", MAX_GEN_TOKS)
    return {"output_type": kind, "request_type": REQUEST_TYPES.get(kind, kind), "generation_kwargs": gen,
            "num_fewshot": int(spec.get("num_fewshot") or 0), **({"chat": spec["chat"]} if spec.get("chat") else {})}


def describe(req: dict[str, Any], n: int) -> str:
    """One line for the plan: ``N lm-eval generate_until requests, max 12 new tokens, until [...]``."""
    return _what(req, n) + _rendering(req.get("chat"))


def _rendering(chat: dict[str, Any] | None) -> str:
    if not chat:
        return ""
    template = chat.get("apply_chat_template")
    out = ("; the model's chat template" + (f" {template!r}" if isinstance(template, str) else "")
           + (", few-shot as turns" if chat.get("fewshot_as_multiturn") else "")) if template else ""
    return out + ("; a system instruction" if chat.get("system_instruction") else "")


def _what(req: dict[str, Any], n: int) -> str:
    if req["request_type"] != "generate_until":
        return (f"{n} documents as lm-eval {req['output_type']} ({req['request_type']} of each choice: no "
                f"generation), {req['num_fewshot']}-shot")
    gen = req["generation_kwargs"] or {}
    until = gen.get("until")
    sampled = bool(gen.get("do_sample"))
    return (f"{n} lm-eval generate_until requests, {req['num_fewshot']}-shot, max {gen.get('max_gen_toks')} new tokens "
            f"each" + (f", until {until!r}" if until else "")
            + (f", sampled at temperature {gen.get('temperature', 1.0)}" if sampled else ", greedy"))


def sharding_refusal(req: dict[str, Any]) -> str | None:
    """Why ``--processes N`` cannot shard this task (None: it can): its generation is sharded in
    whole batches, as every eval's; loglikelihoods and sampled answers are not."""
    if req["request_type"] != "generate_until":
        return f"a {req['output_type']} task's loglikelihoods are scored in one process"
    if (req["generation_kwargs"] or {}).get("do_sample"):
        return "the task samples its answers, which one process draws"
    return None
