from __future__ import annotations

from typing import Any

import click

from monte.cli import complete
from monte.cli.output import handled


@click.command()
@click.argument("checkpoint", metavar="RUN@STEP", shell_complete=complete.checkpoints)
@click.option("--experiment", "-e", metavar="EXP", help="Default: the only experiment.")
@handled(lambda r: click.echo(f"nominated {r.checkpoint} for the final claim of cohort {r.cohort}"))
def nominate(checkpoint: str, experiment: str | None) -> Any:
    """Name the checkpoint the final test claim scores (it must carry an admissible dev eval)."""
    from monte import api

    return api.nominate(ref=checkpoint, experiment=experiment)
