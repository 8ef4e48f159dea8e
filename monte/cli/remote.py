"""The ``--remote`` options shared by ``monte eval`` and ``monte train``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import click

from monte.errors import error


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


def check_remote(remote: bool, *, push: bool, dry_run: bool, provider: str, host: str | None) -> None:
    if not remote:
        if host or provider != "lambda":
            raise error("E_USAGE", "--provider and --host choose where --remote runs", "add --remote, or drop them")
        return
    if push:
        raise error("E_USAGE", "--remote already runs the box job with --push",
                    "drop --push: the box uploads its results after each transition")
    if dry_run:
        raise error("E_USAGE", "--remote submits real compute, so it has no dry run",
                    "run the same command without --remote and with --dry-run to see the plan")
    from monte import api

    api.remote_gate()  # the reproducibility gate first, as docs/remote.md lists the order


def raise_path_recipe(recipe: str) -> None:
    raise error("E_USAGE", f"--remote cannot take a path-spelled recipe ({recipe}): the box resolves recipes "
                "in its own checkout, where that file does not exist",
                "commit the file to recipes/ and name it bare (--recipe NAME)")


def submitted(r: dict[str, Any]) -> None:
    click.echo(f"submitted {', '.join(r['runs'])} to {r['box']} (tmux session {r['session']}, commit "
               f"{r['commit'][:12]})")
    click.echo(f"  watch it: monte sync {r['experiment']} && monte status {r['experiment']}")
