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

import difflib
import hashlib
import json
import math
import unicodedata
from collections.abc import Callable, Iterable, Iterator, Mapping
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
    42's planted leaks):

    - a sealed text of :data:`INSERTED_MIN` tokens or more with one word inserted inside it
      (``5 - the 3 =``);
    - an expression padded with a neutral term (``45 + 67 + 0 =``, ``6 - 0 + 5 =`` beside a
      sealed ``6 + 5 =``): both sides are compared with their neutral terms dropped too
      (:func:`canonical_tokens`). The freeze keeps such rows out of a curriculum
      (``monte.envs.freeze.normalise``), so the catalog's own curricula do not trip it;
    - a sealed text of :data:`SIMILAR_MIN` tokens or more with some of its tokens replaced
      (a tenth of a long question's words): :meth:`_similar`."""

    texts: dict[str, list[str]] = field(default_factory=dict)  # label -> tokens
    _starts: dict[int, dict[tuple[str, ...], list[tuple[str, list[str]]]]] = field(default_factory=dict)
    _grams: dict[tuple[str, ...], str] = field(default_factory=dict)  # own n-gram -> label
    _own: dict[str, int] = field(default_factory=dict)  # label -> how many own n-grams
    _every: dict[str, set[tuple[str, ...]]] = field(default_factory=dict)  # label -> all its n-grams
    _whole: dict[tuple[str, ...], list[str]] = field(default_factory=dict)  # tokens -> labels
    # the forms of INSERTED_MIN tokens or more by their first two tokens, and by their last two
    _heads: dict[tuple[str, ...], list[tuple[str, ...]]] = field(default_factory=dict)
    _tails: dict[tuple[str, ...], list[tuple[str, ...]]] = field(default_factory=dict)
    _rare: dict[tuple[str, ...], list[str]] = field(default_factory=dict)  # rare CUE-gram -> long texts
    _nrare: dict[str, int] = field(default_factory=dict)  # long text -> how many rare CUE-grams
    _weights: dict[str, list[float]] = field(default_factory=dict)  # long text -> each token's weight
    _expressions: set[str] = field(default_factory=set)  # long texts that are mostly numbers and operators

    @classmethod
    def build(cls, texts: Mapping[str, str]) -> LeakIndex:
        idx = cls()
        shared: set[tuple[str, ...]] = set()
        for label, text in texts.items():
            toks = tokens(text)
            if not toks:
                continue
            idx.texts[label] = toks
            canon = canonical_tokens(toks)
            # (a canonical form left with no binary operator, `4 =` of `4 + 0 =` or `- 9 =` of
            # `-9 / 1 =`, would be found in any row that ends `... ) - 9 =`: matched as written)
            expression = any(tok in _JOINING and tok not in "=(" and k and _operand(canon[k - 1])
                             for k, tok in enumerate(canon))
            for form in (toks, canon) if canon != toks and expression else (toks,):
                # a sealed text is found in either form: `6 + 5 + 0 =` asks `6 + 5 =`, and the reverse
                idx._whole.setdefault(tuple(form), []).append(label)
                head = tuple(form[:3])
                idx._starts.setdefault(len(head), {}).setdefault(head, []).append((label, form))
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
        for whole in idx._whole:
            if len(whole) >= INSERTED_MIN:
                idx._heads.setdefault(whole[:2], []).append(whole)
                idx._tails.setdefault(whole[-2:], []).append(whole)
        idx._index_long()
        return idx

    def _index_long(self) -> None:
        """The rare words and word weights of the sealed texts of :data:`SIMILAR_MIN` tokens or
        more (see :meth:`_similar`)."""
        long = {label: t for label, t in self.texts.items() if len(t) >= SIMILAR_MIN}
        df: dict[str, int] = {}
        for t in long.values():
            for w in {w for w in t if w.isalnum()}:
                df[w] = df.get(w, 0) + 1
        for label, t in long.items():
            # a word is worth what it tells this text from the others (its idf among them): the
            # template's words little, the item's own ones much
            weights = [math.log(len(long) / df[w]) if w.isalnum() else 0.0 for w in t]
            if not sum(weights):
                weights = [1.0 if w.isalnum() else 0.0 for w in t]
            self._weights[label] = weights
            if sum(1 for w in t if _joins(w)) * 2 >= len(t):  # numbers and operators: an expression
                self._expressions.add(label)
        gdf: dict[tuple[str, ...], int] = {}
        grams = {label: {tuple(t[i:i + CUE]) for i in range(len(t) - CUE + 1)} for label, t in long.items()}
        for gs in grams.values():
            for g in gs:
                gdf[g] = gdf.get(g, 0) + 1
        for label, gs in grams.items():
            rare = [g for g in gs if gdf[g] <= RARE]
            self._nrare[label] = len(rare)
            for g in rare:
                self._rare.setdefault(g, []).append(label)

    def find(self, row: Any) -> set[str]:
        """The labels of the sealed texts ``row`` leaks."""
        found: set[str] = set()
        hits: dict[str, set[tuple[str, ...]]] = {}
        seen: set[tuple[str, ...]] = set()  # every n-gram of the row, any segment
        for seg in row_segments(row):
            raw = tokens(seg)
            canon = canonical_tokens(raw)
            for toks in (raw, canon) if canon != raw else (raw,):
                for i in range(len(toks)):
                    for k, starts in self._starts.items():
                        head = tuple(toks[i:i + k])
                        for label, t in starts.get(head, ()):
                            if toks[i:i + len(t)] == t and not (i and _joins(toks[i - 1])):
                                found.add(label)
                found |= self._inserted(toks)
            found |= self._similar(raw)
            if self._grams:
                for j in range(len(raw) - NGRAM + 1):
                    g = tuple(raw[j:j + NGRAM])
                    seen.add(g)
                    owner = self._grams.get(g)
                    if owner is not None:
                        hits.setdefault(owner, set()).add(g)
        for label, grams in hits.items():  # (a text of one own n-gram is the substring case)
            if self._own[label] > 1 and len(grams) >= CONTAINMENT * self._own[label] and \
                    len(self._every[label] & seen) >= CONTAINMENT * len(self._every[label]):
                found.add(label)
        return found

    def _similar(self, toks: list[str]) -> set[str]:
        """The sealed texts of at least :data:`SIMILAR_MIN` tokens that a compact run of ``toks``
        reproduces in order with some tokens replaced, dropped or added (``difflib``'s matching
        blocks): at least :data:`SIMILAR_ALL` of the text's tokens, and :data:`SIMILAR_OWN` of its
        words weighted by how rare each is among the sealed texts (so a template's words count
        little and the item's own ones much: two questions of one template with different own
        words are no copy), within a run at most a quarter longer than the text. Candidates are
        the texts that share a share of their rare 3-grams with the row, so the cost stays near a lookup."""
        if not self._rare or len(toks) < SIMILAR_ALL * SIMILAR_MIN:
            return set()  # (too short to hold three quarters of any long text)
        at: dict[str, list[int]] = {}
        cues: dict[tuple[str, ...], int] = {}
        for j in range(len(toks) - CUE + 1):
            g = tuple(toks[j:j + CUE])
            if g in self._rare and g not in cues:
                cues[g] = j
        for g, j in cues.items():
            for label in self._rare[g]:
                at.setdefault(label, []).append(j)
        found: set[str] = set()
        for label, js in at.items():
            if len(js) < SIMILAR_RARE * self._nrare[label]:
                continue
            t = self.texts[label]
            n = len(t)
            mid = sorted(js)[len(js) // 2]
            window = toks[max(0, mid - 2 * n):mid + 2 * n]
            blocks = [b for b in difflib.SequenceMatcher(None, t, window, autojunk=False).get_matching_blocks()
                      if b.size]
            if not blocks or blocks[-1].b + blocks[-1].size - blocks[0].b > n + n // 4:
                continue
            matched = [b.a + k for b in blocks for k in range(b.size)]
            weights = self._weights[label]
            if len(matched) >= SIMILAR_ALL * n and \
                    sum(weights[p] for p in matched) >= SIMILAR_OWN * sum(weights) and \
                    not (label in self._expressions and _another_expression(t, window, blocks)):
                found.add(label)
        return found

    def _inserted(self, toks: list[str]) -> set[str]:
        """The sealed texts of at least :data:`INSERTED_MIN` tokens found in a row's tokens with
        one token inserted inside them (``5 - the 3 =``; an inserted operator or number makes
        another expression, ``8 - - 6 =``): a window one token longer than a sealed text which,
        less one of its inner tokens, is the text.

        The token dropped is the window's ``j``-th, 0 < ``j`` < n (the text's length n >= 3), so
        the text's first two tokens open the window (``j`` >= 2) or its last two close it (n - ``j``
        >= 2): only the texts that begin or end so at a place are compared, not every window of
        every length (that cost grew with the square of a text's length: minutes to freeze
        reasoning_gym's long puzzles)."""
        found: set[str] = set()
        if not self._heads:
            return found
        done: set[tuple[int, int]] = set()  # (a form's id, where its window starts): compared
        for p in range(len(toks) - 1):
            pair = (toks[p], toks[p + 1])
            for form in self._heads.get(pair, ()):  # the window starts at p
                if (id(form), p) not in done:
                    done.add((id(form), p))
                    if self._inserted_at(toks, p, form):
                        found.update(self._whole[form])
            for form in self._tails.get(pair, ()):  # the window ends at p + 2
                i = p + 1 - len(form)
                if i >= 0 and (id(form), i) not in done:
                    done.add((id(form), i))
                    if self._inserted_at(toks, i, form):
                        found.update(self._whole[form])
        return found

    @staticmethod
    def _inserted_at(toks: list[str], i: int, form: tuple[str, ...]) -> bool:
        """Whether ``toks[i:i + n + 1]`` less one inner token that is neither an operator nor a
        number is ``form`` (n tokens), the window not continuing an expression on its left."""
        n = len(form)
        if i + n + 1 > len(toks) or (i and _joins(toks[i - 1])):
            return False
        window = tuple(toks[i:i + n + 1])
        head = _agree(lambda m: window[:m] == form[:m], n)  # how many of form's first tokens open the window
        tail = _agree(lambda m: window[n + 1 - m:] == form[n - m:], n)  # how many of its last ones close it
        # the j-th token dropped leaves form when form[:j] opens it and form[j:] closes it
        return any(not _joins(window[j]) for j in range(max(1, n - tail), min(head, n - 1) + 1))


#: a sealed text this long or longer is still found with one token inserted inside it
INSERTED_MIN = 3
#: a sealed text this long or longer (tokens) is still found with some of its tokens replaced
#: (:meth:`LeakIndex._similar`): shorter, a tenth of it is no token, and one token more or less
#: of an expression is another question
SIMILAR_MIN = 10
#: ... when a compact run of the row matches this share of its tokens, in order,
SIMILAR_ALL = 0.75
#: ... and this share of its own ones (those no other sealed text has: a template is not the item)
SIMILAR_OWN = 0.75
#: a CUE-gram in this many long sealed texts or fewer is rare: a text is a candidate for a row
#: holding SIMILAR_RARE of its rare CUE-grams
CUE = 3
RARE = 8
SIMILAR_RARE = 0.3


def _agree(same: Callable[[int], bool], n: int) -> int:
    """The largest m <= n with ``same(m)``, ``same`` holding up to some m and not after (a
    binary search of slice comparisons: a long template two texts share costs no loop in Python)."""
    lo, hi = 0, n
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if same(mid):
            lo = mid
        else:
            hi = mid - 1
    return lo


def _joins(tok: str) -> bool:
    return tok in _JOINING or tok.isdigit()


def _another_expression(t: list[str], window: list[str], blocks: list[difflib.Match]) -> bool:
    """Whether the row's run (``window``, aligned to the sealed expression ``t`` by ``blocks``) differs
    from the text by a number or an operator where the text has something else, or by leaving
    out a number of the text. Words put in place of the text's tokens (a copy with words
    replaced) keep the question; another number or operator makes another expression
    (``-( 49 - 42 ) - 9 =`` is not a sealed ``-( 49 - 42 ) - 9 * 3 =``)."""
    first, last = blocks[0], blocks[-1]
    head = t[:first.a]  # the text's ends, against as many tokens of the row beside the run
    tail = t[last.a + last.size:]
    gaps = [(head, window[max(0, first.b - len(head)):first.b]),
            (tail, window[last.b + last.size:last.b + last.size + len(tail)])]
    gaps += [(t[x.a + x.size:y.a], window[x.b + x.size:y.b]) for x, y in zip(blocks, blocks[1:], strict=False)]
    for theirs, mine in gaps:
        if any(_joins(tok) for tok in mine) or (len(mine) < len(theirs) and any(tok.isdigit() for tok in theirs)):
            return True
    return False


_ADDITIVE_BREAK = {"*", "/", "×", "÷", "^", "%", ".", ",", "!"}  # a 0 before one is no whole term
_FACTOR_BREAK = {"^", ".", ",", "!"}  # a 1 before one is no whole factor


def _operand(tok: str) -> bool:
    return tok.isdigit() or tok == ")"


def canonical_tokens(toks: list[str]) -> list[str]:
    """``toks`` with every neutral term of an expression dropped: ``+ 0`` and ``- 0`` where the
    ``0`` is a whole term (``6 - 0 + 5 =`` is ``6 + 5 =``; in ``+ 0 * 3`` or ``+ 0 . 5`` it is
    not), ``* 1`` and ``/ 1`` where the ``1`` is a whole factor, and a leading ``0 +`` or ``1 *``.
    Each leaves the result unchanged and the expression otherwise identical, so an expression
    padded so (``45 + 67 + 0 =``) asks what the sealed one asks. Anything else is left as it is."""
    if "0" not in toks and "1" not in toks:
        return toks  # (most text: nothing to drop)
    out = list(toks)
    i = 0
    while i < len(out) - 1:
        op, term = out[i], out[i + 1]
        after = out[i + 2] if i + 2 < len(out) else ""
        if i and _operand(out[i - 1]) and not after.isdigit() and (
                (op in ("+", "-") and term == "0" and after not in _ADDITIVE_BREAK)
                or (op in ("*", "/", "×", "÷") and term == "1" and after not in _FACTOR_BREAK)):
            del out[i:i + 2]  # `a + 0`, `a * 1`
            continue
        starts = i == 0 or not (_operand(out[i - 1]) or out[i - 1] in _JOINING - {"(", "="})
        if starts and (op, term) in (("0", "+"), ("1", "*"), ("1", "×")) and (
                after.isdigit() or after in ("(", "-")):
            del out[i:i + 2]  # `0 + a`, `1 * a`
            continue
        i += 1
    return out
