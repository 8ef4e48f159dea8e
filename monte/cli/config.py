from __future__ import annotations

from typing import TYPE_CHECKING

import click

from monte.cli.output import handled

if TYPE_CHECKING:
    from monte.api.shapes import ConfigShown


def _human(r: ConfigShown) -> None:
    click.echo(f"repository:  {r.repo_root}")
    click.echo(f"data root:   {r.data_root}")
    click.echo(f"vault:       {r.vault or '(none: `monte config set vault URL`)'}")
    click.echo(f"bucket:      {r.bucket or '(none: `monte config set bucket URL`)'}")
    click.echo("recipe search path (first match wins):")
    for p in r.recipe_path:
        click.echo(f"  {p}")
    click.echo("recipes:")
    for name, path in r.recipes.items():
        click.echo(f"  {name}\t{path}")


@click.group(invoke_without_command=True)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document on stdout.")
@click.pass_context
def config(ctx: click.Context, as_json: bool) -> None:
    """Show where monte looks: the data root, the recipe search path, the recipe names."""
    if ctx.invoked_subcommand is None:
        ctx.invoke(show, as_json=as_json)


@config.command()
@handled(_human)
def show() -> object:
    """Print the recipe search path and the resolvable recipe names."""
    from monte import api

    return api.config_show()


@config.command("set")
@click.argument("setting", type=click.Choice(["vault", "bucket", "grader"]))
@click.argument("url")
@click.option("--key", metavar="PUBKEY", help="grader only: its public key to pin (the line or key.pub's path).")
@handled(lambda r: click.echo(f"{r.setting} = {r.url} (in {r.file})"
                              + (f"; DVC remote 'vault' in {r.dvc_config}" if r.dvc_config else "")
                              + (f"\n  note: {r.note}" if r.note else "")))
def set_(setting: str, url: str, key: str | None) -> object:
    """Name the Vault or the results bucket (gs://BUCKET[/PREFIX], or a local folder), or the
    grader (ssh://USER@HOST[:PORT] with --key, its public key: docs/grader.md).

    The Vault must be reachable: a folder that exists, a bucket that answers when a GCS key
    resolves; otherwise it refuses and writes nothing.

    Stored in .monte.yaml (commit it, so every clone and box agrees). MONTE_VAULT and
    MONTE_BUCKET override it for one shell; --bucket on push/sync overrides both.
    """
    from monte import api

    return api.config_set(setting=setting, url=url, key=key)
