"""``monte promote``: export a succeeded checkpoint's servable folder (or its hub copy), every
file proven against its lineage commit before the folder appears."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from pydantic import BaseModel, SerializerFunctionWrapHandler, model_serializer

from monte.errors import error
from monte.hashing import sha256_files
from monte.ledger import rules
from monte.ledger.experiment import Ledger
from monte.ledger.lineage import checkpoint_info
from monte.runs.lifecycle import experiment_name, read_rows
from monte.runs.naming import parse_run_ref
from monte.workspace import Workspace


class PromoteResult(BaseModel):
    checkpoint: str
    experiment: str
    dest: str
    files: int
    bytes: int
    sha256: dict[str, str]
    hub: dict[str, str] | None = None  # --from-hub: the repo and revision exported

    @model_serializer(mode="wrap")
    def _no_hub_key_without_hub(self, nxt: SerializerFunctionWrapHandler) -> dict[str, object]:
        out: dict[str, object] = nxt(self)
        if self.hub is None:
            out.pop("hub", None)
        return out


def promote(ws: Workspace, *, ref: str, dest: Path, confirm: str, experiment: str | None = None,
            from_hub: bool = False) -> PromoteResult:
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
    dest = Path(os.path.expanduser(dest))
    if dest.exists() and (not dest.is_dir() or any(dest.iterdir())):
        raise error("E_REFUSED", f"{dest} exists and is not empty", "choose a new folder")
    src = ws.data_root / info["weights"]
    staged = dest.parent / f".{dest.name}.promote-{os.getpid()}"
    fetched = dest.parent / f".{dest.name}.hub-{os.getpid()}"
    made_parent = not dest.parent.exists()
    dest.parent.mkdir(parents=True, exist_ok=True)
    try:
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
        if dest.exists():
            dest.rmdir()
        os.rename(staged, dest)
    finally:
        shutil.rmtree(staged, ignore_errors=True)
        shutil.rmtree(fetched, ignore_errors=True)
        if made_parent and not dest.exists():
            try:
                dest.parent.rmdir()  # a refused promote leaves no folder behind it made
            except OSError:
                pass
    size = sum((dest / n).stat().st_size for n in info["files"])
    return PromoteResult(checkpoint=ck.ref, experiment=exp, dest=str(dest), files=len(info["files"]), bytes=size,
                         sha256=info["files"],
                         hub={"repo": hub_copy["repo"], "revision": hub_copy["revision"]} if from_hub else None)
