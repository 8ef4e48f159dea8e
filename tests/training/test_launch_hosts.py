"""Nodes on other machines, for real: `monte train --hosts A,B` starts one node's launcher on each
host over SSH (Fabric) with the rendezvous on the first host. Both "hosts" here are the real
OpenSSH server the remote tests start on loopback (tests/support/sshd.py), one process each;
without sshd these tests skip, like the other remote tests. Nothing is mocked: the nodes
rendezvous, the ranks train the tiny model through TRL, and a node's launcher is killed with a
real SIGKILL."""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.sshd import Sshd, module_sshd
from tests.support.trainhelp import refused, train, trained


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Sshd]:
    yield from module_sshd(tmp_path_factory)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (ProcessLookupError, OSError):
        return False


def _hosts(server: Sshd) -> list[str]:
    return ["--hosts", f"{server.login},{server.login}", "--ssh-key", server.key_file]


def test_two_hosts_over_ssh_train_an_sft_chunk(ready: str, repo: Path, monte, server: Sshd) -> None:
    row = trained(monte, "--recipe", "sft-t", "--source", "parity-sft", "--from-base", "--processes", "1",
                  *_hosts(server))
    launch = row["plan"]["launch"]
    assert (launch["nodes"], launch["world_size"], launch["processes_per_node"]) == (2, 2, 1)
    assert launch["hosts"] == [server.login, server.login] and launch["backend"] == "gloo"
    assert "ssh_key" not in launch and launch["effective_batch"] == 16
    assert [c["step"] for c in row["checkpoints"]] == [4]
    folder = repo / ".monte" / "runs" / "exp" / row["run"] / "launch"
    pids = [int(p.read_text()) for p in sorted(folder.glob("rank-*.pid"))]
    assert len(pids) == 2 and not any(_alive(p) for p in pids)
    assert (folder / "ranks.env").stat().st_mode & 0o077 == 0  # the ranks' environment: a 0600 file
    # each node ran in a session of its own on its host (its process group id left here), and is gone
    for node in (0, 1):
        assert not _alive(int((folder / f"node-{node}.pgid").read_text()))
    again = monte("rerun", row["run"], "--dry-run", "--json").json()
    assert again["command"][again["command"].index("--hosts") + 1] == f"{server.login},{server.login}"
    assert all(argv[argv.index("--master_addr") + 1] == "127.0.0.1" for argv in again["ranks"])
    assert [argv[argv.index("--node_rank") + 1] for argv in again["ranks"]] == ["0", "1"]


def test_a_host_whose_node_dies_fails_the_run_and_leaves_no_rank_on_any_host(
        ready: str, repo: Path, monte, server: Sshd) -> None:
    runs = repo / ".monte" / "runs" / "exp"
    killed: list[int] = []

    def kill_node_one() -> None:  # SIGKILL node 1's launcher (torchrun) once its rank has started
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline and not killed:
            for pid_file in runs.glob("*/launch/rank-1.pid"):
                pgid = pid_file.with_name("node-1.pgid")
                if pid_file.read_text() and pgid.is_file() and pgid.read_text().strip():
                    time.sleep(0.5)
                    os.kill(int(pgid.read_text()), signal.SIGKILL)
                    killed.append(int(pid_file.read_text()))
                    return
            time.sleep(0.1)

    t = threading.Thread(target=kill_node_one)
    t.start()
    r = train(monte, "--recipe", "sft-t", "--source", "parity-sft", "--from-base", "--processes", "1", *_hosts(server))
    t.join()
    assert killed, "node 1's rank never started"
    assert r.code == 10, r.out + r.err
    err = r.json()["error"]
    assert err["code"] == "E_RANK" and "node 1" in err["message"] and "no checkpoint" in err["message"], err
    run = next(p.parent.parent.name for p in runs.glob("*/launch/rank-1.pid"))
    row = json.loads(monte("show", run, "--json").out)
    assert row["status"] == "failed" and row["checkpoints"] == []
    folder = runs / run / "launch"
    pids = [int(p.read_text()) for p in folder.glob("rank-*.pid")]
    # rank 1 lost its launcher (torchrun starts workers in their own session): monte stopped it
    alive = {p: Path(f"/proc/{p}/cmdline").read_bytes()[:200] for p in pids if _alive(p)}
    assert killed[0] in pids and not alive, f"a rank outlived the failed run: {alive}"


@pytest.mark.parametrize("hosts,code,exit_code,needle", [
    ("a,,b", "E_USAGE", 2, "empty host name"),
    ("user@host:99999", "E_USAGE", 2, "is not [USER@]HOST[:PORT]"),
])
def test_bad_hosts_refuse_before_started(ready: str, repo: Path, monte, hosts: str, code: str,
                                         exit_code: int, needle: str) -> None:
    err = refused(monte, repo, "train", "--recipe", "sft-t", "--source", "parity-sft", "--from-base", "--yes",
                  "--hosts", hosts, code=code, exit_code=exit_code)
    assert needle in err["message"], err


def test_hosts_refusals_before_started(ready: str, repo: Path, monte, server: Sshd) -> None:
    base = ("train", "--recipe", "sft-t", "--source", "parity-sft", "--from-base", "--yes")
    err = refused(monte, repo, *base, "--nodes", "3", *_hosts(server), code="E_USAGE", exit_code=2)
    assert "one node runs on each host" in err["message"]
    # the second host does not answer: E_BOX naming it, nothing written
    dead = f"{server.user}@127.0.0.1:1"
    err = refused(monte, repo, *base, "--hosts", f"{server.login},{dead}", "--ssh-key", server.key_file,
                  code="E_BOX", exit_code=8)
    assert "127.0.0.1:1" in err["message"]
    # a port in use on the first host
    import socket

    with socket.socket() as s:
        s.bind(("", 0))
        s.listen()
        port = s.getsockname()[1]
        err = refused(monte, repo, *base, *_hosts(server), "--port", str(port), code="E_LAUNCH", exit_code=10)
    assert f":{port} is in use on host {server.login}" in err["message"]


def test_the_commands_per_host() -> None:
    """What each host runs: its node's torchrun with node_rank K, the rendezvous on the first host."""
    from monte.training.launch import LaunchSpec, rank_command

    spec = LaunchSpec(world_size=4, nodes=2, processes_per_node=2, backend="nccl", launcher="torchrun",
                      hosts=["ubuntu@10.0.0.1", "ubuntu@10.0.0.2:2222"])
    assert spec.master_addr == "10.0.0.1"
    argvs = [rank_command(spec, k, 29500, "/shared/repo/job.json", python="/venv/bin/python") for k in (0, 1)]
    for k, argv in enumerate(argvs):
        assert argv[argv.index("--node_rank") + 1] == str(k) and argv[argv.index("--master_addr") + 1] == "10.0.0.1"
        assert argv[argv.index("--nnodes") + 1] == "2" and argv[argv.index("--nproc_per_node") + 1] == "2"
    spec.launcher = "accelerate"
    argv = rank_command(spec, 1, 29500, "job.json")
    assert argv[argv.index("--main_process_ip") + 1] == "10.0.0.1" and argv[argv.index("--machine_rank") + 1] == "1"
