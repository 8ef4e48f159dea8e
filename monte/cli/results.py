"""``monte push`` and ``monte sync``: the two directions of the results bucket."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from monte.cli import complete
from monte.cli.output import experiment_named, experiment_option, handled

if TYPE_CHECKING:
    from monte.api.shapes import Pushed, Synced


def _pushed(r: Pushed) -> None:
    what = f"run {r.run} of " if r.run else ""
    if not (r.packs or r.refs or r.files):
        click.echo(f"{what}{r.experiment}: the results bucket {r.bucket} is up to date (nothing uploaded)")
        return
    click.echo(f"pushed {what}{r.experiment} to {r.bucket}: {r.packs} pack(s), {r.refs} ref(s), "
               f"{r.files} file(s), {r.uploaded_bytes:,} bytes")
    if r.merged:
        click.echo("  the bucket had records this clone lacked: merged them into the local ledger (union)")


@click.command()
@click.argument("experiment", required=False, shell_complete=complete.experiments)
@experiment_option
@click.option("--run", metavar="R", help="Only this run's files (plus the experiment's ledger).")
@click.option("--bucket", metavar="B", help="gs://BUCKET[/PREFIX] or a folder (overrides config).")
@click.option("--key-file", type=click.Path(dir_okay=False), help="A GCS key file (first in the ladder).")
@handled(_pushed)
def push(experiment: str | None, experiment_opt: str | None, run: str | None, bucket: str | None,
         key_file: str | None) -> object:
    """Upload one experiment's results: new ledger objects and refs, new and changed run files.

    Never weights, never deletes anything in the bucket.
    """
    from monte import api

    return api.push(experiment=experiment_named(experiment, experiment_opt), run=run, bucket=bucket, key_file=key_file)


def _synced(r: Synced) -> None:
    if not r.experiments:
        click.echo(f"the results bucket {r.bucket} holds no experiments yet")
    for e in r.experiments:
        click.echo(f"{e.experiment}: ledger {e.ledger}, {e.packs} new pack(s), {e.files} file(s) "
                   f"updated" + (f", {e.skipped_weights} weight file(s) skipped" if e.skipped_weights else ""))
        if e.conflicts:
            click.echo(f"  refs kept as they are here (the bucket disagrees): {', '.join(e.conflicts)}")


@click.command()
@click.argument("experiments", nargs=-1, shell_complete=complete.experiments)
@click.option("--bucket", metavar="B", help="gs://BUCKET[/PREFIX] or a folder (overrides config).")
@click.option("--key-file", type=click.Path(dir_okay=False), help="A GCS key file (first in the ladder).")
@handled(_synced)
def sync(experiments: tuple[str, ...], bucket: str | None, key_file: str | None) -> object:
    """Pull the results bucket into read-only mirror refs and run folders (default: every
    experiment in it), and merge each mirrored ledger into the local one."""
    from monte import api

    return api.sync(experiments=list(experiments), bucket=bucket, key_file=key_file)
