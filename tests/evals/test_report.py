"""`monte report`: the page opened in a real headless Chromium (Debian's ``chromium``).

Two ledgers:

- a real one (the ``exp`` fixture's tiny model, real evals, checkpoints recorded through
  `monte.training.record`, a branch at a stage boundary, the final claim). Its differently-seeded untrained
  models answer nothing right, so no task flips between them;
- the benchmark's (``bench/report_scale.build``): monte's own records streamed into one git
  fast-import, a real frozen parity exam, with per-task scores drawn so that tasks flip (the
  paired deltas computed by ``monte.stats.paired`` as ``monte eval`` records them), and one
  training run whose parent run is not in the ledger (a truncated path). It is where clicking a
  cycle must show the flips its recorded delta counts.

The browser: ``tests/browser.py`` (a fresh profile, no background traffic, every request,
console message and page error kept). Screenshots stay in the test's tmp folder.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from monte.cli.report import report
from tests.browser import chromium, open_file
from tests.support.helpers import checkpoint, snapshot_state

ROOT = Path(__file__).resolve().parents[2]
HEAVY = ["torch", "transformers", "trl", "lm_eval", "dvc", "fabric", "matplotlib", "reasoning_gym"]


def _report(*args: str) -> Result:
    return CliRunner().invoke(report, list(args))


def _eval(monte, *args: str) -> dict[str, Any]:
    r = monte("eval", "--yes", "--json", *args)
    assert r.code == 0, r.out + r.err
    row: dict[str, Any] = r.json()["runs"][0]
    return row


@pytest.fixture
def history(repo: Path, monte, exp: str, tiny_models) -> dict[str, str]:
    """dev@0, test@0; a -> b and a => c (a stage boundary); a dev eval of each and a second of a
    (graded alike: its tasks.jsonl is the same git blob as the first's); the final claim."""
    _eval(monte)
    _eval(monte, "--split", "test")
    a = checkpoint(repo, tiny_models[1])
    b = checkpoint(repo, tiny_models[2], parent=(a, 50))
    c = checkpoint(repo, tiny_models[3], parent=(a, 50), algorithm="grpo", source="parity",
                   recipe="grpo-tiny", boundary=True)
    for ref in (f"{a}@50", f"{b}@100", f"{c}@100", f"{a}@50"):  # a twice: the same answers, one blob in git
        _eval(monte, "--checkpoint", ref)
    claim = _eval(monte, "--split", "test")
    assert claim["role"] == "claim"
    t = claim["plan"]["target"]
    return {"a": a, "b": b, "c": c, "claim": f"{t['run']}@{t['step']}"}


def test_the_page_of_a_real_ledger_in_chromium(repo: Path, monte, history: dict[str, str],
                                               tmp_path: Path) -> None:
    status = monte("status", "--json").json()
    before = snapshot_state(repo)
    r = _report("--out", "report.html", "--json")
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert doc["path"] == "report.html" and doc["checkpoints"] == 3 == len(status["checkpoints"])
    assert doc["claims"] == [history["claim"]]
    evals = [r for r in status["rows"] if r["kind"] == "eval" and r["status"] == "succeeded"]
    assert doc["evals"] == len(evals) == 7  # the two evals of a that share one blob both counted
    page = (repo / "report.html").read_bytes()
    assert doc["bytes"] == len(page)
    assert snapshot_state(repo) == before  # a view: the ledger, the data root and the vault as they were

    r = _report("exp", "--out", "again.html")  # made again from the same ledger: the same bytes
    assert r.exit_code == 0 and "3 checkpoints" in r.stdout, r.output
    assert (repo / "again.html").read_bytes() == page

    with chromium() as b:
        url = open_file(b, repo / "report.html")
        p = b.page
        assert p.locator("g.ck").count() == len(status["checkpoints"])
        assert sorted(p.locator("g.ck").evaluate_all("gs => gs.map(g => g.dataset.ref)")) == sorted(
            c["checkpoint"] for c in status["checkpoints"])
        assert p.locator("g.root").count() == 1  # one cohort, one base
        assert p.locator("g.unread").count() == 0
        assert p.locator("path.hop.boundary").count() == 1
        moves = p.locator("svg text.move").evaluate_all("ts => ts.map(t => t.textContent)")  # SVG: no innerText
        assert sorted(moves) == ["-sft:parity-sft->", "-sft:parity-sft->", "=grpo:parity=>"]  # a, b; c
        assert p.locator("tr.cycle").count() == len(status["cycles"]) == 3
        verdicts = p.locator("tr.cycle td.verdict").all_inner_texts()
        assert verdicts == [c["verdict"] for c in status["cycles"]]
        claim = p.locator("#claim").inner_text()
        assert f"final claim {history['claim']}" in claim and "selected by the rule" in claim
        assert "2 of 2" in p.locator("#budget").inner_text()
        p.wait_for_function("document.body.dataset.runs === 'shown'")
        runs = p.locator("#runrows tr")
        assert runs.count() == len(status["rows"])
        assert "sft-tiny" in p.locator("#runrows").inner_text()

        first = status["cycles"][0]
        p.locator('tr.cycle[data-cycle="0"]').click()
        p.wait_for_function("document.getElementById('flipsum').textContent.includes('fixed')")
        assert p.locator("#base option").count() == 5  # the dev evals: dev@0, a, b, c and a again
        delta = next(d for d in status["deltas"] if d["run"] == first["eval"])
        assert p.locator("tr.flip-row").count() == delta["fixed"] + delta["broken"]
        assert f"{delta['fixed']} fixed, {delta['broken']} broken of 200 tasks" in p.locator("#flipsum").inner_text()
        p.screenshot(path=str(tmp_path / "report-real.png"), full_page=True)
        assert b.console_errors() == []
        assert b.requests == [url]
    assert (tmp_path / "report-real.png").stat().st_size > 10_000


@pytest.fixture
def flipping(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The benchmark's ledger of 40 runs, as the cwd."""
    monkeypatch.syspath_prepend(str(ROOT / "bench"))
    from report_scale import build

    repo = tmp_path / "flips"
    build(repo, 40, seed=3, unread=True)
    monkeypatch.chdir(repo)
    return repo


def test_clicking_a_cycle_shows_its_flips_and_they_are_searchable(flipping: Path, monte, tmp_path: Path) -> None:
    status = monte("status", "--json").json()
    r = _report("--out", "report.html")
    assert r.exit_code == 0, r.output
    deltas = {d["run"]: d for d in status["deltas"]}
    with chromium() as b:
        url = open_file(b, flipping / "report.html")
        p = b.page
        assert p.locator("g.ck").count() == len(status["checkpoints"]) > 5
        unread = p.locator("g.unread")
        text = unread.text_content() or ""
        assert unread.count() == 1 and "gone0unread0@50" in text and "(unread)" in text
        assert any(line.startswith("gone0unread0(unread) ") for line in status["lineage"])
        for i in (len(status["cycles"]) - 1, 0):  # the last cycle, then the first: each its own flips
            cyc = status["cycles"][i]
            d = deltas[cyc["eval"]]
            assert d["fixed"] + d["broken"] > 0
            p.locator(f'tr.cycle[data-cycle="{i}"]').click()
            p.wait_for_function(f"document.getElementById('flipsum').textContent.startsWith("
                                f"document.getElementById('base').value + ' → {cyc['eval']}')")
            assert p.locator("#cand").input_value() == cyc["eval"]
            assert p.locator("tr.flip-row.fixed").count() == d["fixed"]
            assert p.locator("tr.flip-row.broken").count() == d["broken"]
            assert f"fixed {d['fixed']}, broken {d['broken']}" in p.locator("#flipsum").inner_text()
        row = p.locator("tr.flip-row").first
        task, prompt = row.locator("td").nth(0).inner_text(), row.locator("td").nth(2).inner_text()
        assert prompt.startswith("p ")  # the frozen split's prompt, from the data root
        p.fill("#search", task)
        assert p.locator("tr.flip-row:not([hidden])").count() == 1
        p.fill("#search", "")
        assert p.locator("tr.flip-row:not([hidden])").count() == p.locator("tr.flip-row").count()
        # a checkpoint of the tree with a cycle: its click shows that cycle's flips too
        ref = status["cycles"][1]["checkpoint"]
        p.locator(f'g.ck[data-ref="{ref}"]').click()
        p.wait_for_function(f"document.getElementById('cand').value === '{status['cycles'][1]['eval']}'")
        p.screenshot(path=str(tmp_path / "report-flips.png"))
        assert b.console_errors() == []
        assert b.requests == [url]
    assert (tmp_path / "report-flips.png").stat().st_size > 10_000


def test_refusals_write_nothing(repo: Path, monte, exp: str) -> None:
    before = snapshot_state(repo)
    for bad in ("report.png", "report", "report.html.txt"):
        r = _report("--out", bad, "--json")
        assert r.exit_code == 2, (bad, r.output)
        assert json.loads(r.stdout)["error"]["code"] == "E_USAGE"
        assert not (repo / bad).exists()
    r = _report("--out", "no/such/folder/report.html", "--json")
    assert r.exit_code == 4
    err = json.loads(r.stdout)["error"]
    assert err["code"] == "E_NOT_FOUND" and "no/such/folder" in err["message"] and "mkdir -p" in err["fix"]
    r = _report("ghost", "--out", "report.html", "--json")
    assert r.exit_code == 4 and "ghost" in json.loads(r.stdout)["error"]["message"]
    assert not (repo / "report.html").exists()
    assert snapshot_state(repo) == before


def test_report_imports_nothing_heavy(repo: Path, exp: str) -> None:
    code = ("import sys\nfrom monte.cli.main import main\ntry:\n    main(['report', '--out', 'r.html'])\n"
            "except SystemExit:\n    pass\n"
            f"print('HEAVY=' + ','.join(m for m in {HEAVY!r} if m in sys.modules))\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=repo)
    assert r.returncode == 0, r.stderr
    assert "wrote r.html" in r.stdout and r.stdout.strip().endswith("HEAVY="), r.stdout + r.stderr


def test_tree_layout_draws_branches_boundaries_and_unread_parents() -> None:
    """The layout alone, from checkpoints as ``monte status --json`` lists them: base -> a -> b,
    a => c (a branch at a stage boundary), a run x of two checkpoints, and d off a run not here."""
    from monte.report import tree_layout

    def ck(ref: str, parent: str, move: str = "sft:d", boundary: bool = False) -> dict[str, Any]:
        return {"checkpoint": ref, "cohort": "c0", "move": move, "recipe": "r", "parent": parent,
                "boundary": boundary, "dev": {}}

    cks = [ck("a@50", "base"), ck("b@100", "a@50"), ck("c@100", "a@50", "grpo:env", True),
           ck("x@150", "b@100"), ck("x@200", "b@100"), ck("d@100", "gone@50")]
    lay = tree_layout(cks)
    kinds = {n["id"]: n["kind"] for n in lay["nodes"]}
    assert kinds == {"base:c0": "base", "a@50": "ck", "b@100": "ck", "c@100": "ck", "x@150": "ck",
                     "x@200": "ck", "gone@50": "unread", "d@100": "ck"}
    edges = {(e["from"], e["to"]): (e["move"], e["boundary"]) for e in lay["edges"]}
    assert edges == {("base:c0", "a@50"): ("sft:d", False), ("a@50", "b@100"): ("sft:d", False),
                     ("a@50", "c@100"): ("grpo:env", True), ("b@100", "x@150"): ("sft:d", False),
                     ("x@150", "x@200"): (None, False),  # a run's own next checkpoint: no new move
                     ("gone@50", "d@100"): ("sft:d", False)}
    pos = lay["pos"]
    assert len(set(pos.values())) == len(pos)  # no two nodes drawn on one spot
    assert pos["b@100"][0] == pos["c@100"][0] == pos["a@50"][0] + 1 and pos["b@100"][1] != pos["c@100"][1]
    assert pos["a@50"][1] == pos["b@100"][1]  # a parent sits on its first child's row
    assert lay["rows"] == 3  # leaves: x@200, c@100, d@100


def test_the_wheel_ships_the_pages_style_and_script(light_wheel: Path) -> None:
    """The page's style sheet and script are package data: a wheel of this tree holds them, the
    bytes the page inlines."""
    import zipfile

    from monte.report import page_part

    with zipfile.ZipFile(light_wheel) as z:
        shipped = {n: z.read(n).decode("utf-8") for n in z.namelist() if n.startswith("monte/page/")}
    assert shipped == {"monte/page/report.css": page_part("report.css"), "monte/page/report.js": page_part("report.js")}


#: in the page: each section's top (px from the page's top), how many lineage lines show, and per
#: runs-table column the rows whose text breaks over more than one line
_LAYOUT = """() => {
  const top = (id) => Math.round(document.getElementById(id).getBoundingClientRect().top + scrollY);
  const wrapped = {};
  for (const tr of document.querySelectorAll('#runrows tr')) {
    tr.querySelectorAll('td').forEach((td, i) => {
      const r = document.createRange(); r.selectNodeContents(td);
      if (new Set([...r.getClientRects()].map((x) => Math.round(x.top))).size > 1) wrapped[i] = (wrapped[i] || 0) + 1;
    });
  }
  const shown = [...document.querySelectorAll('#lineage li')].filter((li) => li.checkVisibility()).length;
  return {budget: top('budget'), lineage: top('lineage'), shown, wrapped};
}"""


def test_a_long_search_keeps_the_test_reads_on_the_first_screen_and_ids_whole(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 46.9, at 300 runs (1,000 in the issue): the test reads sat ~8,000 px down, under
    every lineage line and cycle row, and the runs table broke "200" into "20 / 0" and run ids
    mid-id at 1400 px wide. Now the test reads follow the final claim, the lineage lines fold
    (the tree draws them), a long cycles table scrolls in its box, and ids, n, scores, shas and
    times never break: only paths and names wrap."""
    monkeypatch.syspath_prepend(str(ROOT / "bench"))
    from report_scale import build

    repo = tmp_path / "long"
    build(repo, 300, seed=3)  # 9 lineage lines, 60 cycles
    monkeypatch.chdir(repo)
    assert _report("--out", "report.html").exit_code == 0
    with chromium(1400, 1000) as b:
        open_file(b, repo / "report.html")
        p = b.page
        p.wait_for_function("document.body.dataset.runs === 'shown'")
        layout = p.evaluate(_LAYOUT)
        assert layout["budget"] < 1000 and layout["budget"] < layout["lineage"], layout  # the first screen
        assert "of 2" in p.locator("#budget").inner_text()
        assert layout["shown"] == 0  # folded ...
        p.locator("details.paths summary").click()
        assert p.evaluate(_LAYOUT)["shown"] > 8  # ... and there on a click
        cols = p.locator("table.runs th").all_inner_texts()
        never = {cols.index(c) for c in ("run", "kind", "status", "score", "n", "recipe sha256", "commit", "host",
                                         "created")}
        assert {int(i) for i in layout["wrapped"]} & never == set(), (layout["wrapped"], cols)
        assert p.locator("#runrows tr").count() == 300
        assert b.console_errors() == []
