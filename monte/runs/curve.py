"""What a train run's event file says of its learning, in a few numbers (:func:`summary`): the
loss curve's first, last and lowest points, the gradient norm, samples and epochs seen, seconds.
The driving agent decides on these after every chunk; it no longer parses ``monte logs``."""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any


def _num(v: Any) -> float | None:
    return float(v) if isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v) else None


def summary(events: Iterable[Mapping[str, Any]]) -> dict[str, Any] | None:
    """The curve of one chunk from its events (``log`` lines as TRL reports them; ``started``
    for the plan), or None when it logged no loss. ``samples``: TRL's own count (samples per
    second x runtime) where it reported one, else the effective batch x the steps logged."""
    losses: list[tuple[int, float]] = []
    grad: list[float] = []
    rewards: list[float] = []
    epoch = runtime = per_second = None
    batch = None
    for e in events:
        if e.get("event") == "started":
            batch = _num(((e.get("plan") or {}).get("launch") or {}).get("effective_batch"))
        if e.get("event") != "log":
            continue
        step = int(e.get("step") or 0)
        if (loss := _num(e.get("loss"))) is not None:
            losses.append((step, loss))
        if (g := _num(e.get("grad_norm"))) is not None:
            grad.append(g)
        if (r := _num(e.get("reward"))) is not None:
            rewards.append(r)
        epoch = _num(e.get("epoch")) if e.get("epoch") is not None else epoch
        runtime = _num(e.get("train_runtime")) or runtime
        per_second = _num(e.get("train_samples_per_second")) or per_second
    if not losses:
        return None
    low = min(losses, key=lambda sl: sl[1])
    samples = (round(per_second * runtime) if per_second and runtime
               else round(batch * len(losses)) if batch else None)
    out: dict[str, Any] = {
        "steps_logged": len(losses), "first_loss": losses[0][1], "last_loss": losses[-1][1],
        "min_loss": low[1], "min_loss_step": low[0],
        "grad_norm_last": grad[-1] if grad else None, "grad_norm_max": max(grad) if grad else None,
        "samples": samples, "epochs": epoch, "seconds": runtime}
    if rewards:  # GRPO: the environment's reward, as the trainer logged it
        out.update({"first_reward": rewards[0], "last_reward": rewards[-1]})
    return out


def read_events(path: Path) -> list[dict[str, Any]]:
    """The event file's lines (a line that is not JSON, a torn last write, is skipped)."""
    out = []
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            try:
                e = json.loads(line)
            except ValueError:
                continue
            if isinstance(e, dict):
                out.append(e)
    return out
