"""Shell completion (click's): run ids, ``RUN@STEP`` checkpoints, experiments, environments,
datasets and recipe names, read from the repository as it is. Completion never fails a shell:
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


def _ws() -> Any:
    from monte.workspace import open_workspace

    return open_workspace(require_data_root=False)


def _experiments(incomplete: str) -> list[str]:
    from monte.ledger.experiment import experiment_names

    return experiment_names(_ws().store)


def _rows() -> list[Any]:
    from monte.ledger.experiment import Ledger, experiment_names

    store = _ws().store
    return [r for exp in experiment_names(store) for r in Ledger(store, exp).rows()]


def _runs(incomplete: str) -> list[str]:
    return [r.run for r in _rows()]


def _checkpoints(incomplete: str) -> list[str]:
    return [f"{r.run}@{c['step']}" for r in _rows() if r.kind == "train" for c in r.checkpoints]


def _frozen(kind: str) -> list[str]:
    """The names the vault ref records (every machine's freezes, once a clone or sync brings the
    ref) and the folders on this data root, once each."""
    from monte.ledger.vault import Vault
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
    from monte.ledger.vault import Vault
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
runs = _safe(_runs)
checkpoints = _safe(_checkpoints)
environments = _safe(_environments)
datasets = _safe(_datasets)
recipes = _safe(_recipes)
trainable_envs = _safe(_trainable)
sources = _safe(lambda s: _datasets(s) + _trainable(s))  # an eval-only environment trains nothing
