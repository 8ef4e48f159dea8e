"""The Vault both machines of the storage tests share: a fresh bucket on the GCS emulator, named
with ``monte config set vault`` (``test_dvc_tracking.py`` has its own, a folder or a bucket)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest


@pytest.fixture
def vault(repo: Path, gcs: dict[str, str], monte: Any) -> str:
    url = gcs["url"] + "/vault"
    r = monte("config", "set", "vault", url)
    assert r.code == 0, r.err
    return url
