"""Benchmarks that cannot rot: every ``bench/*.py`` runs its ``--quick`` smoke run here.

Each script is found by glob, so a new benchmark without ``--quick`` fails this test. A quick run
takes the benchmark's own code path at a tiny size (tens of records, one round, a 1 MiB file) as a
real subprocess from the repository root, in the tests' scrubbed environment with ``TMPDIR`` in
the test's folder, and must exit 0, write its figures where ``--json-out`` says, and leave the
repository tree alone (``docs/benchmarks.md`` above all). A benchmark skips only where a system
binary it needs is missing, as ``tests/remote`` skips (or NeMo Gym's venv, which ``make nemo-gym`` builds).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BENCHES = sorted(p.stem for p in (ROOT / "bench").glob("*.py"))
# A guard against a hang only, generous on purpose: a quick run takes seconds on a quiet machine,
# but a 2-core machine under load runs one many times slower, and a wall-clock limit here would
# fail there and prove nothing about speed (speed is measured by the benchmarks themselves).
TIMEOUT_S = 1800
# Not walked: git's and the virtualenv's own, caches, and the packages other work edits while
# this runs (monte/, tests/). In the rest no file may appear or go, and none of these may change
# (the README or a design note may be edited by hand meanwhile; a benchmark writes none of them).
SKIP_DIRS = {".git", ".venv", "monte", "tests", "monte.egg-info", ".nemo-gym", ".actionlint"}
SKIP_ANYWHERE = {"__pycache__", ".mypy_cache", ".ruff_cache", ".pytest_cache", ".hypothesis"}
UNCHANGED = ("bench/", "docs/benchmarks.md", ".monte/", ".monte.yaml", ".dvc/", "dvc.yaml")


def _missing_binary(bench: str) -> str | None:
    """Why ``bench`` cannot run on this machine, or None: a system binary it needs is missing."""
    if bench == "remote_submit":  # a real sshd on loopback, and tmux on the "box"
        from tests.support.sshd import SSHD, SSHD_MISSING

        if not os.path.exists(SSHD):
            return str(SSHD_MISSING)
        if shutil.which("tmux") is None:
            return "tmux is not installed (apt-get install tmux): the box runs its job in tmux"
    if bench in ("grader_overhead", "grader_nemo_overhead"):  # a real sshd on loopback: the grader's forced command
        from tests.support.sshd import SSHD, SSHD_MISSING

        if not os.path.exists(SSHD):
            return str(SSHD_MISSING)
    if bench in ("nemo_verify", "grader_nemo_overhead"):  # NeMo Gym's servers, in the venv `make nemo-gym` builds
        from monte.envs.nemo import venv

        if not venv.is_built(ROOT / ".nemo-gym"):
            return "NeMo Gym's venv is not built here (`make nemo-gym`; `make test` builds it when PyPI is reachable)"
    return None


def _tree(root: Path) -> dict[str, tuple[int, int]]:
    """Every file of the repository tree that a benchmark must not touch -> (mtime_ns, size)."""
    out = {}
    for here, dirs, files in os.walk(root):
        top = Path(here) == root
        dirs[:] = [d for d in dirs if d not in SKIP_ANYWHERE and not (top and d in SKIP_DIRS)]
        for f in files:
            p = Path(here) / f
            st = p.lstat()
            out[str(p.relative_to(root))] = (st.st_mtime_ns, st.st_size)
    return out


def _quick_env(tmp: Path) -> dict[str, str]:
    """The tests' scrubbed environment (conftest's autouse ``_isolated``), no monte settings, and
    temporary files under the test's own folder."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("MONTE_")}
    env["TMPDIR"] = str(tmp)
    return env


def test_every_benchmark_is_found() -> None:
    assert len(BENCHES) >= 12, BENCHES


@pytest.mark.parametrize("bench", BENCHES)
def test_quick_run(bench: str, tmp_path: Path) -> None:
    reason = _missing_binary(bench)
    if reason:
        pytest.skip(reason)
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    figures = tmp_path / "figures.json"
    before = _tree(ROOT)
    cmd = [sys.executable, f"bench/{bench}.py", "--quick", "--json-out", str(figures)]
    t0 = time.monotonic()
    try:
        p = subprocess.run(cmd, cwd=ROOT, env=_quick_env(tmp), capture_output=True, text=True,
                           timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired as e:
        out = e.stdout.decode(errors="replace") if isinstance(e.stdout, bytes) else e.stdout or ""
        pytest.fail(f"bench/{bench}.py --quick ran past {TIMEOUT_S} s: hung, or its quick mode is not quick\n"
                    f"{out[-3000:]}")
    seconds = time.monotonic() - t0
    if "unrecognized arguments:" in p.stderr:
        pytest.fail(f"bench/{bench}.py does not take --quick and --json-out PATH: every benchmark needs both "
                    f"(--quick: a smoke run of seconds at a tiny size, the same code path)\n{p.stderr[-1000:]}")
    assert p.returncode == 0, (f"bench/{bench}.py --quick exited {p.returncode} after {seconds:.0f} s\n"
                               f"--- stdout\n{p.stdout[-4000:]}\n--- stderr\n{p.stderr[-6000:]}")
    assert figures.is_file(), f"bench/{bench}.py --quick --json-out {figures} wrote nothing"
    json.loads(figures.read_text())
    after = _tree(ROOT)
    touched = sorted(before.keys() ^ after.keys()) + sorted(
        k for k in before.keys() & after.keys() if before[k] != after[k] and k.startswith(UNCHANGED))
    assert not touched, f"bench/{bench}.py --quick wrote into the repository tree: {touched[:20]}"
