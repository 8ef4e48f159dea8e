from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from monte.cli import complete
from monte.cli.output import experiment_named, experiment_option, handled

if TYPE_CHECKING:
    from monte.api.shapes import ReportWritten


def render_report(r: ReportWritten) -> None:
    c = r.cycles
    click.echo(f"wrote {r.path} ({r.bytes / 1e3:.0f} kB): experiment {r.experiment}, {r.runs} runs, "
               f"{r.checkpoints} checkpoints, {r.evals} evals with per-task results")
    click.echo(f"cycles: {c.get('ok', 0)} ok, {c.get('STRIKE', 0)} STRIKE, {c.get('unjudged', 0)} unjudged"
               + (f"; claim {', '.join(r.claims)}" if r.claims else ""))
    click.echo("open it in any browser: it is one file and requests nothing")


@click.command()
@click.argument("experiment", required=False, shell_complete=complete.experiments)
@experiment_option
@click.option("--out", "out", default="report.html", show_default=True, type=click.Path(path_type=Path),
              metavar="FILE.html", help="Where to write the page (the folder must exist).")
@handled(render_report)
def report(experiment: str | None, experiment_opt: str | None, out: Path) -> Any:
    """Write one self-contained HTML page of the experiment.

    The lineage tree, each cycle's paired dev delta and verdict, the tasks that flipped between
    any two evals of one exam (searchable), the test reads left and the final claim, and each
    run's provenance. It is a view of `monte status --json` and the evals' per-task results,
    requests nothing when opened, and is the same bytes when made again from the same ledger.
    """
    from monte import api

    return api.report(experiment=experiment_named(experiment, experiment_opt), out=out)
