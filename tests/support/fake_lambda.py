"""A fake Lambda Cloud API on loopback, for the box, client and watchdog tests.

Lambda's API across the internet cannot be reached here (no network, no account, and a real
launch costs money), so this is the one faked boundary: a small ``http.server`` in a thread on
127.0.0.1 that speaks the API's shapes (``{"data": ...}``, ``{"error": {"code", "message",
"suggestion"}}``), checks the bearer key, and holds instances in memory. The client under test,
``monte.remote.lambda_api``, is the same code that talks to the real API; only its base URL
(``MONTE_LAMBDA_API``, or a box's ``api_base`` for the watchdog's tick script) points here.

It can be told to misbehave the ways the real one does: no capacity in some regions (or capacity
listed but refused at launch, as a stale listing is), 429 N times, a 500 on a path, a launch
whose answer is lost after the instance was made (the connection drops), an instance that
never becomes active.
"""

from __future__ import annotations

import json
import secrets
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

KEY = "lk-test-SECRET-0123456789abcdef"

INVALID_KEY = {"code": "global/invalid-api-key", "message": "API key was invalid, expired, or deleted.",
               "suggestion": "Check your API key or create a new one, then try again."}
CAPACITY = {"code": "instance-operations/launch/insufficient-capacity",
            "message": "Not enough capacity to fulfill launch request.",
            "suggestion": "Choose an instance type with more availability, or try again later."}
RATE = {"code": "global/too-many-requests", "message": "Too many requests.",
        "suggestion": "Wait a moment, then try again."}
MISSING = {"code": "global/object-does-not-exist", "message": "Specified instance does not exist."}
WRONG_REGION = {"code": "instance-operations/launch/file-system-in-wrong-region",
                "message": "File system is in a different region than the instance.",
                "suggestion": "Launch in the file system's region."}
BAD = {"code": "global/invalid-parameters", "message": "Invalid request."}

TYPES: dict[str, dict[str, Any]] = {
    "gpu_1x_h100_pcie": {"description": "1x H100 (80 GB PCIe)", "price_cents_per_hour": 249,
                         "specs": {"vcpus": 26, "memory_gib": 200, "storage_gib": 1000, "gpus": 1}},
    "gpu_1x_a10": {"description": "1x A10 (24 GB PCIe)", "price_cents_per_hour": 75,
                   "specs": {"vcpus": 30, "memory_gib": 200, "storage_gib": 1400, "gpus": 1}},
}
REGIONS = {"us-east-1": "Virginia, USA", "us-west-1": "California, USA", "us-south-1": "Texas, USA"}


def shrink_waits(monkeypatch: pytest.MonkeyPatch) -> None:
    """Shrink every wait the client and `box up` make (module constants), so a retry or a poll
    costs milliseconds."""
    from monte.remote import boxes, lambda_api

    monkeypatch.setattr(lambda_api, "RETRY_BASE_S", 0.005)
    monkeypatch.setattr(lambda_api, "RETRY_MAX_SLEEP_S", 0.02)
    monkeypatch.setattr(lambda_api, "RETRY_BUDGET_S", 0.3)
    monkeypatch.setattr(lambda_api, "NO_NETWORK_BUDGET_S", 0.3)
    monkeypatch.setattr(lambda_api, "FIND_LAUNCHED_WAIT_S", 0.3)
    monkeypatch.setattr(lambda_api, "FIND_LAUNCHED_POLL_S", 0.01)
    monkeypatch.setattr(lambda_api, "REQUEST_TIMEOUT_S", 5.0)
    monkeypatch.setattr(boxes, "POLL_S", 0.005)


@dataclass
class FakeLambda:
    key: str = KEY
    #: type -> regions with capacity (what instance-types lists, and where launch succeeds)
    capacity: dict[str, list[str]] = field(default_factory=lambda: {
        "gpu_1x_h100_pcie": ["us-east-1", "us-west-1"], "gpu_1x_a10": ["us-west-1"]})
    #: regions instance-types lists as having capacity but where launch is refused (stale listing)
    stale: set[str] = field(default_factory=set)
    file_systems: list[dict[str, Any]] = field(default_factory=lambda: [
        {"id": "fs0001", "name": "monte-data", "region": {"name": "us-east-1", "description": ""},
         "mount_point": "/lambda/nfs/monte-data", "is_in_use": False, "bytes_used": 0}])
    ssh_keys: list[dict[str, Any]] = field(default_factory=lambda: [
        {"id": "k1", "name": "laptop", "public_key": "ssh-ed25519 AAAA... laptop"}])
    #: GETs of an instance (by id or in a listing) before a booting one becomes active
    boot_polls: int = 2
    never_active: bool = False
    #: answer the next N requests (any path) with 429
    rate_limit_next: int = 0
    #: path prefix -> answer the next N requests under it with 500
    fail_500: dict[str, int] = field(default_factory=dict)
    #: make the next launch's instance, then drop the connection without answering
    drop_launch_response: bool = False

    instances: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: (method, path, body) of every request that passed the key check
    log: list[tuple[str, str, Any]] = field(default_factory=list)
    #: every Authorization header value seen (to prove the key travelled only there)
    auth_headers: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._lock = threading.RLock()
        self._server: ThreadingHTTPServer | None = None

    # --- lifecycle ------------------------------------------------------------------------------

    def start(self) -> FakeLambda:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:  # keep test output clean
                pass

            def do_GET(self) -> None:
                fake._handle(self, "GET")

            def do_POST(self) -> None:
                fake._handle(self, "POST")

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.01},
                         daemon=True).start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()

    @property
    def url(self) -> str:
        assert self._server is not None
        return f"http://127.0.0.1:{self._server.server_port}/api/v1"

    # --- seeding and reading --------------------------------------------------------------------

    def add_instance(self, name: str, *, status: str = "active", region: str = "us-east-1",
                     type_: str = "gpu_1x_h100_pcie", file_systems: list[str] | None = None,
                     iid: str | None = None) -> str:
        iid = iid or secrets.token_hex(16)
        with self._lock:
            self.instances[iid] = self._instance(iid, name, region, type_, ["laptop"],
                                                 file_systems or [], status)
        return iid

    def live(self) -> list[dict[str, Any]]:
        """Instances still running or booting (what would bill)."""
        with self._lock:
            return [i for i in self.instances.values()
                    if i["status"] not in ("terminated", "terminating")]

    def calls(self, method: str, prefix: str) -> list[Any]:
        return [body for m, p, body in self.log if m == method and p.startswith(prefix)]

    # --- the API --------------------------------------------------------------------------------

    def _instance(self, iid: str, name: str, region: str, type_: str, keys: list[str],
                  fss: list[str], status: str) -> dict[str, Any]:
        n = len(self.instances) + 2
        ip = f"198.51.100.{n}" if status == "active" else None
        return {"id": iid, "name": name, "ip": ip, "private_ip": f"10.0.0.{n}", "status": status,
                "ssh_key_names": keys, "file_system_names": fss,
                "region": {"name": region, "description": REGIONS.get(region, region)},
                "instance_type": {"name": type_, **TYPES.get(type_, {})},
                "hostname": ip, "jupyter_token": "jt", "jupyter_url": "https://jupyter.invalid",
                "is_reserved": False, "_polls": 0}

    @staticmethod
    def _public(inst: dict[str, Any]) -> dict[str, Any]:
        return {k: v for k, v in inst.items() if not k.startswith("_")}

    def _poll(self, inst: dict[str, Any]) -> None:
        """A GET saw this instance: booting ones come up after ``boot_polls`` looks, terminating
        ones finish terminating."""
        inst["_polls"] += 1
        if inst["status"] == "booting" and not self.never_active and inst["_polls"] >= self.boot_polls:
            inst["status"] = "active"
            inst["ip"] = inst["hostname"] = f"198.51.100.{10 + len(self.instances)}"
        elif inst["status"] == "terminating" and inst["_polls"] >= 1:
            inst["status"] = "terminated"

    def _handle(self, h: BaseHTTPRequestHandler, method: str) -> None:
        length = int(h.headers.get("Content-Length") or 0)
        raw = h.rfile.read(length) if length else b""
        auth = h.headers.get("Authorization", "")
        path = h.path.split("?", 1)[0]
        with self._lock:
            self.auth_headers.append(auth)
            if auth != f"Bearer {self.key}":
                return self._send(h, 401, {"error": INVALID_KEY})
            try:
                body = json.loads(raw) if raw else None
            except ValueError:
                return self._send(h, 400, {"error": BAD})
            self.log.append((method, path, body))
            if self.rate_limit_next > 0:
                self.rate_limit_next -= 1
                return self._send(h, 429, {"error": RATE}, {"Retry-After": "0"})
            for prefix, n in self.fail_500.items():
                if n > 0 and path.startswith(prefix):
                    self.fail_500[prefix] = n - 1
                    return self._send(h, 500, {"error": {"code": "global/unknown",
                                                         "message": "Internal server error."}})
            route = (method, path.removeprefix("/api/v1"))
            return self._route(h, route, body)

    def _route(self, h: BaseHTTPRequestHandler, route: tuple[str, str], body: Any) -> None:
        method, path = route
        if route == ("GET", "/instance-types"):
            data = {t: {"instance_type": {"name": t} | spec,
                        "regions_with_capacity_available": [
                            {"name": r, "description": REGIONS[r]}
                            for r in self.capacity.get(t, [])]}
                    for t, spec in TYPES.items()}
            return self._send(h, 200, {"data": data})
        if route == ("GET", "/instances"):
            shown = []
            for inst in list(self.instances.values()):
                if inst["status"] == "terminated":
                    continue
                shown.append(self._public(inst))
                self._poll(inst)
            return self._send(h, 200, {"data": shown})
        if method == "GET" and path.startswith("/instances/"):
            one = self.instances.get(path.removeprefix("/instances/"))
            if one is None or one["status"] == "terminated":
                return self._send(h, 404, {"error": MISSING})
            out = self._public(one)
            self._poll(one)
            return self._send(h, 200, {"data": out})
        if route == ("GET", "/file-systems"):
            return self._send(h, 200, {"data": self.file_systems})
        if route == ("GET", "/ssh-keys"):
            return self._send(h, 200, {"data": self.ssh_keys})
        if route == ("POST", "/instance-operations/launch"):
            return self._launch(h, body)
        if route == ("POST", "/instance-operations/terminate"):
            ids = body.get("instance_ids") if isinstance(body, dict) else None
            if not isinstance(ids, list) or any(i not in self.instances for i in ids):
                return self._send(h, 404, {"error": MISSING})
            done = []
            for i in ids:
                inst = self.instances[i]
                if inst["status"] != "terminated":
                    inst["status"] = "terminating"
                    inst["_polls"] = 0
                done.append(self._public(inst))
            return self._send(h, 200, {"data": {"terminated_instances": done}})
        return self._send(h, 404, {"error": {"code": "global/object-does-not-exist",
                                             "message": f"No route {method} {path}."}})

    def _launch(self, h: BaseHTTPRequestHandler, body: Any) -> None:
        if not isinstance(body, dict):
            return self._send(h, 400, {"error": BAD})
        region, type_ = body.get("region_name"), body.get("instance_type_name")
        keys, fss = body.get("ssh_key_names") or [], body.get("file_system_names") or []
        if type_ not in TYPES or region not in REGIONS or len(keys) != 1:
            return self._send(h, 400, {"error": BAD})
        if keys[0] not in {k["name"] for k in self.ssh_keys}:
            return self._send(h, 404, {"error": {"code": "global/object-does-not-exist",
                                                 "message": "SSH key not found."}})
        for name in fss:
            fs = next((f for f in self.file_systems if f["name"] == name), None)
            if fs is None:
                return self._send(h, 404, {"error": {"code": "global/object-does-not-exist",
                                                     "message": "File system not found."}})
            if fs["region"]["name"] != region:
                return self._send(h, 400, {"error": WRONG_REGION})
        if region not in self.capacity.get(type_, []) or region in self.stale:
            return self._send(h, 400, {"error": CAPACITY})
        iid = secrets.token_hex(16)
        self.instances[iid] = self._instance(iid, str(body.get("name") or ""), region, type_, keys,
                                             fss, "booting")
        if self.drop_launch_response:
            self.drop_launch_response = False
            h.close_connection = True  # the instance exists; its answer never arrives
            return None
        return self._send(h, 200, {"data": {"instance_ids": [iid]}})

    @staticmethod
    def _send(h: BaseHTTPRequestHandler, status: int, doc: dict[str, Any],
              headers: dict[str, str] | None = None) -> None:
        raw = json.dumps(doc).encode()
        h.send_response(status)
        h.send_header("Content-Type", "application/json")
        h.send_header("Content-Length", str(len(raw)))
        for k, v in (headers or {}).items():
            h.send_header(k, v)
        h.end_headers()
        h.wfile.write(raw)
