"""``sft``: ``trl.SFTTrainer`` on a prompt/completion (or conversational) dataset made from a
frozen ``--kind sft`` Dataset; loss on the completion only."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from monte.training.plan import TrainPlan



def build(plan: TrainPlan, r: Any, common: dict[str, Any], tok: Any, rows: list[dict[str, Any]],
          callbacks: list[Any], reward: Callable[..., list[float | None]] | None = None) -> Any:
    from datasets import Dataset
    from trl import SFTConfig, SFTTrainer

    cols = plan.source.columns or {}
    if "messages" in cols:
        data = Dataset.from_list([{"messages": row["messages"]} for row in rows])
    else:
        data = Dataset.from_list([{"prompt": str(row[cols["input"]]), "completion": str(row[cols["output"]])}
                                  for row in rows])
    return SFTTrainer(model=plan.init_model, args=SFTConfig(**common), train_dataset=data, processing_class=tok,
                      callbacks=callbacks)
