"""What a task's ``!function`` modules import, and the frozen copies its evals import instead.

A ``!function`` module beside the YAML is only the start of what scores a document: it may import
a helper beside it, or a metric from a module on ``PYTHONPATH``, which can change after the freeze
and move every score while each hash monte proves stays the same. :func:`scan` follows the import
statements of each module (read, not run: the modules were imported once already, by lm-eval's own
loader, when the YAML was checked) and sorts each module imported into

- the standard library: nothing to record;
- an installed distribution (``importlib.metadata``): its name and version are recorded, and an
  eval refuses when it is missing or at another version;
- anything else (a file on ``sys.path`` that no distribution owns): its file is frozen under
  ``lmeval/<exam>/modules/`` in its package layout, and its own imports followed in turn.

:func:`frozen_imports` puts the frozen copies first while an eval builds and scores the task, so
the module the freeze saw is the one that runs. An import made from a string at run time
(``importlib.import_module(name)``) is not seen: docs/lm-eval.md says so.
"""

from __future__ import annotations

import ast
import importlib.metadata
import importlib.util
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from monte.errors import error


@dataclass
class Closure:
    #: module name -> its source file (a package's ``__init__.py``), frozen
    modules: dict[str, Path] = field(default_factory=dict)
    #: distribution name -> version, recorded
    distributions: dict[str, str] = field(default_factory=dict)

    def relpath(self, name: str) -> str:
        """Where a module's file lives under ``modules/``: its package layout."""
        path = self.modules[name]
        base = name.replace(".", "/")
        return f"{base}/__init__.py" if path.name == "__init__.py" else f"{base}.py"


def _imported(tree: ast.AST, package: str | None) -> list[str]:
    """Every module an import statement of ``tree`` names, parents first (importing ``a.b`` runs
    ``a`` too); ``from a import b`` names ``a.b`` as well, kept only if it resolves to a module."""
    out: list[str] = []

    def add(name: str) -> None:
        parts = name.split(".")
        out.extend(".".join(parts[:i]) for i in range(1, len(parts) + 1))

    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                add(alias.name)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                if not package:
                    continue  # a relative import in a module loaded by its path cannot run
                parts = package.split(".")
                if node.level - 1 > len(parts) - 1:
                    continue
                base = ".".join(parts[:len(parts) - node.level + 1])
                mod = f"{base}.{node.module}" if node.module else base
            else:
                mod = node.module or ""
            if not mod:
                continue
            add(mod)
            out.extend(f"{mod}.{alias.name}" for alias in node.names if alias.name != "*")
    return list(dict.fromkeys(out))


def _distributions() -> dict[str, list[str]]:
    return {k: list(v) for k, v in importlib.metadata.packages_distributions().items()}


def _find(name: str) -> object | None:
    try:
        return importlib.util.find_spec(name)
    except (ImportError, ValueError, AttributeError):
        return None  # a parent that is not a package (``from a import function``): not a module


def scan(sources: list[Path], names: list[str] | None = None) -> Closure:
    """The import closure of the ``!function`` module files ``sources`` (loaded by their path,
    beside the YAML) and modules ``names`` (a ``!function`` lm-eval imports by its name)."""
    dists = _distributions()
    out = Closure()
    queue: list[tuple[Path, str | None]] = [(p, None) for p in sources]
    seen_files: set[Path] = set()
    seen_names: set[str] = set()
    pending = [n for name in names or [] for n in _imported(ast.parse(f"import {name}"), None)]
    while queue or pending:
        if queue:
            path, package = queue.pop(0)
            if path in seen_files:
                continue
            seen_files.add(path)
            try:
                tree = ast.parse(path.read_bytes(), filename=str(path))
            except SyntaxError as e:
                raise error("E_BAD_INPUT", f"the task's module {path} does not parse: {e}",
                            "fix that module") from None
            found = _imported(tree, package)
        else:
            found, pending = pending, []
        for name in found:
            if name in seen_names:
                continue
            seen_names.add(name)
            top = name.split(".")[0]
            if top in sys.stdlib_module_names or top in sys.builtin_module_names:
                continue
            if top in dists:
                for d in dists[top]:
                    out.distributions[d] = importlib.metadata.version(d)
                continue
            spec = _find(name)
            origin = getattr(spec, "origin", None)
            if spec is None or origin in (None, "built-in", "frozen", "namespace"):
                continue  # not importable here (an optional import), or a namespace package: no file
            file = Path(str(origin)).resolve()
            if file.suffix != ".py":
                raise error("E_REFUSED", f"the task imports {name} ({file}), a compiled module that no installed "
                            "distribution owns: monte cannot freeze it", f"install {name} as a package (it is then "
                            "recorded by version) or import it as Python source")
            out.modules[name] = file
            is_package = bool(getattr(spec, "submodule_search_locations", None))
            queue.append((file, name if is_package else name.rpartition(".")[0] or None))
    return out


def check_distributions(task: str, recorded: dict[str, str]) -> None:
    """Each distribution the task's modules import, installed at the version frozen."""
    for name, version in sorted(recorded.items()):
        try:
            now = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            raise error("E_NOT_FOUND", f"lm-eval task {task!r} imports {name}, which is not installed here "
                        f"(frozen with {name}=={version})", f"install it: pip install '{name}=={version}'") from None
        if now != version:
            raise error("E_INTEGRITY", f"lm-eval task {task!r} imports {name} {now}, not {version} as frozen: "
                        "its scores could differ", f"install it as frozen: pip install '{name}=={version}'")


@contextmanager
def frozen_imports(folder: Path | None, names: list[str]) -> Iterator[None]:
    """While inside: ``folder`` (the frozen ``modules/``) first on ``sys.path``, and the modules
    ``names`` imported from there (a copy already imported from elsewhere is set aside, and put
    back after). No bytecode is written meanwhile: a ``__pycache__`` that lm-eval's import of a
    frozen ``!function`` module left in the frozen folder would be hashed with it at the freeze,
    then rewritten wherever the files land with other mtimes (``monte env install``, a grader's
    copy), and the next eval would refuse the task as edited."""
    saved = sys.dont_write_bytecode
    sys.dont_write_bytecode = True
    try:
        with _on_path(folder, names):
            yield
    finally:
        sys.dont_write_bytecode = saved


@contextmanager
def _on_path(folder: Path | None, names: list[str]) -> Iterator[None]:
    if folder is None or not names:
        yield
        return
    tops = {n.split(".")[0] for n in names}
    aside = {k: v for k, v in sys.modules.items() if k.split(".")[0] in tops}
    for k in aside:
        del sys.modules[k]
    sys.path.insert(0, str(folder))
    importlib.invalidate_caches()
    try:
        yield
    finally:
        try:
            sys.path.remove(str(folder))
        except ValueError:
            pass
        for k in [k for k in sys.modules if k.split(".")[0] in tops]:
            del sys.modules[k]
        sys.modules.update(aside)
