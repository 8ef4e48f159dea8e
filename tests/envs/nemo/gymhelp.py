"""Helpers for the NeMo Gym tests (``from gymhelp import ...``)."""

from __future__ import annotations

import json
import os
import textwrap
from pathlib import Path
from typing import Any

import pytest

CLEAR = ("MONTE_LOCAL", "MONTE_NEMO_GYM_PYTHON", "HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "MONTE_GYM_SERVER_URL",
         "MONTE_GYM_PORT")


def site_packages(gym_python: str) -> Path:
    venv = Path(gym_python).parent.parent
    sp = next(iter(sorted(venv.glob("lib/python3*/site-packages"))), None)
    assert sp is not None
    return sp


def add_server(root: Path, name: str, app: str | None, rows: list[dict[str, Any]] | None = None,
               extra_config: str = "") -> None:
    """A resources server of the test's own in the checkout at ``root``: its config, its app
    (``None``: no app.py) and its example rows."""
    folder = root / "resources_servers" / name
    (folder / "configs").mkdir(parents=True)
    (folder / "data").mkdir()
    (folder / "configs" / f"{name}.yaml").write_text(textwrap.dedent(f"""\
        {name}:
          resources_servers:
            {name}:
              entrypoint: app.py
              domain: other
              description: a test server
        {extra_config}"""))
    if app is not None:
        (folder / "app.py").write_text(textwrap.dedent(app))
    rows = rows if rows is not None else [
        {"responses_create_params": {"input": [{"role": "user", "content": f"question {i}?"}]}, "expected": str(i)}
        for i in range(6)]
    (folder / "data" / "example.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))


def rows_of(stack_root: Path, server: str, rel: str = "data/example.jsonl") -> list[dict]:
    path = stack_root / "resources_servers" / server / rel if not rel.startswith("resources_servers/") else stack_root / rel
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie no one reaped is gone for our purposes
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


def make_checkout(gym_python: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    """A NeMo Gym checkout at ``MONTE_LOCAL``: ``nemo_gym/`` linked from the venv, and
    ``resources_servers/`` and ``benchmarks/`` real folders of links (so a test can add its own
    servers, and ``env install`` writes into this folder only). A test may freeze first (through
    ``frozen``, with the venv's stack) and make the checkout after, as a user installs on another
    machine what was frozen on one."""
    from monte.envs.nemo import stack

    sp = site_packages(gym_python)
    root = tmp_path / "Gym"
    root.mkdir()
    (root / "nemo_gym").symlink_to(sp / "nemo_gym")
    for top in ("resources_servers", "benchmarks"):
        (root / top).mkdir()
        for child in (sp / top).iterdir():
            (root / top / child.name).symlink_to(child)
    for k in CLEAR:
        monkeypatch.delenv(k, raising=False)
    monkeypatch.setenv("MONTE_LOCAL", str(root))
    monkeypatch.setenv("MONTE_NEMO_GYM_PYTHON", gym_python)
    s = stack.find()
    assert s is not None and s.root == root and s.origin == "MONTE_LOCAL"
    return s
