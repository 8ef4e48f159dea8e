"""What each read-only command imports (issue 35): never torch, transformers, trl, lm_eval, dvc or
fabric, nor pydantic; `--help` not even click, nor any command's module.
Each runs in a fresh interpreter on a ledger of 30 runs (bench/bulk_ledger.py's status mix)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
import bulk_ledger  # noqa: E402 - the benchmarks' ledger builder: monte's own records
import status_10k  # noqa: E402

from monte.workspace import data_root_for  # noqa: E402

HEAVY = ("torch", "transformers", "trl", "lm_eval", "dvc", "fabric", "reasoning_gym", "accelerate", "vllm")
PROBE = ("import json, sys\nfrom monte.cli.main import main\ntry:\n    main(sys.argv[1:])\nexcept SystemExit as e:\n"
         "    assert not e.code, e.code\nprint(json.dumps(sorted(sys.modules)), file=sys.stderr)\n")


@pytest.fixture(scope="module")
def ledger30(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    repo = tmp_path_factory.mktemp("imports") / "repo"
    bulk_ledger.build(repo, mix="status", records=30, seed=0)
    doc = json.loads(subprocess.run([sys.executable, "-c", "from monte.cli.main import main; main()", "status",
                                     "--json"], cwd=repo, capture_output=True, check=True).stdout)
    run = doc["rows"][-1]["run"]
    events = repo / ".monte" / "runs" / status_10k.EXPERIMENT / run / "events.jsonl"
    events.parent.mkdir(parents=True, exist_ok=True)
    events.write_text('{"event": "started"}\n{"event": "succeeded"}\n')
    env = data_root_for(repo) / "environments" / "listed"  # one environment for `env list` to read
    env.mkdir(parents=True)
    (env / "manifest.json").write_text(json.dumps({
        "kind": "environment", "name": "listed", "env_kind": "eval-only", "form": "exams",
        "exams": {"e": {"dev": "dev.jsonl"}}, "files": {"dev.jsonl": {"sha256": "0" * 64, "size": 1}}}))
    return repo, run


def _imported(repo: Path, *argv: str) -> set[str]:
    r = subprocess.run([sys.executable, "-c", PROBE, *argv], cwd=repo, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    return set(json.loads(r.stderr.strip().splitlines()[-1]))


@pytest.mark.parametrize("argv", [["--help"], ["status"], ["status", "--json"], ["status", "--brief"],
                                  ["status", "--brief", "--json"], ["show", "RUN"], ["show", "RUN", "--json"],
                                  ["logs", "RUN"], ["logs", "RUN", "--json"], ["env", "list"],
                                  ["env", "list", "--json"], ["config"]])
def test_a_read_only_command_imports_only_what_it_needs(ledger30: tuple[Path, str], argv: list[str]) -> None:
    repo, run = ledger30
    argv = [run if a == "RUN" else a for a in argv]
    for kept in (False, True):  # the first read derives and keeps; the second reads what was kept
        mods = _imported(repo, *argv)
        tops = {m.split(".")[0] for m in mods}
        assert not tops & set(HEAVY), sorted(tops & set(HEAVY))
        assert "pydantic" not in tops  # ~50 ms of a process: the row and result models are for writers
        if argv[0] == "--help":  # click's text, kept: no click, no command's module
            assert "click" not in tops
            assert {m for m in mods if m.startswith("monte.")} <= {"monte.cli", "monte.cli.main", "monte.cli.commands",
                                                                  "monte.cli.helptext"}
        if kept and argv in (["status"], ["status", "--json"], [*argv[:1], run]):  # (monte.cli.reads: a pipe)
            assert not {"click", "monte.api", "monte.cli.app", "monte.cli.runs"} & mods, "without click"
            assert "pydantic" not in tops
        if argv[0] in ("show", "logs"):  # one row read: no status, no statistics
            assert not {"monte.status", "monte.stats.power", "monte.ledger.seal"} & mods
