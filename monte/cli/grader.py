from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from monte.cli.output import handled

if TYPE_CHECKING:
    from monte.api.shapes import GraderTaken


def _initialized(r: dict[str, Any]) -> None:
    click.echo(f"grader home: {r['home']} (mode 0700: only this account can enter it)")
    click.echo(f"public key (pin it in the repository):\n  {r['public_key']}")
    click.echo("  monte config set grader ssh://USER@HOST[:PORT] --key '" + r["public_key"] + "'")
    click.echo("authorized_keys line (replace AGENT_PUBLIC_KEY with the agent account's public key):")
    click.echo(f"  {r['authorized_keys']}")


@click.group()
def grader() -> None:
    """The sealed grader: test reads on another account, counted and signed there."""


@grader.command("init")
@click.argument("home", type=click.Path(path_type=Path))
@click.option("--threads", type=click.IntRange(min=1), metavar="N",
              help="CPU threads a read generates with (OMP_NUM_THREADS; default: torch's own, every core).")
@handled(_initialized)
def init(home: Path, threads: int | None) -> Any:
    """Make a grader home (run as the grader's account): its ledger of test reads, its signing key.

    Prints the public key a repository pins and the authorized_keys line that lets the agent's
    key start `monte grader serve` and nothing else.
    """
    from monte.grader import home as homes

    h = homes.init(home)
    command = f"{sys.executable} -m monte grader serve --home {h.root}" + (f" --threads {threads}" if threads else "")
    return {"home": str(h.root), "public_key": h.public_key(),
            "authorized_keys": f'command="{command}",restrict AGENT_PUBLIC_KEY'}


@grader.command("serve")
@click.option("--home", "home", type=click.Path(path_type=Path), required=True, help="The grader home.")
@click.option("--threads", type=click.IntRange(min=1), metavar="N", help="CPU threads a read generates with.")
def serve(home: Path, threads: int | None) -> None:
    """Answer one request on stdin/stdout (the forced command of the agent's key; never by hand)."""
    from monte.errors import MonteError
    from monte.grader import home as homes
    from monte.grader.server import serve as serve_one

    try:
        h = homes.open_home(home)
    except MonteError as e:
        sys.stdout.write(json.dumps({"error": {"code": e.code, "message": e.message, "fix": e.fix}}) + "\n")
        sys.exit(int(e.exit_code))
    sys.exit(serve_one(h, sys.stdin.buffer, sys.stdout.buffer, threads=threads))


def _taken(r: GraderTaken) -> None:
    for t in r.taken:
        if t.already:
            click.echo(f"{r.environment}/{t.exam}: not here (already in custody?)")
        else:
            click.echo(f"{r.environment}/{t.exam}: test split ({t.n} items) now held by {r.grader}")
    for p in r.removed:
        click.echo(f"  removed {p}")


@grader.command("take")
@click.argument("env")
@handled(_taken)
def take(env: str) -> Any:
    """Move an environment's test splits into the grader's custody and remove the local copies."""
    from monte import api

    return api.grader_take(env=env)
