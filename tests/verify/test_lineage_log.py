"""`git log` reads as the lineage: the documented command (docs/records.md) draws one experiment's lineage tree alone,
and each lineage commit's subject carries the move (``algorithm:source``), where it starts, and a
stage boundary.

The bug pinned here: lineage subjects said only ``checkpoint RUN@STEP``, and the obvious
``git log --graph --oneline --glob='refs/heads/monte/*'`` stacked ledgers, the vault and the
lineage of every experiment in one column.
"""

from __future__ import annotations

import re
import shlex
import subprocess
from pathlib import Path

from tests.verify.forgehelp import Honest, checkpoint

RECORDS_PAGE = Path(__file__).resolve().parents[2] / "docs" / "records.md"


def _documented_lineage_command() -> list[str]:
    lines = [line for line in RECORDS_PAGE.read_text().splitlines()
             if line.startswith("git log --graph") and "lineage" in line]
    assert len(lines) == 1, lines
    return shlex.split(lines[0])


def test_lineage_subjects_carry_the_move_and_the_stage_boundary(honest: Honest, recorded_models: dict[int, Path]) -> None:
    a, b = honest["a"], honest["b"]
    c = checkpoint(honest.path, recorded_models[3], parent=(b, 100), algorithm="grpo", source="parity",
                   recipe="grpo-tiny", boundary=True)
    cmd = _documented_lineage_command()
    assert cmd[:2] == ["git", "log"]
    out = subprocess.run(["git", "-C", str(honest.path), *cmd[1:]], capture_output=True, text=True, check=True).stdout
    subjects = [re.sub(r"^[*|/\\ ]+[0-9a-f]{7,} ", "", line) for line in out.splitlines() if re.search(r"[0-9a-f]{7,} ", line)]
    assert f"checkpoint {a}@50: sft:parity-sft from base" in subjects, out
    assert f"checkpoint {b}@100: sft:parity-sft from {a}@50" in subjects, out
    assert f"checkpoint {c}@150: {b}@100 =grpo:parity=> (stage boundary)" in subjects, out
    assert any(s.startswith("base model of cohort") for s in subjects), out
    # the lineage alone: no ledger record, no vault freeze, no other experiment
    assert not any(s.startswith(("eval", "train", "experiment", "nominate", "freeze", "environment")) for s in subjects), out
    assert all(s.startswith(("checkpoint ", "base model of cohort")) for s in subjects), out


def test_a_runs_later_checkpoint_names_its_own_previous_step() -> None:
    from monte.ledger.lineage import checkpoint_subject

    info = {"run": "r2", "step": 150, "recipe": {"name": "grpo-tiny", "algorithm": "grpo"}, "source": "parity",
            "boundary": True, "parent": {"run": "r1", "step": 100}}
    assert checkpoint_subject(info) == "checkpoint r2@150: r1@100 =grpo:parity=> (stage boundary)"
    assert checkpoint_subject({**info, "step": 200}, previous=150) == "checkpoint r2@200: grpo:parity from r2@150"
    assert checkpoint_subject({**info, "boundary": False, "parent": None}) == "checkpoint r2@150: grpo:parity from base"
