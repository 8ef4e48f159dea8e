"""A status as printed, kept for the state of the repository it was made from
(:func:`status_view`), and what ``monte ledger verify`` derives again of a kept view or fold."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from monte.status.document import experiment_status
from monte.status.facts import facts_version
from monte.status.fold import Dead
from monte.workspace import Workspace

if TYPE_CHECKING:
    from monte.ledger.derived import Fold, View

#: Bump when what a view holds changes. A view's key also digests the code that makes the
#: document (:data:`VIEW_CODE`, :func:`facts_version`) and the renderer's (``code``).
VIEW_VERSION = "status-view 1"
#: monte's modules a status document is made by, beside the facts' (paths under ``monte/``)
VIEW_CODE = ("status/__init__.py", "status/lineage.py", "status/fold.py", "status/document.py", "status/view.py",
             "status/search.py", "stats/search.py",
             "ledger/views.py", "ledger/rules.py", "ledger/seal.py", "ledger/experiment.py",
             "stats/power.py", "stats/paired.py", "stats/printing.py", "stats/inputs.py", "stats/unpaired.py",
             "stats/t_intervals.py", "jsonl.py")
#: renders a status document (``api.status``'s dict, ``json_rows`` for ``json``, ``table`` for
#: ``text``) as the command prints it
Render = Callable[[dict[str, Any]], "bytes | str"]


def code_digest(paths: Sequence[str]) -> str:
    """A digest of the files that make a view: the facts' code (:func:`facts_version`), :data:`VIEW_CODE`, ``paths``."""
    import hashlib
    from pathlib import Path

    here = Path(__file__).resolve().parents[1]  # monte/
    h = hashlib.sha256(facts_version().encode())
    for path in (*(here / p for p in VIEW_CODE), *map(Path, paths)):
        h.update(Path(path).read_bytes())
    return h.hexdigest()[:32]


def state_key(ws: Workspace, experiment: str, mode: str, code: str) -> str:
    """A digest of everything a status of ``experiment`` reads from git: its ledger tip (rows,
    measurement, nominations), every ledger's tip and the results bucket's mirrors (the seal's
    disclosure counts their test reads), every cohort's base ref (its weights identity), the
    vault's tip (the floors); with the output's ``mode`` and the ``code`` that makes it. Refs
    only: a few files read, no object."""
    import hashlib

    from monte.ledger.experiment import experiment_names
    from monte.ledger.refs import MIRROR, VAULT_REF, experiment_ref, ledger_ref

    store = ws.store
    parts = [VIEW_VERSION, code, mode, experiment, f"vault {store.tip(VAULT_REF)!r}"]
    names = experiment_names(store)
    for name in names:
        parts.append(f"{name} {store.tip(ledger_ref(name))!r}")
        parts += [f"{ref} {sha!r}" for ref, sha in sorted(store.refs_under(experiment_ref(name, "base")).items())]
    parts += [f"{ref} {sha!r}" for ref, sha in sorted(store.refs_under(MIRROR).items())]
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()


def _depends_hold(ws: Workspace, depends: Sequence[tuple[str, Any]]) -> bool:
    return all(what == "floors" and found in ("vault", "none") for what, found in depends)


def make_view(ws: Workspace, experiment: str, mode: str, render: Render, key: str,
              dead: Dead | None = None, kept: Fold | None = None, code: str = "") -> tuple[bytes | str, View | None,
                                                                                        Fold | None]:
    """The status of ``experiment`` rendered, its view for the cache (None when it read what no
    key covers: the data root's floors), and what it gathered of the rows (``code``'s; None
    with the view). ``kept``: a fold to continue from (:func:`experiment_status`)."""
    from monte.ledger.derived import Fold, View

    made: dict[str, Any] = {}
    doc = experiment_status(ws, experiment, json_rows=mode == "json", table=mode == "text", dead=dead, made=made,
                            kept=kept)
    out = render(doc)
    depends = made["depends"]
    if not _depends_hold(ws, depends):
        return out, None, None
    return out, View(key, made["judged"], depends, out), Fold(code, *made["fold"][1:])


def status_view(ws: Workspace, experiment: str | None, mode: str, render: Render,
                code: Sequence[str] = ()) -> bytes | str:
    """``monte status`` as printed off a terminal (``mode``: ``json`` or ``text``; ``render``:
    how, from ``code``'s files), made once per state of the repository (:func:`state_key`) and
    kept in the experiment's view cache (:class:`monte.ledger.derived.ViewCache`, signed, checked
    by ``monte ledger verify``). Each read still judges every live-looking run's process: a view
    is printed only when each is judged as it was then; otherwise the status is made again.
    Made again, it continues from the rows gathered for the last view
    (:class:`monte.ledger.derived.FoldCache`) when the ledger only appended rows since."""
    from monte.ledger.derived import FoldCache, ViewCache
    from monte.ledger.experiment import one_experiment
    from monte.processes import is_dead_at

    exp = one_experiment(ws.store, experiment)
    digest = code_digest(code)
    key = state_key(ws, exp, mode, digest)
    git_dir = ws.store.repo.commondir()
    cache = ViewCache(git_dir, exp, mode, VIEW_VERSION)
    view = cache.view
    if (view is not None and view.key == key and _depends_hold(ws, view.depends)
            and all(is_dead_at(recorded, *who) == gone for recorded, who, gone in view.live)):
        return view.payload
    folds = FoldCache(git_dir, exp, mode, VIEW_VERSION)
    kept = folds.fold if folds.fold is not None and folds.fold.code == digest else None
    out, made, gathered = make_view(ws, exp, mode, render, key, kept=kept, code=digest)
    if made is not None and gathered is not None:
        folds.save(gathered)
        cache.save(made)
    return out


def rederive_view(ws: Workspace, experiment: str, mode: str, stored: View, render: Render,
                  code: Sequence[str] = ()) -> View | None:
    """For ``monte ledger verify``: the view of the repository's current state made again, with
    the liveness judgements ``stored`` holds (a process that died since is not a forgery);
    None when ``stored`` is not of the current state (it is never used)."""
    from monte.ledger.experiment import experiment_names

    if experiment not in experiment_names(ws.store):
        return None
    key = state_key(ws, experiment, mode, code_digest(code))
    if stored.key != key:
        return None
    _, again, _ = make_view(ws, experiment, mode, render, key, dead=_replay(stored.live))
    return again


def _replay(live: Sequence[tuple[str, Any, bool]]) -> Dead:
    """Judges each live-looking run as ``live`` records it (the rest as now)."""
    judged = {(recorded, tuple(who)): gone for recorded, who, gone in live}

    def replay(recorded: str, *who: Any) -> bool:
        found = judged.get((recorded, tuple(who)))
        if found is None:
            from monte.processes import is_dead_at

            return is_dead_at(recorded, *who)
        return found

    return replay


def refold(ws: Workspace, experiment: str, mode: str, stored: Fold,
           code: Sequence[str] = ()) -> tuple[Any, dict[Any, Any]] | None:
    """For ``monte ledger verify``: what a status gathers of the rows at ``stored``'s ledger
    commit (marshal-loaded, with the liveness judgements ``stored`` holds), and each of its memo's
    figures computed again; None when ``stored`` is another code's (never used) or its commit is
    not in this repository."""
    import marshal

    from monte.ledger.experiment import experiment_names
    from monte.stats.power import recompute_memo

    if experiment not in experiment_names(ws.store) or stored.code != code_digest(code):
        return None
    try:
        ws.store.repo.object_store[stored.tip]  # type: ignore[index]
    except (KeyError, ValueError):
        return None
    try:
        acc: dict[str, Any] = marshal.loads(stored.state)
        live, floor = acc["judged"], acc.get("floor")
    except (ValueError, EOFError, TypeError, KeyError, AttributeError):
        live, floor = [], None
    made: dict[str, Any] = {}
    experiment_status(ws, experiment, json_rows=mode == "json", table=mode == "text", dead=_replay(live),
                      made=made, at=stored.tip)
    memo = {}
    for k in stored.memo:
        try:
            memo[k] = recompute_memo(k)
        except (ValueError, TypeError):
            memo[k] = ("not a figure", k)
    again = marshal.loads(made["fold"].state)
    if floor is not None and again.get("floor") != floor:  # made under other floors: never continued now
        return None
    return again, memo
