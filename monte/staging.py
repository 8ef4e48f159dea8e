"""Staging folders: a fresh folder on the file system a frozen folder will live on, so its bytes
are whole there before anything is recorded and the last step is one rename; and the sweep of
those a killed process left. Below every freeze, install and fetch (``envs/``, ``datasets/``,
``frozen.py``); it imports nothing of monte."""

from __future__ import annotations

import errno
import os
import shutil
import socket
import uuid
from pathlib import Path

#: A staging folder beside the destination, when the destination is on another file system than
#: ``<data root>/tmp`` (``datasets/`` or ``environments/`` a symlink to another disk).
NEAR = ".staging"


def _owned_name() -> str:
    return f"freeze-{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:8]}"


def staging_dir(data_root: Path, dest: Path | None = None) -> Path:
    """A fresh folder on the file system ``dest`` will live on, so the bytes are whole there
    before anything is recorded and the final move is an atomic rename: ``<data root>/tmp``, or
    ``<dest's parent>/.staging`` when that is another file system. Its name says which process
    on which host owns it (:func:`stale_staging` reads it)."""
    tmp = data_root / "tmp"
    tmp.mkdir(parents=True, exist_ok=True)
    if dest is not None:
        dest.parent.mkdir(parents=True, exist_ok=True)
        if os.stat(dest.parent).st_dev != os.stat(tmp).st_dev:
            tmp = dest.parent / NEAR
            tmp.mkdir(exist_ok=True)
    folder = tmp / _owned_name()
    folder.mkdir()
    return folder


def _staging_places(data_root: Path) -> list[Path]:
    return [data_root / "tmp", data_root / "environments" / NEAR, data_root / "datasets" / NEAR]


def stale_staging(data_root: Path) -> list[Path]:
    """Staging folders whose owner, a process on this host, is gone: a freeze, install or fetch
    killed midway (SIGKILL, the OOM killer). Another host's, or a live process's, are left be."""
    out = []
    for tmp in _staging_places(data_root):
        for p in sorted(tmp.iterdir()) if tmp.is_dir() else []:
            if not (p.name.startswith("freeze-") and p.is_dir()):
                continue
            parts = p.name[len("freeze-"):].rsplit("-", 2)
            host, pid = (parts[0], parts[1]) if len(parts) == 3 else ("", parts[0])  # ("": before hosts)
            if host not in ("", socket.gethostname()) or not pid.isdigit() or int(pid) == os.getpid():
                continue
            try:
                os.kill(int(pid), 0)
            except ProcessLookupError:
                out.append(p)
            except (PermissionError, OverflowError):
                pass
    return out


def move_into_place(staged: Path, dest: Path) -> None:
    """Rename ``staged`` to ``dest`` (atomic; fails if ``dest`` exists and is not empty). Across
    file systems (EXDEV: a staging folder made before ``dest``'s folder moved to another disk)
    the folder is copied beside ``dest`` first, so the last step is still one rename there."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    try:
        os.rename(staged, dest)
        tidy(staged.parent)
        return
    except OSError as e:
        if e.errno != errno.EXDEV:
            raise
    near = dest.parent / NEAR / _owned_name()
    near.parent.mkdir(exist_ok=True)
    try:
        shutil.copytree(staged, near, symlinks=True)
        os.rename(near, dest)
    except BaseException:
        shutil.rmtree(near, ignore_errors=True)
        raise
    finally:
        tidy(near.parent)
    shutil.rmtree(staged, ignore_errors=True)


def tidy(near: Path) -> None:
    """Remove an empty ``.staging`` folder (another freeze's staging in it keeps it)."""
    if near.name == NEAR:
        try:
            near.rmdir()
        except OSError:
            pass


def discard(staged: Path) -> None:
    shutil.rmtree(staged, ignore_errors=True)
    tidy(staged.parent)
