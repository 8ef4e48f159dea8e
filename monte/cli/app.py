"""The click group behind ``monte`` (:mod:`monte.cli.main` is the entry point): each command's
module is imported when the command is asked for."""

from __future__ import annotations

import importlib
import json
import sys
from typing import Any

import click

from monte import __version__
from monte.cli.commands import COMMANDS, EXAMPLES, EXIT_CODES, SHORT_HELP, SUB_EXAMPLES
from monte.cli.output import closed_pipe


class LazyGroup(click.Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(COMMANDS)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """click's list of commands, from :data:`SHORT_HELP` (importing each command's module
        for its help was most of ``monte --help``)."""
        limit = formatter.width - 6 - max(len(name) for name in COMMANDS)
        with formatter.section("Commands"):  # shortened as click shortens a command's own help
            formatter.write_dl([(name, click.Command(name, help=SHORT_HELP[name]).get_short_help_str(limit))
                                for name in COMMANDS])

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        target = COMMANDS.get(name)
        if target is None:
            return None
        module, attr = target.split(":")
        cmd: click.Command = getattr(importlib.import_module(module), attr)
        if name in EXAMPLES and not cmd.epilog:
            cmd.epilog = "\b\nExample:\n  " + EXAMPLES[name]
        if isinstance(cmd, click.Group):
            for sub_name, sub in cmd.commands.items():
                example = SUB_EXAMPLES.get(f"{name} {sub_name}")
                if example and not sub.epilog:
                    sub.epilog = "\b\nExample:\n  " + example
        return cmd


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]}, epilog=EXIT_CODES)
@click.version_option(__version__, prog_name="monte")
def cli() -> None:
    """monte keeps an honest, append-only record of post-training work, in git.

    Start with `monte init` in a git repository; see README.md for the whole loop.
    """


def run(args: list[str]) -> None:
    try:
        cli.main(args=args, prog_name="monte", standalone_mode=False)
    except click.exceptions.UsageError as e:  # includes NoSuchOption, BadParameter, MissingParameter
        if "--json" in args:
            where = e.ctx.command_path if e.ctx else "monte"
            msg: dict[str, Any] = {"code": "E_USAGE", "message": e.format_message(),
                                   "fix": f"see `{where} --help`", "exit_code": 2}
            click.echo(json.dumps({"error": msg}, indent=2, sort_keys=True))
        else:
            e.show()
        sys.exit(2)
    except click.exceptions.Abort:
        click.echo("aborted", err=True)
        sys.exit(130)
    except click.exceptions.Exit as e:
        sys.exit(e.exit_code)
    except BrokenPipeError:
        closed_pipe()




def help_text(width: int) -> str:
    """``monte --help`` as click prints it at ``width`` (what :mod:`monte.cli.helptext` keeps)."""
    ctx = cli.make_context("monte", [], resilient_parsing=True, terminal_width=width)
    return cli.get_help(ctx) + "\n"


def write_help() -> None:
    """Write :mod:`monte.cli.helptext` again: click's text at its width, one line a string."""
    from pathlib import Path

    from monte.cli import helptext

    here = Path(helptext.__file__)
    head = here.read_text().split("\nWIDTH = ", 1)[0]
    lines = "".join(f"    {line!r}\n" for line in help_text(helptext.WIDTH).splitlines(keepends=True))
    here.write_text(f"{head}\nWIDTH = {helptext.WIDTH}\nTEXT = (\n{lines})\n")


if __name__ == "__main__":  # pragma: no cover - the maintainer's writer
    if sys.argv[1:] == ["--write-help"]:
        write_help()
