"""Fixtures for the remote tests: a real OpenSSH server on loopback, and connections to it.

``sshd`` is one server per test session (per xdist worker); ``fresh_sshd`` is a server of the
test's own, for tests that stop it or cut its connections. Both have ``host``, ``port``,
``user`` and ``key_file``. ``conn`` is an open :func:`monte.remote.ssh.connect` to ``sshd``.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.sshd import SSHD, SSHD_MISSING, Keys, Sshd


def _require_sshd() -> None:
    if not os.path.exists(SSHD):
        pytest.skip(SSHD_MISSING)


@pytest.fixture(scope="session")
def ssh_keys(tmp_path_factory: pytest.TempPathFactory) -> Keys:
    _require_sshd()
    return Keys.make(tmp_path_factory.mktemp("ssh-keys"))


@pytest.fixture(scope="session")
def sshd(ssh_keys: Keys, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Sshd]:
    """A real sshd on 127.0.0.1 for the whole session. Do not stop it: use ``fresh_sshd``."""
    server = Sshd(tmp_path_factory.mktemp("sshd"), ssh_keys)
    server.start()
    yield server
    server.stop()


@pytest.fixture
def fresh_sshd(ssh_keys: Keys, tmp_path: Path) -> Iterator[Sshd]:
    """A real sshd of this test's own, free to be stopped or to have its connections cut."""
    server = Sshd(tmp_path / "sshd", ssh_keys)
    server.start()
    yield server
    server.stop()


@pytest.fixture
def conn(sshd: Sshd) -> Iterator[Any]:
    """An open Fabric connection to ``sshd`` (through monte's own ``ssh.connect``)."""
    c = sshd.connect(connect_timeout=10)
    yield c
    c.close()
