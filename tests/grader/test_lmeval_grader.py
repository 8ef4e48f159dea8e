"""Issue 41, lm-eval exams through a real grader (tests/grader/conftest.py: the grader's own Unix
account over a real sshd with the forced command; every agent-side command run as a third,
unprivileged account). An lm-eval task of our own (its metric a ``!function`` beside the YAML,
tests/envs/lmeval_tasks.py) is frozen by the agent; the tests run in order: a grader whose python
has no lm_eval refuses env add, init and take with nothing moved; ``env add`` hands the frozen task to
the grader and the test documents leave the agent's reach while a dev eval still runs locally;
test@0 and a claim are graded on the grader by lm-eval's own code, equal to lm-eval run
directly, signed, and accepted by ``monte ledger verify``."""

from __future__ import annotations

import hashlib
import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.envs.lmeval_tasks import write_own
from tests.support.grader import PYTHON, ROOT, Setup, tiny_model

# the tests build on each other in order: under `-n 2 --dist loadgroup` the module runs whole on one worker
pytestmark = pytest.mark.xdist_group("test_lmeval_grader")

pytest.importorskip("lm_eval")

TASK = "own_task"
TESTS = f"exams/{TASK}/test.jsonl"  # the exam's items (prompt, gold, lm-eval's hashes)
DOCS = f"lmeval/{TASK}/data/test.jsonl"  # the frozen task's test documents (with their gold)


@pytest.fixture(scope="module")
def lm(grader_setup: Setup) -> Setup:
    """The real grader's repository with an lm-eval environment ``lm`` the agent froze (its task
    files in the agent's home, readable by it alone)."""
    s = grader_setup
    folder = write_own(s.agent.home / "tasks")
    subprocess.run(["chown", "-R", f"{s.agent.name}:{s.agent.name}", str(s.agent.home / "tasks")], check=True)
    s.agent_monte("env", "add", "--dev", f"lm-eval:{TASK}", "--test", f"lm-eval:{TASK}", "--as", "lm",
                  "--include-path", str(folder), check=True)
    s.extra["task"] = folder
    return s


def _env(s: Setup) -> Path:
    return s.repo / ".monte" / "environments" / "lm"


def _held(s: Setup) -> list[Path]:
    return sorted((s.home / "sealed").glob("*.json"))


def _direct(model: Path, folder: Path) -> dict[int, float]:
    """lm-eval itself on the task as written (its test split): its own ``hf`` model on the same
    weights; each document's score."""
    from lm_eval import simple_evaluate
    from lm_eval.tasks import TaskManager

    res = simple_evaluate(model="hf", model_args={"pretrained": str(model)}, tasks=[TASK],
                          task_manager=TaskManager(include_path=str(folder), include_defaults=False),
                          batch_size=32, device="cpu", log_samples=True, bootstrap_iters=0)
    assert res is not None
    return {int(x["doc_id"]): float(x["overlap"]) for x in res["samples"][TASK]}


def _signed(s: Setup, run: str) -> tuple[dict[str, Any], dict[int, float]]:
    """The grader's statement of ``run`` and its signed outcomes by lm-eval doc_id (read as root)."""
    rec = s.grader_reads()[run]
    outcomes = rec["outcomes"]["outcomes"]
    assert all(set(o) == {"id", "score"} for o in outcomes)  # ids and scores come back, never a document
    return rec["statement"]["statement"], {int(o["id"].rsplit("/", 1)[1]): o["score"] for o in outcomes}


def test_a_grader_without_lm_eval_refuses_at_init_with_nothing_moved(lm: Setup) -> None:
    s = lm
    keys = s.sshd.folder / f"authorized_keys.{s.grader.name}"
    line = keys.read_text()
    # the grader's python without lm_eval, at its one boundary: `import lm_eval` finds nothing there
    blocker = s.base / "no-lm-eval"
    blocker.mkdir(mode=0o755)
    (blocker / "sitecustomize.py").write_text("import sys\nsys.modules['lm_eval'] = None\n")
    keys.write_text(line.replace('command="', f'command="env PYTHONPATH={blocker} ', 1))
    try:
        before = sorted(p.relative_to(s.repo) for p in s.repo.rglob("*") if not {".git", "logs"} & set(p.parts))
        held = _held(s)
        for args in (("env", "add", "--dev", f"lm-eval:{TASK}", "--test", f"lm-eval:{TASK}", "--as", "lm2",
                      "--include-path", str(s.extra["task"])),
                     ("experiment", "init", "lmexp", "--eval", "lm", "--model", "base-model"),
                     ("experiment", "init", "lmexp", "--eval", "lm", "--model", "base-model", "--dry-run"),
                     ("grader", "take", "lm")):
            r = s.agent_monte(*args)
            assert r.returncode == 4 and "E_NOT_FOUND" in r.stderr, (args, r.stderr)
            assert "cannot grade lm-eval exams" in r.stderr and "pip install 'monte[lm-eval]'" in r.stderr, r.stderr
        assert sorted(p.relative_to(s.repo) for p in s.repo.rglob("*") if not {".git", "logs"} & set(p.parts)) == before
        assert s.agent_monte("experiment", "list", "--json", check=True).stdout.strip() == "[]"
        assert _held(s) == held  # the grader took nothing more (env add handed `lm` over when it could)
    finally:
        keys.write_text(line)


def test_init_hands_the_task_to_the_grader_and_a_dev_eval_still_runs_here(lm: Setup) -> None:
    from monte.manifest import read_manifest

    s = lm
    # `env add` with the grader pinned handed the split and the task's test documents over: neither
    # ever stayed on the data root; the rest of the task did
    assert not (_env(s) / TESTS).exists() and not (_env(s) / DOCS).exists()
    assert (_env(s) / f"exams/{TASK}/dev.jsonl").is_file() and (_env(s) / f"lmeval/{TASK}/task/utils.py").is_file()
    frozen = read_manifest(_env(s))
    assert frozen is not None
    content = frozen.files[TESTS].sha256
    r = s.agent_monte("experiment", "init", "lmexp", "--eval", "lm", "--model", "base-model", "--json", check=True)
    test = json.loads(r.stdout)["measurement"]["exams"][TASK]["splits"]["test"]
    assert test["sha256"] == content and test["n"] == 10
    # the grader holds the whole frozen task, proven: the same bytes as frozen
    held = s.home / "sealed" / f"{content}.d"
    docs, items = (held / DOCS).read_bytes(), (s.home / "sealed" / f"{content}.jsonl").read_bytes()
    assert hashlib.sha256(docs).hexdigest() == frozen.files[DOCS].sha256
    assert hashlib.sha256(items).hexdigest() == content
    # no copy of either anywhere in the agent's repository (its DVC cache included) or data root
    for p in s.repo.rglob("*"):
        if p.is_file() and p.stat().st_size in (len(docs), len(items)):
            assert p.read_bytes() not in (docs, items), p
    for path in (held / DOCS, s.home):
        denied = s.agent.run("cat" if path.suffix else "ls", str(path))
        assert denied.returncode != 0 and "Permission denied" in denied.stderr
    # a dev eval runs here, proving every file but the test documents, and says why those are not here
    r = s.agent_monte("eval", "-e", "lmexp", "--yes", "--json", check=True)
    run = json.loads(r.stdout)["runs"][0]
    assert run["split"] == "dev" and run["n"] == 10 and run["status"] == "succeeded"
    events = (s.repo / ".monte" / "runs" / "lmexp" / run["run"] / "events.jsonl").read_text()
    assert f"{DOCS} (the test documents" in events and "in the grader's custody" in events


def test_test_at_0_and_the_claim_are_graded_by_lm_eval_on_the_grader_and_verify(lm: Setup) -> None:
    from monte.ledger.refs import ledger_ref
    from monte.runs.lifecycle import read_tasks
    from monte.workspace import open_workspace

    s = lm
    task = s.extra["task"]
    r = s.agent_monte("eval", "-e", "lmexp", "--split", "test", "--yes", "--json", check=True)
    base = json.loads(r.stdout)["runs"][0]
    statement, scores = _signed(s, base["run"])
    assert statement["role"] == "baseline" and statement["n"] == base["n"] == 10
    assert statement["score"] == base["score"]
    # lm-eval run directly, on the same documents and weights, gives each document's score
    assert scores == _direct(s.repo / "base-model", task)
    ws = open_workspace(s.repo, require_data_root=False)
    recorded = read_tasks(ws.store.snapshot(ledger_ref("lmexp")), base["run"])
    assert recorded is not None and {int(t["id"].rsplit("/", 1)[1]): t["score"] for t in recorded} == scores
    # a checkpoint of the cohort (recorded as a finished chunk), its dev eval, then the claim
    other = s.agent.home / "other"
    tiny_model(s.agent, other, 1)  # `monte model init OTHER --seed 1`, as the agent
    made = s.agent.run(PYTHON, "-c", "import sys\nfrom pathlib import Path\n"
                       "from tests.support.helpers import checkpoint\n"
                       f"print(checkpoint(Path({str(s.repo)!r}), Path({str(other)!r}), experiment='lmexp'))",
                       cwd=s.repo, check=True, PYTHONPATH=str(ROOT))
    ck = made.stdout.split()[-1]
    s.agent_monte("eval", "-e", "lmexp", "--checkpoint", f"{ck}@50", "--yes", check=True)
    r = s.agent_monte("eval", "-e", "lmexp", "--split", "test", "--yes", "--json", check=True)
    claim = json.loads(r.stdout)["runs"][0]
    statement, scores = _signed(s, claim["run"])
    assert statement["role"] == "claim" and statement["read"] == 2 and statement["score"] == claim["score"]
    assert scores == _direct(other, task)
    assert abs(statement["delta"]["delta"] - claim["delta"]["delta"]) < 1e-12
    s.agent_monte("ledger", "verify", "--all", check=True)
