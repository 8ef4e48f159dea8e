"""A run's folder on the data root and its event file (``monte logs`` prints it)."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from monte.workspace import Workspace


def run_folder(ws: Workspace, experiment: str, run: str) -> Path:
    return ws.data_root / "runs" / experiment / run


def log_event(ws: Workspace, experiment: str, run: str, event: str, **fields: Any) -> None:
    """Append one JSON line to the run's event file (``monte logs`` prints it)."""
    folder = run_folder(ws, experiment, run)
    folder.mkdir(parents=True, exist_ok=True)
    line = json.dumps({"time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "event": event,
                       "run": run, **fields}, sort_keys=True)
    with open(folder / "events.jsonl", "a", encoding="utf-8") as f:
        f.write(line + "\n")
