from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import click

from monte.cli.output import handled

if TYPE_CHECKING:
    from monte.api.shapes import Initialized


def _human(r: Initialized) -> None:
    if r.already_initialized:
        click.echo(f"{r.repo_root} is already a monte repository (data root {r.data_root})")
        click.echo(f"  {r.hooks_note}")
        if r.ci_note:
            click.echo(f"  {r.ci_note}")
        return
    click.echo(f"monte repository ready: {r.repo_root}")
    click.echo(f"  data root: {r.data_root}")
    for c in r.created:
        click.echo(f"  created {c}")
    click.echo(f"  {r.hooks_note}")
    if r.ci_note:
        click.echo(f"  {r.ci_note}")
    click.echo("next: `monte env list --available`, then `monte env add --server NAME --dev NAME --test NAME` "
               "(trainable: a curriculum and exams; `--benchmark NAME`: exams only)")


@click.command()
@click.argument("path", required=False, type=click.Path(file_okay=False, path_type=Path))
@click.option("--no-hooks", is_flag=True, help="Do not install monte's git hooks (`monte hooks install` later).")
@click.option("--no-ci", is_flag=True, help="Do not write the CI workflow that verifies every ledger "
              "(.github/workflows/monte-verify.yml).")
@click.option("--ci-install", metavar="SPEC", help="The pip requirement CI installs monte from, pinned, e.g. "
              "'monte @ git+https://github.com/ORG/monte@COMMIT' (kept in .monte.yaml; rewrites the workflow).")
@handled(_human)
def init(path: Path | None, no_hooks: bool, no_ci: bool, ci_install: str | None) -> object:
    """Make this git repository a monte repository (idempotent).

    Creates .monte.yaml, the data root ($MONTE_DATA_ROOT or .monte/), recipes/, .dvc/
    (through DVC itself) and a CI workflow that verifies every ledger, and installs monte's git
    hooks (reference-transaction, pre-push, pre-receive), so plain git cannot forge or rewind
    the ledger either. In a clone, the ledgers `git clone` brought are let in.

    CI installs monte pinned: --ci-install SPEC, else MONTE_CI_INSTALL, else where this monte
    came from (a git URL at its commit, or the index release). A pin no runner can install (a
    local folder) is not written: the output says what to set.
    """
    from monte import api

    return api.init(path, hooks=not no_hooks, ci=not no_ci, ci_install=ci_install)
