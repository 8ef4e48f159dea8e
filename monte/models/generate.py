"""Loading a model and generating answers for a split: batched, left-padded, KV cache, greedy;
or K seeded samples per item (:func:`sample`).

Only this module (and training) imports torch and transformers, inside functions.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from monte.errors import error


def backend() -> str:
    """``vllm`` when vLLM is installed and a GPU is there (a box), else ``hf`` (transformers).
    ``MONTE_EVAL_BACKEND=hf`` forces transformers."""
    import importlib.util
    import os

    if os.environ.get("MONTE_EVAL_BACKEND", "").lower() == "hf" or importlib.util.find_spec("vllm") is None:
        return "hf"
    import torch

    return "vllm" if torch.cuda.is_available() else "hf"


class VllmModel:
    """A vLLM engine standing where a transformers model would (see :func:`generate`)."""

    def __init__(self, llm: Any) -> None:
        self.llm = llm


def load(folder: Path) -> tuple[Any, Any]:
    """(model, tokenizer) from a local Hugging Face model folder, on the GPU when there is one
    (served by vLLM when it is installed there)."""
    import torch

    from monte.models import threads

    threads.apply()  # as many threads as the other processes leave cores (a loaded machine)
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()  # monte draws its own progress; keep --json clean
    try:
        tok = AutoTokenizer.from_pretrained(str(folder))
        model = AutoModelForCausalLM.from_pretrained(str(folder), dtype=torch.float32)
    except (OSError, ValueError, KeyError) as e:
        raise error("E_NOT_FOUND", f"{folder} is not a loadable model folder: {e}",
                    "pass a folder saved with save_pretrained (or `monte model init DIR`)") from None
    tok.padding_side = "left"
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    if backend() == "vllm":
        from vllm import LLM

        del model  # vLLM loads the weights itself
        return VllmModel(LLM(model=str(folder), tokenizer=str(folder))), tok
    if torch.cuda.is_available():
        model = model.to("cuda")  # type: ignore[arg-type]
    model.eval()
    return model, tok


def generate(
    model: Any,
    tok: Any,
    prompts: Sequence[str | list[dict[str, str]]],
    *,
    max_new_tokens: int,
    batch_size: int,
    temperature: float = 0.0,
    top_p: float = 1.0,
    stop: Sequence[str] = (),
    chat_template: bool = False,
    on_batch: Callable[[int, int], None] | None = None,
) -> list[str]:
    """One answer per prompt, in the order given.

    Prompts are sorted by length so a batch pads little, generated with the KV cache, and
    decoded without the prompt; each answer is cut at the first stop string.
    """
    texts = [_render(tok, p, chat_template) for p in prompts]
    if isinstance(model, VllmModel):
        return _generate_vllm(model, texts, max_new_tokens=max_new_tokens, temperature=temperature,
                              top_p=top_p, stop=stop, on_batch=on_batch)
    import torch

    order = _length_order(texts)
    out: list[str] = [""] * len(texts)
    device = next(model.parameters()).device
    sample = temperature > 0
    done = 0
    with torch.inference_mode():
        for start in range(0, len(order), batch_size):
            idx = order[start:start + batch_size]
            enc = tok([texts[i] for i in idx], return_tensors="pt", padding=True).to(device)
            kwargs: dict[str, Any] = {"max_new_tokens": max_new_tokens, "do_sample": sample,
                                      "pad_token_id": tok.pad_token_id, "use_cache": True}
            if sample:
                kwargs.update(temperature=temperature, top_p=top_p)
            else:  # greedy: silence a checkpoint's sampling defaults
                kwargs.update(temperature=None, top_p=None, top_k=None)
            gen = model.generate(**enc, **kwargs)
            new = gen[:, enc["input_ids"].shape[1]:]
            for i, text in zip(idx, tok.batch_decode(new, skip_special_tokens=True), strict=True):
                out[i] = _cut(text, stop)
            done += len(idx)
            if on_batch:
                on_batch(done, len(texts))
    return out


def sample_seed(task_id: str) -> int:
    """The seed of an item's K samples: from its id alone, so a re-run (any batch size, any
    machine) draws the same samples where the engine allows (K samples per item, docs/statistics.md)."""
    import hashlib

    return int.from_bytes(hashlib.sha256(f"monte-sample:{task_id}".encode()).digest()[:4], "big")


def sample(
    model: Any,
    tok: Any,
    prompts: Sequence[str | list[dict[str, str]]],
    seeds: Sequence[int],
    *,
    k: int,
    max_new_tokens: int,
    temperature: float,
    top_p: float = 1.0,
    stop: Sequence[str] = (),
    chat_template: bool = False,
    on_batch: Callable[[int, int], None] | None = None,
) -> list[list[str]]:
    """K sampled answers per prompt, in the order given, each item seeded with its own seed.

    transformers: one ``generate`` per item (``num_return_sequences=K``) after seeding torch with
    the item's seed, so what an item draws depends on it alone, never on batching; vLLM:
    ``SamplingParams(n=K, seed=...)`` per prompt. Answers are cut at the first stop string.
    """
    if temperature <= 0:
        raise ValueError("sampling needs a temperature above 0")
    texts = [_render(tok, p, chat_template) for p in prompts]
    if isinstance(model, VllmModel):
        from vllm import SamplingParams

        params = [SamplingParams(n=k, seed=s, temperature=temperature, top_p=top_p, max_tokens=max_new_tokens)
                  for s in seeds]
        outputs = model.llm.generate(texts, params, use_tqdm=False)
        if on_batch:
            on_batch(len(texts), len(texts))
        return [[_cut(o.text, stop) for o in out.outputs] for out in outputs]
    import torch

    device = next(model.parameters()).device
    out: list[list[str]] = []
    with torch.inference_mode():
        for i, (text, seed) in enumerate(zip(texts, seeds, strict=True)):
            torch.manual_seed(seed)
            enc = tok([text], return_tensors="pt").to(device)
            gen = model.generate(**enc, max_new_tokens=max_new_tokens, do_sample=True, temperature=temperature,
                                 top_p=top_p, top_k=0, num_return_sequences=k, pad_token_id=tok.pad_token_id,
                                 use_cache=True)
            new = gen[:, enc["input_ids"].shape[1]:]
            out.append([_cut(t, stop) for t in tok.batch_decode(new, skip_special_tokens=True)])
            if on_batch:
                on_batch(i + 1, len(texts))
    return out


def _length_order(texts: Sequence[str]) -> list[int]:
    """The order :func:`generate` batches in: longest first (stable, so ties keep their order)."""
    return sorted(range(len(texts)), key=lambda i: len(texts[i]), reverse=True)


def batches(tok: Any, prompts: Sequence[str | list[dict[str, str]]], *, batch_size: int,
            chat_template: bool = False) -> list[list[int]]:
    """The prompts' indices in the batches :func:`generate` makes of them: a shard of whole
    batches, handed to :func:`generate` in this order, pads and generates exactly as they do
    here (``monte eval --processes``)."""
    order = _length_order([_render(tok, p, chat_template) for p in prompts])
    return [order[i:i + batch_size] for i in range(0, len(order), batch_size)]


def _render(tok: Any, prompt: str | list[dict[str, str]], chat_template: bool) -> str:
    """A text prompt as given (or as one user turn of the chat template); a chat (a NeMo Gym
    row's messages) always through the model's chat template."""
    if isinstance(prompt, str):
        if not chat_template:
            return prompt
        prompt = [{"role": "user", "content": prompt}]
    if not getattr(tok, "chat_template", None):
        raise error("E_REFUSED", "this environment's prompts are chat messages (NeMo Gym rows), and the model's "
                    "tokenizer has no chat template to render them", "evaluate a model whose tokenizer has a chat "
                    "template (a chat or instruct model; `monte model init` models have one)")
    return str(tok.apply_chat_template(prompt, tokenize=False, add_generation_prompt=True))


def _generate_vllm(model: VllmModel, texts: list[str], *, max_new_tokens: int, temperature: float, top_p: float,
                   stop: Sequence[str], on_batch: Callable[[int, int], None] | None) -> list[str]:
    """The same answers through vLLM's continuous batching: greedy unless a temperature is set;
    stop strings are applied by :func:`_cut`, as for transformers, so both cut alike."""
    from vllm import SamplingParams

    params = SamplingParams(temperature=temperature, top_p=top_p if temperature > 0 else 1.0,
                            max_tokens=max_new_tokens)
    outputs = model.llm.generate(texts, params, use_tqdm=False)
    out = [_cut(o.outputs[0].text, stop) for o in outputs]
    if on_batch:
        on_batch(len(texts), len(texts))
    return out


def _cut(text: str, stop: Sequence[str]) -> str:
    for s in stop:
        # a leading stop (the model's first token is a newline) would empty every answer
        pos = text.find(s, 1 if text.startswith(s) else 0)
        if pos >= 0:
            text = text[:pos]
    return text
