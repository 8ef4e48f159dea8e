from __future__ import annotations

import click

from monte.cli.output import handled


def _human(r: dict) -> None:  # type: ignore[type-arg]
    click.echo(f"repository:  {r['repo_root']}")
    click.echo(f"data root:   {r['data_root']}")
    click.echo("recipe search path (first match wins):")
    for p in r["recipe_path"]:
        click.echo(f"  {p}")
    click.echo("recipes:")
    for name, path in r["recipes"].items():
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
