"""Issue 41, NeMo Gym exams through a real grader (tests/support/grader.py: the grader's own Unix
account behind a real sshd with the forced command, every agent-side command run as a third,
unprivileged account), graded by a real NeMo Gym resources server the grader starts itself.

The exam is a server of the test's own in a NeMo Gym checkout built from the pinned nemo-gym venv
(``make nemo-gym``): its ``/verify`` reward is a function of every character of the answer, so
two reads agree only when they generated the same texts and graded them with the same server.
Its rows carry no reference answer, so freezing it starts no server: the module starts four (the
take's proof that the grader can start it, the read on the grader, the local read it is compared
with, and the agent's dev eval), the fewest that cover custody, the read, the comparison and dev
evals staying local. The refusals need no server: the grader's checks of version, config and code
come first.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.grader import PYTHON, ROOT, Setup, need_root, real_grader, tiny_model
from tests.support.nemo_checkout import SERVER, checkout

# the tests build on each other in order: under `-n 2 --dist loadgroup` the module runs whole on one worker
pytestmark = pytest.mark.xdist_group("test_nemo_grader")

VENV = Path(os.environ.get("MONTE_TEST_NEMO_GYM") or ROOT / ".nemo-gym")
INIT = ("experiment", "init", "nemo", "--eval", SERVER, "--model", "base-model")


def _gym_venv() -> Path:
    """The pinned NeMo Gym venv (built here, once, under a lock, if `make nemo-gym` has not)."""
    from monte.envs.nemo import venv

    if not venv.is_built(VENV):
        VENV.parent.mkdir(parents=True, exist_ok=True)
        with open(VENV.parent / f".{VENV.name}.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                venv.build(VENV, quiet=True)
            except (RuntimeError, OSError) as e:
                pytest.skip(f"NeMo Gym's servers cannot be installed on this machine ({e}); `make nemo-gym` shows it")
    return VENV


@pytest.fixture(scope="module")
def nemo_grader() -> Iterator[Setup]:
    """A grader whose forced command names a NeMo Gym checkout, and an agent's repository with a
    NeMo Gym environment frozen (dev and test) and the grader pinned, before any experiment."""
    need_root()
    venv = _gym_venv()

    def checkouts(base: Path) -> dict[str, Any]:
        # the same files, run by an interpreter without NeMo Gym's dependencies: its servers cannot start
        subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(base / "bare")], check=True)
        return {"gym": checkout(base / "gym", venv), "other": checkout(base / "gym-other", venv, version="7"),
                "broken": checkout(base / "gym-broken", venv, runs=base / "bare")}

    with real_grader(("mngrader", "mnagent"), prepare=checkouts,
                     init_args=lambda extra: ("--nemo-gym", str(extra["gym"]))) as setup:
        gym, info = setup.extra["gym"], setup.extra["info"]
        assert info["nemo_gym"] == "0.4.0" and f"--nemo-gym {gym}" in info["authorized_keys"]
        setup.agent_monte("init", check=True, MONTE_LOCAL=str(gym))
        # seed 2: the tiny model whose answers to these rows differ (seed 0 answers each the same)
        tiny_model(setup.agent, setup.repo / "base-model", 2)  # `monte model init base-model --seed 2`
        for args in (("env", "add", "--dev", f"server:{SERVER}", "--test", f"server:{SERVER}", "--as", SERVER),
                     ("config", "set", "grader", setup.url, "--key", setup.public_key)):
            setup.agent_monte(*args, check=True, MONTE_LOCAL=str(gym))
        yield setup


def _forced_command(s: Setup, nemo_gym: Path | None) -> None:
    """The grader's authorized_keys line, its forced command naming ``nemo_gym`` (or none)."""
    line = s.extra["line"].replace(f" --nemo-gym {s.extra['gym']}", f" --nemo-gym {nemo_gym}" if nemo_gym else "")
    (s.sshd.folder / f"authorized_keys.{s.grader.name}").write_text(line + "\n")


def _split(s: Setup, split: str) -> Path:
    return s.repo / ".monte" / "environments" / SERVER / "exams" / SERVER / f"{split}.jsonl"


def _rows(s: Setup, repo: Path, experiment: str) -> list[dict[str, Any]]:
    from monte.ledger.experiment import Ledger
    from monte.workspace import open_workspace

    ws = open_workspace(repo, require_data_root=False)
    return [r.model_dump(mode="json") for r in Ledger(ws.store, experiment).rows()]


def _tasks(repo: Path, experiment: str, run: str) -> list[dict[str, Any]]:
    """A run's per-item outcomes as its ledger recorded them (read through monte's own reader)."""
    from monte.ledger.experiment import Ledger
    from monte.ledger.views import run_dir
    from monte.workspace import open_workspace

    ws = open_workspace(repo, require_data_root=False)
    raw = Ledger(ws.store, experiment).snapshot().read(f"{run_dir(run)}/tasks.jsonl")
    assert raw is not None
    return [json.loads(x) for x in raw.decode().splitlines() if x.strip()]


def test_a_grader_that_cannot_grade_the_nemo_exam_refuses_before_anything_moves(nemo_grader: Setup) -> None:
    s = nemo_grader
    test, dev = _split(s, "test"), _split(s, "dev")
    before = test.read_bytes()
    # no NeMo Gym named in the forced command: the grader cannot start the exam's server
    _forced_command(s, None)
    r = s.agent_monte(*INIT)
    said = " ".join(r.stderr.split())
    assert r.returncode == 9 and "E_ENV" in said and "the grader has no NeMo Gym" in said, said
    assert "`monte grader init DIR --nemo-gym PATH` prints that line" in said
    # another NeMo Gym version than the freeze recorded: refused, naming both
    _forced_command(s, s.extra["other"])
    for args in (INIT, ("grader", "take", SERVER)):
        r = s.agent_monte(*args)
        assert r.returncode == 5 and "E_INTEGRITY" in r.stderr, r.stderr
        said = " ".join(r.stderr.split())
        assert "the grader's NeMo Gym is 0.4.7" in said and "frozen with NeMo Gym 0.4.0" in said, said
    # the same NeMo Gym, whose server cannot start on the grader: the take's start proves it first
    _forced_command(s, s.extra["broken"])
    r = s.agent_monte(*INIT)
    said = " ".join(r.stderr.split())
    assert r.returncode == 9 and "E_ENV" in said and "cannot start" in said and "nothing was moved" in said, said
    # nothing moved: the split is where it was, no experiment, the grader holds nothing
    assert test.read_bytes() == before and dev.is_file()
    assert s.agent_monte("experiment", "list", "--json", check=True).stdout.strip() == "[]"
    assert not list((s.home / "sealed").iterdir()) and s.grader_reads() == {}
    _forced_command(s, s.extra["gym"])


def test_experiment_init_hands_the_nemo_test_rows_to_the_grader(nemo_grader: Setup) -> None:
    s = nemo_grader
    test = _split(s, "test")
    sealed = test.read_bytes()
    content = hashlib.sha256(sealed).hexdigest()
    r = s.agent_monte(*INIT, "--json", check=True)
    split = json.loads(r.stdout)["measurement"]["exams"][SERVER]["splits"]["test"]
    assert split["sha256"] == content and split["n"] == 4
    # in custody, with what grades it: the frozen server's identity
    held = s.home / "sealed" / f"{content}.jsonl"
    assert held.read_bytes() == sealed
    meta = json.loads((s.home / "sealed" / f"{content}.json").read_text())
    assert meta["grader"]["kind"] == "nemo-gym" and meta["grader"]["servers"][SERVER]["version"] == "0.4.0"
    assert meta["grader"]["servers"][SERVER]["code_sha256"]
    # the agent's account has no copy of the test rows: not on the data root, not anywhere in its repository
    assert not test.exists() and _split(s, "dev").is_file()  # dev evals keep running locally
    for p in s.repo.rglob("*"):
        if p.is_file() and p.stat().st_size == len(sealed):
            assert p.read_bytes() != sealed, p
    for path in (held, s.home):
        denied = s.agent.run("cat" if path.suffix else "ls", str(path))
        assert denied.returncode != 0 and "Permission denied" in denied.stderr
    # hello says what the grader grades: the in-process exams and its NeMo Gym's
    script = ("import json\nfrom monte.grader import client\nfrom monte.workspace import open_workspace\n"
              "print(json.dumps(client.hello(client.require(open_workspace()))))\n")
    said = json.loads(s.agent.run(PYTHON, "-c", script, cwd=s.repo, MONTE_GRADER_KEY_FILE=str(s.key_file),
                                  check=True).stdout)
    assert said["grades"].pop("lm-eval", {}) == {}  # (where the grader's python has lm_eval)
    assert said["grades"] == {"catalog": {}, "jsonl": {}, "nemo-gym": {"version": "0.4.0"}}
    assert said["sealed"] == {content: 4}


def test_test_at_0_on_the_grader_equals_a_local_read_and_verifies(nemo_grader: Setup) -> None:
    s = nemo_grader
    # the grader's NeMo Gym changed since the take: refused by the client, before anything is recorded
    _forced_command(s, s.extra["other"])
    r = s.agent_monte("eval", "--split", "test", "--yes")
    assert r.returncode == 5 and "E_INTEGRITY" in r.stderr and "nothing was spent" in r.stderr, r.stderr
    assert not [x for x in _rows(s, s.repo, "nemo") if x["split"] == "test"] and s.grader_reads() == {}
    _forced_command(s, s.extra["gym"])
    # the read: the grader starts the frozen server itself and grades the weights it hashed
    r = s.agent_monte("eval", "--split", "test", "--yes", "--json", check=True)
    row = json.loads(r.stdout)["runs"][0]
    reads = s.grader_reads()
    assert list(reads) == [row["run"]]
    statement = reads[row["run"]]["statement"]["statement"]
    assert statement["role"] == "baseline" and statement["read"] == 1
    assert statement["score"] == row["score"] and statement["n"] == row["n"] == 4
    s.agent_monte("ledger", "verify", "--all", check=True)
    graded = _tasks(s.repo, "nemo", row["run"])  # per item: its id and score, never its text
    assert [t["id"] for t in graded] == [f"{SERVER}/test/{i:05d}" for i in range(4)]
    assert all(set(t) <= {"id", "score"} for t in graded), graded
    # the same exam and weights read locally, in a repository with no grader
    local = s.agent.home / "local"
    s.agent.run("git", "init", "-q", "-b", "main", str(local), check=True)
    gym = str(s.extra["gym"])
    for args in (("init",), ("env", "add", "--dev", f"server:{SERVER}", "--test", f"server:{SERVER}", "--as", SERVER),
                 ("experiment", "init", "nemo", "--eval", SERVER, "--model", str(s.repo / "base-model"))):
        s.agent.monte(*args, cwd=local, check=True, MONTE_LOCAL=gym)
    r = s.agent.monte("eval", "--split", "test", "--yes", "--json", cwd=local, check=True, MONTE_LOCAL=gym)
    here = json.loads(r.stdout)["runs"][0]
    assert here["score"] == row["score"]
    mine = [(t["id"], t["score"]) for t in _tasks(local, "nemo", here["run"])]
    assert mine == [(t["id"], t["score"]) for t in graded]
    assert len({score for _, score in mine}) > 1  # the server's rewards tell the answers apart


def test_dev_evals_run_locally_and_the_leak_check_runs_on_the_grader(nemo_grader: Setup) -> None:
    s = nemo_grader
    before = s.grader_reads()
    # dev@0: graded here, by the server the agent's own NeMo Gym starts; the grader is not asked
    r = s.agent_monte("eval", "--yes", "--json", check=True, MONTE_LOCAL=str(s.extra["gym"]))
    dev = json.loads(r.stdout)["runs"][0]
    assert dev["split"] == "dev" and dev["status"] == "succeeded" and dev["n"] == 4
    assert s.grader_reads() == before
    # a training source holding a sealed row: found where the sealed rows are, on the grader
    held = next((s.home / "sealed").glob("*.jsonl")).read_text().splitlines()  # read as root: the agent cannot
    asked = json.loads(held[1])["responses_create_params"]["input"][0]["content"]
    rows = s.agent.home / "leaky.jsonl"
    rows.write_text("".join(json.dumps({"input": f"Say hello {i}.", "output": " hello"}) + "\n" for i in range(4))
                    + json.dumps({"input": asked, "output": " 9"}) + "\n")
    shutil.chown(rows, s.agent.name, s.agent.name)
    s.agent_monte("dataset", "add", "leaky", "--from-file", str(rows), "--kind", "sft", check=True)
    r = s.agent_monte("train", "--recipe", "sft-tiny", "--source", "leaky", "--from-base", "--yes")
    said = " ".join(r.stderr.split())
    assert r.returncode == 3 and "E_LEAK" in said and "found by the grader" in said, said
    assert f"holds {SERVER}/test/00001" in said
