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
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dulwich.objects import ObjectID

from monte.errors import error
from monte.hashing import sha256_bytes, sha256_files
from monte.ledger.refs import PREFIX, base_ref, lineage_ref
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
    """The cohort id monte used before cohorts were weights (a hash of the whole file listing).
    Kept so an experiment begun then keeps its cohort; new cohorts are :func:`weights_identity`."""
    return sha256_bytes(json.dumps(files, sort_keys=True).encode())[:12]


#: Files whose bytes are the model's parameters. Everything else in a model folder (config,
#: tokenizer, README, chat template) is left out of the identity: see :func:`weights_identity`.
WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth", ".ckpt", ".gguf", ".h5", ".msgpack")
_MAX_HEADER = 100 << 20  # safetensors' own limit on the JSON header


def is_weight_file(name: str) -> bool:
    return name.endswith(WEIGHT_SUFFIXES) and name not in TRAINER_STATE


def weights_identity(folder: Path, files: dict[str, str]) -> str:
    """The base model's identity: a sha256 over its parameters, not over its folder.

    Each tensor of a ``*.safetensors`` file counts by (name, dtype, shape, sha256 of its bytes), so
    the identity survives a ``save_pretrained`` round trip, another sharding, another tensor
    order and the file's ``__metadata__``; any other weight file counts by its bytes. Config,
    tokenizer, chat template, README and the folder's path are not part of it: a copy with an
    extra file is the same model. A folder with no weight file is identified by all its files.
    """
    entries: list[list[Any]] = []
    for name in sorted(files):
        if not is_weight_file(name):
            continue
        if name.endswith(".safetensors"):
            entries.extend(_safetensors_entries(folder / name))
        else:
            entries.append(["file", files[name]])
    if not entries:
        entries = [["files", files]]
    entries.sort(key=lambda e: json.dumps(e, sort_keys=True))
    return sha256_bytes(json.dumps(entries, sort_keys=True, separators=(",", ":")).encode())


def _safetensors_entries(path: Path) -> list[list[Any]]:
    import hashlib
    import struct

    bad = error("E_BAD_INPUT", f"{path} is not a readable safetensors file",
                "pass a model folder saved with save_pretrained")
    out: list[list[Any]] = []
    with open(path, "rb") as f:
        head = f.read(8)
        if len(head) != 8:
            raise bad
        (n,) = struct.unpack("<Q", head)
        if n > _MAX_HEADER:
            raise bad
        try:
            header = json.loads(f.read(n))
        except (ValueError, UnicodeDecodeError):
            raise bad from None
        if not isinstance(header, dict):
            raise bad
        size = path.stat().st_size - 8 - n
        for tname, meta in header.items():
            if tname == "__metadata__":
                continue
            try:
                start, end = (int(x) for x in meta["data_offsets"])
                dtype, shape = str(meta["dtype"]), [int(x) for x in meta["shape"]]
            except (KeyError, TypeError, ValueError):
                raise bad from None
            if not 0 <= start <= end <= size:
                raise bad
            h = hashlib.sha256()
            f.seek(8 + n + start)
            left = end - start
            while left:
                chunk = f.read(min(left, 1 << 20))
                if not chunk:
                    raise bad
                h.update(chunk)
                left -= len(chunk)
            out.append(["tensor", tname, dtype, shape, h.hexdigest()])
    return out


@dataclass(frozen=True)
class BaseIdentity:
    """A base model as monte knows it: its servable files, its weights identity, its cohort."""

    files: dict[str, str]
    weights: str
    cohort: str
    legacy_cohort: str  # the older file-listing id of the same folder


def identify_base(store: Store, experiment: str, folder: Path) -> BaseIdentity:
    """Hash the folder and name its cohort: the weights identity, except in an experiment that
    already holds this folder's cohort under the older file-listing id (it keeps that id). A
    folder whose weights equal a checkpoint of this repository's lineage is refused."""
    files = servable_files(folder)
    weights = weights_identity(folder, files)
    legacy = cohort_of(files)
    cohort = legacy if store.tip(base_ref(experiment, legacy)) is not None else weights[:12]
    refuse_checkpoint_as_base(store, files, weights, own={cohort, legacy, weights[:12]})
    return BaseIdentity(files=files, weights=weights, cohort=cohort, legacy_cohort=legacy)


def _weight_digests(files: dict[str, str]) -> list[str]:
    return sorted(d for n, d in files.items() if is_weight_file(n))


def refuse_checkpoint_as_base(store: Store, files: dict[str, str], weights: str, own: set[str]) -> None:
    """A base model is never a checkpoint of this repository (any experiment): its test reads
    belong to the cohort it was trained in. A checkpoint of the model's own cohort (``own``: its
    cohort ids) with the very same weights (a chunk that changed nothing) is the base itself."""
    mine = _weight_digests(files)
    seen: set[ObjectID] = set()
    for ref, tip in sorted(store.refs_under(PREFIX).items()):
        if "/lineage/" not in ref:
            continue
        todo = [tip]
        while todo:
            sha = todo.pop()
            if sha in seen:
                continue
            seen.add(sha)
            commit = store.repo[sha]
            raw = Snapshot(store.repo, sha).read("checkpoint.json")
            if raw is None:  # the cohort's base commit: the root of the tree
                continue
            todo.extend(commit.parents)  # type: ignore[attr-defined]
            info = json.loads(raw)
            if info.get("cohort") in own:
                continue
            theirs = info.get("weights_identity")
            if theirs == weights or (mine and _weight_digests(info.get("files") or {}) == mine):
                ref_name = f"{info.get('experiment')}/{info.get('run')}@{info.get('step')}"
                raise error("E_REFUSED", f"this model's weights are checkpoint {ref_name} of this repository; "
                            "a checkpoint is never a base model (its test reads belong to the cohort it was "
                            "trained in)",
                            f"evaluate it as a checkpoint: `monte eval --checkpoint {ref_name}` (dev), or "
                            "nominate it for the final claim: `monte nominate "
                            f"{ref_name}`; a new cohort needs other base weights")


def ensure_base(store: Store, experiment: str, model: str, files: dict[str, str], *, cohort: str | None = None,
                weights: str | None = None) -> tuple[str, ObjectID]:
    """The cohort's base commit, written once (create-only; identical content from two writers
    is the same commit). ``base.json`` records the weights identity the seal is keyed by
    (:func:`identify_base` gives both; without them, the older file-listing id)."""
    cohort = cohort or cohort_of(files)
    ref = base_ref(experiment, cohort)
    tip = store.tip(ref)
    if tip is not None:
        return cohort, tip
    body = json.dumps({"experiment": experiment, "cohort": cohort, "model": model, "files": files,
                       **({"weights": weights} if weights else {})}, indent=2, sort_keys=True).encode() + b"\n"
    commit = store.write_commit({"base.json": body}, f"base model of cohort {cohort}",
                                {"Monte-Event": "base", "Monte-Cohort": cohort}, parents=[])
    if not store.set_ref(ref, None, commit):
        tip = store.tip(ref)
        assert tip is not None
        return cohort, tip
    return cohort, commit


def cohort_model(store: Store, experiment: str, cohort: str) -> str | None:
    """The base model reference a cohort's base commit records (``base.json``: ``model``), so a
    checkpoint names its own base model (``--parent``/``--checkpoint`` of a second cohort)."""
    from monte.ledger.refs import base_ref

    if store.tip(base_ref(experiment, cohort)) is None:
        return None
    raw = store.snapshot(base_ref(experiment, cohort)).read("base.json")
    try:
        model = json.loads(raw).get("model") if raw else None
    except (ValueError, AttributeError):
        return None
    return str(model) if isinstance(model, str) and model else None


def record_checkpoint(store: Store, experiment: str, info: dict[str, Any], parent: ObjectID) -> ObjectID:
    """Append one checkpoint commit to the run's lineage ref. ``info`` becomes checkpoint.json
    (run, step, cohort, recipe, source, boundary, parent, weights, files)."""
    ref = lineage_ref(experiment, info["run"])
    old = store.tip(ref)
    # A run's first checkpoint hangs off its parent (or the base commit); later ones off the
    # run's previous checkpoint.
    parents = [parent] if old is None else [old]
    body = json.dumps(info, indent=2, sort_keys=True).encode() + b"\n"
    previous = None if old is None else read_checkpoint(store, old).get("step")
    commit = store.write_commit(
        {"checkpoint.json": body}, checkpoint_subject(info, previous),
        {"Monte-Event": "checkpoint", "Monte-Run": info["run"], "Monte-Step": str(info["step"]),
         "Monte-Cohort": info["cohort"]}, parents=parents)
    if not store.set_ref(ref, old, commit):
        raise error("E_CONFLICT", f"{ref} moved while checkpoint {info['run']}@{info['step']} was recorded",
                    "one run has one writer; is the run being trained twice?")
    return commit


def checkpoint_subject(info: dict[str, Any], previous: int | None = None) -> str:
    """A lineage commit's subject: the checkpoint, the move that made it (``algorithm:source``,
    as ``monte status`` prints a hop) and where it starts, so ``git log --graph --oneline`` of
    the lineage refs reads as the tree. ``previous``: the run's own previous checkpoint step,
    for a run's later checkpoints.

    ``checkpoint 8js7@50: sft:parity-sft from base``, ``checkpoint 2kq1@100: sft:parity-sft from
    8js7@50``, ``checkpoint 9zz0@150: 2kq1@100 =grpo:parity=> (stage boundary)``."""
    head = f"checkpoint {info['run']}@{info['step']}"
    recipe = info.get("recipe") or {}
    move = f"{recipe.get('algorithm') or recipe.get('name') or '?'}:{info.get('source') or '?'}"
    parent = info.get("parent") or None
    if previous is not None:
        return f"{head}: {move} from {info['run']}@{previous}"
    start = f"{parent['run']}@{parent['step']}" if parent else "base"
    if info.get("boundary") and parent:
        return f"{head}: {start} ={move}=> (stage boundary)"
    return f"{head}: {move} from {start}"


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
    # weights are never synced: a run folder brought by `monte sync` holds the small files only
    missing = sorted(n for n in info["files"] if not (folder / n).is_file())
    if missing:
        hub = info.get("hub") or {}
        raise error("E_NOT_FOUND", f"the weights of {ck.ref} are not on this data root ({folder}"
                    + (f"; missing {', '.join(missing[:3])}" if folder.is_dir() else "") + "): weights are never "
                    "synced, only the run's small files", "run where the run directories live (the machine "
                    "that trained it), or fetch the weights"
                    + (f": its hub copy ({hub.get('repo')}, revision {str(hub.get('revision'))[:12]}) "
                       f"exports with `monte promote {ck.ref} --dest D --confirm {ck.ref} --from-hub`"
                       if hub.get("repo") and hub.get("revision") else ""))
    have = servable_files(folder)
    for name, digest in info["files"].items():
        if have.get(name) != digest:
            raise error("E_INTEGRITY", f"checkpoint {ck.ref}: {name} is missing or does not match its lineage "
                        "commit", "the weights changed after training; restore them from the hub copy")
    return info
