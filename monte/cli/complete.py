"""Shell completion (click's): run ids and ``RUN@STEP`` checkpoints (of the experiment ``-e``
names, or ``EXP/…``), experiments, environments (trainable ones for ``--source``), datasets,
recipe names and ``--model`` folders, read from the repository as it is. Completion never fails a shell:
anything that goes wrong completes nothing.

Enable it with, e.g. for bash: ``eval "$(_MONTE_COMPLETE=bash_source monte)"`` (zsh: zsh_source,
fish: fish_source).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import click
from click.shell_completion import CompletionItem


def _safe(f: Callable[[str], list[str]]) -> Callable[[click.Context, click.Parameter, str], list[CompletionItem]]:
    def complete(ctx: click.Context, param: click.Parameter, incomplete: str) -> list[CompletionItem]:
        try:
            return [CompletionItem(x) for x in f(incomplete) if x.startswith(incomplete)]
        except Exception:  # noqa: BLE001 - a completion must never break the shell
            return []

    return complete


def _in_experiment(f: Callable[[str | None, str], list[str]]
                   ) -> Callable[[click.Context, click.Parameter, str], list[CompletionItem]]:
    """A completion of what one experiment holds: the one ``-e/--experiment`` (or the positional
    ``EXPERIMENT``) already names on the line, else every experiment's; ``EXP/<TAB>`` completes
    that experiment's, written ``EXP/…``."""
    def complete(ctx: click.Context, param: click.Parameter, incomplete: str) -> list[CompletionItem]:
        try:
            named = next((v for k, v in ctx.params.items() if k in ("experiment", "experiment_opt") and v), None)
            if "/" in incomplete:
                exp = incomplete.split("/", 1)[0]
                found = [f"{exp}/{x}" for x in f(exp, incomplete.split("/", 1)[1])]
            else:
                found = f(named, incomplete)
            return [CompletionItem(x) for x in found if x.startswith(incomplete)]
        except Exception:  # noqa: BLE001 - a completion must never break the shell
            return []

    return complete


def _ws() -> Any:
    from monte.workspace import open_workspace

    return open_workspace(require_data_root=False)


def _experiments(incomplete: str) -> list[str]:
    from monte.ledger.experiment import experiment_names

    return experiment_names(_ws().store)


def _rows(experiment: str | None = None) -> list[Any]:
    from monte.ledger.experiment import Ledger, experiment_names

    store = _ws().store
    names = experiment_names(store)
    return [r for exp in names if experiment in (None, exp) for r in Ledger(store, exp).rows()]


def _runs(experiment: str | None, incomplete: str) -> list[str]:
    return [r.run for r in _rows(experiment)]


def _checkpoints(experiment: str | None, incomplete: str) -> list[str]:
    return [f"{r.run}@{c['step']}" for r in _rows(experiment) if r.kind == "train" for c in r.checkpoints]


def _models(incomplete: str) -> list[str]:
    """``--model``: the base models the experiments record, and the model folders here (a
    folder with a ``config.json``)."""
    from pathlib import Path

    from monte.ledger.experiment import Ledger, experiment_names

    ws = _ws()
    found = {m for exp in experiment_names(ws.store) if (m := Ledger(ws.store, exp).measurement().model)}
    base = incomplete.rsplit("/", 1)[0] + "/" if "/" in incomplete else ""
    folder = Path(base) if base.startswith("/") else ws.repo_root / base
    if folder.is_dir():
        found.update(f"{base}{p.name}" for p in folder.iterdir() if (p / "config.json").is_file())
    return sorted(found)


def _frozen(kind: str) -> list[str]:
    """The names the vault ref records (every machine's freezes, once a clone or sync brings the
    ref) and the folders on this data root, once each."""
    from monte.ledger.vault_ref import Vault
    from monte.ledger.views import VAULT_FOLDERS

    ws = _ws()
    names = set(Vault(ws.store).names(kind))
    folder = ws.data_root / VAULT_FOLDERS[kind]
    if folder.is_dir():
        names.update(p.name for p in folder.iterdir() if p.is_dir() and not p.name.startswith("."))
    return sorted(names)


def _environments(incomplete: str) -> list[str]:
    return _frozen("environment")


def _trainable(incomplete: str) -> list[str]:
    """The environments with a curriculum: the vault ref's manifests, then this data root's."""
    from monte.ledger.vault_ref import Vault
    from monte.manifest import read_manifest

    ws = _ws()
    vault = Vault(ws.store)
    out = []
    for name in _frozen("environment"):
        m = vault.get("environment", name) or read_manifest(ws.env_dir(name))
        if m is not None and m.env_kind == "trainable":
            out.append(name)
    return out


def _datasets(incomplete: str) -> list[str]:
    return _frozen("dataset")


def _recipes(incomplete: str) -> list[str]:
    from monte import api

    return sorted(api.config_show().recipes)


experiments = _safe(_experiments)
runs = _in_experiment(_runs)
checkpoints = _in_experiment(_checkpoints)
models = _safe(_models)
environments = _safe(_environments)
datasets = _safe(_datasets)
recipes = _safe(_recipes)
trainable_envs = _safe(_trainable)
sources = _safe(lambda s: _datasets(s) + _trainable(s))  # an eval-only environment trains nothing
