"""``monte mcp``: serve the loop's verbs to an agent over stdio (:mod:`monte.mcp`)."""

from __future__ import annotations

from typing import Any

import click

from monte.cli.output import handled


@click.command()
@click.option("--read-only", is_flag=True, help="List no tool that writes to the record.")
@click.option("--allow-test", is_flag=True,
              help="Serve the sealed test tools (test_baseline, claim): each spends one of the cohort's two reads.")
@handled()
def mcp(read_only: bool, allow_test: bool) -> Any:
    """Serve this repository's loop to an agent: a Model Context Protocol server over stdio.

    Register it with an agent client as the command `monte mcp` run in the repository
    (docs/agents.md). Nothing but the protocol is written to stdout.
    """
    from monte.errors import error

    if read_only and allow_test:
        raise error("E_USAGE", "--allow-test serves tools that spend the test split, and --read-only serves none "
                    "that write", "pass one of them")
    import sys

    if not (hasattr(sys.stdin, "buffer") and hasattr(sys.stdout, "buffer")):
        raise error("E_USAGE", "monte mcp speaks the Model Context Protocol on its standard input and output, "
                    "and here they are not streams it can serve", "start it from an agent client, as the command "
                    "`monte mcp` run in the repository (docs/agents.md)")
    from monte.mcp.server import serve

    serve(read_only=read_only, allow_test=allow_test)
    return None
