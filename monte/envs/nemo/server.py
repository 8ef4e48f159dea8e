"""A NeMo Gym resources server's life, and monte's ``/verify`` client.

:meth:`GymServer.start` runs :mod:`monte.envs.nemo.launch` in the stack's own interpreter (NeMo
Gym is never imported into monte's process), reads its ready line, then waits for ``GET /`` to
answer ``{"status": "ok"}``. :meth:`GymServer.verify_many` posts ``/verify`` for many answers at
once over a bounded pool of keep-alive connections, each answer wrapped as an OpenAI Responses
object, and returns the server's replies in order. The server is stopped by :meth:`close` (a
``with`` block's end, Ctrl-C and exceptions included); if monte itself dies, the server's stdin
closes and it exits on its own.

Every way this can fail is a refusal with its code: the stack's interpreter cannot import the
server (``E_ENV``, naming the missing module and the pip line), the port is in use (``E_ENV``), the
server dies or times out mid-run (``E_ENV``), a reply has no ``reward`` (``E_ENV``), the server
refuses a row as malformed (HTTP 422: ``E_BAD_INPUT``, naming the field).
"""

from __future__ import annotations

import atexit
import http.client
import json
import math
import os
import queue
import shlex
import signal
import socket
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait
from pathlib import Path
from types import TracebackType
from typing import Any
from urllib.parse import urlsplit

from monte.envs.nemo.stack import Stack, require_python
from monte.errors import MonteError, error

LAUNCHER = Path(__file__).with_name("launch.py")
#: Seconds a server may take to become ready (imports dominate: 10-20 s on a small machine).
READY_TIMEOUT = float(os.environ.get("MONTE_GYM_READY_TIMEOUT", "180"))
#: Seconds one /verify may take (math_with_judge forks a process per verify).
VERIFY_TIMEOUT = float(os.environ.get("MONTE_GYM_VERIFY_TIMEOUT", "300"))
#: Concurrent /verify requests.
WORKERS = 16


def response_object(text: str) -> dict[str, Any]:
    """The smallest OpenAI Responses object NeMo Gym's ``/verify`` accepts, holding ``text`` as
    the assistant's one message."""
    return {
        "id": "resp_monte", "created_at": 0.0, "model": "monte", "object": "response",
        "output": [{"id": "msg_monte", "type": "message", "role": "assistant", "status": "completed",
                    "content": [{"type": "output_text", "text": text, "annotations": []}]}],
        "parallel_tool_calls": False, "tool_choice": "auto", "tools": [],
    }


class GymServer:
    """A resources server monte started (``proc``), or one already running at a URL."""

    def __init__(self, url: str, *, label: str, proc: subprocess.Popen[bytes] | None = None,
                 log: Path | None = None) -> None:
        parts = urlsplit(url)
        if parts.scheme != "http" or not parts.hostname:
            raise error("E_USAGE", f"the NeMo Gym server URL {url!r} is not an http://HOST:PORT URL",
                        "point it at a running resources server, e.g. http://127.0.0.1:8000")
        self.url = url.rstrip("/")
        self.host = parts.hostname
        self.port = parts.port or 80
        self.prefix = parts.path.rstrip("/")
        self.label = label
        self.proc = proc
        self.log = log
        self._local = threading.local()
        self._closed = False

    # --- life -----------------------------------------------------------------------------------

    @classmethod
    def start(cls, stack: Stack, *, config: str, instance: str, server: str, port: int | None = None,
              log: Path | None = None, ready_timeout: float = READY_TIMEOUT) -> GymServer:
        """Start ``instance`` (defined by ``config``, its code in ``resources_servers/server``)."""
        python = require_python(stack, f"grading through NeMo Gym's {server} server")
        folder = stack.root / "resources_servers" / server
        if not folder.is_dir():
            raise error("E_NOT_FOUND", f"NeMo Gym at {stack.root} has no resources server {server!r}",
                        "list what it ships with `monte env list --available`")
        if not (folder / "app.py").is_file() and not any(folder.glob("*.py")):
            raise error("E_ENV", f"the resources server folder {folder} has no app.py",
                        "point MONTE_LOCAL at a NeMo Gym checkout whose server folders are whole")
        if port is None:
            port = _port_from_env()
        if log is None:
            fd, name = tempfile.mkstemp(prefix=f"monte-gym-{server}-", suffix=".log")
            os.close(fd)
            log = Path(name)
        log.parent.mkdir(parents=True, exist_ok=True)
        env = {**os.environ, "PYTHONUNBUFFERED": "1", "PYTHONDONTWRITEBYTECODE": "1"}
        env.pop("PYTHONPATH", None)  # monte's own paths mean nothing to NeMo Gym's interpreter
        cmd = [python, str(LAUNCHER), "serve", "--root", str(stack.root), "--config", config,
               "--instance", instance, "--port", str(port)]
        with open(log, "ab") as err:
            proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err,
                                    cwd=stack.root, env=env, start_new_session=True)
        label = f"NeMo Gym server {instance} ({server})"
        try:
            ready = _ready_line(proc, ready_timeout, label, log)
            self = cls(f"http://127.0.0.1:{ready['port']}", label=label, proc=proc, log=log)
            _LIVE.add(self)
            self.wait_alive(ready_timeout)
        except BaseException:
            _stop(proc)
            raise
        return self

    def wait_alive(self, timeout: float = 30.0) -> None:
        """``GET /`` until it answers ``{"status": "ok"}``."""
        deadline = time.monotonic() + timeout
        last = ""
        while time.monotonic() < deadline:
            self._check_running()
            try:
                status, body = self._request("GET", "/", None, timeout=5)
                if status == 200 and json.loads(body or b"null") == {"status": "ok"}:
                    return
                last = f"HTTP {status}"
            except (OSError, http.client.HTTPException, ValueError) as e:
                last = str(e) or type(e).__name__
                self._reset()
            time.sleep(0.1)
        raise error("E_ENV", f"{self.label} at {self.url} did not answer GET / within {timeout:.0f} s ({last})",
                    self._fix())

    def close(self) -> None:
        """Stop the server monte started (nothing for a URL's)."""
        if self._closed:
            return
        self._closed = True
        _LIVE.discard(self)
        for conn in getattr(self._local, "all", []):
            conn.close()
        if self.proc is not None:
            _stop(self.proc)

    def __enter__(self) -> GymServer:
        return self

    def __exit__(self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None) -> None:
        self.close()

    # --- verify ---------------------------------------------------------------------------------

    def verify(self, row: dict[str, Any], answer: str, *, task: str = "") -> dict[str, Any]:
        """The server's ``/verify`` reply for ``answer`` to ``row``; its ``reward`` is a float."""
        body = json.dumps({**row, "response": response_object(answer)}).encode()
        try:
            status, raw = self._post("/verify", body)
        except (OSError, http.client.HTTPException) as e:
            raise self._died(e, task) from None
        where = f" (task {task})" if task else ""
        if status == 422:
            raise error("E_BAD_INPUT", f"{self.label} refused a row{where} as malformed: {_fields_422(raw)}",
                        "the row is not in the server's shape; re-freeze the environment from the server's "
                        "own data (`monte env add`)")
        if status != 200:
            raise error("E_ENV", f"{self.label} answered /verify{where} with HTTP {status}: "
                        f"{raw[:300].decode('utf-8', 'replace')}", self._fix())
        try:
            out = json.loads(raw)
        except ValueError:
            out = None
        reward = out.get("reward") if isinstance(out, dict) else None
        if not isinstance(reward, int | float) or isinstance(reward, bool) or not math.isfinite(reward):
            raise error("E_ENV", f"{self.label}'s /verify reply{where} holds no numeric reward "
                        f"(got {'no reward' if not isinstance(out, dict) or 'reward' not in out else repr(reward)})",
                        "the server is not a NeMo Gym resources server (its /verify must return `reward`); "
                        "nothing was recorded")
        assert isinstance(out, dict)
        return out

    def verify_many(self, rows: Sequence[dict[str, Any]], answers: Sequence[str], *, ids: Sequence[str] = (),
                    workers: int = WORKERS, on_done: Callable[[int, int], None] | None = None) -> list[dict[str, Any]]:
        """``verify`` for every (row, answer), ``workers`` at a time, replies in order. The first
        failure stops the rest and is raised: a partial set is never returned."""
        n = len(rows)
        if n != len(answers):
            raise ValueError("rows and answers differ in length")
        out: list[dict[str, Any] | None] = [None] * n
        if n == 0:
            return []
        done = 0
        lock = threading.Lock()

        def one(i: int) -> None:
            nonlocal done
            out[i] = self.verify(rows[i], answers[i], task=ids[i] if ids else str(i))
            if on_done:
                with lock:
                    done += 1
                    on_done(done, n)

        pool = ThreadPoolExecutor(max_workers=max(1, min(workers, n)), thread_name_prefix="monte-verify")
        try:
            futures = [pool.submit(one, i) for i in range(n)]
            finished, _ = wait(futures, return_when=FIRST_EXCEPTION)
            for f in futures:
                if f.done() and f.exception() is not None:
                    raise f.exception()  # type: ignore[misc]
        finally:
            pool.shutdown(wait=True, cancel_futures=True)
        return [o for o in out if o is not None]

    # --- HTTP -----------------------------------------------------------------------------------

    def _conn(self, timeout: float) -> http.client.HTTPConnection:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = http.client.HTTPConnection(self.host, self.port, timeout=timeout)
            conn.connect()
            # http.client sends a request's headers and body in two writes: without TCP_NODELAY,
            # Nagle's algorithm and the server's delayed ACK hold the body back ~40 ms each time
            conn.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            self._local.conn = conn
            self._local.all = [*getattr(self._local, "all", []), conn]
        conn.timeout = timeout
        return conn

    def _reset(self) -> None:
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            conn.close()
            self._local.conn = None

    def _request(self, method: str, path: str, body: bytes | None, *, timeout: float) -> tuple[int, bytes]:
        conn = self._conn(timeout)
        headers = {"Content-Type": "application/json"} if body is not None else {}
        conn.request(method, self.prefix + path, body=body, headers=headers)
        resp = conn.getresponse()
        return resp.status, resp.read()

    def _post(self, path: str, body: bytes) -> tuple[int, bytes]:
        """One retry on a fresh connection when a kept-alive one was closed under us (the server
        lives, the socket did not); a server that is gone fails both."""
        try:
            return self._request("POST", path, body, timeout=VERIFY_TIMEOUT)
        except (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError, http.client.CannotSendRequest):
            self._reset()
            self._check_running()
            return self._request("POST", path, body, timeout=VERIFY_TIMEOUT)
        except BaseException:
            self._reset()
            raise

    # --- failures -------------------------------------------------------------------------------

    def _check_running(self) -> None:
        if self.proc is not None and self.proc.poll() is not None:
            raise self._died(None, "")

    def _died(self, e: BaseException | None, task: str) -> MonteError:
        where = f" while grading task {task}" if task else ""
        if self.proc is not None and self.proc.poll() is not None:
            what = f"exited with status {self.proc.returncode}"
        elif isinstance(e, TimeoutError):
            what = f"did not answer within {VERIFY_TIMEOUT:.0f} s"
        else:
            what = f"could not be reached ({e})"
        return error("E_ENV", f"{self.label} at {self.url} {what}{where}{_tail(self.log)}; no score is recorded "
                     "from a partial set", self._fix())

    def _fix(self) -> str:
        if self.proc is None:
            return f"make sure the server at {self.url} is up, or unset the server URL so monte starts its own"
        return (f"its log is {self.log}; fix what it names and run the command again (monte starts a fresh "
                "server each run)")


def _port_from_env() -> int:
    raw = os.environ.get("MONTE_GYM_PORT", "0") or "0"
    try:
        port = int(raw)
    except ValueError:
        port = -1
    if not 0 <= port <= 65535:
        raise error("E_USAGE", f"MONTE_GYM_PORT={raw!r} is not a port number", "unset it, or set 1-65535 (0: any free port)")
    return port


def _ready_line(proc: subprocess.Popen[bytes], timeout: float, label: str, log: Path) -> dict[str, Any]:
    """The launcher's first JSON line: ``{"port": ...}``, or a refusal from its ``{"error": ...}``."""
    lines: queue.Queue[bytes] = queue.Queue()
    assert proc.stdout is not None
    stdout = proc.stdout

    def read() -> None:
        for line in iter(stdout.readline, b""):
            lines.put(line)
        lines.put(b"")

    threading.Thread(target=read, daemon=True).start()
    deadline = time.monotonic() + timeout
    while True:
        try:
            line = lines.get(timeout=max(0.0, deadline - time.monotonic()))
        except queue.Empty:
            raise error("E_ENV", f"{label} did not become ready within {timeout:.0f} s{_tail(log)}",
                        f"its log is {log}; a slow machine may need MONTE_GYM_READY_TIMEOUT raised") from None
        if not line:
            proc.wait()
            raise error("E_ENV", f"{label} exited with status {proc.returncode} before it was ready{_tail(log)}",
                        f"its log is {log}")
        try:
            msg = json.loads(line)
        except ValueError:
            continue
        if isinstance(msg, dict) and "error" in msg:
            raise _launch_error(msg, label, log)
        if isinstance(msg, dict) and "port" in msg:
            return msg


def _launch_error(msg: dict[str, Any], label: str, log: Path) -> MonteError:
    kind = msg.get("error")
    if kind == "import":
        module = str(msg.get("module") or "")
        if not module:
            return error("E_ENV", f"{label} cannot start: importing its code failed ({msg.get('message', '')})",
                         f"its log is {log}")
        reqs = [r for r in msg.get("requirements") or [] if isinstance(r, str)]
        python = msg.get("python") or "python"
        line = f"{shlex.quote(python)} -m pip install " + (
            " ".join(shlex.quote(r) for r in reqs) if reqs else shlex.quote(module.split(".")[0]))
        return error("E_ENV", f"{label} cannot start: importing it failed on the missing module {module!r} "
                     f"({msg.get('message', '')})", f"install the server's own dependencies: {line}")
    if kind == "port":
        return error("E_ENV", f"{label} cannot start: port {msg.get('port')} on 127.0.0.1 is in use "
                     f"({msg.get('message', '')})", "free the port, or unset MONTE_GYM_PORT to let monte pick a free one")
    if kind == "entrypoint":
        return error("E_ENV", f"{label} cannot start: {msg.get('path')} is missing or defines no resources server"
                     + (f" ({msg['message']})" if msg.get("message") else ""),
                     "point MONTE_LOCAL at a NeMo Gym checkout whose server folders are whole")
    return error("E_ENV", f"{label} cannot start ({kind}): {msg.get('message', '')}", f"its log is {log}")


def _fields_422(raw: bytes) -> str:
    """FastAPI's validation detail, as the fields it names: ``responses_create_params: Field required``."""
    try:
        detail = json.loads(raw).get("detail")
    except (ValueError, AttributeError):
        return raw[:300].decode("utf-8", "replace")
    if not isinstance(detail, list):
        return str(detail)[:300]
    parts = []
    for d in detail[:5]:
        if isinstance(d, dict):
            loc = ".".join(str(x) for x in d.get("loc", []) if x != "body")
            parts.append(f"{loc or '(body)'}: {d.get('msg', '')}")
    return "; ".join(parts) or "(no detail)"


def _tail(log: Path | None, lines: int = 6) -> str:
    if log is None:
        return ""
    try:
        text = log.read_text(encoding="utf-8", errors="replace").strip().splitlines()
    except OSError:
        return ""
    tail = [ln for ln in text if ln.strip()][-lines:]
    return (": " + " | ".join(t.strip()[:300] for t in tail)) if tail else ""


def _stop(proc: subprocess.Popen[bytes]) -> None:
    """Close stdin (the launcher exits on its own), then SIGTERM, then SIGKILL, its whole group."""
    try:
        if proc.stdin is not None:
            proc.stdin.close()
    except OSError:
        pass
    for sig, grace in ((None, 3.0), (signal.SIGTERM, 3.0), (signal.SIGKILL, 5.0)):
        if sig is not None:
            try:
                os.killpg(proc.pid, sig)
            except (ProcessLookupError, PermissionError):
                pass
        try:
            proc.wait(timeout=grace)
            break
        except subprocess.TimeoutExpired:
            continue
    # uvicorn may have left children in the group (a server that forks per verify)
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    if proc.stdout is not None:
        proc.stdout.close()


class _Live:
    """Servers started by this process, stopped at exit even if no ``with`` block ended."""

    def __init__(self) -> None:
        self.servers: set[GymServer] = set()
        atexit.register(self.stop_all)

    def add(self, s: GymServer) -> None:
        self.servers.add(s)

    def discard(self, s: GymServer) -> None:
        self.servers.discard(s)

    def stop_all(self) -> None:
        for s in list(self.servers):
            s.close()


_LIVE = _Live()


def server_url(config: dict[str, Any], instance: str) -> str | None:
    """An already-running server to use instead of starting one: ``MONTE_GYM_SERVER_URL``, else
    ``.monte.yaml``'s ``nemo_gym: {server_urls: {INSTANCE: URL}}`` (or ``server_url`` for any)."""
    env = os.environ.get("MONTE_GYM_SERVER_URL")
    if env:
        return env
    section = config.get("nemo_gym") if isinstance(config, dict) else None
    if not isinstance(section, dict):
        return None
    urls = section.get("server_urls")
    if isinstance(urls, dict) and isinstance(urls.get(instance), str):
        return str(urls[instance])
    url = section.get("server_url")
    return url if isinstance(url, str) else None


def connect(url: str, label: str) -> GymServer:
    s = GymServer(url, label=f"{label} at {url}")
    s.wait_alive(10.0)
    return s

