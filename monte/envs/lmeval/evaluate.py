"""Grading a frozen lm-eval exam with lm-eval's own code, generating with monte's engine.

:class:`Prepared` proves the frozen closure and data files by sha256 and builds the frozen task;
building its requests renders every prompt, and lm-eval's ``doc_hash``/``prompt_hash``/
``target_hash`` of each document must equal those recorded at the freeze (``E_INTEGRITY``
otherwise: a later lm-eval that renders the template or picks the few-shot examples differently,
or a changed target, is another exam). All of that runs before the eval's touch is spent.

:meth:`Prepared.run` hands :class:`MonteLM` to ``lm_eval.simple_evaluate``: lm-eval builds the
requests, monte's loaded model answers them (``generate_until`` through
:func:`monte.models.generate.generate`, the same path as every eval; ``loglikelihood`` by one
forward pass of the same model, tokenised by lm-eval's own ``TemplateLM``), and lm-eval's filters,
``process_results`` and metrics score each document. Its logged samples are proven against the
freeze's hashes once more, and each document's metric becomes one ``tasks.jsonl`` entry.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, cast

from monte.envs.answers import answer_fields
from monte.envs.lmeval import freeze
from monte.envs.lmeval.imports import check_distributions, frozen_imports
from monte.errors import error
from monte.hashing import sha256_bytes
from monte.ledger.predicates import SEALED, is_sealed

HASHES = ("doc_hash", "prompt_hash", "target_hash")
#: generates answers for prompts under generation settings (``--processes N``'s shards)
Generator = Callable[[list[str], dict[str, Any]], list[str]]


def _drift(spec: dict[str, Any], doc_id: int, which: str) -> Exception:
    what = {"doc_hash": "its document", "prompt_hash": "its rendered prompt (template or few-shot examples)",
            "target_hash": "its target"}[which]
    return error("E_INTEGRITY", f"lm-eval task {spec['task']!r}, document {doc_id}: {what} is not the one frozen "
                 f"({which} differs; frozen with lm-eval {spec.get('lm_eval')})",
                 f"install lm-eval=={spec.get('lm_eval')} as frozen; a task that renders differently is another exam: "
                 "freeze it again (`monte env add`) and start a new experiment on it")


class Prepared:
    """One exam split of a frozen lm-eval task, proven and built (no model yet)."""

    def __init__(self, spec: dict[str, Any], folder: Path, split: str, items: list[dict[str, Any]], *,
                 graded_elsewhere: bool = False) -> None:
        """``graded_elsewhere``: a grader is pinned, so the task's test documents may be in its
        custody instead of here. A dev eval then proves every other file; their proof is the
        grader's word (the content and count it holds, checked when the experiment was frozen),
        and the eval says so in its event file. A test eval always needs them (it runs where
        they are: on the grader)."""
        self.spec, self.folder, self.split, self.items = spec, folder, split, items
        #: what lm-eval said (its warnings), kept off the terminal for the run's event file
        self.said: list[str] = []
        docs = (spec.get("data") or {}).get(SEALED)
        for rel, digest in sorted(spec["files"].items()):
            path = folder / rel
            if graded_elsewhere and not is_sealed(split) and rel == docs and not path.exists():
                self.said.append(f"monte: {rel} (the test documents, sha256 {digest}) is in the grader's custody, "
                                 f"not on this data root: a {split} eval never reads it")
                continue
            try:
                raw = path.read_bytes()
            except OSError:
                raise error("E_NOT_FOUND", f"the frozen lm-eval file {path} is missing",
                            "restore it with `monte env install ENV`") from None
            if sha256_bytes(raw) != digest:
                raise error("E_INTEGRITY", f"{path} does not match the sha256 frozen with the environment",
                            "restore it with `monte env install ENV`; never edit a frozen task")
        check_distributions(spec["task"], dict(spec.get("distributions") or {}))
        self.imports = freeze.imports_of(spec, folder)
        #: how lm-eval renders each prompt for the model (frozen with the exam)
        self.chat: dict[str, Any] = {"apply_chat_template": False, "fewshot_as_multiturn": False,
                                     "system_instruction": None, **(spec.get("chat") or {})}
        with self.frozen():
            # a part of a split whose few-shot examples are drawn replays the whole split's draws
            self.task = freeze.replayed(freeze.build(freeze.eval_config(spec, folder, split)),
                                        (spec.get("positions") or {}).get(split))
            rendered = freeze.requests_of(self.task, int(spec["fewshot_seed"]), self.chat["system_instruction"])
        self.check({r["doc_id"]: r for r in rendered})

    @contextmanager
    def frozen(self) -> Iterator[None]:
        """The task's frozen modules imported, and a module it still cannot find refused by name."""
        said: list[str] = []
        try:
            with frozen_imports(*self.imports), freeze.captured() as said:
                try:
                    yield
                except ModuleNotFoundError as e:
                    raise error("E_NOT_FOUND", f"lm-eval task {self.spec['task']!r} imports {e.name}, which is "
                                "neither frozen with it nor installed here", f"install {e.name}, or freeze the task "
                                "again where it imports (`monte env add`) and start a new experiment on it") from None
        finally:
            self.said.extend(said)  # filled as the capture ends

    def check(self, got: dict[int, dict[str, Any]], which: tuple[str, ...] = HASHES) -> None:
        """Every item's hashes (``which``) against what lm-eval gives now."""
        for item in self.items:
            doc_id = int(item["doc_id"])
            now = got.get(doc_id)
            if now is None:
                raise error("E_INTEGRITY", f"lm-eval task {self.spec['task']!r} has no document {doc_id} of "
                            f"{self.split} now", "restore the environment with `monte env install ENV`")
            for h in which:
                if now[h] != item["lm_eval"][h]:
                    raise _drift(self.spec, doc_id, h)

    def run(self, model: Any, tok: Any, *, batch_size: int = 32,
            on_progress: Callable[[int, int], None] | None = None,
            generate_with: Generator | None = None) -> list[dict[str, Any]]:
        """lm-eval's evaluation of these items with ``model``; one ``tasks.jsonl`` entry a document.
        ``generate_with(prompts, settings)`` generates instead of ``model`` (``--processes N``'s
        shards, which take whole batches of the order one process makes: the same answers)."""
        from lm_eval import simple_evaluate

        freeze.quiet()
        lm = MonteLM(model, tok, batch_size=batch_size, on_progress=on_progress, generate_with=generate_with)
        n = len(self.items)
        with self.frozen():
                result = simple_evaluate(model=lm, tasks=[self.task], task_manager=freeze.task_manager(None, False),
                                     log_samples=True, bootstrap_iters=0, limit=n if n < self.total else None,
                                     fewshot_random_seed=int(self.spec["fewshot_seed"]), **self.chat)
        assert result is not None
        samples = [s for s in result["samples"][self.spec["task"]] if s["filter"] == self.spec["filter"]]
        # under a chat template the prompt is the model's rendering of the one proven above
        self.check({int(s["doc_id"]): s for s in samples},
                   HASHES if not self.chat["apply_chat_template"] else ("doc_hash", "target_hash"))
        by_doc = {int(s["doc_id"]): s for s in samples}
        out = []
        for item in self.items:
            s = by_doc[int(item["doc_id"])]
            score = _number(s.get(self.spec["metric"]))
            if score is None:
                raise error("E_REFUSED", f"lm-eval task {self.spec['task']!r}: its metric {self.spec['metric']!r} "
                            f"gave document {item['doc_id']} no number", "score the task with a per-document metric")
            metrics = {m: v for m in self.spec["metrics"] if (v := _number(s.get(m))) is not None}
            out.append({"id": item["id"], "doc_id": int(item["doc_id"]), "score": score, "metrics": metrics,
                        **answer_fields(answer_of(item, s["filtered_resps"]))})
        return out

    @property
    def total(self) -> int:
        return len(self.task.eval_docs)


def answer_of(item: dict[str, Any], filtered: list[Any]) -> str:
    """What the model answered: its (filtered) text, or for a choice task the choice of highest
    loglikelihood."""
    if item.get("choices") and filtered and all(isinstance(r, (list, tuple)) and r for r in filtered):
        lls = [float(r[0]) for r in filtered]
        return str(item["choices"][lls.index(max(lls))])
    resp = filtered[0] if filtered else ""
    return resp if isinstance(resp, str) else json.dumps(resp, default=str)


def _number(v: Any) -> float | None:
    if isinstance(v, bool):
        return float(v)
    try:
        x = float(v)
    except (TypeError, ValueError):
        return None
    return x if math.isfinite(x) else None


def _lm_base() -> type:
    from lm_eval.api.model import TemplateLM

    return cast(type, TemplateLM)


class MonteLM(_lm_base()):  # type: ignore[misc]
    """lm-eval's ``LM`` over monte's loaded model and tokenizer (``monte.models.generate.load``)."""

    backend = "causal"

    def __init__(self, model: Any, tok: Any, *, batch_size: int = 32,
                 on_progress: Callable[[int, int], None] | None = None,
                 generate_with: Generator | None = None) -> None:
        super().__init__()
        self.model, self.tokenizer = model, tok
        self._batch = max(1, int(batch_size))
        self.on_progress = on_progress
        self.generate_with = generate_with

    @property
    def tokenizer_name(self) -> str:
        return str(getattr(self.tokenizer, "name_or_path", "") or "").replace("/", "__")

    def apply_chat_template(self, chat_history: list[dict[str, str]], add_generation_prompt: bool = True) -> str:
        """The chat rendered by the model's tokenizer exactly as lm-eval's ``HFLM`` renders it (a
        template that refuses a system turn is retried without it, as there)."""
        import jinja2

        def render(history: list[dict[str, str]]) -> str:
            return str(self.tokenizer.apply_chat_template(history, tokenize=False,
                                                          add_generation_prompt=add_generation_prompt,
                                                          continue_final_message=not add_generation_prompt))

        try:
            return render(chat_history)
        except jinja2.exceptions.TemplateError:
            return render([m for m in chat_history if m["role"] != "system"])

    @property
    def eot_token_id(self) -> int:
        return int(self.tokenizer.eos_token_id)

    @property
    def prefix_token_id(self) -> int:
        bos = self.tokenizer.bos_token_id
        return int(bos) if bos is not None else self.eot_token_id

    @property
    def max_length(self) -> int:
        from lm_eval.models.utils import resolve_max_length

        return int(resolve_max_length(self._hf().config, self.tokenizer, default=2048))

    def _hf(self) -> Any:
        from monte.models.generate import VllmModel

        if isinstance(self.model, VllmModel):
            raise error("E_REFUSED", "a loglikelihood (multiple_choice) lm-eval task needs the transformers backend",
                        "run the eval with MONTE_EVAL_BACKEND=hf")
        return self.model

    def tok_encode(self, string: str, add_special_tokens: bool | None = None, **kwargs: Any) -> list[int]:
        extra = {} if add_special_tokens is None else {"add_special_tokens": add_special_tokens}
        return list(self.tokenizer.encode(string, **extra))

    def _loglikelihood_tokens(self, requests: list[Any], disable_tqdm: bool = False,
                              **kwargs: Any) -> list[tuple[float, bool]]:
        """Each continuation's summed log-probability and whether greedy decoding gives it: one
        forward pass of the context and continuation, left-truncated to the model's length, as
        lm-eval's own ``HFLM`` scores it."""
        import torch

        model = self._hf()
        device = next(model.parameters()).device
        limit = self.max_length
        out: list[tuple[float, bool]] = []
        order = sorted(range(len(requests)), key=lambda i: -len(requests[i][1]) - len(requests[i][2]))
        results: dict[int, tuple[float, bool]] = {}
        with torch.inference_mode():
            for start in range(0, len(order), self._batch):
                idx = order[start:start + self._batch]
                seqs = [(requests[i][1] + requests[i][2])[-(limit + 1):][:-1] for i in idx]
                width = max(len(s) for s in seqs)
                ids = torch.zeros((len(seqs), width), dtype=torch.long)
                mask = torch.zeros((len(seqs), width), dtype=torch.long)
                for row, s in enumerate(seqs):
                    ids[row, :len(s)] = torch.tensor(s)
                    mask[row, :len(s)] = 1
                logits = model(input_ids=ids.to(device), attention_mask=mask.to(device)).logits
                logp = torch.log_softmax(logits.float(), dim=-1).cpu()
                for row, i in enumerate(idx):
                    cont = requests[i][2]
                    inplen = len(seqs[row])
                    lp = logp[row, inplen - len(cont):inplen]
                    want = torch.tensor(cont, dtype=torch.long)
                    greedy = bool((lp.argmax(dim=-1) == want).all())
                    results[i] = (float(lp.gather(1, want.unsqueeze(-1)).sum()), greedy)
                if self.on_progress:
                    self.on_progress(len(results), len(requests))
        out = [results[i] for i in range(len(requests))]
        return out

    def loglikelihood_rolling(self, requests: list[Any], disable_tqdm: bool = False) -> list[float]:
        raise error("E_REFUSED", "loglikelihood_rolling (perplexity) is corpus-level: monte does not grade it",
                    "freeze a generate_until, multiple_choice or loglikelihood task")

    def generate_until(self, requests: list[Any], disable_tqdm: bool = False) -> list[str]:
        """lm-eval's greedy-until requests, generated by :func:`monte.models.generate.generate` and cut
        at lm-eval's stop sequences (the end-of-text token's among them) as ``HFLM`` cuts them."""
        from lm_eval.models.utils import (
            handle_stop_sequences,
            normalize_gen_kwargs,
            postprocess_generated_text,
        )

        from monte.models import generate as gen

        eos = self.tokenizer.decode(self.eot_token_id, skip_special_tokens=False)
        groups: dict[str, list[int]] = {}
        for i, r in enumerate(requests):
            groups.setdefault(json.dumps(r.args[1], sort_keys=True, default=str), []).append(i)
        out: list[str] = [""] * len(requests)
        done = 0
        for idx in groups.values():
            kwargs = normalize_gen_kwargs(dict(requests[idx[0]].args[1]), 256)
            until = handle_stop_sequences(kwargs.pop("until", None), eos=eos)
            sample = bool(kwargs.get("do_sample"))
            settings: dict[str, Any] = {"max_new_tokens": int(kwargs["max_gen_toks"]), "batch_size": self._batch,
                                        "temperature": float(kwargs.get("temperature") or 0.0) if sample else 0.0,
                                        "top_p": float(kwargs.get("top_p") or 1.0), "stop": [],
                                        "chat_template": False}
            prompts = [requests[i].args[0] for i in idx]
            answers = (self.generate_with(prompts, settings) if self.generate_with is not None else
                       gen.generate(self.model, self.tokenizer, prompts, **settings))
            for i, a in zip(idx, answers, strict=True):
                out[i] = postprocess_generated_text(a, stop=until, think_end_token=None)
            done += len(idx)
            if self.on_progress:
                self.on_progress(done, len(requests))
        return out
