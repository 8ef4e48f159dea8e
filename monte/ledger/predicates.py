"""What a row is, for the rules: one definition each, used everywhere.

An eval planned before its row exists spends a touch of the sealed split where
:func:`spends_test_read` says so (:func:`is_test_smoke`: one that reads the test split and spends
nothing, so nothing of it is graded). The seal counts test reads with :func:`is_test_read`; pairing and selection read only
:func:`is_admissible` evals; a baseline is :func:`is_base_eval`. Each is written here once, so
that no two places can drift apart (one copy that drifts is a seal bypass):
``tests/test_architecture.py`` refuses the same test spelled out anywhere else in ``monte/``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # annotations only: a read of the rows needs no pydantic
    from monte.ledger.records import RunRow as _Row


#: the sealed split: read twice per cohort, never trained on, never shown item by item
SEALED = "test"


def is_sealed(split: str | None) -> bool:
    """``split`` is the sealed test split (what a read of it spends: :func:`spends_test_read`)."""
    return split == SEALED


def spends_test_read(split: str | None, smoke: bool) -> bool:
    """An eval of ``split`` spends a touch of the sealed test split: a test eval that is no smoke
    run (what a plan asks before its row exists; :func:`is_test_read` asks it of a row)."""
    return is_sealed(split) and not smoke


def is_test_smoke(split: str | None, smoke: bool) -> bool:
    """A smoke eval of the test split: it spends no touch, so none of its items is graded, scored
    or recorded (it proves that generation runs on the split's format, and reveals nothing)."""
    return is_sealed(split) and smoke


def is_test_read(r: _Row) -> bool:
    """A spent touch of the sealed test split: every non-smoke test eval row, whatever became of
    it (a crash still spent its touch)."""
    return r.kind == "eval" and spends_test_read(r.split, r.smoke)


def is_test_read_dict(r: Mapping[str, Any]) -> bool:
    """:func:`is_test_read` of a row as an index holds it (a dict)."""
    return r["kind"] == "eval" and spends_test_read(r["split"], r["smoke"])


def is_admissible(r: _Row) -> bool:
    """An eval that may be evidence: it succeeded and is not a smoke run."""
    return r.kind == "eval" and r.status == "succeeded" and not r.smoke


def target_kind(r: _Row) -> str | None:
    """What an eval scored: ``"base"`` (the cohort's base model) or ``"checkpoint"``."""
    t = r.plan.get("target") or {}
    return t.get("kind") if isinstance(t, dict) else None


def is_base_eval(r: _Row) -> bool:
    """An admissible eval of the base model: a baseline (``dev@0``, ``test@0``) where it is the first."""
    return is_admissible(r) and target_kind(r) == "base"


def is_checkpoint_eval(r: _Row) -> bool:
    """An admissible eval of a checkpoint: a cycle's evidence on dev, a final claim on test."""
    return is_admissible(r) and target_kind(r) == "checkpoint"
