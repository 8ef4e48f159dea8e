"""A real GCS emulator on loopback (``gcp-storage-emulator``) for the tests (the fixtures
``emulator``, ``gcs`` and ``read_only_gcs`` in ``tests/conftest.py``).

Everything monte does against GCS runs against it for real: google-cloud-storage for claims,
refs and run files, dvc-gs/gcsfs for the Vault's DVC remote. What the emulator cannot do is IAM:
it accepts any request. A "key that cannot write" is therefore played by a small proxy in front
of the emulator that answers every write with GCS's own 403 error body: the one narrow place
these tests fake anything about GCS.
"""

from __future__ import annotations

import contextlib
import http.server
import json
import os
import shutil
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
import uuid
from pathlib import Path

import pytest

EMULATOR = shutil.which("gcp-storage-emulator") or str(Path(sys.executable).parent / "gcp-storage-emulator")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait(port: int, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"the GCS emulator did not start on port {port}")


class Emulator:
    """``gcp-storage-emulator`` with its data on disk, so it can be killed and restarted."""

    def __init__(self, data_dir: Path) -> None:
        self.data_dir = data_dir
        self.port = _free_port()
        self.proc: subprocess.Popen[bytes] | None = None
        self.start()

    @property
    def host(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        log = self.data_dir.parent / f"{self.data_dir.name}.log"
        with open(log, "ab") as err:
            self.proc = subprocess.Popen(
                [EMULATOR, "-d", str(self.data_dir), "start", "--host", "127.0.0.1", "--port", str(self.port), "-q"],
                stdout=subprocess.DEVNULL, stderr=err, start_new_session=True)
        try:
            _wait(self.port)
        except RuntimeError as e:
            raise RuntimeError(f"{e}; its stderr: {log.read_text(errors='replace')[-2000:]}") from None

    def kill(self) -> None:
        if self.proc and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()

    def create_bucket(self, name: str | None = None) -> str:
        name = name or f"b-{uuid.uuid4().hex[:12]}"
        req = urllib.request.Request(f"{self.host}/storage/v1/b?project=test", method="POST",
                                     data=json.dumps({"name": name}).encode(),
                                     headers={"Content-Type": "application/json"})
        urllib.request.urlopen(req, timeout=10).read()
        return name


class Outage:
    """A TCP forwarder in front of the emulator whose ``cut()`` drops every connection and stops
    listening, as GCS going away from the network looks to a client; ``restore()`` listens again
    on the same port.

    A test that needs GCS to vanish mid-request cuts this instead of killing the emulator: the
    emulator rewrites its whole metadata file in place on every write, so a SIGKILL mid-write
    leaves it unable to start again (real GCS commits each object atomically)."""

    def __init__(self, upstream_port: int) -> None:
        self.upstream_port = upstream_port
        self.port = _free_port()
        self._conns: list[socket.socket] = []
        self._lock = threading.Lock()
        self._listener: socket.socket | None = None
        self.restore()

    @property
    def host(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def restore(self) -> None:
        ls = socket.socket()
        ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        ls.bind(("127.0.0.1", self.port))
        ls.listen(64)
        self._listener = ls
        threading.Thread(target=self._accept, args=(ls,), daemon=True).start()

    def _accept(self, ls: socket.socket) -> None:
        while True:
            try:
                client, _ = ls.accept()
            except OSError:
                return
            try:
                upstream = socket.create_connection(("127.0.0.1", self.upstream_port), timeout=10)
            except OSError:
                client.close()
                continue
            with self._lock:
                self._conns += [client, upstream]
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    @staticmethod
    def _pump(src: socket.socket, dst: socket.socket) -> None:
        try:
            while data := src.recv(65536):
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def cut(self) -> None:
        if self._listener is not None:  # shutdown wakes the accept; close alone keeps it listening
            try:
                self._listener.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            self._listener.close()
            self._listener = None
        with self._lock:
            conns, self._conns = self._conns, []
        for c in conns:  # shutdown wakes the pump blocked in recv; close alone would not
            with contextlib.suppress(OSError):
                c.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            with contextlib.suppress(OSError):
                c.shutdown(socket.SHUT_RDWR)
            c.close()

    def close(self) -> None:
        self.cut()


class ReadOnlyProxy:
    """Forwards reads to the emulator; answers every write 403, as GCS does for a key whose
    role cannot create objects."""

    def __init__(self, upstream: str) -> None:
        self.upstream = upstream
        proxy = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *a: object) -> None:
                pass

            def _forward(self) -> None:
                n = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(n) if n else None
                if self.command != "GET":
                    err = json.dumps({"error": {"code": 403, "message": "caller does not have "
                                                "storage.objects.create access", "errors": []}}).encode()
                    self.send_response(403)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(err)))
                    self.end_headers()
                    self.wfile.write(err)
                    return
                req = urllib.request.Request(proxy.upstream + self.path, data=body, method=self.command,
                                             headers={k: v for k, v in self.headers.items() if k.lower() != "host"})
                try:
                    with urllib.request.urlopen(req, timeout=30) as r:
                        status, headers, data = r.status, r.headers, r.read()
                except urllib.error.HTTPError as e:
                    status, headers, data = e.code, e.headers, e.read()
                self.send_response(status)
                for k, v in headers.items():
                    if k.lower() not in ("transfer-encoding", "connection", "content-length"):
                        self.send_header(k, v)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _forward

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def host(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


FAKE_SECRET = "MONTE-FAKE-KEY-7f3a9c"


def write_fake_key(path: Path) -> Path:
    """A service-account key file: the emulator accepts any resolvable key. Its private key is a
    recognisable marker, so a test can look for it everywhere a secret must not appear."""
    path.write_text(json.dumps({
        "type": "service_account", "project_id": "test", "private_key_id": "k1",
        "private_key": f"-----BEGIN PRIVATE KEY-----\n{FAKE_SECRET}\n-----END PRIVATE KEY-----\n",
        "client_email": "monte@test.iam.gserviceaccount.com", "client_id": "1",
        "token_uri": "https://oauth2.googleapis.com/token"}))
    path.chmod(0o600)
    return path


def gcs_env(emulator: Emulator, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> dict[str, str]:
    """Point monte at the emulator with a fresh bucket and one key on both ladders."""
    monkeypatch.setenv("STORAGE_EMULATOR_HOST", emulator.host)
    monkeypatch.setenv("GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT", "false")
    monkeypatch.setenv("MONTE_GCS_RETRY_S", "5")
    for k in ("MONTE_GCS_KEY_FILE", "MONTE_GCS_KEY_OP", "MONTE_GCS_BOX_KEY_FILE", "MONTE_GCS_BOX_KEY_OP",
              "MONTE_VAULT", "MONTE_BUCKET"):
        monkeypatch.delenv(k, raising=False)
    key = write_fake_key(tmp_path / "gcs-key.json")
    monkeypatch.setenv("MONTE_GCS_BOX_KEY_FILE", str(key))  # the write ladder's first rung
    monkeypatch.setenv("MONTE_GCS_KEY_FILE", str(key))  # the read ladder's
    bucket = emulator.create_bucket()
    return {"bucket": bucket, "url": f"gs://{bucket}", "key": str(key), "host": emulator.host}
