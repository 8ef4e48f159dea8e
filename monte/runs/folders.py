"""A run's event file, in its folder on the data root (``Workspace.run_folder``; ``monte logs`` prints it)."""

from __future__ import annotations

import json
import sys
import time
from typing import Any

from monte.workspace import Workspace


def log_event(ws: Workspace, experiment: str, run: str, event: str, **fields: Any) -> None:
    """Append one JSON line to the run's event file (``monte logs`` prints it).

    The event file is a log beside the record, never the record: a line that cannot be written
    (a full or failing disk) is said on stderr and the run goes on, so a spent test read is not
    lost for its log. What must hold (the ledger's rows, a kept result) refuses on its own."""
    folder = ws.run_folder(experiment, run)
    line = json.dumps({"time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "event": event,
                       "run": run, **_portable(ws, fields)}, sort_keys=True)
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with open(folder / "events.jsonl", "a", encoding="utf-8") as f:
            f.write(line + "\n")
    except OSError as e:
        print(f"monte: note: run {run}'s event log ({folder / 'events.jsonl'}) misses its {event!r} event: "
              f"{e.strerror or e}; `monte logs` shows the rest", file=sys.stderr)


def portable_text(ws: Workspace, text: str) -> str:
    """Free text (a failure reason, a traceback) with this machine's data root and repository
    folders written as ``<data root>/`` and ``<repo>/``: what is recorded (a row's reason, an
    event that travels to the results bucket) reads the same wherever the repository is."""
    for root, token in ((ws.data_root, "<data root>/"), (ws.repo_root, "<repo>/")):
        for form in {str(root), str(root.resolve())}:
            text = text.replace(form.rstrip("/") + "/", token)
    return text


def _portable(ws: Workspace, value: Any) -> Any:
    """An event's fields with no folder of this machine's data root or repository in them."""
    if isinstance(value, str):
        return portable_text(ws, value)
    if isinstance(value, dict):
        return {k: _portable(ws, v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_portable(ws, v) for v in value]
    return value
