from __future__ import annotations

from typing import Any

import click

from monte.cli import complete
from monte.cli.output import confirm_plan, handled, is_tty, progress
from monte.cli.remote import remote_options, submitted
from monte.stats.paired import format_interval


def _human(r: Any) -> None:
    if r is None:
        return
    from monte.api.shapes import Submitted

    if isinstance(r, Submitted):
        submitted(r)
        return
    for row in r.runs:
        what = f"{row['exam']}/{row['split']}@{row['step']}"
        if row["smoke"]:
            click.echo(f"{row['run']}  {what}  smoke ok ({row['n']} tasks, no score)")
            continue
        line = f"{row['run']}  {what}  score {row['score']:.4f} (n={row['n']})"
        exact = r.exact.get(f"{row['exam']}/{row['split']}")
        if exact is not None:  # partial credit: the score is not accuracy; say the exact-match rate beside it
            line += f"  exact-match {exact:.4f}"
        d = row.get("delta")
        if d:
            kind = "paired" if d["paired"] else "unpaired"
            line += (f"  delta {d['delta']:+.4f} {format_interval(d['lower'], d['upper'])} {kind}"
                     + (f" {d['verdict']}" if d.get("verdict") else ""))
            if d.get("parent"):  # what this move did (the search verdict, docs/statistics.md)
                from monte.status.facts import vs_parent

                line += f"; {vs_parent(d['parent'])}"
        floor = r.floors.get(f"{row['exam']}/{row['split']}")
        if floor is not None:  # beating a garbage base is not learning (the constant-answer floor, docs/statistics.md)
            line += (f"  - not learning: at or below the constant-answer floor {floor:.4f}" if row["score"] <= floor
                     else f"  (constant-answer floor {floor:.4f})")
        click.echo(line)
    for exam, rule in r.rules.items():
        click.echo(f"  {exam} graded: {rule}")
    st = r.settings
    if st:  # what was generated, which only --json showed before
        click.echo(f"  generated: max_new_tokens {st.get('max_new_tokens')}, stop {st.get('stop')!r}, "
                   + ("greedy" if not float(st.get("temperature") or 0) else
                      f"temperature {st.get('temperature')}, top_p {st.get('top_p')}")
                   + (f", {st['samples']} samples per item" if int(st.get("samples") or 1) > 1 else ""))


@click.command("eval")
@click.option("--experiment", "-e", metavar="EXP", shell_complete=complete.experiments,
              help="Default: the only experiment.")
@click.option("--model", metavar="M", shell_complete=complete.models, help="The base model: a folder, a name (.monte.yaml models:), or a hub id (default: the experiment's).")
@click.option("--split", type=click.Choice(["dev", "test"]), default="dev", show_default=True)
@click.option("--step", type=int, metavar="N", help="The checkpoint at absolute step N.")
@click.option("--checkpoint", metavar="RUN@STEP", shell_complete=complete.checkpoints, help="Exactly this checkpoint.")
@click.option("--smoke", is_flag=True, help="A handful of tasks through the whole path; decides nothing.")
@click.option("--push", is_flag=True,
              help="Upload the results to the results bucket after each transition (`monte config set bucket`).")
@click.option("--processes", type=int, default=1, show_default=True, metavar="N",
              help="Split each exam's generation across N processes (whole batches each: the same answers).")
@remote_options
@click.option("--adopt", "adopt", multiple=True, hidden=True, metavar="EXAM=RUN",
              help="(on a box) run the job the laptop submitted as RUN.")
@click.option("--yes", "-y", is_flag=True, help="Skip the confirmation question.")
@click.option("--dry-run", is_flag=True, help="Print the plan and change nothing.")
@handled(_human)
def eval_(experiment: str | None, model: str | None, split: str, step: int | None, checkpoint: str | None,
          smoke: bool, push: bool, processes: int, remote: bool, provider: str, host: str | None, ssh_key: str | None,
          adopt: tuple[str, ...], yes: bool, dry_run: bool, as_json: bool) -> Any:
    """Score a model on a split and append the row (dev by default)."""
    from monte import api

    api.check_remote(remote=remote, push=push, dry_run=dry_run, provider=provider, host=host)
    plan = api.plan_eval(experiment=experiment, model=model, split=split, step=step,
                         checkpoint=checkpoint, smoke=smoke, push=push, remote=remote,
                         adopt=dict(a.split("=", 1) for a in adopt if "=" in a), processes=processes)
    if remote:
        if not confirm_plan([*plan.lines(), f"  remote: submit to {host or 'a Lambda box'}; the box pushes "
                             f"its results to {plan.bucket}"], yes=yes, dry_run=False, as_json=as_json):
            return None
        return api.submit(plan=plan, provider=provider, host=host, ssh_key=ssh_key)
    if not confirm_plan(plan.lines(), yes=yes, dry_run=dry_run, as_json=as_json):
        return {"dry_run": True, "plan": plan.model_dump()} if as_json else None
    return api.run_eval(plan, on_progress=progress("eval", "tasks") if is_tty() and not as_json else None)

