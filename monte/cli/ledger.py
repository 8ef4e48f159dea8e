from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

import click

from monte.cli import complete
from monte.cli.output import experiment_named, experiment_option, handled

if TYPE_CHECKING:
    from monte.api.shapes import HooksInstalled, HooksRemoved, LedgerVerified, UpdatesJudged


@click.group()
def ledger() -> None:
    """The ledger polices itself: re-derive every rule from the commit history."""


def _verified(r: LedgerVerified | UpdatesJudged) -> None:
    from monte.api import shapes

    if isinstance(r, shapes.UpdatesJudged):  # the hooks' judgement: its exit status says it
        return
    click.echo(f"ok: {r.records} record(s) in {len(r.experiments)} experiment(s) "
               f"({', '.join(r.experiments) or 'none'}) and the vault keep every rule")
    for ref, copy in sorted(r.adopted.items()):
        click.echo(f"let in: {ref} from {copy}")
    for ref, why in sorted(r.unchecked.items()):
        click.echo(f"not checked: {ref} ({why})")
    warnings = r.warnings
    for w in warnings:
        where = f"{w['experiment']}: " if w["experiment"] else ""
        click.echo(f"warning: {where}{w['record']} holds a machine-local path ({w['field']}: {w['value']})")
    if warnings:
        click.echo(f"warning: {len(warnings)} value(s) written by an older monte name folders of the machine that "
                   "wrote them; they verify, and read the same only where those folders exist")


@ledger.command()
@click.argument("experiment", required=False, shell_complete=complete.experiments)
@experiment_option
@click.option("--all", "all_", is_flag=True, help="Every experiment in the repository (the default).")
@click.option("--from", "from_rev", metavar="REV", help="Only the records after REV (an ancestor).")
@click.option("--updates", is_flag=True, hidden=True, help="Read `old new ref` lines from stdin (git hooks).")
@click.option("--local", is_flag=True, hidden=True, help="With --updates: verify the whole local history.")
@handled(_verified)
def verify(experiment: str | None, experiment_opt: str | None, all_: bool, from_rev: str | None, updates: bool,
           local: bool) -> Any:
    """Re-derive every rule from the commit history alone; exit non-zero naming each violation."""
    from monte import api

    if updates:
        lines = [line for line in sys.stdin.read().splitlines() if line.strip()]
        return api.ledger_verify_updates(lines, full=local)
    # the status views it checks are rendered again as status renders them
    from monte.cli.runs import STATUS_RENDERERS

    return api.ledger_verify(experiment=experiment_named(experiment, experiment_opt), all_=all_, from_rev=from_rev,
                             views=STATUS_RENDERERS)


@click.group()
def hooks() -> None:
    """Git hooks that make git itself refuse a forged ledger record."""


def _installed(r: HooksInstalled) -> None:
    for p in r.installed:
        click.echo(f"installed {p}")


def _removed(r: HooksRemoved) -> None:
    for p in r.removed:
        click.echo(f"removed {p}")


@hooks.command()
@handled(_installed)
def install() -> Any:
    """Install reference-transaction, pre-push and pre-receive (an existing hook runs first)."""
    from monte import api

    return api.hooks_install()


@hooks.command()
@handled(_removed)
def uninstall() -> Any:
    """Remove monte's hooks only (a chained hook is put back)."""
    from monte import api

    return api.hooks_uninstall()
