"""A run's life, below both evaluation and training (see ``docs/architecture.md``).

- :mod:`monte.runs.folders`: the run's event file (its folder is ``Workspace.run_folder``);
- :mod:`monte.runs.liveness`: who runs it, and whether a live-looking run still lives;
- :mod:`monte.runs.naming`: run references as users type them;
- :mod:`monte.runs.lifecycle`: reading rows, adopting, transitions and pushes, failure, abandon.

The names below are the package's public surface; modules inside the package import from each
other directly, never from here. Each is imported when first asked for: a read-only command
that needs a light module of the package (``naming``, ``folders``) does not import
``lifecycle`` (the row models, pydantic) with it.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from monte.runs.folders import log_event
    from monte.runs.lifecycle import (
        ENDED,
        PUSH_POINTS,
        Pusher,
        Transition,
        abandon,
        adopt_row,
        experiment_name,
        failure_reason,
        find_run,
        push_bucket,
        read_rows,
        read_tasks,
        record_failure,
        stop,
        transitions,
    )
    from monte.runs.liveness import is_dead, proc_start, this_process
    from monte.runs.naming import parse_run_ref

_HOME = {
    "log_event": "folders",
    **dict.fromkeys(("ENDED", "PUSH_POINTS", "Pusher", "Transition", "abandon", "adopt_row", "experiment_name",
                     "failure_reason", "find_run", "push_bucket", "read_rows", "read_tasks", "record_failure",
                     "stop", "transitions"), "lifecycle"),
    **dict.fromkeys(("is_dead", "this_process", "proc_start"), "liveness"),
    "parse_run_ref": "naming",
}

__all__ = [
    "ENDED", "PUSH_POINTS", "Pusher", "Transition", "abandon", "adopt_row", "experiment_name",
    "failure_reason", "find_run", "is_dead", "log_event", "parse_run_ref", "proc_start", "push_bucket",
    "read_rows", "read_tasks", "record_failure", "stop", "this_process", "transitions",
]


def __getattr__(name: str) -> Any:
    home = _HOME.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{home}"), name)
    globals()[name] = value
    return value
