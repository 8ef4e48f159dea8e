"""``rloo``: ``trl.RLOOTrainer`` on a trainable environment's curriculum, with the same reward as
GRPO (the environment's own grader, in process or through its NeMo Gym server: 1 only for a full
score). Each completion's baseline is the mean reward of the other completions of its prompt.
As for GRPO, ``steps_per_generation`` equals ``gradient_accumulation_steps`` and
``num_iterations`` is 1, so a chunk edge never falls inside a generation buffer."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from monte.training.plan import TrainPlan


def build(plan: TrainPlan, r: Any, common: dict[str, Any], tok: Any, rows: list[dict[str, Any]],
          callbacks: list[Any], reward: Callable[..., list[float | None]] | None = None) -> Any:
    from trl import RLOOConfig, RLOOTrainer

    from monte.training.trainers.prompts import curriculum_prompts

    cfg = RLOOConfig(**{"steps_per_generation": r.gradient_accumulation_steps, "num_iterations": 1, **common})
    assert reward is not None
    return RLOOTrainer(model=plan.init_model, reward_funcs=reward, args=cfg,
                       train_dataset=curriculum_prompts(rows), processing_class=tok, callbacks=callbacks)
