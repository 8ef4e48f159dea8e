"""The one place monte opens SSH: Fabric's :class:`~fabric.Connection` over paramiko.

Everything here maps what SSH can throw (refused, timed out, wrong key, a changed host key, a
connection dropped mid-command) to ``E_BOX`` with a fix, and never lets a command hang: every
call takes a timeout.

**Secrets never travel in argv.** A process's argv is readable by every user of the box (and of
the laptop) through ``ps``/``/proc``. So secrets go over the command's stdin
(:func:`stream_secrets`), land in 0600 files written under ``umask 077``, and a tmux job gets its
environment by sourcing such a file (:func:`tmux_start`). Nothing here logs stdin.

**Known hosts: trust on first use, in a file monte owns.** An ephemeral box's host key cannot be
known before its first boot, so the first connection to an address accepts whatever key it
offers (as ``ssh -o StrictHostKeyChecking=accept-new`` does) and records it in
``$XDG_CONFIG_HOME/monte/known_hosts`` (default ``~/.config/monte/known_hosts``). Every later
connection to that address must present the same key, or it is refused as a possible
man-in-the-middle. That is the honest limit of this scheme: the first connection is not verified.
The file is monte's, not ``~/.ssh/known_hosts``: Lambda hands a terminated box's address to the
next box, and monte must be able to forget an address (:func:`forget_host`, which
``monte box up`` calls for an address it has just been given) without editing the user's own file.
It is per user rather than under the data root because a host key belongs to the machine that met
it, and a data root can be shared with the boxes over NFS.
"""

from __future__ import annotations

import codecs
import errno
import math
import os
import re
import shlex
import sys
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from monte.errors import MonteError, error

if TYPE_CHECKING:
    import fabric
    import paramiko

KEEPALIVE_S = 15  # notice a dead box between commands, not only when a command times out
_POLL_S = 0.01
#: the longest pause between two looks at a quiet channel: a short command (the grader's hello,
#: 0.2 s of work) is seen to end within this, not a doubling backoff's 0.2 s later
_POLL_MAX_S = 0.05
_SECRET_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_SESSION = re.compile(r"[A-Za-z0-9_-]+\Z")  # tmux itself rewrites '.' and ':' in names
_PLAIN = re.compile(r"[A-Za-z0-9_@%+=:,./-]+\Z")


# --- known hosts ------------------------------------------------------------------------------


def known_hosts_path() -> Path:
    """monte's own known_hosts file (see the module docstring for why not ``~/.ssh``)."""
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "monte" / "known_hosts"


def _host_key_name(host: str, port: int) -> str:
    # The same spelling OpenSSH and paramiko use in known_hosts.
    return host if port == 22 else f"[{host}]:{port}"


def _ensure_known_hosts(path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    if not path.exists():
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        os.close(fd)


def forget_host(host: str, port: int = 22, *, known_hosts: str | Path | None = None) -> bool:
    """Drop the recorded key of ``host:port``; the next connection trusts a new one. Call it
    only for an address that is known to belong to a new machine (a box just launched).
    Returns whether a key was recorded."""
    import paramiko

    path = Path(known_hosts) if known_hosts else known_hosts_path()
    if not path.exists():
        return False
    keys = paramiko.HostKeys(str(path))
    name = _host_key_name(host, port)
    if name not in keys:
        return False
    del keys[name]
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex}")
    keys.save(str(tmp))
    os.chmod(tmp, 0o600)
    os.replace(tmp, path)
    return True


def _recording_policy(path: Path) -> paramiko.MissingHostKeyPolicy:
    import paramiko
    from paramiko.hostkeys import HostKeyEntry

    class _RecordNewHostKey(paramiko.MissingHostKeyPolicy):  # type: ignore[misc]  # paramiko: untyped
        """Trust a host met for the first time, and write its key down."""

        def missing_host_key(self, client: paramiko.SSHClient, hostname: str,
                             key: paramiko.PKey) -> None:
            client.get_host_keys().add(hostname, key.get_name(), key)
            line = HostKeyEntry([hostname], key).to_line()
            if line:
                # Append, not rewrite: two monte processes meeting two boxes keep both lines.
                with open(path, "a", encoding="utf-8") as f:
                    f.write(line)

    return _RecordNewHostKey()


# --- connecting -------------------------------------------------------------------------------


def _where(conn: fabric.Connection) -> str:
    return f"{conn.user}@{conn.host}:{conn.port}"


def connect(host: str, *, user: str | None, port: int = 22, key_file: str | None,
            connect_timeout: float = 15, known_hosts: str | Path | None = None,
            ) -> fabric.Connection:
    """An open SSH connection to ``user@host:port``, or ``E_BOX`` saying why not.

    ``key_file`` names the private key to offer; with it, only that key is tried (no agent, no
    ``~/.ssh/id_*``), so what authenticates is what the caller chose. Without it, paramiko's
    defaults apply (the agent, then the usual key files). Host keys: see the module docstring.
    """
    from fabric import Connection

    t = float(connect_timeout)
    connect_kwargs: dict[str, Any] = {"banner_timeout": t, "auth_timeout": t}
    if key_file:
        from monte.storage.keys import looks_like_a_secret

        # never the value in a message: a private key pasted where its path belongs is the key
        if looks_like_a_secret(key_file):
            raise error("E_BOX", "the SSH key setting (--ssh-key or MONTE_SSH_KEY_FILE) holds what looks "
                        "like a private key itself, not its path",
                        "save the private key in a file only you can read and pass that file's path")
        key_path = Path(os.path.expanduser(key_file))
        if not key_path.is_file():
            raise error("E_BOX", "no SSH private key at the path --ssh-key or MONTE_SSH_KEY_FILE names",
                        "pass the private key whose public half the box was launched with "
                        "(--ssh-key PATH)")
        connect_kwargs.update(key_filename=[str(key_path)], look_for_keys=False, allow_agent=False)
    # Fabric truncates connect_timeout to an int, and 0 would mean "non-blocking".
    conn = Connection(host, user=user, port=port, connect_timeout=max(1, math.ceil(t)),
                      connect_kwargs=connect_kwargs)
    path = Path(known_hosts) if known_hosts else known_hosts_path()
    _ensure_known_hosts(path)
    conn.client.get_host_keys().load(str(path))
    conn.client.set_missing_host_key_policy(_recording_policy(path))
    _open(conn, path)
    return conn


def _open(conn: fabric.Connection, known_hosts: Path | None = None) -> None:
    if conn.is_connected:
        return
    try:
        conn.open()
    except Exception as e:
        raise _connect_error(conn, e, known_hosts or known_hosts_path()) from None
    if conn.transport is not None:
        conn.transport.set_keepalive(KEEPALIVE_S)


def _connect_error(conn: fabric.Connection, e: Exception, known_hosts: Path) -> MonteError:
    import socket

    import paramiko
    from paramiko.ssh_exception import NoValidConnectionsError

    where = _where(conn)
    up = "check the box is up and reachable (monte box status)"
    if isinstance(e, paramiko.BadHostKeyException):
        return error("E_BOX", f"{conn.host}:{conn.port} presented a different host key than the "
                     "one monte recorded for it: a new machine at that address, or someone in "
                     "the middle",
                     f"if that address now belongs to a box you just launched, remove its line "
                     f"from {known_hosts} and connect again; otherwise do not connect")
    if isinstance(e, paramiko.AuthenticationException):
        return error("E_BOX", f"{where} refused monte's SSH key ({e})",
                     "pass the private key whose public half the box was launched with "
                     "(--ssh-key PATH), and the box's login user (Lambda boxes use 'ubuntu')")
    refused = isinstance(e, ConnectionRefusedError) or (
        isinstance(e, NoValidConnectionsError)
        and all(getattr(x, "errno", None) == errno.ECONNREFUSED for x in e.errors.values()))
    if refused:
        return error("E_BOX", f"{where} refused the connection (nothing listens on port "
                     f"{conn.port})", f"{up}; a box that is still booting refuses for a minute")
    if isinstance(e, socket.gaierror):
        return error("E_BOX", f"cannot resolve the host name {conn.host!r} ({e.strerror})",
                     "check the box's address (monte box status)")
    if isinstance(e, TimeoutError):
        return error("E_BOX", f"no answer from {where} within {conn.connect_timeout}s",
                     f"{up}, and that its firewall lets port {conn.port} in")
    if isinstance(e, paramiko.SSHException | EOFError):
        return error("E_BOX", f"the SSH handshake with {where} failed ({e or type(e).__name__})",
                     f"{up}; if it has just booted, try again in a minute")
    if isinstance(e, OSError):
        return error("E_BOX", f"could not connect to {where} ({e.strerror or e})", up)
    return error("E_BOX", f"could not connect to {where} ({type(e).__name__}: {e})", up)


def _dropped(conn: fabric.Connection, what: str, e: BaseException | None = None) -> MonteError:
    detail = f" ({type(e).__name__}: {e})" if e is not None and str(e) else ""
    return error("E_BOX", f"the connection to {_where(conn)} dropped while running {what}{detail}",
                 "check the box is still up (monte box status): the watchdog or `monte box down` "
                 "may have terminated it; otherwise run the command again")


# --- running commands -------------------------------------------------------------------------


@dataclass(frozen=True)
class Completed:
    """What a remote command left: its exit status and its output (decoded as UTF-8)."""

    exited: int
    stdout: str
    stderr: str

    @property
    def ok(self) -> bool:
        return self.exited == 0


def _label(cmd: str) -> str:
    one = " ".join(cmd.split())
    return f"`{one[:117]}...`" if len(one) > 120 else f"`{one}`"


def execute(conn: fabric.Connection, cmd: str, *, timeout: float, stdin: bytes | None = None,
            hide: bool = True) -> Completed:
    """Run ``cmd`` (a shell command line, run by the login shell) and wait at most ``timeout``
    seconds. ``stdin`` is sent to the command and then closed (never echoed, never logged).

    A non-zero exit is returned, not raised (see :func:`run`); a dropped connection or a timeout
    is ``E_BOX``. With ``hide=False`` the output is also copied to this process's stdout/stderr
    as it arrives.
    """
    deadline = time.monotonic() + timeout
    conv = Conversation(conn, cmd, timeout=timeout, hide=hide)
    try:
        if stdin:
            conv.send(stdin)
    except BaseException:
        conv.close()
        raise
    return conv.finish(timeout=timeout, deadline=deadline)


class Conversation:
    """One remote command whose stdin stays open for a reply: a request, an answer line, a reply,
    then its end (the grader's read of a new base: the weights, the fingerprint of the copy it
    loaded, then the go once that fingerprint was checked here). Closing it before :meth:`finish`
    closes the command's stdin: the command sees an end of input and withdraws. :func:`execute`
    is the one-shot case: the input sent, then the end. With ``hide=False`` the output is also
    copied to this process's stdout/stderr as it arrives."""

    def __init__(self, conn: fabric.Connection, cmd: str, *, timeout: float, hide: bool = True) -> None:
        import paramiko

        _open(conn)
        transport = conn.transport
        assert transport is not None
        self.conn, self.what, self.transport = conn, _label(cmd), transport
        self.out, self.err = bytearray(), bytearray()
        self.echo: list[tuple[IO[str], codecs.IncrementalDecoder]] = [] if hide else [
            (sys.stdout, codecs.getincrementaldecoder("utf-8")("replace")),
            (sys.stderr, codecs.getincrementaldecoder("utf-8")("replace"))]
        try:
            self.chan = transport.open_session(timeout=timeout)
        except (paramiko.SSHException, EOFError, OSError) as e:
            raise _dropped(conn, self.what, e) from None
        try:
            self.chan.settimeout(max(0.1, timeout))  # bounds sendall when the command never reads stdin
            self.chan.exec_command(cmd)
        except (paramiko.SSHException, EOFError, OSError) as e:
            self.chan.close()
            raise _dropped(conn, self.what, e) from None

    def send(self, data: bytes) -> None:
        import paramiko

        try:
            self.chan.sendall(data)
        except (paramiko.SSHException, EOFError, OSError) as e:
            if not self.transport.is_active():
                raise _dropped(self.conn, self.what, e) from None
            # the command exited (or closed stdin) before reading it all: its exit status and
            # output say what went wrong

    def _pump(self) -> bool:
        progressed = False
        while self.chan.recv_ready():
            data = self.chan.recv(65536)
            self.out += data
            progressed = True
            self._echo(0, data)
        while self.chan.recv_stderr_ready():
            data = self.chan.recv_stderr(65536)
            self.err += data
            progressed = True
            self._echo(1, data)
        return progressed

    def _echo(self, k: int, data: bytes) -> None:
        if self.echo:
            stream, decoder = self.echo[k]
            stream.write(decoder.decode(data))
            stream.flush()

    def _exited(self) -> bool:
        return bool(self.chan.exit_status_ready() and not self.chan.recv_ready()
                    and not self.chan.recv_stderr_ready())

    def _wait(self, done: Any, deadline: float, late: MonteError) -> bool:
        """Pump until ``done()``: True then, False when the command exited first; ``late`` when
        the deadline passes. Back off while the command is quiet, wake quickly while it talks."""
        pause = _POLL_S
        while True:
            progressed = self._pump()
            if done():
                return True
            if self._exited():
                return False
            if time.monotonic() > deadline:
                raise late
            if progressed:
                pause = _POLL_S
            else:
                time.sleep(pause)
                pause = min(pause * 2, _POLL_MAX_S)

    def readline(self, *, timeout: float) -> bytes | None:
        """The next line the command wrote (without its newline); None when it exited first."""
        import paramiko

        late = error("E_BOX", f"{self.what} said nothing within {timeout:g}s on {_where(self.conn)}",
                     "check the machine it runs on, or allow longer")
        try:
            if not self._wait(lambda: b"\n" in self.out, time.monotonic() + timeout, late):
                return None
        except (paramiko.SSHException, EOFError, OSError) as e:
            raise _dropped(self.conn, self.what, e) from None
        line, _, rest = bytes(self.out).partition(b"\n")
        self.out = bytearray(rest)
        return line

    def finish(self, *, timeout: float, deadline: float | None = None) -> Completed:
        """Close the command's stdin and wait for its end (at most ``timeout`` seconds, or until
        ``deadline``, a ``time.monotonic()``): what it wrote after the lines read."""
        import paramiko

        late = error("E_BOX", f"{self.what} did not finish within {timeout:g}s on {_where(self.conn)}",
                     "check the box (monte box status; ssh in and look), or allow longer")
        try:
            self.chan.shutdown_write()
            self._wait(lambda: False, deadline if deadline is not None else time.monotonic() + timeout, late)
            # paramiko reports -1 for a channel that closed without an exit status: either the
            # connection died under it, or the command was killed by a signal (exit-signal).
            status = self.chan.recv_exit_status() if self.chan.status_event.is_set() else -1
            if status == -1 and _transport_died(self.transport):
                raise _dropped(self.conn, self.what)
        except MonteError:
            raise
        except (paramiko.SSHException, EOFError, OSError) as e:
            raise _dropped(self.conn, self.what, e) from None
        finally:
            self.chan.close()
        return Completed(status, self.out.decode("utf-8", "replace"), self.err.decode("utf-8", "replace"))

    def close(self) -> None:
        self.chan.close()


def _transport_died(transport: paramiko.Transport, settle: float = 1.0) -> bool:
    # paramiko closes a dead transport's channels a moment *before* it marks the transport
    # inactive, so a channel that closed without an exit status gives the transport a moment.
    deadline = time.monotonic() + settle
    while transport.is_active() and transport.saved_exception is None:
        if time.monotonic() > deadline:
            return False
        time.sleep(_POLL_S)
    return True


def _first_line(text: str) -> str:
    for line in text.splitlines():
        if line.strip():
            s = line.strip()
            return s if len(s) <= 300 else s[:297] + "..."
    return ""


def run(conn: fabric.Connection, cmd: str, *, timeout: float, hide: bool = True,
        stdin: bytes | None = None) -> str:
    """Run ``cmd`` and return its stdout; a non-zero exit is ``E_BOX`` quoting the first line
    of its stderr (see :func:`execute` for ``stdin``, ``hide`` and timeouts)."""
    r = execute(conn, cmd, timeout=timeout, stdin=stdin, hide=hide)
    if not r.ok:
        line = _first_line(r.stderr) or _first_line(r.stdout) or "no error output"
        raise error("E_BOX", f"{_label(cmd)} failed on {_where(conn)} (exit {r.exited}): {line}",
                    "fix what the box reported, or ssh in and run the command to see more")
    return r.stdout


# --- files ------------------------------------------------------------------------------------


def _sftp_path(remote_path: str) -> str:
    # SFTP resolves relative paths against the login directory, as the shell does; it knows no ~.
    return remote_path[2:] if remote_path.startswith("~/") else remote_path


def put_bytes(conn: fabric.Connection, data: bytes, remote_path: str, mode: int = 0o600) -> None:
    """Write ``data`` to ``remote_path`` (absolute, or relative to the login directory) over
    SFTP, atomically: a temporary file beside it gets ``mode`` *before* any byte is written,
    then is renamed over the target. The parent folder must exist."""
    import paramiko

    _open(conn)
    path = _sftp_path(remote_path)
    tmp = f"{path}.monte-tmp-{uuid.uuid4().hex[:12]}"
    what = f"writing {remote_path}"
    try:
        sftp = conn.client.open_sftp()
    except (paramiko.SSHException, EOFError, OSError) as e:
        raise _dropped(conn, what, e) from None
    try:
        try:
            with sftp.open(tmp, "wb") as f:
                f.chmod(mode)
                f.set_pipelined(True)
                f.write(data)
            sftp.posix_rename(tmp, path)
        except OSError as e:
            if not conn.transport or not conn.transport.is_active():
                raise _dropped(conn, what, e) from None
            try:
                sftp.remove(tmp)
            except OSError:
                pass
            raise error("E_BOX", f"could not write {remote_path} on {_where(conn)} "
                        f"({e.strerror or e})",
                        "check the folder exists and the login user may write there") from None
        except (paramiko.SSHException, EOFError) as e:
            raise _dropped(conn, what, e) from None
    finally:
        sftp.close()


def secrets_text(secrets: dict[str, str]) -> str:
    """``KEY=VALUE`` lines, each value quoted for a POSIX shell when it needs it, so the file
    can be sourced (``set -a; . FILE``) and read back exactly. Refuses what a line cannot hold."""
    lines = []
    for key, value in secrets.items():
        if not _SECRET_KEY.match(key):
            raise error("E_BOX", f"{key!r} cannot be a variable name in a secrets file",
                        "use letters, digits and underscores, not starting with a digit")
        if "\n" in value or "\r" in value or "\0" in value:
            raise error("E_BOX", f"the value of {key} spans several lines, which a KEY=VALUE "
                        "secrets file cannot hold", "ship it as its own 0600 file (put_bytes)")
        lines.append(f"{key}={value if _PLAIN.match(value) else shlex.quote(value)}\n")
    return "".join(lines)


def stream_secrets(conn: fabric.Connection, secrets: dict[str, str], path: str, *,
                   timeout: float = 60) -> None:
    """Write ``secrets`` to ``path`` on the box as ``KEY=VALUE`` lines (see :func:`secrets_text`),
    replacing the whole file: pass every key the file should hold.

    The values travel over the command's stdin, never in argv; the file is created under
    ``umask 077`` beside its target, renamed into place, and its mode is checked to be 0600
    afterwards (``E_BOX`` if it is not).
    """
    q = shlex.quote
    folder = os.path.dirname(path.rstrip("/")) or "."
    script = (
        f"umask 077 && mkdir -p {q(folder)} && tmp={q(path)}.monte-tmp.$$ && "
        f"{{ cat > \"$tmp\" && chmod 600 \"$tmp\" && mv -f \"$tmp\" {q(path)} || "
        f"{{ rm -f \"$tmp\"; exit 1; }}; }} && stat -c %a {q(path)}"
    )
    mode = run(conn, script, timeout=timeout, stdin=secrets_text(secrets).encode()).strip()
    if mode != "600":
        raise error("E_BOX", f"{path} on {_where(conn)} has mode {mode or '?'}, not 0600",
                    "check the box's file system honours permissions (not a shared NFS mount "
                    "that squashes modes), then try again")


# --- tmux jobs --------------------------------------------------------------------------------


def _check_session(session: str) -> None:
    if not _SESSION.match(session):
        raise error("E_BOX", f"{session!r} cannot be a tmux session name",
                    "use letters, digits, '-' and '_'")


ENV_DIR = ".monte/jobs"  # relative: under the login user's home on the box


def env_file(session: str, env_dir: str = ENV_DIR) -> str:
    """Where :func:`tmux_start` writes a session's environment (relative paths: under home)."""
    return f"{env_dir.rstrip('/')}/{session}.env"


def tmux_start(conn: fabric.Connection, session: str, command: str, *, env: dict[str, str],
               env_dir: str = ENV_DIR, timeout: float = 60) -> None:
    """Start ``command`` (a shell command line) detached in a new tmux session ``session``.

    ``env`` is written to a 0600 file (:func:`env_file`, over stdin) that the session sources
    before running ``command``: values reach the job without appearing in any argv, tmux's
    included. The file stays (the job may need to be restarted by hand); it is as private as
    ``/etc/monte/secrets``. A session of that name already alive is ``E_BOX``. Name submitted
    jobs ``monte-...``: that prefix is what the box's watchdog counts as activity.
    """
    _check_session(session)
    path = env_file(session, env_dir)
    stream_secrets(conn, env, path, timeout=timeout)
    # tmux runs the job from its own server, whose cwd need not be home: name the file fully.
    sourced = shlex.quote(path) if path.startswith("/") else f'"$HOME"/{shlex.quote(path)}'
    inner = f"set -a && . {sourced} && set +a && {{\n{command}\n}}"
    run(conn, f"tmux new-session -d -s {shlex.quote(session)} {shlex.quote(inner)}",
        timeout=timeout)


def tmux_alive(conn: fabric.Connection, session: str, *, timeout: float = 30) -> bool:
    """Whether a tmux session of exactly that name is alive for the login user."""
    _check_session(session)
    return execute(conn, f"tmux has-session -t {shlex.quote('=' + session)}",
                   timeout=timeout).ok


def tmux_kill(conn: fabric.Connection, session: str, *, timeout: float = 30) -> bool:
    """End a tmux session; returns whether one was alive."""
    _check_session(session)
    return execute(conn, f"tmux kill-session -t {shlex.quote('=' + session)}",
                   timeout=timeout).ok
