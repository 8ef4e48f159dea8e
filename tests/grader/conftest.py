"""The module fixture of the real-grader tests (a repository pinning a grader, before any experiment:
the first test freezes it); the parts are in tests/support/grader.py."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.grader import PerUserSshd, Setup, add_user, need_root
from tests.support.sshd import Keys


@pytest.fixture(scope="module")
def grader_setup(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Setup]:
    need_root()
    base = Path(tempfile.mkdtemp(prefix="monte-grader-", dir="/tmp"))
    os.chmod(base, 0o755)
    tag = f"{os.getpid() % 100000}"
    made: list[str] = []
    root_mode = os.stat("/root").st_mode
    os.chmod("/root", root_mode | 0o001)  # the interpreter is under /root: traversable, not listable
    server = None
    try:
        grader = add_user(f"mgrader{tag}", base / "grader")
        made.append(grader.name)
        agent = add_user(f"magent{tag}", base / "agent")
        made.append(agent.name)
        home = grader.home / "home"
        r = grader.monte("grader", "init", str(home), "--threads", "1", "--json", check=True)
        info = json.loads(r.stdout)
        ssh_dir = agent.home / ".ssh"
        agent.run("mkdir", "-m", "700", str(ssh_dir), check=True)
        agent.run("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(ssh_dir / "id_ed25519"), check=True)
        agent_pub = (ssh_dir / "id_ed25519.pub").read_text().strip()
        server = PerUserSshd(base / "sshd", Keys.make(base / "sshd-keys"))
        line = info["authorized_keys"].replace("AGENT_PUBLIC_KEY", agent_pub)
        (server.folder / f"authorized_keys.{grader.name}").write_text(line + "\n")
        server.start()
        repo = agent.home / "repo"
        setup = Setup(base, grader, agent, home, info["public_key"], server, repo, ssh_dir / "id_ed25519")
        agent.run("git", "init", "-q", "-b", "main", str(repo), check=True)
        for args in (("init",), ("model", "init", "base-model", "--size", "tiny", "--seed", "0"),
                     ("env", "add", "--server", "parity", "--dev", "parity", "--test", "parity"),
                     ("config", "set", "grader", setup.url, "--key", info["public_key"])):
            setup.agent_monte(*args, check=True)
        yield setup
    finally:
        if server is not None:
            server.stop()
        for name in made:
            subprocess.run(["userdel", name], capture_output=True)
        os.chmod("/root", root_mode)
        shutil.rmtree(base, ignore_errors=True)
