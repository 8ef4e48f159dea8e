"""States that many tests start from, built once per test worker and copied for each test."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any


class Kept:
    """States that many tests start from, built once per test worker by the first test that asks
    and copied for the rest (``repo``'s own way with ``_template``): a state that trains or
    evaluates a real model costs seconds, a copy milliseconds.

    ``kept.restore(name, repo, tmp_path, build)``: the first time, ``build()`` makes the state in
    this test's ``repo`` (the cwd) and ``tmp_path``, for real, and it is kept (the repository with
    its data root, the files ``build`` left beside it in ``tmp_path``, and ``$HOME``); later, the
    kept copy replaces this test's. A ``build`` that fails keeps nothing (the next test builds
    again, and fails the same way). Paths outside the repository (tiny models, recipes' teachers)
    are the worker's, the same for every test. A state is kept per environment (the ``MONTE_*``,
    ``HF_*`` and ``GIT_*`` variables a test's fixtures set): one built under a results bucket is
    no other test's start."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def restore(self, name: str, repo: Path, tmp_path: Path, build: Callable[[], None]) -> None:
        settings = sorted((k, v) for k, v in os.environ.items() if k.startswith(("MONTE_", "HF_", "GIT_")))
        key = hashlib.sha256(json.dumps(settings).encode()).hexdigest()[:16]
        saved, home = self.root / f"{name}-{key}", Path(os.environ["HOME"])
        if saved.is_dir():
            shutil.rmtree(repo)
            for part in (saved / "tmp").iterdir():
                _copy(part, tmp_path / part.name)
            shutil.copytree(saved / "home", home, symlinks=True, dirs_exist_ok=True)
            os.chdir(repo)  # the old folder is gone: the cwd is the copy (monkeypatch restores it)
            return
        build()
        partial = self.root / f".{saved.name}"
        shutil.rmtree(partial, ignore_errors=True)
        (partial / "tmp").mkdir(parents=True)
        for part in tmp_path.iterdir():
            _copy(part, partial / "tmp" / part.name)
        shutil.copytree(home, partial / "home", symlinks=True)
        partial.rename(saved)


def _copy(src: Path, dest: Path) -> None:
    if src.is_dir() and not src.is_symlink():
        shutil.copytree(src, dest, symlinks=True)
    else:
        shutil.copy2(src, dest, follow_symlinks=False)


def kept_answer(kept: Kept, name: str, repo: Path, tmp_path: Path, make: Callable[[], object]) -> Any:
    """``kept.restore`` for a build whose answer a test reads (a command's JSON, a row): the
    first time ``make()`` builds the state and its answer is kept beside it (JSON); later, that
    answer comes back with the copy, its paths under the builder's ``tmp_path`` naming this
    test's, as ``make()`` here would have named them."""
    out, where = tmp_path / f".kept-{name}.json", tmp_path / f".kept-{name}.tmp"

    def build() -> None:
        out.write_text(json.dumps(make()))
        where.write_text(str(tmp_path))

    kept.restore(name, repo, tmp_path, build)
    answer = json.loads(out.read_text().replace(json.dumps(where.read_text())[1:-1], json.dumps(str(tmp_path))[1:-1]))
    out.unlink()
    where.unlink()
    return answer
