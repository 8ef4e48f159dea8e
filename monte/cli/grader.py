from __future__ import annotations

import json
import sys
from collections.abc import Sequence
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
    if r.get("nemo_gym"):
        click.echo(f"NeMo Gym exams: graded by the servers of NeMo Gym {r['nemo_gym']} (its forced command names it)")


@click.group()
def grader() -> None:
    """The sealed grader: test reads on another account, counted and signed there."""


@grader.command("init")
@click.argument("home", type=click.Path(path_type=Path))
@click.option("--threads", type=click.IntRange(min=1), metavar="N",
              help="CPU threads a read generates with (OMP_NUM_THREADS; default: torch's own, every core).")
@click.option("--nemo-gym", "nemo_gym", type=click.Path(path_type=Path, exists=True), metavar="PATH",
              help="The NeMo Gym its reads grade NeMo Gym exams with: a checkout (its .venv runs the servers) or "
                   "the python of a virtualenv with nemo-gym installed.")
@handled(_initialized)
def init(home: Path, threads: int | None, nemo_gym: Path | None) -> Any:
    """Make a grader home (run as the grader's account): its ledger of test reads, its signing key.

    Prints the public key a repository pins and the authorized_keys line that lets the agent's
    key start `monte grader serve` and nothing else.
    """
    from monte.grader import home as homes
    from monte.grader import nemo

    gym = nemo.stack_at(nemo_gym) if nemo_gym is not None else None  # refused before the home is made
    h = homes.init(home)
    command = f"{sys.executable} -m monte grader serve --home {h.root}" + (f" --threads {threads}" if threads else "")
    if nemo_gym is not None:  # sshd passes no environment: the forced command names it
        command += f" {nemo.OPTION} {nemo_gym.absolute()}"
    return {"home": str(h.root), "public_key": h.public_key(),
            "authorized_keys": f'command="{command}",restrict AGENT_PUBLIC_KEY',
            "nemo_gym": gym.version if gym is not None else None}


@grader.command("serve")
@click.option("--home", "home", type=click.Path(path_type=Path), required=True, help="The grader home.")
@click.option("--threads", type=click.IntRange(min=1), metavar="N", help="CPU threads a read generates with.")
@click.option("--nemo-gym", "nemo_gym", type=click.Path(path_type=Path), metavar="PATH",
              help="The NeMo Gym that grades NeMo Gym exams (a checkout, or a virtualenv's python).")
def serve(home: Path, threads: int | None, nemo_gym: Path | None) -> None:
    """Answer one request on stdin/stdout (the forced command of the agent's key; never by hand)."""
    from monte.errors import MonteError
    from monte.grader import home as homes
    from monte.grader import nemo
    from monte.grader.server import serve as serve_one

    nemo.use(nemo_gym)  # this process's and its workers' NeMo Gym: the forced command's, never a server URL

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
            if t.vault:
                click.echo(f"  the Vault keeps it encrypted to the grader's key: {t.vault}")
    for p in r.removed:
        click.echo(f"  removed {p}")
    if r.redrawable:  # not a refusal: the split moves, but its items are no secret
        click.echo(redrawable_warning(r.redrawable))


def redrawable_warning(exams: Sequence[str]) -> str:
    """What `grader take` and `experiment init` say of a split the catalog's public seed draws again."""
    return (f"warning: the test items of {', '.join(exams)} can be drawn again from the catalog's public seed, so "
            "custody keeps them from no one; for a split only the grader holds, freeze a new environment with the "
            "grader pinned (`monte env add --as NAME ...`)")


@grader.command("take")
@click.argument("env")
@handled(_taken)
def take(env: str) -> Any:
    """Move an environment's test splits into the grader's custody and remove the local copies."""
    from monte import api

    return api.grader_take(env=env)


def _restored(r: dict[str, Any]) -> None:
    for t in r["restored"]:
        click.echo(f"restored {t['exam']} ({t['n']} items, sha256 {t['content'][:12]}) from {r['vault']}")
    if r["held"]:
        click.echo(f"already held: {len(r['held'])} sealed split(s)")
    for p in r["passed"]:
        click.echo(f"passed over {p['content'][:12]}: {p['why']} ({p['code']}; {p['fix']})")


@grader.command("restore")
@click.argument("vault")
@click.option("--home", "home", type=click.Path(path_type=Path), required=True, help="The grader home.")
@handled(_restored)
def restore(vault: str, home: Path) -> Any:
    """Bring the sealed splits back from the Vault's encrypted copies (run as the grader's account).

    VAULT is the repository's Vault (gs://BUCKET/PREFIX or a folder; a bucket reads with
    MONTE_GCS_KEY_FILE). A copy is used only when its record is signed by this home's key and it
    decrypts with it to the content signed; the ledger of reads comes from the home's own backup.
    """
    from monte.grader import home as homes
    from monte.grader.restore import restore as restore_from

    return restore_from(homes.open_home(home), vault)
