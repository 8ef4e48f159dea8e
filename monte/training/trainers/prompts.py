"""The prompts GRPO and distillation train on: an environment's curriculum."""

from __future__ import annotations

import json
from typing import Any


def curriculum_prompts(rows: list[dict[str, Any]]) -> Any:
    """An environment's curriculum as TRL's prompt dataset: a NeMo Gym row's prompt is its chat
    (TRL renders it with the chat template); its answer, metadata and id ride along for the reward."""
    from datasets import Dataset

    from monte.envs.grading import prompt_of, task_id

    return Dataset.from_list([{"prompt": prompt_of(row), "answer": str(row.get("answer", "")),
                               "metadata": json.dumps(row.get("metadata", {}), sort_keys=True),
                               "item_id": task_id(row, "curriculum", k)} for k, row in enumerate(rows)])
