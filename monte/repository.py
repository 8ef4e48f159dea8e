"""A git repository made a monte repository (``init``), and its settings (``config``).

Finding the repository and the data root is :mod:`monte.workspace`; where the Vault and the
results bucket are is :mod:`monte.storage.locations`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from monte.configshow import ConfigShown, config_show  # noqa: F401  (where callers look)
from monte.errors import error
from monte.result_type import Result
from monte.storage import tracking
from monte.workspace import CONFIG_FILE, DEFAULT_DATA_ROOT, Workspace, data_root_for, find_repo_root


@dataclass(frozen=True)
class Initialized(Result):
    """``monte init``: the repository and its data root, the files it created, monte's git hooks
    installed (none with ``hooks=False``) and a line saying so or why not, and the CI pin's line."""

    repo_root: str
    data_root: str
    created: list[str]
    already_initialized: bool
    hooks: list[str] = field(default_factory=list)  # monte's git hooks, installed by init (none with --no-hooks)
    hooks_note: str = ""  # that they were installed, or why not and how to install them later
    ci_note: str = ""  # the pin CI installs monte from and where it came from, or what to set


@dataclass(frozen=True)
class ConfigSet(Result):
    """``monte config set``: the setting written, its value and file, the DVC config that names
    the Vault as DVC's remote too (or None), and what was not checked (``note``)."""

    setting: str
    url: str
    file: str
    dvc_config: str | None  # the DVC config that names the Vault as DVC's remote too
    note: str = ""  # what was not checked (no key resolved to reach a gs:// Vault)


def init(path: Path | None) -> Initialized:
    """See :func:`monte.api.init`."""
    repo_root = find_repo_root(path)
    data_root = data_root_for(repo_root)
    created: list[str] = []
    config = repo_root / CONFIG_FILE
    already = config.exists()
    if not already:
        config.write_text(
            "# monte repository config (see `monte config`).\n"
            f"# The data root is $MONTE_DATA_ROOT, or {DEFAULT_DATA_ROOT}/ here.\n"
            "version: 1\n"
        )
        created.append(CONFIG_FILE)
    if not data_root.is_dir():
        data_root.mkdir(parents=True)
        created.append(_rel(data_root, repo_root) + "/")
    if data_root.is_relative_to(repo_root):  # ignores all but the frozen folders' .dvc pointers
        gi = tracking.ensure_gitignore(data_root)
        if gi is not None:
            created.append(str(gi.relative_to(repo_root)))
    for folder in ("recipes",):
        p = repo_root / folder
        if not p.is_dir():
            p.mkdir()
            (p / "README.md").write_text(
                "Repository recipes: YAML files named here resolve by their stem "
                "(`monte train --recipe NAME`). `monte config` lists them.\n"
            )
            created.append(folder + "/")
    hooks = repo_root / ".git" / "hooks"
    if (repo_root / ".git").is_dir() and not hooks.is_dir():
        hooks.mkdir(parents=True)
        created.append(".git/hooks/")
    if not (repo_root / ".dvc").is_dir():
        dvc_init(repo_root)
        created.append(".dvc/")
    if dvc_cache_links(repo_root):
        created.append(f".dvc/config: cache.type = {','.join(tracking.CACHE_TYPES)}")
    stage(repo_root, [CONFIG_FILE, "recipes/README.md", f"{DEFAULT_DATA_ROOT}/.gitignore", ".dvc/config"])
    # Every freeze the vault ref records gets its .dvc pointer here (a clone whose pointers were
    # never committed, a vault ref from another machine): so `dvc gc` keeps it and `dvc pull` finds it.
    ws = Workspace(repo_root, data_root)
    for p in tracking.restore_pointers(ws):
        created.append(str(p.relative_to(repo_root)) if p.is_relative_to(repo_root) else str(p))
    return Initialized(repo_root=str(repo_root), data_root=str(data_root), created=created,
                       already_initialized=already and not created)


def dvc_cache_links(repo_root: Path) -> bool:
    """Set DVC's ``cache.type`` to reflink, else hardlink, else copy, unless the repository chose
    one: the DVC cache and the data root (and a clone's `dvc pull`) then hold frozen bytes once.
    True when it was set here."""
    from dvc.config import Config

    config = Config(dvc_dir=str(repo_root / ".dvc"), validate=False)
    if "type" in config.get("cache", {}):
        return False
    with config.edit("repo") as conf:
        conf.setdefault("cache", {})["type"] = ",".join(tracking.CACHE_TYPES)
    return True


def _rel(p: Path, root: Path) -> str:
    return str(p.relative_to(root)) if p.is_relative_to(root) else str(p)


def stage(repo_root: Path, paths: list[str]) -> None:
    """Stage what init wrote (as `dvc init` stages .dvc/), so one commit records it."""
    from dulwich import porcelain

    present = [str(repo_root / p) for p in paths if (repo_root / p).is_file()]
    if present:
        porcelain.add(str(repo_root), present)


def dvc_init(repo_root: Path) -> None:
    """``.dvc/`` is made by DVC itself, so its layout is whatever this DVC version expects."""
    import contextlib
    import io
    import logging

    from dvc.exceptions import DvcException
    from dvc.repo import Repo as DvcRepo

    try:
        # DVC prints its own banner; monte's output (and --json) must stay monte's.
        dvc_log = logging.getLogger("dvc")
        level = dvc_log.level
        dvc_log.setLevel(logging.WARNING)
        with contextlib.redirect_stdout(io.StringIO()):
            dvc = DvcRepo.init(root_dir=str(repo_root), no_scm=False, subdir=False)
            # No analytics from a tool that runs in CI and on boxes.
            with dvc.config.edit() as conf:
                conf["core"]["analytics"] = False
            dvc.scm.add([str(repo_root / ".dvc" / "config")])
            dvc.close()
        dvc_log.setLevel(level)
    except DvcException as e:
        raise error("E_STORAGE", f"`dvc init` failed in {repo_root}: {e}",
                    "fix the DVC setup it names, then run `monte init` again") from None


def config_set(ws: Workspace, *, setting: str, url: str) -> ConfigSet:
    """See :func:`monte.api.config_set`."""
    from monte.storage.locations import set_url

    value, note = set_url(ws, setting, url)
    dvc = ws.repo_root / ".dvc" / "config"
    return ConfigSet(setting=setting, url=value, file=str(ws.repo_root / CONFIG_FILE),
                     dvc_config=str(dvc) if setting == "vault" and dvc.exists() else None, note=note)
