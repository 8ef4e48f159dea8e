"""Fixtures for the evaluation tests: an experiment on the real tiny base model (``tiny_models``
and ``base_model`` come from the root conftest), and checkpoints.

Checkpoints here are recorded through the same API `monte train` uses
(`monte.training.record`): a real, loadable model folder per checkpoint, a train row, and a
lineage commit. Their weights are differently-seeded tiny models rather than trained ones:
these tests are about the rules of the record, not about learning.
"""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture
def exp(repo: Path, monte, base_model: Path) -> str:  # type: ignore[no-untyped-def]
    """An experiment on the trainable parity environment (dev 200, test 200), base model seed 0."""
    assert monte("env", "add", "--server", "parity", "--dev", "parity", "--test", "parity").code == 0
    r = monte("experiment", "init", "exp", "--eval", "parity", "--model", str(base_model))
    assert r.code == 0, r.err
    return "exp"
