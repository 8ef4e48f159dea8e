"""Recording checkpoints for the evaluation tests.

Checkpoints here are recorded through the same API `monte train` uses
(`monte.training.record`): a real, loadable model folder per checkpoint, a train row, and a
lineage commit. Their weights are differently-seeded tiny models rather than trained ones:
these tests are about the rules of the record, not about learning.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from monte.ledger.lineage import cohort_of, servable_files


def checkpoint(repo: Path, weights: Path, *, parent: tuple[str, int] | None = None, steps: int = 50,
               algorithm: str = "sft", source: str = "parity-sft", recipe: str = "sft-tiny",
               boundary: bool = False, base: Path | None = None, smoke: bool = False,
               experiment: str = "exp", start_step: int | None = None) -> str:
    """Record a finished training chunk with one checkpoint; return the run id."""
    from monte.ledger.experiment import Ledger
    from monte.ledger.lineage import ensure_base
    from monte.training.record import finish_chunk, save_checkpoint, start_chunk
    from monte.workspace import open_workspace

    ws = open_workspace(repo)
    meas = Ledger(ws.store, experiment).measurement()
    base_dir = base or Path(meas.model or "")
    files = servable_files(base_dir)
    cohort, _ = ensure_base(ws.store, experiment, str(base_dir), files)
    start = start_step if start_step is not None else (parent[1] if parent else 0)
    plan: dict[str, Any] = {"recipe": {"name": recipe, "sha256": "0" * 64, "algorithm": algorithm},
                            "source": source, "parent": {"run": parent[0], "step": parent[1]} if parent else None,
                            "boundary": boundary, "start_step": start, "steps": steps}
    row = start_chunk(ws, experiment, cohort=cohort, base_model=str(base_dir), plan=plan, smoke=smoke)
    if not smoke:
        tmp = repo.parent / f"ck-{row.run}"
        shutil.copytree(weights, tmp)
        row = save_checkpoint(ws, experiment, row, start + steps, tmp)
    finish_chunk(ws, experiment, row, "succeeded")
    return row.run


def cohort_for(model: Path) -> str:
    return cohort_of(servable_files(model))
