"""monte's box watchdog: one tick, run every minute on a box by a systemd timer.

This file is shipped *verbatim* to the box by :func:`monte.remote.watchdog.arm` (written to
``/etc/monte/watchdog.py``) and run there by the system ``python3``, before monte itself is
installed on the box. So it is stdlib only, and it must run on Python 3.8+: no ``match``, no
``datetime.UTC``, no ``fromisoformat`` with a ``Z``. monte imports :func:`decide` and
:func:`activity_probe` from here too, so the laptop and the box apply the same rules.

The rules (seeds: ``monte box``):

* **TTL**: a box older than 12 hours is terminated, always (keep-alive or not, busy or not).
* **Idle**: a box with no activity for 45 minutes is terminated, unless ``<etc>/keep-alive``
  exists. Activity is a live tmux session whose name starts ``monte-`` (a submitted job), on any
  user's tmux server. An interactive ssh session is *not* activity: that is what keep-alive is for.
  Before the first activity, idle time counts from the launch.
* Termination goes through the Lambda API (``POST {api_base}/instance-operations/terminate``),
  never an OS shutdown: Lambda keeps billing a halted instance.

* **Job done**: a submitted job ends by running ``done``, which terminates the box at once,
  unless keep-alive is on or another ``monte-*`` job is still running there.

Each tick is stateless apart from ``<etc>/watchdog.json`` (``last_active`` and what the last tick
decided). It reads ``<etc>/box.json`` (``instance_id``, ``launched_at``, ``api_base``) and the
Lambda key (``MONTE_LAMBDA_KEY``) from ``<etc>/watchdog-secrets``, else ``<etc>/secrets``
(``KEY=VALUE`` lines). The key is sent in the Authorization header only; it is never printed.

Usage on the box: ``python3 /etc/monte/watchdog.py tick --etc /etc/monte`` (the timer, as root),
and ``python3 /etc/monte/watchdog.py done --etc /etc/monte`` at the end of a job (its tmux
session name in ``$MONTE_JOB`` or ``--job``).
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import shlex
import stat
import subprocess
import sys
import tempfile
import urllib.error
import urllib.request
from datetime import datetime, timedelta, timezone
from typing import Any, Literal

IDLE = timedelta(minutes=45)
TTL = timedelta(hours=12)
JOB_PREFIX = "monte-"  # a tmux session named like this is a submitted job
KEY_NAME = "MONTE_LAMBDA_KEY"
DEFAULT_API_BASE = "https://cloud.lambda.ai/api/v1"
HTTP_TIMEOUT_S = 30.0
TMUX_TIMEOUT_S = 10.0

Reason = Literal["ttl", "idle"]


def decide(now: datetime, launched_at: datetime, last_active: datetime | None, keep_alive: bool,
           *, idle: timedelta = IDLE, ttl: timedelta = TTL) -> Reason | None:
    """Why the box should be terminated now (``"ttl"`` or ``"idle"``), or None to leave it up.

    The TTL always applies; keep-alive only switches the idle rule off. ``last_active`` None
    means no activity seen yet, so idle time counts from ``launched_at``.
    """
    if now - launched_at >= ttl:
        return "ttl"
    if keep_alive:
        return None
    since = launched_at if last_active is None else max(launched_at, last_active)
    if now - since >= idle:
        return "idle"
    return None


def job_sessions(tmux_dir: str | None = None) -> list[str]:
    """The ``monte-*`` tmux sessions alive on this machine, on every user's tmux server.

    tmux keeps one server per user, with its socket at ``$TMUX_TMPDIR/tmux-<uid>/<name>``; the
    watchdog runs as root and the job as the login user, so ``tmux ls`` alone would not see the
    job. Root may talk to any user's server, so each socket is asked in turn.
    """
    base = tmux_dir or os.environ.get("TMUX_TMPDIR") or "/tmp"
    names: list[str] = []
    for sock in sorted(glob.glob(os.path.join(base, "tmux-*", "*"))):
        try:
            if not stat.S_ISSOCK(os.stat(sock).st_mode):
                continue
        except OSError:
            continue
        try:
            r = subprocess.run(["tmux", "-S", sock, "list-sessions", "-F", "#{session_name}"],
                               capture_output=True, text=True, timeout=TMUX_TIMEOUT_S)
        except FileNotFoundError:  # no tmux on this machine: nothing can be running in it
            return []
        except subprocess.TimeoutExpired:
            # A server that does not answer cannot prove the box idle; killing a job by mistake
            # costs more than a few idle minutes, and the TTL still bounds the bill.
            names.append(JOB_PREFIX + "(unresponsive)")
            continue
        if r.returncode == 0:  # a stale socket ("no server running") answers non-zero
            names.extend(line for line in r.stdout.splitlines() if line.startswith(JOB_PREFIX))
    return names


def activity_probe(tmux_dir: str | None = None) -> bool:
    """True when a submitted job (a ``monte-*`` tmux session) is alive on this machine."""
    return bool(job_sessions(tmux_dir))


# --- state on disk --------------------------------------------------------------------------


def parse_time(value: str) -> datetime:
    """An ISO 8601 time; a trailing ``Z`` and a missing zone both mean UTC (Python 3.8-safe)."""
    text = value.strip()
    if text.endswith("Z"):
        text = text[:-1] + "+00:00"
    t = datetime.fromisoformat(text)
    return t if t.tzinfo else t.replace(tzinfo=timezone.utc)  # noqa: UP017  (3.8 on the box)


def format_time(t: datetime) -> str:
    return t.astimezone(timezone.utc).isoformat(timespec="seconds")  # noqa: UP017


def read_json(path: str) -> dict[str, Any] | None:
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except FileNotFoundError:
        return None
    if not isinstance(data, dict):
        raise ValueError(f"{path} does not hold a JSON object")
    return data


def write_json(path: str, data: dict[str, Any]) -> None:
    """Replace ``path`` atomically, so a tick killed half-way leaves the old state whole."""
    folder = os.path.dirname(path) or "."
    fd, tmp = tempfile.mkstemp(prefix=".watchdog-", dir=folder)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(data, f, indent=2, sort_keys=True)
            f.write("\n")
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def read_secrets(path: str) -> dict[str, str]:
    """``KEY=VALUE`` lines (as :func:`monte.remote.ssh.secrets_text` writes them); blank lines and
    ``#`` comments skipped, shell quoting undone."""
    out: dict[str, str] = {}
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.strip()
            if not line or line.startswith("#") or "=" not in line:
                continue
            key, _, value = line.partition("=")
            key = key.strip()
            if key.startswith("export "):
                key = key[len("export "):].strip()
            value = value.strip()
            try:  # monte quotes a value for a POSIX shell when it needs it: undo that
                parts = shlex.split(value)
            except ValueError:
                parts = [value]
            out[key] = parts[0] if len(parts) == 1 else value
    return out


# --- the Lambda API ---------------------------------------------------------------------------


def terminate(api_base: str, key: str, instance_id: str, timeout: float = HTTP_TIMEOUT_S) -> int:
    """Ask Lambda to terminate ``instance_id``; return the HTTP status. Raises on failure, with a
    message that never holds the key."""
    url = api_base.rstrip("/") + "/instance-operations/terminate"
    body = json.dumps({"instance_ids": [instance_id]}).encode()
    req = urllib.request.Request(url, data=body, method="POST", headers={
        "Authorization": "Bearer " + key,
        "Content-Type": "application/json",
        "Accept": "application/json",
        "User-Agent": "monte-watchdog",
    })
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return int(resp.status)
    except urllib.error.HTTPError as e:
        detail = e.read(300).decode("utf-8", "replace").replace("\n", " ")
        raise RuntimeError(f"Lambda answered HTTP {e.code} to terminate: {detail}") from None
    except (urllib.error.URLError, OSError) as e:
        reason = getattr(e, "reason", e)
        raise RuntimeError(f"could not reach the Lambda API at {api_base}: {reason}") from None


# --- one tick, and a job's end ---------------------------------------------------------------

#: Where the key is looked for, in order: arm's own file first (a job may replace ``secrets``
#: with a set of its own, and must not disarm the watchdog by doing so), then the shared one.
SECRETS_FILES = ("watchdog-secrets", "secrets")


def _load_box(etc: str) -> tuple[dict[str, Any], str, datetime]:
    box = read_json(os.path.join(etc, "box.json"))
    if box is None:
        raise RuntimeError(f"{etc}/box.json is missing: this box was never armed")
    instance_id = str(box.get("instance_id") or "")
    if not instance_id or not box.get("launched_at"):
        raise RuntimeError(f"{etc}/box.json lacks instance_id or launched_at")
    return box, instance_id, parse_time(str(box["launched_at"]))


def lambda_key(etc: str) -> str:
    for name in SECRETS_FILES:
        path = os.path.join(etc, name)
        if os.path.exists(path):
            key = read_secrets(path).get(KEY_NAME)
            if key:
                return key
    raise RuntimeError(f"no {KEY_NAME} in {' or '.join(SECRETS_FILES)} under {etc}: "
                       "cannot terminate this box")


def _terminate_recorded(etc: str, box: dict[str, Any], instance_id: str, state: dict[str, Any],
                        reason: str | None, now: datetime) -> None:
    """Terminate when ``reason`` says so; write ``state`` either way (with ``error`` when the
    call failed, which is raised again)."""
    state.pop("error", None)
    try:
        if reason is not None:
            status = terminate(str(box.get("api_base") or DEFAULT_API_BASE), lambda_key(etc),
                               instance_id)
            state["terminate_requested"] = {"at": format_time(now), "reason": reason,
                                            "http_status": status}
    except Exception as e:
        state["error"] = str(e)
        raise
    finally:
        write_json(os.path.join(etc, "watchdog.json"), state)


def tick(etc: str, *, now: datetime | None = None, tmux_dir: str | None = None) -> dict[str, Any]:
    """Probe, decide, terminate when the rules say so, and record what happened.

    Returns the record written to ``<etc>/watchdog.json``. A failed terminate call is recorded
    (``error``) and raised, so the unit shows failed and the next tick tries again.
    """
    now = now or datetime.now(timezone.utc)  # noqa: UP017
    box, instance_id, launched_at = _load_box(etc)
    state = read_json(os.path.join(etc, "watchdog.json")) or {}
    last_active = parse_time(state["last_active"]) if state.get("last_active") else None
    sessions = job_sessions(tmux_dir)
    if sessions:
        last_active = now
    keep_alive = os.path.exists(os.path.join(etc, "keep-alive"))
    reason = decide(now, launched_at, last_active, keep_alive)
    state.update({
        "instance_id": instance_id,
        "last_tick": format_time(now),
        "last_active": format_time(last_active) if last_active else None,
        "jobs": sessions,
        "keep_alive": keep_alive,
        "decision": reason,
    })
    _terminate_recorded(etc, box, instance_id, state, reason, now)
    return state


def done(etc: str, job: str | None, *, now: datetime | None = None,
         tmux_dir: str | None = None) -> dict[str, Any]:
    """A submitted job has ended: terminate the box now, unless it is kept alive (someone works
    on it by hand) or another ``monte-*`` job is still running on it. ``job`` is the caller's
    own tmux session, which is still alive while it runs this, so it is not counted."""
    now = now or datetime.now(timezone.utc)  # noqa: UP017
    box, instance_id, _ = _load_box(etc)
    state = read_json(os.path.join(etc, "watchdog.json")) or {}
    others = [s for s in job_sessions(tmux_dir) if s != job]
    keep_alive = os.path.exists(os.path.join(etc, "keep-alive"))
    reason = None if keep_alive or others else "done"
    state.update({
        "instance_id": instance_id,
        "last_active": format_time(now),  # a job was running until now
        "job_done": {"at": format_time(now), "job": job, "other_jobs": others,
                     "keep_alive": keep_alive, "decision": reason},
    })
    _terminate_recorded(etc, box, instance_id, state, reason, now)
    return state


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="watchdog.py", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p_tick = sub.add_parser("tick", help="probe, decide, terminate when due (the timer runs it)")
    p_done = sub.add_parser("done", help="a job has ended: terminate unless kept alive or busy")
    p_done.add_argument("--job", default=os.environ.get("MONTE_JOB"),
                        help="the calling job's tmux session (default $MONTE_JOB)")
    for p in (p_tick, p_done):
        p.add_argument("--etc", default="/etc/monte", help="the box's monte folder")
        p.add_argument("--tmux-dir", default=None,
                       help="where tmux keeps its sockets (default $TMUX_TMPDIR or /tmp)")
    args = parser.parse_args(argv)
    try:
        if args.command == "done":
            state = done(args.etc, args.job, tmux_dir=args.tmux_dir)
            line = {"event": "watchdog-job-done", **state["job_done"]}
        else:
            state = tick(args.etc, tmux_dir=args.tmux_dir)
            # `journalctl -u monte-watchdog` is the box's own log of its ticks, one line each.
            line = {"event": "watchdog-tick", **{k: state.get(k) for k in (
                "last_tick", "last_active", "jobs", "keep_alive", "decision")}}
    except Exception as e:  # one line to the journal; the unit shows failed
        print(json.dumps({"event": "watchdog-error", "error": str(e)}), file=sys.stderr)
        return 1
    print(json.dumps(line))
    return 0


if __name__ == "__main__":
    sys.exit(main())
