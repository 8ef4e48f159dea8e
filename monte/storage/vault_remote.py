"""The Vault: a DVC remote that holds every frozen Environment and Dataset, plus name claims.

Layout under the Vault URL (``gs://bucket/prefix`` or a folder):

- ``files/md5/..``: DVC 3's own remote layout. A frozen folder goes into the repository's DVC
  cache as links to its files (:mod:`monte.storage.tracking`, which also writes the folder's
  ``.dvc`` pointer) and from there to the remote with DVC's data API (``dvc_data``: dvc-gs or
  DVC's local file system). ``monte config set vault`` names the same URL as DVC's default
  remote, so with the pointer committed, plain ``dvc pull`` in a clone fetches the folder, and
  ``dvc gc -c`` keeps it.
- ``monte/claims/<kind>s/<name>.json``: the name claim, written create-only (GCS
  ``ifGenerationMatch=0``; ``link(2)`` on a folder; see :mod:`monte.storage.object_stores`). Whoever
  writes it first owns the name, in every region.
- ``monte/manifests/<kind>s/<name>.json``: the manifest and the folder's DVC entry (the pointer's
  ``outs`` entry: ``md5``, ``size``, ``nfiles``, ``hash: md5``, ``path``), written after the
  bytes landed: its presence is what says the upload completed.
- ``monte/sealed/<sha256>.{age,json}``: a test split in a grader's custody, encrypted to its key
  (:mod:`monte.storage.sealed_copy`); its plaintext object is absent from ``files/md5`` on
  purpose, so the loss check does not count it and a fetch leaves that one file out.

Every fetch proves every file against the manifest's sha256 before anything is moved into place.
Objects deleted from the Vault behind monte's back (by hand, or by ``dvc gc -c`` run where the
pointers were missing) are reported as lost (``E_INTEGRITY``), never as a network error.
"""

from __future__ import annotations

import json
import re
import shutil
import socket
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from monte.errors import MonteError, error, in_words
from monte.manifest import Manifest, now, parse_manifest
from monte.result_type import Result
from monte.storage.object_stores import GcsStore, LocalStore, ObjectStore, emulator_host, open_store

if TYPE_CHECKING:
    from monte.storage.tracking import DvcOut

_PLURAL = {"environment": "environments", "dataset": "datasets"}


def claim_name(kind: str, name: str) -> str:
    return f"monte/claims/{_PLURAL[kind]}/{name}.json"


def manifest_name(kind: str, name: str) -> str:
    return f"monte/manifests/{_PLURAL[kind]}/{name}.json"


@dataclass
class Claim:
    kind: str
    name: str
    fingerprint: str
    host: str
    claimed_at: str


@dataclass(frozen=True)
class VaultEntry(Result):
    """One name the Vault holds (``env list --vault``, ``dataset list --vault``)."""

    name: str
    kind: str
    fingerprint: str
    claimed_by: str
    claimed_at: str
    complete: bool  # its upload finished (the Vault holds its manifest) and no object of it is lost
    lost: int = 0  # objects of it the Vault no longer holds (deleted behind monte's back)


class VaultRemote:
    def __init__(self, url: str, key: Any, repo_root: Path) -> None:
        self.url = url
        self.key = key
        self.repo_root = repo_root
        self.store: ObjectStore = open_store(url, key, what="the Vault")

    # --- claims -----------------------------------------------------------------------------

    def claim_of(self, kind: str, name: str) -> Claim | None:
        raw = self.store.get(claim_name(kind, name))
        if raw is None:
            return None
        try:
            d = json.loads(raw)
            return Claim(kind, name, str(d["fingerprint"]), str(d.get("host", "")), str(d.get("claimed_at", "")))
        except (ValueError, KeyError, TypeError):
            raise error("E_INTEGRITY", f"the Vault's claim on {kind} {name!r} is not readable",
                        "inspect it in the Vault; it is not something monte wrote") from None

    def claim(self, kind: str, name: str, fingerprint: str) -> bool:
        """Claim ``name`` create-only. True when this call (or an earlier one for the same
        fingerprint, e.g. a retried upload) owns it."""
        body = json.dumps({"kind": kind, "name": name, "fingerprint": fingerprint,
                           "host": socket.gethostname(), "claimed_at": now()}, sort_keys=True).encode()
        if self.store.create(claim_name(kind, name), body):
            return True
        held = self.claim_of(kind, name)
        return held is not None and held.fingerprint == fingerprint

    def names(self, kind: str) -> list[VaultEntry]:
        """What the Vault holds of ``kind``: every claim, whether its upload completed, and how
        many of its objects the Vault has lost since."""
        claims = self.store.list(f"monte/claims/{_PLURAL[kind]}/")
        done = self.store.list(f"monte/manifests/{_PLURAL[kind]}/")
        out = []
        for path in sorted(claims):
            name = path.rsplit("/", 1)[1].removesuffix(".json")
            c = self.claim_of(kind, name)
            complete = f"monte/manifests/{_PLURAL[kind]}/{name}.json" in done
            lost = 0
            if complete:
                try:
                    found = self.manifest(kind, name)
                except MonteError:  # not a manifest monte wrote: `env install` says why
                    found = None
                lost = len(self.lost(str(found[1].get("md5", "")))) if found else 0
                complete = found is not None
            out.append(VaultEntry(name=name, kind=kind, fingerprint=c.fingerprint if c else "",
                                  claimed_by=c.host if c else "", claimed_at=c.claimed_at if c else "",
                                  complete=complete and lost == 0, lost=lost))
        return out

    def lost(self, dir_md5: str) -> list[str]:
        """The objects of a folder (its ``.dir`` listing and every file it lists) that the Vault
        does not hold, as ``files/md5/..`` names; asked of DVC's own remote (``oids_exist``). A
        listing that cannot be read counts as its one lost object."""
        remote = self._remote()
        listing = _object_name(dir_md5)
        raw = self.store.get(listing) if _DIR_MD5.match(dir_md5) else None
        try:
            oids = sorted({str(e["md5"]) for e in json.loads(raw)}) if raw is not None else None
        except (ValueError, KeyError, TypeError):
            oids = None
        if oids is None:
            return [listing]
        present = set(remote.oids_exist(oids))
        if len(present) == len(oids):
            return []
        from monte.storage.sealed_copy import sealed_md5s

        sealed = sealed_md5s(self.store)  # a sealed split's plaintext is gone on purpose: not a loss
        return [_object_name(o) for o in oids if o not in present and o not in sealed]

    def _lost_error(self, kind: str, name: str, lost: list[str]) -> MonteError:
        cmd = "env add" if kind == "environment" else "dataset add"
        folder = f"{_PLURAL[kind]}/{name}"
        return error("E_INTEGRITY", f"the Vault {self.url} lost {len(lost)} object(s) of {kind} {name!r} "
                     f"(e.g. {lost[0]}): they were deleted from it after the upload (by hand, or by `dvc gc "
                     "-c` where the .dvc pointers were missing); nothing was written",
                     f"on a machine whose data root holds {name!r}, re-run its `monte {cmd}` (it uploads "
                     f"what the Vault lost) or `dvc push` its pointer ({folder}.dvc under the data root)")

    def manifest(self, kind: str, name: str) -> tuple[Manifest, dict[str, Any]] | None:
        raw = self.store.get(manifest_name(kind, name))
        if raw is None:
            return None
        where = f"{self.url}/{manifest_name(kind, name)}"
        try:
            doc = json.loads(raw)
            m = parse_manifest(json.dumps(doc["manifest"]).encode(), where)
            dvc = dict(doc["dvc"])
        except MonteError:
            raise
        except (ValueError, KeyError, TypeError):
            raise error("E_INTEGRITY", f"{where} is not a manifest monte wrote",
                        "inspect the Vault; nothing was fetched") from None
        if m.kind != kind or m.name != name:
            raise error("E_INTEGRITY", f"{where} describes {m.kind} {m.name!r}, not {kind} {name!r}",
                        "the Vault was tampered with; nothing was fetched")
        if kind == "dataset" and "rows.jsonl" not in m.files:
            raise error("E_INTEGRITY", f"{where} lists no rows.jsonl: it is not a dataset monte froze",
                        "the Vault was tampered with; nothing was fetched")
        claim = self.claim_of(kind, name)
        if claim is None or claim.fingerprint != m.fingerprint:
            raise error("E_INTEGRITY", f"{where} does not match the Vault's claim on {name!r}",
                        "the Vault was tampered with; nothing was fetched")
        return m, dvc

    # --- bytes, through DVC -----------------------------------------------------------------

    def _remote(self) -> Any:
        """The Vault as a DVC object database (``files/md5``)."""
        from dvc_data.hashfile.db import HashFileDB
        from dvc_objects.fs.local import LocalFileSystem

        store = self.store
        if isinstance(store, LocalStore):
            remote = HashFileDB(LocalFileSystem(), str(store.root / "files" / "md5"))
        else:
            assert isinstance(store, GcsStore)
            from dvc_gs import GSFileSystem

            host = emulator_host()
            if host:
                fs = GSFileSystem(allow_anonymous_login=True, endpointurl=host)
            else:  # the key stays in memory: gcsfs takes the service-account info as a dict
                fs = GSFileSystem(credentialpath=self.key.info)
            path = f"{store.bucket_name}/{store.prefix}".rstrip("/")
            remote = HashFileDB(fs, f"{path}/files/md5")
        return remote

    def upload(self, manifest: Manifest, folder: Path, out: DvcOut | None = None) -> dict[str, Any]:
        """Push ``folder`` to the DVC remote from the repository's DVC cache (where it is linked,
        not copied: :func:`monte.storage.tracking.commit`; ``out``: it is there already), then
        write its manifest (the completion mark). Objects the remote holds are not sent again."""
        from dvc_data.hashfile.hash_info import HashInfo
        from dvc_data.hashfile.transfer import transfer

        from monte.storage import tracking

        if out is None or not tracking.in_cache(self.repo_root, out):
            out, _ = tracking.commit(self.repo_root, folder)
        hi = HashInfo("md5", out.md5)
        with tracking.dvc_repo(self.repo_root) as repo:
            cache = repo.cache.repo
            remote = self._remote()
            try:
                with tracking.dvc_said() as said:
                    result = transfer(cache, remote, {hi}, shallow=False)
            except MonteError:
                raise
            except Exception as e:
                raise error("E_STORAGE", f"the Vault {self.url}: uploading {folder.name} failed: {in_words(e)}",
                            "check the connection and the key") from None
        if result.failed:
            raise error("E_STORAGE", f"the Vault {self.url}: {len(result.failed)} object(s) of {folder.name} "
                        f"did not upload{tracking.dvc_reason(said)}",
                        "check the connection and the key (for a folder Vault: the path it names)")
        dvc = {**out.entry(f"{_PLURAL[manifest.kind]}/{manifest.name}")}
        doc = {"manifest": json.loads(manifest.dumps()), "dvc": dvc}
        self.store.put(manifest_name(manifest.kind, manifest.name),
                       (json.dumps(doc, sort_keys=True, indent=2) + "\n").encode())
        return dvc

    def fetch(self, kind: str, name: str, staged: Path) -> Manifest:
        """Fetch the folder into ``staged`` (an empty folder) and return its manifest. The caller
        proves every hash before moving it anywhere."""
        from dvc_data.hashfile import load
        from dvc_data.hashfile.checkout import CheckoutError, checkout
        from dvc_data.hashfile.db import HashFileDB
        from dvc_data.hashfile.hash_info import HashInfo
        from dvc_data.hashfile.transfer import transfer
        from dvc_data.hashfile.tree import Tree
        from dvc_objects.fs.local import LocalFileSystem

        from monte.storage import tracking

        found = self.manifest(kind, name)
        if found is None:
            if self.claim_of(kind, name) is not None:
                raise error("E_NOT_FOUND", f"the Vault holds the name {name!r} but its upload never completed",
                            "re-run the freeze's `monte env add`/`dataset add` on the machine that holds it")
            raise error("E_NOT_FOUND", f"no {kind} named {name!r} on this data root or in the Vault",
                        f"list the Vault with `monte {'env' if kind == 'environment' else 'dataset'} list --vault`")
        m, dvc = found
        # The Vault is not trusted: DVC turns every md5 into a cache path and every relpath into
        # a path under ``staged``, so a hostile .dir listing ("../../x", a non-hex md5) would
        # write outside the data root. Prove the listing before DVC reads it.
        entries = self._check_listing(kind, name, m, str(dvc.get("md5", "")))
        from monte.storage.sealed_copy import sealed_md5s

        sealed = {md5 for _, md5 in entries} & sealed_md5s(self.store)
        if sealed:  # a test split the Vault keeps encrypted to a grader: every other file, object by object
            return self._fetch_without(kind, name, m, entries, sealed, staged)
        # A private cache beside the staging folder: bytes that fail a check never reach the
        # repository's DVC cache, so a later fetch (after the Vault is repaired) starts clean.
        cache = HashFileDB(LocalFileSystem(), str(staged.parent / "dvc-cache"))
        remote = self._remote()
        hi = HashInfo("md5", str(dvc["md5"]))
        try:
            try:
                with tracking.dvc_said() as said:
                    result = transfer(remote, cache, {hi}, shallow=False)
                failed = len(result.failed)
                obj = load(cache, hi) if not failed else None  # DVC fetches the listing last
            except (FileNotFoundError, KeyError):  # an object missing, or gone while DVC read it
                failed, obj = 1, None
            if failed or obj is None:
                lost = self.lost(str(dvc["md5"]))
                if lost:
                    raise self._lost_error(kind, name, lost)
                raise error("E_STORAGE", f"the Vault {self.url}: {failed} object(s) of {name} "
                            f"could not be fetched{tracking.dvc_reason(said)}", "check the connection and retry")
            if not isinstance(obj, Tree):
                raise error("E_INTEGRITY", f"the Vault's copy of {kind} {name!r} is not a folder", _TAMPERED)
            _check_entries(kind, name, m, [("/".join(key), str(h.value) if h else "") for key, _, h in obj])
            if staged.exists():
                shutil.rmtree(staged)
            checkout(str(staged), LocalFileSystem(), obj, cache)
        except MonteError:
            raise
        except CheckoutError:
            raise error("E_INTEGRITY", f"the Vault's copy of {kind} {name!r} does not match its DVC hashes: an "
                        "object was changed after it was pushed", "nothing was written; re-push the freeze "
                        "from the machine that holds it, or freeze under a new name") from None
        except Exception as e:
            raise error("E_STORAGE", f"the Vault {self.url}: fetching {name} failed: {in_words(e)}",
                        "check the connection and retry; nothing was written") from None
        return m

    def _fetch_without(self, kind: str, name: str, m: Manifest, entries: list[tuple[str, str]], sealed: set[str],
                       staged: Path) -> Manifest:
        """A folder whose sealed test split the Vault keeps only encrypted (``monte grader
        take`` deleted its plaintext object): every other file fetched and proven by its md5
        here (the caller proves the sha256s), the sealed one left out, as on a data root whose
        split is in the grader's custody."""
        import hashlib

        from monte.manifest import sealed_files

        if staged.exists():
            shutil.rmtree(staged)
        # a sealed file (a split, an lm-eval exam's test documents) is left out; another file with
        # the same bytes (a dev document) keeps its object in the Vault and is fetched
        away = {rel for files in sealed_files(m).values() for rel in files}
        for rel, md5 in entries:
            if rel in away and md5 in sealed:
                continue
            raw = self.store.get(_object_name(md5))
            if raw is None:
                raise self._lost_error(kind, name, [_object_name(md5)])
            if hashlib.md5(raw).hexdigest() != md5:  # noqa: S324 - DVC 3's content address
                raise error("E_INTEGRITY", f"the Vault's copy of {kind} {name!r} does not match its DVC hashes: an "
                            "object was changed after it was pushed", _TAMPERED)
            dest = staged.joinpath(*rel.split("/"))
            dest.parent.mkdir(parents=True, exist_ok=True)
            dest.write_bytes(raw)
        return m

    def _check_listing(self, kind: str, name: str, m: Manifest, dir_md5: str) -> list[tuple[str, str]]:
        """Read the folder's DVC ``.dir`` listing from the Vault and refuse it unless every
        entry is a plain relative path the manifest names, with a hex md5; returns the entries."""
        if not _DIR_MD5.match(dir_md5):
            raise error("E_INTEGRITY", f"the Vault's manifest of {kind} {name!r} names the DVC object "
                        f"{dir_md5[:80]!r}, which is not a DVC folder hash", _TAMPERED)
        raw = self.store.get(_object_name(dir_md5))
        if raw is None:  # the listing itself is gone: what else is, the listing would have said
            raise self._lost_error(kind, name, [_object_name(dir_md5)])
        try:
            listing = json.loads(raw)
            entries = [(str(e["relpath"]), str(e.get("md5", ""))) for e in listing]
        except (ValueError, KeyError, TypeError):
            raise error("E_INTEGRITY", f"the Vault's DVC listing of {kind} {name!r} is not one DVC wrote",
                        _TAMPERED) from None
        _check_entries(kind, name, m, entries)
        return entries


_DIR_MD5 = re.compile(r"^[0-9a-f]{32}\.dir$")
_MD5 = re.compile(r"^[0-9a-f]{32}$")


def _object_name(md5: str) -> str:
    """Where DVC 3 keeps an object in a remote: ``files/md5/<2>/<rest>``."""
    return f"files/md5/{md5[:2]}/{md5[2:]}"
_TAMPERED = "the Vault was tampered with; nothing was written"


def _check_entries(kind: str, name: str, m: Manifest, entries: list[tuple[str, str]]) -> None:
    from monte.manifest import MANIFEST, check_relpath

    for rel, md5 in entries:
        try:
            check_relpath(rel)
        except MonteError:
            raise error("E_UNSAFE_PATH", f"the Vault's DVC listing of {kind} {name!r} lists {rel[:80]!r}, "
                        "which escapes its folder", _TAMPERED) from None
        if not _MD5.match(md5):
            raise error("E_INTEGRITY", f"the Vault's DVC listing of {kind} {name!r} gives {rel[:80]!r} the md5 "
                        f"{md5[:80]!r}, which is not an md5", _TAMPERED)
        if rel not in m.files and rel != MANIFEST:
            raise error("E_INTEGRITY", f"the Vault's copy of {kind} {name!r} holds files its manifest does not "
                        f"name ({rel[:80]})", _TAMPERED)


# --- who may read and write, for this machine ------------------------------------------------


@dataclass
class Access:
    """The Vault as this machine can reach it: ``reader`` checks names, ``writer`` pushes; either
    may be None, and ``note`` says why (never a key's content, only where it came from)."""

    url: str | None
    reader: VaultRemote | None
    writer: VaultRemote | None
    note: str = ""


def access(ws: Any, *, write: bool, key_file: str | None = None) -> Access:
    """Resolve the Vault for a freeze (``write``) or a read. A local-folder Vault needs no key;
    a ``gs://`` Vault reads with any key the read ladder or the write ladder resolves, and
    writes with the write ladder's key once it passes the write probe."""
    from monte.storage.keys import read_key, write_key
    from monte.storage.locations import url_for

    url = url_for(ws, "vault")
    if url is None:
        return Access(None, None, None, "kept on this data root only: no Vault is configured for this "
                      "repository (`monte config set vault URL`)")
    if not url.startswith("gs://"):
        remote = VaultRemote(url, None, ws.repo_root)
        remote.store.check()
        if write and not remote.store.can_write():
            return Access(url, remote, None, f"kept on this data root only: this machine cannot write the "
                          f"Vault folder {url} (once it can, the same command pushes it)")
        return Access(url, remote, remote if write else None)
    # Checking a name is a read, and any key that resolves may make it: a name the Vault holds is
    # refused from every machine, whether or not its key could have written it.
    rkey = read_key(key_file)
    wkey = write_key(key_file)
    key = rkey or wkey
    if key is None:
        return Access(url, None, None, "kept on this data root only: no GCS key resolved, so the name was "
                      "checked against this data root alone (to push it: set MONTE_GCS_BOX_KEY_FILE or "
                      "MONTE_GCS_BOX_KEY_OP and run the same command again; MONTE_GCS_KEY_FILE or "
                      "MONTE_GCS_KEY_OP to read)")
    reader = VaultRemote(url, key, ws.repo_root)
    if not write:
        return Access(url, reader, None)
    if wkey is None:  # unreachable today (the write ladder ends in the read ladder), kept for clarity
        return Access(url, reader, None, "kept on this data root only: no write key resolved")
    writer = reader if wkey is key else VaultRemote(url, wkey, ws.repo_root)
    if not writer.store.can_write():
        return Access(url, reader, None, f"kept on this data root only: the key from {wkey.source} cannot "
                      "write the Vault. To push it: set MONTE_GCS_BOX_KEY_FILE or MONTE_GCS_BOX_KEY_OP and run the "
                      "same command again")
    return Access(url, reader, writer)


def require_reader(ws: Any, key_file: str | None = None) -> VaultRemote:
    a = access(ws, write=False, key_file=key_file)
    if a.reader is None:
        if a.url is None:
            raise error("E_STORAGE", "no Vault is configured for this repository",
                        "name it with `monte config set vault gs://BUCKET/PREFIX` (or a folder)")
        raise error("E_STORAGE", f"no GCS key resolved to read the Vault {a.url}",
                    "set MONTE_GCS_KEY_FILE (the path of a service-account JSON key) or MONTE_GCS_KEY_OP "
                    "(a 1Password document, read with `op document get`)"
                    + (", or pass --key-file" if key_file is not None else ""))
    return a.reader
