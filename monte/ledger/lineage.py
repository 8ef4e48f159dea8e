"""Lineage as the commit graph: the cohort's base commit and one commit per checkpoint.

- ``refs/heads/monte/<exp>/base/<cohort>``: the base model's identity (``base.json``: the sha256
  of every servable file, the weights identity the cohort is keyed by, the setup and the sketch of
  :mod:`monte.models.identity`). No parents. A cohort is experiment x base model, so its id is
  derived from the weights identity.
- ``refs/heads/monte/<exp>/lineage/<run>``: the run's checkpoints, each a commit whose tree is
  ``checkpoint.json`` and whose parent is the parent checkpoint's commit (or the base commit for
  ``--from-base``). ``git log --graph --oneline --branches='monte/<exp>/lineage/*'`` draws the tree.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dulwich.objects import ObjectID

from monte.errors import MonteError, error
from monte.hashing import sha256_bytes, sha256_files
from monte.ledger.refs import PREFIX, base_ref, lineage_ref
from monte.ledger.rules import Checkpoint
from monte.ledger.store import Snapshot, Store
from monte.models import identity
from monte.models.identity import TRAINER_STATE as TRAINER_STATE
from monte.models.tensors import safetensors_tensors


def servable_files(folder: Path) -> dict[str, str]:
    """sha256 of every servable file of a model folder (top level; trainer state excluded)."""
    if not folder.is_dir():
        raise error("E_NOT_FOUND", f"no model folder {folder}", "pass a local Hugging Face model folder")
    files = sorted(p for p in folder.iterdir() if p.is_file() and not identity.kept_out(p.name))
    if not any(p.name == "config.json" for p in files):
        raise error("E_NOT_FOUND", f"{folder} is not a model folder (no config.json)",
                    "pass a folder saved with save_pretrained, or build one with `monte model init DIR`")
    digests = sha256_files(files)
    return {p.name: digests[str(p)] for p in files}


def cohort_of(files: dict[str, str]) -> str:
    """The cohort id monte used before cohorts were weights (a hash of the whole file listing).
    Kept so an experiment begun then keeps its cohort; new cohorts are :func:`weights_identity`."""
    return sha256_bytes(json.dumps(files, sort_keys=True).encode())[:12]


#: What the identity of the previous monte counted as weights (every file with one of these
#: suffixes); kept to find the cohorts it recorded (:func:`previous_weights_identity`).
WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth", ".ckpt", ".gguf", ".h5", ".msgpack")


def is_weight_file(name: str) -> bool:
    return name.endswith(WEIGHT_SUFFIXES) and name not in TRAINER_STATE


def weights_identity(folder: Path, files: dict[str, str] | None = None) -> str:
    """The model's weights identity: :func:`monte.models.identity.weights_identity` (the tensors
    the loader reads, by name, dtype, shape and bytes; tied weights once; junk never counts).
    ``files`` is accepted for the older signature and not used."""
    del files
    return identity.weights_identity(folder)


def previous_weights_identity(folder: Path, files: dict[str, str]) -> str:
    """The identity the previous monte recorded: every weight-suffixed file of the folder (each
    safetensors file by its tensors, any other by its bytes). Equal to :func:`weights_identity`
    for a folder holding only what the loader reads in safetensors; kept so a base commit written
    then is found again (its cohort and its seal stay what they were)."""
    entries: list[list[Any]] = []
    for name in sorted(files):
        if not is_weight_file(name):
            continue
        if name.endswith(".safetensors"):
            try:
                tensors = safetensors_tensors(folder / name)
            except MonteError:
                return ""
            entries.extend(["tensor", t.name, t.dtype, list(t.shape), t.digest()] for t in tensors)
        else:
            entries.append(["file", files[name]])
    if not entries:
        entries = [["files", files]]
    entries.sort(key=lambda e: json.dumps(e, sort_keys=True))
    return sha256_bytes(json.dumps(entries, sort_keys=True, separators=(",", ":")).encode())


@dataclass(frozen=True)
class BaseIdentity:
    """A base model as monte knows it: its servable files, the weights identity its cohort and
    seal are keyed by, its cohort, and the folder's own identity (the two differ for a near-copy
    of a known base, which is that base's cohort)."""

    files: dict[str, str]
    weights: str  # the seal's key: this folder's identity, or the known base's it is a near-copy of
    cohort: str
    legacy_cohort: str  # the older file-listing id of the same folder
    own: str = ""  # this folder's weights identity (what `locate.prove` checks at its location)
    setup: dict[str, str] | None = None
    sketch: dict[str, Any] | None = None
    #: the known base this folder is a near-copy of: experiment, cohort, distance (None: itself)
    near: dict[str, Any] | None = None
    #: every identity of this folder: its own and the one the previous monte computed
    identities: frozenset[str] = frozenset()
    #: its behavioural fingerprint, where it was taken (a base no record knows by its weights)
    fingerprint: dict[str, Any] | None = None
    #: a base no record knows by its weights whose behaviour was not checked here
    #: (``by_behaviour=False``): whoever loads it next takes the fingerprint (:func:`compare_behaviour`)
    unchecked: bool = False


@dataclass(frozen=True)
class KnownBase:
    """A base commit of this repository, as its base.json records it."""

    experiment: str
    cohort: str
    weights: str
    model: str
    setup: dict[str, str] | None
    sketch: dict[str, Any] | None
    fingerprint: dict[str, Any] | None = None


def known_bases(store: Store) -> list[KnownBase]:
    """Every cohort's base commit in the repository (any experiment), oldest experiment name first."""
    out: list[KnownBase] = []
    for ref, tip in sorted(store.refs_under(PREFIX).items()):
        head, sep, cohort = ref[len(PREFIX):].rpartition("/base/")
        if not sep or not head or "/" in cohort:
            continue
        try:
            raw = Snapshot(store.repo, tip).read("base.json")
            base = json.loads(raw) if raw is not None else None
        except (KeyError, ValueError):
            continue
        if not isinstance(base, dict):
            continue
        sk, st, fp = base.get("sketch"), base.get("setup"), base.get("fingerprint")
        out.append(KnownBase(experiment=head, cohort=cohort, weights=str(base.get("weights") or ""),
                             model=str(base.get("model") or ""), setup=st if isinstance(st, dict) else None,
                             sketch=sk if isinstance(sk, dict) else None,
                             fingerprint=fp if isinstance(fp, dict) else None))
    return out


def identify_base(store: Store, experiment: str, folder: Path, *, by_behaviour: bool = True) -> BaseIdentity:
    """Hash the folder and name its cohort. ``by_behaviour=False`` skips the behavioural fingerprint
    (one forward pass, torch): a chunk's plan, whose cohort must already hold its baselines, which
    an eval recorded after that check; an unknown base is then a new cohort, refused there.

    - A folder whose weights are a known base's (this folder's identity, or the one the previous
      monte recorded), or within :data:`identity.NEAR` of one (a near-copy), is that base's
      cohort: the seal is keyed by that base's weights. In an experiment that holds the folder's
      cohort under the older file-listing id, it keeps that id.
    - In the experiment whose base commit it matches, a folder with another config, generation
      config or tokenizer (:func:`monte.models.identity.setup`) is refused: the cohort's base is
      what its base commit recorded.
    - A folder whose weights are, or are within :data:`identity.NEAR` of, a checkpoint of any
      experiment's lineage (not of its own cohort) is refused: a checkpoint is never a base.
    - A folder no record knows by its weights is known by its behaviour
      (``monte.models.fingerprint``: one forward pass over fixed probes): within
      :data:`fingerprint.THRESHOLD` of a recorded checkpoint's, it is refused (``E_SEALED``,
      naming the checkpoint and the distance: permuted, noised, merged or retyped, it behaves as
      a model trained here); within it of a recorded base's, it is that base's cohort.
    """
    files = servable_files(folder)
    mine = identity.identify(folder)
    counted_then = sorted(n for n in files if is_weight_file(n))
    same_then = (counted_then == sorted(mine.files) and not mine.tied_once
                 and all(n.endswith(".safetensors") for n in counted_then))
    previous = mine.weights if same_then else previous_weights_identity(folder, files)
    ids = {mine.weights} | ({previous} if previous else set())
    legacy = cohort_of(files)
    bases = known_bases(store)
    match: KnownBase | None = None
    near: dict[str, Any] | None = None
    if store.tip(base_ref(experiment, legacy)) is not None:
        match = next((b for b in bases if b.experiment == experiment and b.cohort == legacy), None)
    exact = sorted((b for b in bases if b.weights in ids), key=lambda b: (b.experiment != experiment, b.experiment))
    if match is None and exact:
        match = exact[0]
    if match is None:
        found = identity.nearest(mine.sketch, ((b, b.sketch) for b in bases if b.sketch and b.weights))
        if found is not None and found[1] <= identity.NEAR:
            match = found[0]
            near = {"experiment": match.experiment, "cohort": match.cohort, "distance": round(found[1], 6)}
    behaviour: dict[str, Any] | None = None
    unknown = match is None and store.tip(base_ref(experiment, legacy)) is None
    if by_behaviour and unknown:
        # a base no record knows by its bytes: is it one by how it behaves?
        refuse_checkpoint_as_base(store, files, ids, mine.sketch, own={legacy, mine.weights[:12]})
        behaviour, like = behaves_as(store, folder, bases, own={legacy, mine.weights[:12]})
        if like is not None:
            match, d = like
            near = {"experiment": match.experiment, "cohort": match.cohort, "behaviour": round(d, 6)}
    here = match if match is not None and match.experiment == experiment else None
    if match is not None and match.weights:
        weights = match.weights
        # this experiment's base commit of those weights, if it has one (its cohort id may be older)
        here = here or next((b for b in bases if b.experiment == experiment and b.weights == weights), None)
        if store.tip(base_ref(experiment, legacy)) is not None:
            cohort = legacy
        elif here is not None:
            cohort = here.cohort
        else:
            cohort = weights[:12]
    else:  # a new base, or one the file-listing id names (its base commit recorded no weights)
        weights = mine.weights
        cohort = legacy if store.tip(base_ref(experiment, legacy)) is not None else weights[:12]
    if here is not None and here.setup and here.setup != mine.setup:
        parts = ", ".join(k for k in sorted(set(here.setup) | set(mine.setup))
                          if here.setup.get(k) != mine.setup.get(k))
        raise error("E_REFUSED", f"{folder} holds the weights of cohort {here.cohort}'s base model"
                    + (f" (a near-copy, distance {near['distance']:.4f})" if near else "")
                    + f" with another {parts}: a cohort's base is the model its base commit recorded (config, "
                    "generation config and tokenizer included), and these change what it computes or reads",
                    f"pass the base model as it was recorded ({here.model}), or save this model as a base of its "
                    "own with other weights; see docs/reliability.md, \"the seal under attack\"")
    refuse_checkpoint_as_base(store, files, ids, mine.sketch, own={cohort, legacy, mine.weights[:12]})
    return BaseIdentity(files=files, weights=weights, cohort=cohort, legacy_cohort=legacy, own=mine.weights,
                        setup=mine.setup, sketch=mine.sketch, near=near, identities=frozenset(ids),
                        fingerprint=behaviour, unchecked=unknown and not by_behaviour)


def behaves_as(store: Store, folder: Path, bases: list[KnownBase], *,
               own: set[str]) -> tuple[dict[str, Any] | None, tuple[KnownBase, float] | None]:
    """The folder's fingerprint, taken here, and :func:`compare_behaviour`'s answer for it (None,
    None: a folder transformers cannot load behaves as nothing; its eval refuses)."""
    from monte.models import fingerprint

    try:
        mine = fingerprint.fingerprint(folder)
    except MonteError:
        raise
    except Exception:  # noqa: BLE001 - a folder transformers cannot load behaves as nothing; its eval refuses
        return None, None
    return mine, compare_behaviour(store, mine, bases, own=own)


def compare_behaviour(store: Store, mine: dict[str, Any], bases: list[KnownBase], *,
                      own: set[str]) -> tuple[KnownBase, float] | None:
    """A base's fingerprint ``mine`` (taken here, or by the grader on the copy it loads) refused
    (``E_SEALED``) when it is within :data:`fingerprint.THRESHOLD` of a recorded checkpoint's (not
    of its own cohort, ``own``); else the recorded base it behaves as, with the distance (None:
    none within the threshold). Pure arithmetic on recorded numbers: no torch."""
    from monte.models import fingerprint

    for _, _, info in lineage_checkpoints(store):
        theirs = info.get("fingerprint")
        if info.get("cohort") in own or not isinstance(theirs, dict):
            continue
        d = fingerprint.distance(theirs, mine)
        if d is not None and d <= fingerprint.THRESHOLD:
            ref_name = f"{info.get('experiment')}/{info.get('run')}@{info.get('step')}"
            raise error("E_SEALED", f"this model behaves as checkpoint {ref_name} of this repository (behavioural "
                        f"distance {d:.4f}, within {fingerprint.THRESHOLD}: its next-token scores on monte's fixed "
                        "probes are that checkpoint's, whatever its bytes); a checkpoint, renamed, permuted, noised, "
                        "merged or retyped, is never a base model: its test reads belong to the cohort it was "
                        "trained in",
                        f"evaluate the checkpoint itself: `monte eval --checkpoint {ref_name}` (dev), or nominate it "
                        f"for the final claim: `monte nominate {ref_name}`; a new cohort needs a base that behaves "
                        "as no model trained here (docs/reliability.md, the behavioural fingerprint)")
    best: tuple[KnownBase, float] | None = None
    for b in bases:
        if b.fingerprint is None or not b.weights:
            continue
        d = fingerprint.distance(b.fingerprint, mine)
        if d is not None and d <= fingerprint.THRESHOLD and (best is None or d < best[1]):
            best = (b, d)
    return best


def _weight_digests(files: dict[str, str]) -> list[str]:
    return sorted(d for n, d in files.items() if is_weight_file(n))


def lineage_checkpoints(store: Store) -> Iterator[tuple[ObjectID, int, dict[str, Any]]]:
    """Every checkpoint commit of every experiment's lineage in the repository: its id, its commit
    time and its ``checkpoint.json`` (one walk, shared by the base refusals and verify's rule
    ``behaviour``; a commit whose tree cannot be read is passed over, as a base commit is)."""
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
            try:
                raw = Snapshot(store.repo, sha).read("checkpoint.json")
            except KeyError:
                continue
            if raw is None:  # the cohort's base commit: the root of the tree
                continue
            commit = store.repo[sha]
            todo.extend(commit.parents)  # type: ignore[attr-defined]
            try:
                info = json.loads(raw)
            except ValueError:
                continue
            if isinstance(info, dict):
                yield sha, commit.commit_time, info  # type: ignore[attr-defined]


def refuse_checkpoint_as_base(store: Store, files: dict[str, str], weights: str | set[str],
                              sketch: dict[str, Any] | None = None, *, own: set[str]) -> None:
    """A base model is never a checkpoint of this repository (any experiment), nor a near-copy of
    one (within :data:`identity.NEAR` of its recorded sketch): its test reads belong to the cohort
    it was trained in. A checkpoint of the model's own cohort (``own``: its cohort ids) is exempt
    (a chunk that changed nothing is the base itself)."""
    ids = {weights} if isinstance(weights, str) else set(weights)
    mine = _weight_digests(files)
    for _, _, info in lineage_checkpoints(store):
        if info.get("cohort") in own:
            continue
        theirs = info.get("weights_identity")
        hit = theirs in ids or bool(mine and _weight_digests(info.get("files") or {}) == mine)
        d = None
        if not hit and sketch is not None and isinstance(info.get("sketch"), dict):
            d = identity.distance(info["sketch"], sketch, stop=identity.NEAR)
            hit = d <= identity.NEAR
        if hit:
            ref_name = f"{info.get('experiment')}/{info.get('run')}@{info.get('step')}"
            what = "are" if d is None else f"are a near-copy (distance {d:.4f}, within {identity.NEAR}) of"
            raise error("E_REFUSED", f"this model's weights {what} checkpoint {ref_name} of this repository; "
                        "a checkpoint is never a base model (its test reads belong to the cohort it was "
                        "trained in)",
                        f"evaluate it as a checkpoint: `monte eval --checkpoint {ref_name}` (dev), or "
                        "nominate it for the final claim: `monte nominate "
                        f"{ref_name}`; a new cohort needs other base weights")


def ensure_base(store: Store, experiment: str, model: str, files: dict[str, str], *, cohort: str | None = None,
                weights: str | None = None, folder: Path | None = None,
                fingerprint: dict[str, Any] | None = None, behaviour: bool = True) -> tuple[str, ObjectID]:
    """The cohort's base commit, written once (create-only; identical content from two writers
    is the same commit). ``base.json`` records the weights identity the seal is keyed by
    (:func:`identify_base` gives both; without them, the older file-listing id) and, read from
    ``folder``, the model's setup and sketch (what a later folder is compared with), and its own
    identity where it is a near-copy of the base whose weights key the cohort, and its behavioural
    fingerprint (``fingerprint``: taken already; else taken here, one forward pass, unless
    ``behaviour`` is False: whoever loaded it could not take one)."""
    cohort = cohort or cohort_of(files)
    ref = base_ref(experiment, cohort)
    tip = store.tip(ref)
    if tip is not None:
        return cohort, tip
    more: dict[str, Any] = {}
    if folder is not None and weights:
        mine = identity.identify(folder)
        if fingerprint is None and behaviour:
            from monte.models.fingerprint import fingerprint as take

            try:
                fingerprint = take(folder)
            except Exception:  # noqa: BLE001 - unloadable here: the base is known by its bytes alone
                fingerprint = None
        more = {"setup": mine.setup, "sketch": mine.sketch,
                **({"fingerprint": fingerprint} if fingerprint is not None else {}),
                **({"identity": mine.weights} if mine.weights != weights else {})}
    body = json.dumps({"experiment": experiment, "cohort": cohort, "model": model, "files": files,
                       **({"weights": weights} if weights else {}), **more},
                      indent=2, sort_keys=True).encode() + b"\n"
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
