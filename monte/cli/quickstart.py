from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from monte.cli.output import handled, is_tty
from monte.stats.paired import format_interval


def _human(r: dict[str, Any]) -> None:
    from monte.cli.runs import render_status

    click.echo("")
    render_status(r["status"])
    click.echo(f"\nfinal claim {r['claim']}: test {r['test_score']:.3f}, delta {r['test_delta']:+.3f} "
               f"{format_interval(r['test_lower'], r['test_upper'], 3)} vs test@0: {r['verdict']}")
    exp = r["status"].get("experiment", "quickstart")
    click.echo(f"the whole loop took {r['seconds']:.0f}s; the record is in {r['folder']} (its lineage tree: "
               f"`git log --graph --oneline --branches='monte/{exp}/lineage/*' --branches='monte/{exp}/base/*'` there)")
    if r.get("report"):
        click.echo(f"look at it: open {r['report']} in a browser (lineage, cycles, flips, test reads)")


@click.command()
@click.argument("folder", required=False, default="monte-quickstart",
                type=click.Path(file_okay=False, path_type=Path))
@handled(_human)
def quickstart(folder: Path, as_json: bool) -> Any:
    """Run the whole loop in a fresh FOLDER, offline, with a tiny model built here."""
    from monte import quickstart as qs
    from monte.cli.output import progress

    say = (lambda s: click.echo(s, err=True)) if as_json else click.echo
    return qs.run(folder, say=say, progress=(lambda label: progress(label, "tasks" if label == "eval" else "steps")) if is_tty() and not as_json
                  else (lambda label: None))
