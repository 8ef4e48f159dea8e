"""Benchmark: leaks by planted benchmark items. Sealed items of the catalog's trainable exams are
planted in training rows in seven ways, and the leak check (``E_LEAK``,
``monte.envs.items.LeakIndex``) is measured on them: its recall per kind, its false positives on
honest curriculum rows, and its time over a large dataset against a plain n-gram set build of the
same rows in the same run.

Sealed: 10,000 items of the catalog's exams: 2,000 from each trainable benchmark (parity, chain_sum,
basic_arithmetic, spell_backward) and 1,000 from each eval-only one (letter_counting, word_sorting:
the catalog's long, templated questions); honest: 10,000 rows of the same generators, in the same
shares, from other seeds, none asking a sealed question nor another honest row's as a freeze
compares them (``monte.envs.freeze.normalise``: normalised, neutral terms dropped, so a curriculum
the freeze builds never holds ``6 - 0 + 5 =`` beside a test item ``6 + 5 =``). Kinds, each applied
to 1,000 seeded sealed items:

- ``exact``: the prompt and its answer as a row;
- ``format-only``: the prompt in a chat row, after a system turn, behind "Question: ";
- ``case and whitespace``: upper case, runs of spaces and tabs between tokens;
- ``one-token edit``: one neutral word ("the") inserted at a seeded place inside the prompt;
- ``10% token substitution``: a tenth of the prompt's words replaced by another word, on 1,000
  sealed items of 10 words or more (under that a tenth is no word, and one word more is another
  question): letter_counting, word_sorting and the longest basic_arithmetic expressions; recall
  is also given by the item's length;
- ``padded with a neutral term``: an expression padded with ``+ 0`` before its ``=`` (the question
  ``45 + 67 + 0 =`` asks what ``45 + 67 =`` asks), other prompts with " (please)" appended;
- ``prompt in the output column``: an empty input, the prompt and answer as the output.

    .venv/bin/python bench/planted_leaks.py [--quick] [--rows N] [--json-out FILE]

Targets (issue 42): recall >= 0.99 on the first four kinds, >= 0.95 at 10 % substitution; false
positives <= 0.1 % of the honest rows; the check over 1,000,000 rows against 10,000 items within
10 minutes on 2 CPUs. The script reports each figure against its target and exits 0 (a figure
short of its target is a finding to report, not a crash).
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from monte.envs.freeze import normalise  # noqa: E402
from monte.envs.items import NGRAM, LeakIndex, row_segments, tokens  # noqa: E402
from monte.envs.registry import catalog  # noqa: E402

WORDS = ("apple", "river", "seven", "blue", "quickly", "house", "number", "answer", "total", "green")


def _answer(it: dict[str, Any]) -> str:
    return str(it.get("answer", ""))


def _substitute(share: float) -> Callable[[dict[str, Any], random.Random], dict[str, Any]]:
    def move(it: dict[str, Any], rng: random.Random) -> dict[str, Any]:
        toks = it["prompt"].split()
        for i in rng.sample(range(len(toks)), int(share * len(toks))):
            toks[i] = rng.choice(WORDS)
        return {"input": " ".join(toks), "output": _answer(it)}
    return move


def _insert(it: dict[str, Any], rng: random.Random) -> dict[str, Any]:
    toks = it["prompt"].split()
    toks.insert(rng.randrange(1, max(2, len(toks))), "the")
    return {"input": " ".join(toks), "output": _answer(it)}


def _pad(it: dict[str, Any], rng: random.Random) -> dict[str, Any]:
    p = it["prompt"]
    toks = tokens(p)
    if len(toks) >= 2 and toks[-1] == "=" and (toks[-2].isdigit() or toks[-2] == ")"):  # an expression
        return {"input": p.rstrip()[:-1].rstrip() + " + 0 =", "output": _answer(it)}
    return {"input": p + " (please)", "output": _answer(it)}


def _spaced(it: dict[str, Any], rng: random.Random) -> dict[str, Any]:
    return {"input": "  \t ".join(it["prompt"].upper().split()), "output": _answer(it)}


KINDS: dict[str, Callable[[dict[str, Any], random.Random], dict[str, Any]]] = {
    "exact": lambda it, rng: {"input": it["prompt"], "output": _answer(it)},
    "format-only": lambda it, rng: {"messages": [{"role": "system", "content": "Be brief."},
                                                 {"role": "user", "content": f"Question: {it['prompt']}"},
                                                 {"role": "assistant", "content": _answer(it)}]},
    "case and whitespace": _spaced,
    "one-token edit": _insert,
    "10% token substitution": _substitute(0.1),
    "padded with a neutral term": _pad,
    "prompt in the output column": lambda it, rng: {"input": "", "output": f"{it['prompt']} {_answer(it)}"},
}
TARGETS = {"exact": 0.99, "format-only": 0.99, "case and whitespace": 0.99, "one-token edit": 0.99,
           "10% token substitution": 0.95}


def _items(per: int, seed: int) -> list[dict[str, Any]]:
    """``per`` items of each trainable benchmark and half as many of each eval-only one."""
    out: list[dict[str, Any]] = []
    for name, env in sorted(catalog().items()):
        n = per if env.benchmark.trainable else per // 2
        out += [{**it, "bench": name} for it in env.benchmark.generate(seed, n)]
    return out


#: recall at 10% substitution is given by item length (words) too
LENGTHS = ((10, 19), (20, 39), (40, 10**9))


def _ngram_set(rows: Sequence[Any]) -> int:
    """The baseline: every row's normalised tokens and their n-grams put in one set."""
    grams: set[tuple[str, ...]] = set()
    for row in rows:
        for seg in row_segments(row):
            toks = tokens(seg)
            grams.update(tuple(toks[i:i + NGRAM]) for i in range(max(1, len(toks) - NGRAM + 1)))
    return len(grams)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="smoke run: 100 items a benchmark, 2,000 rows")
    ap.add_argument("--rows", type=int, default=None, help="rows of the timed check (default 1,000,000)")
    ap.add_argument("--json-out", type=Path)
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    per = 100 if args.quick else 2_000
    sealed = _items(per, 1)
    want = len(sealed)
    honest: list[dict[str, Any]] = []
    seen = {normalise(it["prompt"]) for it in sealed}
    for seed in range(2, 12):  # small item spaces repeat: draw until as many distinct honest questions
        for it in _items(per, seed):
            text = normalise(it["prompt"])
            if text not in seen and len(honest) < want:
                seen.add(text)
                honest.append(it)
    index = LeakIndex.build({f"{it['bench']}/{k}": it["prompt"] for k, it in enumerate(sealed)})
    built = time.perf_counter() - t0

    rng = random.Random(42)
    size = 1_000 if not args.quick else 100
    planted = rng.sample(sealed, min(len(sealed), size))
    # a tenth of an item under 10 words is no word: substitution is planted in longer items
    long = [it for it in sealed if len(it["prompt"].split()) >= 10]
    planted_long = random.Random(43).sample(long, min(len(long), size))
    kinds: list[dict[str, Any]] = []
    for kind, move in KINDS.items():
        krng = random.Random(kind)
        some = planted_long if kind == "10% token substitution" else planted
        missed = [it for it in some if not index.find(move(it, krng))]
        recall = 1 - len(missed) / len(some) if some else None
        entry: dict[str, Any] = {
            "kind": kind, "planted": len(some), "caught": len(some) - len(missed),
            "recall": None if recall is None else round(recall, 4), "target": TARGETS.get(kind),
            "planted_by_benchmark": {b: sum(1 for m in some if m["bench"] == b)
                                     for b in sorted({m["bench"] for m in some})},
            "missed_by_benchmark": {b: sum(1 for m in missed if m["bench"] == b)
                                    for b in sorted({m["bench"] for m in missed})},
            "examples": [move(m, random.Random(0)) for m in missed[:2]]}
        if kind == "10% token substitution":
            by_length = {}
            for lo, hi in LENGTHS:
                band = [it for it in some if lo <= len(it["prompt"].split()) <= hi]
                lost = sum(1 for it in missed if lo <= len(it["prompt"].split()) <= hi)
                if band:
                    by_length[f"{lo}-{hi if hi < 10**9 else ''}"] = {
                        "planted": len(band), "recall": round(1 - lost / len(band), 4)}
            entry["recall_by_words"] = by_length
        kinds.append(entry)
    honest_rows = [{"input": it["prompt"], "output": _answer(it)} for it in honest]
    flagged = [r for r in honest_rows if index.find(r)]
    fp = len(flagged) / len(honest_rows)

    n = args.rows or (2_000 if args.quick else 1_000_000)
    rows = [{"input": honest_rows[i % len(honest_rows)]["input"], "output": f"{i}"} for i in range(n)]
    t = time.perf_counter()
    _ngram_set(rows)
    baseline = time.perf_counter() - t
    t = time.perf_counter()
    hits = sum(1 for r in rows if index.find(r))
    check = time.perf_counter() - t
    out = {"quick": args.quick, "sealed_items": len(sealed), "honest_rows": len(honest_rows), "kinds": kinds,
           "false_positives": len(flagged), "false_positive_rate": round(fp, 6),
           "false_positive_examples": [r["input"] for r in flagged[:5]],
           "timed_rows": n, "timed_items": len(sealed), "index_build_s": round(built, 2),
           "check_s": round(check, 2), "ngram_set_s": round(baseline, 2),
           "ratio_to_ngram_set": round(check / baseline, 2) if baseline else None, "timed_hits": hits,
           "seconds": round(time.perf_counter() - t0, 1)}
    for k in kinds:
        goal = f" (target {k['target']})" if k["target"] else ""
        if k["recall"] is None:
            print(f"  {k['kind']:<30} no item of 10 tokens or more: not applicable")
        else:
            print(f"  {k['kind']:<30} recall {k['recall']:.4f}{goal}  missed {k['missed_by_benchmark']}")
            if "recall_by_words" in k:
                print(f"  {'':<30} by words: {k['recall_by_words']}")
    print(f"false positives: {len(flagged)} of {len(honest_rows)} honest rows ({fp:.4%}; target <= 0.1%)")
    print(f"check of {n:,} rows against {len(sealed):,} items: {check:.1f} s; a plain n-gram set of the same rows: "
          f"{baseline:.1f} s (ratio {out['ratio_to_ngram_set']}); target: 1,000,000 rows within 600 s")
    if args.json_out:
        args.json_out.write_text(json.dumps(out, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
