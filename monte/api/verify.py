"""The API's verbs of a ledger that polices itself: ``monte ledger verify``, the git hooks'
judgement of proposed ref updates, and installing those hooks."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from monte.api.shapes import HooksInstalled, HooksRemoved, UpdatesJudged
from monte.errors import MonteError
from monte.workspace import Workspace, open_workspace

if TYPE_CHECKING:
    from monte.ledger.verify.report import LedgerVerified


def ledger_verify(*, experiment: str | None = None, all_: bool = False, from_rev: str | None = None,
                  ws: Workspace | None = None,
                  views: Mapping[str, tuple[Callable[[dict[str, Any]], bytes | str], Sequence[str]]] | None = None,
                  ) -> LedgerVerified:
    """Re-derive every rule from the commit history; refuse (E_VERIFY) listing each violation.
    ``views``: mode -> (render, its files) of ``monte status``'s kept views, to derive each
    again (:func:`status_view`); a view of a mode not given is not judged
    (:func:`monte.ledger.verify.report.verify_repository`)."""
    from monte.ledger.verify.report import verify_repository

    ws = ws or _ledgers_workspace()
    return verify_repository(ws, experiment=experiment, all_=all_, from_rev=from_rev,
                             derived=lambda: _derived_caches(ws, views or {}))


def _ledgers_workspace() -> Workspace:
    """The repository whose ledgers to read: a monte repository, or any git repository holding
    monte refs (a CI checkout of a ledger branch has no ``.monte.yaml``; a bare server
    repository has no work tree)."""
    from monte.workspace import find_bare_repo, open_git

    if find_bare_repo() is not None:
        return open_git()
    try:
        return open_workspace(require_data_root=False)
    except MonteError as e:
        if e.code != "E_NOT_INITIALIZED":
            raise
        return open_git()


def _derived_caches(ws: Workspace, views: Mapping[str, tuple[Callable[[dict[str, Any]], bytes | str],
                                                               Sequence[str]]]) -> list[dict[str, str]]:
    """Each derived cache entry (monte.ledger.derived) that its index does not derive, and each
    kept status view that the current state does not make (``views``: the renderers): a forged
    file that passed its MAC, or a torn or edited one (never used as it stands)."""
    from monte import status as st
    from monte.ledger import derived

    def blob(sha: bytes) -> bytes | None:
        try:
            return bytes(ws.store.repo.object_store.get_raw(sha)[1])  # type: ignore[arg-type]
        except KeyError:
            return None

    def rederive(exp: str, mode: str, stored: derived.View) -> derived.View | None:
        if mode not in views:
            return None
        render, code = views[mode]
        return st.rederive_view(ws, exp, mode, stored, render, code)

    git_dir = ws.store.repo.commondir()
    found = derived.check(git_dir, blob, {"status": (st.facts_version(), st.derive_facts)})
    found += derived.check_views(git_dir, st.VIEW_VERSION, rederive)
    found += derived.check_folds(git_dir, st.VIEW_VERSION, lambda exp, mode, stored: st.refold(
        ws, exp, mode, stored, views[mode][1]) if mode in views else None)
    return [{"experiment": "", "commit": "-", "rule": "cache", "message": m,
             "fix": f"remove {derived.cache_path(git_dir, '*', '*')} (derived again on the next read), then find "
             "who wrote it"} for m in found]


def ledger_verify_updates(lines: list[str], *, full: bool = False, ws: Workspace | None = None) -> UpdatesJudged:
    """For git hooks: check proposed updates (``old new ref`` per line) before they happen, all
    of them together (one push: the vault, base, lineage and ledger refs arriving at once).

    Inside a hook the repository is the one git names (a bare one, with the pushed objects in
    quarantine); ``full`` verifies each new tip's whole history (pre-push). ``$MONTE_HOOK``
    names the hook that asks (:func:`monte.githooks.judge`)."""
    import os

    from monte import githooks
    from monte.ledger.store import Store
    from monte.workspace import find_repo_root

    # never ``ws.store``: a hook runs while git holds the refs' locks, and must not move refs
    store = Store.from_git_env() or Store(ws.repo_root if ws else find_repo_root())
    return UpdatesJudged(ok=True, updates=githooks.refuse(lines, store, full=full, hook=os.environ.get("MONTE_HOOK")))


def _git_dir(ws: Workspace | None) -> Path:
    """The repository whose hooks to manage: a bare (server) repository here or at ``$GIT_DIR``,
    else the monte repository around the working directory (a linked worktree's hooks are the
    main one's)."""
    from monte.workspace import find_bare_repo

    if ws is None:
        bare = find_bare_repo()
        if bare is not None:
            return bare
        ws = open_workspace(require_data_root=False)
    return Path(ws.store.repo.commondir())


def hooks_install(*, ws: Workspace | None = None, git_dir: Path | None = None) -> HooksInstalled:
    """Install monte's git hooks, in a monte repository or a bare server repository (run inside
    it, or name it with ``$GIT_DIR``); an existing hook is kept as ``<name>.local`` and runs first."""
    from monte import ci, githooks

    where = git_dir or _git_dir(ws)
    root = ws.repo_root if ws is not None else (where.parent if where.name == ".git" else None)
    return HooksInstalled(installed=githooks.install(where, spec=ci.install_spec(root)))


def hooks_uninstall(*, ws: Workspace | None = None) -> HooksRemoved:
    """Remove the git hooks monte installed (a hook of the team's own that monte chained is put back)."""
    from monte import githooks

    return HooksRemoved(removed=githooks.uninstall(_git_dir(ws)))
