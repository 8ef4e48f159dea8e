from __future__ import annotations

from typing import TYPE_CHECKING

import click

from monte.cli import complete
from monte.cli.output import handled, table

if TYPE_CHECKING:
    from monte.envs.manage import EnvInstallResult


@click.group()
def env() -> None:
    """Environments: freeze exams (and curricula) from the catalog, list, install."""


def _added(r) -> None:  # type: ignore[no-untyped-def]
    if r.dry_run:
        click.echo("plan (dry run, nothing frozen):")
        for k, v in r.plan.items():
            click.echo(f"  {k}: {v}")
        return
    e = r.environment
    click.echo(f"froze environment {e.name} ({e.kind}, {e.files} files) in {e.folder}")
    for exam, splits in e.exams.items():  # the rows frozen: what the exams and curriculum hold
        click.echo(f"  exam {exam}: " + ", ".join(f"{s} ({e.tasks[f'{exam}/{s}']} tasks)" if f"{exam}/{s}" in e.tasks
                                                 else s for s in splits))
    if "curriculum" in e.tasks:
        click.echo(f"  curriculum: {e.tasks['curriculum']} rows")
    for key, f in r.floors.items():  # what always giving one answer scores (or why none is recorded)
        click.echo(f"  floor {key}: " + (f"none ({f['none']})" if "none" in f else
                                         f"{f['score']:.3f} (the constant \"{f['answer'][:60]}\", best of {f['candidates']})"))
    click.echo(f"  fingerprint {e.fingerprint[:16]}")
    if r.dvc_pointer:
        click.echo(f"  DVC pointer {r.dvc_pointer} (staged: commit it, and a clone's `dvc pull` restores the folder)")
    if r.note:
        click.echo(f"  note: {r.note}")


@env.command()
@click.option("--benchmark", metavar="BENCH", help="Eval-only: one exam, used as a dev split.")
@click.option("--server", metavar="BENCH", help="Trainable: a curriculum from BENCH (needs --dev and --test).")
@click.option("--dev", multiple=True, metavar="BENCH", help="A dev exam (repeatable).")
@click.option("--test", multiple=True, metavar="BENCH", help="A sealed test exam (repeatable).")
@click.option("--as", "name", metavar="NAME", help="The environment's name (default: the source name).")
@click.option("--grader", metavar="G", help="A file: exam's grader: exact[:ignore_case,...], numeric[:TOL], "
              "regex:PATTERN or python:MODULE:FUNCTION.")
@click.option("--include-path", metavar="DIR", help="Where lm-eval:TASK's YAML is (else lm-eval's own tasks).")
@click.option("--apply-chat-template", is_flag=False, flag_value="default", default=None, metavar="[NAME]",
              help="lm-eval:TASK: render each prompt with the model's chat template (NAME: one of several).")
@click.option("--fewshot-as-multiturn/--no-fewshot-as-multiturn", default=None,
              help="lm-eval:TASK: few-shot examples as chat turns (default: on with a chat template).")
@click.option("--system-instruction", metavar="TEXT", help="lm-eval:TASK: a system instruction before each prompt.")
@click.option("--dry-run", is_flag=True, help="Print what would be frozen; change nothing.")
@handled(_added)
def add(benchmark: str | None, server: str | None, dev: tuple[str, ...], test: tuple[str, ...],
        name: str | None, grader: str | None, include_path: str | None, apply_chat_template: str | None,
        fewshot_as_multiturn: bool | None, system_instruction: str | None, dry_run: bool) -> object:
    """Freeze an Environment. Three forms:

    \b
      monte env add --benchmark BENCH [--as NAME]                 eval-only, one dev exam
      monte env add --server BENCH --dev BENCH --test BENCH [--as NAME]   trainable
      monte env add --dev BENCH --test BENCH --as NAME            eval-only, dev + test

    An exam may also be an lm-evaluation-harness task or a JSONL file:

    \b
      monte env add --dev lm-eval:TASK --test lm-eval:TASK --as NAME [--include-path DIR]
          [--apply-chat-template [NAME]] [--fewshot-as-multiturn] [--system-instruction TEXT]
      monte env add --dev file:DEV.jsonl --test file:TEST.jsonl --grader G --as NAME
    """
    from monte import api

    return api.env_add(benchmark=benchmark, server=server, dev=dev, test=test, name=name, dry_run=dry_run,
                       grader=grader, include_path=include_path, apply_chat_template=apply_chat_template,
                       fewshot_as_multiturn=fewshot_as_multiturn, system_instruction=system_instruction)


@env.command("list")
@click.option("--available", is_flag=True,
              help="What could be frozen: the built-in catalog, and NeMo Gym's servers and benchmarks.")
@click.option("--vault", is_flag=True, help="What the Vault holds (network).")
@handled(lambda rows: table(rows, list(rows[0].to_dict()) if rows else [], title="environments"))
def list_(available: bool, vault: bool) -> object:
    """What is usable here, now (local disk, no network)."""
    from monte import api

    if not available and not vault:  # the columns that fit a screen (`env install` shows folders)
        return api.env_list_local()
    rows = api.env_list(available=available, vault=vault)
    if available:
        from monte.envs.manage import gym_missing_note

        note = gym_missing_note()
        if note:  # on stderr: stdout stays the list (and --json one document)
            click.echo(f"note: {note}", err=True)
    return rows


def _installed(rows: list[EnvInstallResult]) -> None:
    for r in rows:
        click.echo(f"{r.name}: {r.action} ({r.files} files) {r.folder}")
        if r.set_aside:
            click.echo(f"  it had been edited since the freeze: {r.changed}")
            click.echo(f"  the edited folder is kept at {r.set_aside}")
        if r.registered:
            click.echo(f"  registered in NeMo Gym: {', '.join(r.registered)}")
        if r.note:
            click.echo(f"  note: {r.note}")


@env.command()
@click.argument("name", required=False, shell_complete=complete.environments)
@click.option("--all", "all_", is_flag=True, help="Every environment on this data root.")
@handled(_installed)
def install(name: str | None, all_: bool) -> object:
    """Verify a frozen environment here (or restore it from its manifest), then register its
    benchmark configs in the NeMo Gym checkout MONTE_LOCAL names (NeMo Gym environments only)."""
    from monte import api

    return api.env_install(name=name, all_=all_)
