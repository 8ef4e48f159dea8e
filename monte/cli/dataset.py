from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import click

from monte.cli import complete
from monte.cli.output import handled, table

if TYPE_CHECKING:
    from monte.api.shapes import DatasetAdded, DatasetShown


@click.group()
def dataset() -> None:
    """Datasets: frozen piles of JSONL rows (what an sft recipe trains on)."""


def _added(r: DatasetAdded) -> None:
    if r.dry_run:
        click.echo("plan (dry run, nothing frozen):")
        for k, v in r.plan.items():
            click.echo(f"  {k}: {v}")
        return
    d = r.dataset
    assert d is not None
    click.echo(f"froze dataset {d.name}: {d.rows} rows, sha256 {d.sha256[:16]}, in {d.folder}")
    if d.columns:
        click.echo(f"  kind {d.kind}, columns {d.columns}")
    if r.dvc_pointer:
        click.echo(f"  DVC pointer {r.dvc_pointer} (staged: commit it, and a clone's `dvc pull` restores the folder)")
    if r.note:
        click.echo(f"  note: {r.note}")


@dataset.command()
@click.argument("name")
@click.option("--from-file", type=click.Path(path_type=Path, dir_okay=False), help="A local JSONL file.")
@click.option("--from-hf", metavar="REPO[@REV]", help="A Hugging Face dataset repo, optionally pinned.")
@click.option("--from-env", metavar="ENV", shell_complete=complete.trainable_envs,
              help="A trainable environment's curriculum, written as demonstrations (with --kind sft): "
              "input the prompt, output ' ' + its answer.")
@click.option("--file", "hf_file", metavar="PATH", help="The repo-relative JSONL file of --from-hf.")
@click.option("--kind", type=click.Choice(["sft", "preference"]),
              help="Screen the rows for a trainer: sft (demonstrations) or preference (chosen/rejected pairs, dpo).")
@click.option("--input-key", default="input", show_default=True, help="Prompt column (flat sft piles).")
@click.option("--output-key", default="output", show_default=True, help="Completion column (flat sft piles).")
@click.option("--prompt-key", default="prompt", show_default=True,
              help="Prompt column of a preference pile (absent from a row: an implicit prompt).")
@click.option("--chosen-key", default="chosen", show_default=True, help="Preferred completion (preference).")
@click.option("--rejected-key", default="rejected", show_default=True, help="Dispreferred completion (preference).")
@click.option("--dry-run", is_flag=True, help="Print the plan; change nothing.")
@handled(_added)
def add(name: str, from_file: Path | None, from_hf: str | None, from_env: str | None, hf_file: str | None,
        kind: str | None, input_key: str, output_key: str, prompt_key: str, chosen_key: str, rejected_key: str,
        dry_run: bool) -> object:
    """Freeze a Dataset: prove every line is a JSON object, hash it, record its provenance."""
    from monte import api

    return api.dataset_add(name=name, from_file=from_file, from_hf=from_hf, hf_file=hf_file, kind=kind,
                           input_key=input_key, output_key=output_key, prompt_key=prompt_key,
                           chosen_key=chosen_key, rejected_key=rejected_key, dry_run=dry_run, from_env=from_env)


@dataset.command("list")
@click.option("--vault", is_flag=True, help="What the Vault holds (network).")
@handled(lambda rows: table(rows, list(rows[0].to_dict()) if rows and hasattr(rows[0], "complete")
                            else ["name", "kind", "rows", "columns", "sha256"], title="datasets"))
def list_(vault: bool) -> object:
    """The frozen Datasets here, from their manifests."""
    from monte import api

    return api.dataset_list(vault=vault)


def _shown(d: DatasetShown) -> None:
    click.echo(f"dataset {d.name}: {d.rows} rows, kind {d.kind or '-'}, columns {d.columns or '-'}")
    click.echo(f"  sha256 {d.sha256} (re-proven)")
    click.echo(f"  provenance {d.provenance}")
    click.echo(f"  folder {d.folder}")


@dataset.command()
@click.argument("name", shell_complete=complete.datasets)
@handled(_shown)
def show(name: str) -> object:
    """One Dataset's manifest, its hash re-proven against the bytes here."""
    from monte import api

    return api.dataset_show(name=name)
