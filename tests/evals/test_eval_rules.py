"""`monte eval` end to end on a real ledger with a real tiny model: scoring, targets, the seal."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

from monte.ledger.rules import E_PREFLIGHT_MESSAGE
from tests.support.helpers import checkpoint, git, monte_proc, snapshot_state


def _eval(monte, *args: str):
    return monte("eval", "--yes", "--json", *args)


def test_base_dev_eval_appends_a_scored_row_with_per_task_results(repo: Path, monte, exp: str) -> None:
    r = _eval(monte)
    assert r.code == 0, r.out + r.err
    row = r.json()["runs"][0]
    assert row["status"] == "succeeded" and row["split"] == "dev" and row["step"] == 0
    assert row["n"] == 200 and 0.0 <= row["score"] <= 1.0
    assert row["plan"]["target"]["kind"] == "base"
    ref = f"monte/exp/ledger:runs/{row['run'][0]}/{row['run'][1]}/{row['run']}"
    tasks = [json.loads(x) for x in git(repo, "show", f"{ref}/tasks.jsonl").splitlines()]
    assert len(tasks) == 200 and {"id", "score", "answer"} <= set(tasks[0])
    assert sum(t["score"] for t in tasks) / 200 == row["score"]
    # two records: started, then finished, each with trailers a user can grep
    events = git(repo, "log", "--format=%(trailers:key=Monte-Event,valueonly)", "monte/exp/ledger").split()
    assert events[:2] == ["finished", "started"]
    assert git(repo, "log", "-1", "--format=%(trailers:key=Monte-Split,valueonly)", "monte/exp/ledger").strip() == "dev"


def test_default_target_is_newest_checkpoint_else_base(repo: Path, monte, exp: str, tiny_models) -> None:
    assert _eval(monte).json()["runs"][0]["plan"]["target"]["kind"] == "base"
    _eval(monte, "--split", "test")
    a = checkpoint(repo, tiny_models[1])
    b = checkpoint(repo, tiny_models[2], parent=(a, 50))
    row = _eval(monte).json()["runs"][0]
    assert row["plan"]["target"]["run"] == b and row["step"] == 100
    row = _eval(monte, "--step", "50").json()["runs"][0]
    assert row["plan"]["target"]["run"] == a
    row = _eval(monte, "--checkpoint", f"{a}@50").json()["runs"][0]
    assert row["plan"]["target"]["run"] == a
    row = _eval(monte, "--checkpoint", f"exp/{a}@50").json()["runs"][0]
    assert row["plan"]["target"]["run"] == a
    # the checkpoint eval carries a paired delta against dev@0
    d = row["delta"]
    assert d["paired"] is True and d["n"] == 200 and d["verdict"] in ("ok", "STRIKE")


def test_step_refuses_when_two_branches_hold_it(repo: Path, monte, baselines: str, tiny_models) -> None:
    a = checkpoint(repo, tiny_models[1])
    b = checkpoint(repo, tiny_models[2])
    before = snapshot_state(repo)
    r = _eval(monte, "--step", "50")
    assert r.code == 2
    err = r.json()["error"]
    assert a in err["message"] and b in err["message"] and "--checkpoint" in err["fix"]
    assert snapshot_state(repo) == before


def test_flag_refusals(repo: Path, monte, baselines: str, tiny_models) -> None:
    a = checkpoint(repo, tiny_models[1])
    before = snapshot_state(repo)
    r = _eval(monte, "--step", "50", "--checkpoint", f"{a}@50")
    assert r.code == 2 and "together" in r.json()["error"]["message"]
    r = _eval(monte, "--split", "test", "--checkpoint", f"{a}@50")
    assert r.code == 3 and r.json()["error"]["code"] == "E_REFUSED"
    r = _eval(monte, "--checkpoint", "nosuchrun@50")
    assert r.code == 4
    r = _eval(monte, "--checkpoint", f"{a}@75")
    assert r.code == 4 and "step 75" in r.json()["error"]["message"]
    r = _eval(monte, "--step", "999")
    assert r.code == 4
    r = _eval(monte, "--experiment", "ghost")
    assert r.code == 4
    assert snapshot_state(repo) == before


def test_smoke_training_run_is_never_evidence(repo: Path, monte, dev0: str, tiny_models) -> None:
    smoke = checkpoint(repo, tiny_models[1], smoke=True)
    r = _eval(monte, "--checkpoint", f"{smoke}@50")
    assert r.code == 3 and r.json()["error"]["code"] == "E_NOT_EVIDENCE"


def test_test_split_is_read_twice_per_cohort(repo: Path, monte, exp: str, tiny_models) -> None:
    _eval(monte)
    r = _eval(monte, "--split", "test")
    assert r.code == 0 and r.json()["runs"][0]["role"] == "baseline"
    before = snapshot_state(repo)
    r = _eval(monte, "--split", "test")  # test@0 only once
    assert r.code == 3 and r.json()["error"]["code"] == "E_SEALED"
    assert snapshot_state(repo) == before
    a = checkpoint(repo, tiny_models[1])
    _eval(monte, "--checkpoint", f"{a}@50")
    r = _eval(monte, "--split", "test")  # the final claim: the only candidate
    assert r.code == 0, r.out
    claim = r.json()["runs"][0]
    assert claim["role"] == "claim" and claim["plan"]["target"]["run"] == a
    assert claim["delta"]["paired"] is True
    before = snapshot_state(repo)
    r = _eval(monte, "--split", "test")  # a third read
    assert r.code == 3 and r.json()["error"]["code"] == "E_SEALED"
    assert "twice" in r.json()["error"]["message"]
    assert snapshot_state(repo) == before


def test_checkpoint_test_eval_without_test0_is_preflight(repo: Path, monte, dev0: str, tiny_models) -> None:
    a = checkpoint(repo, tiny_models[1])
    _eval(monte, "--checkpoint", f"{a}@50")
    before = snapshot_state(repo)
    r = _eval(monte, "--split", "test")
    assert r.code == 3
    err = r.json()["error"]
    assert err["code"] == "E_PREFLIGHT" and err["message"] == E_PREFLIGHT_MESSAGE
    # and test@0 cannot be taken any more: the cohort holds a checkpoint
    assert _eval(monte, "--split", "test", "--step", "0").json()["error"]["code"] in ("E_REFUSED", "E_PREFLIGHT")
    assert snapshot_state(repo) == before


def test_selection_by_best_delta_ties_to_higher_step(repo: Path, monte, baselines: str, tiny_models) -> None:
    a = checkpoint(repo, tiny_models[0])  # same weights as base: delta exactly 0
    b = checkpoint(repo, tiny_models[0], parent=(a, 50))  # also 0, at a higher step
    _eval(monte, "--checkpoint", f"{a}@50")
    _eval(monte, "--checkpoint", f"{b}@100")
    r = monte("eval", "--split", "test", "--dry-run", "--json")
    assert r.json()["plan"]["target"]["run"] == b


def test_nomination_decides_the_claim(repo: Path, monte, baselines: str, tiny_models) -> None:
    a = checkpoint(repo, tiny_models[0])
    b = checkpoint(repo, tiny_models[0], parent=(a, 50))
    before = snapshot_state(repo)
    r = monte("nominate", f"{b}@100", "--json")  # no dev eval yet: measured, never merely liked
    assert r.code == 3 and "no admissible dev eval" in r.json()["error"]["message"]
    assert snapshot_state(repo) == before
    _eval(monte, "--checkpoint", f"{a}@50")
    _eval(monte, "--checkpoint", f"{b}@100")
    assert monte("nominate", f"{a}@50", "--json").code == 0
    claim = _eval(monte, "--split", "test").json()["runs"][0]
    assert claim["plan"]["target"]["run"] == a
    r = monte("nominate", f"{b}@100", "--json")
    assert r.code == 3 and r.json()["error"]["code"] == "E_SEALED"


def test_several_dev_exams_without_nomination_refuse(repo: Path, monte, base_model: Path, tiny_models) -> None:
    monte("env", "add", "--dev", "parity", "--dev", "chain_sum", "--test", "parity", "--as", "two")
    monte("experiment", "init", "exp", "--eval", "two", "--model", str(base_model))
    assert len(_eval(monte).json()["runs"]) == 2  # one row per exam
    _eval(monte, "--split", "test")
    a = checkpoint(repo, tiny_models[1])
    _eval(monte, "--checkpoint", f"{a}@50")
    r = _eval(monte, "--split", "test")
    assert r.code == 3 and "nominate" in r.json()["error"]["fix"]


def test_smoke_on_test_spends_no_touch_and_prints_no_score(repo: Path, monte, dev0: str, tiny_models) -> None:
    r = _eval(monte, "--split", "test", "--smoke")
    assert r.code == 0
    row = r.json()["runs"][0]
    assert row["smoke"] and row["score"] is None and row["n"] <= 5
    human = monte("eval", "--split", "test", "--smoke", "--yes")
    assert not re.search(r"score \d", human.out) and "no score" in human.out
    assert _eval(monte, "--split", "test").json()["runs"][0]["role"] == "baseline"  # touch 1 still free
    a = checkpoint(repo, tiny_models[1])
    r = _eval(monte, "--split", "test", "--smoke", "--checkpoint", f"{a}@50")  # smoke is exempt
    assert r.code == 0


def test_tampered_split_refuses_before_any_touch(repo: Path, monte, exp: str) -> None:
    test = repo / ".monte/environments/parity/exams/parity/test.jsonl"
    test.write_text(test.read_text().replace("odd", "even", 1))
    before = snapshot_state(repo)
    r = _eval(monte, "--split", "test")
    assert r.code == 5 and "measurement.json" in r.json()["error"]["message"]
    assert snapshot_state(repo) == before
    assert _eval(monte, "--split", "dev").code == 0  # the dev split is intact


def test_not_a_model_folder(repo: Path, monte, exp: str, tmp_path: Path) -> None:
    junk = tmp_path / "junk"
    junk.mkdir()
    (junk / "weights.bin").write_bytes(b"x")
    before = snapshot_state(repo)
    r = _eval(monte, "--model", str(junk))
    assert r.code == 4 and "config.json" in r.json()["error"]["message"]
    assert snapshot_state(repo) == before


def test_tampered_checkpoint_weights_refuse(repo: Path, monte, dev0: str, tiny_models) -> None:
    a = checkpoint(repo, tiny_models[1])
    weights = repo / f".monte/runs/exp/{a}/checkpoints/step-50/model.safetensors"
    weights.write_bytes(weights.read_bytes()[:-4] + b"\0\0\0\0")
    r = _eval(monte, "--checkpoint", f"{a}@50")
    assert r.code == 5 and "model.safetensors" in r.json()["error"]["message"]


def test_no_terminal_and_no_yes_refuses(repo: Path, monte, exp: str) -> None:
    before = snapshot_state(repo)
    r = monte("eval", "--json")
    assert r.code == 2 and r.json()["error"]["code"] == "E_CONFIRM_REQUIRED"
    r = monte("eval", "--dry-run", "--json")
    assert r.code == 0 and r.json()["plan"]["exams"][0]["n"] == 200
    assert snapshot_state(repo) == before


def test_two_processes_racing_for_the_last_touch_one_claims(repo: Path, monte, baselines: str, tiny_models) -> None:
    import concurrent.futures

    a = checkpoint(repo, tiny_models[1])
    _eval(monte, "--checkpoint", f"{a}@50")
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        procs = list(pool.map(lambda _: monte_proc("eval", "--split", "test", "--yes", "--json", cwd=repo,
                                                   env={"OMP_NUM_THREADS": "1"}, timeout=300), range(2)))
    codes = sorted(p.returncode for p in procs)
    assert codes == [0, 3], [p.stdout[-500:] + p.stderr[-500:] for p in procs]
    loser = next(p for p in procs if p.returncode == 3)
    assert json.loads(loser.stdout)["error"]["code"] == "E_SEALED"
    claims = [r for r in monte("status", "--json").json()["rows"] if r["role"] == "claim"]
    assert len(claims) == 1


def test_a_crashed_test_eval_has_spent_its_touch(repo: Path, monte, dev0: str) -> None:
    # A process that spends the touch (the `started` record) and dies before reading the split.
    code = (
        "import os\n"
        "from monte import api, evals\n"
        "from monte.ledger.experiment import Ledger\n"
        "from monte.workspace import open_workspace\n"
        "ws = open_workspace()\n"
        "plan = api.plan_eval(split='test', ws=ws)\n"
        "evals.start_row(Ledger(ws.store, plan.experiment), plan, plan.exams[0])\n"
        "os._exit(9)\n"
    )
    r = subprocess.run([sys.executable, "-c", code], cwd=repo, capture_output=True, text=True)
    assert r.returncode == 9, r.stderr
    rows = monte("status", "--json").json()["rows"]
    crashed = [x for x in rows if x["split"] == "test"] if rows and "split" in rows[0] else [
        x for x in rows if x["what"] == "parity/test"]
    assert crashed and crashed[0]["status"] == "abandoned"
    r = _eval(monte, "--split", "test")
    assert r.code == 3 and r.json()["error"]["code"] == "E_SEALED"
