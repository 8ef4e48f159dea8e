"""Real NeMo Gym for the tests: the unmodified nemo-gym 0.4.0 wheel in its own virtualenv.

``make test`` builds it first (``make nemo-gym``: ``python -m monte.envs.nemo.venv .nemo-gym``,
from PyPI). Run without make, the first test that needs it builds it (once, under a lock, so two
xdist workers do not race). Where it cannot be built (no PyPI), the tests that need it skip with
the build's own error; nothing here fakes a server.

``gym`` points monte at that venv (``MONTE_NEMO_GYM_PYTHON``); ``checkout`` makes a NeMo Gym
checkout for ``MONTE_LOCAL`` out of the venv's files (links, so nothing is copied), into which a
test may add servers of its own (a broken one, one that answers without a reward).
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.envs.nemo.gymhelp import CLEAR, alive, make_checkout
from tests.support.kept import Kept, kept_answer

ROOT = Path(__file__).resolve().parents[3]
VENV = Path(os.environ.get("MONTE_TEST_NEMO_GYM") or ROOT / ".nemo-gym")


@pytest.fixture(scope="session")
def gym_python() -> str:
    """The python of the NeMo Gym venv, built here if ``make nemo-gym`` has not."""
    from monte.envs.nemo import venv

    if not venv.is_built(VENV):
        VENV.parent.mkdir(parents=True, exist_ok=True)
        with open(VENV.parent / f".{VENV.name}.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # one builder; the other worker waits, then finds it built
            try:
                venv.build(VENV, quiet=True)
            except (RuntimeError, OSError) as e:
                pytest.skip(f"NeMo Gym's servers cannot be installed on this machine ({e}); "
                            "`make nemo-gym` shows the same error")
    return str(venv.python_of(VENV))


@pytest.fixture
def gym(gym_python: str, monkeypatch: pytest.MonkeyPatch):
    """monte pointed at the NeMo Gym venv; no token, no checkout, no URL."""
    from monte.envs.nemo import stack

    for k in CLEAR:
        monkeypatch.delenv(k, raising=False)
    monkeypatch.setenv("MONTE_NEMO_GYM_PYTHON", gym_python)
    s = stack.find()
    assert s is not None and s.version == "0.4.0", s
    return s


@pytest.fixture
def frozen(repo: Path, monte: Any, gym: Any, tmp_path: Path, kept: Kept) -> Callable[..., dict[str, Any]]:
    """``frozen(*args)``: ``monte env add ARGS --json`` in this test's ``repo``, its JSON answer
    returned. A freeze of NeMo Gym rows starts the exam's server to grade its floor (seconds to a
    minute each): the first test of a worker to ask for one freezes for real, and the rest get a
    copy of that repository (``kept``; a freeze is reproducible, test_nemo_freeze proves it).
    The answer's paths name this test's ``tmp_path``, as a freeze here would have."""
    def freeze(*args: str) -> dict[str, Any]:
        def make() -> Any:
            r = monte("env", "add", *args, "--json")
            assert r.code == 0, r.out
            return r.json()

        doc: dict[str, Any] = kept_answer(kept, "gym-env-add" + "-".join(args), repo, tmp_path, make)
        return doc

    return freeze


@pytest.fixture
def checkout(gym_python: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """A NeMo Gym checkout at ``MONTE_LOCAL`` (:func:`make_checkout`)."""
    return make_checkout(gym_python, tmp_path, monkeypatch)


@pytest.fixture
def server_procs() -> Iterator[list[int]]:
    """Pids a test saw; asserts after it that every one of them is gone."""
    pids: list[int] = []
    yield pids
    for pid in pids:
        assert not alive(pid), f"a NeMo Gym server (pid {pid}) outlived its test"
