"""Lineage as the commit graph: the cohort's base commit and one commit per checkpoint.

- ``refs/heads/monte/<exp>/base/<cohort>``: the base model's identity (``base.json``: the sha256
  of every servable file). No parents. A cohort is experiment x base model, so its id is derived
  from those hashes.
- ``refs/heads/monte/<exp>/lineage/<run>``: the run's checkpoints, each a commit whose tree is
  ``checkpoint.json`` and whose parent is the parent checkpoint's commit (or the base commit for
  ``--from-base``). ``git log --graph --oneline --branches='monte/<exp>/lineage/*'`` draws the tree.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from dulwich.objects import ObjectID

from monte.errors import error
from monte.hashing import sha256_bytes, sha256_files
from monte.ledger.refs import base_ref, lineage_ref
from monte.ledger.rules import Checkpoint
from monte.ledger.store import Snapshot, Store

#: Files a trainer writes beside the weights that are not part of the servable model.
TRAINER_STATE = {"optimizer.pt", "scheduler.pt", "trainer_state.json", "training_args.bin",
                 "scaler.pt"}


def servable_files(folder: Path) -> dict[str, str]:
    """sha256 of every servable file of a model folder (top level; trainer state excluded)."""
    if not folder.is_dir():
        raise error("E_NOT_FOUND", f"no model folder {folder}", "pass a local Hugging Face model folder")
    files = sorted(
        p for p in folder.iterdir()
        if p.is_file() and not p.name.startswith(".") and p.name not in TRAINER_STATE
        and not p.name.startswith("rng_state")
    )
    if not any(p.name == "config.json" for p in files):
        raise error("E_NOT_FOUND", f"{folder} is not a model folder (no config.json)",
                    "pass a folder saved with save_pretrained, or build one with `monte model init DIR`")
    digests = sha256_files(files)
    return {p.name: digests[str(p)] for p in files}


def cohort_of(files: dict[str, str]) -> str:
    return sha256_bytes(json.dumps(files, sort_keys=True).encode())[:12]


def ensure_base(store: Store, experiment: str, model: str, files: dict[str, str]) -> tuple[str, ObjectID]:
    """The cohort's base commit, written once (create-only; identical content from two writers
    is the same commit)."""
    cohort = cohort_of(files)
    ref = base_ref(experiment, cohort)
    tip = store.tip(ref)
    if tip is not None:
        return cohort, tip
    body = json.dumps({"experiment": experiment, "cohort": cohort, "model": model, "files": files},
                      indent=2, sort_keys=True).encode() + b"\n"
    commit = store.write_commit({"base.json": body}, f"base model of cohort {cohort}",
                                {"Monte-Event": "base", "Monte-Cohort": cohort}, parents=[])
    if not store.set_ref(ref, None, commit):
        tip = store.tip(ref)
        assert tip is not None
        return cohort, tip
    return cohort, commit


def record_checkpoint(store: Store, experiment: str, info: dict[str, Any], parent: ObjectID) -> ObjectID:
    """Append one checkpoint commit to the run's lineage ref. ``info`` becomes checkpoint.json
    (run, step, cohort, recipe, source, boundary, parent, weights, files)."""
    ref = lineage_ref(experiment, info["run"])
    old = store.tip(ref)
    # A run's first checkpoint hangs off its parent (or the base commit); later ones off the
    # run's previous checkpoint.
    parents = [parent] if old is None else [old]
    body = json.dumps(info, indent=2, sort_keys=True).encode() + b"\n"
    commit = store.write_commit(
        {"checkpoint.json": body}, f"checkpoint {info['run']}@{info['step']}",
        {"Monte-Event": "checkpoint", "Monte-Run": info["run"], "Monte-Step": str(info["step"]),
         "Monte-Cohort": info["cohort"]}, parents=parents)
    if not store.set_ref(ref, old, commit):
        raise error("E_CONFLICT", f"{ref} moved while checkpoint {info['run']}@{info['step']} was recorded",
                    "one run has one writer; is the run being trained twice?")
    return commit


def read_checkpoint(store: Store, commit: ObjectID) -> dict[str, Any]:
    raw = Snapshot(store.repo, commit).read("checkpoint.json")
    if raw is None:
        raise error("E_INTEGRITY", f"lineage commit {commit.decode()[:12]} has no checkpoint.json",
                    "the lineage ref was written by hand; run `monte ledger verify`")
    data: dict[str, Any] = json.loads(raw)
    return data


def checkpoint_info(store: Store, data_root: Path, ck: Checkpoint, *, local: bool = True) -> dict[str, Any]:
    """The checkpoint's lineage commit, as its row records it (not whatever the lineage ref points
    at now), with every servable file under ``data_root`` proven against it (``local=False``: the
    commit alone)."""
    try:
        info = read_checkpoint(store, ObjectID(ck.commit.encode()))
    except (KeyError, ValueError):
        raise error("E_INTEGRITY", f"checkpoint {ck.ref}: its lineage commit {ck.commit[:12]} is missing",
                    "run `monte ledger verify`") from None
    if info.get("run") != ck.run or int(info.get("step", -1)) != ck.step:
        raise error("E_INTEGRITY", f"checkpoint {ck.ref}: its lineage commit names {info.get('run')}@{info.get('step')}",
                    "run `monte ledger verify`")
    if not local:
        return info
    folder = data_root / info["weights"]
    if not folder.is_dir():
        hub = info.get("hub") or {}
        raise error("E_NOT_FOUND", f"the weights of {ck.ref} are not on this data root ({folder})",
                    "run where the run directories live (the box), or fetch the weights"
                    + (f": its hub copy ({hub.get('repo')}, revision {str(hub.get('revision'))[:12]}) "
                       f"exports with `monte promote {ck.ref} --dest D --confirm {ck.ref} --from-hub`"
                       if hub.get("repo") and hub.get("revision") else ""))
    have = servable_files(folder)
    for name, digest in info["files"].items():
        if have.get(name) != digest:
            raise error("E_INTEGRITY", f"checkpoint {ck.ref}: {name} is missing or does not match its lineage "
                        "commit", "the weights changed after training; restore them from the hub copy")
    return info
