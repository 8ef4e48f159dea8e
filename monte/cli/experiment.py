from __future__ import annotations

from typing import TYPE_CHECKING

import click

from monte.cli import complete
from monte.cli.output import handled, table

if TYPE_CHECKING:
    from monte.api.shapes import ExperimentMade


@click.group()
def experiment() -> None:
    """Experiments: a frozen measurement and the ledger of every Run against it."""


def _created(r: ExperimentMade) -> None:
    m = r.measurement
    verb = "would create" if r.dry_run else "created"
    click.echo(f"{verb} experiment {m.experiment} on environment {m.environment}")
    for exam, e in m.exams.items():
        click.echo(f"  exam {exam}: " + ", ".join(f"{s} ({v.n} tasks)" for s, v in e.splits.items()))
    click.echo(f"  steps per chunk: {m.train.steps_per_chunk}; model: {m.model or '-'}")
    if m.eval.samples > 1 or m.eval.temperature > 0:  # K = 1 greedy prints as it always did
        click.echo(f"  samples per item: K = {m.eval.samples} (temperature {m.eval.temperature:g}, top-p "
                   f"{m.eval.top_p:g})" + (f"; pass@{', pass@'.join(map(str, m.pass_at))} reported" if m.pass_at else ""))
    if not r.dry_run:
        click.echo(f"  ledger: {r.ref} @ {(r.commit or '')[:12]}")
    if r.redrawable:
        from monte.cli.grader import redrawable_warning

        click.echo(redrawable_warning(r.redrawable))


@experiment.command("init")
@click.argument("name")
@click.option("--eval", "eval_env", required=True, metavar="ENV", shell_complete=complete.environments, help="The environment whose exams score it.")
@click.option("--model", metavar="M", shell_complete=complete.models, help="The default base model (a local folder or a hub id).")
@click.option("--steps-per-chunk", type=click.IntRange(1, 100_000), default=50, show_default=True,
              help="Steps in one training chunk (what train@N means); frozen with the experiment.")
@click.option("--samples", "samples", type=int, default=1, show_default=True, metavar="K",
              help="Answers sampled per item in every eval (K > 1 needs --temperature); frozen: it defines the cohort.")
@click.option("--temperature", type=float, default=None, metavar="T",
              help="Sampling temperature of every eval (default 0: greedy); frozen.")
@click.option("--top-p", "top_p", type=float, default=None, metavar="P",
              help="Nucleus sampling mass of every eval (default 1); frozen.")
@click.option("--pass-at", "pass_at", default="", metavar="K1,K2",
              help="Also report the pass@k deltas for these k <= K (Chen et al.'s unbiased estimator).")
@click.option("--dry-run", is_flag=True, help="Print the measurement; change nothing.")
@handled(_created)
def init_(name: str, eval_env: str, model: str | None, steps_per_chunk: int, samples: int,
          temperature: float | None, top_p: float | None, pass_at: str, dry_run: bool) -> object:
    """Freeze measurement.json as the experiment's first ledger record.

    With a grader pinned in .monte.yaml, the freeze also hands the test splits to the grader and
    removes their local copies (nothing is frozen when the grader cannot be reached).
    """
    from monte import api
    from monte.errors import error

    try:
        ks = [int(k) for k in pass_at.replace(" ", "").split(",") if k]
    except ValueError:
        raise error("E_USAGE", f"--pass-at {pass_at!r} is not a list of whole numbers",
                    "pass --pass-at as comma-separated k, e.g. --pass-at 1,8") from None
    return api.experiment_init(name=name, eval_env=eval_env, model=model, steps_per_chunk=steps_per_chunk,
                               dry_run=dry_run, samples=samples, temperature=temperature, top_p=top_p,
                               pass_at=ks)


@experiment.command("list")
@handled(lambda rows: table(rows, ["name", "environment", "exams", "model", "created_at"], title="experiments"))
def list_() -> object:
    """Every experiment in this repository."""
    from monte import api

    return api.experiment_list()
