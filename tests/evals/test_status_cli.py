"""`monte status`, `show`, `logs`, `stop`: what a user reads, from the ledger tip."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from monte.ledger.records import RunRow
from monte.ledger.rules import checkpoints as ck_of
from monte.status import LEGEND, descent_paths, render_path
from tests.support.helpers import checkpoint


def _train(run: str, seq: int, parent: tuple[str, int] | None, start: int, end: int, algo: str = "sft",
           source: str = "d", boundary: bool = False, extra: list[int] | None = None) -> RunRow:
    steps = [*(extra or []), end]
    return RunRow(run=run, experiment="e", kind="train", status="succeeded", seq=seq, cohort="c",
                  plan={"recipe": {"name": algo, "algorithm": algo}, "source": source,
                        "parent": {"run": parent[0], "step": parent[1]} if parent else None,
                        "start_step": start, "boundary": boundary},
                  checkpoints=[{"step": s, "commit": "0" * 40} for s in steps])


def _lines(rows: list[RunRow]) -> list[str]:
    return [render_path(p) for p in descent_paths(ck_of(rows))]


def test_lineage_notation_continuation_boundary_and_fork() -> None:
    rows = [
        _train("a", 1, None, 0, 50, "grpo", "demo"),
        _train("b", 2, ("a", 50), 50, 100, "distillation", "demo", boundary=True),
    ]
    # the documented example line (docs/commands.md, "Reading `monte status`")
    assert _lines(rows) == ["base -grpo:demo-> 50 =distillation:demo(+50)=> 100"]
    rows = [
        _train("a", 1, None, 0, 100, extra=[50]),  # one run saving at 50 and 100
        _train("b", 2, ("a", 100), 100, 150),
        _train("c", 3, ("a", 50), 50, 100, source="e"),  # a fork off the intermediate checkpoint
    ]
    assert _lines(rows) == ["base -sft:d-> 100 -sft:d-> 150", "base -sft:d-> 100 from 50 -sft:e-> 100"]


def test_lineage_unread_parent_truncates_the_path() -> None:
    rows = [_train("z", 5, ("gone", 50), 50, 100, "grpo", "env")]
    assert _lines(rows) == ["gone(unread) -grpo:env-> 100"]


def test_status_end_to_end(repo: Path, monte, baselines: str, tiny_models) -> None:
    a = checkpoint(repo, tiny_models[0], algorithm="sft", source="parity-sft")
    b = checkpoint(repo, tiny_models[1], parent=(a, 50), algorithm="grpo", source="parity", boundary=True)
    c = checkpoint(repo, tiny_models[2], parent=(a, 50), algorithm="sft", source="parity-sft")
    for ref in (f"{a}@50", f"{b}@100", f"{c}@100", f"{a}@50"):  # the second eval of a is a retry
        assert monte("eval", "--yes", "--checkpoint", ref).code == 0
    r = monte("status", "--wide")
    assert r.code == 0, r.err
    out = r.out
    # issue 30.11: the legend ends the line that crosses the boundary, as docs/commands.md prints it;
    # issue 46.7: in a tree of several paths each line ends with its leaf checkpoint
    lines = out.splitlines()
    assert f"lineage: base -sft:parity-sft-> 50 =grpo:parity(+50)=> 100  (leaf {b}@100) {LEGEND}" in lines
    assert f"lineage: base -sft:parity-sft-> 50 -sft:parity-sft-> 100  (leaf {c}@100)" in lines  # no legend
    assert LEGEND not in [ln.strip() for ln in lines]  # never on a line of its own
    folded = monte("status").out.splitlines()  # at the default width: every line under 120 columns
    assert max(map(len, folded)) < 120 and LEGEND not in [ln.strip() for ln in folded]
    assert any(ln.endswith(LEGEND) for ln in folded), folded
    cycles = next(line for line in out.splitlines() if line.startswith("cycles: "))
    # three cycles: a@50 once (shared prefix, retry not a new cycle), then each branch
    assert cycles.count("@") == 3 and f"{a}@50" in cycles and f"{b}@100" in cycles and f"{c}@100" in cycles
    assert all(v in ("ok", "STRIKE", "unjudged") for v in
               [part.split()[-1] for part in cycles.removeprefix("cycles: ").split(", ")])
    assert "checkpoints:" in out and f"{b}@100" in out
    assert "delta parity/dev" in out and "paired" in out
    doc = monte("status", "--json").json()
    assert len(doc["cycles"]) == 3 and len(doc["lineage"]) == 2
    assert doc["cohorts"][0]["test_touches"] == {"parity": 1}
    # a same-weights checkpoint pairs with the baseline exactly: delta 0, a strike
    same = next(c for c in doc["cycles"] if c["checkpoint"] == f"{a}@50")
    assert same["delta"] == 0.0 and same["verdict"] == "STRIKE"


def test_status_does_not_import_torch(repo: Path, monte, exp: str) -> None:
    monte("eval", "--yes")
    code = ("import sys\nfrom monte.cli.main import main\n"
            "try:\n    main(['status'])\nexcept SystemExit as e:\n    assert not e.code\n"
            "print('HEAVY=' + ','.join(m for m in ('torch', 'transformers', 'trl', 'dvc', 'fabric', "
            "'reasoning_gym', 'scipy') if m in sys.modules), file=sys.stderr)\n")
    r = subprocess.run([sys.executable, "-c", code], cwd=repo, capture_output=True, text=True)
    assert r.returncode == 0 and "HEAVY=\n" in r.stderr, r.stderr


def test_show_logs_and_unknown_run(repo: Path, monte, exp: str) -> None:
    run = monte("eval", "--yes", "--json").json()["runs"][0]["run"]
    shown = monte("show", run, "--json").json()
    assert shown["run"] == run and shown["plan"]["split_sha256"] and shown["host"]
    assert monte("show", f"exp/{run}", "--json").json()["run"] == run
    r = monte("logs", run)
    events = [json.loads(x)["event"] for x in r.out.splitlines()]
    assert events == ["started", "succeeded"]
    assert monte("show", "nosuchrun", "--json").json()["error"]["code"] == "E_NOT_FOUND"
    assert monte("logs", "nosuchrun").code == 4


def test_stop_marks_a_running_run_abandoned(repo: Path, monte, exp: str) -> None:
    # A real process that records a started eval, then waits (as a long eval would).
    code = ("import time\nfrom monte import api, evals\nfrom monte.ledger.experiment import Ledger\n"
            "from monte.workspace import open_workspace\nws = open_workspace()\n"
            "plan = api.plan_eval(ws=ws)\nrow = evals.start_row(Ledger(ws.store, plan.experiment), plan, plan.exams[0])\n"
            "print(row.run, flush=True)\ntime.sleep(120)\n")
    proc = subprocess.Popen([sys.executable, "-c", code], cwd=repo, stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        run = proc.stdout.readline().strip()
        assert monte("show", run, "--json").json()["status"] == "started"
        r = monte("stop", run, "--json")
        assert r.code == 0 and r.json()["status"] == "abandoned" and r.json()["signalled"] is True
        proc.wait(timeout=30)
        assert proc.returncode != 0  # the process was terminated
        assert monte("show", run, "--json").json()["status"] == "abandoned"
        assert monte("stop", run, "--json").code == 3  # nothing left to stop
    finally:
        if proc.poll() is None:
            proc.kill()


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_logs_follow_ends_with_the_run(repo: Path, monte, exp: str) -> None:
    run = monte("eval", "--yes", "--json").json()["runs"][0]["run"]
    start = time.monotonic()
    r = monte("logs", run, "--follow")
    assert r.code == 0 and time.monotonic() - start < 5
    assert json.loads(r.out.splitlines()[-1])["event"] == "succeeded"


def test_status_opens_with_the_final_claim_and_folds_at_120_columns(repo: Path, monte, baselines: str,
                                                                    tiny_models) -> None:
    """Issue 46.7: status did not headline the final claim (the quickstart does), and its
    per-exam line ran to ~250 characters."""
    a = checkpoint(repo, tiny_models[0], algorithm="sft", source="parity-sft")
    assert monte("eval", "--yes", "--checkpoint", f"{a}@50").code == 0
    assert monte("eval", "--yes", "--split", "test").code == 0  # the final claim: a@50
    lines = monte("status").out.splitlines()
    assert lines[0].startswith(f"final claim {a}@50 on parity/test: ") and "vs test@0 (n 200)" in lines[0], lines
    assert max(map(len, lines)) < 120, max(lines, key=len)
    wide = monte("status", "--wide").out.splitlines()
    assert max(map(len, wide)) >= 120 and len(wide) < len(lines)  # the exam's line whole


def test_status_shows_k_and_temperature_before_any_delta(repo: Path, monte, base_model: Path) -> None:
    """Issue 46.7: an experiment sampling K answers showed neither K nor its temperature until a
    delta named them."""
    assert monte("env", "add", "--server", "parity", "--dev", "parity", "--test", "parity").code == 0
    r = monte("experiment", "init", "k4", "--eval", "parity", "--model", str(base_model), "--samples", "4",
              "--temperature", "0.7")
    assert r.code == 0, r.err
    out = monte("status").out
    assert "K = 4 samples per item at temperature 0.7" in out.splitlines()[0], out
    assert monte("status", "--json").json()["sampling"] == {"samples": 4, "temperature": 0.7}


def test_a_running_chunk_shows_the_steps_it_trains(repo: Path, monte, exp: str, tiny_models) -> None:
    """Issue 46.7: a running 12 -> 16 chunk read `-> 12` in the runs table."""
    from monte.ledger.experiment import Ledger
    from monte.ledger.lineage import ensure_base, identify_base
    from monte.models.locate import locate
    from monte.training.record import start_chunk
    from monte.workspace import open_workspace

    a = checkpoint(repo, tiny_models[0], algorithm="sft", source="parity-sft", steps=12)
    ws = open_workspace(repo)
    where = locate(ws, Ledger(ws.store, "exp").measurement().model or "")
    assert where.folder is not None
    ident = identify_base(ws.store, "exp", where.folder)
    cohort, _ = ensure_base(ws.store, "exp", where.ref, ident.files, cohort=ident.cohort, weights=ident.weights,
                            folder=where.folder)
    plan = {"recipe": {"name": "sft-tiny", "sha256": "0" * 64, "algorithm": "sft"}, "source": "parity-sft",
            "parent": {"run": a, "step": 12}, "boundary": False, "start_step": 12, "steps": 4}
    row = start_chunk(ws, "exp", cohort=cohort, base_model=where.ref, plan=plan, smoke=False)
    line = next(ln for ln in monte("status").out.splitlines() if ln.startswith(row.run))
    assert "\t12 -> 16\t" in line, line
    line = next(ln for ln in monte("status").out.splitlines() if ln.startswith(a))
    assert "\t0 -> 12\t" in line, line
