"""A private copy of proven model files: what a record's process loads instead of the path it proved.

Proving a model folder (hashing its files against a lineage commit or a base commit) and loading
it (transformers reading the folder by path) are two reads of one path: a file swapped between
them is what gets loaded while the record names the proven bytes. So a process that loads
weights for a record first copies the proven files into a staging folder of the data root,
hashing each in the one read that copies it (:func:`monte.hashing.copy_hashed`), and loads the
copy: a file swapped before the copy is refused (``E_INTEGRITY``), one swapped after it is not in
the copy. The copy costs the model's size on the data root while the process runs; a killed
process's copy is swept by the next plan (:func:`monte.frozen.sweep_staging`).
"""

from __future__ import annotations

import shutil
from pathlib import Path

from monte.errors import error
from monte.workspace import Workspace


def private_copy(ws: Workspace, folder: Path, files: dict[str, str], label: str, *,
                 rest: bool = False) -> Path:
    """``files`` (name -> proven sha256) of ``folder`` copied into a fresh staging folder of the
    data root, each hashed in the one read that copies it and compared with its proven digest
    (``E_INTEGRITY`` naming the file otherwise; the staging folder is removed). ``rest``: every
    other file under ``folder`` is copied too, unproven (a trainer state's optimizer and RNG state,
    which no record hashes), so the copy is a whole folder its loader can resume from."""
    from monte.hashing import copy_hashed
    from monte.staging import staging_dir

    dest = staging_dir(ws.data_root)
    try:
        for name, digest in sorted(files.items()):
            out = dest / name
            out.parent.mkdir(parents=True, exist_ok=True)
            try:
                got = copy_hashed(folder / name, out)
            except FileNotFoundError:
                got = "missing"
            if got != digest:
                raise error("E_INTEGRITY", f"{folder / name} is not the file proven for {label} "
                            f"(sha256 {got[:12]}, proven {digest[:12]}): it changed after it was proven; nothing "
                            "was started and no read was spent", f"put the proven model back at {folder} and run "
                            "the command again (never change a model's files while a run that loads it starts)")
        if rest:
            for src in sorted(folder.rglob("*")):
                name = src.relative_to(folder).as_posix()
                if name in files or not src.is_file():
                    continue
                out = dest / name
                out.parent.mkdir(parents=True, exist_ok=True)
                copy_hashed(src, out)
    except BaseException:
        shutil.rmtree(dest, ignore_errors=True)
        raise
    return dest


def remove(folders: list[Path]) -> None:
    """Remove private copies once their process is done with them."""
    for f in folders:
        shutil.rmtree(f, ignore_errors=True)
