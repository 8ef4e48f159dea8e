"""Benchmark: the leak check (``E_LEAK``, monte.envs.items.LeakIndex) on the catalog's honest
curricula, and on the moves that hid a sealed item from the check before issue 25.

Each trainable catalog benchmark is frozen as ``env add --server B --dev B --test B`` would freeze
it (the same code, ``monte.envs.freeze.prepare``, at the catalog's sizes), with the eval-only
benchmarks' test splits frozen beside it; its curriculum is then checked against every test split
of every such environment (its own and the other benchmarks'). An honest row flagged is a false
positive: the figure expected is 0 (a row asking the very question a test item of another
benchmark asks, ``3 - 3 =`` in chain_sum and basic_arithmetic, is counted apart: it is the same
item). The same test items, hidden as the issue's moves hid them, are the true positives: each
move's share caught, expected 1.

    .venv/bin/python bench/leak_false_positives.py                      # the catalog sizes, a few minutes
    .venv/bin/python bench/leak_false_positives.py --quick --json-out /tmp/leak.json   # seconds
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from monte.envs.freeze import normalise, plan_freeze, prepare  # noqa: E402
from monte.envs.items import LeakIndex, item_text, read_items  # noqa: E402
from monte.envs.registry import catalog  # noqa: E402

#: the issue's moves (and two more): a row made from a sealed item that must still be found
MOVES: dict[str, Callable[[dict[str, Any]], dict[str, Any]]] = {
    "verbatim": lambda it: {"input": it["prompt"], "output": str(it["answer"])},
    "zero-width space appended": lambda it: {"input": it["prompt"] + "\u200b", "output": str(it["answer"])},
    "' =' written '='": lambda it: {"input": it["prompt"].replace(" =", "="), "output": str(it["answer"])},
    "prompt in the output column": lambda it: {"input": "", "output": f"{it['prompt']} {it['answer']}"},
    "upper case, full-width, spaced": lambda it: {"input": "  ".join(it["prompt"].upper().translate(
        {c: c + 0xFEE0 for c in range(0x21, 0x7F)}).split()), "output": str(it["answer"])},
    "a chat row, with a system turn": lambda it: {"messages": [
        {"role": "system", "content": "You are terse."},
        {"role": "user", "content": f"Question: {it['prompt']}"},
        {"role": "assistant", "content": str(it["answer"])}]},
}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="smoke run: 40 test items, 400 curriculum rows")
    parser.add_argument("--json-out", type=Path)
    args = parser.parse_args(argv)
    start = time.perf_counter()
    benches = catalog()
    trainable = sorted(b for b, e in benches.items() if e.benchmark.trainable)
    eval_only = sorted(b for b, e in benches.items() if not e.benchmark.trainable)
    envs: dict[str, tuple[Path, Any]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for b in trainable:
            plan = plan_freeze(name=b, benchmark=None, server=b, dev=(b,), test=(b, *eval_only))
            if args.quick:
                plan.sizes = {k: (400 if k == "curriculum" else 40) for k in plan.sizes}
            folder = Path(tmp) / b
            envs[b] = (folder, prepare(plan, folder))
        tests: dict[str, dict[str, str]] = {}  # environment -> item label -> text
        items: dict[str, list[dict[str, Any]]] = {}
        for env, (folder, m) in envs.items():
            tests[env] = {}
            for exam, splits in m.exams.items():
                if "test" in splits:
                    rows = read_items(str(folder / splits["test"]))
                    items[f"{env}/{exam}"] = rows
                    tests[env].update({f"{env}:{r['id']}": item_text(r) for r in rows})
        pairs: list[dict[str, Any]] = []
        for cur_env, (folder, _m) in envs.items():
            curriculum = read_items(str(folder / "curriculum.jsonl"))
            for test_env, texts in tests.items():
                index = LeakIndex.build(texts)
                same = {normalise(t) for t in texts.values()}
                flagged = [r for r in curriculum if index.find(r)]
                # the same question, asked by two benchmarks ('3 - 3 =' is chain_sum's and
                # basic_arithmetic's; '6 / 1 + 3 =' asks chain_sum's '6 + 3 =', as a freeze
                # compares them): a true overlap of content, not a false positive
                identical = [r["id"] for r in flagged if normalise(item_text(r)) in same]
                pairs.append({"curriculum": cur_env, "test_splits_of": test_env, "rows": len(curriculum),
                              "test_items": len(texts), "flagged": len(flagged), "identical_question": len(identical),
                              "false_positives": len(flagged) - len(identical),
                              "examples": [f"{r['id']}: {r['prompt']}" for r in flagged[:3]]})
        moves: list[dict[str, Any]] = []
        for name, move in MOVES.items():
            caught = total = 0
            for key, rows in sorted(items.items()):
                env = key.split("/")[0]
                index = LeakIndex.build(tests[env])
                for r in rows:
                    total += 1
                    caught += bool(index.find(move(r)))
            moves.append({"move": name, "rows": total, "caught": caught})
    false_positives = sum(p["false_positives"] for p in pairs)
    own = sum(p["flagged"] for p in pairs if p["curriculum"] == p["test_splits_of"])
    n_identical = sum(p["identical_question"] for p in pairs)
    result = {"quick": args.quick, "honest_pairs": pairs, "honest_rows": sum(p["rows"] for p in pairs),
              "false_positives": false_positives, "flagged_against_own_environment": own,
              "identical_questions_across_benchmarks": n_identical, "moves": moves,
              "seconds": round(time.perf_counter() - start, 2)}
    print(f"honest rows checked: {result['honest_rows']} (curricula x test splits): {false_positives} false "
          f"positive(s); {own} flagged against their own environment's test splits; {n_identical} the very "
          "same question in another benchmark's test split")
    for m in moves:
        print(f"  {m['move']}: {m['caught']}/{m['rows']} caught")
    if args.json_out:
        args.json_out.write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
