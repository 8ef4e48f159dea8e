"""For tests/grader: a real grader: two Unix users made here (the grader's account and an unprivileged agent), a
real sshd on loopback whose ``authorized_keys`` gives the agent's key only the forced command
``monte grader serve``, and a repository the agent made with its own commands.

Needs root (useradd, sshd) and openssh-server; skips, saying which, where either is missing. The
users and their folders are removed after the module. The interpreter lives under ``/root`` on
this machine: its folder is made traversable (o+x, not listable) for the module, then restored.
"""

from __future__ import annotations

import atexit
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.support.sshd import SSHD, SSHD_MISSING, Keys, Sshd

ROOT = Path(__file__).resolve().parents[2]
PYTHON = sys.executable
BIN = str(Path(PYTHON).parent)


def need_root() -> None:
    if os.geteuid() != 0 or shutil.which("useradd") is None or shutil.which("runuser") is None:
        pytest.skip("the grader tests create Unix users: they need root, useradd and runuser (CI runs them as root)")
    if not os.path.exists(SSHD):
        pytest.skip(SSHD_MISSING)


class PerUserSshd(Sshd):
    """An sshd whose authorized_keys is one file per user (``authorized_keys.<user>``)."""

    def _config(self) -> Path:
        cfg = super()._config()
        cfg.write_text(cfg.read_text().replace(f"AuthorizedKeysFile {self.folder / 'authorized_keys'}",
                                               f"AuthorizedKeysFile {self.folder / 'authorized_keys.%u'}"))
        return cfg


@dataclass
class Account:
    name: str
    home: Path

    def env(self, **extra: str) -> dict[str, str]:
        return {"PATH": f"{BIN}:/usr/bin:/bin", "HOME": str(self.home), "USER": self.name, "LANG": "C.UTF-8",
                "OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false", "GIT_AUTHOR_NAME": "agent",
                "GIT_AUTHOR_EMAIL": "agent@monte.invalid", "GIT_COMMITTER_NAME": "agent",
                "GIT_COMMITTER_EMAIL": "agent@monte.invalid", **extra}

    def run(self, *cmd: str, cwd: Path | None = None, timeout: float = 900, check: bool = False,
            input: str | None = None, **extra: str) -> subprocess.CompletedProcess[str]:
        """``cmd`` as this account (runuser, a clean environment)."""
        env = self.env(**extra)
        r = subprocess.run(["runuser", "-u", self.name, "--", "env", "-i", *(f"{k}={v}" for k, v in env.items()),
                            *cmd], cwd=cwd or self.home, capture_output=True, text=True, timeout=timeout,
                           input=input if input is not None else "")
        if check and r.returncode != 0:
            raise AssertionError(f"{' '.join(cmd)} as {self.name} exited {r.returncode}:\n{r.stdout}\n{r.stderr}")
        return r

    def monte(self, *args: str, cwd: Path | None = None, **kw: Any) -> subprocess.CompletedProcess[str]:
        return self.run(PYTHON, "-m", "monte", *args, cwd=cwd, **kw)


@dataclass
class Setup:
    base: Path
    grader: Account
    agent: Account
    home: Path  # the grader home
    public_key: str
    sshd: Sshd
    repo: Path
    key_file: Path
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def url(self) -> str:
        return f"ssh://{self.grader.name}@127.0.0.1:{self.sshd.port}"

    def agent_monte(self, *args: str, **kw: Any) -> subprocess.CompletedProcess[str]:
        return self.agent.monte(*args, cwd=self.repo, MONTE_GRADER_KEY_FILE=str(self.key_file), **kw)

    def grader_reads(self) -> dict[str, Any]:
        """The grader's own ledger, read as root (what the agent can never read)."""
        from monte.grader import home as homes

        return homes.records(homes.Home(self.home))


_MODELS: dict[int, Path] = {}  # seed -> the folder made once in this process


def tiny_model(account: Account, dest: Path, seed: int) -> Path:
    """What ``monte model init DEST --size tiny --seed SEED`` run as ``account`` writes: made once
    per seed in this process and copied, owned by ``account``. The same size and seed give
    byte-identical files (tests/models covers the command), and a subprocess of it costs a torch
    import (seconds, per model, on a busy machine) that none of these tests is about."""
    if seed not in _MODELS:
        import torch

        from monte.models.tiny import init_model

        torch.set_num_threads(1)
        folder = Path(tempfile.mkdtemp(prefix=f"monte-grader-seed{seed}-", dir="/tmp"))
        atexit.register(shutil.rmtree, folder, ignore_errors=True)
        init_model(folder / "model", seed=seed)
        _MODELS[seed] = folder / "model"
    shutil.copytree(_MODELS[seed], dest)
    for p in (dest, *dest.rglob("*")):
        shutil.chown(p, account.name, account.name)
    return dest


def add_user(name: str, home: Path) -> Account:
    # -p "*": no password, yet not locked (sshd without PAM refuses a locked account)
    subprocess.run(["useradd", "-M", "-p", "*", "-d", str(home), "-s", "/bin/sh", name], check=True, capture_output=True)
    home.mkdir(mode=0o700)
    shutil.chown(home, name, name)
    return Account(name, home)


@contextmanager
def real_grader(users: tuple[str, str], *, prepare: Callable[[Path], dict[str, Any]] | None = None,
                init_args: Callable[[dict[str, Any]], Sequence[str]] = lambda extra: ()) -> Iterator[Setup]:
    """A grader's account and an agent's (``users``: their name prefixes), the grader's home made
    by ``monte grader init --threads 1`` plus ``init_args(extra)``, a loopback sshd whose
    authorized_keys gives the agent's own key only the forced command, and an empty git repository
    of the agent's (``Setup.repo``). ``prepare(base)`` runs first, as root, in the module's folder
    (its answer is ``Setup.extra``, with the authorized_keys ``line`` and ``init``'s answer ``info``).
    Everything is removed afterwards, the users too."""
    need_root()
    base = Path(tempfile.mkdtemp(prefix="monte-grader-", dir="/tmp"))
    os.chmod(base, 0o755)
    tag = f"{os.getpid() % 100000}"
    made: list[str] = []
    root_mode = os.stat("/root").st_mode
    os.chmod("/root", root_mode | 0o001)  # the interpreter is under /root: traversable, not listable
    server = None
    try:
        extra = prepare(base) if prepare else {}
        grader = add_user(f"{users[0]}{tag}", base / "grader")
        made.append(grader.name)
        agent = add_user(f"{users[1]}{tag}", base / "agent")
        made.append(agent.name)
        home = grader.home / "home"
        r = grader.monte("grader", "init", str(home), "--threads", "1", *init_args(extra), "--json", check=True)
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
        agent.run("git", "init", "-q", "-b", "main", str(repo), check=True)
        yield Setup(base, grader, agent, home, info["public_key"], server, repo, ssh_dir / "id_ed25519",
                    extra={**extra, "line": line, "info": info})
    finally:
        if server is not None:
            server.stop()
        for name in made:
            subprocess.run(["userdel", name], capture_output=True)
        os.chmod("/root", root_mode)
        shutil.rmtree(base, ignore_errors=True)
