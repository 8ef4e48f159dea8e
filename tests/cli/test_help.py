"""Help that carries its own examples and the exit codes, and shell completion from the record."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from monte.cli.main import COMMANDS
from monte.errors import Exit


def test_monte_help_lists_every_exit_status(monte) -> None:
    out = monte("--help").out
    section = out.split("Exit codes:", 1)[1]
    for code in Exit:
        assert f"{int(code)} " in section, code


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_every_command_help_has_an_example(monte, name: str) -> None:
    r = monte(name, "--help")
    assert r.code == 0
    assert "Example:" in r.out and f"monte {name}" in r.out.split("Example:", 1)[1]


def _complete(repo: Path, words: str) -> list[str]:
    env = {**os.environ, "_MONTE_COMPLETE": "bash_complete", "COMP_WORDS": words,
           "COMP_CWORD": str(len(words.split()) if words.endswith(" ") else len(words.split()) - 1)}
    r = subprocess.run([sys.executable, "-c", "from monte.cli.main import cli; cli(prog_name='monte')"],
                       cwd=repo, env=env, capture_output=True, text=True, timeout=60)
    return [line.split(",", 1)[1] for line in r.stdout.splitlines() if "," in line]


def test_completion_offers_checkpoints_runs_experiments_and_recipes(repo: Path, monte, tiny_models,
                                                                    base_model: Path) -> None:
    from tests.support.helpers import checkpoint

    assert monte("env", "add", "--server", "parity", "--dev", "parity", "--test", "parity").code == 0
    assert monte("experiment", "init", "exp", "--eval", "parity", "--model", str(base_model)).code == 0
    a = checkpoint(repo, tiny_models[1])
    assert f"{a}@50" in _complete(repo, "monte eval --checkpoint ")
    assert a in _complete(repo, "monte show ")
    assert _complete(repo, "monte status ") == ["exp"]
    assert "sft-tiny" in _complete(repo, "monte train --recipe ")
    assert "parity" in _complete(repo, "monte experiment init x --eval ")


def test_completion_reads_the_line_it_completes(repo: Path, monte, tiny_models, base_model: Path) -> None:
    """Issue 46.12: completion ignored -e, offered eval-only environments as --source, and
    completed nothing after `logs EXP/` or `--model `; logs, show, stop and rerun took no -e."""
    from tests.support.helpers import checkpoint

    assert monte("env", "add", "--server", "parity", "--dev", "parity", "--test", "parity").code == 0
    assert monte("env", "add", "--benchmark", "parity", "--as", "exams-only").code == 0
    for exp in ("exp", "other"):
        assert monte("experiment", "init", exp, "--eval", "parity", "--model", str(base_model)).code == 0
    a = checkpoint(repo, tiny_models[1])
    b = checkpoint(repo, tiny_models[2], experiment="other")
    assert f"{a}@50" in _complete(repo, "monte eval -e exp --checkpoint ")
    assert f"{b}@50" not in _complete(repo, "monte eval -e exp --checkpoint ")
    assert _complete(repo, "monte logs other/") == [f"other/{b}"]
    sources = _complete(repo, "monte train --source ")
    assert "parity" in sources and "exams-only" not in sources
    models = _complete(repo, "monte eval --model ")  # the base model the experiments record
    assert models and all(monte("eval", "-e", "exp", "--model", m, "--dry-run").code == 0 for m in models), models
    for command in ("show", "logs", "stop", "rerun"):
        assert monte(command, "--help").out.count("-e, --experiment") == 1, command
    r = monte("show", b, "-e", "other", "--json")
    assert r.code == 0 and r.json()["run"] == b, r.out


def _subcommands() -> list[tuple[str, str]]:
    import click

    from monte.cli.main import cli

    ctx = click.Context(cli)
    out = []
    for name in COMMANDS:
        cmd = cli.get_command(ctx, name)
        if isinstance(cmd, click.Group):
            out += [(name, sub) for sub in cmd.commands]
    return out


@pytest.mark.parametrize(("group", "sub"), _subcommands())
def test_every_subcommand_help_ends_with_an_example_that_parses(monte, group: str, sub: str) -> None:
    """Issue 30.10: 17 subcommands (env add/list/install, dataset add/list/show, ...) ended their
    --help with no example. Each example is a command line the subcommand's own parser accepts."""
    import shlex

    import click

    from monte.cli.main import cli

    r = monte(group, sub, "--help")
    assert r.code == 0
    tail = r.out.rstrip().split("Example:")
    assert len(tail) == 2 and tail[1].strip().startswith(f"monte {group} {sub}"), r.out
    example = shlex.split(tail[1].strip().splitlines()[0], comments=True)
    cmd = cli.get_command(click.Context(cli), group)
    assert isinstance(cmd, click.Group)
    cmd.commands[sub].make_context(f"monte {group} {sub}", example[3:])  # raises on an option it lacks


def test_env_install_and_dataset_show_complete_the_frozen_names(repo: Path, monte) -> None:
    """Issue 30.10: `monte env install <TAB>` and `monte dataset show <TAB>` completed nothing."""
    assert monte("env", "add", "--server", "parity", "--dev", "parity", "--test", "parity").code == 0
    rows = repo / "rows.jsonl"
    rows.write_text('{"input": "1 0", "output": " 1"}\n')
    assert monte("dataset", "add", "tiny-sft", "--from-file", str(rows), "--kind", "sft").code == 0
    assert _complete(repo, "monte env install ") == ["parity"]
    assert _complete(repo, "monte env install pa") == ["parity"]
    assert _complete(repo, "monte dataset show ") == ["tiny-sft"]


def test_the_command_list_is_each_command_s_own_short_help() -> None:
    """`monte --help` lists the commands from SHORT_HELP, without importing them (issue 35):
    each line is what click makes of the command's own help, at any width."""
    import click

    from monte.cli.main import SHORT_HELP, LazyGroup, cli

    assert list(SHORT_HELP) == list(COMMANDS)
    ctx = click.Context(cli)
    for name in COMMANDS:
        cmd = cli.get_command(ctx, name)
        assert cmd is not None
        for limit in (30, 45, 70, 200):
            assert click.Command(name, help=SHORT_HELP[name]).get_short_help_str(limit) == \
                cmd.get_short_help_str(limit), name
    for width in (50, 80, 120):
        ours, theirs = click.HelpFormatter(width=width), click.HelpFormatter(width=width)
        cli.format_commands(ctx, ours)
        click.Group.format_commands(cli, ctx, theirs)  # click's own: every command imported
        assert ours.getvalue() == theirs.getvalue()
    assert issubclass(type(cli), LazyGroup)


def test_the_kept_top_level_help_is_click_s_own_text() -> None:
    """`monte --help` prints monte.cli.helptext's text without importing click (issue 35): it is
    what click prints at that width (else write it again: `python -m monte.cli.app --write-help`)."""
    from monte.cli import helptext
    from monte.cli.app import help_text

    assert helptext.TEXT == help_text(helptext.WIDTH), "run `python -m monte.cli.app --write-help`"


@pytest.mark.parametrize("columns", [None, "200", "80", "79", "60", "30"])
@pytest.mark.parametrize("flag", ["--help", "-h"])
def test_monte_help_is_click_s_at_every_width(flag: str, columns: str | None) -> None:
    """Kept (a pipe, 80 columns or more) or through click (a narrower terminal): the same text
    as click's own group prints, at every width."""
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}
    if columns is not None:
        env["COLUMNS"] = columns
    probe = ("import sys\nfrom monte.cli.main import main\nmain(sys.argv[1:])\n"
             "print('click' in sys.modules, file=sys.stderr)")
    ours = subprocess.run([sys.executable, "-c", probe, flag], env=env, capture_output=True, text=True, timeout=60)
    theirs = subprocess.run([sys.executable, "-c", "from monte.cli.app import cli; cli(prog_name='monte')", flag],
                            env=env, capture_output=True, text=True, timeout=60)
    assert ours.returncode == theirs.returncode == 0, ours.stderr + theirs.stderr
    assert ours.stdout == theirs.stdout
    narrow = columns is not None and int(columns) < 80
    assert ours.stderr.strip().splitlines()[-1] == str(narrow)  # click only where the kept text is not its
