"""The recording verify's honest ledger replays (recorded.py) is what its model folders answer."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.verify.recorded import HERE, record


def test_the_recorded_answers_are_what_the_models_answer_today(tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    # record() loads the folders with transformers (torch): tests/conftest.py's SLOW_PATHS names this file
    monkeypatch.chdir(tmp_path)
    recorded = json.loads((HERE / "answers.json").read_text())
    again = record(tmp_path / "again")
    assert again["tensors"] == recorded["tensors"]  # the tiny model's tensors, names and shapes
    assert again["fingerprints"] == recorded["fingerprints"], "record again: python -m tests.verify.recorded"
    for seed, splits in recorded["answers"].items():
        for split, answers in splits.items():
            changed = [p for p, a in answers.items() if again["answers"][seed][split].get(p) != a]
            assert not changed and len(again["answers"][seed][split]) == len(answers), (
                f"seed {seed} {split}: {len(changed)} answers differ; record again: python -m tests.verify.recorded")
