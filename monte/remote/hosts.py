"""Nodes on other machines: ``monte train --hosts a,b`` starts one node's launcher (torchrun, or
accelerate launch) on each host over SSH (Fabric, :mod:`monte.remote.ssh`), with the rendezvous
on the first host.

What a host must have, checked before the ``started`` record (every refusal leaves nothing
written): an SSH login monte's key opens, this repository at the same path (a shared filesystem,
as a cluster's NFS home: each rank reads the plan, the model and the rows from it, and rank 0
writes the checkpoint into it), and a Python at this interpreter's path that finds torch and
monte. The one ``monte train`` process that planned the chunk stays where it is and is the only
one that records; the ranks never write the ledger.

Each node runs in a session of its own on its host (``setsid``), its process group id left in
the launch folder; when the chunk ends, or a node fails, every host is asked over SSH to stop
that group and the node's ranks (torchrun starts its workers in sessions of their own), so no
rank outlives the chunk on any host. The ranks' environment travels in a 0600 file in the
launch folder, never in argv (:mod:`monte.remote.ssh`: argv is readable by every user).
"""

from __future__ import annotations

import os
import shlex
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from monte.errors import MonteError, error
from monte.training.launch import Host, LaunchSpec, parse_hosts

#: what of this process's environment the ranks on a host get (plus what :func:`rank_env` sets)
FORWARD_PREFIXES = ("MONTE_", "HF_", "TRANSFORMERS_", "TORCH_", "OMP_", "MKL_", "TOKENIZERS_", "ACCELERATE_",
                    "GIT_", "XDG_", "PYTHONPATH", "PYTHONHASHSEED", "PYTHONUNBUFFERED", "HOME", "TMPDIR")
CHECK_TIMEOUT_S = 60
KILL_GRACE_S = 5


def connect(host: Host, key_file: str | None) -> Any:
    from monte.remote import ssh

    return ssh.connect(host.address, user=host.user, port=host.port, key_file=key_file, connect_timeout=15)


def python() -> str:
    """The interpreter each host runs the node with: this one's path (a cluster's shared venv)."""
    return sys.executable


def check_plan(spec: LaunchSpec | None, repo_root: Path) -> None:
    """:func:`check_hosts` for a chunk's launch that names hosts (nothing to do otherwise)."""
    if spec is not None and spec.hosts:
        check_hosts(parse_hosts(spec.hosts), repo_root, key_file=spec.ssh_key, port=spec.port)


_PROBE = ("import importlib.util as u, sys\n"
          "missing = [m for m in ('torch', 'monte') if u.find_spec(m) is None]\n"
          "print('MISSING=' + ','.join(missing))\n")


def check_hosts(hosts: list[Host], repo_root: Path, *, key_file: str | None, port: int | None) -> None:
    """Before the ``started`` record: every host answers over SSH, sees this repository at the
    same path, and runs this Python with torch and monte; ``port`` (if named) is free on the first
    host. Each failure refuses (E_BOX: SSH; E_LAUNCH: the host cannot run a node)."""
    from monte.remote import ssh

    env = forwarded_env()
    prefix = " ".join(f"{k}={shlex.quote(v)}" for k, v in sorted(env.items()) if k == "PYTHONPATH")
    for i, host in enumerate(hosts):
        conn = connect(host, key_file)
        try:
            seen = ssh.execute(conn, f"test -f {shlex.quote(str(repo_root / '.monte.yaml'))}", timeout=CHECK_TIMEOUT_S)
            if not seen.ok:
                raise error("E_LAUNCH", f"host {host.login} does not see this repository at {repo_root} "
                            "(no .monte.yaml there)", "put the repository and its data root on a filesystem every "
                            "host mounts at the same path (NFS), or launch from a folder that is")
            probe = ssh.execute(conn, f"{prefix} {shlex.quote(python())} -c {shlex.quote(_PROBE)}",
                                timeout=CHECK_TIMEOUT_S)
            missing = next((line[8:] for line in probe.stdout.splitlines() if line.startswith("MISSING=")), None)
            if not probe.ok or missing is None or missing:
                what = f"finds no {missing.replace(',', ' or ')}" if missing else "does not run"
                raise error("E_LAUNCH", f"host {host.login}: the Python at {python()} {what}",
                            "install monte and torch into the same path on every host (a shared virtualenv)")
            if i == 0 and port is not None and not remote_port_free(conn, port):
                raise error("E_LAUNCH", f"the rendezvous port {host.address}:{port} is in use on host {host.login}",
                            "pass another --port, or leave it out and monte picks a free one")
        finally:
            conn.close()


_PORT = ("import socket, sys\ns = socket.socket()\n"
         "try:\n    s.bind(('', int(sys.argv[1])))\nexcept OSError:\n    print('BUSY')\nelse:\n    print(s.getsockname()[1])\n")


def remote_port_free(conn: Any, port: int) -> bool:
    from monte.remote import ssh

    out = ssh.run(conn, f"{shlex.quote(python())} -c {shlex.quote(_PORT)} {port}", timeout=CHECK_TIMEOUT_S)
    return out.strip() != "BUSY"


def remote_free_port(host: Host, key_file: str | None) -> int:
    from monte.remote import ssh

    conn = connect(host, key_file)
    try:
        return int(ssh.run(conn, f"{shlex.quote(python())} -c {shlex.quote(_PORT)} 0", timeout=CHECK_TIMEOUT_S).strip())
    finally:
        conn.close()


def forwarded_env(base: dict[str, str] | None = None) -> dict[str, str]:
    env = dict(os.environ if base is None else base)
    return {k: v for k, v in env.items() if k.startswith(FORWARD_PREFIXES)}


def node_command(argv: Sequence[str], *, env_file: Path, pgid_file: Path, log: Path, cwd: Path) -> str:
    """The shell line one host runs: the environment from the 0600 file, then the node's launcher
    in a session of its own (its group id in ``pgid_file``), its output in ``log``; the line
    exits with the launcher's status."""
    inner = 'echo $$ > "$0"; exec "$@"'
    return (f"set -a; . {shlex.quote(str(env_file))}; set +a; cd {shlex.quote(str(cwd))} && "
            f"exec setsid -w sh -c {shlex.quote(inner)} {shlex.quote(str(pgid_file))} {shlex.join(argv)} "
            f"> {shlex.quote(str(log))} 2>&1 < /dev/null")


_STOP = """import os, signal, sys, time
def state(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return None
def wait(pids, grace):
    end = time.monotonic() + grace
    while time.monotonic() < end and any(state(p) not in (None, "Z") for p in pids):
        time.sleep(0.05)
def read(path):
    try:
        return int(open(path).read().strip() or 0)
    except (OSError, ValueError):
        return 0
grace = float(sys.argv[1])
group = read(sys.argv[2])
if group:
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(group, sig)
        except (ProcessLookupError, PermissionError):
            break
        wait([group], grace)
ranks = []
for path in sys.argv[3:]:
    pid = read(path)
    try:
        if pid and b"launch_rank" in open(f"/proc/{pid}/cmdline", "rb").read():
            os.kill(pid, signal.SIGKILL)
            ranks.append(pid)
    except OSError:
        pass
wait(ranks, grace)
"""


def stop_command(pgid_file: Path, rank_pids: Sequence[Path]) -> str:
    """The shell line that stops one node on its host (run by the host's Python, not its shell's
    ``kill``, whose spelling of a process group differs between shells): SIGTERM to the node's
    group (torchrun then stops its workers), a grace, SIGKILL to what is left of the group, then
    SIGKILL to each of the node's ranks still there (torchrun starts them in sessions of their
    own; a pid that now names another program is left alone), and a wait until they are gone."""
    return shlex.join([python(), "-c", _STOP, str(KILL_GRACE_S), str(pgid_file), *map(str, rank_pids)])


def write_env_file(path: Path, env: dict[str, str]) -> None:
    from monte.remote.ssh import secrets_text

    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(secrets_text(env))


class SSHNodes:
    """The :class:`monte.training.launch.NodeRunner` that starts each node on its host over SSH."""

    def free_port(self, spec: LaunchSpec) -> int:
        return remote_free_port(parse_hosts(spec.hosts)[0], spec.ssh_key)

    def run(self, spec: LaunchSpec, commands: Sequence[Sequence[str]], folder: Path, *, cwd: Path,
            env: dict[str, str], poll: float) -> list[tuple[int, int]]:
        return run_on_hosts(parse_hosts(spec.hosts), commands, folder, cwd=cwd, env=forwarded_env(env),
                            key_file=spec.ssh_key, processes_per_node=spec.processes_per_node, poll=poll)


def run_on_hosts(hosts: list[Host], commands: Sequence[Sequence[str]], folder: Path, *, cwd: Path,
                 env: dict[str, str], key_file: str | None, processes_per_node: int,
                 poll: float = 0.2) -> list[tuple[int, int]]:
    """:func:`monte.processes.run_together` across hosts: node K's launcher runs on host K over
    SSH until one fails or all exit 0; then every host stops its node (:func:`stop_command`),
    whatever happened here. The (node, exit status) of each that failed; a connection that drops
    counts as that node failing (status -1)."""
    from monte.remote import ssh

    env_file = folder / "ranks.env"
    write_env_file(env_file, env)
    results: dict[int, int] = {}
    lock = threading.Lock()
    conns: list[Any] = []

    def node(k: int, conn: Any, line: str) -> None:
        try:
            code = ssh.execute(conn, line, timeout=7 * 24 * 3600).exited
        except MonteError:
            code = -1
        with lock:
            results[k] = code

    threads = []
    try:
        for k, (host, argv) in enumerate(zip(hosts, commands, strict=True)):
            conns.append(connect(host, key_file))
            line = node_command(argv, env_file=env_file, pgid_file=folder / f"node-{k}.pgid",
                                log=folder / f"node-{k}.log", cwd=cwd)
            t = threading.Thread(target=node, args=(k, conns[-1], line), daemon=True)
            t.start()
            threads.append(t)
        while True:
            with lock:
                done = dict(results)
            failed = sorted((k, c) for k, c in done.items() if c != 0)
            if failed or len(done) == len(hosts):
                return failed
            time.sleep(poll)
    finally:
        for k, host in enumerate(hosts):
            ranks = [folder / f"rank-{r}.pid" for r in range(k * processes_per_node, (k + 1) * processes_per_node)]
            try:
                stopper = connect(host, key_file)
                try:
                    ssh.execute(stopper, stop_command(folder / f"node-{k}.pgid", ranks), timeout=KILL_GRACE_S + 60)
                finally:
                    stopper.close()
            except MonteError:
                pass  # that host is gone: so is its node
        for t in threads:
            t.join(timeout=KILL_GRACE_S + 30)
        for c in conns:
            c.close()
