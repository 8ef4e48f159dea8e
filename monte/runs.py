"""Run folders on the data root, run references, and whether a live-looking run still lives."""

from __future__ import annotations

import json
import os
import socket
import time
from pathlib import Path
from typing import Any

from monte.errors import error
from monte.ledger.records import RunRow
from monte.names import check_name
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


def proc_start(pid: int) -> str | None:
    """The process's start time (clock ticks since boot), so a reused pid is not mistaken for it."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return None


def me() -> dict[str, Any]:
    pid = os.getpid()
    return {"host": socket.gethostname(), "pid": pid, "proc_start": proc_start(pid)}


def is_dead(row: RunRow) -> bool:
    """A started/running row whose process, on this host, is gone (or is another process now)."""
    if row.status not in ("started", "running") or row.host != socket.gethostname() or not row.pid:
        return False
    try:
        os.kill(row.pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        pass
    return bool(row.proc_start) and proc_start(row.pid) != row.proc_start


def parse_run_ref(text: str, default_experiment: str | None = None) -> tuple[str | None, str, int | None]:
    """``RUN``, ``RUN@STEP``, ``RUN/STEP``, ``EXP/RUN``, ``EXP/RUN@STEP`` -> (exp, run, step)."""
    exp: str | None = default_experiment
    body = text.strip()
    step: int | None = None
    if "@" in body:
        body, _, s = body.rpartition("@")
        step = _int(s, text)
    parts = body.split("/")
    if len(parts) == 2 and step is None and _is_step(parts[1]):
        run, step = parts[0], int(parts[1])  # RUN/STEP
    elif len(parts) == 2:
        exp, run = parts
        if not exp:
            raise error("E_USAGE", f"cannot read {text!r} as a run", "write EXP/RUN, RUN, or RUN@STEP")
        check_name(exp, "experiment name")
    elif len(parts) == 1:
        run = parts[0]
    else:
        raise error("E_USAGE", f"cannot read {text!r} as a run", "write EXP/RUN, RUN, or RUN@STEP")
    if not run:
        raise error("E_USAGE", f"cannot read {text!r} as a run", "write EXP/RUN, RUN, or RUN@STEP")
    check_name(run, "run id")
    return exp, run, step


def _is_step(s: str) -> bool:
    """ASCII digits only: ``str.isdigit`` also accepts '²' and '٣', which ``int`` refuses."""
    return s.isascii() and s.isdigit()


def _int(s: str, text: str) -> int:
    if not _is_step(s):
        raise error("E_USAGE", f"the step in {text!r} is not a number", "write RUN@STEP, e.g. ab12cd34ef56@50")
    return int(s)
