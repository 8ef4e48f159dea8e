"""Where a model is, said so that it means the same thing on every machine.

A record never holds a folder of the machine that wrote it. It holds a model *reference*: the
model's identity (the weights hash, :func:`monte.models.identity.weights_identity`, which names
the cohort; a checkpoint's lineage commit) plus one of these locations:

- ``repo:PATH``: a folder inside the repository, relative to its root (a copy or a clone of the
  repository at another path finds its own);
- ``data:PATH``: a folder on the data root, relative to it (``MONTE_DATA_ROOT`` on another
  machine resolves it);
- ``hf:ORG/NAME@SHA``: a hub model repo at one commit (pinned when it was first named);
- ``name:NAME``: a folder the user named, looked up on each machine: the environment variable
  ``MONTE_MODEL_<NAME>`` (upper-cased, other characters as ``_``), else ``models: {NAME: PATH}``
  in ``.monte.yaml``. A folder outside the repository and the data root that no name points at
  is given one (its folder name), written into ``.monte.yaml`` when something is recorded.

What a user types for ``--model`` (or a recipe's ``model:``/``teacher:``) is any of these, a
folder (relative to the working directory, then to the repository root), a name, or a hub id
``ORG/NAME[@REVISION]``. A reference recorded by an older monte (an absolute folder) still
resolves as typed. Wherever a reference is resolved, the weights found are proven against what
the ledger recorded at that location (:func:`prove`): another model there is ``E_INTEGRITY``.
"""

from __future__ import annotations

import io
import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from monte.errors import MonteError, error
from monte.ledger.views import own_dir
from monte.workspace import CONFIG_FILE, Workspace

if TYPE_CHECKING:
    from monte.ledger.store import Store

KINDS = ("repo", "data", "hf", "name")
ENV_PREFIX = "MONTE_MODEL_"
CONFIG_KEY = "models"
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
_HUB_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*/[A-Za-z0-9][A-Za-z0-9._-]*")
_SHA = re.compile(r"[0-9a-f]{40}")
FIX = ("pass a model folder, a name (MONTE_MODEL_<NAME>=PATH, or `models: {NAME: PATH}` in .monte.yaml), "
       "or a hub id ORG/NAME[@REVISION]")


@dataclass(frozen=True)
class Located:
    """A model reference and where it is on this machine."""

    ref: str  # what records hold: repo:..., data:..., hf:...@SHA, name:...
    folder: Path | None  # the folder here (None: a hub model not fetched)
    register: str | None = None  # a name monte gives this folder in .monte.yaml when it records

    def shown(self) -> str:
        """For the person at the keyboard: the reference and the folder it resolved to here."""
        where = f" ({self.folder})" if self.folder is not None else ""
        new = f"; named {self.register!r} in {CONFIG_FILE} when recorded" if self.register else ""
        return f"{self.ref}{where}{new}"


def env_var(name: str) -> str:
    """The environment variable that says where the model ``name`` is on this machine."""
    return ENV_PREFIX + re.sub(r"[^A-Z0-9]", "_", name.upper())


def is_reference(text: str) -> bool:
    """Is ``text`` a portable reference (not a machine-local folder)?"""
    kind, _, rest = text.partition(":")
    return kind in KINDS and bool(rest)


def configured_names(ws: Workspace) -> dict[str, str]:
    """``models:`` in ``.monte.yaml``: name -> folder (as written there)."""
    raw = ws.config.get(CONFIG_KEY)
    if raw is None:
        return {}
    if not isinstance(raw, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in raw.items()):
        raise error("E_BAD_INPUT", f"{CONFIG_FILE}: {CONFIG_KEY} must map names to folders",
                    f"write `{CONFIG_KEY}: {{NAME: PATH}}` in {ws.repo_root / CONFIG_FILE}")
    return dict(raw)


def lookup(ws: Workspace, name: str) -> Path | None:
    """The folder the name points at on this machine (environment variable first), or None."""
    raw = os.environ.get(env_var(name)) or configured_names(ws).get(name)
    if not raw:
        return None
    p = Path(os.path.expanduser(raw))
    return p if p.is_absolute() else ws.repo_root / p


def locate(ws: Workspace, typed: str, *, fetch: bool = True) -> Located:
    """Where the model ``typed`` names is, and how a record names it. ``fetch=False``: a hub
    model is pinned to its commit but not downloaded."""
    typed = typed.strip()
    if not typed or any(ord(c) < 32 for c in typed):
        raise error("E_USAGE", f"{typed!r} names no model", FIX)
    kind, _, rest = typed.partition(":")
    if kind in ("repo", "data") and rest:
        root = ws.repo_root if kind == "repo" else ws.data_root
        rel = Path(rest)
        if rel.is_absolute() or ".." in rel.parts:
            raise error("E_USAGE", f"{typed!r}: a {kind}: path is relative and stays inside its root", FIX)
        return Located(f"{kind}:{rel.as_posix()}", _folder(root / rel, typed))
    if kind == "name" and rest:
        folder = lookup(ws, rest)
        if folder is None:
            raise error("E_NOT_FOUND", f"no folder is named {rest!r} on this machine (the ledger names the model "
                        f"{typed})", f"say where it is here: {env_var(rest)}=PATH, or `{CONFIG_KEY}: {{{rest}: PATH}}` "
                        f"in {CONFIG_FILE}")
        return Located(typed, _folder(folder, typed))
    if kind == "hf" and rest:
        return _hub(rest, fetch=fetch, typed=typed)
    p = Path(os.path.expanduser(typed))
    for cand in ([p] if p.is_absolute() else [Path.cwd() / p, ws.repo_root / p]):
        if os.path.isdir(cand):  # False on any OSError (a name too long, a component that is a file)
            return _classify(ws, cand)
    if _NAME.fullmatch(typed) and lookup(ws, typed) is not None:
        return locate(ws, f"name:{typed}", fetch=fetch)
    if _HUB_ID.fullmatch(typed.split("@", 1)[0]) and not typed.startswith((".", "~")):
        try:
            return _hub(typed, fetch=fetch, typed=typed)
        except Exception as e:  # noqa: BLE001 - not on the hub either: say what was tried
            offline = os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in ("1", "true", "yes", "on")
            if isinstance(e, MonteError) and e.code == "E_STORAGE" and not offline:  # the network failed
                raise error("E_STORAGE", f"no model folder {typed}, and {e.message}", e.fix) from None
            msg = getattr(e, "message", type(e).__name__)
            raise error("E_NOT_FOUND", f"no model folder {typed}, and no hub model of that id ({msg})", FIX) from None
    raise error("E_NOT_FOUND", f"no model folder {typed}", FIX)


def _folder(folder: Path, ref: str) -> Path:
    if not os.path.isdir(folder):
        raise error("E_NOT_FOUND", f"no model folder {folder} (the ledger names the model {ref})",
                    "put the model there (a copy, `monte model init` with its seed, or the hub), or say where it "
                    "is with a name: " + FIX)
    return folder


def _within(path: Path, root: Path) -> str | None:
    try:
        return path.relative_to(root.resolve()).as_posix()
    except ValueError:
        return None


def _classify(ws: Workspace, folder: Path) -> Located:
    """A folder that exists here: on the data root, in the repository, named, or given a name."""
    real = folder.resolve()
    rel = _within(real, ws.data_root)
    if rel is not None and rel != ".":
        return Located(f"data:{rel}", real)
    rel = _within(real, ws.repo_root)
    if rel is not None and rel != ".":
        return Located(f"repo:{rel}", real)
    taken: dict[str, Path] = {}
    for name in configured_names(ws):
        there = lookup(ws, name)
        if there is not None:
            taken[name] = there
    for var, value in os.environ.items():
        if var.startswith(ENV_PREFIX) and value and len(var) > len(ENV_PREFIX):
            name = var[len(ENV_PREFIX):].lower()
            if env_var(name) == var:
                taken.setdefault(name, Path(os.path.expanduser(value)))
    for name, there in sorted(taken.items()):
        if os.path.isdir(there) and there.resolve() == real:
            return Located(f"name:{name}", real)
    stem = re.sub(r"[^A-Za-z0-9._-]", "-", real.name).strip(".-_")[:60] or "model"
    stem = stem if _NAME.fullmatch(stem) else "model"
    lowered = {n.lower() for n in taken}
    name, k = stem, 1
    while name.lower() in lowered or os.environ.get(env_var(name)):
        k += 1
        name = f"{stem}-{k}"
    return Located(f"name:{name}", real, register=name)


def _hub(spec: str, *, fetch: bool, typed: str) -> Located:
    from monte.storage import hub

    repo, _, revision = spec.partition("@")
    if not _HUB_ID.fullmatch(repo):
        raise error("E_USAGE", f"{typed!r} is not a hub model id", "write hf:ORG/NAME[@REVISION]")
    folder, sha = hub.fetch_model(repo, revision or None, download=fetch)
    return Located(f"hf:{repo}@{sha}", folder)


def remember(ws: Workspace, name: str | None, folder: str | Path | None) -> None:
    """Write the name monte gave a folder (:attr:`Located.register`) into ``.monte.yaml``
    (``models:``), comments kept, under a lock: only when a record that names it is written."""
    import fcntl

    from ruamel.yaml import YAML
    from ruamel.yaml.error import YAMLError

    if not name or not folder:
        return
    folder = Path(folder)
    path = ws.repo_root / CONFIG_FILE
    lock_dir = own_dir(ws.repo_root / ".git")
    if not lock_dir.is_dir():
        lock_dir = ws.data_root
    with open(lock_dir / "config.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yaml = YAML()
        yaml.width = 4096  # a long folder stays on its line
        try:
            data = yaml.load(path.read_bytes().decode("utf-8")) if path.exists() else None
            data = {} if data is None else data
            if not isinstance(data, dict):
                raise error("E_BAD_INPUT", f"{path} must hold a mapping", f"fix or delete {path}")
            models = data.setdefault(CONFIG_KEY, {})
            if not isinstance(models, dict):
                raise error("E_BAD_INPUT", f"{CONFIG_FILE}: {CONFIG_KEY} must map names to folders",
                            f"write `{CONFIG_KEY}: {{NAME: PATH}}` in {path}")
            there = models.get(name)
            if there is not None and Path(os.path.expanduser(str(there))).resolve() != folder.resolve():
                raise error("E_CONFLICT", f"the name {name!r} was given to {there} meanwhile", "run the command again")
            models[name] = str(folder)
            text = io.StringIO()
            yaml.dump(data, text)
        except (YAMLError, UnicodeDecodeError, RecursionError) as e:
            raise error("E_BAD_INPUT", f"{path} cannot be updated ({type(e).__name__})", f"fix or delete {path}") from None
        tmp = path.with_name(f"{CONFIG_FILE}.{os.getpid()}.tmp")
        tmp.write_text(text.getvalue(), encoding="utf-8")
        os.replace(tmp, path)
    ws.config.setdefault(CONFIG_KEY, {})[name] = str(folder)


def recorded_weights(store: Store, experiment: str, located: Located) -> set[str]:
    """The weights identities the experiment's base commits record at this location (an older
    monte's absolute folder counts when it is this very folder)."""
    from monte.ledger.refs import experiment_prefix
    from monte.ledger.store import Snapshot

    out: set[str] = set()
    here = located.folder.resolve() if located.folder is not None else None
    for tip in store.refs_under(experiment_prefix(experiment) + "base/").values():
        raw = Snapshot(store.repo, tip).read("base.json")
        if raw is None:
            continue
        try:
            base: dict[str, Any] = json.loads(raw)
        except ValueError:
            continue
        # a near-copy's base commit records the folder's own identity beside the weights it keys by
        model, weights = str(base.get("model") or ""), base.get("identity") or base.get("weights")
        if not weights:
            continue
        same = model == located.ref or (here is not None and os.path.isabs(model)
                                        and os.path.isdir(model) and Path(model).resolve() == here)
        if same:
            out.add(str(weights))
    return out


def prove(store: Store, experiment: str, located: Located, weights: str, also: frozenset[str] = frozenset()) -> None:
    """Refuse (``E_INTEGRITY``) a folder whose weights are not those the ledger recorded at its
    location: a reference never silently reads another model. ``also``: other identities of the
    same folder (the one an older monte computed and recorded)."""
    want = recorded_weights(store, experiment, located)
    if want and weights not in want and not (also & want):
        raise error("E_INTEGRITY", f"{located.ref} ({located.folder}) does not hold the model the ledger recorded "
                    f"there: its weights are {weights[:12]}, the ledger's {', '.join(sorted(w[:12] for w in want))}",
                    f"put the recorded model back at {located.folder} (a copy, `monte model init` with its seed, "
                    "or the hub), or pass --model naming the folder you mean (other weights are another cohort, "
                    "in a folder of their own)")


def data_relative(ws: Workspace, path: str | Path | None) -> str | None:
    """A folder on the data root as records hold it: relative to the data root."""
    if path is None:
        return None
    p = Path(path)
    if not p.is_absolute():
        return p.as_posix()
    rel = _within(p.resolve(), ws.data_root)
    return rel if rel is not None else str(p)
