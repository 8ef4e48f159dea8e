"""Build a virtualenv that runs NeMo Gym's resources servers, on this machine's Python.

``python -m monte.envs.nemo.venv DEST`` (``make nemo-gym`` runs it): NeMo Gym's wheel says
``Requires-Python >= 3.12``, yet its resources servers install and run on Python 3.11 (measured here:
the tests under tests/envs/nemo run them). So the wheel, pinned by version and sha256, is installed without
its dependency list (pip would otherwise pick a scipy source build that refuses 3.11), then the
packages ``nemo_gym.base_resources_server`` imports, resolved by pip for this Python, then the
servers' own extras that monte's tests use (reasoning-gym, math-verify). Then it proves the
result: the venv's python imports ``nemo_gym.base_resources_server``.

On Python >= 3.12 plain ``pip install nemo-gym`` is the supported way; point
``MONTE_NEMO_GYM_PYTHON`` at that environment's python instead.

Idempotent: a finished venv carries a stamp naming what it holds, and a second run with the same
pins returns at once. A failed build leaves no stamp (and is rebuilt from scratch next time).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

VERSION = "0.4.0"
WHEEL = f"nemo_gym-{VERSION}-py3-none-any.whl"
WHEEL_SHA256 = "955f08027a2f01a1c6e0e3c5da0820c330fee0307754d59ba2517f5ad89cea6e"
#: What ``nemo_gym.base_resources_server`` imports at load time (ray and wandb at module top).
BASE = ["fastapi", "uvicorn", "pydantic", "omegaconf", "hydra-core", "orjson", "aiohttp", "requests", "rich",
        "openai<=2.7.2", "pandas", "itsdangerous", "yappi", "gprof2dot", "pydot", "psutil", "python-multipart",
        "ray", "wandb"]
#: Per-server dependencies of the servers monte's tests start.
SERVERS = ["reasoning-gym", "math-verify==0.8.0"]
STAMP = ".monte-nemo-gym.json"


def stamp() -> dict[str, object]:
    return {"nemo_gym": VERSION, "wheel_sha256": WHEEL_SHA256, "base": BASE, "servers": SERVERS,
            "python": f"{sys.version_info.major}.{sys.version_info.minor}"}


def python_of(dest: Path) -> Path:
    return dest / "bin" / "python"


def is_built(dest: Path) -> bool:
    try:
        return json.loads((dest / STAMP).read_text()) == stamp() and python_of(dest).exists()
    except (OSError, ValueError):
        return False


def _run(cmd: list[str], log: list[str]) -> None:
    log.append("$ " + " ".join(cmd))
    r = subprocess.run(cmd, capture_output=True, text=True)
    log.append((r.stdout + r.stderr)[-4000:])
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd[:6])} ... failed (status {r.returncode}):\n{(r.stderr or r.stdout)[-2000:]}")


def build(dest: Path, *, wheel_dir: Path | None = None, quiet: bool = False) -> Path:
    """Build (or find built) the venv at ``dest``; returns its python."""
    dest = dest.absolute()
    if is_built(dest):
        return python_of(dest)
    shutil.rmtree(dest, ignore_errors=True)
    log: list[str] = []
    py = str(python_of(dest))
    pip = [py, "-m", "pip", "install", "-q", "--disable-pip-version-check"]
    with tempfile.TemporaryDirectory(prefix="monte-nemo-wheel-") as tmp:
        wheels = wheel_dir or Path(tmp)
        wheel = wheels / WHEEL
        try:
            if not wheel.is_file():
                _run([sys.executable, "-m", "pip", "download", "-q", "--disable-pip-version-check", "--no-deps",
                      "--python-version", "3.12", "--only-binary=:all:", f"nemo-gym=={VERSION}", "-d", str(wheels)], log)
            digest = hashlib.sha256(wheel.read_bytes()).hexdigest()
            if digest != WHEEL_SHA256:
                raise RuntimeError(f"{wheel} has sha256 {digest}, not the pinned {WHEEL_SHA256}")
            _run([sys.executable, "-m", "venv", str(dest)], log)
            _run([*pip, "--ignore-requires-python", "--no-deps", str(wheel)], log)
            _run([*pip, *BASE], log)
            _run([*pip, *SERVERS], log)
            _run([py, "-c", "import nemo_gym.base_resources_server, nemo_gym.benchmarks"], log)
        except BaseException:
            shutil.rmtree(dest, ignore_errors=True)
            raise
    (dest / STAMP).write_text(json.dumps(stamp(), indent=2) + "\n")
    if not quiet:
        print(f"NeMo Gym {VERSION} servers ready: MONTE_NEMO_GYM_PYTHON={py}")
    return python_of(dest)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m monte.envs.nemo.venv", description=__doc__.split("\n\n")[0])
    p.add_argument("dest", type=Path, help="the virtualenv to build (e.g. .nemo-gym)")
    p.add_argument("--wheel-dir", type=Path, help="a folder already holding the pinned nemo-gym wheel")
    args = p.parse_args(argv)
    try:
        build(args.dest, wheel_dir=args.wheel_dir)
    except (RuntimeError, OSError) as e:
        print(f"monte: could not build NeMo Gym's venv at {args.dest}: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":  # pragma: no cover
    os.environ.setdefault("PIP_NO_INPUT", "1")
    raise SystemExit(main())
