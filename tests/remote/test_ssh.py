"""monte.remote.ssh against a real OpenSSH server on loopback (tests/support/sshd.py)."""

from __future__ import annotations

import os
import shutil
import socket
import stat
import subprocess
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from monte.errors import Exit, MonteError
from monte.remote import ssh
from tests.support.sshd import Sshd, keygen


def _box_error(e: pytest.ExceptionInfo[MonteError]) -> MonteError:
    assert e.value.code == "E_BOX"
    assert e.value.exit_code == Exit.BOX == 8
    assert e.value.fix
    return e.value


class ArgvWatch:
    """Samples every process's argv (``/proc/*/cmdline``) in the background, and records any
    that holds the marker: a secret must never be visible there, on either end."""

    def __init__(self, marker: str) -> None:
        self.marker = marker.encode()
        self.seen: list[str] = []
        self.samples = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        own = str(os.getpid())  # this process holds the marker in memory, never in its argv
        while not self._stop.is_set():
            for pid in os.listdir("/proc"):
                if not pid.isdigit() or pid == own:
                    continue
                try:
                    argv = Path(f"/proc/{pid}/cmdline").read_bytes()
                except OSError:
                    continue
                if self.marker in argv:
                    self.seen.append(argv.replace(b"\0", b" ").decode(errors="replace"))
            self.samples += 1

    def __enter__(self) -> ArgvWatch:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def _processes(pattern: str) -> list[str]:
    out = []
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                argv = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
            except OSError:
                continue
            if pattern in argv:
                out.append(argv)
    return out


# --- running commands -------------------------------------------------------------------------


def test_run_returns_stdout(conn: Any) -> None:
    assert ssh.run(conn, "echo hello; echo noise >&2", timeout=30) == "hello\n"


def test_connect_records_the_host_key(sshd: Sshd, conn: Any) -> None:
    lines = ssh.known_hosts_path().read_text().splitlines()
    assert [ln.split()[0] for ln in lines] == [f"[127.0.0.1]:{sshd.port}"]
    assert lines[0].split()[2] == Path(f"{sshd.keys.host_key}.pub").read_text().split()[1]
    assert stat.S_IMODE(ssh.known_hosts_path().stat().st_mode) == 0o600
    # a second connection checks against the record and adds nothing
    sshd.connect().close()
    assert ssh.known_hosts_path().read_text().splitlines() == lines


def test_failing_command_is_e_box_with_its_first_stderr_line(conn: Any) -> None:
    with pytest.raises(MonteError) as e:
        ssh.run(conn, "echo 'first: no such thing' >&2; echo 'then more' >&2; exit 3", timeout=30)
    err = _box_error(e)
    assert err.message.endswith("(exit 3): first: no such thing")
    assert "exit 3" in err.message


def test_execute_returns_the_exit_status(conn: Any) -> None:
    r = ssh.execute(conn, "printf out; printf err >&2; exit 4", timeout=30)
    assert (r.exited, r.stdout, r.stderr, r.ok) == (4, "out", "err", False)


def test_stdin_reaches_the_command(conn: Any) -> None:
    data = bytes(range(256)) * 300  # binary, and more than one SSH window's worth
    out = ssh.run(conn, "sha256sum", stdin=data, timeout=60)
    import hashlib

    assert out.split()[0] == hashlib.sha256(data).hexdigest()


def test_a_command_that_overruns_its_timeout_is_e_box(conn: Any) -> None:
    t = time.monotonic()
    with pytest.raises(MonteError) as e:
        ssh.run(conn, "sleep 20", timeout=0.5)
    assert "did not finish within 0.5s" in _box_error(e).message
    assert time.monotonic() - t < 5


def test_hide_false_copies_output_through(conn: Any, capfd: pytest.CaptureFixture[str]) -> None:
    ssh.run(conn, "echo visible; echo warned >&2", timeout=30, hide=False)
    out, err = capfd.readouterr()
    assert "visible" in out and "warned" in err


# --- secrets never in argv --------------------------------------------------------------------


def test_stdin_never_appears_in_any_argv(conn: Any, tmp_path: Path) -> None:
    marker = "monte-secret-" + uuid.uuid4().hex
    target = tmp_path / "got"
    with ArgvWatch(marker) as watch:
        # the command sleeps before it reads, so the watch samples while the secret is in flight
        ssh.run(conn, f"sleep 0.5; cat > {target}", stdin=marker.encode(), timeout=30)
    assert target.read_text() == marker
    assert watch.samples > 3
    assert watch.seen == []


def test_stream_secrets_writes_a_0600_file_whose_content_matches(conn: Any, tmp_path: Path) -> None:
    from monte.remote.watchdog_script import read_secrets

    marker = "monte-secret-" + uuid.uuid4().hex
    values = {"MONTE_LAMBDA_KEY": marker, "HF_TOKEN": "hf_" + marker,
              "ODD": f"{marker} it's $HOME `x`"}
    path = tmp_path / "etc" / "secrets"
    path.parent.mkdir()
    path.write_text("OLD=1\n")
    path.chmod(0o644)  # an existing, too-open file is replaced, not reused
    with ArgvWatch(marker) as watch:
        ssh.stream_secrets(conn, values, str(path))
    assert watch.seen == []
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert read_secrets(str(path)) == values
    # and a POSIX shell sourcing the file sees the same values
    out = subprocess.run(["sh", "-c", f'set -a; . "{path}"; printf %s "$ODD"'],
                         capture_output=True, text=True, check=True).stdout
    assert out == values["ODD"]
    assert not list(path.parent.glob("*monte-tmp*"))


def test_stream_secrets_creates_its_folder_private(conn: Any, tmp_path: Path) -> None:
    path = tmp_path / "new" / "deeper" / "secrets"
    ssh.stream_secrets(conn, {"K": "v"}, str(path))
    assert path.read_text() == "K=v\n"
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700


def test_stream_secrets_refuses_what_a_line_cannot_hold(conn: Any, tmp_path: Path) -> None:
    with pytest.raises(MonteError) as e:
        ssh.stream_secrets(conn, {"KEY": "two\nlines"}, str(tmp_path / "s"))
    assert "two" not in _box_error(e).message  # the value is never quoted back
    with pytest.raises(MonteError):
        ssh.stream_secrets(conn, {"1BAD": "v"}, str(tmp_path / "s"))
    assert not (tmp_path / "s").exists()


# --- files ------------------------------------------------------------------------------------


def test_put_bytes_writes_atomically_with_the_mode(conn: Any, tmp_path: Path) -> None:
    data = os.urandom(300_000)
    target = tmp_path / "blob.bin"
    target.write_bytes(b"old")
    ssh.put_bytes(conn, data, str(target), mode=0o640)
    assert target.read_bytes() == data
    assert stat.S_IMODE(target.stat().st_mode) == 0o640
    assert [p.name for p in tmp_path.iterdir()] == ["blob.bin"]
    ssh.put_bytes(conn, b"#!/bin/sh\necho ran\n", str(tmp_path / "x.sh"), mode=0o755)
    assert ssh.run(conn, str(tmp_path / "x.sh"), timeout=30) == "ran\n"


def test_put_bytes_into_a_missing_folder_is_e_box(conn: Any, tmp_path: Path) -> None:
    with pytest.raises(MonteError) as e:
        ssh.put_bytes(conn, b"x", str(tmp_path / "nope" / "f"))
    assert "nope/f" in _box_error(e).message


# --- tmux jobs --------------------------------------------------------------------------------


@pytest.fixture
def session(conn: Any) -> Iterator[str]:
    if shutil.which("tmux") is None:
        pytest.skip("tmux is not installed")
    name = "monte-test-" + uuid.uuid4().hex[:12]
    yield name
    ssh.tmux_kill(conn, name)


def test_tmux_start_runs_a_detached_job_with_its_env_from_a_file(
        conn: Any, session: str, tmp_path: Path) -> None:
    marker = "monte-secret-" + uuid.uuid4().hex
    out = tmp_path / "job.out"
    env_dir = tmp_path / "jobs"
    with ArgvWatch(marker) as watch:
        ssh.tmux_start(conn, session, f'printf %s "$JOB_TOKEN" > {out}; sleep 60',
                       env={"JOB_TOKEN": marker}, env_dir=str(env_dir))
        deadline = time.monotonic() + 10
        while not out.exists() or not out.read_text():
            assert time.monotonic() < deadline, "the job never wrote its output"
            time.sleep(0.05)
    assert out.read_text() == marker
    assert watch.seen == []
    env_file = env_dir / f"{session}.env"
    assert stat.S_IMODE(env_file.stat().st_mode) == 0o600
    assert ssh.tmux_alive(conn, session) is True
    # the same name again is refused while the first is alive
    with pytest.raises(MonteError) as e:
        ssh.tmux_start(conn, session, "true", env={}, env_dir=str(env_dir))
    assert "duplicate session" in _box_error(e).message
    assert ssh.tmux_kill(conn, session) is True
    assert ssh.tmux_alive(conn, session) is False


def test_tmux_session_ends_with_its_job(conn: Any, session: str, tmp_path: Path) -> None:
    ssh.tmux_start(conn, session, "true", env={}, env_dir=str(tmp_path))
    deadline = time.monotonic() + 10
    while ssh.tmux_alive(conn, session):
        assert time.monotonic() < deadline
        time.sleep(0.1)


def test_tmux_alive_is_exact_and_names_are_checked(conn: Any, session: str) -> None:
    assert ssh.tmux_alive(conn, session) is False
    with pytest.raises(MonteError):
        ssh.tmux_alive(conn, "bad name; rm -rf /")


# --- failures: refused, wrong key, changed host key, dropped mid-command ----------------------


def test_connection_refused_is_e_box(fresh_sshd: Sshd) -> None:
    fresh_sshd.stop()
    with pytest.raises(MonteError) as e:
        fresh_sshd.connect(connect_timeout=5)
    assert "refused the connection" in _box_error(e).message


def test_a_port_that_never_speaks_ssh_is_e_box_not_a_hang() -> None:
    with socket.socket() as silent:  # accepts TCP (the kernel's backlog), never sends a banner
        silent.bind(("127.0.0.1", 0))
        silent.listen(1)
        port = silent.getsockname()[1]
        start = time.monotonic()
        with pytest.raises(MonteError) as e:
            ssh.connect("127.0.0.1", user="nobody", port=port, key_file=None, connect_timeout=1)
        assert "handshake" in _box_error(e).message
        assert time.monotonic() - start < 10


def test_a_stopped_box_under_an_open_connection_is_e_box(fresh_sshd: Sshd) -> None:
    c = fresh_sshd.connect()
    fresh_sshd.stop()
    with pytest.raises(MonteError) as e:
        ssh.run(c, "true", timeout=10)
    _box_error(e)


def test_a_key_the_box_does_not_know_is_e_box(sshd: Sshd, tmp_path: Path) -> None:
    other = keygen(tmp_path / "other_key")
    with pytest.raises(MonteError) as e:
        sshd.connect(key_file=str(other), connect_timeout=10)
    assert "refused monte's SSH key" in _box_error(e).message


def test_a_missing_key_file_is_e_box(sshd: Sshd, tmp_path: Path) -> None:
    with pytest.raises(MonteError) as e:
        sshd.connect(key_file=str(tmp_path / "absent"))
    assert "no SSH private key" in _box_error(e).message


def test_a_changed_host_key_is_refused_until_forgotten(sshd: Sshd, tmp_path: Path) -> None:
    import paramiko

    # monte once met a different machine at this address
    impostor = paramiko.Ed25519Key.from_private_key_file(str(keygen(tmp_path / "impostor")))
    path = ssh.known_hosts_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"[127.0.0.1]:{sshd.port} {impostor.get_name()} {impostor.get_base64()}\n")
    with pytest.raises(MonteError) as e:
        sshd.connect(connect_timeout=10)
    err = _box_error(e)
    assert "different host key" in err.message and str(path) in err.fix
    assert ssh.forget_host("127.0.0.1", sshd.port) is True
    assert ssh.forget_host("127.0.0.1", sshd.port) is False
    c = sshd.connect(connect_timeout=10)
    c.close()


def test_known_hosts_lives_in_monte_config_not_dot_ssh(tmp_path: Path) -> None:
    assert ssh.known_hosts_path() == Path(os.environ["XDG_CONFIG_HOME"]) / "monte" / "known_hosts"


def _in_background(fn: Callable[[], None], after: float) -> threading.Timer:
    t = threading.Timer(after, fn)
    t.start()
    return t


def test_dropped_mid_command_is_e_box_not_a_hang(fresh_sshd: Sshd) -> None:
    c = fresh_sshd.connect()
    start = time.monotonic()
    timer = _in_background(fresh_sshd.drop_connections, 0.5)
    with pytest.raises(MonteError) as e:
        ssh.run(c, "sleep 30", timeout=20)
    timer.join()
    assert "dropped while running `sleep 30`" in _box_error(e).message
    assert time.monotonic() - start < 10
    # the listener is still up: the next command reconnects
    assert ssh.run(c, "echo back", timeout=30) == "back\n"
    c.close()


def test_dropped_while_streaming_secrets_is_e_box(fresh_sshd: Sshd, tmp_path: Path) -> None:
    c = fresh_sshd.connect()
    timer = _in_background(fresh_sshd.drop_connections, 0.5)
    with pytest.raises(MonteError) as e:
        ssh.run(c, f"sleep 30; cat > {tmp_path / 's'}", stdin=b"K=v\n", timeout=20)
    timer.join()
    assert "dropped" in _box_error(e).message
    assert not (tmp_path / "s").exists()
    c.close()
