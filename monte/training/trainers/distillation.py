"""``distillation``: ``trl.DistillationTrainer`` (on-policy: the student samples and is trained
toward the teacher's token distribution), prompts from the environment's curriculum."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from monte.training.plan import TrainPlan



def build(plan: TrainPlan, r: Any, common: dict[str, Any], tok: Any, rows: list[dict[str, Any]],
          callbacks: list[Any], reward: Callable[..., list[float | None]] | None = None) -> Any:
    from trl import DistillationConfig, DistillationTrainer

    from monte.training.trainers.prompts import curriculum_prompts

    return DistillationTrainer(model=plan.init_model, teacher_model=plan.teacher or r.teacher,
                               args=DistillationConfig(**common),
                               train_dataset=curriculum_prompts(rows).select_columns(["prompt"]),
                               processing_class=tok, callbacks=callbacks)
