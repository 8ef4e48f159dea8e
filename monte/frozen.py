"""A frozen folder's way between this data root, the vault ref and the Vault.

Environments and Datasets share it: the create-only name claim in the Vault, the upload that
may fail and be resumed, the staging folders a killed freeze leaves behind, the fetch that
proves every hash before anything lands, and the one ``--source`` namespace the two kinds share.
What a frozen folder *is* lives in :mod:`monte.manifest`; how each kind is made lives in
:mod:`monte.envs` and :mod:`monte.datasets`.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from monte import staging
from monte.errors import MonteError, error, in_words
from monte.manifest import Manifest
from monte.names import check_name
from monte.workspace import Workspace

if TYPE_CHECKING:
    from monte.ledger.vault_ref import Vault
    from monte.storage.tracking import DvcOut
    from monte.storage.vault_remote import VaultEntry, VaultRemote


def claimed(reader: VaultRemote, kind: str, name: str) -> bool:
    """Does the Vault hold ``name``? A claim whose upload never completed (no manifest in the
    Vault) and that neither the vault ref nor this data root records (the caller checked) is a
    freeze killed between claiming and recording: it does not refuse here. The freeze goes on,
    and the create-only claim decides: the same fingerprint takes it over, another one loses."""
    if reader.claim_of(kind, name) is None:
        return False
    return reader.manifest(kind, name) is not None


def sweep_staging(ws: Workspace) -> None:
    """Staging folders in ``<data root>/tmp`` left by a freeze, install or fetch that was killed:
    one whose manifest the vault ref records while its folder is missing (killed between
    recording the freeze and moving it into place) is proven and moved into place; the rest
    are deleted. Folders of live processes are left alone."""
    from monte.ledger.vault_ref import Vault
    from monte.manifest import read_manifest, verify_folder
    from monte.storage import tracking

    tracking.sweep_temps(ws)
    vault = Vault(ws.store)
    for staged in staging.stale_staging(ws.data_root):
        for cand in (staged, staged / "payload"):
            try:
                m = read_manifest(cand) if cand.is_dir() else None
                if m is None:
                    continue
                check_name(m.name, f"{m.kind} name")
                dest = ws.env_dir(m.name) if m.kind == "environment" else ws.dataset_dir(m.name)
                recorded = vault.get(m.kind, m.name)
                if recorded is not None and recorded.fingerprint == m.fingerprint and not os.path.lexists(dest):
                    verify_folder(cand, m)
                    staging.move_into_place(cand, dest)
                    track(ws, m.kind, m.name, dest)
                    break
            except (MonteError, OSError):
                continue
        staging.discard(staged)


def set_aside(ws: Workspace, kind: str, name: str, folder: Path) -> Path:
    """Move an edited frozen folder out of the way, to ``<data root>/aside/<kind>s/<name>-<time>``
    (on the data root's file system: a rename; out of git by the data root's .gitignore), so the
    frozen copy can be restored in its place and nothing of the user's is lost."""
    import time

    where = ws.data_root / "aside" / f"{kind}s"
    where.mkdir(parents=True, exist_ok=True)
    aside = where / f"{name}-{time.strftime('%Y%m%dT%H%M%S')}"
    n = 1
    while os.path.lexists(aside):
        n += 1
        aside = where / f"{name}-{time.strftime('%Y%m%dT%H%M%S')}-{n}"
    os.replace(folder, aside)
    return aside


def track(ws: Workspace, kind: str, name: str, folder: Path, out: DvcOut | None = None) -> str:
    """DVC tracks the frozen ``folder`` (proven against its manifest, in place): its files
    linked into DVC's cache, its ``.dvc`` pointer written and staged
    (:mod:`monte.storage.tracking`). ``out``: the folder was committed to DVC's cache while it
    was staged (:func:`commit_staged`). Returns the pointer's path, relative to the repository."""
    from monte.storage import tracking

    try:
        if out is not None:
            tracking.settle(ws, kind, name, folder, out)
        else:
            tracking.track(ws, kind, name, folder)
    except MonteError as e:
        cmd = f"monte env install {name}" if kind == "environment" else f"monte dataset show {name}"
        raise error(e.code, f"the freeze of {kind} {name!r} is in place, but DVC does not track it yet: "
                    f"{e.message}", f"{e.fix}; then `{cmd}` finishes it") from None
    path = tracking.pointer_path(ws, kind, name)
    return str(path.relative_to(ws.repo_root)) if path.is_relative_to(ws.repo_root) else str(path)


def commit_staged(ws: Workspace, staged: Path) -> tuple[DvcOut, list[str]]:
    """Link a staged freeze's files into DVC's cache before it is recorded: its DVC hash goes
    into the vault commit's trailers (``Monte-Dvc-*``, so that ``monte init`` can write its
    pointer on a machine that never held its bytes), and the links survive the move into place.
    Returns the hash and the cache objects added, which :func:`uncommit` takes back if the
    freeze is refused."""
    from monte.storage import tracking

    return tracking.commit(ws.repo_root, staged)


def uncommit(ws: Workspace, added: list[str]) -> None:
    from monte.storage import tracking

    tracking.uncommit(ws.repo_root, added)


def lost_claim(kind: str, name: str, url: str | None) -> MonteError:
    noun = "environment" if kind == "environment" else "dataset"
    fix = (f"re-add under another name with `--as NEW_NAME`, or run `monte env install {name}` to bring "
           "the winner's copy here") if kind == "environment" else (
        f"re-add under another NAME, or run `monte dataset show {name}` to bring the winner's copy here")
    return error("E_NAME_TAKEN", f"another writer claimed the {noun} name {name!r} in the Vault {url} "
                 "first; this freeze was discarded and nothing was written here", fix)


def lost_kept_name(kind: str, name: str, url: str | None, dest: Path) -> MonteError:
    noun = "environment" if kind == "environment" else "dataset"
    return error("E_NAME_TAKEN", f"the Vault {url} holds the {noun} name {name!r} for another freeze: the one "
                 f"kept on this data root ({dest}) cannot be pushed under it; nothing was written",
                 "freeze it again under another name (`--as NEW_NAME`) to share it"
                 if kind == "environment" else "freeze it again under another NAME to share it")


def upload_or_keep(writer: VaultRemote, m: Manifest, dest: Path, cmd: str, out: DvcOut | None = None) -> None:
    """Push a freeze that is already in place; on any failure keep it and refuse E_STORAGE."""
    try:
        writer.upload(m, dest, out=out)
    except (MonteError, OSError, KeyboardInterrupt) as e:
        why = e.message if isinstance(e, MonteError) else ("interrupted" if isinstance(e, KeyboardInterrupt)
                                                            else in_words(e))
        first = (f"{e.fix[0].lower()}{e.fix[1:]}, then " if isinstance(e, MonteError) and e.fix
                 and "retry" not in e.fix else "")
        raise error("E_STORAGE", f"the freeze survived on this data root, in {dest}, but the Vault upload "
                    f"failed: {why}", f"{first}re-run the same `monte {cmd}` to finish the upload") from None


def resume_upload(ws: Workspace, kind: str, name: str, dest: Path) -> tuple[Manifest, str] | None:
    """A freeze kept here whose Vault claim is ours but whose upload never completed, or whose
    objects the Vault has since lost (deleted behind monte's back): upload it again. A freeze
    kept on this data root only (no Vault key then, or one that could not write) and that the
    Vault has never heard of is claimed under its name and pushed: the same command, once a
    writing key is set, is how it reaches the Vault. Returns the manifest and what was done, or
    None when there is nothing to resume."""
    from monte.ledger.vault_ref import Vault
    from monte.manifest import read_manifest, verify_folder
    from monte.storage import vault_remote as remote_vault

    m = read_manifest(dest) if dest.is_dir() else None
    if m is None:
        return None
    where = remote_vault.access(ws, write=True)
    w = where.writer
    if w is None:
        return None
    claim = w.claim_of(kind, name)
    recorded = Vault(ws.store).get(kind, name)
    kept = recorded is not None and recorded.fingerprint == m.fingerprint  # this data root's own freeze
    if kept and claim is not None and claim.fingerprint != m.fingerprint:
        raise lost_kept_name(kind, name, where.url, dest)
    if kept and claim is None:
        verify_folder(dest, without_custody(m, dest, bool(ws.config.get("grader"))))  # what goes up is what was frozen
        if not w.claim(kind, name, m.fingerprint):  # another machine took the name meanwhile
            raise lost_kept_name(kind, name, where.url, dest)
        upload_or_keep(w, m, dest, "env add" if kind == "environment" else "dataset add")
        return m, f"pushed the freeze kept on this data root to the Vault {where.url}, under its name"
    if claim is None or claim.fingerprint != m.fingerprint:
        return None
    held = w.manifest(kind, name)
    lost = w.lost(str(held[1].get("md5", ""))) if held is not None else []
    if held is not None and not lost:
        return None
    verify_folder(dest, without_custody(m, dest, bool(ws.config.get("grader"))))  # what goes up again is what was frozen
    upload_or_keep(w, m, dest, "env add" if kind == "environment" else "dataset add")
    if held is None:
        return m, "finished the Vault upload of the freeze kept on this data root"
    return m, f"uploaded again the {len(lost)} object(s) the Vault {where.url} had lost"


def source_conflict(name: str, holder: str) -> MonteError:
    other = "a dataset" if holder == "dataset" else "an environment"
    return error(
        "E_SOURCE_CONFLICT",
        f"{other} already holds the name {name!r}; datasets and trainable environments share "
        "the --source namespace",
        "freeze under another name (--as NAME for an environment)",
    )


def refuse_source_conflict(ws: Workspace, vault: Vault, name: str, holder: str) -> None:
    if holder == "dataset":
        if vault.get("dataset", name) is not None or ws.dataset_dir(name).exists():
            raise source_conflict(name, "dataset")
    else:
        if vault.get("environment", name) is not None or ws.env_dir(name).exists():
            raise source_conflict(name, "environment")


def vault_names(ws: Workspace, kind: str) -> list[VaultEntry]:
    """What the Vault holds of ``kind`` (network; refused when no Vault or key is there)."""
    from monte.storage.vault_remote import require_reader

    return require_reader(ws).names(kind)


def fetch_from_vault(ws: Workspace, kind: str, name: str, folder: Path) -> Manifest | None:
    """Fetch a frozen folder this data root lacks from the Vault: into a staging folder, every
    hash proven against the Vault's manifest (and the vault ref's, when it has one), only then
    moved into place. None when no Vault or no key is there to ask (the caller decides)."""
    from monte.ledger.vault_ref import Vault
    from monte.manifest import MANIFEST, verify_folder
    from monte.storage import vault_remote as remote_vault

    where = remote_vault.access(ws, write=False)
    if where.reader is None:
        return None
    if where.reader.claim_of(kind, name) is None:
        return None
    if folder.exists() and any(folder.iterdir()):
        raise error("E_INTEGRITY", f"{folder} exists but holds no manifest.json",
                    f"move {folder} aside, then try again")
    local = Vault(ws.store)
    staged = staging.staging_dir(ws.data_root, folder)
    kept = False
    added: list[str] = []  # objects this freeze put into DVC's cache
    try:
        m = where.reader.fetch(kind, name, staged / "payload")
        recorded = local.get(kind, name)
        if recorded is not None and recorded.fingerprint != m.fingerprint:
            raise error("E_INTEGRITY", f"the Vault's {kind} {name!r} differs from the one the vault ref records",
                        "two freezes claim one name; inspect both, nothing was written")
        # a test split the Vault keeps only encrypted to the pinned grader is the grader's to hold
        verify_folder(staged / "payload", without_custody(m, staged / "payload", bool(ws.config.get("grader"))))
        extra = sorted(p.relative_to(staged / "payload").as_posix() for p in (staged / "payload").rglob("*")
                       if not p.is_dir() and p.relative_to(staged / "payload").as_posix() not in m.files
                       and p.name != MANIFEST)
        if extra:
            raise error("E_INTEGRITY", f"the Vault's copy of {kind} {name!r} holds files its manifest does not "
                        f"name ({', '.join(extra[:3])})", "the Vault was tampered with; nothing was written")
        (staged / "payload" / MANIFEST).write_bytes(m.dumps())
        out, added = commit_staged(ws, staged / "payload")
        if recorded is None:
            local.record(m, trailers=out.trailers())
        kept = True  # recorded: its objects stay in DVC's cache (a later fetch finds them there)
        if folder.exists():
            folder.rmdir()
        staging.move_into_place(staged / "payload", folder)
    finally:
        staging.discard(staged)
        if not kept:
            uncommit(ws, added)
    track(ws, kind, name, folder, out)
    return m


def without_custody(manifest: Manifest, folder: Path, graded_elsewhere: bool) -> Manifest:
    """``manifest`` less the sealed files (:func:`sealed_files`) missing from ``folder`` when
    ``graded_elsewhere`` (a grader is pinned: those files are in its custody, proven and counted
    there, and their absence here is the point); what :func:`verify_folder` then proves for
    training on the environment's curriculum, freezing a dataset from it, or freezing an
    experiment on it. A test split the grader drew itself (:func:`drawn_by_grader`) was never
    anywhere else: its absence is the point whether or not this repository pins the grader."""
    from monte.manifest import drawn_by_grader, sealed_files

    if not (graded_elsewhere or drawn_by_grader(manifest)):
        return manifest

    away = {rel for files in sealed_files(manifest).values() for rel in files if not (folder / rel).exists()}
    return manifest.model_copy(update={"files": {k: v for k, v in manifest.files.items() if k not in away}})
