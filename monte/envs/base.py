"""What an environment benchmark is, to monte.

A *benchmark* generates items deterministically from a seed and grades an answer to one item.
The built-in catalog (``monte.envs.catalog``) provides several, built on reasoning-gym; a user
package adds its own through the ``monte.environments`` entry point group, whose entry points
load to an :class:`EnvironmentProvider`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Protocol, runtime_checkable

#: One exam or curriculum item as frozen to disk (one JSON object per line).
#: Required keys: ``id`` (unique in the environment), ``prompt`` (what the model is asked),
#: ``answer`` (the reference answer). Optional: ``metadata`` (a dict the grader may use).
Item = dict[str, Any]


@runtime_checkable
class Benchmark(Protocol):
    name: str
    description: str
    #: Whether it can serve as a training curriculum (``env add --server``).
    trainable: bool
    #: Default item counts per split: ``{"dev": 200, "test": 200, "curriculum": 5000}``.
    sizes: dict[str, int]
    #: A version string recorded in manifests; change it when generation changes.
    version: str

    def generate(self, seed: int, n: int) -> list[Item]:
        """Exactly the same ``n`` items for the same ``seed``, on every machine."""
        ...

    def grade(self, item: Item, answer: str) -> float:
        """Score a model's raw answer text for ``item``, in [0, 1]."""
        ...


class EnvironmentProvider(Protocol):
    """What a ``monte.environments`` entry point loads to."""

    def benchmarks(self) -> dict[str, Benchmark]: ...

    def install(self, name: str, folder: Path, manifest: dict[str, Any]) -> None:
        """Optional: put the frozen files of ``name`` into ``folder`` (when the data root lacks
        them). The caller proves every hash against ``manifest`` afterwards."""
        ...
