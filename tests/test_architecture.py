"""The package's shape, checked from the source: no import cycle between monte's modules (imports
inside functions included: a lazy import is still a dependency), and no module reaching into
another module's private (``_name``) names."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1] / "monte"


def _module_name(path: Path, root: Path) -> str:
    rel = path.relative_to(root.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _modules(root: Path) -> dict[str, Path]:
    return {_module_name(p, root): p for p in sorted(root.rglob("*.py"))}


def _resolve(node: ast.ImportFrom, here: str, is_pkg: bool) -> str | None:
    if node.level == 0:
        return node.module
    base = here.split(".") if is_pkg else here.split(".")[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def _top_name(name: str, mods: dict[str, Path]) -> str | None:
    """The longest prefix of ``name`` that is one of our modules."""
    parts = name.split(".")
    while parts:
        cand = ".".join(parts)
        if cand in mods:
            return cand
        parts.pop()
    return None


def imports_of(mods: dict[str, Path]) -> dict[str, dict[str, list[tuple[int, str | None]]]]:
    """module -> {imported module -> [(line, imported name or None)]}; every import statement in
    the file, at any depth (function bodies too), except those under ``if TYPE_CHECKING``."""
    graph: dict[str, dict[str, list[tuple[int, str | None]]]] = {}
    for name, path in mods.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        skip: set[int] = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
                for stmt in node.body:
                    skip.update(id(n) for n in ast.walk(stmt))
        edges: dict[str, list[tuple[int, str | None]]] = {}
        for node in ast.walk(tree):
            if id(node) in skip:
                continue
            if isinstance(node, ast.Import):
                for a in node.names:
                    target = _top_name(a.name, mods)
                    if target and target != name:
                        edges.setdefault(target, []).append((node.lineno, None))
            elif isinstance(node, ast.ImportFrom):
                src = _resolve(node, name, path.name == "__init__.py")
                if not src:
                    continue
                for a in node.names:
                    sub = f"{src}.{a.name}"
                    if sub in mods:  # `from monte import evals`: the submodule itself
                        if sub != name:
                            edges.setdefault(sub, []).append((node.lineno, None))
                        continue
                    target = _top_name(src, mods)
                    if target and target != name:
                        edges.setdefault(target, []).append((node.lineno, a.name))
        graph[name] = edges
    return graph


def find_cycles(graph: dict[str, dict[str, list[tuple[int, str | None]]]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    counter = [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph.get(v, {}):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def _is_package_parent(importer: str, imported: str) -> bool:
    """A package's ``__init__`` re-exporting from its own submodule is not a cycle by itself."""
    return importer.startswith(imported + ".") or imported.startswith(importer + ".")


def private_imports(graph: dict[str, dict[str, list[tuple[int, str | None]]]]) -> list[str]:
    bad = []
    for importer, edges in graph.items():
        for target, uses in edges.items():
            for line, name in uses:
                if name and name.startswith("_") and not name.startswith("__") \
                        and not _is_package_parent(importer, target):
                    bad.append(f"{importer}:{line} imports {target}.{name}")
    return bad


def test_no_import_cycle_in_monte() -> None:
    cycles = find_cycles(imports_of(_modules(ROOT)))
    assert not cycles, "import cycles (each a set of modules that import each other):\n" + "\n".join(
        " <-> ".join(c) for c in cycles)


def test_no_module_imports_another_modules_private_name() -> None:
    bad = private_imports(imports_of(_modules(ROOT)))
    assert not bad, "\n".join(bad)


@pytest.fixture
def planted(tmp_path: Path) -> Path:
    pkg = tmp_path / "monte"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from monte.b import thing\n")
    # the cycle closes inside a function: a lazy import is still a dependency
    (pkg / "b.py").write_text("def thing():\n    from monte.sub import c\n    return c\n")
    (pkg / "sub" / "c.py").write_text("from .. import a\nfrom monte.b import _hidden\n")
    (pkg / "d.py").write_text("import monte.a\n")
    return pkg


def test_the_checks_catch_a_planted_cycle_and_private_import(planted: Path) -> None:
    graph = imports_of(_modules(planted))
    assert find_cycles(graph) == [["monte.a", "monte.b", "monte.sub.c"]]
    assert private_imports(graph) == ["monte.sub.c:2 imports monte.b._hidden"]


# --- one home per concept: what a row is, for the seal, is written once ---------------------------

PREDICATE_HOME = "monte/ledger/predicates.py"
#: a split or a smoke flag, however it is reached: ``split``, ``plan.smoke``, ``r["split"]``
_SPLIT = r"""(?:[\w.]*\bsplit|\w+\[["']split["']\])"""
_SMOKE = r"""(?:[\w.]*\bsmoke|\w+\[["']smoke["']\])"""
_TEST = r"""\s*==\s*["']test["']"""
SPELLED_OUT = {  # the predicates of monte/ledger/predicates.py, written out by hand
    "is_test_read": re.compile(r"""\bkind\W{1,3}\s*==\s*["']eval["']\s+and\s+\w+(\.|\[["'])split\W{0,2}\s*==\s*["']test["']"""
                               r"""|\bkind\W{1,3}\s*!=\s*["']eval["']\s+or\s+\w+(\.|\[["'])split\W{0,2}\s*!=\s*["']test["']"""),
    "is_admissible": re.compile(r"""status\W{0,2}\s*==\s*["']succeeded["']\s+and\s+not\s+\w+(\.|\[["'])smoke"""),
    "spends_test_read": re.compile(rf"""{_SPLIT}{_TEST}\s+and\s+not\s+{_SMOKE}"""
                                   rf"""|\bnot\s+{_SMOKE}\s+and\s+{_SPLIT}{_TEST}"""
                                   rf"""|{_SPLIT}\s*!=\s*["']test["']\s+or\s+{_SMOKE}"""),
    "is_test_smoke": re.compile(rf"""(?<![\w.])(?<!not ){_SMOKE}\s+and\s+{_SPLIT}{_TEST}|{_SPLIT}{_TEST}\s+and\s+{_SMOKE}"""),
}


def spelled_out_predicates(root: Path) -> list[str]:
    out = []
    for path in sorted((root / "monte").rglob("*.py")):
        rel = path.relative_to(root).as_posix()
        if rel == PREDICATE_HOME:
            continue
        text = " ".join(path.read_text().split())  # a test written over two lines is still one test
        out += [f"{rel}: {name}" for name, pattern in SPELLED_OUT.items() if pattern.search(text)]
    return out


def test_the_seal_predicates_are_written_once() -> None:
    """Is this row a test read, an admissible eval: `monte/ledger/predicates.py` says, nowhere else."""
    assert spelled_out_predicates(ROOT.parent) == []


def test_the_check_catches_a_planted_copy_of_the_test_read_predicate(tmp_path: Path) -> None:
    planted = tmp_path / "monte" / "evals" / "sneaky.py"
    planted.parent.mkdir(parents=True)
    planted.write_text('def reads(rows):\n    return [r for r in rows if r.kind == "eval"\n'
                       '            and r.split == "test" and not r.smoke]\n'
                       'def ok(r):\n    return r["status"] == "succeeded" and not r["smoke"]\n')
    assert spelled_out_predicates(tmp_path) == ["monte/evals/sneaky.py: is_test_read",  # a plan's, too
                                                "monte/evals/sneaky.py: is_admissible",
                                                "monte/evals/sneaky.py: spends_test_read"]
    planted.write_text('def skip(r):\n    return r.kind != "eval" or r.split != "test" or r.smoke\n')
    assert spelled_out_predicates(tmp_path) == ["monte/evals/sneaky.py: is_test_read",
                                                "monte/evals/sneaky.py: spends_test_read"]


@pytest.mark.parametrize("body, predicate", [
    ('split == "test" and not smoke', "spends_test_read"),
    ('e.split == "test" and not plan.smoke', "spends_test_read"),
    ('not plan.smoke and e.split == "test"', "spends_test_read"),
    ('e.split != "test" or plan.smoke', "spends_test_read"),
    ('plan.smoke and e.split == "test"', "is_test_smoke"),
    ('row["split"] == "test" and row["smoke"]', "is_test_smoke"),
])
def test_the_check_catches_a_planted_copy_of_a_plans_test_read(tmp_path: Path, body: str, predicate: str) -> None:
    """What a plan (a split and a smoke flag, no row yet) spends of the seal is written once too."""
    planted = tmp_path / "monte" / "evals" / "sneaky.py"
    planted.parent.mkdir(parents=True)
    planted.write_text(f"def reads(e, plan, row, split, smoke):\n    return {body}\n")
    assert spelled_out_predicates(tmp_path) == [f"monte/evals/sneaky.py: {predicate}"]


#: the sealed split named by hand: ``split == "test"``, ``r["split"] != "test"``, ``d.get("split") == "test"``
SEALED_BY_HAND = re.compile(rf"""(?:{_SPLIT}|\.get\(\s*["']split["']\s*\))\s*[!=]=\s*["']test["']""")


def sealed_split_by_hand(root: Path) -> list[str]:
    out = []
    for path in sorted((root / "monte").rglob("*.py")):
        rel = path.relative_to(root).as_posix()
        if rel != PREDICATE_HOME:
            out += [f"{rel}:{n}" for n, line in enumerate(path.read_text().splitlines(), 1)
                    if SEALED_BY_HAND.search(line)]
    return out


def test_the_sealed_split_is_named_only_by_its_predicate() -> None:
    """Whether a split is the sealed one is ``predicates.is_sealed``: nowhere else compares a split
    with ``"test"`` (a copy that drifts is a seal bypass)."""
    assert sealed_split_by_hand(ROOT.parent) == []


def test_the_sealed_split_check_catches_a_planted_copy(tmp_path: Path) -> None:
    planted = tmp_path / "monte" / "status" / "sneaky.py"
    planted.parent.mkdir(parents=True)
    planted.write_text('def f(r, d, split):\n    a = r.split == "test"\n    b = d.get("split") != "test"\n'
                       '    c = r["split"] == \'test\'\n    return a, b, c, split == "dev", r.kind == "test"\n')
    assert sealed_split_by_hand(tmp_path) == ["monte/status/sneaky.py:2", "monte/status/sneaky.py:3",
                                              "monte/status/sneaky.py:4"]


# --- one home per concept: a value or a path that has one home is built there, used everywhere --

#: concept -> (its home, what a copy of it spelled out by hand looks like)
ONE_HOME: dict[str, tuple[str, re.Pattern[str]]] = {
    "the zero object id": ("monte/ledger/refs.py", re.compile(r"""["']0["']\s*\*\s*40\b|\b0{40}\b""")),
    "a run folder": ("monte/workspace.py", re.compile(r"""/\s*["']runs["']\s*/|joinpath\(\s*["']runs["']""")),
    # a path in a ledger's tree (``runs/…``, ``cohorts/…``) or the vault's (``<folder>/<name>/manifest.json``)
    "a ledger tree path": ("monte/ledger/views.py", re.compile(
        r"""(?<![\w])[fb]?["'](?:runs|cohorts)/|listdir\(\s*["'](?:runs|cohorts)["']|\bb["'](?:runs|cohorts)["']"""
        r"""|\}/manifest\.json["']""")),
    # monte's own folder in the git directory: ``ledger/views.py``'s ``own_dir`` (``OWN_DIR``)
    ".git/monte/": ("monte/ledger/views.py", re.compile(
        r"""(?:commondir\(\)\)?|git_dir\)?|["']\.git["'])\s*/\s*["']monte["']|["']monte/[\w.-]+["']""")),
}


def spelled_out_homes(root: Path) -> list[str]:
    out = []
    for path in sorted((root / "monte").rglob("*.py")):
        rel = path.relative_to(root).as_posix()
        text = path.read_text()
        out += [f"{rel}: {concept}" for concept, (home, pattern) in ONE_HOME.items()
                if rel != home and pattern.search(text)]
    return out


def test_each_concept_with_one_home_is_built_only_there() -> None:
    """The zero id is ``refs.ZERO``; a run folder is ``Workspace.run_folder`` (or ``runs_folder``);
    a path in a ledger's tree or the vault's is built by ``ledger/views.py``, and so is monte's own
    folder in the git directory (``own_dir``)."""
    assert spelled_out_homes(ROOT.parent) == []


def test_the_check_catches_a_planted_copy_of_each_home(tmp_path: Path) -> None:
    planted = tmp_path / "monte" / "storage" / "sneaky.py"
    planted.parent.mkdir(parents=True)
    planted.write_text('NULL = b"0" * 40\n'
                       'def folder(ws, exp, run):\n    return ws.data_root / "runs" / exp / run\n')
    assert spelled_out_homes(tmp_path) == ["monte/storage/sneaky.py: the zero object id",
                                           "monte/storage/sneaky.py: a run folder"]
    planted.write_text('NULL = "0000000000000000000000000000000000000000"\n'
                       'def folder(root, exp):\n    return root.joinpath("runs", exp)\n')
    assert spelled_out_homes(tmp_path) == ["monte/storage/sneaky.py: the zero object id",
                                           "monte/storage/sneaky.py: a run folder"]

    for path in ('f"runs/{run[0]}/{run[1]}/index.json"', '"cohorts/" + cohort + "/nomination.json"',
                 'f"environments/{env}/manifest.json"'):
        planted.write_text(f"def read(snap, run, cohort, env):\n    return snap.read({path})\n")
        assert spelled_out_homes(tmp_path) == ["monte/storage/sneaky.py: a ledger tree path"], path
    planted.write_text('def first(snap, tree):\n    return snap.listdir("cohorts"), tree.get(b"runs")\n')
    assert spelled_out_homes(tmp_path) == ["monte/storage/sneaky.py: a ledger tree path"]
    for spelled in ('Path(store.repo.commondir()) / "monte" / "seal"', 'Path(git_dir) / "monte"',
                    'ws.repo_root / ".git" / "monte"', '"monte/tips.log"'):
        planted.write_text(f"def where(store, git_dir, ws):\n    return {spelled}\n")
        assert spelled_out_homes(tmp_path) == ["monte/storage/sneaky.py: .git/monte/"], spelled


# --- the layers of docs/architecture.md: imports go downward --------------------------------------

#: layer -> the packages and modules in it (docs/architecture.md's table); the longest prefix decides
LAYERS: dict[int, tuple[str, ...]] = {
    0: ("monte", "monte.errors", "monte.hashing", "monte.codekey", "monte.names", "monte.manifest", "monte.jsonl",
        "monte.processes", "monte.extras", "monte.ci", "monte.staging", "monte.result_type"),
    1: ("monte.ledger", "monte.stats", "monte.workspace", "monte.models.identity",
        "monte.models.tensors", "monte.models.fingerprint"),
    2: ("monte.githooks", "monte.envs", "monte.datasets", "monte.frozen", "monte.models", "monte.storage"),
    3: ("monte.runs",),
    4: ("monte.evals", "monte.training", "monte.experiments", "monte.repository", "monte.configshow", "monte.status",
        "monte.reads", "monte.diff",
        "monte.plot", "monte.claim", "monte.claim_signature", "monte.report"),
    5: ("monte.remote", "monte.grader"),
    6: ("monte.api", "monte.quickstart"),
    7: ("monte.cli", "monte.__main__", "monte.githooks.pre_commit", "monte.mcp"),  # entry points
}
#: two packages of one layer that must not import each other either
APART = (("monte.evals", "monte.training"),)


def layer_of(module: str) -> tuple[int, str] | None:
    best: tuple[int, str] | None = None
    for layer, prefixes in LAYERS.items():
        for p in prefixes:
            if (module == p or module.startswith(p + ".")) and (best is None or len(p) > len(best[1])):
                best = (layer, p)
    return best


def upward_imports(graph: dict[str, dict[str, list[tuple[int, str | None]]]]) -> list[str]:
    out = []
    for mod, edges in sorted(graph.items()):
        here = layer_of(mod)
        for target, where in sorted(edges.items()):
            there = layer_of(target)
            if here is None or there is None:
                out.append(f"{mod if here is None else target}: in no layer of docs/architecture.md")
            elif there[0] > here[0]:
                out.append(f"{mod}:{where[0][0]} (layer {here[0]}) imports {target} (layer {there[0]})")
            elif any({here[1], there[1]} == set(pair) for pair in APART):
                out.append(f"{mod}:{where[0][0]} imports {target}: {' and '.join(APART[0])} import neither each other")
    return out


def test_imports_go_down_the_layers() -> None:
    assert upward_imports(imports_of(_modules(ROOT))) == []


def test_the_layer_check_catches_a_planted_upward_import(tmp_path: Path) -> None:
    pkg = tmp_path / "monte"
    for sub in ("ledger", "evals", "training"):
        (pkg / sub).mkdir(parents=True)
        (pkg / sub / "__init__.py").write_text("")
    (pkg / "__init__.py").write_text("")
    (pkg / "ledger" / "rules.py").write_text("def f():\n    from monte.evals import plan\n")  # 1 -> 4
    (pkg / "evals" / "plan.py").write_text("from monte.training import chunk\n")  # 4 -> 4, kept apart
    (pkg / "training" / "chunk.py").write_text("from monte.ledger import rules\n")  # 4 -> 1: fine
    assert upward_imports(imports_of(_modules(pkg))) == [
        "monte.evals.plan:1 imports monte.training.chunk: monte.evals and monte.training import neither each other",
        "monte.ledger.rules:2 (layer 1) imports monte.evals.plan (layer 4)",
    ]


# --- the layout shows the layers: no loop between folders ----------------------------------------

#: a loop between parts still to be undone, each with what undoes it; the test below fails when
#: one is gone (strike it here) or another appears
KNOWN_FOLDER_LOOPS: dict[frozenset[str], str] = {}


def part_of(module: str) -> str:
    """The part of docs/architecture.md's table a module belongs to: its folder (``monte.ledger``
    for ``monte.ledger.verify.walk``), a root module itself, or a module the table names on its
    own (``monte.models.identity``, layer 1, inside ``models/``)."""
    found = layer_of(module)
    return found[1] if found is not None else ".".join(module.split(".")[:2])


def folder_graph(graph: dict[str, dict[str, list[tuple[int, str | None]]]]
                 ) -> dict[str, dict[str, list[tuple[int, str | None]]]]:
    """The module graph seen a part at a time: part -> {part it imports -> [(line, module)]}."""
    out: dict[str, dict[str, list[tuple[int, str | None]]]] = {}
    for mod, edges in graph.items():
        for target, where in edges.items():
            a, b = part_of(mod), part_of(target)
            if a != b:
                out.setdefault(a, {}).setdefault(b, []).extend((line, mod) for line, _ in where)
    return out


def folder_loops(graph: dict[str, dict[str, list[tuple[int, str | None]]]]) -> list[str]:
    """Each loop between parts, with one import of each edge in it (where to cut)."""
    parts = folder_graph(graph)
    out = []
    for loop in find_cycles(parts):
        edges = [f"{a} -> {b} ({parts[a][b][0][1]}:{parts[a][b][0][0]})"
                 for a in loop for b in loop if b in parts.get(a, {})]
        out.append(" <-> ".join(loop) + ": " + "; ".join(edges))
    return out


def test_no_loop_between_folders() -> None:
    loops = {frozenset(c) for c in find_cycles(folder_graph(imports_of(_modules(ROOT))))}
    new = [line for line in folder_loops(imports_of(_modules(ROOT)))
           if frozenset(line.split(":")[0].split(" <-> ")) not in KNOWN_FOLDER_LOOPS]
    assert not new, "folders that import each other (a lower one must not reach up):\n" + "\n".join(new)
    gone = [" <-> ".join(sorted(k)) for k in KNOWN_FOLDER_LOOPS if k not in loops]
    assert not gone, f"undone, strike from KNOWN_FOLDER_LOOPS: {gone}"


def test_the_folder_check_catches_a_planted_loop(tmp_path: Path) -> None:
    pkg = tmp_path / "monte"
    for sub in ("envs", "storage"):
        (pkg / sub).mkdir(parents=True)
        (pkg / sub / "__init__.py").write_text("")
    (pkg / "__init__.py").write_text("")
    # no module loop: manage -> frozen -> freeze -> (nothing); the folders still loop envs <-> frozen
    (pkg / "envs" / "manage.py").write_text("from monte import frozen\n")
    (pkg / "frozen.py").write_text("def sweep():\n    from monte.envs import freeze\n")
    (pkg / "envs" / "freeze.py").write_text("from monte.storage import vault\n")
    (pkg / "storage" / "vault.py").write_text("")
    graph = imports_of(_modules(pkg))
    assert find_cycles(graph) == []
    assert folder_loops(graph) == ["monte.envs <-> monte.frozen: monte.envs -> monte.frozen (monte.envs.manage:1); "
                                   "monte.frozen -> monte.envs (monte.frozen:2)"]


def test_a_module_the_table_names_apart_is_a_part_of_its_own() -> None:
    # models/identity.py is layer 1 inside the layer-2 models/: ledger may use it, and the
    # folder check reads it as its own part (docs/architecture.md)
    assert part_of("monte.models.identity") == "monte.models.identity"
    assert part_of("monte.models.locate") == "monte.models"
    assert part_of("monte.ledger.verify.walk") == "monte.ledger"
    assert part_of("monte.frozen") == "monte.frozen"


def test_the_code_says_what_was_decided_not_which_issue() -> None:
    """A comment says the decision ("the search verdict", "K samples per item"), not "issue 45":
    the issue tracker is not part of the package, and a reader of the code has only the code."""
    cited = [f"{p.relative_to(ROOT.parent)}:{n}" for p in sorted(ROOT.rglob("*.py"))
             for n, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1)
             if re.search(r"\b[Ii]ssues? #?\d+", line)]
    assert cited == []

