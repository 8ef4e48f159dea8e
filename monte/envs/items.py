"""An exam is its items: the normalised text of an item, its key, an exam's key and sketch, and the
leak matcher that finds a sealed item inside training rows.

Everything here compares *normalised* text (:func:`normalize_text`): Unicode NFKC, case folded,
format characters (category Cf: zero-width space and joiners, the byte-order mark, soft hyphens)
removed, one space around every punctuation mark and symbol, and runs of whitespace made one
space. ``"P 48213 ="``, ``"p 48213="`` and ``"p 48213 =\\u200b"`` are one text.

- :func:`item_text`: what an item asks (a catalog item's ``prompt``, the chat of a NeMo Gym row
  or of a ``messages`` row, without the assistant's turns);
- :func:`item_key`: the sha256 of its normalised text (16 hex digits), or for an lm-eval item
  its document: an item's identity for the seal, whatever its id, its place in the file, its
  rendered prompt (template, few-shot context) or its metadata;
- :func:`exam_key`: the sha256 of the *set* of its items' keys: a split's identity for the seal,
  the same in any order, under any file or environment name; :func:`exam_sketch` is what a test
  read records: that key and every item key, exactly, so that the seal can count the items a
  split shares with a sealed one (``monte.ledger.seal.shared``);
- :class:`LeakIndex`: the sealed items, to find in training rows (``E_LEAK``), see its docstring.

Other exam formats (an lm-eval task's documents, a plain JSONL file) make their documents into
items (a dict with ``prompt``, or ``messages``) and call these; nothing here imports more than the
standard library and the shape of a NeMo Gym row.
"""

from __future__ import annotations

import hashlib
import json
import unicodedata
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from monte.envs.nemo.rows import is_gym_row, messages
from monte.ledger.exam_ids import EXAM_ID_VERSION, pack_keys

#: how many item keys a test read recorded of its split before version 2 (the smallest: a bottom-k
#: sketch, which a split steered with added items of smaller keys could empty of shared ones)
SKETCH = 64

#: a leak by n-gram containment: this share of a sealed item's own n-grams, and of all its n-grams,
#: found in one row (a half flagged templated questions that share a clause: see LeakIndex)
NGRAM = 8
CONTAINMENT = 0.75
#: tokens that join a sealed text to what precedes it into one longer expression: a sealed
#: ``7 - 3 =`` inside an honest ``12 + 7 - 3 =`` is another question, not a leak
_JOINING = set("+-*/^(=<>%×÷|&~")


def normalize_text(text: str) -> str:
    """``text`` normalised for comparison: NFKC, case folded, format characters dropped, one
    space around each punctuation mark or symbol, whitespace runs made one space, trimmed."""
    s = unicodedata.normalize("NFKC", unicodedata.normalize("NFKC", str(text)).casefold())
    out: list[str] = []
    for ch in s:
        cat = unicodedata.category(ch)
        if cat == "Cf":
            continue
        if cat[0] in "PS":
            out.append(f" {ch} ")
        elif cat[0] in "CZ" or ch.isspace():  # controls, separators, whitespace: a break
            out.append(" ")
        else:
            out.append(ch)
    return " ".join("".join(out).split())


def tokens(text: str) -> list[str]:
    """The normalised text's tokens: words and numbers, and each punctuation mark on its own."""
    n = normalize_text(text)
    return n.split(" ") if n else []


def _chat_text(chat: Iterable[Mapping[str, Any]]) -> str:
    return "\n".join(str(m.get("content") or "") for m in chat if m.get("role") != "assistant")


def item_text(item: Mapping[str, Any]) -> str:
    """What an item asks, as one string: a catalog item's ``prompt``; a NeMo Gym row's chat or a
    ``messages`` row's, without the assistant's turns (role names left out)."""
    if is_gym_row(dict(item)):
        return _chat_text(messages(dict(item)))
    prompt = item.get("prompt")
    if isinstance(prompt, list):
        return _chat_text(m for m in prompt if isinstance(m, Mapping))
    if prompt is not None:
        return str(prompt)
    if isinstance(item.get("messages"), list):
        return _chat_text(m for m in item["messages"] if isinstance(m, Mapping))
    rest = {k: v for k, v in item.items() if k != "id"}
    return json.dumps(rest, sort_keys=True, ensure_ascii=False)


def item_key(item: Mapping[str, Any]) -> str:
    """An item's identity for the seal (16 hex digits). An lm-eval document (a frozen item that
    records lm-eval's ``doc_hash``) is its *document*: the template, the few-shot context and
    ``num_fewshot`` render other prompts of the same document, one content (the document holds
    its answer; a target is what a template makes of it). Any other item is the sha256 of its
    normalised :func:`item_text`."""
    lm = item.get("lm_eval")
    if isinstance(lm, Mapping) and isinstance(lm.get("doc_hash"), str) and lm["doc_hash"]:
        return hashlib.sha256(f"lm-eval document\0{lm['doc_hash']}".encode()).hexdigest()[:16]
    return hashlib.sha256(normalize_text(item_text(item)).encode()).hexdigest()[:16]


def item_keys(items: Iterable[Mapping[str, Any]]) -> list[str]:
    """The distinct keys of ``items``, sorted."""
    return sorted({item_key(i) for i in items})


def exam_key(items: Iterable[Mapping[str, Any]]) -> str:
    """A split's identity for the seal: the sha256 of the set of its items' keys (order, file
    name, ids and the environment's name do not count; a repeated item counts once)."""
    return hashlib.sha256("\n".join(item_keys(items)).encode()).hexdigest()[:16]


def exam_sketch(items: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """What a test read records of its split: ``v`` (:data:`EXAM_ID_VERSION`), ``key``
    (:func:`exam_key`), ``items`` (how many distinct items) and ``keys``, every item key
    (``monte.ledger.exam_ids.pack_keys``): the exact set, so that no choice of added items can hide a shared one
    (a read recorded before version 2 kept only the :data:`SKETCH` smallest keys, ``sketch``)."""
    keys = item_keys(items)
    return {"v": EXAM_ID_VERSION, "key": hashlib.sha256("\n".join(keys).encode()).hexdigest()[:16],
            "items": len(keys), "keys": pack_keys(keys)}


def read_items(path: str) -> list[dict[str, Any]]:
    """The items of a frozen split file (JSON lines)."""
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


# --- leaks ---------------------------------------------------------------------------------------


def row_segments(row: Any) -> Iterator[str]:
    """Every string a training row holds, whatever its column or message: each value of each
    column, each message's content (a content-parts list's text too), numbers included."""
    if isinstance(row, str):
        yield row
    elif isinstance(row, Mapping):
        for v in row.values():
            yield from row_segments(v)
    elif isinstance(row, list):
        for v in row:
            yield from row_segments(v)
    elif isinstance(row, (int, float)) and not isinstance(row, bool):
        yield str(row)


@dataclass
class LeakIndex:
    """Sealed texts, to find in training rows after normalisation. A row leaks a sealed text when

    - the text's tokens occur in one of the row's strings (any column, any message) as a
      contiguous run, not continuing an expression on its left (a token of :data:`_JOINING` or a
      number just before it: ``7 - 3 =`` inside ``12 + 7 - 3 =`` is another question), or
    - at least :data:`CONTAINMENT` of the text's own :data:`NGRAM`-grams (those no other sealed
      text shares: a template common to the exam's items is not the item) occur in the row's
      strings, and at least :data:`CONTAINMENT` of all its n-grams too: substantial overlap, an
      edited copy. (Both: an item of a templated exam has few own n-grams, and an honest row of
      the same template that happens to share a clause, as two syllogisms with one conclusion,
      holds half of those few but not half of the item.)

    Equality is the first case; a sealed prompt with a character appended, a zero-width space,
    another spacing of its punctuation, or moved to the output column is still found, and (issue
    42's planted leaks) a sealed text of :data:`INSERTED_MIN` tokens or more with one word
    inserted inside it (``5 - the 3 =``). An expression padded with a neutral term
    (``45 + 67 + 0 =``) is not found: the catalog's own curricula ask such questions honestly
    (chain_sum's ``6 - 0 + 5 =`` beside a test item ``6 + 5 =``, 127 rows), and a check that
    refused them would refuse the catalog's curricula."""

    texts: dict[str, list[str]] = field(default_factory=dict)  # label -> tokens
    _starts: dict[str, dict[tuple[str, ...], list[str]]] = field(default_factory=dict)
    _grams: dict[tuple[str, ...], str] = field(default_factory=dict)  # own n-gram -> label
    _own: dict[str, int] = field(default_factory=dict)  # label -> how many own n-grams
    _every: dict[str, set[tuple[str, ...]]] = field(default_factory=dict)  # label -> all its n-grams
    _whole: dict[tuple[str, ...], list[str]] = field(default_factory=dict)  # tokens -> labels
    _lengths: set[int] = field(default_factory=set)  # their lengths

    @classmethod
    def build(cls, texts: Mapping[str, str]) -> LeakIndex:
        idx = cls()
        shared: set[tuple[str, ...]] = set()
        for label, text in texts.items():
            toks = tokens(text)
            if not toks:
                continue
            idx.texts[label] = toks
            idx._whole.setdefault(tuple(toks), []).append(label)
            idx._lengths.add(len(toks))
            head = tuple(toks[:3])
            idx._starts.setdefault(str(len(head)), {}).setdefault(head, []).append(label)
            grams = {tuple(toks[i:i + NGRAM]) for i in range(len(toks) - NGRAM + 1)}
            idx._every[label] = grams
            for g in grams:
                if g in shared:
                    continue
                if g in idx._grams and idx._grams[g] != label:
                    shared.add(g)
                    del idx._grams[g]
                else:
                    idx._grams[g] = label
        for label in idx._grams.values():
            idx._own[label] = idx._own.get(label, 0) + 1
        return idx

    def find(self, row: Any) -> set[str]:
        """The labels of the sealed texts ``row`` leaks."""
        found: set[str] = set()
        hits: dict[str, set[tuple[str, ...]]] = {}
        seen: set[tuple[str, ...]] = set()  # every n-gram of the row, any segment
        for seg in row_segments(row):
            toks = tokens(seg)
            for i in range(len(toks)):
                for k, starts in self._starts.items():
                    head = tuple(toks[i:i + int(k)])
                    for label in starts.get(head, ()):
                        t = self.texts[label]
                        if toks[i:i + len(t)] == t and not (i and _joins(toks[i - 1])):
                            found.add(label)
            found |= self._inserted(toks)
            if self._grams:
                for j in range(len(toks) - NGRAM + 1):
                    g = tuple(toks[j:j + NGRAM])
                    seen.add(g)
                    owner = self._grams.get(g)
                    if owner is not None:
                        hits.setdefault(owner, set()).add(g)
        for label, grams in hits.items():  # (a text of one own n-gram is the substring case)
            if self._own[label] > 1 and len(grams) >= CONTAINMENT * self._own[label] and \
                    len(self._every[label] & seen) >= CONTAINMENT * len(self._every[label]):
                found.add(label)
        return found


    def _inserted(self, toks: list[str]) -> set[str]:
        """The sealed texts of at least :data:`INSERTED_MIN` tokens found in a row's tokens with
        one token inserted inside them (``5 - the 3 =``; an inserted operator or number makes
        another expression, ``8 - - 6 =``): each window one token longer than a sealed text, less
        one of its inner tokens, looked up whole."""
        found: set[str] = set()
        for n in self._lengths:
            if n < INSERTED_MIN:
                continue
            w = n + 1
            for i in range(len(toks) - w + 1):
                if i and _joins(toks[i - 1]):
                    continue
                window = toks[i:i + w]
                for j in range(1, w - 1):
                    if not _joins(window[j]):
                        found.update(self._whole.get(tuple(window[:j] + window[j + 1:]), ()))
        return found


#: a sealed text this long or longer is still found with one token inserted inside it
INSERTED_MIN = 3
def _joins(tok: str) -> bool:
    return tok in _JOINING or tok.isdigit()
