"""Frozen folders tracked by DVC in this repository: what plain ``dvc`` needs to see monte's freezes.

For each frozen Environment or Dataset monte writes the pointer ``dvc add`` would write, beside
the folder on the data root: ``environments/<name>.dvc`` or ``datasets/<name>.dvc`` (DVC 3:
``hash: md5``, the folder's ``.dir`` hash, its size and file count), un-ignores it in the data
root's ``.gitignore`` and stages it in git. With that pointer committed,

- ``dvc status``, ``dvc data status`` and ``dvc list . -R --dvc-only`` show the folder;
- ``dvc gc -w`` (and ``-a``, ``-T``, ``--all-commits``, each with ``-c``) keeps its objects, in
  the DVC cache and in the Vault (a DVC remote);
- in a clone, ``dvc pull`` restores it from the Vault, file for file.

The folder's files go into DVC's cache (``.dvc/cache``, or DVC's ``cache.dir``) as links, not
copies: reflink, else hardlink, in the order DVC's ``cache.type`` gives (``monte init`` sets
``reflink,hardlink,copy``; unset, monte uses that order too). A hardlinked file is DVC's
protected cache object, so it is read-only: a frozen file is never edited in place. A symlink is
never used: a frozen folder holds regular files only (:func:`monte.manifest.verify_folder`).

A data root outside the repository (``$MONTE_DATA_ROOT``) cannot hold DVC outputs (DVC 3 tracks
nothing outside its repository): the pointers then live in the repository's ``.monte/``, so
``dvc gc`` still keeps every object and ``dvc pull`` restores a copy *there*; monte itself
reads and fetches the data root (``monte env install``, ``monte dataset show``).

Each freeze's DVC hash is also a trailer of its vault-ref commit (``Monte-Dvc-Md5``,
``-Size``, ``-Nfiles``), so ``monte init`` can write the pointer of any freeze the vault ref
records, with or without its bytes here.
"""

from __future__ import annotations

import contextlib
import os
import re
import socket
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from monte.errors import MonteError, error, in_words
from monte.workspace import DEFAULT_DATA_ROOT, Workspace

if TYPE_CHECKING:
    from dvc.repo import Repo

_PLURAL = {"environment": "environments", "dataset": "datasets"}
SUFFIX = ".dvc"
_TMP = ".tmp"
#: The link types monte tries, in order, when DVC's ``cache.type`` is not set (``monte init`` sets it).
CACHE_TYPES = ["reflink", "hardlink", "copy"]

DATA_ROOT_GITIGNORE = """\
# monte's data root: run folders and scratch stay out of git. Frozen environments and datasets
# are tracked by DVC: commit their pointers (environments/NAME.dvc, datasets/NAME.dvc).
*
!.gitignore
""" + "".join(f"!/{p}/\n" for p in _PLURAL.values()) + "".join(f"!/{p}/*.dvc\n" for p in _PLURAL.values())

_DIR_MD5 = re.compile(r"^[0-9a-f]{32}\.dir$")


@dataclass(frozen=True)
class DvcOut:
    """A frozen folder as DVC knows it: the md5 of its ``.dir`` listing, its bytes, its files."""

    md5: str
    size: int
    nfiles: int

    def entry(self, path: str) -> dict[str, Any]:
        """The ``outs`` entry of a ``.dvc`` file, as ``dvc add`` writes it (DVC 3)."""
        return {"md5": self.md5, "size": self.size, "nfiles": self.nfiles, "hash": "md5", "path": path}

    def trailers(self) -> dict[str, str]:
        return {"Monte-Dvc-Md5": self.md5, "Monte-Dvc-Size": str(self.size), "Monte-Dvc-Nfiles": str(self.nfiles)}

    @classmethod
    def from_trailers(cls, t: dict[str, str]) -> DvcOut | None:
        try:
            out = cls(t["Monte-Dvc-Md5"], int(t["Monte-Dvc-Size"]), int(t["Monte-Dvc-Nfiles"]))
        except (KeyError, ValueError):
            return None
        return out if _DIR_MD5.match(out.md5) else None


# --- where the pointers are -------------------------------------------------------------------


def pointer_root(ws: Workspace) -> Path:
    """The data root when it is inside the repository, else the repository's ``.monte/``."""
    return ws.data_root if ws.data_root.is_relative_to(ws.repo_root) else ws.repo_root / DEFAULT_DATA_ROOT


def pointer_path(ws: Workspace, kind: str, name: str) -> Path:
    return pointer_root(ws) / _PLURAL[kind] / f"{name}{SUFFIX}"


def check_trackable(kind: str, name: str) -> None:
    """A frozen folder named ``X.dvc`` would be taken for the pointer of ``X`` (DVC refuses
    such an output too): refused before anything is written."""
    if name.lower().endswith(SUFFIX):
        raise error("E_INVALID_NAME", f"the {kind} name {name!r} ends in {SUFFIX}: the folder would collide "
                    f"with DVC's pointer of {name[: -len(SUFFIX)]!r}", f"freeze under a name not ending in {SUFFIX}")


def read_pointer(path: Path) -> DvcOut | None:
    """The one output a pointer names, or None when there is no pointer or it is not one."""
    from ruamel.yaml import YAML
    from ruamel.yaml.error import YAMLError

    try:
        doc = YAML(typ="safe").load(path.read_text(encoding="utf-8"))
        out = doc["outs"][0]
        found = DvcOut(str(out["md5"]), int(out.get("size", -1)), int(out.get("nfiles", -1)))
    except (OSError, UnicodeDecodeError, YAMLError, KeyError, IndexError, TypeError, ValueError):
        return None
    return found if _DIR_MD5.match(found.md5) else None


def write_pointer(ws: Workspace, kind: str, name: str, out: DvcOut) -> Path:
    """Write the pointer (atomically), make sure git does not ignore it, and stage it."""
    import io

    from ruamel.yaml import YAML

    path = pointer_path(ws, kind, name)
    path.parent.mkdir(parents=True, exist_ok=True)
    gitignore = ensure_gitignore(pointer_root(ws))
    text = io.StringIO()
    YAML().dump({"outs": [out.entry(name)]}, text)  # quotes a name YAML would read as a number
    if not path.is_file() or path.read_text(encoding="utf-8") != text.getvalue():
        # a torn pointer would stop every `dvc` command: written whole beside it, then renamed;
        # a writer killed in between leaves the temporary, which :func:`sweep_temps` removes
        tmp = path.with_name(f".{path.name}.{socket.gethostname()}-{os.getpid()}{_TMP}")
        tmp.write_text(text.getvalue(), encoding="utf-8")
        os.replace(tmp, path)
    stage(ws.repo_root, [p for p in (gitignore, path) if p is not None])
    return path


def sweep_temps(ws: Workspace) -> None:
    """Remove the pointer temporaries of writers on this host that are gone (killed mid-write)."""
    ours = re.compile(rf"^\..+{re.escape(SUFFIX)}\.{re.escape(socket.gethostname())}-(\d+){re.escape(_TMP)}$")
    for folder in _PLURAL.values():
        base = pointer_root(ws) / folder
        for p in base.glob(f".*{SUFFIX}.*{_TMP}") if base.is_dir() else []:
            m = ours.match(p.name)
            if m is None or int(m.group(1)) == os.getpid():
                continue
            pid = m.group(1)
            try:
                os.kill(int(pid), 0)
            except ProcessLookupError:
                with contextlib.suppress(OSError):
                    p.unlink()
            except (PermissionError, OverflowError):
                pass


def ensure_gitignore(root: Path) -> Path | None:
    """The data root's ``.gitignore`` ignores everything but the pointers: written when missing,
    and the un-ignore lines appended to one written before pointers existed. The path when it
    was written or changed."""
    gi = root / ".gitignore"
    if not gi.exists():
        root.mkdir(parents=True, exist_ok=True)
        gi.write_text(DATA_ROOT_GITIGNORE)
        return gi
    have = gi.read_text(encoding="utf-8", errors="replace")
    missing = [line for line in DATA_ROOT_GITIGNORE.splitlines() if line.startswith("!/") and line not in have.splitlines()]
    if not missing:
        return None
    gi.write_text(have + ("" if have.endswith("\n") or not have else "\n")
                  + "# frozen folders' DVC pointers are committed (monte)\n" + "\n".join(missing) + "\n")
    return gi


def stage(repo_root: Path, paths: list[Path]) -> None:
    """``git add`` the pointers (as ``dvc add`` suggests), so the next commit carries them. A
    locked index (another git command running) leaves them unstaged: ``git status`` shows them."""
    from dulwich import porcelain

    inside = [str(p) for p in paths if p.is_relative_to(repo_root)]
    if inside:
        with contextlib.suppress(Exception):  # staging is a convenience; the file is written
            porcelain.add(str(repo_root), inside)


# --- DVC's cache --------------------------------------------------------------------------------


@contextlib.contextmanager
def dvc_repo(repo_root: Path) -> Iterator[Repo]:
    """This repository as DVC opens it (its cache, ``cache.type``, its hash state)."""
    from dvc.exceptions import DvcException, NotDvcRepoError
    from dvc.repo import Repo

    try:
        repo = Repo(str(repo_root))
    except NotDvcRepoError:
        raise error("E_NOT_INITIALIZED", f"{repo_root} has no .dvc/: DVC cannot track its frozen folders",
                    "run `monte init` (it runs `dvc init`)") from None
    except DvcException as e:
        raise error("E_STORAGE", f"DVC cannot open {repo_root}: {in_words(e)}",
                    "fix the DVC configuration it names (.dvc/config)") from None
    try:
        yield repo
    finally:
        repo.close()


#: the loggers DVC gives its own handlers on import (INFO to stdout, WARNING to stderr)
_DVC_LOGGERS = ("dvc", "dvc_data", "dvc_objects")


@contextlib.contextmanager
def dvc_said() -> Iterator[list[str]]:
    """Keep what DVC logs while the block runs, instead of printing it: DVC prints its own
    ``ERROR: failed to transfer ...`` lines (stdout for INFO, which would break ``--json``) and
    then returns a count. The list it yields holds the WARNING-and-above lines, for monte's
    refusal to name the first (:func:`dvc_reason`)."""
    import logging

    said: list[str] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            text = record.getMessage()
            if record.exc_info and record.exc_info[1] is not None:
                text += f" - {in_words(record.exc_info[1])}"
            said.append(text)

    keep = Keep(level=logging.WARNING)
    saved = []
    for name in _DVC_LOGGERS:
        logger = logging.getLogger(name)
        saved.append((logger, logger.handlers[:], logger.propagate))
        logger.handlers[:] = [keep]
        logger.propagate = False
    try:
        yield said
    finally:
        for logger, handlers, propagate in saved:
            logger.handlers[:] = handlers
            logger.propagate = propagate


def dvc_reason(said: list[str]) -> str:
    """`` (FIRST LINE DVC LOGGED)`` for a refusal's message, or nothing when it logged none."""
    if not said:
        return ""
    more = f"; {len(said) - 1} more like it" if len(said) > 1 else ""
    return f" ({said[0]}{more})"


def _hardlink(repo: Repo) -> bool:
    """Whether DVC's ``cache.type`` allows a hardlink (dvc_data then tries reflink, hardlink,
    copy; otherwise reflink, copy)."""
    types = repo.config["cache"].get("type")
    return "hardlink" in (types or CACHE_TYPES)


def commit(repo_root: Path, folder: Path) -> tuple[DvcOut, list[str]]:
    """Put the folder into DVC's cache as links to its files (``dvc commit`` of its pointer), and
    return its DVC hash and the objects this call added (what :func:`uncommit` takes back when
    the freeze is refused). The hashes go into DVC's state: nothing is read twice."""
    from dvc_data.hashfile.build import build
    from dvc_data.hashfile.transfer import transfer
    from dvc_objects.fs.local import LocalFileSystem

    with dvc_repo(repo_root) as repo:
        cache = repo.cache.repo
        try:
            staging, meta, obj = build(cache, str(folder), LocalFileSystem(), "md5")
            oids = [str(obj.hash_info.value)] + [str(h.value) for _, _, h in obj if h is not None]  # type: ignore[attr-defined]
            added = [o for o in oids if not os.path.exists(cache.oid_to_path(o))]
            transfer(staging, cache, {obj.hash_info}, shallow=False, hardlink=_hardlink(repo))
        except OSError as e:
            raise _disk_error(folder, e) from None
    return DvcOut(str(obj.hash_info.value), int(meta.size or 0), int(meta.nfiles or 0)), added


def uncommit(repo_root: Path, oids: list[str]) -> None:
    """Take back the cache objects a refused freeze added (its files stay where they were)."""
    if not oids:
        return
    with dvc_repo(repo_root) as repo:
        for oid in oids:
            with contextlib.suppress(OSError):
                os.unlink(repo.cache.repo.oid_to_path(oid))


def in_cache(repo_root: Path, out: DvcOut) -> bool:
    """Whether DVC's cache holds the folder's listing and every file it lists."""
    import json

    with dvc_repo(repo_root) as repo:
        cache = repo.cache.repo
        listing = Path(cache.oid_to_path(out.md5))
        try:
            entries = json.loads(listing.read_bytes())
            return all(os.path.isfile(cache.oid_to_path(str(e["md5"]))) for e in entries)
        except (OSError, ValueError, KeyError, TypeError):
            return False


def _disk_error(folder: Path, e: OSError) -> MonteError:
    return error("E_STORAGE", f"DVC's cache could not take {folder}: {e.strerror or e}",
                 "free disk space or fix the permissions of .dvc/cache, then run the command again")


def settle(ws: Workspace, kind: str, name: str, folder: Path, out: DvcOut) -> Path:
    """A committed folder moved into place: tell DVC's state the hashes of its files at their
    new paths (so ``dvc status`` and later commits do not read them again), and write and stage
    its pointer."""
    import json

    from dvc_data.hashfile.hash_info import HashInfo
    from dvc_objects.fs.local import LocalFileSystem

    with dvc_repo(ws.repo_root) as repo, contextlib.suppress(OSError, ValueError, KeyError, TypeError):
        entries = json.loads(Path(repo.cache.repo.oid_to_path(out.md5)).read_bytes())
        fs = LocalFileSystem()
        repo.state.save_many([(str(folder / e["relpath"]), HashInfo("md5", str(e["md5"])), None)
                              for e in entries], fs)
    return write_pointer(ws, kind, name, out)


def track(ws: Workspace, kind: str, name: str, folder: Path) -> DvcOut:
    """Make sure DVC tracks the frozen ``folder`` (already proven against its manifest): its
    files in DVC's cache, its pointer written and staged. Nothing is hashed again when both
    are already there."""
    path = pointer_path(ws, kind, name)
    have = read_pointer(path)
    if have is not None and in_cache(ws.repo_root, have):
        gitignore = ensure_gitignore(pointer_root(ws))  # a data root from before pointers
        if gitignore is not None:
            stage(ws.repo_root, [gitignore, path])
        return have
    out, _ = commit(ws.repo_root, folder)
    settle(ws, kind, name, folder, out)
    return out


def restore_pointers(ws: Workspace) -> list[Path]:
    """The pointer of every freeze the vault ref records that has none here (a clone whose
    pointers were never committed, a vault ref fetched from another machine): from the folder
    when it is on this data root, else from the DVC hash its vault commit carries. A freeze
    recorded before monte wrote that hash, and not here, is left out (nothing knows its hash)."""
    from monte.ledger.vault_ref import Vault
    from monte.manifest import read_manifest

    vault = Vault(ws.store)
    written: list[Path] = []
    hashes: dict[tuple[str, str], dict[str, str]] | None = None
    for kind in _PLURAL:
        for name in vault.names(kind):
            if pointer_path(ws, kind, name).is_file():
                continue
            folder = ws.env_dir(name) if kind == "environment" else ws.dataset_dir(name)
            recorded = vault.get(kind, name)
            here = read_manifest(folder) if folder.is_dir() else None
            if here is not None and recorded is not None and here.fingerprint == recorded.fingerprint:
                track(ws, kind, name, folder)
                written.append(pointer_path(ws, kind, name))
                continue
            if hashes is None:
                hashes = vault.trailers()
            out = DvcOut.from_trailers(hashes.get((kind, name), {}))
            if out is not None:
                written.append(write_pointer(ws, kind, name, out))
    return written
