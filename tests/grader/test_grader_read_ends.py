"""How a read through a real grader ends when it does not end well (tests/grader/conftest.py: the
grader's own account over a real sshd, every agent-side command as a third, unprivileged account).

- A new base the grader cannot load is refused while it is held, before anything is spent on
  either side; so is a held read whose cohort took its test@0 elsewhere between the grader's
  ``loaded`` answer and the go (another client racing it).
- A read whose worker is killed after ``started`` (SIGKILL: out of memory, a reboot), its server
  and client gone with it, is found over by its liveness lock: ``monte recover`` records it
  failed and says why, while a live worker's read is still reported running.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from tests.support.grader import PYTHON, Setup, tiny_model

# the tests build on each other in order: under `-n 2 --dist loadgroup` the module runs whole on one worker
pytestmark = pytest.mark.xdist_group("test_grader_read_ends")


def _test_reads(s: Setup, experiment: str) -> list[dict[str, Any]]:
    from monte.ledger.experiment import Ledger
    from monte.workspace import open_workspace

    ws = open_workspace(s.repo, require_data_root=False)
    return [r.model_dump(mode="json") for r in Ledger(ws.store, experiment).rows() if r.split == "test"]


def _bases(s: Setup) -> set[str]:
    from monte.ledger.lineage import known_bases
    from monte.workspace import open_workspace

    return {b.experiment for b in known_bases(open_workspace(s.repo, require_data_root=False).store)}


def _weights_left(s: Setup) -> list[Path]:
    return list((s.home / "weights").glob("*"))


def _pids(s: Setup, pattern: str) -> list[int]:
    r = subprocess.run(["pgrep", "-u", s.grader.name, "-f", pattern], capture_output=True, text=True)
    return [int(x) for x in r.stdout.split()]


def _model(s: Setup, name: str, seed: int) -> None:
    tiny_model(s.agent, s.repo / name, seed)  # `monte model init NAME --seed SEED`, as the agent


def test_a_new_base_the_grader_cannot_load_is_refused_with_nothing_spent(grader_setup: Setup) -> None:
    s = grader_setup
    _model(s, "unloadable", 3)
    config = s.repo / "unloadable" / "config.json"  # its weights are a model's; transformers cannot build it
    config.write_text(json.dumps({**json.loads(config.read_text()), "model_type": "no-such-architecture"}))
    s.agent_monte("experiment", "init", "unloadable", "--eval", "parity", "--model", "unloadable", check=True)
    before = s.grader_reads()
    r = s.agent_monte("eval", "-e", "unloadable", "--split", "test", "--yes", "--json")
    assert r.returncode == 6, r.stdout + r.stderr
    err = json.loads(r.stdout)["error"]
    assert err["code"] == "E_BAD_INPUT" and "could not load the weights" in err["message"], err
    assert "nothing was spent" in err["message"] and "monte model init" in err["fix"]
    assert s.grader_reads() == before, "the grader recorded a read it could not load"
    assert _weights_left(s) == [], "the copy the grader could not load stays in its home"
    assert _test_reads(s, "unloadable") == [] and "unloadable" not in _bases(s)
    s.agent_monte("ledger", "verify", "--all", check=True)


def test_a_held_read_whose_cohort_took_its_test_at_0_before_the_go_is_refused_with_nothing_spent(
        grader_setup: Setup) -> None:
    """Between the grader's ``loaded`` answer and the go, another client takes the cohort's
    test@0 (its own held read, start to finish): the first one's local record is refused on the
    ledger's tip, so it never sends the go; the grader withdraws it and removes its copy."""
    s = grader_setup
    s.agent_monte("experiment", "init", "race", "--eval", "parity", "--model", "base-model", check=True)
    script = (
        "import json, subprocess, sys\n"
        "from monte import api\n"
        "from monte.errors import MonteError\n"
        "from monte.grader import client\n"
        "checked = client._check_behaviour\n"
        "def racing(ws, plan, fp):\n"
        "    checked(ws, plan, fp)\n"
        "    # the fingerprint is answered, the go not yet sent: another client reads this cohort's test@0\n"
        "    r = subprocess.run([sys.executable, '-m', 'monte', 'eval', '-e', 'race', '--split', 'test', '--yes'],\n"
        "                       capture_output=True, text=True)\n"
        "    if r.returncode:\n        sys.exit('the racing read failed: ' + r.stderr)\n"
        "client._check_behaviour = racing\n"
        "plan = api.plan_eval(experiment='race', split='test')\n"
        "assert plan.behaviour_unchecked\n"
        "try:\n    api.run_eval(plan)\n"
        "except MonteError as e:\n    print(json.dumps({'code': e.code, 'message': e.message})); sys.exit(5)\n"
    )
    r = s.agent.run(PYTHON, "-c", script, cwd=s.repo, MONTE_GRADER_KEY_FILE=str(s.key_file))
    assert r.returncode == 5, r.stdout + r.stderr
    refused = json.loads(r.stdout.strip().splitlines()[-1])
    assert refused["code"] == "E_SEALED" and "already taken" in refused["message"], refused
    reads = _test_reads(s, "race")
    assert [(x["role"], x["status"]) for x in reads] == [("baseline", "succeeded")], reads  # the racer's only
    on_grader = [run for run, rec in s.grader_reads().items() if rec["started"]["experiment"] == "race"]
    assert on_grader == [reads[0]["run"]], "the withdrawn read was recorded on the grader"
    assert _weights_left(s) == [], "the withdrawn read's copy stays in the grader's home"
    s.agent_monte("ledger", "verify", "--all", check=True)


def _test_read_with_its_worker(s: Setup, name: str, seed: int, *, out: bool) -> tuple[subprocess.Popen[str], str, int]:
    """A known base's test read started by the agent in a session of its own (the base's dev@0
    first, so the read goes at once), once its worker runs on the grader: (client, run, worker pid).
    ``out``: the client answers ``--json`` on a pipe."""
    _model(s, name, seed)
    s.agent_monte("experiment", "init", name, "--eval", "parity", "--model", name, check=True)
    s.agent_monte("eval", "-e", name, "--yes", check=True)
    env = s.agent.env(MONTE_GRADER_KEY_FILE=str(s.key_file))
    client = subprocess.Popen(["runuser", "-u", s.agent.name, "--", "env", "-i",
                               *(f"{k}={v}" for k, v in env.items()), PYTHON, "-m", "monte", "eval", "-e", name,
                               "--split", "test", "--yes", *(["--json"] if out else [])], cwd=s.repo,
                              start_new_session=True, text=True,
                              stdout=subprocess.PIPE if out else subprocess.DEVNULL,
                              stderr=subprocess.PIPE if out else subprocess.DEVNULL)
    deadline = time.monotonic() + 300
    run, workers = "", list[int]()
    while time.monotonic() < deadline and not workers:  # its worker starts once `started` is in
        run = next((r for r, rec in s.grader_reads().items() if rec["started"]["experiment"] == name), "")
        workers = _pids(s, rf"monte\.grader\.work .* {run}$") if run else []
        time.sleep(0.05)
    if not workers:
        os.killpg(client.pid, signal.SIGKILL)
        client.wait()
        pytest.fail("the read's worker never started on the grader")
    return client, run, workers[0]


def test_a_read_whose_worker_is_killed_after_started_is_recorded_failed_by_recover(grader_setup: Setup) -> None:
    s = grader_setup
    client, run, worker = _test_read_with_its_worker(s, "mortal", 4, out=False)
    deadline = time.monotonic() + 300
    try:
        os.kill(worker, signal.SIGSTOP)  # still importing torch: held alive, reading nothing
        # a live worker's read is running: recover records nothing for it
        r = s.agent_monte("recover", "mortal", "--json", check=True)
        assert json.loads(r.stdout) == [{"run": run, "status": "running", "score": None, "n": None, "error": None}]
        assert [x["status"] for x in _test_reads(s, "mortal")] == ["started"]
        assert "failed" not in s.grader_reads()[run] and s.home.joinpath("weights", run).is_dir()
        # then the machine loses it all: the client, the grader's server waiting on the worker, the worker
        os.killpg(client.pid, signal.SIGKILL)
        for pid in _pids(s, "monte grader serve"):
            os.kill(pid, signal.SIGKILL)
        os.kill(worker, signal.SIGKILL)
        while time.monotonic() < deadline and _pids(s, rf"monte\.grader\.work .* {run}$"):
            time.sleep(0.05)
    finally:
        if client.poll() is None:
            os.killpg(client.pid, signal.SIGKILL)
        client.wait()
    r = s.agent_monte("recover", "mortal", "--json", check=True)
    [got] = json.loads(r.stdout)
    assert got["run"] == run and got["status"] == "failed", got
    assert "ended without a result" in got["error"] and f"logs/{run}.log" in got["error"], got
    row = _test_reads(s, "mortal")[0]
    assert row["status"] == "failed" and "ended without a result" in row["error"]
    assert "ended without a result" in s.grader_reads()[run]["failed"]["error"]
    assert not s.home.joinpath("weights", run).exists(), "the dead read's copy stays in the grader's home"
    shown = s.agent_monte("recover", "mortal", check=True).stdout  # recorded once: nothing left to recover
    assert "nothing to recover" in shown, shown
    # the touch stays spent, as every failed read's: the cohort's test@0 is gone on the grader too
    r = s.agent_monte("eval", "-e", "mortal", "--split", "test", "--yes", "--json")
    assert r.returncode != 0 and json.loads(r.stdout)["error"]["code"] == "E_SEALED", r.stdout
    s.agent_monte("ledger", "verify", "--all", check=True)


def test_a_worker_killed_while_its_client_waits_is_recorded_failed_by_the_eval(grader_setup: Setup) -> None:
    """The grader's server outlives its worker: it records the read failed with how the worker
    ended, and the waiting `monte eval` records it so in the agent's ledger and says why."""
    s = grader_setup
    client, run, worker = _test_read_with_its_worker(s, "doomed", 5, out=True)
    try:
        os.kill(worker, signal.SIGKILL)
        out, err = client.communicate(timeout=300)
    finally:
        if client.poll() is None:
            os.killpg(client.pid, signal.SIGKILL)
            client.wait()
    assert client.returncode == 3, out + err
    refused = json.loads(out)["error"]
    assert refused["code"] == "E_REFUSED" and "killed by SIGKILL" in refused["message"], refused
    assert f"logs/{run}.log" in refused["message"] and "stays spent" in refused["fix"]
    row = _test_reads(s, "doomed")[0]
    assert row["run"] == run and row["status"] == "failed" and "killed by SIGKILL" in row["error"]
    assert s.grader_reads()[run]["failed"]["exit"] == -signal.SIGKILL
    assert not s.home.joinpath("weights", run).exists()
    s.agent_monte("ledger", "verify", "--all", check=True)
