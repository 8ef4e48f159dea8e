"""Every benchmark monte can freeze: the built-in catalog plus entry-point providers.

A package adds benchmarks by declaring, in its own ``pyproject.toml``::

    [project.entry-points."monte.environments"]
    mypkg = "mypkg.monte_env:provider"

where ``provider`` has ``benchmarks() -> dict[str, Benchmark]`` and, optionally,
``install(name, folder, manifest)``. A provider's benchmark whose name the catalog already uses is
reachable as ``<entry point name>:<benchmark>``.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from importlib.metadata import entry_points
from typing import Any

from monte.envs.base import Benchmark
from monte.errors import error

GROUP = "monte.environments"
BUILTIN = "monte"


@dataclass(frozen=True)
class Entry:
    name: str
    provider: str  # "monte" for the built-in catalog, else the entry point's name
    benchmark: Benchmark
    provider_obj: Any = None


@cache
def catalog() -> dict[str, Entry]:
    from monte.envs.catalog import builtin_benchmarks

    out = {name: Entry(name, BUILTIN, b) for name, b in builtin_benchmarks().items()}
    for ep in sorted(entry_points(group=GROUP), key=lambda e: e.name):
        try:
            provider = ep.load()
            found = provider.benchmarks()
        except Exception as e:  # a broken plugin must not break monte
            import sys

            print(f"monte: skipping environment provider {ep.name!r}: {e}", file=sys.stderr)
            continue
        for name, bench in sorted(found.items()):
            key = name if name not in out else f"{ep.name}:{name}"
            out[key] = Entry(key, ep.name, bench, provider)
    return out


def get(name: str) -> Entry:
    entries = catalog()
    if name not in entries:
        raise error(
            "E_NOT_FOUND",
            f"no benchmark named {name!r} in the catalog",
            "list what can be frozen with `monte env list --available`",
        )
    return entries[name]
