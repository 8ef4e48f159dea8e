"""Freezing an Environment: run prepare once, write the files, hash them, record the manifest.

Splits are disjoint by content (docs/design.md, "No leaks"): an item's normalised prompt appears in at most
one of test, dev and curriculum. Test is drawn first, then dev, then the curriculum, each from
its own seed range far from the others, dropping any item seen before; the manifest records how
many were dropped.

With a grader pinned (:func:`prepare`'s ``sealed``), the test split is drawn on the grader with a
secret seed of its own, so the catalog's public seed cannot draw it again. The order is then
reversed: dev and the curriculum are drawn here first, from their public seeds, and the grader
draws the test split dropping any item whose normalised prompt they hold. Nothing that depends
on the test items comes back (no keys, no dropped positions): a set of keys would let an agent
try every prompt of a small item space (parity has 90,000) and find the sealed ones.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
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
from monte.manifest import GRADER_SEED, MANIFEST, FileEntry, Floor, Manifest

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


def split_bytes(items: Iterable[Item]) -> bytes:
    """A split's file as a freeze writes it (the grader writes a split it draws the same way)."""
    return "".join(json.dumps(item, sort_keys=True, ensure_ascii=False) + "\n" for item in items).encode()


def _write_jsonl(path: Path, items: Iterable[Item]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(split_bytes(items))


def catalog_grader(exams: dict[str, dict[str, str]]) -> dict[str, Any]:
    """The manifest's grader record of a catalog environment (exam -> the benchmark grading it)."""
    return {"kind": "catalog", "benchmarks": {e: next(iter(sp.values())) for e, sp in exams.items()}}


def draw_sealed(plan: FreezePlan, seed: int) -> dict[str, tuple[list[Item], int]]:
    """On the grader: each test split of ``plan`` from the secret ``seed``, its items numbered as
    :func:`prepare` numbers them, dropping any whose normalised prompt dev or the curriculum holds
    (:func:`public_first`, drawn here as the freeze draws them), an earlier exam holds, or the
    catalog's public test seed draws: the split everyone can generate shares no item with it (on
    parity's 90,000 items, two random draws of 200 would share one about every other time)."""
    seen: set[str] = set()
    public_first(plan, seen)
    tests = {e: (b, plan.sizes[f"{e}/{s}"]) for e, sp in plan.exams.items() for s, b in sp.items() if is_sealed(s)}
    for bench, n in tests.values():
        seen |= {normalise(str(item["prompt"])) for item in get(bench).benchmark.generate(SEEDS["test"], n)}
    out: dict[str, tuple[list[Item], int]] = {}
    for exam, (bench, n) in tests.items():
        items, dropped = _draw(bench, seed, n, seen)
        for i, item in enumerate(items):
            item["id"] = f"{exam}/test/{i:05d}"
        out[exam] = (items, dropped)
    return out


#: ``sealed(plan)``: the grader draws the plan's test splits with its own seed, dropping what dev
#: and the curriculum hold (it draws those itself from their public seeds: :func:`public_first`);
#: returns exam -> its ``content`` (sha256), ``size``, ``n``, ``dropped`` and ``floor`` (None or
#: the Floor's fields): never an item
DrawSealed = Callable[["FreezePlan"], dict[str, dict[str, Any]]]


def public_first(plan: FreezePlan, seen: set[str]) -> list[tuple[str | None, list[Item], int]]:
    """With a grader: the curriculum (exam None), then each exam's dev split, from their public
    seeds, each dropping what ``seen`` (updated) holds. Run here by the freeze and on the grader
    by ``draw`` (from the plan, never from prompts a client sends), so the test split avoids
    exactly what the freeze writes."""
    out: list[tuple[str | None, list[Item], int]] = []
    if plan.curriculum:
        out.append((None, *_draw(plan.curriculum, SEEDS["curriculum"], plan.sizes["curriculum"], seen)))
    for exam, splits in plan.exams.items():
        if "dev" in splits:
            out.append((exam, *_draw(splits["dev"], SEEDS["dev"], plan.sizes[f"{exam}/dev"], seen)))
    return out


def prepare(plan: FreezePlan, folder: Path, *, sealed: DrawSealed | None = None,
            custody: bool = False) -> Manifest:
    """Generate every split into ``folder`` and return its manifest (not yet written).

    ``sealed``: a grader is pinned; it draws the test splits with its own seed after dev and the
    curriculum are drawn here, and the manifest records what it returned. ``custody``: re-create
    the files of an environment whose test splits the grader drew (``monte env install``): dev and
    the curriculum as that freeze drew them, no test split (only the grader ever held it)."""
    seen: set[str] = set()
    dropped: dict[str, int] = {}
    files_for: dict[str, dict[str, str]] = {}
    floors: dict[str, dict[str, Floor]] = {}
    # the grader's order only where it draws a test split (an eval-only environment has none)
    graders = (sealed is not None or custody) and any(is_sealed(s) for sp in plan.exams.values() for s in sp)

    def write(exam: str, split: str, items: list[Item], d: int) -> None:
        rel = f"exams/{exam}/{split}.jsonl"
        for i, item in enumerate(items):
            item["id"] = f"{exam}/{split}/{i:05d}"
        _write_jsonl(folder / rel, items)
        files_for.setdefault(exam, {})[split] = rel
        dropped[f"{exam}/{split}"] = d
        floor = constant_floor(get(plan.exams[exam][split]).benchmark, items)
        if floor is not None:
            floors.setdefault(exam, {})[split] = floor

    if graders:  # dev and the curriculum first: the grader draws the test split avoiding both
        for exam, items, d in public_first(plan, seen):
            if exam is None:
                _write_curriculum(folder, items)
                dropped["curriculum"] = d
            else:
                write(exam, "dev", items, d)
    else:
        order = [(e, s) for e, sp in plan.exams.items() for s in sp if is_sealed(s)]
        order += [(e, s) for e, sp in plan.exams.items() for s in sp if s == "dev"]
        for exam, split in order:
            write(exam, split, *_draw(plan.exams[exam][split], SEEDS[split], plan.sizes[f"{exam}/{split}"], seen))
        if plan.curriculum:
            items, d = _draw(plan.curriculum, SEEDS["curriculum"], plan.sizes["curriculum"], seen)
            _write_curriculum(folder, items)
            dropped["curriculum"] = d
    drawn: dict[str, dict[str, Any]] = {}
    if sealed is not None and graders:
        drawn = sealed(plan)
        for exam, got in sorted(drawn.items()):
            files_for.setdefault(exam, {})["test"] = f"exams/{exam}/test.jsonl"
            dropped[f"{exam}/test"] = int(got["dropped"])
            if got.get("floor") is not None:
                floors.setdefault(exam, {})["test"] = Floor(**got["floor"])
    benches = sorted({b for sp in plan.exams.values() for b in sp.values()} | (
        {plan.curriculum} if plan.curriculum else set()))
    provenance = {
        "source": "catalog",
        "benchmarks": versions(benches),
        "roles": {**{f"{e}/{s}": b for e, sp in plan.exams.items() for s, b in sp.items()},
                  **({"curriculum": plan.curriculum} if plan.curriculum else {})},
        "seeds": {**SEEDS, "test": GRADER_SEED} if graders else SEEDS,
        "sizes": plan.sizes,
        "dropped_for_disjointness": dropped,
    }
    files = {k: FileEntry(**v) for k, v in hash_tree(folder).items() if k != MANIFEST}  # type: ignore[arg-type]
    for exam, got in drawn.items():  # in the grader's custody: hashed there, as it wrote the file
        files[f"exams/{exam}/test.jsonl"] = FileEntry(sha256=str(got["content"]), size=int(got["size"]))
    return Manifest(
        kind="environment",
        name=plan.name,
        files=files,
        provenance=provenance,
        env_kind=plan.env_kind,
        form=plan.form,
        exams=files_for,
        curriculum="curriculum.jsonl" if plan.curriculum else None,
        grader=catalog_grader(plan.exams),
        floors=floors,
    )


def versions(benches: Iterable[str]) -> dict[str, dict[str, str]]:
    """Each benchmark's provider and version (the manifest's provenance; a grader's draw answers
    with its own, so a client whose catalog differs refuses before recording anything)."""
    return {b: {"provider": get(b).provider, "version": get(b).benchmark.version} for b in benches}


def replan(described: Any) -> FreezePlan:
    """On the grader: the plan a client sent (:meth:`FreezePlan.describe`), made again from the
    catalog with :func:`plan_freeze` and refused unless it is exactly that plan: sizes are the
    catalog's, never a client's (a curriculum sized to fill the item space would leave the test
    split only the items the agent knows are left)."""
    d: dict[str, Any] = described if isinstance(described, dict) else {}
    exams: dict[str, Any] = d["exams"] if isinstance(d.get("exams"), dict) else {}
    dev = tuple(str(e) for e, sp in exams.items() if isinstance(sp, dict) and "dev" in sp)
    test = tuple(str(e) for e, sp in exams.items() if is_sealed_any(sp))
    curriculum = d.get("curriculum")
    plan = plan_freeze(name=str(d.get("name") or ""), benchmark=None,
                       server=curriculum if isinstance(curriculum, str) and curriculum else None,
                       dev=dev, test=test) if dev and test else None
    if plan is None or json.dumps(plan.describe()) != json.dumps(d):
        raise error("E_BAD_INPUT", "the grader draws a catalog environment's test splits from the plan its own "
                    "catalog makes of the same flags; this is not one (other sizes, or no test split); nothing was drawn",
                    "freeze with `monte env add` (monte's client sends the plan), the same monte on both sides")
    return plan


def is_sealed_any(splits: Any) -> bool:
    return isinstance(splits, dict) and any(is_sealed(str(s)) for s in splits)


def _write_curriculum(folder: Path, items: list[Item]) -> None:
    for i, item in enumerate(items):
        item["id"] = f"curriculum/{i:06d}"
    _write_jsonl(folder / "curriculum.jsonl", items)
