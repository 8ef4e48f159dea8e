"""What a user meets at the edges (issue 20's defects, each reproduced on the code before this
file): a dead-end cohort, the --experiment hint, a synced copy without weights, status lines that
cannot be told apart, a closed pipe, the --remote gate's order, and a stopped eval's terminal."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from tests.support.helpers import checkpoint, git, snapshot_state


def _eval(monte, *args: str):
    return monte("eval", "--yes", "--json", *args)


def _err(r: Any) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(r.out)["error"]
    return doc


def test_an_interrupted_test0_says_the_cohort_cannot_train_and_how_to_go_on(repo: Path, monte, exp: str) -> None:
    from monte import api
    from monte.evals import start_row
    from monte.ledger.experiment import Ledger
    from monte.workspace import open_workspace

    assert _eval(monte).code == 0
    ws = open_workspace(repo)
    plan = api.plan_eval(split="test", ws=ws)
    # test@0 started by a process that is gone (stopped or crashed): the touch is spent, no score
    start_row(Ledger(ws.store, exp), plan, plan.exams[0],
              who={"host": socket.gethostname(), "pid": 2 ** 22 + 11, "proc_start": "0"})
    before = snapshot_state(repo)
    r = _eval(monte, "--split", "test")
    err = _err(r)
    assert r.code == 3 and err["code"] == "E_SEALED", r.out
    assert "cannot train" in err["message"] and "abandoned" in err["message"]
    assert "start a new cohort" in err["fix"] and "monte model init" in err["fix"]
    r = monte("train", "--recipe", "grpo-tiny", "--source", "parity", "--from-base", "--dry-run", "--json")
    err = _err(r)
    assert err["code"] == "E_NO_BASELINE" and "cannot train" in err["message"], r.out
    assert "start a new cohort" in err["fix"] and "evaluate the base model first" not in err["fix"]  # not circular
    assert snapshot_state(repo) == before


def test_every_command_that_names_an_experiment_takes_e(repo: Path, monte, exp: str, base_model: Path,
                                                        tmp_path: Path) -> None:
    assert monte("experiment", "init", "exp2", "--eval", "parity", "--model", str(base_model)).code == 0
    for args in (("status",), ("push",), ("plot", "--out", str(tmp_path / "p.png"))):
        r = monte(*args, "--json")
        assert r.code == 2 and "-e NAME" in _err(r)["fix"], r.out
    assert monte("status", "-e", "exp", "--json").code == 0
    assert monte("status", "--experiment", "exp2", "--json").json()["experiment"] == "exp2"
    assert monte("plot", "-e", "exp", "--out", str(tmp_path / "p.png"), "--json").code == 0
    assert monte("ledger", "verify", "-e", "exp", "--json").code == 0
    r = monte("status", "exp", "-e", "exp2", "--json")
    assert r.code == 2 and "two experiments" in _err(r)["message"]


def test_a_checkpoint_without_its_weights_here_is_not_found_not_tampered(repo: Path, monte, exp: str,
                                                                         tiny_models) -> None:
    a = checkpoint(repo, tiny_models[1])
    folder = repo / ".monte" / "runs" / "exp" / a / "checkpoints" / "step-50"
    (folder / "model.safetensors").unlink()  # what `monte sync` brings: the small files, never weights
    r = _eval(monte, "--checkpoint", f"{a}@50", "--dry-run")
    err = _err(r)
    assert r.code == 4 and err["code"] == "E_NOT_FOUND", r.out
    assert "not on this data root" in err["message"] and "never synced" in err["message"]
    (folder / "config.json").write_text("{}")  # bytes that are here but differ: that is tampering
    shutil_restore = tiny_models[1] / "model.safetensors"
    (folder / "model.safetensors").write_bytes(shutil_restore.read_bytes())
    assert _err(_eval(monte, "--checkpoint", f"{a}@50", "--dry-run"))["code"] == "E_INTEGRITY"


def test_status_lines_can_be_told_apart(repo: Path, monte, exp: str, tiny_models) -> None:
    assert "\ncycles:\n" in monte("status").out  # printed, empty, as the reference lists it
    a = checkpoint(repo, tiny_models[1])
    checkpoint(repo, tiny_models[2], parent=(a, 50))
    checkpoint(repo, tiny_models[3], parent=(a, 50))  # two continuations of one checkpoint, one move
    lines = [ln for ln in monte("status").out.splitlines() if ln.startswith("lineage:")]
    assert len(lines) == 2 and len(set(lines)) == 2, lines


def test_a_closed_pipe_ends_quietly_with_exit_0(repo: Path, exp: str, monte) -> None:
    """Issue 30.9: `monte status | head -1` exited 141, which fails a step under `set -o
    pipefail` (GitHub Actions' default shell). A reader that went away is a normal end: 0."""
    run = monte("eval", "--yes", "--json").json()["runs"][0]["run"]
    for args in (["status"], ["status", "--json"], ["eval", "--dry-run"], ["logs", run], ["show", run],
                 ["env", "list"], ["ledger", "verify"], ["--help"], ["env", "add", "--help"]):
        p = subprocess.Popen([sys.executable, "-c", "from monte.cli.main import main; main()", *args], cwd=repo,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=dict(os.environ))
        assert p.stdout is not None and p.stderr is not None
        p.stdout.close()  # the reader is gone before the first line (`| head -0`)
        err = p.stderr.read().decode()
        assert (p.wait(timeout=120), err) == (0, ""), args
    # as a CI step runs it: bash with pipefail, `head -1` reading one line of a longer output
    bin_dir = repo.parent / "bin"
    bin_dir.mkdir()
    (bin_dir / "monte").write_text(f'#!/bin/sh\nexec {sys.executable} -c "from monte.cli.main import main; main()" "$@"\n')
    (bin_dir / "monte").chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"}
    for line in ("monte status | head -1", f"monte logs {run} | head -1", "monte --help | head -1"):
        r = subprocess.run(["bash", "-o", "pipefail", "-c", line], cwd=repo, env=env, capture_output=True, text=True)
        assert r.returncode == 0 and len(r.stdout.splitlines()) == 1 and r.stderr == "", (line, r)


def test_remote_checks_the_clean_tree_gate_first(repo: Path, monte, exp: str) -> None:
    (repo / "scratch.txt").write_text("not committed\n")
    r = monte("eval", "--remote", "--provider", "ssh", "--host", "box.invalid", "--yes", "--json")
    err = _err(r)
    assert r.code == 3 and err["code"] == "E_REFUSED" and "not clean" in err["message"], r.out
    r = monte("train", "--recipe", "grpo-tiny", "--source", "parity", "--from-base", "--remote",
              "--provider", "ssh", "--host", "box.invalid", "--yes", "--json")
    assert _err(r)["code"] == "E_REFUSED" and "not clean" in _err(r)["message"], r.out


_WAIT = """
import os, sys, time
from pathlib import Path
import monte.models.generate as g
orig = g.generate
def generate(*a, **k):
    if len(a[2]) > 1:  # the run's generation, not the preflight's one prompt before `started`
        Path(os.environ["MONTE_TEST_READY"]).write_text("generating")
        time.sleep(120)
    return orig(*a, **k)
g.generate = generate
from monte.cli.main import main
main(sys.argv[1:])
"""


def test_a_stopped_eval_says_so_in_its_own_terminal(repo: Path, monte, exp: str, tmp_path: Path) -> None:
    ready = tmp_path / "ready"
    # generation is held at that one boundary (a stand-in for a long eval) so the stop lands mid-run
    p = subprocess.Popen([sys.executable, "-c", _WAIT, "eval", "--yes"], cwd=repo, text=True,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         env={**os.environ, "MONTE_TEST_READY": str(ready)})
    try:
        deadline = time.monotonic() + 240
        while not ready.exists():
            assert p.poll() is None and time.monotonic() < deadline, p.communicate()
            time.sleep(0.1)
        run = git(repo, "log", "-1", "--format=%(trailers:key=Monte-Run,valueonly)",
                  "refs/heads/monte/exp/ledger").strip()
        r = monte("stop", run, "--json")
        assert r.code == 0 and r.json()["signalled"] is True, r.out
        out, err = p.communicate(timeout=60)
    finally:
        if p.poll() is None:
            p.kill()
    assert p.returncode == 143, out + err
    assert f"run {run} was stopped" in err and "monte stop" in err and "its row reads abandoned" in err, err
    assert monte("show", run, "--json").json()["status"] == "abandoned"


def test_dataset_add_says_where_the_freeze_went_and_the_vault_list_has_its_columns(
        repo: Path, monte, tmp_path: Path) -> None:
    vault = tmp_path / "vault"
    vault.mkdir()
    assert monte("config", "set", "vault", str(vault)).code == 0
    rows = tmp_path / "rows.jsonl"
    rows.write_text('{"input": "p 1 =", "output": "odd"}\n{"input": "p 2 =", "output": "even"}\n')
    r = monte("dataset", "add", "tiny", "--from-file", str(rows), "--kind", "sft")
    assert r.code == 0 and f"pushed to the Vault {vault}" in r.out, r.out + r.err
    out = monte("dataset", "list", "--vault").out
    header = out.splitlines()[0] if out.splitlines()[0].startswith("name") else out.splitlines()[1]
    assert "fingerprint" in header and "complete" in header, out
    line = next(ln for ln in out.splitlines() if ln.startswith("tiny"))
    assert "\t-\t" not in line and "True" in line, line


# --- issue 30.11: small mismatches ---------------------------------------------------------------


def test_the_final_claims_plan_says_why_that_checkpoint_and_its_strike(repo: Path, monte, baselines: str,
                                                                       tiny_models) -> None:
    """On the code before, the claim's plan named the checkpoint and nothing else: not why it was
    chosen, nor that its dev verdict was STRIKE (other random weights score what the base does)."""
    a = checkpoint(repo, tiny_models[1])
    dev = monte("eval", "--checkpoint", f"{a}@50", "--yes", "--json").json()["runs"][0]
    assert dev["delta"]["verdict"] == "STRIKE", dev["delta"]
    before = snapshot_state(repo)
    lines = monte("eval", "--split", "test", "--dry-run").out.splitlines()
    chosen = next((ln for ln in lines if ln.strip().startswith("chosen:")), "")
    assert "best paired dev delta" in chosen and f"run {dev['run']}" in chosen, lines
    assert "STRIKE" in chosen and "not significant" in chosen, chosen
    assert monte("nominate", f"{a}@50").code == 0
    chosen = next(ln for ln in monte("eval", "--split", "test", "--dry-run").out.splitlines() if "chosen:" in ln)
    assert f"nominated with `monte nominate {a}@50`" in chosen and "STRIKE" in chosen, chosen
    assert snapshot_state(repo)["files"] == before["files"]


def test_env_list_available_says_when_nemo_gym_is_not_found(repo: Path, monkeypatch) -> None:
    from tests.support.helpers import monte_proc

    monkeypatch.delenv("MONTE_LOCAL", raising=False)
    monkeypatch.delenv("MONTE_NEMO_GYM_PYTHON", raising=False)
    r = monte_proc("env", "list", "--available", cwd=repo)
    assert r.returncode == 0 and "parity" in r.stdout
    from monte.envs.nemo import stack

    if stack.find() is not None:  # nemo_gym installed beside monte: found, nothing to say
        assert "NeMo Gym was not found" not in r.stderr
        return
    assert "NeMo Gym was not found (MONTE_LOCAL is not set)" in r.stderr and "MONTE_NEMO_GYM_PYTHON" in r.stderr
    r = monte_proc("env", "list", "--available", "--json", cwd=repo, env={"MONTE_LOCAL": str(repo / "no-gym")})
    assert r.returncode == 0 and isinstance(json.loads(r.stdout), list)  # stdout stays one document
    assert f"MONTE_LOCAL={repo / 'no-gym'} is not a folder" in r.stderr


_NO_MATPLOTLIB = """
import sys
class Gone:  # the light install: matplotlib is not there (the one import refused, nothing else)
    def find_spec(self, name, path=None, target=None):
        if name == "matplotlib" or name.startswith("matplotlib."):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
sys.meta_path.insert(0, Gone())
from monte.cli.main import main
main(sys.argv[1:])
"""


def test_plot_in_the_light_install_names_the_extras_pip_line(repo: Path, exp: str, tmp_path: Path) -> None:
    """On the code before: `pip install matplotlib`; the extra that brings it is `monte[train]`."""
    from monte.extras import pip_line

    r = subprocess.run([sys.executable, "-c", _NO_MATPLOTLIB, "plot", "--out", str(tmp_path / "p.png"), "--json"],
                       cwd=repo, capture_output=True, text=True, timeout=300)
    err = json.loads(r.stdout)["error"]
    assert r.returncode == 4 and err["code"] == "E_NOT_FOUND", r.stdout + r.stderr
    # the line for this installation (an editable checkout's own path here): the extra, never matplotlib alone
    assert "pip install" in err["fix"] and "[train]" in err["fix"] and "matplotlib" not in err["fix"], err
    assert "'train' extra" in err["message"] and pip_line("train").startswith("pip install"), err
    assert not (tmp_path / "p.png").exists()


def test_an_eval_of_a_named_model_says_it_scores_the_newest_checkpoint_and_how_to_score_the_base(
        repo: Path, monte, exp: str, base_model: Path, tiny_models: dict[int, Path]) -> None:
    """Issue 46.8: `monte eval --model M` scores the newest checkpoint of M's cohort (as documented),
    but the plan did not say so; a user who names a model expects that model."""
    a = checkpoint(repo, tiny_models[2])
    r = monte("eval", "--model", str(base_model), "--dry-run")
    assert r.code == 0, r.err
    chosen = next(line for line in r.out.splitlines() if line.strip().startswith("chosen:"))
    assert f"{a}@50" in r.out and "newest checkpoint" in chosen and "--step 0" in chosen, r.out
    r = monte("eval", "--model", str(base_model), "--step", "0", "--dry-run", "--json")
    assert r.json()["plan"]["target"]["kind"] == "base"
