"""The TRL trainers a chunk runs on, one module per algorithm (``sft``, ``dpo``, ``grpo``, ``rloo``,
``distillation``).

Which TRL classes, and why:

- ``sft``: ``trl.SFTTrainer`` on a prompt/completion (or conversational) dataset made from a
  frozen ``--kind sft`` Dataset; loss on the completion only.
- ``dpo``: ``trl.DPOTrainer`` on the pairs of a frozen ``--kind preference`` Dataset; the
  reference model is the stage's starting weights (TRL loads it from where the policy came from).
- ``grpo``: ``trl.GRPOTrainer`` with one reward function that calls the environment's own grader
  and pays 1 only for a full score (partial credit gets gamed). ``steps_per_generation`` equals
  ``gradient_accumulation_steps`` and ``num_iterations`` is 1, so a chunk edge never falls inside
  a generation buffer (that buffer is not in a checkpoint).
- ``rloo``: ``trl.RLOOTrainer`` with GRPO's reward and GRPO's rule on generation buffers; the
  baseline of each completion is the others' mean reward for its prompt (leave one out).
- ``distillation``: ``trl.DistillationTrainer`` (on-policy: the student samples and is trained
  toward the teacher's token distribution), prompts from the environment's curriculum.

Learning-rate schedules: a constant one (with optional warm-up) needs nothing more. A decaying
one is rebuilt from ``max_steps`` on resume, so it would jump at every chunk edge; a recipe
declares its horizon (``schedule_steps``), the trainer's ``max_steps`` is that horizon in every
chunk of the stage, and a callback saves and stops at the chunk's own end.

A new algorithm: a module here with ``build(plan, r, common, tok, rows, callbacks, reward)``,
named in :data:`BUILDERS`, its recipe schema in :mod:`monte.training.recipes`.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from monte.training import recipes

if TYPE_CHECKING:
    from monte.training.plan import TrainPlan

#: algorithm -> the module (under monte.training.trainers) whose ``build`` makes its TRL trainer
BUILDERS = {"sft": "sft", "dpo": "dpo", "grpo": "grpo", "rloo": "rloo", "distillation": "distillation"}


def trainer_args(rec: recipes.ResolvedRecipe, *, out: Path, end: int, smoke: bool, cuda: bool) -> dict[str, Any]:
    """The TRL config's arguments: monte's defaults (CPU-safe, one log per step), then every TRL
    field the recipe sets, then what monte owns (where the files go, one save at the chunk's end,
    no reporting). With ``schedule_steps`` the trainer is built for the whole horizon, so the
    scheduler is the same object every chunk, and the chunk's stop callback (:func:`monte.training.run.train_chunk`) ends the chunk at ``end``."""
    settings = rec.trl_settings()
    args: dict[str, Any] = dict(seed=0, data_seed=settings.get("seed", 0), use_cpu=not cuda, bf16=False,
                                logging_steps=1, disable_tqdm=True, dataloader_num_workers=0)
    if "gradient_checkpointing" not in settings:  # its old name: setting both is refused by transformers
        args["activation_checkpointing"] = False
    args.update(settings)
    horizon = rec.settings.get("schedule_steps")
    args.update(output_dir=str(out), max_steps=int(horizon) if horizon else end, report_to=[],
                save_strategy="no" if smoke else "steps", save_steps=end, save_only_model=False)
    return args


def build(plan: TrainPlan, r: Any, common: dict[str, Any], tok: Any, rows: list[dict[str, Any]],
          callbacks: list[Any], reward: Callable[..., list[float | None]] | None = None) -> Any:
    """The TRL trainer for ``plan``'s algorithm, built by its module."""
    import importlib

    module = importlib.import_module(f"monte.training.trainers.{BUILDERS[plan.recipe.algorithm]}")
    return module.build(plan, r, common, tok, rows, callbacks, reward)
