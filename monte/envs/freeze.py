"""Freezing an Environment: run prepare once, write the files, hash them, record the manifest.

Splits are disjoint by content (docs/design.md, "No leaks"): an item's normalised prompt appears in at most
one of test, dev and curriculum. Test is drawn first, then dev, then the curriculum, each from
its own seed range far from the others, dropping any item seen before; the manifest records how
many were dropped.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from monte.envs.base import Item
from monte.envs.floor import constant_floor
from monte.envs.items import canonical_tokens, tokens
from monte.envs.registry import get
from monte.errors import error
from monte.hashing import hash_tree
from monte.ledger.predicates import is_sealed
from monte.manifest import MANIFEST, FileEntry, Floor, Manifest

# Seeds per role, a million apart: reasoning-gym's item i of seed s is item 0 of seed s+i, so
# ranges closer than the split sizes would share items.
SEEDS = {"test": 3_000_000, "dev": 2_000_000, "curriculum": 1_000_000}


def normalise(prompt: str) -> str:
    """The prompt as disjointness compares it: the leak check's normalisation, neutral terms
    dropped (monte.envs.items): a curriculum row ``6 - 0 + 5 =`` asks a test item's ``6 + 5 =``,
    and the leak check would refuse the curriculum that held it."""
    return " ".join(canonical_tokens(tokens(prompt)))


@dataclass
class FreezePlan:
    name: str
    form: Literal["benchmark", "server", "exams"]
    env_kind: Literal["eval-only", "trainable"]
    exams: dict[str, dict[str, str]]  # exam -> split -> benchmark
    curriculum: str | None
    sizes: dict[str, int] = field(default_factory=dict)  # "<exam>/<split>" | "curriculum" -> n

    def describe(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "form": self.form,
            "kind": self.env_kind,
            "exams": self.exams,
            "curriculum": self.curriculum,
            "sizes": self.sizes,
        }


def plan_freeze(
    *,
    name: str | None,
    benchmark: str | None,
    server: str | None,
    dev: tuple[str, ...],
    test: tuple[str, ...],
) -> FreezePlan:
    """Check the flag mix (the three forms of docs/environments.md) and the benchmarks; nothing is generated."""
    usage = "the forms are: --benchmark B [--as N] | --server B --dev B --test B [--as N] | --dev B --test B --as N"
    if benchmark:
        if server or dev or test:
            raise error("E_USAGE", "--benchmark stands alone (with --as)", usage)
        entry = get(benchmark)
        plan = FreezePlan(name or benchmark, "benchmark", "eval-only", {benchmark: {"dev": benchmark}}, None)
        plan.sizes[f"{benchmark}/dev"] = entry.benchmark.sizes.get("dev", 200)
        return plan
    if server:
        if not (dev and test):
            raise error("E_USAGE", "--server needs both --dev and --test: a frozen environment "
                        "cannot gain a test exam later", usage)
        entry = get(server)
        if not entry.benchmark.trainable:
            raise error("E_USAGE", f"benchmark {server!r} has no curriculum and cannot be a --server",
                        "pick a trainable benchmark (`monte env list --available`)")
        form: Literal["benchmark", "server", "exams"] = "server"
    else:
        if not (dev and test):
            raise error("E_USAGE", "an exams-only environment needs --dev and --test", usage)
        if not name:
            raise error("E_USAGE", "--as NAME is required with --dev/--test alone", usage)
        form = "exams"
    exams: dict[str, dict[str, str]] = {}
    for split, benches in (("dev", dev), ("test", test)):
        for b in benches:
            get(b)
            if split in exams.get(b, {}):
                raise error("E_USAGE", f"--{split} {b} is given twice", "name each exam once")
            exams.setdefault(b, {})[split] = b
    plan = FreezePlan(
        name or server or "",
        form,
        "trainable" if server else "eval-only",
        exams,
        server,
    )
    for exam, splits in exams.items():
        for split, b in splits.items():
            plan.sizes[f"{exam}/{split}"] = get(b).benchmark.sizes.get(split, 200)
    if server:
        plan.sizes["curriculum"] = get(server).benchmark.sizes.get("curriculum", 5000)
    return plan


def _draw(bench_name: str, seed: int, n: int, seen: set[str]) -> tuple[list[Item], int]:
    """``n`` items new to ``seen`` (updated), and how many candidates were dropped."""
    bench = get(bench_name).benchmark
    want = n
    while True:
        items = bench.generate(seed, want)
        picked: list[Item] = []
        keys: set[str] = set()
        dropped = 0
        for item in items:
            key = normalise(str(item["prompt"]))
            if key in seen or key in keys:
                dropped += 1
                continue
            keys.add(key)
            picked.append(item)
            if len(picked) == n:
                seen |= keys
                return picked, dropped
        if want >= 20 * n + 1000:
            raise error(
                "E_REFUSED",
                f"benchmark {bench_name!r} could not give {n} items disjoint from the other splits "
                f"({len(picked)} of {want} candidates were new)",
                "its item space is too small for disjoint splits; pick a benchmark with a larger space",
            )
        want = want * 2 + 10


def _write_jsonl(path: Path, items: Iterable[Item]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        for item in items:
            f.write(json.dumps(item, sort_keys=True, ensure_ascii=False) + "\n")


def prepare(plan: FreezePlan, folder: Path) -> Manifest:
    """Generate every split into ``folder`` and return its manifest (not yet written)."""
    seen: set[str] = set()
    dropped: dict[str, int] = {}
    files_for: dict[str, dict[str, str]] = {}
    floors: dict[str, dict[str, Floor]] = {}
    order = [(e, s) for e, sp in plan.exams.items() for s in sp if is_sealed(s)]
    order += [(e, s) for e, sp in plan.exams.items() for s in sp if s == "dev"]
    for exam, split in order:
        bench = plan.exams[exam][split]
        items, d = _draw(bench, SEEDS[split], plan.sizes[f"{exam}/{split}"], seen)
        rel = f"exams/{exam}/{split}.jsonl"
        for i, item in enumerate(items):
            item["id"] = f"{exam}/{split}/{i:05d}"
        _write_jsonl(folder / rel, items)
        files_for.setdefault(exam, {})[split] = rel
        dropped[f"{exam}/{split}"] = d
        floor = constant_floor(get(bench).benchmark, items)
        if floor is not None:
            floors.setdefault(exam, {})[split] = floor
    if plan.curriculum:
        items, d = _draw(plan.curriculum, SEEDS["curriculum"], plan.sizes["curriculum"], seen)
        for i, item in enumerate(items):
            item["id"] = f"curriculum/{i:06d}"
        _write_jsonl(folder / "curriculum.jsonl", items)
        dropped["curriculum"] = d
    benches = sorted({b for sp in plan.exams.values() for b in sp.values()} | (
        {plan.curriculum} if plan.curriculum else set()))
    provenance = {
        "source": "catalog",
        "benchmarks": {b: {"provider": get(b).provider, "version": get(b).benchmark.version}
                       for b in benches},
        "roles": {**{f"{e}/{s}": b for e, sp in plan.exams.items() for s, b in sp.items()},
                  **({"curriculum": plan.curriculum} if plan.curriculum else {})},
        "seeds": SEEDS,
        "sizes": plan.sizes,
        "dropped_for_disjointness": dropped,
    }
    files = {k: FileEntry(**v) for k, v in hash_tree(folder).items() if k != MANIFEST}  # type: ignore[arg-type]
    return Manifest(
        kind="environment",
        name=plan.name,
        files=files,
        provenance=provenance,
        env_kind=plan.env_kind,
        form=plan.form,
        exams=files_for,
        curriculum="curriculum.jsonl" if plan.curriculum else None,
        grader={"kind": "catalog", "benchmarks": {e: next(iter(sp.values())) for e, sp in plan.exams.items()}},
        floors=floors,
    )
