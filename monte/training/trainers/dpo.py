"""``dpo``: ``trl.DPOTrainer`` on the preference pairs of a frozen ``--kind preference`` Dataset.

The reference model is never named by the recipe: TRL loads it from the path the policy came
from, which is the stage's starting weights (the base model from base, the parent checkpoint at
a stage boundary; on a same-recipe continuation the trainer is built on the stage's start and the
resume loads the parent's weights), so the anchor stays put for the whole stage, as GRPO's does.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from monte.training.plan import TrainPlan


def preference_rows(rows: list[dict[str, Any]], columns: dict[str, str]) -> list[dict[str, Any]]:
    """The frozen rows in TRL's preference shape: ``prompt`` (when explicit), ``chosen``,
    ``rejected``, whatever the pile named its columns."""
    return [{k: row[col] for k, col in columns.items()} for row in rows]


def build(plan: TrainPlan, r: Any, common: dict[str, Any], tok: Any, rows: list[dict[str, Any]],
          callbacks: list[Any], reward: Callable[..., list[float | None]] | None = None) -> Any:
    from datasets import Dataset
    from trl import DPOConfig, DPOTrainer

    data = Dataset.from_list(preference_rows(rows, plan.source.columns or {}))
    return DPOTrainer(model=plan.init_model, args=DPOConfig(**common), train_dataset=data, processing_class=tok,
                      callbacks=callbacks)
