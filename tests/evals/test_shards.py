"""`monte eval --processes N`: each exam's generation split across N real processes, gathered
into one tasks.jsonl byte-identical to the one-process result (greedy), and its refusals."""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from pathlib import Path

import pytest

from tests.support.helpers import git, snapshot_state


@pytest.fixture(autouse=True)
def _one_thread() -> None:
    import torch

    torch.set_num_threads(1)  # the shards run on one thread each: so does the one-process run


def _tasks(repo: Path, run: str, exp: str = "exp") -> str:
    return git(repo, "show", f"monte/{exp}/ledger:runs/{run[0]}/{run[1]}/{run}/tasks.jsonl")


def test_two_shards_give_the_one_process_tasks_file(exp: str, repo: Path, monte) -> None:
    one = monte("eval", "--yes", "--json")
    assert one.code == 0, one.out + one.err
    two = monte("eval", "--yes", "--json", "--processes", "2")
    assert two.code == 0, two.out + two.err
    r1, r2 = one.json()["runs"][0], two.json()["runs"][0]
    assert r2["plan"]["processes"] == 2 and "processes" not in r1["plan"]
    assert r1["plan"]["settings"] == r2["plan"]["settings"]  # the shard count is no setting
    assert r1["cohort"] == r2["cohort"]
    t1, t2 = _tasks(repo, r1["run"]), _tasks(repo, r2["run"])
    assert [json.loads(x)["id"] for x in t1.splitlines()] == [json.loads(x)["id"] for x in t2.splitlines()]
    assert t1 == t2 and r1["score"] == r2["score"]
    assert len({json.loads(x)["answer"] for x in t1.splitlines()}) > 1  # answers that could differ
    # both shards answered, each its own whole batches
    work = repo / ".monte" / "runs" / "exp" / r2["run"] / "shards"
    parts = [json.loads((work / f"shard-{k}.json").read_text()) for k in (0, 1)]
    assert all(p["indices"] for p in parts)
    assert sorted(parts[0]["indices"] + parts[1]["indices"]) == list(range(r1["n"]))


@pytest.mark.parametrize("args,needle", [
    (["--processes", "0"], "at least one process"),
    (["--processes", "201"], "more processes than exam parity has tasks (200)"),
    (["--smoke", "--processes", "6"], "more processes than exam parity has tasks (5)"),
])
def test_shard_counts_that_cannot_run_refuse_and_write_nothing(exp: str, repo: Path, monte, args: list[str],
                                                               needle: str) -> None:
    before = snapshot_state(repo)
    r = monte("eval", "--yes", "--json", *args)
    assert r.code == 2, r.out + r.err
    err = r.json()["error"]
    assert err["code"] == "E_USAGE" and needle in err["message"], err
    assert snapshot_state(repo) == before


def test_a_shard_that_dies_fails_the_eval_naming_it_and_records_no_score(exp: str, repo: Path, monte) -> None:
    runs = repo / ".monte" / "runs" / "exp"
    killed: list[int] = []

    def kill_shard_one() -> None:  # a real SIGKILL to shard 1 once it has started
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline and not killed:
            for pid_file in runs.glob("*/shards/shard-1.pid"):
                pid = int(pid_file.read_text() or 0)
                if pid:
                    os.kill(pid, signal.SIGKILL)
                    killed.append(pid)
                    return
            time.sleep(0.05)

    t = threading.Thread(target=kill_shard_one)
    t.start()
    r = monte("eval", "--yes", "--json", "--processes", "2")
    t.join()
    assert killed and r.code == 10, r.out + r.err
    err = r.json()["error"]
    assert err["code"] == "E_RANK" and "eval shard 1 of 2 died (killed by signal 9)" in err["message"], err
    run = next(p.parent.parent.name for p in runs.glob("*/shards/shard-1.pid"))
    row = json.loads(monte("show", run, "--json").out)
    assert row["status"] == "failed" and row["score"] is None
    for pid_file in (runs / run / "shards").glob("shard-*.pid"):  # no shard outlived the eval
        pid = int(pid_file.read_text())
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            continue
        with open(f"/proc/{pid}/stat") as f:
            assert f.read().rsplit(")", 1)[1].split()[0] == "Z", f"shard {pid_file.name} still runs"
