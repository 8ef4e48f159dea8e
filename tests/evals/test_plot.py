"""`monte plot` on a real ledger with a real tiny model: the figure, its counts, its refusals.

The command is invoked directly (``monte.cli.plot:plot`` through click's CliRunner), with the
cwd at the repository (the ``repo`` fixture chdirs there).
"""

from __future__ import annotations

import json
import re
import struct
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from monte.cli.plot import plot
from tests.support.helpers import checkpoint, snapshot_state

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
HEAVY = ["matplotlib", "torch", "transformers", "trl", "dvc", "fabric", "reasoning_gym"]


def _plot(*args: str) -> Result:
    return CliRunner().invoke(plot, list(args))


def _json(r: Result) -> Any:
    return json.loads(r.stdout)


def _eval(monte, *args: str) -> dict[str, Any]:
    r = monte("eval", "--yes", "--json", *args)
    assert r.code == 0, r.out + r.err
    row: dict[str, Any] = r.json()["runs"][0]
    return row


@pytest.fixture
def history(repo: Path, monte, baselines: str, tiny_models) -> dict[str, str]:
    """dev@0 and test@0; a -> b on one path and a => c as a branch (a stage boundary);
    a dev eval of each checkpoint; then the final claim."""
    a = checkpoint(repo, tiny_models[1])
    b = checkpoint(repo, tiny_models[2], parent=(a, 50))
    c = checkpoint(repo, tiny_models[3], parent=(a, 50), algorithm="grpo", source="parity",
                   recipe="grpo-tiny", boundary=True)
    for ref in (f"{a}@50", f"{b}@100", f"{c}@100"):
        _eval(monte, "--checkpoint", ref)
    claim = _eval(monte, "--split", "test")
    assert claim["role"] == "claim"
    t = claim["plan"]["target"]
    return {"a": a, "b": b, "c": c, "claim": f"{t['run']}@{t['step']}"}


def test_plot_draws_two_paths_with_cycles_and_the_claim(repo: Path, monte, history: dict[str, str]) -> None:
    from PIL import Image

    before = snapshot_state(repo)
    r = _plot("--out", "plot.png", "--json")
    assert r.exit_code == 0, r.output
    doc = _json(r)
    status = monte("status", "--json").json()
    assert doc["path"] == "plot.png" and doc["format"] == "png" and doc["experiment"] == "exp"
    assert doc["exams"] == ["parity"]
    assert doc["paths"] == 2 and doc["points"] == 3  # a, b and c; a is shared by both paths
    # status ends each of several paths with its leaf checkpoint; the plot's legend names the path
    assert sorted(doc["lineage"]) == sorted(re.sub(r"  \(leaf [^)]*\)$", "", x) for x in status["lineage"])
    assert any("=grpo:parity(+50)=> 100" in line for line in doc["lineage"])
    verdicts: dict[str, int] = {}
    for c in status["cycles"]:
        verdicts[c["verdict"]] = verdicts.get(c["verdict"], 0) + 1
    assert {k: v for k, v in doc["cycles"].items() if v} == verdicts
    assert sum(doc["cycles"].values()) == 3
    assert doc["test_reads"] == 2 and doc["claims"] == [history["claim"]]
    assert doc["note"] is None
    png = repo / "plot.png"
    raw = png.read_bytes()
    assert raw[:8] == PNG_SIGNATURE and len(raw) > 20_000
    width, height = struct.unpack(">II", raw[16:24])  # the IHDR chunk
    with Image.open(png) as im:
        im.verify()
    with Image.open(png) as im:
        assert im.format == "PNG" and im.size == (width, height)
        assert im.size[0] >= 900 and im.size[1] >= 500
    assert snapshot_state(repo) == before  # the plot reads the ledger; it writes nothing there
    assert not [p.name for p in repo.iterdir() if p.name.startswith(".plot.png.tmp")]

    r = _plot("--out", "out/fig.svg")  # the human form, and the other formats
    assert r.exit_code == 4
    (repo / "out").mkdir()
    r = _plot("exp", "--out", "out/fig.svg")
    assert r.exit_code == 0, r.output
    assert "2 lineage path(s), 3 checkpoint point(s)" in r.stdout
    assert f"claim {history['claim']}" in r.stdout
    assert b"<svg" in (repo / "out/fig.svg").read_bytes()[:2000]
    assert _plot("--out", "out/fig.PDF").exit_code == 0
    assert (repo / "out/fig.PDF").read_bytes()[:5] == b"%PDF-"


def test_no_checkpoint_dev_eval_still_writes_a_plot_with_a_note(repo: Path, monte, baselines: str) -> None:
    from PIL import Image

    r = _plot("--out", "empty.png", "--json")
    assert r.exit_code == 0, r.output
    doc = _json(r)
    assert doc["paths"] == 0 and doc["points"] == 0 and doc["test_reads"] == 1
    assert doc["note"] == "no checkpoint has a dev eval yet"
    with Image.open(repo / "empty.png") as im:
        assert im.format == "PNG" and im.size[0] >= 900
    r = _plot("--out", "empty.png")
    assert r.exit_code == 0 and "note: no checkpoint has a dev eval yet" in r.stdout


def test_refusals(repo: Path, monte, exp: str) -> None:
    before = snapshot_state(repo)
    for bad in ("plot.jpg", "plot", "plot.png.txt"):
        r = _plot("--out", bad, "--json")
        assert r.exit_code == 2, (bad, r.output)
        assert _json(r)["error"]["code"] == "E_USAGE"
        assert not (repo / bad).exists()
    r = _plot("--out", "no/such/folder/plot.png", "--json")
    assert r.exit_code == 4
    err = _json(r)["error"]
    assert err["code"] == "E_NOT_FOUND" and "no/such/folder" in err["message"]
    assert not (repo / "no").exists()
    r = _plot("--out", "no/plot.png")  # the human form names it on stderr
    assert r.exit_code == 4 and "E_NOT_FOUND" in r.stderr and "'no'" in r.stderr
    (repo / "dir.png").mkdir()
    assert _plot("--out", "dir.png", "--json").exit_code == 2
    r = _plot("ghost", "--out", "plot.png", "--json")
    assert r.exit_code == 4 and "ghost" in _json(r)["error"]["message"]
    assert _plot().exit_code == 2  # --out is required
    assert not (repo / "plot.png").exists()
    assert snapshot_state(repo) == before


def test_importing_the_command_loads_no_plotting_or_model_code() -> None:
    code = (
        "import sys\n"
        "import monte.cli.plot, monte.plot\n"
        f"heavy = [m for m in {HEAVY!r} if m in sys.modules]\n"
        "print('HEAVY=' + ','.join(heavy))\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "HEAVY=", r.stdout
