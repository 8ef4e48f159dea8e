"""For tests/grader: a real grader: two Unix users made here (the grader's account and an unprivileged agent), a
real sshd on loopback whose ``authorized_keys`` gives the agent's key only the forced command
``monte grader serve``, and a repository the agent made with its own commands.

Needs root (useradd, sshd) and openssh-server; skips, saying which, where either is missing. The
users and their folders are removed after the module. The interpreter lives under ``/root`` on
this machine: its folder is made traversable (o+x, not listable) for the module, then restored.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.support.sshd import SSHD, SSHD_MISSING, Sshd

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


def add_user(name: str, home: Path) -> Account:
    # -p "*": no password, yet not locked (sshd without PAM refuses a locked account)
    subprocess.run(["useradd", "-M", "-p", "*", "-d", str(home), "-s", "/bin/sh", name], check=True, capture_output=True)
    home.mkdir(mode=0o700)
    shutil.chown(home, name, name)
    return Account(name, home)
