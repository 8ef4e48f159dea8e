"""monte's adapter against NeMo Gym's own resources servers (monte/envs/nemo/server.py).

Every server here is NeMo Gym's unmodified code from the 0.4.0 wheel, started by monte in its own
virtualenv; the rows are the ones NeMo Gym ships. A test's own servers (a broken one, one that
answers without a reward) are NeMo Gym servers too: they subclass its ``SimpleResourcesServer``.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from monte.envs.nemo import server as gym_server
from monte.envs.nemo.stack import Stack, server_entry
from monte.errors import MonteError
from tests.envs.nemo.gymhelp import add_server, alive, rows_of


def start(stack: Stack, name: str, **kw) -> gym_server.GymServer:
    e = server_entry(stack.root, name)
    assert e is not None, name
    return gym_server.GymServer.start(stack, config=e.config, instance=e.instance, server=e.server, **kw)


def test_mcqa_grades_a_right_and_a_wrong_answer(gym: Stack, server_procs: list[int]) -> None:
    rows = rows_of(gym.root, "mcqa")
    with start(gym, "mcqa") as s:
        assert s.proc is not None
        server_procs.append(s.proc.pid)
        right = [f"The answer is \\boxed{{{r['expected_answer']}}}." for r in rows]
        wrong = [f"\\boxed{{{'A' if r['expected_answer'] != 'A' else 'B'}}}" for r in rows]
        plain = [f"The answer is {r['expected_answer']}." for r in rows]  # mcqa's strict mode wants \boxed
        got = s.verify_many(rows + rows + rows, right + wrong + plain)
    n = len(rows)
    assert [g["reward"] for g in got] == [1.0] * n + [0.0] * (2 * n)
    assert [g["extracted_answer"] for g in got[:n]] == [r["expected_answer"] for r in rows]


def test_reasoning_gym_grades_a_right_and_a_wrong_answer(gym: Stack, server_procs: list[int]) -> None:
    rows = rows_of(gym.root, "reasoning_gym")
    with start(gym, "reasoning_gym") as s:
        assert s.proc is not None
        server_procs.append(s.proc.pid)
        got = s.verify_many(rows * 2, [f"<answer>{r['answer']}</answer>" for r in rows] + ["<answer>no idea</answer>"] * len(rows))
    assert [g["reward"] for g in got] == [1.0] * len(rows) + [0.0] * len(rows)
    assert {g["task_name"] for g in got} == {"knights_knaves"}


def test_math_with_judge_grades_without_a_judge(gym: Stack, server_procs: list[int]) -> None:
    """Its shipped config sets should_use_judge: false: math-verify alone grades."""
    rows = [r for r in rows_of(gym.root, "ns_tools", "resources_servers/ns_tools/data/compmath_test.jsonl")
            if r["expected_answer"].isdigit()][:4]
    with start(gym, "math_with_judge") as s:
        assert s.proc is not None
        server_procs.append(s.proc.pid)
        right = s.verify_many(rows, [f"So the answer is \\boxed{{{r['expected_answer']}}}." for r in rows])
        wrong = s.verify_many(rows, [f"\\boxed{{{int(r['expected_answer']) + 1}}}" for r in rows])
    assert [g["reward"] for g in right] == [1.0] * 4 and [g["reward"] for g in wrong] == [0.0] * 4
    assert all(g["judge_evaluations"] is None for g in right)


def test_a_422_names_the_missing_field(gym: Stack) -> None:
    row = rows_of(gym.root, "math_with_judge")[0]
    del row["expected_answer"]
    with start(gym, "math_with_judge") as s, pytest.raises(MonteError) as e:
        s.verify(row, "\\boxed{1}", task="dev/00003")
    assert e.value.code == "E_BAD_INPUT"
    assert "expected_answer" in e.value.message and "dev/00003" in e.value.message


NO_REWARD = """
    from nemo_gym.base_resources_server import BaseResourcesServerConfig, BaseVerifyRequest, SimpleResourcesServer


    class NoRewardConfig(BaseResourcesServerConfig):
        pass


    class NoRewardServer(SimpleResourcesServer):
        config: NoRewardConfig

        async def verify(self, body: BaseVerifyRequest) -> dict:
            return {"verdict": "looks fine"}
"""


def test_a_verify_reply_without_reward_refuses(checkout: Stack) -> None:
    add_server(checkout.root, "no_reward", NO_REWARD)
    rows = rows_of(checkout.root, "no_reward")
    with start(checkout, "no_reward") as s, pytest.raises(MonteError) as e:
        s.verify_many(rows, ["x"] * len(rows))
    assert e.value.code == "E_ENV" and "reward" in e.value.message


def test_an_import_failure_names_the_module_and_the_pip_line(checkout: Stack) -> None:
    add_server(checkout.root, "needs_dep", "import monte_test_missing_dependency\n" + textwrap.dedent(NO_REWARD))
    (checkout.root / "resources_servers" / "needs_dep" / "requirements.txt").write_text(
        "-e nemo-gym[dev] @ ../../\nmonte-test-missing-dependency==1.0\n")
    with pytest.raises(MonteError) as e:
        start(checkout, "needs_dep")
    assert e.value.code == "E_ENV"
    assert "monte_test_missing_dependency" in e.value.message
    assert f"{checkout.python} -m pip install monte-test-missing-dependency==1.0" in e.value.fix


def test_a_server_folder_without_app_py_refuses(checkout: Stack) -> None:
    add_server(checkout.root, "no_app", None)
    with pytest.raises(MonteError) as e:
        start(checkout, "no_app")
    assert e.value.code == "E_ENV" and "app.py" in e.value.message


def test_a_port_in_use_refuses(gym: Stack, monkeypatch: pytest.MonkeyPatch) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen(1)
        port = busy.getsockname()[1]
        monkeypatch.setenv("MONTE_GYM_PORT", str(port))
        with pytest.raises(MonteError) as e:
            start(gym, "mcqa")
    assert e.value.code == "E_ENV" and f"port {port}" in e.value.message


def test_the_server_stops_at_the_end_of_its_block_and_on_ctrl_c(gym: Stack) -> None:
    with start(gym, "mcqa") as s:
        assert s.proc is not None
        pid = s.proc.pid
    assert not alive(pid)
    with pytest.raises(KeyboardInterrupt), start(gym, "mcqa") as s:
        assert s.proc is not None
        pid = s.proc.pid
        raise KeyboardInterrupt
    assert not alive(pid)


def test_a_killed_monte_takes_its_server_with_it(gym: Stack, tmp_path: Path) -> None:
    """SIGKILL leaves monte no chance to clean up: the server sees its stdin close and exits."""
    code = (
        "import sys\n"
        "from monte.envs.nemo import stack, server\n"
        "s = stack.find(); e = stack.server_entry(s.root, 'mcqa')\n"
        "g = server.GymServer.start(s, config=e.config, instance=e.instance, server=e.server)\n"
        "print(g.proc.pid, flush=True)\n"
        "import time; time.sleep(600)\n"
    )
    p = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True, env=os.environ.copy())
    assert p.stdout is not None
    pid = int(p.stdout.readline())
    assert alive(pid)
    p.send_signal(signal.SIGKILL)
    p.wait()
    deadline = time.monotonic() + 20
    while alive(pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not alive(pid)


def test_a_url_reaches_an_already_running_server(gym: Stack) -> None:
    rows = rows_of(gym.root, "mcqa")[:2]
    with start(gym, "mcqa") as running:
        with gym_server.connect(running.url, "NeMo Gym server mcqa") as s:
            assert s.proc is None
            got = s.verify_many(rows, [f"\\boxed{{{r['expected_answer']}}}" for r in rows])
        assert [g["reward"] for g in got] == [1.0, 1.0]
        assert running.proc is not None and running.proc.poll() is None  # closing the client stops nothing
    with pytest.raises(MonteError) as e:
        gym_server.GymServer("ftp://127.0.0.1:1", label="x")
    assert e.value.code == "E_USAGE"
