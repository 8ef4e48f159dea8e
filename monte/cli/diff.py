"""``monte diff RUN_A RUN_B``: two dev evals item by item (:mod:`monte.diff`)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import click

from monte.cli import complete
from monte.cli.output import handled

if TYPE_CHECKING:
    from monte.diff import Diff


def _human(r: Diff) -> None:
    c = r.counts
    click.echo(f"{r.exam}/dev  {r.a} ({r.a_target}) -> {r.b} ({r.b_target}): "
               f"fixed {c['fixed']}, broken {c['broken']}, same {c['same']} (n {r.n})")
    for g in r.groups or ():
        click.echo(f"  {r.group_by}={g.group}: fixed {g.fixed}, broken {g.broken}, same {g.same}")
    for it in r.items:
        click.echo(f"{it.flip:<7} {it.id}\t{it.prompt!r}\texpected {it.expected!r}\t"
                   f"a {it.a.output!r} ({it.a.score})\tb {it.b.output!r} ({it.b.score})"
                   + (f"\t{r.group_by}={it.group}" if r.group_by else ""))


@click.command()
@click.argument("run_a", metavar="RUN_A", shell_complete=complete.runs)
@click.argument("run_b", metavar="RUN_B", shell_complete=complete.runs)
@click.option("--experiment", "-e", metavar="EXP", shell_complete=complete.experiments,
              help="Default: the one the runs are in.")
@click.option("--only", type=click.Choice(["flips", "all", "fixed", "broken", "same"]), default="flips",
              show_default=True, help="Which items to list.")
@click.option("--group-by", metavar="FIELD", help="Count by this field of the items' metadata (dotted when nested).")
@handled(_human)
def diff(run_a: str, run_b: str, experiment: str | None, only: str, group_by: str | None) -> Any:
    """Two dev evals of one exam, item by item: prompt, expected answer, both outputs, the flip."""
    from monte import api

    return api.diff(run_a=run_a, run_b=run_b, experiment=experiment, only=only, group_by=group_by)
