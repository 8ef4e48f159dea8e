from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from monte.cli import complete
from monte.cli.output import experiment_named, experiment_option, handled

if TYPE_CHECKING:
    from monte.api.shapes import PlotWritten


def render_plot(r: PlotWritten) -> None:
    exams = ", ".join(f"{e}/dev" for e in r.exams) or "no dev exam"
    click.echo(f"wrote {r.path}: experiment {r.experiment}, {r.paths} lineage path(s), "
               f"{r.points} checkpoint point(s) ({exams})")
    if r.points:
        c = r.cycles
        click.echo(f"cycles: {c.get('ok', 0)} ok, {c.get('STRIKE', 0)} STRIKE"
                   + (f", {c['unjudged']} unjudged" if c.get("unjudged") else ""))
    click.echo(f"test reads: {r.test_reads}"
               + (f"; claim {', '.join(r.claims)}" if r.claims else ""))
    if r.note:
        click.echo(f"note: {r.note}")


@click.command()
@click.argument("experiment", required=False, shell_complete=complete.experiments)
@experiment_option
@click.option("--out", "out", required=True, type=click.Path(path_type=Path), metavar="FILE.png",
              help="Where to write the figure; .png, .svg or .pdf (the folder must exist).")
@handled(render_plot)
def plot(experiment: str | None, experiment_opt: str | None, out: Path) -> Any:
    """Draw each lineage's dev delta against step, with cycles and test reads.

    One line per descent path through its checkpoints' paired dev deltas vs the cohort
    baseline (95% intervals), from (0, 0) at the baseline; ok cycles green, STRIKEs a red x;
    test@0 and the final claim as vertical lines. With no checkpoint dev eval yet it still
    writes the figure, with a note saying so.
    """
    from monte import api

    return api.plot(experiment=experiment_named(experiment, experiment_opt), out=out)
