"""The results bucket: ``monte push`` and ``monte sync``.

Layout under the bucket URL, per experiment:

- ``git/<exp>/packs/<sha256>.pack``: git pack files, immutable, named by the sha256 of their
  bytes (create-only; a sync refuses a pack whose bytes do not hash to its name).
- ``git/<exp>/refs/<name>``: one object per ref (``ledger``, ``base/<cohort>``,
  ``lineage/<run>``, and ``vault``: the repository's vault ref, so a repository that syncs the
  experiment holds the manifests ``monte ledger verify`` proves its hashes against), holding the commit id, moved by compare-and-swap on the object's generation.
  A push that loses the race on the ledger merges the bucket's ledger into its own (the union:
  :mod:`monte.ledger.merge`) and tries again, so two machines pushing at once lose nothing.
  A union that would break the test seal (two machines that each spent the same read) is
  refused ``E_SEALED`` by push and sync alike, before anything is uploaded or any ref moves.
- ``runs/<exp>/<run>/..``: the run folders' logs and transcripts, never weights.

Push writes packs before refs, and sync reads refs before listing packs, so a ref a sync sees
always has its objects in the bucket. Push sends only the objects the bucket lacks (git's
have/want: everything reachable from the local refs and not from the bucket's) as one pack, and
only new or changed run files (by md5), and deletes nothing. Sync pulls into read-only mirror
refs ``refs/remotes/results/monte/<exp>/..`` and the run folders (the bucket's copy wins, a
local-only file is never deleted, weights are skipped), then merges the mirror's ledger into the
local one, so ``monte status`` reads the union.

A small local state file (``.git/monte/results/<bucket>.json``) remembers which packs this
repository already holds and the generation of each bucket ref it last read, so a push with
nothing new reads one listing and uploads nothing.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from monte.errors import MonteError, error
from monte.ledger.refs import (
    VAULT_REF,
    bucket_ref,
    bucket_refs_prefix,
    experiment_prefix,
    experiment_ref,
    mirror_prefix,
    mirror_ref,
)
from monte.ledger.views import own_dir
from monte.result_type import Result
from monte.storage.object_stores import ObjectStore, md5_file, open_store

#: files the results bucket never takes (weights and pickles travel by the hub or the Vault): a
#: wider set than a checkpoint's weight files (``monte.ledger.lineage.WEIGHT_SUFFIXES``)
UNPUSHED_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth", ".ckpt", ".gguf", ".h5", ".msgpack", ".onnx",
                     ".npz", ".pkl", ".pickle")
_RUN_FILE_SUFFIXES = (".json", ".jsonl", ".txt", ".log", ".md", ".yaml", ".yml", ".csv")
_MAX_ROUNDS = 50
#: the bucket's name for the repository's vault ref, beside each experiment's own refs
VAULT = "vault"


def is_weight(path: str) -> bool:
    return path.lower().endswith(UNPUSHED_SUFFIXES)


def open_bucket(ws: Any, *, bucket: str | None, key_file: str | None, write: bool, flags: bool = True) -> ObjectStore:
    """The results bucket, its key resolved; ``flags``: the caller takes ``--bucket`` and
    ``--key-file`` (push, sync), so a refusal may name them (``eval``/``train --push`` take neither)."""
    from monte.storage.keys import read_key, write_key
    from monte.storage.locations import require_url

    url = require_url(ws, "bucket", bucket, flag="--bucket" if flags else None)
    key = None
    if url.startswith("gs://"):
        key = write_key(key_file) if write else read_key(key_file)
        if key is None:
            ladder = ("MONTE_GCS_BOX_KEY_FILE, MONTE_GCS_BOX_KEY_OP, MONTE_GCS_KEY_FILE, "
                      "MONTE_GCS_KEY_OP") if write else "MONTE_GCS_KEY_FILE, MONTE_GCS_KEY_OP"
            ladder = f"--key-file, {ladder}" if flags else ladder
            raise error("E_STORAGE", f"no GCS key resolved to {'push to' if write else 'sync from'} the "
                        f"results bucket {url}", f"set one of, in this order: {ladder}")
    store = open_store(url, key, what="the results bucket")
    store.check()
    return store


# --- local state -------------------------------------------------------------------------------


class _State:
    def __init__(self, ws: Any, url: str) -> None:
        self.path = own_dir(ws.store.repo.commondir()) / "results" / (
            hashlib.sha256(url.encode()).hexdigest()[:16] + ".json")
        try:
            data = json.loads(self.path.read_text())
        except (OSError, ValueError):
            data = {}
        self.url = url
        self.packs: set[str] = set(data.get("packs", []))
        self.gens: dict[str, str] = dict(data.get("gens", {}))

    def save(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps({"url": self.url, "packs": sorted(self.packs), "gens": self.gens},
                                  indent=1, sort_keys=True))
        os.replace(tmp, self.path)


# --- git objects -------------------------------------------------------------------------------


def _local_refs(ws: Any, exp: str) -> dict[str, bytes]:
    """``{"ledger": sha, "base/<c>": sha, "lineage/<run>": sha, "vault": sha}`` for one
    experiment: the vault ref travels with it (its freezes' manifests, which verify proves the
    experiment's hashes against)."""
    prefix = experiment_prefix(exp)
    out = {name[len(prefix):]: sha for name, sha in ws.store.refs_under(prefix).items()}
    vault = ws.store.tip(VAULT_REF)
    if vault is not None:
        out[VAULT] = vault
    return out


def _fetch_packs(ws: Any, store: ObjectStore, exp: str, state: _State) -> int:
    """Index every pack of ``exp`` this repository lacks, each proven by its sha256 name."""
    listing = store.list(f"git/{exp}/packs/")
    fetched = 0
    for name in sorted(listing):
        pack = name.rsplit("/", 1)[1]
        if pack in state.packs or not pack.endswith(".pack"):
            continue
        data = store.get(name)
        if data is None:
            continue
        if hashlib.sha256(data).hexdigest() != pack.removesuffix(".pack"):
            raise error("E_INTEGRITY", f"the results bucket's {name} does not match its sha256 name: it was "
                        "changed after it was pushed", "nothing from it was used; restore or delete the object "
                        "in the bucket, then sync again")
        _index_pack(ws, data, name)
        state.packs.add(pack)
        fetched += 1
    return fetched


def _index_pack(ws: Any, data: bytes, where: str) -> None:
    f = io.BytesIO(data)
    try:
        ws.store.repo.object_store.add_thin_pack(f.read, None)
    except Exception as e:  # dulwich raises several types for a corrupt pack
        raise error("E_INTEGRITY", f"the results bucket's {where} is not a valid git pack ({type(e).__name__})",
                    "nothing from it was used; delete the object in the bucket and push again from a "
                    "machine that holds the runs") from None


def _build_pack(ws: Any, haves: list[bytes], wants: list[bytes]) -> bytes | None:
    from dulwich.pack import write_pack_data

    obj_store = ws.store.repo.object_store
    haves = [h for h in haves if h in obj_store]
    count, records = obj_store.generate_pack_data(haves, wants, ofs_delta=True)
    if count == 0:
        return None
    buf = io.BytesIO()
    kwargs: dict[str, Any] = {"num_records": count}
    try:
        from dulwich.object_format import DEFAULT_OBJECT_FORMAT

        write_pack_data(buf.write, records, DEFAULT_OBJECT_FORMAT, **kwargs)
    except ImportError:  # older dulwich: no object format argument
        write_pack_data(buf.write, records, **kwargs)
    return buf.getvalue()


def _read_remote_refs(store: ObjectStore, exp: str, state: _State, mirror: dict[str, bytes]) -> dict[str, tuple[bytes, str]]:
    """The bucket's refs of ``exp`` with their generations; only refs whose generation moved
    since we last read them are fetched (the rest are what the mirror refs already say)."""
    prefix = bucket_refs_prefix(exp)
    out: dict[str, tuple[bytes, str]] = {}
    for name, st in store.list(prefix).items():
        ref = name[len(prefix):]
        key = f"{exp}/{ref}"
        if state.gens.get(key) == st.generation and ref in mirror:
            out[ref] = (mirror[ref], st.generation)
            continue
        got = store.get_with_generation(name)
        if got is None:
            continue
        raw, gen = got
        sha = raw.strip()
        if len(sha) != 40 or any(c not in b"0123456789abcdef" for c in sha):
            raise error("E_INTEGRITY", f"the results bucket's {name} does not hold a commit id",
                        "the bucket was changed by hand; restore the object, then sync again")
        out[ref] = (sha, gen)
    return out


def _mirror_refs(ws: Any, exp: str) -> dict[str, bytes]:
    prefix = mirror_prefix(exp)
    return {name[len(prefix):]: sha for name, sha in ws.store.refs_under(prefix).items()}


def _set_mirror(ws: Any, exp: str, ref: str, sha: bytes) -> None:
    """Point a mirror ref at the bucket's commit (through the store's compare-and-swap, which
    waits out a live writer's lock and breaks one a killed process left behind)."""
    name = mirror_ref(exp, ref)
    for _ in range(_MAX_ROUNDS):
        old = ws.store.tip(name)
        if old == sha or ws.store.set_ref(name, old, sha):
            return
    raise error("E_CONFLICT", f"could not move the mirror ref {name}: another process holds it",
                "retry the command")


def _check_seal(ws: Any, exp: str, remote: dict[str, tuple[bytes, str]]) -> None:
    """Refuse (E_SEALED) a bucket ledger whose union with ours breaks the test seal, before any
    ref here (ledger, lineage, mirror) moves and before anything is uploaded or written."""
    from monte.ledger.merge import check_seal

    ours = ws.store.tip(experiment_ref(exp, "ledger"))
    theirs = remote.get("ledger", (None, None))[0]
    if ours is not None and theirs is not None and ours != theirs and theirs in ws.store.repo.object_store:
        check_seal(ws.store, ours, theirs)


def _check_repository_seal(ws: Any, store: ObjectStore, state: _State, exp: str,
                           remote: dict[str, tuple[bytes, str]] | None = None) -> None:
    """Refuse (E_SEALED) before anything is uploaded or any ledger ref moves when ``exp``'s test
    reads break the repository-wide seal together with another experiment's: every ledger here,
    the bucket's mirrors, and each other experiment the bucket holds (its packs indexed here,
    no ref of ours moved). ``remote``: the bucket's refs of ``exp`` itself (sync: its reads are
    the bucket's, counted before its ledger is let in)."""
    from dulwich.objects import ObjectID

    from monte.ledger.experiment import Ledger
    from monte.ledger.predicates import is_test_read
    from monte.ledger.seal import SEAL_FIX
    from monte.ledger.tips import Ancestry
    from monte.ledger.transaction import Proposed
    from monte.ledger.verify import seal_violations

    objects = ws.store.repo.object_store
    view: dict[str, bytes | None] = {}
    for other in bucket_experiments(store):
        if other == exp:
            continue
        theirs = _read_remote_refs(store, other, state, _mirror_refs(ws, other))
        if any(sha not in objects for sha, _ in theirs.values()):
            _fetch_packs(ws, store, other, state)
        view.update((mirror_ref(other, ref), sha) for ref, (sha, _) in theirs.items() if sha in objects)
    if remote:
        ours = ws.store.tip(experiment_ref(exp, "ledger"))
        theirs_tip = remote.get("ledger", (None, ""))[0]
        if theirs_tip is not None and theirs_tip in objects and (
                ours is None or ours in Ancestry(objects, ObjectID(theirs_tip))):
            view.update((experiment_ref(exp, ref), sha) for ref, (sha, _) in remote.items() if sha in objects
                        and (ref == "ledger" or ws.store.tip(experiment_ref(exp, ref)) is None))
    seen = Proposed(ws.store, view)  # type: ignore[arg-type]
    if seen.tip(experiment_ref(exp, "ledger")) is None:
        return
    runs = {r.run for r in Ledger(seen, exp).rows() if is_test_read(r)}
    found = seal_violations(seen, new_runs={exp: runs})
    if found:
        raise error("E_SEALED", "; ".join(v.message for _, v in found), SEAL_FIX)


def _let_in(ws: Any, exp: str, ref: str, sha: bytes) -> str:
    """Bring one bucket ref into the local refs: the ledger by union merge, any other ref only
    when it is new here (base and lineage refs are written once by the run that owns them)."""
    from monte.ledger.merge import merge_into_ref

    local = VAULT_REF if ref == VAULT else experiment_ref(exp, ref)
    if ref == "ledger":
        return str(merge_into_ref(ws.store, local, sha).case)
    have = ws.store.tip(local)
    if have is None:
        ws.store.set_ref(local, None, sha)
        return "created"
    if have == sha or _is_ancestor(ws, sha, have):
        return "up-to-date"
    if _is_ancestor(ws, have, sha):
        ws.store.set_ref(local, have, sha)
        return "fast-forward"
    return "conflict"


def _is_ancestor(ws: Any, a: bytes, b: bytes) -> bool:
    """Is commit ``a`` reachable from ``b``?"""
    from dulwich.objects import Commit

    seen: set[bytes] = set()
    todo = [b]
    store = ws.store.repo.object_store
    while todo:
        c = todo.pop()
        if c == a:
            return True
        if c in seen or c not in store:
            continue
        seen.add(c)
        obj = store[c]
        if isinstance(obj, Commit):
            todo.extend(obj.parents)
    return False


# --- run files ---------------------------------------------------------------------------------


def _run_files(ws: Any, exp: str, run: str | None) -> dict[str, Path]:
    """``runs/<exp>/<run>/<rel>`` -> local path, for the files push may send. Weights in the
    trainer's folder and the servable ``checkpoints/`` are skipped (they go to the hub); a
    weight file anywhere else in a run folder is refused, as push never uploads weights."""
    root = ws.runs_folder(exp)
    out: dict[str, Path] = {}
    folders = [root / run] if run else (sorted(p for p in root.iterdir() if p.is_dir()) if root.is_dir() else [])
    for folder in folders:
        for dirpath, dirs, files in os.walk(folder):
            dirs.sort()
            for f in sorted(files):
                p = Path(dirpath) / f
                if p.is_symlink() or not p.is_file():
                    continue
                rel = p.relative_to(ws.data_root).as_posix()
                # the trainer's state and the servable checkpoints: weights go to the hub
                in_trainer = p.relative_to(folder).parts[0] in ("trainer", "checkpoints")
                if is_weight(f):
                    if in_trainer:
                        continue
                    raise error("E_REFUSED", f"{p} is a weight file, and push never uploads weights",
                                "weights go to the hub at the end of a --push chunk; move the file out of the "
                                "run folder and push again")
                if in_trainer and not f.endswith(_RUN_FILE_SUFFIXES):
                    continue  # optimizer state and the like: the trainer's, not a result
                out[rel] = p
    return out


def _bucket_prefix(ws: Any, exp: str, run: str | None) -> str:
    """The bucket's keys of a run folder (of every run folder of the experiment, with no run): a
    run file's key is its path under the data root."""
    folder = ws.run_folder(exp, run) if run else ws.runs_folder(exp)
    return f"{folder.relative_to(ws.data_root).as_posix()}/"


def _push_files(ws: Any, store: ObjectStore, exp: str, run: str | None) -> tuple[int, int]:
    local = _run_files(ws, exp, run)
    remote = store.list(_bucket_prefix(ws, exp, run)) if local else {}
    sent = nbytes = 0
    for rel, path in local.items():
        st = remote.get(rel)
        if st is not None and st.md5 == md5_file(path):
            continue
        data = path.read_bytes()
        store.put(rel, data)
        sent += 1
        nbytes += len(data)
    return sent, nbytes


def _pull_files(ws: Any, store: ObjectStore, exp: str) -> tuple[int, int]:
    got = skipped = 0
    for rel, st in store.list(_bucket_prefix(ws, exp, None)).items():
        if is_weight(rel):
            skipped += 1
            continue
        parts = rel.split("/")
        if len(parts) < 4 or any(p in ("", ".", "..") for p in parts):
            continue  # not a run file monte pushed; never write outside the run folders
        path = ws.data_root.joinpath(*parts)
        if path.is_file() and md5_file(path) == st.md5:
            continue
        data = store.get(rel)
        if data is None:
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.sync")
        tmp.write_bytes(data)
        os.replace(tmp, path)  # the bucket's copy wins
        got += 1
    return got, skipped


# --- push --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Pushed(Result):
    """``monte push``: what went to the results bucket (packs, refs, run files, their bytes) and
    the refs it merged because the bucket had moved (``merged``)."""

    experiment: str
    bucket: str
    run: str | None
    packs: int
    pack_bytes: int
    refs: int
    files: int
    file_bytes: int
    uploaded_bytes: int
    merged: list[str]


@dataclass(frozen=True)
class SyncedExperiment(Result):
    """One experiment ``monte sync`` brought back: what its ledger ref did (``ledger``: up-to-date,
    fast-forward, merged, ...), new packs, refs read, run files, and the refs kept as they are here."""

    experiment: str
    packs: int
    ledger: str
    refs: int
    files: int
    skipped_weights: int
    conflicts: list[str]


@dataclass(frozen=True)
class Synced(Result):
    """``monte sync``: the bucket and each experiment it held."""

    bucket: str
    experiments: tuple[SyncedExperiment, ...]


def push(ws: Any, experiment: str, *, run: str | None = None, bucket: str | None = None,
         key_file: str | None = None) -> Pushed:
    from monte.ledger.experiment import Ledger

    if not Ledger(ws.store, experiment).exists():
        raise error("E_NOT_FOUND", f"no experiment named {experiment!r} here",
                    "list experiments with `monte status`, or sync it first with `monte sync`")
    if run is not None and not ws.run_folder(experiment, run).is_dir() and \
            Ledger(ws.store, experiment).row(run) is None:
        raise error("E_NOT_FOUND", f"experiment {experiment!r} has no run {run!r}",
                    "name a run of it (`monte status`)")
    _run_files(ws, experiment, run)  # refuse a weight file before anything is uploaded
    store = open_bucket(ws, bucket=bucket, key_file=key_file, write=True)
    state = _State(ws, store.url)
    packs_sent = pack_bytes = refs_sent = 0
    merges: list[str] = []
    for _ in range(_MAX_ROUNDS):
        mirror = _mirror_refs(ws, experiment)
        remote = _read_remote_refs(store, experiment, state, mirror)
        if any(sha not in ws.store.repo.object_store for sha, _ in remote.values()):
            _fetch_packs(ws, store, experiment, state)
        _check_seal(ws, experiment, remote)
        _check_repository_seal(ws, store, state, experiment)
        for ref, (sha, gen) in remote.items():
            _set_mirror(ws, experiment, ref, sha)
            state.gens[f"{experiment}/{ref}"] = gen
            kind = _let_in(ws, experiment, ref, sha)
            if kind == "merged":
                merges.append(ref)
        local = _local_refs(ws, experiment)
        todo = {ref: sha for ref, sha in local.items() if remote.get(ref, (None, None))[0] != sha}
        if VAULT in todo and VAULT in remote and not _is_ancestor(ws, remote[VAULT][0], todo[VAULT]):
            del todo[VAULT]  # another machine's vault, not behind ours: never written over

        if not todo:
            break
        pack = _build_pack(ws, [sha for sha, _ in remote.values()], list(todo.values()))
        if pack is not None:
            name = hashlib.sha256(pack).hexdigest() + ".pack"
            if store.create(f"git/{experiment}/packs/{name}", pack):
                packs_sent += 1
                pack_bytes += len(pack)
            state.packs.add(name)
        lost = False
        for ref, sha in sorted(todo.items(), key=lambda kv: kv[0] == "ledger"):  # the ledger last
            expected = remote[ref][1] if ref in remote else None
            if store.swap(bucket_ref(experiment, ref), sha + b"\n", expected):
                refs_sent += 1
                st = store.stat(bucket_ref(experiment, ref))
                _set_mirror(ws, experiment, ref, sha)
                if st is not None:
                    state.gens[f"{experiment}/{ref}"] = st.generation
            else:
                lost = True  # another machine moved it: read it, merge, try again
        state.save()
        if not lost:
            break
    else:
        raise error("E_STORAGE", f"gave up pushing {experiment} after {_MAX_ROUNDS} lost races",
                    "another machine is pushing very often; retry")
    state.save()
    files, file_bytes = _push_files(ws, store, experiment, run)
    return Pushed(experiment=experiment, bucket=store.url, run=run, packs=packs_sent, pack_bytes=pack_bytes,
                  refs=refs_sent, files=files, file_bytes=file_bytes, uploaded_bytes=pack_bytes + file_bytes,
                  merged=merges)


# --- sync --------------------------------------------------------------------------------------


def bucket_experiments(store: ObjectStore) -> list[str]:
    names = set()
    for name in store.list("git/"):
        parts = name.split("/")
        if len(parts) >= 4 and parts[2] == "refs" and parts[3] == "ledger":
            names.add(parts[1])
    return sorted(names)


def sync(ws: Any, experiments: list[str] | None = None, *, bucket: str | None = None,
         key_file: str | None = None) -> Synced:
    from monte.names import check_name

    store = open_bucket(ws, bucket=bucket, key_file=key_file, write=False)
    state = _State(ws, store.url)
    names = list(experiments) if experiments else bucket_experiments(store)
    for n in names:
        check_name(n, "experiment name")
    out = []
    for exp in names:
        mirror = _mirror_refs(ws, exp)
        remote = _read_remote_refs(store, exp, state, mirror)
        if "ledger" not in remote:
            raise error("E_NOT_FOUND", f"the results bucket {store.url} holds no experiment {exp!r}",
                        "`monte sync` with no name syncs every experiment the bucket holds")
        packs = _fetch_packs(ws, store, exp, state)
        missing = [ref for ref, (sha, _) in remote.items() if sha not in ws.store.repo.object_store]
        if missing:
            raise error("E_INTEGRITY", f"the results bucket's refs {', '.join(missing[:3])} of {exp} name commits "
                        "its packs do not hold", "push again from the machine that holds the runs")
        _check_seal(ws, exp, remote)
        _check_repository_seal(ws, store, state, exp, remote)
        outcome: dict[str, str] = {}
        for ref, (sha, gen) in remote.items():
            _set_mirror(ws, exp, ref, sha)
            state.gens[f"{exp}/{ref}"] = gen
            try:
                outcome[ref] = _let_in(ws, exp, ref, sha)
            except MonteError:
                state.save()
                raise
        state.save()
        files, skipped = _pull_files(ws, store, exp)
        out.append(SyncedExperiment(experiment=exp, packs=packs, ledger=outcome.get("ledger", "up-to-date"),
                                    refs=len(remote), files=files, skipped_weights=skipped,
                                    conflicts=sorted(r for r, k in outcome.items() if k == "conflict")))
    return Synced(bucket=store.url, experiments=tuple(out))
