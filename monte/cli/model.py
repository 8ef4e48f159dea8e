from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import click

from monte.cli.output import handled
from monte.models.tiny import MAX_SEED, SIZES

if TYPE_CHECKING:
    from monte.api.shapes import ModelMade


@click.group()
def model() -> None:
    """Models: make a small random one here, with no download."""


def _made(r: ModelMade) -> None:
    s = r.shape
    click.echo(f"initialised a {r.size} model ({r.parameters:,} parameters, seed {r.seed}) "
               f"in {r.path}")
    click.echo(f"  {r.architecture}: hidden {s['hidden']}, {s['layers']} layers, "
               f"{s['heads']}/{s['kv_heads']} heads, vocab {r.vocab_size} (bytes + 3 special)")
    click.echo(f"  weights sha256 {r.files['model.safetensors'][:16]}")


@model.command("init")
@click.argument("directory", type=click.Path(path_type=Path))
@click.option("--size", type=click.Choice(list(SIZES)), default="tiny", show_default=True,
              help="tiny: ~1.0 M parameters; small: ~3.2 M.")
@click.option("--seed", type=click.IntRange(0, MAX_SEED), default=0, show_default=True,
              help="The same size and seed give byte-identical files.")
@handled(_made)
def init_(directory: Path, size: str, seed: int) -> object:
    """Write a randomly initialised causal LM and its byte-level tokenizer into DIRECTORY.

    DIRECTORY must be new or empty. The folder loads with transformers'
    AutoModelForCausalLM / AutoTokenizer.from_pretrained, offline.
    """
    from monte import api

    return api.model_init(path=directory, size=size, seed=seed)
