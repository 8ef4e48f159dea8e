"""Whether a process on this host still runs, and when it started (plain os calls, no monte
imports: the liveness probe of a read-only view costs nothing to import)."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any


def proc_start(pid: int) -> str | None:
    """The process's start time (clock ticks since boot), so a reused pid is not mistaken for it."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return None


def is_dead_at(status: str, host: str, pid: int | None, started: str | None) -> bool:
    """A started/running row's process, on this host, is gone (or is another process now);
    ``started``: the row's ``proc_start``."""
    if status not in ("started", "running") or not pid:
        return False
    import socket  # (only for a live-looking row: ~3 ms to import)

    if host != socket.gethostname():
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        pass
    return bool(started) and proc_start(pid) != started


def kill_group(p: Any, *, grace: float = 10.0) -> None:
    """Stop a child started in its own session (``start_new_session=True``) and everything
    under it: SIGTERM to its process group while it runs, then SIGKILL to whatever is left of
    the group (a rank that outlived its launcher), then reap it."""
    import contextlib
    import signal
    import subprocess

    try:
        pgid = os.getpgid(p.pid)
    except ProcessLookupError:
        pgid = None
    if pgid is not None and p.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pgid, signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            p.wait(timeout=grace)
    if pgid is not None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pgid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        p.wait(timeout=grace)


def run_together(commands: Sequence[Sequence[str]], logs: Sequence[Path], *, cwd: Path, env: Mapping[str, str],
                 poll: float = 0.2) -> list[tuple[int, int]]:
    """Run the commands side by side, each in its own session (its output and errors in its log),
    until one fails or all exit 0; then every group still running is stopped (:func:`kill_group`),
    whatever happened here. The (index, exit status) of each that failed; empty when all succeeded."""
    import subprocess
    import time

    procs: list[subprocess.Popen[bytes]] = []
    opened = []
    failed: list[tuple[int, int]] = []
    try:
        for argv, path in zip(commands, logs, strict=True):
            log = open(path, "wb")
            opened.append(log)
            procs.append(subprocess.Popen(list(argv), cwd=str(cwd), env=dict(env), stdout=log,
                                          stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True))
        while True:
            codes = [p.poll() for p in procs]
            failed = [(k, c) for k, c in enumerate(codes) if c is not None and c != 0]
            if failed or all(c == 0 for c in codes):
                break
            time.sleep(poll)
    finally:
        for p in procs:
            kill_group(p)
        for log in opened:
            log.close()
    return failed
