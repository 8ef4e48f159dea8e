"""Eval through vLLM on a box that has it. vLLM needs a GPU and cannot be installed here, so the
one test of that path stands a recording stand-in for the ``vllm`` module (the narrow boundary:
``LLM.generate`` and ``SamplingParams``); everything else is monte's own code."""

from __future__ import annotations

import sys
import types
from typing import Any

import pytest

from monte.models import generate as gen


def test_no_vllm_or_no_gpu_means_transformers(monkeypatch: pytest.MonkeyPatch) -> None:
    assert gen.backend() == "hf"  # this machine: no vLLM, no GPU
    monkeypatch.setenv("MONTE_EVAL_BACKEND", "hf")
    assert gen.backend() == "hf"


def test_the_vllm_path_is_greedy_and_cuts_at_stop_strings(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: dict[str, Any] = {}

    class SamplingParams:
        def __init__(self, **kw: Any) -> None:
            seen["params"] = kw

    class Out:
        def __init__(self, text: str) -> None:
            self.outputs = [types.SimpleNamespace(text=text)]

    class LLM:
        def generate(self, texts: list[str], params: Any, use_tqdm: bool = True) -> list[Out]:
            seen["texts"] = texts
            return [Out(f"{t}-answer\nmore") for t in texts]

    monkeypatch.setitem(sys.modules, "vllm", types.SimpleNamespace(SamplingParams=SamplingParams, LLM=LLM))
    batches: list[tuple[int, int]] = []
    out = gen.generate(gen.VllmModel(LLM()), None, ["a", "b"], max_new_tokens=7, batch_size=4, stop=["\n"],
                       on_batch=lambda d, n: batches.append((d, n)))
    assert out == ["a-answer", "b-answer"]
    assert seen["params"] == {"temperature": 0.0, "top_p": 1.0, "max_tokens": 7}
    assert batches == [(2, 2)]
