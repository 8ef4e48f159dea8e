"""A model's behaviour, as one small record: its next-token scores on a fixed probe set.

The weights identity and sketch (``monte.models.identity``) know a model by its bytes; a copy
that computes the same function with other bytes (units and heads permuted, noise added, merged
with another model, retyped) is another model to them. The behaviour is the same, so monte also
keeps a **behavioural fingerprint** of every base and checkpoint it records, and compares a
candidate base's with them.

- The probes (:func:`probes`): :data:`N_PROBES` fixed texts, the same for every model and every
  exam (so that any two fingerprints compare): a third seeded plain English, a third in the
  catalog's numeric form (``p 48213 =``), a third seeded arithmetic (``12 + 7 - 3 =``).
  What a model answers next after each probe is what it has learned, whatever the task.
- The record (:func:`fingerprint`): one forward pass over the probes (one batch); at the last
  position of each probe, the model's log-probabilities at :data:`IDS` token ids seeded from
  the vocabulary size (every id of a vocabulary that small), centred (their mean subtracted),
  as float16; with the tokenizer's identity (the ids it gives the probes), so that only models
  of one tokenizer compare (a different tokenizer is a different base: the same text is other
  ids to it).
- The distance (:func:`distance`): the root mean square of the difference of two records'
  centred log-probabilities over their mean square norm, ``||a - b|| / sqrt((||a||^2 + ||b||^2)/2)``:
  0 for the same function, about 1.4 for two unrelated models (their scores are uncorrelated),
  whatever the scale of either's logits. A candidate within :data:`THRESHOLD` of a recorded
  model behaves as that model; the threshold and the corpus it was measured on are in
  docs/reliability.md (``bench/fingerprint_corpus.py``).
"""

from __future__ import annotations

import base64
import hashlib
import json
import math
import random
import struct
from pathlib import Path
from typing import Any

FINGERPRINT_VERSION = 1
N_PROBES = 48
IDS = 512
#: a candidate within this distance of a recorded model behaves as it (docs/reliability.md)
THRESHOLD = 0.3

_WORDS = ("the river runs past an old stone mill where children count the boats each morning while "
          "a baker sells warm bread to travellers who ask about the weather and the road ahead of them "
          "before the bells ring across the quiet valley and the market opens under grey clouds").split()


def probes() -> list[str]:
    """The fixed probe texts (seeded: the same on every machine and for every model)."""
    rng = random.Random("monte-fingerprint-v1")
    out: list[str] = []
    for _ in range(N_PROBES // 3):
        start = rng.randrange(len(_WORDS) - 8)
        out.append(" ".join(_WORDS[start:start + rng.randint(4, 8)]))
    for _ in range(N_PROBES // 3):
        out.append(f"p {rng.randint(10_000, 99_999)} =")
    for _ in range(N_PROBES - 2 * (N_PROBES // 3)):
        a, b, c = rng.randint(1, 99), rng.randint(1, 99), rng.randint(1, 9)
        out.append(f"{a} {rng.choice('+-')} {b} {rng.choice('+-')} {c} =")
    return out


def probe_ids(vocab: int) -> list[int]:
    """The token ids whose scores are kept: every id of a small vocabulary, else :data:`IDS`
    seeded from its size (the same for any two models of one vocabulary)."""
    if vocab <= IDS:
        return list(range(vocab))
    return sorted(random.Random(f"monte-fingerprint-ids-v1:{vocab}").sample(range(vocab), IDS))


def _pack(values: list[float]) -> str:
    return base64.urlsafe_b64encode(b"".join(struct.pack("<e", max(-65504.0, min(65504.0, v))) for v in values)).decode()


def _unpack(raw: str) -> list[float]:
    return [v for (v,) in struct.iter_unpack("<e", base64.urlsafe_b64decode(raw))]


def of_model(model: Any, tok: Any) -> dict[str, Any]:
    """The fingerprint of a loaded model (transformers) and its tokenizer. The tokenizer is known
    by what it does to the probes (the ids of each, hashed): two tokenizers that agree on them
    compare, whatever their files' bytes (a ``save_pretrained`` round trip rewrites those)."""
    import torch

    texts = probes()
    enc = [list(tok(t, add_special_tokens=False)["input_ids"]) or [0] for t in texts]
    tokenizer = hashlib.sha256(json.dumps(enc, separators=(",", ":")).encode()).hexdigest()[:16]
    width = max(len(e) for e in enc)
    pad = tok.pad_token_id if tok.pad_token_id is not None else 0
    ids = torch.tensor([[pad] * (width - len(e)) + list(e) for e in enc])  # left padding: the last is real
    mask = torch.tensor([[0] * (width - len(e)) + [1] * len(e) for e in enc])
    with torch.no_grad():
        logits = model(input_ids=ids, attention_mask=mask).logits[:, -1, :].float()
    logp = torch.log_softmax(logits, dim=-1)
    vocab = int(logp.shape[-1])
    keep = torch.tensor(probe_ids(vocab))
    rows = logp[:, keep]
    rows = rows - rows.mean(dim=-1, keepdim=True)
    return {"v": FINGERPRINT_VERSION, "tokenizer": tokenizer, "vocab": vocab, "probes": len(texts),
            "scores": _pack([float(x) for x in rows.flatten().tolist()])}


def fingerprint(folder: Path) -> dict[str, Any]:
    """Load the model folder (transformers, float32 on CPU: the same numbers on every machine,
    whatever serves its evals) and take its fingerprint (:func:`of_model`)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    folder = Path(folder)
    tok = AutoTokenizer.from_pretrained(str(folder))
    model = AutoModelForCausalLM.from_pretrained(str(folder), dtype=torch.float32).eval()
    return of_model(model, tok)


def comparable(a: dict[str, Any], b: dict[str, Any]) -> bool:
    """Two fingerprints of one version, tokenizer, vocabulary and probe set."""
    return all(a.get(k) == b.get(k) for k in ("v", "tokenizer", "vocab", "probes")) and a.get("v") == FINGERPRINT_VERSION


def distance(a: dict[str, Any], b: dict[str, Any]) -> float | None:
    """How far two models behave apart (see the module docstring); None when they do not compare
    (another tokenizer, vocabulary or version: another base)."""
    if not comparable(a, b):
        return None
    try:
        x, y = _unpack(a["scores"]), _unpack(b["scores"])
    except (KeyError, TypeError, ValueError, struct.error):
        return None
    if len(x) != len(y) or not x:
        return None
    diff = sum((p - q) ** 2 for p, q in zip(x, y, strict=True))
    norm = (sum(p * p for p in x) + sum(q * q for q in y)) / 2
    if norm == 0:
        return 0.0 if diff == 0 else math.inf
    return math.sqrt(diff / norm)
