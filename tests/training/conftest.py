"""Fixtures for the training tests: real tiny models and a trainable experiment with 4-step chunks.

Everything trains for real, through TRL, on a randomly initialised 3 M-parameter model (no
download). Chunks are kept to 4 steps with batches of 8-16, so each takes about a second once
torch is imported; torch runs on one thread (two threads on a busy 2-core box is many times slower).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.support.kept import Kept, kept_answer
from tests.support.trainhelp import (
    DPO,
    GRPO,
    RLOO,
    SFT,
    curriculum,
    distill,
    trained,
    write_preference_rows,
    write_recipe,
    write_sft_rows,
)


@pytest.fixture(scope="session", autouse=True)
def _one_thread() -> None:
    import torch

    torch.set_num_threads(1)


@pytest.fixture
def teacher(tiny_models: dict[int, Path]) -> Path:
    return tiny_models[1]


def _trainable(repo: Path, monte, base_model: Path, teacher: Path, tmp_path: Path) -> None:
    assert monte("env", "add", "--server", "parity", "--dev", "parity", "--test", "parity").code == 0
    rows = write_sft_rows(tmp_path / "parity-sft.jsonl", curriculum(repo)[:256])
    r = monte("dataset", "add", "parity-sft", "--from-file", str(rows), "--kind", "sft")
    assert r.code == 0, r.err
    r = monte("experiment", "init", "exp", "--eval", "parity", "--model", str(base_model),
              "--steps-per-chunk", "4")
    assert r.code == 0, r.err
    write_recipe(repo, "sft-t", SFT)
    write_recipe(repo, "grpo-t", GRPO)
    write_recipe(repo, "distill-t", distill(teacher))


@pytest.fixture
def trainable(repo: Path, monte, base_model: Path, teacher: Path, tmp_path: Path, kept: Kept) -> str:
    """The trainable parity environment, an SFT dataset ``parity-sft`` from its curriculum (its rows
    in ``tmp_path``), the experiment ``exp`` (4 steps per chunk) and the repo recipes ``sft-t``,
    ``grpo-t`` and ``distill-t``. No baseline yet. Built once per worker (``kept``)."""
    kept.restore("trainable", repo, tmp_path, lambda: _trainable(repo, monte, base_model, teacher, tmp_path))
    return "exp"


@pytest.fixture
def ready(repo: Path, monte, base_model: Path, teacher: Path, tmp_path: Path, kept: Kept) -> str:
    """``trainable`` plus both baselines of the base model's cohort: dev@0 and test@0, scored by
    the real model. Built once per worker (``kept``): the two reads are most of a test's setup."""
    def build() -> None:
        _trainable(repo, monte, base_model, teacher, tmp_path)
        assert monte("eval", "--yes").code == 0
        assert monte("eval", "--split", "test", "--yes").code == 0

    kept.restore("ready", repo, tmp_path, build)
    return "exp"


@pytest.fixture
def prefs(repo: Path, monte, ready: str, tmp_path: Path, kept: Kept) -> str:
    """``ready`` plus the preference Dataset ``parity-pref`` (right answer chosen, the other
    rejected) from the curriculum (its rows in ``tmp_path``), and the repo recipes ``dpo-t`` and
    ``rloo-t``. Built once per worker (``kept``)."""
    def build() -> None:
        rows = write_preference_rows(tmp_path / "parity-pref.jsonl", curriculum(repo)[:256])
        r = monte("dataset", "add", "parity-pref", "--from-file", str(rows), "--kind", "preference")
        assert r.code == 0, r.err
        write_recipe(repo, "dpo-t", DPO)
        write_recipe(repo, "rloo-t", RLOO)

    kept.restore("prefs", repo, tmp_path, build)
    return ready


@pytest.fixture
def sft_chunk(repo: Path, monte, ready: str, tmp_path: Path, kept: Kept) -> dict[str, Any]:
    """``ready`` plus one 4-step chunk of ``sft-t`` on ``parity-sft`` from the base model, on one
    process: the row ``monte train --json`` answered. The chunk most tests start from or compare
    with, trained for real once per worker (``kept``) and copied for the rest."""
    return dict(kept_answer(kept, "sft-chunk", repo, tmp_path, lambda: trained(
        monte, "--recipe", "sft-t", "--source", "parity-sft", "--from-base")))


@pytest.fixture
def prefs_sft_chunk(repo: Path, monte, prefs: str, tmp_path: Path, kept: Kept) -> dict[str, Any]:
    """``sft_chunk`` on ``prefs`` (the stage an SFT-then-DPO or SFT-then-RLOO test crosses)."""
    return dict(kept_answer(kept, "prefs-sft-chunk", repo, tmp_path, lambda: trained(
        monte, "--recipe", "sft-t", "--source", "parity-sft", "--from-base")))


@pytest.fixture
def dpo_chunk(repo: Path, monte, prefs: str, tmp_path: Path, kept: Kept) -> dict[str, Any]:
    """``prefs`` plus one 4-step chunk of ``dpo-t`` on ``parity-pref`` from the base model, on one
    process (kept as ``sft_chunk`` is)."""
    return dict(kept_answer(kept, "dpo-chunk", repo, tmp_path, lambda: trained(
        monte, "--recipe", "dpo-t", "--source", "parity-pref", "--from-base")))
