"""Issue 26, case 5: a durable result is proven before it is recorded.

A run killed between keeping its result in its run folder (``finish.json``) and its finishing
record leaves that file for ``monte recover``. On the current main an edited file (one score
flipped, or a single bogus task id with n = 1) was recorded as it stood, and verify passed. Now
recover grades the kept answers again with the frozen grader, requires exactly the split's task
ids, and marks the row recovered; any mismatch refuses ``E_INTEGRITY`` and records nothing.

The kill is real (SIGKILL, from inside the process right after the file is kept: the one
stand-in, at that one boundary, to hit the moment); the model, the grader and git are real.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.support.helpers import snapshot_state
from tests.support.kept import Kept

_KILL = """
import os, signal, sys
import monte.evals.run as run
orig = run.save_pending
def save_pending(*a, **k):
    orig(*a, **k)
    os.kill(os.getpid(), signal.SIGKILL)  # between the kept result and its finishing record
run.save_pending = save_pending
from monte.cli.main import main
main(sys.argv[1:])
"""


@pytest.fixture
def killed_read(repo: Path, exp: str, tmp_path: Path, kept: Kept) -> Path:
    """test@0 of ``exp`` killed between its kept result and its finishing record: the kept
    ``finish.json``. Built once per worker (``kept``): both tests below start here."""
    def build() -> None:
        p = subprocess.run([sys.executable, "-c", _KILL, "eval", "--split", "test", "--yes", "--json"], cwd=repo,
                           capture_output=True, text=True, timeout=600, env={**os.environ, "OMP_NUM_THREADS": "1"})
        assert p.returncode == -signal.SIGKILL, p.stdout + p.stderr

    kept.restore("killed-test-read", repo, tmp_path, build)
    (result,) = (repo / ".monte" / "runs" / "exp").glob("*/finish.json")
    return result


def _refused(r: Any, says: str) -> None:
    assert r.code == 5, r.out
    err = r.json()["error"]
    assert err["code"] == "E_INTEGRITY" and says in err["message"] and "nothing was recorded" in err["message"], err


def test_recover_grades_the_kept_answers_again_before_recording(repo: Path, monte, killed_read: Path) -> None:
    kept = killed_read
    honest = kept.read_text()
    result = json.loads(honest)
    run = kept.parent.name
    before = snapshot_state(repo)
    # one score flipped (the task's answer left as it was)
    flipped = json.loads(honest)
    t = flipped["tasks"][0]
    t["score"] = 1.0 - t["score"]
    kept.write_text(json.dumps(flipped))
    _refused(monte("recover", "--json"), f"task {t['id']} is kept with score")
    # one bogus task, n = 1
    kept.write_text(json.dumps({**result, "tasks": [{"id": "bogus", "score": 1.0, "answer": "1"}], "n": 1,
                                "answers": ["1"]}))
    _refused(monte("recover", "--json"), "answers, the split holds 200 items")
    # one answer edited, its task's quote left as it was: refused before any grader is made
    edited = json.loads(honest)
    edited["answers"][0] = edited["answers"][0] + " 7"
    kept.write_text(json.dumps(edited))
    _refused(monte("recover", "--json"), "its answers are not the ones its tasks quote")
    kept.write_text(json.dumps({**result, "tasks": [{**result["tasks"][0], "id": "bogus"}, *result["tasks"][1:]]}))
    _refused(monte("recover", "--json"), "task ids are not the split's")
    assert snapshot_state(repo)["refs"] == before["refs"]  # no record (the kept file was edited by hand)
    # the honest file is recorded, graded again, and the row says it was recovered
    kept.write_text(honest)
    r = monte("recover", "--json")
    assert r.code == 0, r.out
    (rec,) = r.json()
    mean = sum(x["score"] for x in result["tasks"]) / len(result["tasks"])
    assert rec["run"] == run and rec["status"] == "succeeded" and rec["n"] == 200 and abs(rec["score"] - mean) < 1e-12
    row = monte("show", run, "--json").json()
    assert row["recovered"] is True and row["role"] == "baseline", row
    assert not kept.exists()
    assert monte("ledger", "verify", "--all", "--json").code == 0


def _answers_from_the_split(repo: Path, exp: str, honest: dict[str, Any]) -> dict[str, Any]:
    """What a forger writes: every answer copied from the sealed split's answers, graded by the
    frozen grader (so every kept score is the one the grader gives), quoted as monte quotes."""
    from monte.envs import grading
    from monte.evals.plan import ExamPlan
    from monte.evals.run import _read_split
    from monte.ledger.experiment import Ledger
    from monte.workspace import open_workspace

    ws = open_workspace(repo)
    meas = Ledger(ws.store, exp).measurement()
    (name, exam), = meas.exams.items()
    split = exam.splits["test"]
    items = _read_split(ws, ExamPlan(exam=name, benchmark=exam.benchmark, split="test", path=split.path,
                                     sha256=split.sha256, n=split.n))
    answers = [str(i["answer"]) for i in items]
    ids = [grading.task_id(it, f"{name}/test", k) for k, it in enumerate(items)]
    with grading.ExamGrader(meas.grader, exam.benchmark, name, config=ws.config, log=repo / "grader.log") as g:
        tasks = g.grade(items, answers, ids)
    assert sum(t["score"] for t in tasks) > sum(t["score"] for t in honest["tasks"])  # a better score
    return {**honest, "tasks": tasks, "answers": answers}


def test_recover_records_nothing_the_runs_process_did_not_generate(repo: Path, monte, exp: str,
                                                                  killed_read: Path) -> None:
    """Issue 43, case 2: on main a test read killed right after ``started`` was completed from a
    hand-written ``finish.json`` (answers copied from the sealed split) and recorded as a
    succeeded read. The generating process now stamps the answers' digest, signed with the
    repository's key, before it grades (``generated.json``); recover records a kept result only
    when its answers are the stamped ones. A test read with no stamp (or a stamp whose MAC
    fails) is generated again by its model, greedy here, and compared: copied answers are
    refused and nothing is recorded; the run's own answers are recorded, as recovered."""
    kept = killed_read
    stamp = kept.parent / "generated.json"
    honest_stamp, honest = stamp.read_text(), json.loads(kept.read_text())
    before = snapshot_state(repo)
    kept.write_text(json.dumps(_answers_from_the_split(repo, exp, honest)))
    _refused(monte("recover", "--json"), "not the ones this run's model generated")  # the stamp holds
    stamp.unlink()  # the state of a run killed before it generated
    _refused(monte("recover", "--json"), "not the ones this run's model generated")  # generated again
    forged_stamp = json.loads(honest_stamp)
    forged_stamp["mac"] = "00" * 32
    stamp.write_text(json.dumps(forged_stamp))
    _refused(monte("recover", "--json"), "not the ones this run's model generated")
    assert snapshot_state(repo)["refs"] == before["refs"]
    stamp.unlink()
    kept.write_text(json.dumps(honest))  # the run's own result, with no stamp: generated again, the same
    r = monte("recover", "--json")
    assert r.code == 0 and r.json()[0]["status"] == "succeeded", r.out
    row = monte("show", r.json()[0]["run"], "--json").json()
    assert row["recovered"] is True, row
