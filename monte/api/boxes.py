"""The API's verbs of remote boxes (Lambda instances): up, status, down."""

from __future__ import annotations

from typing import Any

from monte.api.shapes import BoxDown, BoxInstance, BoxStatus, BoxUp, Terminated
from monte.errors import MonteError
from monte.workspace import Workspace, open_workspace


def _box_workspace() -> Workspace | None:
    """The workspace, when there is one: status and down work anywhere, and use it only to read
    and remove identity files."""
    try:
        ws = open_workspace(require_data_root=False)
    except MonteError:
        return None
    return ws if ws.data_root.is_dir() else None


def box_up(*, type_: str | None = None, region: str | None = None, cold: bool = False,
           keep_alive: bool = False, ssh_key: str | None = None, on_progress: Any = None,
           ws: Workspace | None = None) -> BoxUp:
    """Launch a Lambda box (home region first, then anywhere), wait until it is active, write
    ``<data root>/boxes/<id>.json`` (0600) and arm its watchdog. ``on_progress(line)`` hears each
    step. A failure after the instance exists terminates it before refusing (``E_BOX``)."""
    from monte.remote import boxes

    ws = ws or open_workspace()
    return BoxUp(**boxes.up(ws, type_=type_, region=region, cold=cold, keep_alive=keep_alive,
                             ssh_key=ssh_key, on_progress=on_progress))


def box_status(*, ws: Workspace | None = None) -> BoxStatus:
    """Every instance on the Lambda account: monte's own (``monte-*``) with ``age_hours`` and
    ``over_ttl``, everything else as ``foreign``."""
    from monte.remote import boxes

    found = boxes.status(ws or _box_workspace())
    return BoxStatus(instances=tuple(BoxInstance(**i) for i in found["instances"]),
                     stale_identity_files=found["stale_identity_files"])


def box_down(*, instance: str | None = None, ws: Workspace | None = None) -> BoxDown:
    """Terminate one of monte's boxes through Lambda's API (default: the only one running) and
    remove its identity file. Refuses a foreign instance (``E_BOX``); several boxes and no
    ``instance`` is ``E_USAGE``."""
    from monte.remote import boxes

    done = boxes.down(ws or _box_workspace(), instance)
    return BoxDown(terminated=Terminated(**done["terminated"]), already_terminating=done["already_terminating"],
                   identity_file_removed=done["identity_file_removed"])
