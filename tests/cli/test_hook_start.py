"""The process every git hook starts (`monte ledger verify --updates [--local]`, monte/githooks/):
it judges without click, and a refusal reads exactly as click's command reports it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
import bulk_ledger  # noqa: E402 - the benchmarks' ledger builder: monte's own records

from monte.ledger.refs import ZERO  # noqa: E402

PROBE = ("import json, sys\nfrom monte.cli.main import main\ncode = 0\ntry:\n    main(sys.argv[1:])\n"
         "except SystemExit as e:\n    code = e.code\nprint(json.dumps([code, sorted(sys.modules)]), file=sys.stderr)\n")
CLICK = "import sys\nfrom monte.cli.app import run\nrun(sys.argv[1:])\n"  # the click command itself


@pytest.fixture(scope="module")
def ledger(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str, str]:
    repo = tmp_path_factory.mktemp("hook") / "repo"
    bulk_ledger.build(repo, mix="honest", records=12, bulk=False)
    ref = next(r for r in subprocess.run(["git", "for-each-ref", "--format=%(refname)", "refs/heads/monte/"], cwd=repo,
                                         capture_output=True, text=True, check=True).stdout.split()
               if r.endswith("/ledger"))
    tip, back = (subprocess.run(["git", "rev-parse", r], cwd=repo, capture_output=True, text=True, check=True).stdout.strip()
                 for r in (ref, f"{ref}~5"))
    return repo, ref, f"{back} {tip} {ref}\n"


def _hook(repo: Path, script: str, argv: list[str], stdin: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-P", "-c", script, *argv], cwd=repo, input=stdin, capture_output=True,
                          text=True, timeout=120, env={**__import__("os").environ, "MONTE_HOOK": "pre-push"})


@pytest.mark.parametrize("argv", [["ledger", "verify", "--updates"], ["ledger", "verify", "--updates", "--local"]])
def test_a_hook_judges_an_honest_push_without_click(ledger: tuple[Path, str, str], argv: list[str]) -> None:
    repo, _, update = ledger
    r = _hook(repo, PROBE, argv, update)
    code, mods = json.loads(r.stderr.strip().splitlines()[-1])
    assert code == 0 and r.stdout == "", r.stderr
    assert "click" not in {m.split(".")[0] for m in mods}  # every push and ref update pays this process's start


@pytest.mark.parametrize("stdin", ["{tip} {zero} {ref}\n", "{tip} {back} {ref}\n", "not three fields\n"])
def test_a_refused_update_reads_as_clicks_command_says_it(ledger: tuple[Path, str, str], stdin: str) -> None:
    repo, ref, update = ledger
    back, tip, _ = update.split()
    lines = stdin.format(tip=tip, back=back, zero=ZERO.decode(), ref=ref)
    argv = ["ledger", "verify", "--updates", "--local"]
    fast, slow = _hook(repo, PROBE, argv, lines), _hook(repo, CLICK, argv, lines)
    code = json.loads(fast.stderr.strip().splitlines()[-1])[0]
    assert code == slow.returncode != 0
    assert fast.stderr.rsplit("\n", 2)[0] + "\n" == slow.stderr and "E_" in slow.stderr  # the same words, the same exit
    assert fast.stdout == slow.stdout == ""
