"""Who runs a run (host, pid, process start) and whether a live-looking run still lives."""

from __future__ import annotations

import os
import socket
from typing import TYPE_CHECKING, Any

from monte.processes import is_dead_at, proc_start

if TYPE_CHECKING:
    from monte.ledger.records import RunRow

__all__ = ["is_dead", "is_dead_at", "this_process", "proc_start"]


def this_process() -> dict[str, Any]:
    """The process that writes a row, as the row records it: host, pid and the pid's start time
    (so a later reader can tell it from another process that reuses the pid)."""
    pid = os.getpid()
    return {"host": socket.gethostname(), "pid": pid, "proc_start": proc_start(pid)}


def is_dead(row: RunRow) -> bool:
    """A started/running row whose process, on this host, is gone (or is another process now)."""
    return is_dead_at(row.status, row.host, row.pid, row.proc_start)
