"""Where things are: the git repository, the data root, the repository's monte config.

- The repository is found from the working directory upwards (a ``.git`` folder or file).
- The data root is ``$MONTE_DATA_ROOT`` or ``.monte/`` in the repository. It holds frozen
  environments and datasets (``environments/<name>/``, ``datasets/<name>/``) and run folders.
  A linked worktree (``git worktree add``) shares its main working tree's: the refs the records
  are in are shared, so the run folders and frozen bytes they name are there.
- ``.monte.yaml`` at the repository root is the repository's monte config (committed). Its
  presence is what makes a git repository a monte repository.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

from monte.errors import error

if TYPE_CHECKING:
    from monte.ledger.store import Store

CONFIG_FILE = ".monte.yaml"
DEFAULT_DATA_ROOT = ".monte"


def find_repo_root(start: Path | None = None) -> Path:
    here = (start or Path.cwd()).resolve()
    for folder in (here, *here.parents):
        if (folder / ".git").exists():
            return folder
    raise error(
        "E_NOT_INITIALIZED",
        f"{here} is not inside a git repository",
        "run `git init` (or cd into your repository), then `monte init`",
    )


def data_root_for(repo_root: Path) -> Path:
    env = os.environ.get("MONTE_DATA_ROOT")
    if env:
        return Path(os.path.expanduser(env)).resolve()
    main = main_worktree(repo_root)
    if main is not None and (main / CONFIG_FILE).is_file() and (main / DEFAULT_DATA_ROOT).is_dir():
        return main / DEFAULT_DATA_ROOT
    return repo_root / DEFAULT_DATA_ROOT


def main_worktree(repo_root: Path) -> Path | None:
    """The main working tree of the linked worktree at ``repo_root`` (``git worktree add``), or
    None (not a linked worktree; a bare repository's or a separate git folder's worktree). Read from
    git's own files, without git: ``.git`` names the worktree's git folder, whose ``commondir``
    names the shared one, ``<main>/.git``. Its ledgers are the main tree's, so its data root is
    too: a worktree's own ``.monte/`` holds only what git checked out (pointers, no bytes)."""
    dot_git = repo_root / ".git"
    try:
        if not dot_git.is_file():
            return None
        line = dot_git.read_text(encoding="utf-8").strip()
        if not line.startswith("gitdir:"):
            return None
        own = (repo_root / line[len("gitdir:"):].strip()).resolve()
        common = (own / (own / "commondir").read_text(encoding="utf-8").strip()).resolve()
    except (OSError, UnicodeDecodeError):
        return None  # a submodule (no commondir) or an unreadable file: the worktree's own folder
    main = common.parent
    if common.name != ".git" or main == repo_root or not (main / ".git").is_dir():
        return None
    return main


def find_bare_repo(start: Path | None = None) -> Path | None:
    """The bare repository at ``start`` (default: the working directory), or named by
    ``$GIT_DIR``: a shared server repository, which has no work tree. None when it is not one."""
    env = os.environ.get("GIT_DIR")
    here = Path(env) if env else (start or Path.cwd())
    if (here / ".git").exists() or not (here / "HEAD").is_file() or not (here / "objects").is_dir() \
            or not (here / "refs").is_dir():
        return None
    from dulwich.errors import NotGitRepository
    from dulwich.repo import Repo

    try:
        repo = Repo(str(here))
    except NotGitRepository:
        return None
    try:
        return Path(repo.commondir()).resolve() if repo.bare else None
    finally:
        repo.close()


@dataclass
class Workspace:
    repo_root: Path
    data_root: Path
    config: dict[str, Any] = field(default_factory=dict)
    #: what opening the store let in from remote-tracking refs (:class:`monte.ledger.remotes.RemotesLetIn`)
    remotes_let_in: Any = None

    @cached_property
    def store(self) -> Store:
        """The repository's ledgers, with what ``git clone``/``git fetch`` brought under
        ``refs/remotes/`` let in first (:func:`monte.ledger.remotes.let_in_remotes`). In a repository
        monte may not write, the remote copies it could not let in are read where they are."""
        from monte.ledger.remotes import let_in_remotes
        from monte.ledger.store import Store
        from monte.ledger.transaction import Proposed

        store = Store(self.repo_root)
        self.remotes_let_in = let_in_remotes(store)
        if self.remotes_let_in.unwritable:
            return Proposed(store, self.remotes_let_in.unwritable)
        return store

    def code_version(self) -> dict[str, Any]:
        """The commit of the code a run starts from, recorded in its plan: ``git_sha`` (the work
        tree's ``HEAD``, None before the first commit) and ``git_dirty`` (tracked files differ
        from it: the sha alone does not say what ran). Untracked files are not looked at. Asked
        once per command (an eval of many exams starts every row from the same code)."""
        return dict(self._code_version)

    @cached_property
    def _code_version(self) -> dict[str, Any]:
        import subprocess

        def git(*args: str) -> subprocess.CompletedProcess[str] | None:
            try:
                return subprocess.run(["git", *args], cwd=self.repo_root, capture_output=True, text=True,
                                      timeout=60, env={**os.environ, "GIT_OPTIONAL_LOCKS": "0"})
            except (OSError, subprocess.TimeoutExpired):
                return None

        head = git("rev-parse", "--verify", "--quiet", "HEAD^{commit}")
        sha = head.stdout.strip() if head is not None and head.returncode == 0 else None
        if not sha:
            return {"git_sha": None, "git_dirty": None}
        status = git("status", "--porcelain", "--untracked-files=no", "--ignore-submodules=dirty")
        dirty = None if status is None or status.returncode != 0 else bool(status.stdout.strip())
        return {"git_sha": sha, "git_dirty": dirty}

    def env_dir(self, name: str) -> Path:
        return self.data_root / "environments" / name

    def dataset_dir(self, name: str) -> Path:
        return self.data_root / "datasets" / name

    def runs_folder(self, experiment: str) -> Path:
        """The experiment's run folders are in here (the results bucket keeps the same paths)."""
        return self.data_root / "runs" / experiment

    def run_folder(self, experiment: str, run: str) -> Path:
        """A run's folder on the data root: its event file, kept result, checkpoints, logs."""
        return self.runs_folder(experiment) / run

    @property
    def recipes_dir(self) -> Path:
        return self.repo_root / "recipes"


#: a line :func:`_plain_config` reads itself: ``key: value`` with a value YAML reads as this
#: integer or string (a letter or a slash first; no space, quote, comment or flow character)
_PLAIN_LINE = re.compile(r"([A-Za-z_][A-Za-z0-9_-]*): (0|[1-9][0-9]{0,17}|[A-Za-z/][A-Za-z0-9_./:@+=-]*)")
#: plain words YAML reads as something other than their text (1.1 and 1.2 booleans and nulls)
_NOT_STRINGS = {"true", "false", "yes", "no", "on", "off", "y", "n", "null"}


def _plain_config(text: str) -> dict[str, Any] | None:
    """``.monte.yaml`` as monte writes it (comments, blank lines, ``key: value`` scalars), read
    without ruamel.yaml (~30 ms of every command's start); None for anything else (ruamel reads
    it, and names what is wrong)."""
    out: dict[str, Any] = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        m = _PLAIN_LINE.fullmatch(line)
        if m is None or m.group(1) in out or m.group(2).lower() in _NOT_STRINGS:
            return None
        value = m.group(2)
        out[m.group(1)] = int(value) if value[0].isdigit() else value
    return out


def load_config(repo_root: Path) -> dict[str, Any]:
    path = repo_root / CONFIG_FILE
    if not path.exists():
        return {}
    try:
        plain = _plain_config(path.read_bytes().decode("utf-8"))
    except (OSError, UnicodeDecodeError):
        plain = None  # ruamel's read below says what is wrong
    if plain is not None:
        return plain
    from ruamel.yaml import YAML
    from ruamel.yaml.error import YAMLError

    try:
        data = YAML(typ="safe").load(path.read_bytes().decode("utf-8"))
    except (YAMLError, UnicodeDecodeError) as e:
        raise error("E_BAD_INPUT", f"{path} is not valid YAML: {e}", f"fix or delete {path}") from None
    except RecursionError:
        raise error("E_BAD_INPUT", f"{path} nests too deeply to be monte's config", f"fix or delete {path}") from None
    except OSError as e:
        raise error("E_BAD_INPUT", f"{path} cannot be read ({e.strerror})", f"fix or delete {path}") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise error("E_BAD_INPUT", f"{path} must hold a mapping", f"fix or delete {path}")
    return data


def open_git(start: Path | None = None) -> Workspace:
    """Any git repository around ``start``, a bare one too, monte repository or not: enough to
    read and verify the ledgers its refs hold (a CI checkout of a ledger branch has no
    ``.monte.yaml``; a shared server repository has no work tree)."""
    bare = find_bare_repo(start)
    repo_root = bare or find_repo_root(start)
    return Workspace(repo_root, data_root_for(repo_root), {} if bare else load_config(repo_root))


def open_workspace(start: Path | None = None, *, require_data_root: bool = True) -> Workspace:
    """The monte repository around ``start`` (default: the working directory)."""
    repo_root = find_repo_root(start)
    if not (repo_root / CONFIG_FILE).exists():
        raise error(
            "E_NOT_INITIALIZED",
            f"{repo_root} is a git repository but not a monte repository",
            "run `monte init` in it",
        )
    ws = Workspace(repo_root, data_root_for(repo_root), load_config(repo_root))
    if require_data_root and not ws.data_root.is_dir():
        hint = (
            "MONTE_DATA_ROOT points there: create the folder, fix the variable, or unset it"
            if os.environ.get("MONTE_DATA_ROOT")
            else "run `monte init` again to recreate it"
        )
        raise error("E_DATA_ROOT", f"the data root {ws.data_root} does not exist", hint)
    return ws
