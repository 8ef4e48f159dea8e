"""Fixtures: a real GCS emulator on loopback (see ``tests/gcs_emulator.py``), started once per
test worker, a fresh bucket per test, and a read-only proxy standing in for IAM."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from gcs_emulator import Emulator, ReadOnlyProxy, gcs_env


@pytest.fixture(scope="session")
def emulator(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Emulator]:
    emu = Emulator(tmp_path_factory.mktemp("gcs-emulator"))
    yield emu
    emu.kill()


@pytest.fixture
def read_only_gcs(emulator: Emulator) -> Iterator[ReadOnlyProxy]:
    proxy = ReadOnlyProxy(emulator.host)
    yield proxy
    proxy.close()


@pytest.fixture
def gcs(emulator: Emulator, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> dict[str, str]:
    """Point monte at the emulator with a fresh bucket and one key on both ladders."""
    return gcs_env(emulator, monkeypatch, tmp_path)
