"""torch's threads on a loaded machine (issue 46.15): as many as the other processes leave cores,
idle ones sleeping. Reproduced before: `monte quickstart` run directly (no OMP_NUM_THREADS) took
395 s for a chunk that takes 8 s quiet at a load of 4-5 on 2 cores (bench/loaded_machine.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from monte.models import threads


@pytest.fixture
def two_cores(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1})
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)


@pytest.mark.parametrize(("load", "n"), [(0.0, 2), (1.0, 2), (1.4, 2), (1.6, 1), (4.5, 1), (40.0, 1)])
def test_threads_are_the_cores_other_processes_leave(two_cores: None, monkeypatch: pytest.MonkeyPatch,
                                                     load: float, n: int) -> None:
    monkeypatch.setattr(os, "getloadavg", lambda: (load, load, load))
    assert threads.compute_threads() == n


def test_the_users_choice_stands(two_cores: None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(os, "getloadavg", lambda: (9.0, 9.0, 9.0))
    monkeypatch.setenv("OMP_NUM_THREADS", "2")
    assert threads.compute_threads() is None
    env = {"OMP_WAIT_POLICY": "ACTIVE"}
    threads.wait_policy(env)
    assert env == {"OMP_WAIT_POLICY": "ACTIVE"}


def test_apply_sets_torchs_threads_on_a_loaded_machine(two_cores: None, monkeypatch: pytest.MonkeyPatch) -> None:
    import torch

    before = torch.get_num_threads()
    monkeypatch.setattr(os, "getloadavg", lambda: (5.0, 5.0, 5.0))
    try:
        torch.set_num_threads(2)
        assert threads.apply() == 1 and torch.get_num_threads() == 1
    finally:
        torch.set_num_threads(before)


def test_the_cli_sets_a_sleeping_wait_policy_before_torch_loads() -> None:
    """OpenMP reads OMP_WAIT_POLICY once, when torch loads it: the CLI sets it as it starts."""
    probe = ("import json, os, sys\nfrom monte.cli.main import main\ntry:\n    main(['config'])\nexcept SystemExit:\n"
             "    pass\nprint(json.dumps(os.environ.get('OMP_WAIT_POLICY')), file=sys.stderr)\n")
    env = {k: v for k, v in os.environ.items() if k != "OMP_WAIT_POLICY"}
    r = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, timeout=120)
    assert json.loads(r.stderr.strip().splitlines()[-1]) == "PASSIVE", r.stderr
