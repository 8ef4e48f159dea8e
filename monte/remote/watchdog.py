"""The box watchdog, from the laptop's side: its rules, its systemd units, and arming a box.

A box is terminated through the Lambda API once it has been idle for 45 minutes, or once it is
12 hours old (the TTL, which keep-alive does not lift), or when a submitted job ends
(``watchdog.py done``; not with keep-alive, nor while another job runs). The rules and the
box-side tick live in :mod:`monte.remote.watchdog_script`, a stdlib-only file that :func:`arm`
ships verbatim to the box (monte itself is installed there only later, by a job's setup); they
are re-exported here.

What :func:`arm` leaves on the box, under ``etc`` (``/etc/monte``, owned by the login user so
the job can read its secrets; the watchdog runs as root and reads it too):

==========================  ================================================================
``box.json``                instance id, launch time, Lambda API base (what the tick reads)
``secrets``                 ``MONTE_LAMBDA_KEY=...``, mode 0600, streamed over stdin (a job
                            may replace it with a set of its own)
``watchdog-secrets``        the same key, in a file only :func:`arm` writes; the tick reads
                            it first, so a job's secrets can never disarm the watchdog
``watchdog.py``             the tick (:mod:`monte.remote.watchdog_script`, verbatim)
``monte-watchdog.service``  the units, also installed in ``/etc/systemd/system`` and enabled
``monte-watchdog.timer``
``watchdog.json``           the tick's state (``last_active``, last decision), box-written
``keep-alive``              present only after ``--keep-alive``: switches the idle rule off
==========================  ================================================================
"""

from __future__ import annotations

import json
import shlex
import sys
from datetime import UTC, datetime
from importlib import resources
from typing import TYPE_CHECKING, Any

from monte.errors import error
from monte.remote.watchdog_script import (  # re-exported: the rules live beside the tick
    DEFAULT_API_BASE,
    IDLE,
    JOB_PREFIX,
    KEY_NAME,
    TTL,
    Reason,
    activity_probe,
    decide,
    format_time,
    job_sessions,
    parse_time,
)

if TYPE_CHECKING:
    import fabric

__all__ = [
    "DEFAULT_API_BASE", "IDLE", "JOB_PREFIX", "KEY_NAME", "TTL", "Reason", "activity_probe",
    "arm", "box_record", "decide", "job_sessions", "keep_alive_on", "script_text",
    "service_unit", "timer_unit",
]

ETC = "/etc/monte"
SERVICE = "monte-watchdog.service"
TIMER = "monte-watchdog.timer"
UNIT_DIR = "/etc/systemd/system"
PYTHON = "/usr/bin/python3"  # the box's system python: monte's own venv may not exist yet
STEP_TIMEOUT_S = 60.0


def script_text() -> str:
    """The tick script as shipped to the box (``watchdog_script.py``, byte for byte)."""
    return resources.files("monte.remote").joinpath("watchdog_script.py").read_text("utf-8")


def script_path(etc: str = ETC) -> str:
    return f"{etc.rstrip('/')}/watchdog.py"


def service_unit(etc: str = ETC, *, python: str = PYTHON) -> str:
    """``monte-watchdog.service``: one tick, run to completion."""
    etc = etc.rstrip("/")
    return (
        "[Unit]\n"
        "Description=monte watchdog tick: terminate this box when idle or past its TTL\n"
        "Wants=network-online.target\n"
        "After=network-online.target\n"
        "\n"
        "[Service]\n"
        "Type=oneshot\n"
        f"ExecStart={python} {script_path(etc)} tick --etc {etc}\n"
    )


def timer_unit() -> str:
    """``monte-watchdog.timer``: a tick a minute after boot, then a minute after each tick."""
    return (
        "[Unit]\n"
        f"Description=monte watchdog: idle {int(IDLE.total_seconds() // 60)} min, "
        f"TTL {int(TTL.total_seconds() // 3600)} h\n"
        "\n"
        "[Timer]\n"
        "OnBootSec=1min\n"
        "OnUnitActiveSec=1min\n"
        "AccuracySec=10s\n"
        f"Unit={SERVICE}\n"
        "\n"
        "[Install]\n"
        "WantedBy=timers.target\n"
    )


def box_record(box: dict[str, Any]) -> dict[str, Any]:
    """What ``box.json`` holds: ``box`` with ``instance_id`` (or ``id``), ``launched_at`` (an
    aware datetime or ISO 8601 text) and ``api_base`` (default Lambda's) normalised."""
    instance_id = box.get("instance_id") or box.get("id")
    launched = box.get("launched_at")
    if not instance_id or not launched:
        raise error("E_INTERNAL", "a box record needs instance_id and launched_at to be armed")
    if isinstance(launched, datetime):  # a naive time is taken as UTC, as parse_time does
        launched_at = launched if launched.tzinfo else launched.replace(tzinfo=UTC)
    else:
        launched_at = parse_time(str(launched))
    return {**{k: v for k, v in box.items() if k != "id"},
            "instance_id": str(instance_id),
            "launched_at": format_time(launched_at),
            "api_base": str(box.get("api_base") or DEFAULT_API_BASE)}


def _sudo(conn: fabric.Connection) -> str:
    from monte.remote import ssh

    uid = ssh.run(conn, "id -u", timeout=STEP_TIMEOUT_S).strip()
    return "" if uid == "0" else "sudo -n "


def arm(conn: fabric.Connection, box: dict[str, Any], lambda_key: str, keep_alive: bool, *,
        etc: str = ETC, systemd: bool = True, python: str = PYTHON) -> dict[str, Any]:
    """Arm the watchdog on the box behind ``conn``; returns the ``box.json`` record written.

    Writes the files listed in the module docstring, runs one tick by hand (so a box whose
    watchdog cannot run is found now, not in 12 hours), then with ``systemd`` installs the units
    and enables the timer. ``keep_alive`` writes ``<etc>/keep-alive`` last, after the watchdog is
    armed; arming without it leaves an existing flag alone. ``systemd=False`` skips the unit
    install (for a machine without systemd as PID 1, such as the tests' sshd).

    The login user needs passwordless sudo unless it is root (Lambda's ``ubuntu`` has it).
    """
    from monte.remote import ssh

    q = shlex.quote
    etc = etc.rstrip("/")
    record = box_record(box)
    sudo = _sudo(conn)
    ssh.run(conn, f'{sudo}install -d -m 0700 -o "$(id -un)" -g "$(id -gn)" {q(etc)}',
            timeout=STEP_TIMEOUT_S)
    ssh.put_bytes(conn, (json.dumps(record, indent=2, sort_keys=True) + "\n").encode(),
                  f"{etc}/box.json", mode=0o644)
    ssh.stream_secrets(conn, {KEY_NAME: lambda_key}, f"{etc}/watchdog-secrets")
    ssh.stream_secrets(conn, {KEY_NAME: lambda_key}, f"{etc}/secrets")
    ssh.put_bytes(conn, script_text().encode(), script_path(etc), mode=0o755)
    ssh.put_bytes(conn, service_unit(etc, python=python).encode(), f"{etc}/{SERVICE}", mode=0o644)
    ssh.put_bytes(conn, timer_unit().encode(), f"{etc}/{TIMER}", mode=0o644)
    # One tick now, as root (root sees every user's tmux server): proves python, the script and
    # box.json on this box before anything relies on them.
    ssh.run(conn, f"{sudo}{q(python)} {q(script_path(etc))} tick --etc {q(etc)}",
            timeout=STEP_TIMEOUT_S)
    if systemd:
        ssh.run(conn, f"{sudo}install -m 0644 {q(etc + '/' + SERVICE)} {q(etc + '/' + TIMER)} "
                      f"{UNIT_DIR}/ && {sudo}systemctl daemon-reload && "
                      f"{sudo}systemctl enable --now {TIMER}", timeout=STEP_TIMEOUT_S)
    if keep_alive:
        keep_alive_on(conn, etc)
    return record


def keep_alive_on(conn: fabric.Connection, etc: str = ETC) -> None:
    """Switch the idle rule off on this box (the TTL still applies): ``<etc>/keep-alive``."""
    from monte.remote import ssh

    ssh.run(conn, f"touch {shlex.quote(etc.rstrip('/') + '/keep-alive')}",
            timeout=STEP_TIMEOUT_S)


def main(argv: list[str] | None = None) -> int:
    """``python -m monte.remote.watchdog tick --etc DIR``: the same tick, where monte is installed."""
    from monte.remote import watchdog_script

    return watchdog_script.main(argv)


if __name__ == "__main__":
    sys.exit(main())
