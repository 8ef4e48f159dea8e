"""Issue 43: a result ``monte recover`` recorded says so wherever the run is listed, and
``monte status`` says in its own words how far the local seal reaches.

On main ``recovered: true`` sat in ``row.json`` and ``monte show`` only: ``monte status`` (its
table and ``--json``) and the report listed a recovered read exactly like one its own process
finished. The kill is real (SIGKILL from inside the process right after it keeps its result);
the model, the grader and git are real.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

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


def _recovered_dev_read(repo: Path, monte) -> str:
    """A dev read killed after keeping its (stamped) result, then recorded by ``monte recover``."""
    p = subprocess.run([sys.executable, "-c", _KILL, "eval", "--yes", "--json"], cwd=repo, capture_output=True,
                       text=True, timeout=600, env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert p.returncode == -signal.SIGKILL, p.stdout + p.stderr
    r = monte("recover", "--json")
    assert r.code == 0, r.out
    (rec,) = r.json()
    assert rec["status"] == "succeeded"
    return str(rec["run"])


def test_status_and_the_report_mark_a_recovered_run(repo: Path, monte, exp: str) -> None:
    run = _recovered_dev_read(repo, monte)
    assert monte("eval", "--split", "test", "--yes").code == 0  # a read its own process finished
    doc = monte("status", "--json")
    assert doc.code == 0, doc.out + doc.err
    rows = {r["run"]: r for r in doc.json()["rows"]}
    assert rows[run]["recovered"] is True, rows[run]
    others = [r for k, r in rows.items() if k != run]
    assert others and all(r["recovered"] is False for r in others)
    text = monte("status").out  # the table off a terminal: tab-separated lines
    (line,) = [ln for ln in text.splitlines() if ln.startswith(run)]
    assert line.split("\t")[4] == "succeeded recovered", line
    assert not any("recovered" in ln for ln in text.splitlines() if not ln.startswith(run))
    from monte import report
    from monte.workspace import open_workspace

    runs = {r["run"]: r for r in report.collect(open_workspace(repo), exp)["runs"]}
    assert runs[run]["recovered"] is True and not any(r["recovered"] for k, r in runs.items() if k != run)
    out = repo.parent / "report.html"
    assert monte("report", "--out", str(out)).code == 0
    page = out.read_text()
    assert '"recovered"];' in page and 'r.recovered ? " recovered"' in page  # the runs table's status cell


def test_status_states_the_local_seals_reach() -> None:
    """The line ``monte status`` prints on a terminal (stderr) without a grader: what the local
    seal holds against and what only a grader on another account stops."""
    from monte.ledger.grader_statement import seal_line

    line = seal_line({})
    assert line.startswith("seal: local") and "\n" not in line
    assert "two test reads per content" in line and "record verified" in line and "weights measured" in line
    assert "can still read the split's file" in line and "monte grader init" in line
