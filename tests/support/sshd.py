"""A real OpenSSH server on loopback, for the remote tests (docs/design.md: any SSH host can be
a box, which is how the remote path is tested against a real sshd on loopback).

Keys come from ``ssh-keygen`` in a temporary folder, the server from ``/usr/sbin/sshd -D -e``
with a minimal config of its own (key auth only, no PAM, no accepted client environment). It
logs in as the user running the tests. Nothing here installs anything: without sshd the tests
skip (``SSHD_MISSING``).
"""

from __future__ import annotations

import getpass
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

SSHD = "/usr/sbin/sshd"  # sshd refuses to run unless started by its absolute path
SSH_KEYGEN = "/usr/bin/ssh-keygen"
SSHD_MISSING = (f"openssh-server is not installed ({SSHD} is missing); install it "
                "(apt-get install openssh-server) to run the SSH tests")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def keygen(path: Path, comment: str = "monte-test") -> Path:
    """A fresh ed25519 key pair at ``path`` / ``path.pub``; returns ``path``."""
    subprocess.run([SSH_KEYGEN, "-q", "-t", "ed25519", "-N", "", "-C", comment, "-f", str(path)],
                   check=True, capture_output=True, env={"PATH": "/usr/bin:/bin"})
    return path


@dataclass
class Keys:
    """A host key and a client key, made once per session and shared by every server."""

    folder: Path
    host_key: Path
    client_key: Path

    @classmethod
    def make(cls, folder: Path) -> Keys:
        folder.mkdir(parents=True, exist_ok=True)
        return cls(folder, keygen(folder / "ssh_host_ed25519_key", "monte-test-host"),
                   keygen(folder / "id_ed25519", "monte-test-client"))


class Sshd:
    """One ``sshd -D`` on 127.0.0.1. Attributes the tests use: ``host``, ``port``, ``user``,
    ``key_file`` (the client's private key); ``stop()``, ``start()`` and ``drop_connections()``
    (kill every live session, as a box vanishing would)."""

    def __init__(self, folder: Path, keys: Keys, host_key: Path | None = None) -> None:
        self.folder = folder
        self.keys = keys
        self.host = "127.0.0.1"
        self.user = getpass.getuser()
        self.key_file = str(keys.client_key)
        self.host_key = host_key or keys.host_key
        self.port = 0
        self.proc: subprocess.Popen[bytes] | None = None
        self.log = folder / "sshd.log"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "authorized_keys").write_text(Path(f"{keys.client_key}.pub").read_text())

    @property
    def login(self) -> str:
        """``user@host:port``, as ``--host`` takes it."""
        return f"{self.user}@{self.host}:{self.port}"

    def box_env(self, box: Path) -> dict[str, str]:
        """The settings that make this server a monte box with its folders under ``box``: nothing
        to set up (this machine has it all), jobs run with this interpreter, and this key."""
        return {"MONTE_BOX_SETUP": "true", "MONTE_BOX_PYTHON": sys.executable,
                "MONTE_BOX_WORKDIR": str(box / "work"), "MONTE_BOX_ETC": str(box / "etc"),
                "MONTE_BOX_DATA_ROOT": str(box / "data"), "MONTE_SSH_KEY_FILE": self.key_file}

    def _config(self) -> Path:
        cfg = self.folder / "sshd_config"
        cfg.write_text(
            f"Port {self.port}\n"
            f"ListenAddress {self.host}\n"
            f"HostKey {self.host_key}\n"
            f"AuthorizedKeysFile {self.folder / 'authorized_keys'}\n"
            "PubkeyAuthentication yes\n"
            "PasswordAuthentication no\n"
            "KbdInteractiveAuthentication no\n"
            "PermitRootLogin prohibit-password\n"
            "UsePAM no\n"
            "StrictModes no\n"
            f"PidFile {self.folder / 'sshd.pid'}\n"
            "Subsystem sftp internal-sftp\n"
            "LogLevel VERBOSE\n"
            # No AcceptEnv line: the client's environment never reaches the box, as on Lambda
            # (secrets must travel in files, and the tests would notice if they did not).
        )
        return cfg

    def start(self, timeout: float = 15.0) -> None:
        if os.geteuid() == 0:
            # sshd's privilege separation needs this runtime folder; systemd's ssh.service
            # would create it, and on a machine where sshd never ran nobody has.
            Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)
        last = ""
        for _ in range(3):  # a free port can be taken between the probe and the bind
            self.port = _free_port()
            cfg = self._config()
            check = subprocess.run([SSHD, "-t", "-f", str(cfg)], capture_output=True, text=True)
            if check.returncode != 0:
                raise RuntimeError(f"sshd rejects its test config: {check.stderr.strip()}")
            with open(self.log, "ab") as log:
                self.proc = subprocess.Popen([SSHD, "-D", "-e", "-f", str(cfg)], stdout=log,
                                             stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                             env={"PATH": "/usr/bin:/bin:/usr/sbin:/sbin"})
            if self._wait(timeout):
                return
            last = self.log.read_text(errors="replace")[-2000:]
            self.stop()
        raise RuntimeError(f"sshd did not start on 127.0.0.1; its log ends:\n{last}")

    def _wait(self, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc is None or self.proc.poll() is not None:
                return False
            try:
                with socket.create_connection((self.host, self.port), timeout=1) as s:
                    if s.recv(64).startswith(b"SSH-2.0-"):
                        return True
            except OSError:
                time.sleep(0.05)
        return False

    def _descendants(self) -> list[int]:
        """Every process under the listener: the per-connection sshd processes (which call
        setsid, so no process group reaches them) and the commands they run."""
        if self.proc is None:
            return []
        children: dict[int, list[int]] = {}
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            ppid = int(stat.rsplit(")", 1)[1].split()[1])
            children.setdefault(ppid, []).append(int(entry))
        out, todo = [], [self.proc.pid]
        while todo:
            for child in children.get(todo.pop(), []):
                out.append(child)
                todo.append(child)
        return out

    def drop_connections(self) -> None:
        """Kill every live SSH session at once (the listener keeps running)."""
        for pid in self._descendants():
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass

    def stop(self) -> None:
        """Kill the sessions and the listener; the port then refuses connections."""
        if self.proc is None:
            return
        self.drop_connections()
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None

    def connect(self, **kw: Any) -> Any:
        """``monte.remote.ssh.connect`` to this server, as its user, with the client key."""
        from monte.remote import ssh

        kw.setdefault("key_file", self.key_file)
        return ssh.connect(self.host, user=self.user, port=self.port, **kw)

    def __repr__(self) -> str:
        return f"Sshd({self.user}@{self.host}:{self.port})"


def module_sshd(tmp_path_factory: Any) -> Iterator[Sshd]:
    """The body of a module-scoped fixture: a real sshd on loopback with keys of its own, started
    for the module's tests and stopped after them; skips where openssh-server is missing."""
    import pytest

    if not os.path.exists(SSHD):
        pytest.skip(SSHD_MISSING)
    server = Sshd(tmp_path_factory.mktemp("sshd"), Keys.make(tmp_path_factory.mktemp("ssh-keys")))
    server.start()
    yield server
    server.stop()
