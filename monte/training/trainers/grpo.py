"""``grpo``: ``trl.GRPOTrainer`` with one reward function that calls the environment's own grader
and pays 1 only for a full score (partial credit gets gamed). ``steps_per_generation`` equals
``gradient_accumulation_steps`` and ``num_iterations`` is 1, so a chunk edge never falls inside a
generation buffer (that buffer is not in a checkpoint)."""

from __future__ import annotations

import json
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path
from typing import TYPE_CHECKING, Any

from monte.errors import error

if TYPE_CHECKING:
    from monte.training.plan import TrainPlan


def build(plan: TrainPlan, r: Any, common: dict[str, Any], tok: Any, rows: list[dict[str, Any]],
          callbacks: list[Any], reward: Callable[..., list[float | None]] | None = None) -> Any:
    from trl import GRPOConfig, GRPOTrainer

    from monte.training.trainers.prompts import curriculum_prompts

    # one generation buffer per optimizer step unless the recipe says otherwise (check_chunk
    # then keeps a chunk edge off a buffer's middle)
    grpo_cfg = GRPOConfig(**{"steps_per_generation": r.gradient_accumulation_steps, "num_iterations": 1,
                             **common})
    assert reward is not None
    return GRPOTrainer(model=plan.init_model, reward_funcs=reward, args=grpo_cfg,
                       train_dataset=curriculum_prompts(rows), processing_class=tok, callbacks=callbacks)


def reward(plan: TrainPlan, threshold: float, rows: list[dict[str, Any]], cleanup: ExitStack, *,
            config: dict[str, Any], log: Path) -> Callable[..., list[float | None]]:
    """The environment's own grader as the reward: 1 for a full score, else 0. A NeMo Gym
    curriculum's grader is its resources server, started here and stopped by ``cleanup``."""
    from monte.envs import grading
    from monte.envs.registry import get

    if grading.is_gym(plan.source.grader):
        identity = (plan.source.grader or {}).get("curriculum")
        if not isinstance(identity, dict):
            raise error("E_INTEGRITY", f"environment {plan.source.name!r} names no NeMo Gym server for its curriculum",
                        "re-freeze it with `monte env add --server`")
        gym = grading.Reward(identity, {grading.task_id(row, "curriculum", k): row for k, row in enumerate(rows)},
                             threshold, config=config, log=log)
        cleanup.callback(gym.close)
        return gym

    bench = get(plan.source.benchmark or "").benchmark

    def grader_reward(prompts: list[Any], completions: list[Any], answer: list[str], metadata: list[str],
                      item_id: list[str], **_: Any) -> list[float | None]:
        out: list[float | None] = []
        for p, c, a, m, i in zip(prompts, completions, answer, metadata, item_id, strict=True):
            text = c if isinstance(c, str) else (c[-1]["content"] if c else "")
            item = {"id": i, "prompt": p, "answer": a, "metadata": json.loads(m)}
            out.append(1.0 if bench.grade(item, text) >= threshold else 0.0)
        return out

    grader_reward.__name__ = f"grader_{plan.source.benchmark}"
    return grader_reward
