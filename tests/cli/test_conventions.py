"""CLI conventions shared by every command: exit codes, --json, usage errors, fast start."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import click
import pytest

from monte.errors import CODES, Exit, MonteError, error

EXIT_CODES_PAGE = Path(__file__).resolve().parents[2] / "docs" / "exit-codes.md"


def _documented_exit_table() -> dict[str, int]:
    """The table of docs/exit-codes.md (the README links it): exit status -> its codes."""
    table: dict[str, int] = {}
    for line in EXIT_CODES_PAGE.read_text().splitlines():
        m = re.match(r"\|\s*(\d+)\s*\|[^|]*\|\s*([^|]*)\|", line)
        if m:
            for code in re.findall(r"E_[A-Z_]+", m.group(2)):
                table[code] = int(m.group(1))
    return table


def test_every_code_exits_with_its_documented_status() -> None:
    documented = _documented_exit_table()
    assert set(documented) == set(CODES), "docs/exit-codes.md's table and monte.errors.CODES differ"
    for code in CODES:
        e = error(code, "x", "y")
        assert isinstance(e, MonteError)
        assert int(e.exit_code) == documented[code], code


def test_families_have_distinct_exit_statuses() -> None:
    assert len({int(x) for x in Exit}) == len(Exit)
    assert Exit.OK == 0 and Exit.USAGE == 2


def test_json_error_is_one_document_with_code_message_fix(repo: Path, monte) -> None:
    r = monte("experiment", "init", "e1", "--eval", "nope", "--json")
    assert r.code == int(Exit.NOT_FOUND)
    doc = json.loads(r.out)  # exactly one JSON document, nothing else on stdout
    assert doc["error"]["code"] == "E_NOT_FOUND"
    assert "nope" in doc["error"]["message"]
    assert "monte env add" in doc["error"]["fix"]


def test_human_error_names_code_and_fix_on_stderr(repo: Path, monte) -> None:
    r = monte("experiment", "init", "e1", "--eval", "nope")
    assert r.code == 4
    assert r.out == ""
    assert r.err.startswith("E_NOT_FOUND: ")
    assert "fix:" in r.err


def test_usage_error_exits_2_and_json_usage_error_is_json(repo: Path, monte) -> None:
    r = monte("env", "add", "--no-such-flag")
    assert r.code == 2
    r = monte("env", "add", "--no-such-flag", "--json")
    assert r.code == 2
    assert r.json()["error"]["code"] == "E_USAGE"


def test_invalid_names_are_usage_errors(repo: Path, monte) -> None:
    for bad in ["a/b", "..", "a..b", "has space", "x" * 65, "-lead", "end.", "x.lock", "tab\tname"]:
        r = monte("env", "add", "--benchmark", "parity", "--as", bad, "--json")
        assert r.code == 2, bad
        assert r.json()["error"]["code"] == "E_INVALID_NAME", bad


def test_outside_a_git_repository_refuses(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, monte) -> None:
    monkeypatch.chdir(tmp_path)
    r = monte("env", "list", "--json")
    assert r.code == 3
    assert r.json()["error"]["code"] == "E_NOT_INITIALIZED"
    assert "git init" in r.json()["error"]["fix"]


def test_git_repo_without_monte_init_refuses(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, monte) -> None:
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    monkeypatch.chdir(tmp_path)
    r = monte("dataset", "list", "--json")
    assert r.json()["error"]["code"] == "E_NOT_INITIALIZED"
    assert "monte init" in r.json()["error"]["fix"]


def test_missing_data_root_refuses(repo: Path, monkeypatch: pytest.MonkeyPatch, monte) -> None:
    monkeypatch.setenv("MONTE_DATA_ROOT", str(repo / "does-not-exist"))
    r = monte("env", "list", "--json")
    assert r.code == 4
    err = r.json()["error"]
    assert err["code"] == "E_DATA_ROOT"
    assert "MONTE_DATA_ROOT" in err["fix"]
    assert not (repo / "does-not-exist").exists()


HEAVY = ["torch", "transformers", "trl", "dvc", "fabric", "reasoning_gym", "lm_eval"]


@pytest.mark.parametrize(
    "argv",
    [["--help"], ["env", "list"], ["dataset", "list"], ["experiment", "list"], ["config"],
     ["env", "--help"]],
)
def test_help_and_read_only_commands_import_nothing_heavy(repo: Path, argv: list[str]) -> None:
    code = (
        "import sys\n"
        "from monte.cli.main import main\n"
        "try:\n"
        f"    main({argv!r})\n"
        "except SystemExit as e:\n"
        "    assert not e.code, e.code\n"
        f"heavy = [m for m in {HEAVY!r} if m in sys.modules]\n"
        "print('HEAVY=' + ','.join(heavy), file=sys.stderr)\n"
    )
    r = subprocess.run([sys.executable, "-c", code], cwd=repo, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert "HEAVY=\n" in r.stderr, r.stderr


def test_plain_output_has_no_table_art_off_a_terminal(repo: Path, monte) -> None:
    r = monte("env", "list", "--available")
    assert r.code == 0
    lines = r.out.splitlines()
    assert lines[0].split("\t")[0] == "benchmark"
    assert all("│" not in ln and "─" not in ln for ln in lines)


# --- the plan / confirm step ------------------------------------------------------------------


@click.command()
@click.option("--yes", is_flag=True)
@click.option("--dry-run", is_flag=True)
def _spend(yes: bool, dry_run: bool) -> None:
    from monte.cli.output import confirm_plan

    try:
        go = confirm_plan(["plan: spend 1 GPU-hour"], yes=yes, dry_run=dry_run)
    except MonteError as e:
        click.echo(e.code)
        raise SystemExit(int(e.exit_code)) from None
    click.echo("SPENT" if go else "DRY")


def test_confirm_refuses_without_terminal_and_without_yes() -> None:
    from click.testing import CliRunner

    r = CliRunner().invoke(_spend, [])  # CliRunner's stdin is not a terminal
    assert r.exit_code == 2
    assert "E_CONFIRM_REQUIRED" in r.output and "SPENT" not in r.output


def test_confirm_yes_goes_ahead_and_dry_run_only_plans() -> None:
    from click.testing import CliRunner

    r = CliRunner().invoke(_spend, ["--yes"])
    assert r.exit_code == 0 and "plan: spend" in r.output and "SPENT" in r.output
    r = CliRunner().invoke(_spend, ["--dry-run"])
    assert r.exit_code == 0 and "plan: spend" in r.output and "DRY" in r.output


def test_a_mistyped_code_fails_the_type_check(tmp_path: Path) -> None:
    from mypy import api as mypy_api

    f = tmp_path / "typo.py"
    f.write_text("from monte.errors import error\n\nerror('E_SEELED', 'x')\nerror('E_SEALED', 'x')\n")
    out, _, rc = mypy_api.run([str(f), "--follow-imports=silent", "--no-error-summary", "--cache-dir", str(tmp_path / "c")])
    assert rc == 1
    assert "typo.py:3: error" in out and "typo.py:4" not in out


def test_ctrl_c_exits_130_and_its_json_error_says_so() -> None:
    import click
    from click.testing import CliRunner

    from monte.cli.output import handled

    @click.command()
    @handled()
    def interrupted() -> None:
        raise KeyboardInterrupt

    r = CliRunner().invoke(interrupted, ["--json"])
    doc = json.loads(r.stdout)["error"]
    assert r.exit_code == 130 == doc["exit_code"]
    assert doc["code"] == "E_INTERRUPTED"
