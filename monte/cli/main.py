"""``monte``: the entry point. Subcommands load lazily, so ``monte --help`` stays fast."""

from __future__ import annotations

import importlib
import json
import sys
from typing import Any

import click

from monte import __version__

# name -> "module:attribute"; each module imports only click and monte's light modules at import.
COMMANDS = {
    "init": "monte.cli.init:init",
    "config": "monte.cli.config:config",
    "env": "monte.cli.env:env",
    "dataset": "monte.cli.dataset:dataset",
    "experiment": "monte.cli.experiment:experiment",
    "model": "monte.cli.model:model",
    "eval": "monte.cli.eval:eval_",
    "nominate": "monte.cli.nominate:nominate",
    "status": "monte.cli.runs:status",
    "show": "monte.cli.runs:show",
    "logs": "monte.cli.runs:logs",
    "stop": "monte.cli.runs:stop",
    "recover": "monte.cli.runs:recover",
    "train": "monte.cli.train:train",
    "promote": "monte.cli.train:promote",
    "plot": "monte.cli.plot:plot",
    "quickstart": "monte.cli.quickstart:quickstart",
    "push": "monte.cli.results:push",
    "sync": "monte.cli.results:sync",
    "ledger": "monte.cli.ledger:ledger",
    "hooks": "monte.cli.ledger:hooks",
    "box": "monte.cli.box:box",
}


class LazyGroup(click.Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(COMMANDS)

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        target = COMMANDS.get(name)
        if target is None:
            return None
        module, attr = target.split(":")
        cmd: click.Command = getattr(importlib.import_module(module), attr)
        return cmd


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="monte")
def cli() -> None:
    """monte keeps an honest, append-only record of post-training work, in git.

    Start with `monte init` in a git repository; see README.md for the whole loop.
    """


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
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


if __name__ == "__main__":
    main()
