"""``monte box up / status / down``: ephemeral Lambda GPU boxes, driven from a laptop.

``up`` finds capacity (the data root's home region first, then anywhere), launches one instance
under a unique name ``monte-<8 hex>``, waits (bounded) until it is active, writes its identity
file ``<data root>/boxes/<instance id>.json`` (mode 0600), and arms its watchdog: a systemd timer
on the box that terminates it through Lambda's API once it has been idle for 45 minutes or is 12
hours old. Whatever fails after the instance exists terminates it before refusing, so a failed
``up`` never leaves a box billing unseen.

The home region is the region of the Lambda file system that holds the shared data root
(``MONTE_LAMBDA_FILESYSTEM`` names it); ``--region`` replaces it as the first choice. A warm box
attaches that file system. Lambda attaches a file system only in its own region, so a box that
lands elsewhere (no capacity at home) is cold, and says so: a cold box has no data root and
cannot serve a real run.

``status`` lists every instance on the account: monte's own (named ``monte-``) with their age and
whether they are past the TTL, anything else as ``foreign``, read-only. ``down`` terminates one of
monte's boxes through the API (never an OS shutdown: Lambda bills a halted instance) and refuses a
foreign one.
"""

from __future__ import annotations

import json
import os
import secrets
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from monte.errors import MonteError, error
from monte.remote import lambda_api
from monte.remote.lambda_api import GONE, LambdaClient, LambdaError, resolve_key
from monte.storage.keys import write_secret_file
from monte.workspace import Workspace

DEFAULT_TYPE = "gpu_1x_h100_pcie"
NAME_PREFIX = "monte-"
TTL_HOURS = 12
IDLE_MINUTES = 45

FILESYSTEM_ENV = "MONTE_LAMBDA_FILESYSTEM"
SSH_KEY_ENV = "MONTE_LAMBDA_SSH_KEY"
WAIT_ENV = "MONTE_BOX_WAIT_S"
DEFAULT_WAIT_S = 900.0
#: Seconds between looks at a booting instance (tests shrink it).
POLL_S = 5.0
#: The login user on Lambda's images, and the private key to offer (default: the SSH agent,
#: then ~/.ssh/id_*), for arming the watchdog.
SSH_USER = "ubuntu"
SSH_KEY_FILE_ENV = "MONTE_SSH_KEY_FILE"
#: How long sshd on a just-active box may refuse before arming gives up, and the retry pause.
SSH_READY_S = 300.0
SSH_RETRY_S = 5.0

COLD_NOTE = ("a cold box has no data root: it has nowhere to read the Experiment from or write "
             "the Run's rows to, so it cannot serve a real run")

Progress = Callable[[str], None]


class BoxIdentity(BaseModel):
    """What ``<data root>/boxes/<id>.json`` holds about one box monte launched."""

    id: str
    name: str
    ip: str
    type: str
    region: str
    launched_at: str  # ISO 8601, UTC
    cold: bool
    keep_alive: bool
    ttl_hours: int = TTL_HOURS
    idle_minutes: int = IDLE_MINUTES
    ssh_key: str = ""
    file_systems: list[str] = []
    hostname: str | None = None


def boxes_dir(ws: Workspace) -> Path:
    return ws.data_root / "boxes"


def identity_path(ws: Workspace, instance_id: str) -> Path:
    return boxes_dir(ws) / f"{instance_id}.json"


def is_monte_box(instance: dict[str, Any]) -> bool:
    name = instance.get("name")
    return isinstance(name, str) and name.startswith(NAME_PREFIX)


# --- up ------------------------------------------------------------------------------------------


def up(ws: Workspace, *, type_: str | None = None, region: str | None = None, cold: bool = False,
       keep_alive: bool = False, ssh_key: str | None = None,
       on_progress: Progress | None = None) -> dict[str, Any]:
    """Launch, wait until active, write the identity file, arm the watchdog. See the module doc."""
    say = on_progress or (lambda _line: None)
    type_ = type_ or DEFAULT_TYPE
    wait_s = _wait_seconds()
    key = resolve_key()
    client = LambdaClient(key)

    home_fs = None if cold else _home_file_system(client)
    key_name = _ssh_key_name(client, ssh_key)
    first = region or (home_fs[1] if home_fs else None)
    regions, price = _regions_with_capacity(client, type_)
    notes: list[str] = []
    if first and first not in regions:
        notes.append(f"no capacity for {type_} in {first}; trying {', '.join(regions)}")
        say(notes[-1])
    order = ([first] if first in regions else []) + [r for r in regions if r != first]

    name = NAME_PREFIX + secrets.token_hex(4)
    instance_id, launched_in, attached = _launch(client, name, type_, order, home_fs, key_name,
                                                 say, notes)
    launched_at = datetime.now(UTC).isoformat(timespec="seconds")
    path = identity_path(ws, instance_id)
    try:
        inst = _wait_active(client, instance_id, name, wait_s, say)
        identity = BoxIdentity(
            id=instance_id, name=name, ip=str(inst["ip"]), type=type_, region=launched_in,
            launched_at=launched_at, cold=not attached, keep_alive=keep_alive, ssh_key=key_name,
            file_systems=attached,
            hostname=inst.get("hostname") if isinstance(inst.get("hostname"), str) else None)
        write_secret_file(path, (json.dumps(identity.model_dump(mode="json"), indent=2,
                                            sort_keys=True) + "\n").encode())
        say(f"{name} is active at {identity.ip}; arming the watchdog")
        # the box's watchdog terminates itself through the same API this laptop used
        _arm_watchdog({**identity.model_dump(mode="json"), "api_base": client.base_url},
                      key.reveal(), keep_alive)
    except BaseException as e:
        _fail_after_launch(e, client, instance_id, name, path)
        raise  # _fail_after_launch raises for everything it understands

    if identity.cold:
        notes.append(COLD_NOTE)
    return {
        "box": identity.model_dump(mode="json"),
        "identity_file": str(path),
        "price_cents_per_hour": price,
        "watchdog": {"armed": True, "idle_minutes": IDLE_MINUTES, "ttl_hours": TTL_HOURS,
                     "keep_alive": keep_alive},
        "notes": notes,
    }


def _arm_watchdog(box: dict[str, Any], key: str, keep_alive: bool) -> Any:
    """Arm the box's watchdog over SSH: the seam between ``up`` and
    :func:`monte.remote.watchdog.arm` (tests replace this function with a recorder).

    The address is new to monte, so its old host key (Lambda reuses addresses) is forgotten
    first; sshd on a box that has just turned active can refuse for a minute, so connecting is
    retried for up to ``SSH_READY_S``. Refuses when this monte has no watchdog, because a box
    nobody arms never stops by itself; ``up`` then terminates the box."""
    try:
        from monte.remote import ssh, watchdog
        arm = watchdog.arm
    except (ImportError, AttributeError):  # the modules, or `arm`, are not there
        raise error("E_BOX", "this monte has no watchdog to arm (monte.remote.watchdog.arm is "
                    "missing), and a box without one would never stop by itself",
                    "update monte, then run `monte box up` again") from None
    host = str(box["ip"])
    key_file = os.environ.get(SSH_KEY_FILE_ENV, "").strip() or None
    ssh.forget_host(host)
    deadline = time.monotonic() + SSH_READY_S
    while True:
        try:
            conn = ssh.connect(host, user=SSH_USER, key_file=key_file)
            break
        except MonteError:
            if time.monotonic() >= deadline:
                raise
            time.sleep(SSH_RETRY_S)
    try:
        return arm(conn, box, key, keep_alive)
    finally:
        conn.close()


def _fail_after_launch(e: BaseException, client: LambdaClient, instance_id: str, name: str,
                       path: Path) -> None:
    """The instance exists and ``up`` cannot finish: terminate it, then refuse saying so."""
    try:
        path.unlink(missing_ok=True)
    except OSError:
        pass
    try:
        client.terminate([instance_id])
        outcome = f"terminated {name} ({instance_id}) through Lambda's API, so nothing is left running"
        still_up = False
    except MonteError as te:
        outcome = (f"and terminating {name} ({instance_id}) failed too ({te.message}): it may "
                   "still be running, and billing")
        still_up = True
    down = f"run `monte box down {instance_id}` now" if still_up else ""
    if isinstance(e, MonteError):
        fix = "; ".join(x for x in (down, e.fix) if x)
        raise error("E_BOX", f"{e.message}; {outcome}", fix) from None
    if isinstance(e, KeyboardInterrupt):
        raise error("E_BOX", f"interrupted while {name} was starting; {outcome}",
                    down or "run `monte box up` again") from None
    if still_up:  # a bug in monte: keep its traceback, but name the box first
        e.add_note(f"monte: {outcome}; {down}")


def _wait_seconds() -> float:
    raw = os.environ.get(WAIT_ENV, "").strip()
    if not raw:
        return DEFAULT_WAIT_S
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not value > 0 or value != value or value == float("inf"):
        raise error("E_USAGE", f"{WAIT_ENV} must be a positive number of seconds, not {raw!r}",
                    f"set {WAIT_ENV} to how long `monte box up` may wait for a box (default "
                    f"{DEFAULT_WAIT_S:g}), or unset it")
    return value


def _home_file_system(client: LambdaClient) -> tuple[str, str]:
    """(name, region) of the file system that holds the data root."""
    name = os.environ.get(FILESYSTEM_ENV, "").strip()
    if not name:
        raise error("E_BOX", f"a warm box attaches the Lambda file system that holds the data root, "
                    f"and {FILESYSTEM_ENV} does not name one",
                    f"set {FILESYSTEM_ENV} to that file system's name, or pass --cold for a box "
                    "without the data root (it cannot serve a real run)")
    systems = client.file_systems()
    for fs in systems:
        region = fs.get("region")
        region_name = region.get("name") if isinstance(region, dict) else None
        if fs.get("name") == name and isinstance(region_name, str):
            return name, region_name
    names = sorted(str(f.get("name")) for f in systems if f.get("name"))
    raise error("E_BOX", f"no Lambda file system named {name!r} ({FILESYSTEM_ENV}) on this account",
                f"file systems on the account: {', '.join(names) or 'none'}; fix "
                f"{FILESYSTEM_ENV}, or pass --cold")


def _ssh_key_name(client: LambdaClient, flag: str | None) -> str:
    wanted = (flag or os.environ.get(SSH_KEY_ENV, "")).strip()
    names = [k["name"] for k in client.ssh_keys() if isinstance(k.get("name"), str)]
    if wanted:
        if wanted not in names:
            where = "--ssh-key" if flag else SSH_KEY_ENV
            raise error("E_BOX", f"no SSH key named {wanted!r} ({where}) on the Lambda account",
                        f"SSH keys on the account: {', '.join(names) or 'none'}")
        return wanted
    if len(names) == 1:
        return str(names[0])
    if not names:
        raise error("E_BOX", "the Lambda account has no SSH key, so a box could not be reached",
                    "add your public key in Lambda Cloud (SSH keys), then run `monte box up` again")
    raise error("E_BOX", f"the Lambda account has {len(names)} SSH keys ({', '.join(names)}) and "
                "none was chosen", f"pass --ssh-key NAME, or set {SSH_KEY_ENV}")


def _regions_with_capacity(client: LambdaClient, type_: str) -> tuple[list[str], int | None]:
    types = client.instance_types()
    entry = types.get(type_)
    if not isinstance(entry, dict):
        raise error("E_USAGE", f"Lambda offers no instance type {type_!r}",
                    f"pass --type one of: {', '.join(sorted(types))}")
    regions = [r["name"] for r in entry.get("regions_with_capacity_available") or []
               if isinstance(r, dict) and isinstance(r.get("name"), str)]
    if not regions:
        others = sorted(t for t, v in types.items()
                        if isinstance(v, dict) and v.get("regions_with_capacity_available"))
        raise error("E_BOX", f"no region has capacity for {type_} right now",
                    "try again in a few minutes"
                    + (f", or another --type (with capacity now: {', '.join(others)})" if others else ""))
    spec = entry.get("instance_type")
    price = spec.get("price_cents_per_hour") if isinstance(spec, dict) else None
    return regions, price if isinstance(price, int) else None


def _launch(client: LambdaClient, name: str, type_: str, order: list[str],
            home_fs: tuple[str, str] | None, ssh_key: str, say: Progress,
            notes: list[str]) -> tuple[str, str, list[str]]:
    """Try each region in turn; Lambda's capacity listing can be stale, so a capacity refusal
    moves on to the next region. Return (instance id, region, file systems attached)."""
    refused: list[str] = []
    for region in order:
        attach = [home_fs[0]] if home_fs and home_fs[1] == region else []
        how = f"with file system {attach[0]}" if attach else "cold: no file system"
        say(f"launching {name} ({type_}) in {region}, {how}")
        try:
            instance_id = client.launch(name=name, region=region, instance_type=type_,
                                        ssh_key=ssh_key, file_systems=attach)
        except LambdaError as e:
            if e.lambda_code != lambda_api.INSUFFICIENT_CAPACITY:
                raise
            refused.append(region)
            say(f"no capacity in {region} after all")
            continue
        except KeyboardInterrupt:  # the launch may have gone through: find it by name
            raise error("E_BOX", f"interrupted while launching {name}; "
                        f"{_terminate_by_name(client, name)}",
                        "run `monte box status` to check, and `monte box up` again") from None
        if refused:
            notes.append(f"Lambda had no capacity in {', '.join(refused)}; launched in {region}")
        if home_fs and not attach:
            notes.append(f"launched in {region}, not {home_fs[1]} where file system {home_fs[0]} "
                         "(the data root) lives; Lambda attaches a file system only in its own "
                         "region, so this box is cold")
        return instance_id, region, attach
    raise error("E_BOX", f"no capacity for {type_}: Lambda refused the launch in every region "
                f"that listed capacity ({', '.join(refused)})",
                "try again in a few minutes, or another --type")


def _terminate_by_name(client: LambdaClient, name: str) -> str:
    """After an interrupted launch: terminate whatever instance carries ``name``; say what
    happened."""
    try:
        ids = [str(i["id"]) for i in client.instances()
               if i.get("name") == name and i.get("status") not in GONE and i.get("id")]
        if ids:
            client.terminate(ids)
    except MonteError as e:
        return (f"looking for it to terminate it failed ({e.message}): if `monte box status` "
                f"lists {name}, run `monte box down {name}`")
    return f"terminated {name} ({', '.join(ids)})" if ids else f"no instance named {name} was made"


def _wait_active(client: LambdaClient, instance_id: str, name: str, wait_s: float,
                 say: Progress) -> dict[str, Any]:
    deadline = time.monotonic() + wait_s
    last = ""
    while True:
        try:
            inst: dict[str, Any] | None = client.instance(instance_id)
        except LambdaError as e:  # just launched: may not be listed yet
            if e.status != 404 and e.lambda_code != lambda_api.OBJECT_DOES_NOT_EXIST:
                raise
            inst = None
        status = str(inst.get("status")) if inst else "not listed yet"
        if status != last:
            say(f"{name}: {status}")
            last = status
        if inst and status == "active" and inst.get("ip"):
            return inst
        if status in GONE:
            raise error("E_BOX", f"{name} ({instance_id}) went {status} while booting",
                        "run `monte box up` again, perhaps with another --region or --type")
        if time.monotonic() >= deadline:
            raise error("E_BOX", f"{name} ({instance_id}) was not active after {wait_s:g} s "
                        f"(last status: {status})",
                        f"run `monte box up` again, perhaps with another --region or --type; "
                        f"{WAIT_ENV} sets how long to wait")
        time.sleep(min(POLL_S, max(0.0, deadline - time.monotonic())))


# --- status --------------------------------------------------------------------------------------


def status(ws: Workspace | None) -> dict[str, Any]:
    """Every instance on the account; monte's with age and over_ttl (from the identity file)."""
    client = LambdaClient(resolve_key())
    instances = client.instances()
    identities = _identities(ws)
    now = datetime.now(UTC)
    rows: list[dict[str, Any]] = []
    for inst in instances:
        own = is_monte_box(inst)
        iid = str(inst.get("id", ""))
        ident = identities.get(iid) if own else None
        age = _age_hours(ident.launched_at, now) if ident else None
        ttl = ident.ttl_hours if ident else TTL_HOURS
        fss = inst.get("file_system_names")
        rows.append({
            "id": iid,
            "name": inst.get("name") or "",
            "owner": "monte" if own else "foreign",
            "status": inst.get("status"),
            "type": _name_of(inst.get("instance_type")),
            "region": _name_of(inst.get("region")),
            "ip": inst.get("ip"),
            "age_hours": None if age is None else round(age, 2),
            "over_ttl": None if age is None else age > ttl,
            "cold": (not fss) if own else None,
            "keep_alive": ident.keep_alive if ident else None,
            "launched_at": ident.launched_at if ident else None,
        })
    rows.sort(key=lambda r: (r["owner"] != "monte", r["name"], r["id"]))
    live = {r["id"] for r in rows}
    stale = sorted(str(p) for iid, p in _identity_files(ws).items() if iid not in live)
    return {"instances": rows, "stale_identity_files": stale}


def _name_of(v: Any) -> str | None:
    if isinstance(v, dict) and isinstance(v.get("name"), str):
        name: str = v["name"]
        return name
    return None


def _age_hours(launched_at: str, now: datetime) -> float | None:
    try:
        t = datetime.fromisoformat(launched_at)
    except ValueError:
        return None
    if t.tzinfo is None:
        t = t.replace(tzinfo=UTC)
    return (now - t).total_seconds() / 3600


def _identity_files(ws: Workspace | None) -> dict[str, Path]:
    if ws is None or not boxes_dir(ws).is_dir():
        return {}
    return {p.stem: p for p in sorted(boxes_dir(ws).glob("*.json"))}


def _identities(ws: Workspace | None) -> dict[str, BoxIdentity]:
    out = {}
    for iid, p in _identity_files(ws).items():
        try:
            out[iid] = BoxIdentity.model_validate_json(p.read_bytes())
        except (OSError, ValidationError, ValueError):
            continue  # unreadable: the box shows with an unknown age
    return out


# --- down ----------------------------------------------------------------------------------------


def down(ws: Workspace | None, instance: str | None = None) -> dict[str, Any]:
    """Terminate one of monte's boxes through the API and remove its identity file."""
    client = LambdaClient(resolve_key())
    instances = client.instances()
    if instance is None:
        mine = [i for i in instances if is_monte_box(i) and i.get("status") not in GONE]
        if not mine:
            raise error("E_BOX", "no monte box is running on this Lambda account",
                        "`monte box status` lists the account's instances")
        if len(mine) > 1:
            names = ", ".join(f"{i.get('name')} ({i.get('id')})" for i in mine)
            raise error("E_USAGE", f"{len(mine)} monte boxes are running: {names}",
                        "name the one to terminate: `monte box down NAME_OR_ID`")
        target = mine[0]
    else:
        found = [i for i in instances if instance in (i.get("id"), i.get("name"))]
        if not found:
            raise error("E_BOX", f"no instance {instance!r} on this Lambda account",
                        "`monte box status` lists the account's instances, by id and name")
        if len(found) > 1:
            ids = ", ".join(str(i.get("id")) for i in found)
            raise error("E_USAGE", f"{len(found)} instances are named {instance!r}: {ids}",
                        "name the one to terminate by its id")
        target = found[0]
    iid = str(target.get("id"))
    name = str(target.get("name") or "")
    if not is_monte_box(target):
        raise error("E_BOX", f"instance {iid}{f' ({name})' if name else ''} is not a monte box; "
                    f"monte terminates only its own (named {NAME_PREFIX}...)",
                    "terminate it from Lambda Cloud's dashboard if you mean to")
    already = target.get("status") in GONE
    if not already:
        client.terminate([iid])
    removed = None
    if ws is not None:
        path = identity_path(ws, iid)
        if path.exists():
            path.unlink()
            removed = str(path)
    return {"terminated": {"id": iid, "name": name, "type": _name_of(target.get("instance_type")),
                           "region": _name_of(target.get("region"))},
            "already_terminating": already, "identity_file_removed": removed}

