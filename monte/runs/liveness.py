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
    if row.status not in ("started", "running") or row.host != socket.gethostname() or not row.pid:
        return False
    try:
        os.kill(row.pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        pass
    return bool(row.proc_start) and proc_start(row.pid) != row.proc_start
