"""The record a training chunk leaves: a train row (started -> running -> succeeded/failed) and
one lineage commit per saved checkpoint. The trainer (TRL) calls these; nothing here trains.

A checkpoint's servable folder lives in the run folder on the data root
(``runs/<exp>/<run>/checkpoints/step-<N>``); its lineage commit carries the sha256 of every
servable file, so an eval or a promote can prove the bytes before it uses them.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

from dulwich.objects import ObjectID

from monte.errors import error
from monte.ledger.experiment import Ledger
from monte.ledger.ids import new_run_id
from monte.ledger.lineage import TRAINER_STATE, record_checkpoint, servable_files, weights_identity
from monte.ledger.records import RunRow
from monte.ledger.refs import base_ref, lineage_ref
from monte.ledger.store import Snapshot
from monte.manifest import now
from monte.models import identity
from monte.models.fingerprint import fingerprint
from monte.runs.folders import log_event
from monte.runs.lifecycle import require_live
from monte.runs.liveness import this_process
from monte.workspace import Workspace


def start_chunk(ws: Workspace, experiment: str, *, cohort: str, base_model: str, plan: dict[str, Any],
                smoke: bool = False, who: dict[str, Any] | None = None) -> RunRow:
    """Append the ``started`` train row. ``plan`` holds recipe {name, sha256, algorithm}, source,
    parent {run, step} or None (from base), boundary, start_step, steps. ``who``: the host that
    runs it (default this process; a ``--remote`` submission names the box)."""
    ledger = Ledger(ws.store, experiment)
    run = new_run_id()
    who = who or this_process()
    code = ws.code_version()  # the commit this chunk starts from (a box's checkout on a box)

    def make(snap: Snapshot, seq: int) -> RunRow:
        return RunRow(run=run, experiment=experiment, kind="train", status="started", created_at=now(),
                      updated_at=now(), cohort=cohort, model=base_model, step=int(plan["start_step"]),
                      smoke=smoke, plan={**plan, "base_model": base_model, **code}, **who)

    row = ledger.append_row(
        make, event="started",
        summary=lambda r: f"train {r.plan['recipe']['algorithm']}:{r.plan['source']} from "
        f"{_parent_label(r)} started: {r.run}" + (" (smoke)" if r.smoke else ""))
    log_event(ws, experiment, row.run, "started", plan=plan)
    return row


def _parent_label(r: RunRow) -> str:
    p = r.plan.get("parent")
    return f"{p['run']}@{p['step']}" if p else "base"


def _behaviour(dest: Path) -> dict[str, Any]:
    """The checkpoint's fingerprint (how it behaves: a copy with other bytes is still it); a
    folder transformers cannot load records none, rather than losing the checkpoint's record."""
    try:
        return {"fingerprint": fingerprint(dest)}
    except Exception:  # noqa: BLE001
        return {}


def save_checkpoint(ws: Workspace, experiment: str, row: RunRow, step: int, servable: Path,
                    extra: dict[str, Any] | None = None,
                    before_commit: Callable[[Path, dict[str, str], ObjectID], dict[str, Any]] | None = None,
                    ) -> RunRow:
    """Move a saved servable folder into the run folder, commit it to the lineage, and record it
    on the row. A smoke run's checkpoints never enter the tree.

    ``before_commit(folder, files, parent_commit)`` runs once the folder is in place and hashed,
    before the lineage commit is written; what it returns is recorded in ``checkpoint.json``
    (``--push`` uploads the weights there and records the hub revision)."""
    if row.smoke:
        raise error("E_NOT_EVIDENCE", "a smoke chunk saves no checkpoint", "run a real chunk")
    ledger = Ledger(ws.store, experiment)
    dest = ws.run_folder(experiment, row.run) / "checkpoints" / f"step-{step}"
    dest.parent.mkdir(parents=True, exist_ok=True)
    if servable.resolve() != dest.resolve():
        dest.mkdir()
        for f in servable.iterdir():  # the servable files only; trainer state stays with the trainer
            if f.is_file() and f.name not in TRAINER_STATE and not f.name.startswith("rng_state"):
                shutil.copy2(f, dest / f.name)
    files = servable_files(dest)
    parent_commit = _parent_commit(ws, experiment, row)
    more = before_commit(dest, files, parent_commit) if before_commit else {}
    info = {
        "experiment": experiment, "run": row.run, "step": step, "cohort": row.cohort,
        "recipe": row.plan["recipe"], "source": row.plan["source"], "boundary": bool(row.plan.get("boundary")),
        "parent": row.plan.get("parent"), "weights": str(dest.relative_to(ws.data_root)), "files": files,
        "weights_identity": weights_identity(dest, files), "sketch": identity.sketch(dest),
        **_behaviour(dest),
        **(extra or {}), **more,
    }
    commit = record_checkpoint(ws.store, experiment, info, parent_commit)
    log_event(ws, experiment, row.run, "checkpoint", step=step, commit=commit.decode())

    def make(snap: Snapshot, seq: int) -> RunRow:
        current = require_live(ledger.row(row.run, snap), row.run)
        return current.model_copy(update={
            "status": "running", "updated_at": now(), "step": step,
            "checkpoints": [*current.checkpoints, {"step": step, "commit": commit.decode()}]})

    return ledger.append_row(make, event="checkpoint",
                             summary=lambda r: f"checkpoint {r.run}@{step}",
                             trailers=lambda r: {"Monte-Commit": commit.decode()})


def _parent_commit(ws: Workspace, experiment: str, row: RunRow) -> ObjectID:
    own = ws.store.tip(lineage_ref(experiment, row.run))
    if own is not None:
        return own
    parent = row.plan.get("parent")
    if parent is None:
        tip = ws.store.tip(base_ref(experiment, row.cohort))
        if tip is None:
            raise error("E_NO_BASELINE", f"cohort {row.cohort} has no base commit",
                        "evaluate the base model first (`monte eval`)")
        return tip
    from monte.ledger.lineage import read_checkpoint

    for commit in ws.store.log(lineage_ref(experiment, parent["run"])):
        if int(read_checkpoint(ws.store, commit.id)["step"]) == int(parent["step"]):
            return commit.id
    raise error("E_NOT_FOUND", f"no lineage commit for the parent {parent['run']}@{parent['step']}",
                "name a checkpoint listed by `monte status`")


def finish_chunk(ws: Workspace, experiment: str, row: RunRow, status: str, error_text: str | None = None) -> RunRow:
    ledger = Ledger(ws.store, experiment)

    def make(snap: Snapshot, seq: int) -> RunRow:
        current = require_live(ledger.row(row.run, snap), row.run)
        return current.model_copy(update={"status": status, "updated_at": now(), "error": error_text})

    done = ledger.append_row(make, event="finished" if status == "succeeded" else status,
                             summary=lambda r: f"train {r.run} {status} at step {r.step}")
    log_event(ws, experiment, row.run, status, step=done.step)
    return done
