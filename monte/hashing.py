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


def read_bounded(path: str | os.PathLike[str], cap: int, what: str = "input") -> bytes:
    """A regular file's bytes, refusing (``E_BAD_INPUT``) a FIFO, a device, a folder or a file
    larger than ``cap`` before reading it: opened without blocking (a FIFO with no writer would
    hang ``open``), judged by ``fstat`` of what was opened, and read to at most ``cap`` bytes
    (a file that grows while read is refused too)."""
    import stat

    from monte.errors import error

    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as e:
        raise error("E_BAD_INPUT", f"{what} {path} cannot be read: {e.strerror or type(e).__name__}",
                    "pass a readable regular file") from None
    with os.fdopen(fd, "rb", buffering=0) as f:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise error("E_BAD_INPUT", f"{what} {path} is not a regular file (a FIFO, a device or a folder)",
                        "pass a regular file")
        if st.st_size > cap:
            raise error("E_BAD_INPUT", f"{what} {path} is {st.st_size} bytes, over the cap of {cap} bytes",
                        f"pass a file of at most {cap} bytes")
        data = f.read(cap + 1)
    if len(data) > cap:
        raise error("E_BAD_INPUT", f"{what} {path} grew past the cap of {cap} bytes while read",
                    f"pass a file of at most {cap} bytes that is not being written")
    return bytes(data)


def copy_hashed(src: str | os.PathLike[str], dst: str | os.PathLike[str]) -> str:
    """Copy a regular file, hashing the bytes as they are read: the copy holds exactly the bytes
    whose sha256 is returned (one read of ``src``; a file swapped after this read is not in the
    copy). A FIFO or device is refused (``E_BAD_INPUT``) without blocking."""
    import stat

    from monte.errors import error

    h = hashlib.sha256()
    buf, view = _buffer()
    fd = os.open(src, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    with os.fdopen(fd, "rb", buffering=0) as f:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise error("E_BAD_INPUT", f"{src} is not a regular file (a FIFO, a device or a folder)",
                        "a model folder holds regular files")
        with open(dst, "wb") as g:
            while n := f.readinto(buf):
                h.update(view[:n])
                g.write(view[:n])
            g.flush()
            os.fsync(g.fileno())
    return h.hexdigest()
