"""Who runs a run (host, pid, process start) and whether a live-looking run still lives."""

from __future__ import annotations

import os
import socket
from typing import Any

from monte.ledger.records import RunRow


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
    return is_dead_at(row.status, row.host, row.pid, row.proc_start)


def is_dead_at(status: str, host: str, pid: int | None, started: str | None) -> bool:
    """:func:`is_dead` of a row's fields (``started``: its ``proc_start``)."""
    if status not in ("started", "running") or host != socket.gethostname() or not pid:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        pass
    return bool(started) and proc_start(pid) != started
