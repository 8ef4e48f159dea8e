"""Fixtures the reliability tests share."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.support.helpers import scrubbed


@pytest.fixture(scope="session")
def quickstart_built(tmp_path_factory: pytest.TempPathFactory, worker_id: str) -> dict[str, Any]:
    """``monte quickstart``'s repository (a real tiny model trained on CPU, evaluated, claimed and
    promoted), built once for all test workers under a file lock (it costs tens of seconds; a copy
    costs a fraction of one), with its status there and its claim. A test copies ``folder`` with
    :func:`quickstart_copy` and works on the copy; ``folder`` itself is never changed."""
    from filelock import FileLock

    base = tmp_path_factory.getbasetemp()
    root = (base if worker_id == "master" else base.parent) / "quickstart-template"
    saved = root / "built.json"
    with FileLock(str(root) + ".lock"):
        if not saved.is_file():
            import torch

            from monte import quickstart

            torch.set_num_threads(1)
            root.mkdir(exist_ok=True)
            with pytest.MonkeyPatch.context() as mp:
                scrubbed(mp, root / "home")
                out = quickstart.run(root / "demo", say=lambda s: None)  # it commits main itself
            saved.write_text(json.dumps({"status": out["status"], "claim": out["claim"]}))
    return {"folder": root / "demo", **json.loads(saved.read_text())}


def quickstart_copy(built: dict[str, Any], dest: Path) -> dict[str, Any]:
    """A copy of the built quickstart at ``dest`` (``cp -a``, as a user copies a folder: the
    records travel, so it reads the same there), and ``built`` with ``folder`` set to it and
    ``built_at`` to where it was built."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run(["cp", "-a", str(built["folder"]), str(dest)], check=True)
    return {**built, "folder": dest, "built_at": built["folder"]}
