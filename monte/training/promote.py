"""``monte promote``: export a succeeded checkpoint's servable folder (or its hub copy), every
file proven against its lineage commit before the folder appears, with its model card
(``README.md``, :mod:`monte.training.card`), readable by anyone, and no local-only config flags."""

from __future__ import annotations

import errno
import json
import os
import re
import shutil
import socket
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from monte.errors import MonteError, error
from monte.hashing import sha256_files
from monte.ledger import rules
from monte.ledger.experiment import Ledger
from monte.ledger.lineage import checkpoint_info
from monte.ledger.records import RunRow
from monte.models.publish import LOCAL_ONLY, strip_local_flags
from monte.result_type import Result
from monte.runs.lifecycle import experiment_name, read_rows
from monte.runs.naming import parse_run_ref
from monte.workspace import Workspace


@dataclass(frozen=True)
class Promoted(Result):
    """``monte promote``: the checkpoint exported, where, its files and their bytes (``disk``: the
    blocks they take), each file's sha256, and with ``from_hub`` the hub repo and revision."""

    checkpoint: str
    experiment: str
    dest: str
    files: int
    bytes: int  # the files' content
    disk: int  # what they take on disk (blocks: `du` counts these)
    sha256: dict[str, str]
    hub: dict[str, str] | None = None  # --from-hub: the repo and revision exported

    def to_dict(self) -> dict[str, Any]:
        """As ``--json`` has always printed it: no ``hub`` key for a local export."""
        out = super().to_dict()
        if self.hub is None:
            del out["hub"]
        return out


#: A promote stages its copy in ``<dest's parent>/.monte-promote-HOST-PID-RANDOM/`` (the same file
#: system as ``dest``, so the last step is one rename); a killed one's is swept by the next promote
#: into that parent. Before, the staging folders were ``.DEST.promote-PID`` and ``.DEST.hub-PID``.
STAGING = ".monte-promote-"
_STAGED = re.compile(r"\.monte-promote-(?P<host>.+)-(?P<pid>\d+)-[0-9a-f]{8}|\..+\.(?:promote|hub)-(?P<old>\d+)")
#: Not folders: the kernel's view of processes and devices.
_PSEUDO = ("proc", "sys")


def check_dest(dest: Path) -> Path:
    """Refuse a ``--dest`` promote cannot make a new folder at: a symbolic link (dangling or not:
    the export never writes through one), a path under /proc or /sys, an existing file or a folder
    that is not empty."""
    if dest.is_symlink():
        raise error("E_REFUSED", f"{dest} is a symbolic link; promote makes a new folder and never writes "
                    "through a link", "pass the folder the link points to, or a new path")
    for p in (Path(os.path.abspath(dest)), Path(os.path.realpath(dest))):
        if len(p.parts) > 1 and p.parts[1] in _PSEUDO:
            raise error("E_REFUSED", f"{dest} is under /{p.parts[1]}, the kernel's view of processes and "
                        "devices, not a place for weights", "choose a folder on a disk")
    if dest.exists() and (not dest.is_dir() or any(dest.iterdir())):
        raise error("E_REFUSED", f"{dest} exists and is not empty", "choose a new folder")
    return dest


def _cannot_make(dest: Path, e: OSError) -> Exception:
    if e.errno in (errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EACCES, errno.EPERM, errno.ENAMETOOLONG):
        return e  # the disk's state: the CLI's handler names it (E_STORAGE)
    return error("E_REFUSED", f"cannot make the folder {dest}: {e.strerror or type(e).__name__}",
                 "choose a folder you can write to")


def sweep_staging(parent: Path) -> None:
    """Remove the staging folders a killed promote left in ``parent``: this host's, whose process
    is gone. Another host's (a shared disk) and a live promote's are left alone."""
    try:
        entries = list(parent.iterdir())
    except OSError:
        return
    for p in entries:
        m = _STAGED.fullmatch(p.name)
        if m is None or p.is_symlink() or not p.is_dir():
            continue
        host, pid = (m["host"], m["pid"]) if m["pid"] else ("", m["old"])
        if host not in ("", socket.gethostname()) or int(pid) == os.getpid():
            continue
        try:
            os.kill(int(pid), 0)
        except ProcessLookupError:
            shutil.rmtree(p, ignore_errors=True)
        except (PermissionError, OverflowError):
            pass


def _publish(ws: Workspace, exp: str, rows: list[RunRow], ck: rules.Checkpoint, info: dict[str, Any],
             staged: Path, ledger: Ledger) -> None:
    """Make the verified copy a publishable model folder: configs without local-only flags, files
    readable like any ``save_pretrained`` output's should be (safetensors writes its files 0600),
    and the model card (``README.md``) that tells where the weights come from."""
    from monte.ledger.refs import ledger_ref
    from monte.training import card

    rewritten = strip_local_flags(staged, [n for n in ("config.json", "tokenizer_config.json") if n in info["files"]])
    base_folder = _base_folder(ws, exp, ck.cohort)
    leftover = "config.json" in info["files"] and _training_leftovers(staged / "config.json", base_folder)
    if leftover:
        rewritten = sorted({*rewritten, "config.json"})
    mask = os.umask(0)
    os.umask(mask)
    for p in staged.iterdir():
        p.chmod(0o666 & ~mask)
    hops = card.hops_for(rows, rules.checkpoints(rows), ck)
    tip = ws.store.tip(ledger_ref(exp))
    notes = [f"- `{n}`: the local-only keys {', '.join(LOCAL_ONLY)}"
             + (" and training's `use_cache: false` (set back as the base model's config has it)" if n == "config.json"
                and leftover
                else "") + " removed; the sha256 below is of the file the lineage commit records" for n in rewritten]
    story = card.Story(experiment=exp, ref=ck.ref, cohort=ck.cohort, base_model=_base_model(rows, hops),
                       lineage=card.lineage_line(hops), ledger_commit=tip.decode() if tip else "",
                       ledger_ref=ledger_ref(exp), lineage_commit=ck.commit, files=info["files"], hops=hops,
                       meas=ledger.measurement(), reads=card.reads_for(rows, ck), notes=notes,
                       license=card.base_license(base_folder) or "other")
    readme = staged / "README.md"
    readme.write_text(card.render(story), encoding="utf-8")
    readme.chmod(0o666 & ~mask)


def _base_folder(ws: Workspace, exp: str, cohort: str) -> Path | None:
    """The cohort's base model folder on this machine, if it can be found (its config and card)."""
    from monte.ledger.lineage import cohort_model
    from monte.models import locate

    ref = cohort_model(ws.store, exp, cohort) if cohort else None
    try:
        return locate.locate(ws, ref, fetch=False).folder if ref else None
    except MonteError:
        return None


def _training_leftovers(config: Path, base: Path | None) -> bool:
    """Drop ``use_cache: false`` from a checkpoint's ``config.json`` (the trainer turns the cache
    off for training; a served model wants it) unless the base model's config says the same.
    True when the file was rewritten."""
    try:
        data = json.loads(config.read_text(encoding="utf-8"))
    except (OSError, ValueError, UnicodeDecodeError):
        return False
    if not isinstance(data, dict) or data.get("use_cache") is not False:
        return False
    try:
        theirs = json.loads((base / "config.json").read_text(encoding="utf-8")) if base else {}
    except (OSError, ValueError, UnicodeDecodeError):
        theirs = {}
    if isinstance(theirs, dict) and theirs.get("use_cache") is False:
        return False
    if isinstance(theirs, dict) and "use_cache" in theirs:
        data["use_cache"] = theirs["use_cache"]
    else:
        del data["use_cache"]
    config.write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    return True


def _base_model(rows: list[RunRow], hops: list[dict[str, Any]]) -> str:
    root = next((r for r in rows if hops and r.run == hops[0]["run"]), None)
    return str(root.model or root.plan.get("base_model", "")) if root else ""


def promote(ws: Workspace, *, ref: str, dest: Path, confirm: str, experiment: str | None = None,
            from_hub: bool = False) -> Promoted:
    """Export a succeeded training checkpoint's servable folder, sha256-verified file by file.

    ``from_hub``: export the hub copy its lineage commit records (a ``--push`` chunk's), every
    file proven against that commit before anything lands in ``dest`` (a mismatch: E_INTEGRITY)."""
    if confirm.strip() != ref.strip():
        raise error("E_USAGE", f"--confirm {confirm!r} does not match {ref!r}",
                    f"type the checkpoint out in full: --confirm {ref}")
    exp0, run, step = parse_run_ref(ref, None)
    exp = experiment_name(ws, experiment or exp0)
    ledger = Ledger(ws.store, exp)
    rows = read_rows(ledger)
    row = next((r for r in rows if r.run == run), None)
    if row is None:
        raise error("E_NOT_FOUND", f"no run {run!r} in experiment {exp}", "list runs with `monte status`")
    if row.kind != "train":
        raise error("E_REFUSED", f"run {run} is an eval; only a training checkpoint can be promoted",
                    "name a training run's checkpoint (RUN@STEP)")
    if row.smoke:
        raise error("E_NOT_EVIDENCE", f"run {run} is a smoke run; it cannot be a promote source",
                    "promote a real chunk's checkpoint")
    if row.status != "succeeded":
        raise error("E_REFUSED", f"run {run} has {row.status}; only a succeeded run's checkpoint is promoted",
                    "promote a succeeded run")
    ck = rules.find_checkpoint(rows, run, step)
    # proves every servable file against the lineage commit (the hub copy: proven once fetched)
    info = checkpoint_info(ws.store, ws.data_root, ck, local=not from_hub)
    hub_copy = info.get("hub") or {}
    if from_hub and not (hub_copy.get("repo") and hub_copy.get("revision")):
        raise error("E_NOT_FOUND", f"checkpoint {ck.ref} has no hub copy: its chunk was not trained with --push",
                    "promote it without --from-hub, where its run folder lives (the box)")
    dest = check_dest(Path(os.path.expanduser(dest)))
    src = ws.data_root / info["weights"]
    made_parent = not dest.parent.exists()
    try:
        dest.parent.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise _cannot_make(dest, e) from None
    sweep_staging(dest.parent)
    stage = dest.parent / f"{STAGING}{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    staged, fetched = stage / "payload", stage / "hub"
    try:
        try:
            stage.mkdir()
        except OSError as e:
            raise _cannot_make(dest, e) from None
        (stage / ".gitignore").write_text("*\n")  # a promote into a work tree never shows in `git status`
        staged.mkdir()
        if from_hub:
            from monte.storage import hub

            fetched.mkdir()
            got_files = hub.download_checkpoint(hub_copy["repo"], hub_copy["revision"], sorted(info["files"]),
                                                fetched)
            for name in info["files"]:
                shutil.copyfile(got_files[name].resolve(), staged / name)
        else:
            for name in info["files"]:
                shutil.copy2(src / name, staged / name)
        got = sha256_files([staged / n for n in info["files"]])
        for name, digest in info["files"].items():
            if got[str(staged / name)] != digest:
                if from_hub:
                    raise error("E_INTEGRITY", f"{name} of the hub copy ({hub_copy['repo']}, revision "
                                f"{hub_copy['revision'][:12]}) does not match the sha256 its lineage commit "
                                f"records for {ck.ref}; nothing was written to {dest}",
                                "the hub copy was changed after training; promote from the run folder "
                                "(without --from-hub) where it lives")
                raise error("E_INTEGRITY", f"the copy of {name} does not match its lineage hash",
                            "check the destination disk and promote again")
        _publish(ws, exp, rows, ck, info, staged, ledger)
        if dest.exists():
            dest.rmdir()
        os.rename(staged, dest)
    finally:
        shutil.rmtree(stage, ignore_errors=True)
        if made_parent and not dest.exists():
            try:
                dest.parent.rmdir()  # a refused promote leaves no folder behind it made
            except OSError:
                pass
    exported = [p for p in dest.iterdir() if p.is_file()]  # the servable files and the model card
    size = sum(p.stat().st_size for p in exported)
    disk = sum(p.stat().st_blocks * 512 for p in exported)
    return Promoted(checkpoint=ck.ref, experiment=exp, dest=str(dest), files=len(exported), bytes=size,
                         disk=disk, sha256=info["files"],
                         hub={"repo": hub_copy["repo"], "revision": hub_copy["revision"]} if from_hub else None)
