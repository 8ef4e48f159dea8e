"""The ``--remote`` options shared by ``monte eval`` and ``monte train`` (their rules:
:mod:`monte.api.remote`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import click

if TYPE_CHECKING:
    from monte.api.shapes import Submitted


def remote_options(f: Callable[..., Any]) -> Callable[..., Any]:
    for opt in reversed([
        click.option("--remote", is_flag=True,
                     help="Submit the run to a GPU box and return (the box pushes its results)."),
        click.option("--provider", type=click.Choice(["lambda", "ssh"]), default="lambda", show_default=True,
                     help="Where --remote runs: a Lambda box, or any SSH host (--host)."),
        click.option("--host", metavar="[USER@]HOST[:PORT]", help="The SSH box (--provider ssh)."),
        click.option("--ssh-key", metavar="PATH", help="The SSH private key for the box (default: MONTE_SSH_KEY_FILE)."),
    ]):
        f = opt(f)
    return f


def submitted(r: Submitted) -> None:
    click.echo(f"submitted {', '.join(r.runs)} to {r.box} (tmux session {r.session}, commit {r.commit[:12]})")
    click.echo(f"  watch it: monte sync {r.experiment} && monte status {r.experiment}")
