"""``monte eval`` and GRPO's reward through NeMo Gym's own resources servers (monte/envs/grading.py,
monte/evals/run.py, monte/training/run.py), with the real tiny model.

The tiny model mostly scores 0 on real tasks; that is the floor, shown as it is. What these tests
prove is the plumbing: every recorded reward is the server's, a server that dies records nothing,
and the reward GRPO trains on comes over HTTP from the server.
"""

from __future__ import annotations

import json
import os
import signal
import threading
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from monte.envs.nemo import server as gym_server
from monte.envs.nemo.stack import Stack, server_entry
from tests.envs.nemo.gymhelp import alive
from tests.support.helpers import git


def tasks_of(repo: Path, exp: str, run: str) -> list[dict]:
    path = f"runs/{run[0]}/{run[1]}/{run}/tasks.jsonl"
    return [json.loads(line) for line in git(repo, "show", f"monte/{exp}/ledger:{path}").splitlines()]


def eval_rows(repo: Path, monte, exp: str) -> list[dict]:
    return [r for r in monte("status", exp, "--json").json()["rows"] if r["kind"] == "eval"]


@pytest.fixture
def mcqa_exp(repo: Path, monte, gym: Stack, frozen, base_model: Path) -> str:
    frozen("--benchmark", "mcqa")
    r = monte("experiment", "init", "g", "--eval", "mcqa", "--model", str(base_model))
    assert r.code == 0, r.err
    return "g"


def test_eval_records_the_servers_reward_per_task(repo: Path, monte, mcqa_exp: str, gym: Stack) -> None:
    meas = json.loads(git(repo, "show", f"monte/{mcqa_exp}/ledger:measurement.json"))
    # the rows are chats, rendered by the model's chat template; the answer is not cut at a newline
    assert meas["eval"]["chat_template"] is True and meas["eval"]["stop"] == [] and meas["eval"]["max_new_tokens"] == 512
    assert meas["grader"]["kind"] == "nemo-gym"
    r = monte("eval", "--experiment", mcqa_exp, "--yes", "--json")
    assert r.code == 0, r.out
    run = r.json()["runs"][0]
    assert run["status"] == "succeeded" and run["n"] == 5
    tasks = tasks_of(repo, mcqa_exp, run["run"])
    assert [t["id"] for t in tasks] == [f"mcqa/dev/{i:05d}" for i in range(5)]
    # the same answers, sent to a fresh mcqa server by hand, get the same rewards
    rows = [json.loads(line) for line in (repo / ".monte/environments/mcqa/exams/mcqa/dev.jsonl").read_text().splitlines()]
    e = server_entry(gym.root, "mcqa")
    assert e is not None
    with gym_server.GymServer.start(gym, config=e.config, instance=e.instance, server=e.server) as s:
        direct = [s.verify(row, t["answer"])["reward"] for row, t in zip(rows, tasks, strict=True)]
    assert [t["reward"] for t in tasks] == direct == [t["score"] for t in tasks]
    assert run["score"] == sum(direct) / len(direct)
    assert not any(alive(p) for p in _launch_pids())  # every server monte started is gone


def test_a_chat_row_is_rendered_by_the_chat_template_and_refused_without_one(base_model: Path) -> None:
    from monte.envs.grading import prompt_of
    from monte.errors import MonteError
    from monte.models import generate as gen

    row = {"responses_create_params": {"input": [{"role": "system", "content": "Be brief."},
                                                 {"role": "user", "content": "2+2?"}]}, "expected_answer": "4"}
    assert prompt_of(row) == [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "2+2?"}]
    model, tok = gen.load(base_model)
    seen: list[str] = []
    real = tok.__class__.__call__

    def spy(self, texts, *a, **k):
        seen.extend(texts)
        return real(self, texts, *a, **k)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(tok.__class__, "__call__", spy)
        gen.generate(model, tok, [prompt_of(row)], max_new_tokens=2, batch_size=1)
    assert seen == ["<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\n2+2?<|im_end|>\n<|im_start|>assistant\n"]
    tok.chat_template = None
    with pytest.raises(MonteError) as e:
        gen.generate(model, tok, [prompt_of(row)], max_new_tokens=2, batch_size=1)
    assert e.value.code == "E_REFUSED" and "chat template" in e.value.message


def _launch_pids() -> list[int]:
    out = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                cmd = (d / "cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if any(c.endswith(b"monte/envs/nemo/launch.py") for c in cmd) and str(os.getpid()).encode() in \
                    (d / "stat").read_bytes().split(b")")[-1].split()[1:2]:
                out.append(int(d.name))
    return out


def test_a_server_killed_mid_eval_refuses_records_no_score_and_the_next_eval_works(
        repo: Path, monte, mcqa_exp: str, monkeypatch: pytest.MonkeyPatch) -> None:
    real = gym_server.GymServer.verify
    calls: list[str] = []
    lock = threading.Lock()

    def verify(self, row, answer, *, task=""):
        with lock:
            calls.append(task)
            if len(calls) == 3:  # the real server, SIGKILLed while the eval is grading
                os.kill(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        return real(self, row, answer, task=task)

    monkeypatch.setattr(gym_server.GymServer, "verify", verify)
    r = monte("eval", "--experiment", mcqa_exp, "--yes", "--json")
    assert r.code == 9, r.out
    err = r.json()["error"]
    assert err["code"] == "E_ENV" and "no score is recorded" in err["message"]
    [row] = eval_rows(repo, monte, mcqa_exp)
    assert row["status"] == "failed" and row["score"] is None
    with pytest.raises(AssertionError):
        tasks_of(repo, mcqa_exp, row["run"])  # no per-task file from a partial set
    monkeypatch.setattr(gym_server.GymServer, "verify", real)
    r = monte("eval", "--experiment", mcqa_exp, "--yes", "--json")
    assert r.code == 0, r.out
    assert r.json()["runs"][0]["status"] == "succeeded" and r.json()["runs"][0]["n"] == 5


def test_a_server_that_cannot_start_spends_no_touch(repo: Path, monte, checkout: Stack, base_model: Path) -> None:
    """The server starts before the eval's started record; and it must be the one frozen."""
    assert monte("env", "add", "--dev", "mcqa", "--test", "mcqa", "--as", "exams").code == 0
    assert monte("experiment", "init", "x", "--eval", "exams", "--model", str(base_model)).code == 0
    link = checkout.root / "resources_servers" / "mcqa"
    real = link.resolve()
    link.unlink()
    import shutil

    shutil.copytree(real, link)
    cfg = link / "configs" / "mcqa.yaml"
    cfg.write_text(cfg.read_text().replace("grading_mode: null", "grading_mode: lenient_boxed"))
    r = monte("eval", "--experiment", "x", "--split", "test", "--yes", "--json")
    assert r.code == 5, r.out
    assert r.json()["error"]["code"] == "E_INTEGRITY" and "config_sha256" in r.json()["error"]["message"]
    assert eval_rows(repo, monte, "x") == []  # test@0 is still unspent
    (link / "app.py").write_text("import monte_test_missing_dependency\n")
    cfg.write_text(cfg.read_text().replace("grading_mode: lenient_boxed", "grading_mode: null"))
    r = monte("eval", "--experiment", "x", "--split", "test", "--yes", "--json")
    assert r.json()["error"]["code"] == "E_INTEGRITY"  # the server's code changed too
    assert eval_rows(repo, monte, "x") == []


class _CountingProxy:
    """A pass-through in front of a real server: counts the /verify calls that reach it."""

    def __init__(self, target: str) -> None:
        self.verifies = 0
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def _forward(self, method: str) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0)) if method == "POST" else None
                if self.path == "/verify":
                    outer.verifies += 1
                req = urllib.request.Request(target + self.path, data=body, method=method,
                                             headers={"Content-Type": "application/json"})
                with urllib.request.urlopen(req) as resp:
                    data = resp.read()
                    status = resp.status
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:  # noqa: N802
                self._forward("GET")

            def do_POST(self) -> None:  # noqa: N802
                self._forward("POST")

            def log_message(self, *a: object) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def rg_exp(repo: Path, monte, gym: Stack, frozen, base_model: Path) -> str:
    frozen("--server", "reasoning_gym", "--dev", "reasoning_gym", "--test", "reasoning_gym", "--as", "rg")
    assert monte("experiment", "init", "t", "--eval", "rg", "--model", str(base_model)).code == 0
    return "t"


def test_grpo_smoke_starts_its_own_server_gets_each_reward_from_it_and_stops_it(
        repo: Path, monte, rg_exp: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """One smoke run (minutes of the suite's time each) proves the three: monte starts the frozen
    server, every reward GRPO trains on is one /verify over HTTP to it, and it is gone after."""
    started: list[gym_server.GymServer] = []
    posts: list[tuple[int | None, str, int]] = []
    real_start, real_post = gym_server.GymServer.start.__func__, gym_server.GymServer._post  # type: ignore[attr-defined]

    def start(cls, *a, **k):
        server = real_start(cls, *a, **k)
        started.append(server)
        return server

    def post(self, path: str, body: bytes) -> tuple[int, bytes]:
        status, raw = real_post(self, path, body)  # the bytes on the wire, the server's own answer
        posts.append((self.proc.pid if self.proc else None, path, status))
        return status, raw

    monkeypatch.setattr(gym_server.GymServer, "start", classmethod(start))
    monkeypatch.setattr(gym_server.GymServer, "_post", post)
    r = monte("train", "--experiment", rg_exp, "--recipe", "grpo-tiny", "--source", "rg", "--smoke", "--yes", "--json")
    assert r.code == 0, r.out
    [server] = started  # monte started the one server, no URL was configured
    assert server.proc is not None
    # grpo-tiny: 16 completions a step, 3 smoke steps; each reward is one /verify to that server
    assert posts == [(server.proc.pid, "/verify", 200)] * 48
    run = r.json()["run"]["run"]
    logs = [json.loads(line) for line in (repo / f".monte/runs/{rg_exp}/{run}/events.jsonl").read_text().splitlines()]
    steps = [ev for ev in logs if ev["event"] == "log" and "rewards/nemo_gym_reasoning_gym/mean" in ev]
    assert len(steps) == 3
    assert (repo / f".monte/runs/{rg_exp}/{run}/gym-server.log").is_file()
    assert server.proc.poll() is not None and not alive(server.proc.pid)  # stopped when the training ended
    assert _launch_pids() == []


def test_grpos_reward_comes_from_the_server_a_url_names(gym: Stack, monkeypatch: pytest.MonkeyPatch) -> None:
    """With ``MONTE_GYM_SERVER_URL`` set, GRPO's reward (``grading.Reward``, what ``monte train``
    makes) starts no server: each reward is one /verify to the one running there."""
    from monte.envs import grading
    from tests.envs.nemo.gymhelp import rows_of

    e = server_entry(gym.root, "mcqa")
    assert e is not None
    rows = {f"r{i}": row for i, row in enumerate(rows_of(gym.root, "mcqa"))}
    # the right letter boxed on every other row (reward 1), a wrong one on the rest
    answers = [f"\\boxed{{{row['expected_answer'] if i % 2 else 'Z'}}}" for i, row in enumerate(rows.values())]
    with gym_server.GymServer.start(gym, config=e.config, instance=e.instance, server=e.server) as real:
        direct = [real.verify(row, a)["reward"] for row, a in zip(rows.values(), answers, strict=True)]
        proxy = _CountingProxy(real.url)

        def no_start(*a: object, **k: object) -> None:
            raise AssertionError("a server was started although a URL names one")

        try:
            monkeypatch.setattr(gym_server.GymServer, "start", no_start)
            monkeypatch.setenv("MONTE_GYM_SERVER_URL", proxy.url)
            reward = grading.Reward({"server": "mcqa", "instance": e.instance, "config": e.config}, rows, 1.0)
            try:
                got = reward([None] * len(rows), answers, list(rows))
            finally:
                reward.close()
        finally:
            proxy.close()
    assert proxy.verifies == len(rows) and reward.server.proc is None
    assert got == [1.0 if d >= 1.0 else 0.0 for d in direct] and 0.0 in got and 1.0 in got
