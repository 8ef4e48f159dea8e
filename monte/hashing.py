"""sha256 of files, as fast as the machine's ``sha256sum``.

hashlib releases the GIL while it hashes, so files are hashed on a small thread pool, each read
in large chunks into one reused buffer (no per-chunk allocation).
"""

from __future__ import annotations

import hashlib
import os
import threading
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

_CHUNK = 1 << 20


_local = threading.local()


def _buffer() -> tuple[bytearray, memoryview]:
    """One read buffer per thread: allocating (and zeroing) 1 MiB per file dominated small files."""
    pair: tuple[bytearray, memoryview] | None = getattr(_local, "pair", None)
    if pair is None:
        buf = bytearray(_CHUNK)
        pair = _local.pair = (buf, memoryview(buf))
    return pair


def sha256_file(path: str | os.PathLike[str]) -> str:
    h = hashlib.sha256()
    buf, view = _buffer()
    with open(path, "rb", buffering=0) as f:
        while n := f.readinto(buf):
            h.update(view[:n])
    return h.hexdigest()


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def sha256_files(paths: Iterable[str | os.PathLike[str]], workers: int | None = None) -> dict[str, str]:
    """Hash many files; returns ``{str(path): hexdigest}`` in the order given."""
    names = [str(p) for p in paths]
    if len(names) <= 1:
        return {p: sha256_file(p) for p in names}
    workers = workers or min(len(names), os.cpu_count() or 1)
    with ThreadPoolExecutor(max_workers=workers) as pool:
        return dict(zip(names, pool.map(sha256_file, names), strict=True))


def hash_tree(root: Path) -> dict[str, dict[str, int | str]]:
    """``{relative posix path: {"sha256", "size"}}`` for every regular file under ``root``.

    Symlinks are refused: a frozen folder holds bytes, not pointers elsewhere.
    """
    from monte.errors import error

    files: list[Path] = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        for name in sorted(filenames) + [d for d in dirnames if (Path(dirpath) / d).is_symlink()]:
            p = Path(dirpath) / name
            if p.is_symlink():
                raise error(
                    "E_UNSAFE_PATH",
                    f"{p} is a symlink; a frozen folder may hold only regular files",
                    "replace the link with the file itself",
                )
            files.append(p)
    digests = sha256_files(files)
    return {
        p.relative_to(root).as_posix(): {"sha256": digests[str(p)], "size": p.stat().st_size}
        for p in files
    }
