"""``monte config``: where monte looks (the data root, the Vault, the bucket, the recipes), read
without pydantic (~50 ms of a process) or anything :mod:`monte.repository` needs to write."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from monte.errors import MonteError
from monte.result_type import Result
from monte.workspace import CONFIG_FILE, Workspace


@dataclass(frozen=True)
class ConfigShown(Result):
    """``monte config show``: the data root, the Vault and the bucket (None: not set), the recipe
    search path and every resolvable recipe name -> its file (the first match on the path wins)."""

    repo_root: str
    data_root: str
    config_file: str
    recipe_path: list[str]
    recipes: dict[str, str]  # name -> file; the first match on the path wins
    vault: str | None
    bucket: str | None


def config_show(ws: Workspace) -> ConfigShown:
    """See :func:`monte.api.config_show`."""
    import monte

    packaged = Path(monte.__file__).parent / "recipes"
    path = [ws.recipes_dir, packaged]
    recipes: dict[str, str] = {}
    for folder in path:
        for f in sorted(folder.glob("*.yaml")) + sorted(folder.glob("*.yml")) if folder.is_dir() else []:
            recipes.setdefault(f.stem, str(f))
    return ConfigShown(
        repo_root=str(ws.repo_root),
        data_root=str(ws.data_root),
        config_file=str(ws.repo_root / CONFIG_FILE),
        recipe_path=[str(p) for p in path],
        recipes=recipes,
        vault=_where(ws, "vault"),
        bucket=_where(ws, "bucket"),
    )


def _where(ws: Workspace, setting: str) -> str | None:
    from monte.storage.locations import url_for

    try:
        return url_for(ws, setting)
    except MonteError:
        return None
