"""Frozen Datasets on this data root: add (screen, hash, record, push), list, show (re-prove,
fetching from the Vault when the rows are not here). Screening the rows is
:mod:`monte.datasets.freeze`; what Datasets share with Environments (Vault claims, uploads,
staging, fetches) is :mod:`monte.frozen`."""

from __future__ import annotations

import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from monte import frozen
from monte.datasets import demonstrations
from monte.errors import error
from monte.manifest import Manifest
from monte.names import check_name
from monte.result_type import Result
from monte.storage import tracking
from monte.workspace import Workspace, open_workspace

if TYPE_CHECKING:
    from monte.ledger.store import Snapshot
    from monte.storage.vault_remote import VaultEntry


#: the kinds a Dataset is screened as: sft (demonstrations), preference (chosen/rejected pairs, DPO)
KINDS = (None, "sft", "preference")


@dataclass(frozen=True)
class DatasetShown(Result):
    """One frozen Dataset (``monte dataset show``, a row of ``monte dataset list``): its rows, kind
    and columns, the sha256 of ``rows.jsonl``, where it came from, its folder, and whether that
    hash was re-proven against the bytes here (``verified``)."""

    name: str
    kind: str | None
    rows: int
    columns: dict[str, str] | None
    sha256: str
    provenance: dict[str, Any]
    folder: str
    verified: bool = False


def dataset_info(m: Manifest, folder: Path, verified: bool = False) -> DatasetShown:
    if m.kind != "dataset" or "rows.jsonl" not in m.files:
        raise error("E_INTEGRITY", f"{folder}/manifest.json is not a dataset's manifest (no rows.jsonl)",
                    f"move {folder} aside and restore the frozen copy")
    return DatasetShown(
        name=m.name, kind=m.dataset_kind, rows=m.rows or 0, columns=m.columns,
        sha256=m.files["rows.jsonl"].sha256, provenance=m.provenance, folder=str(folder),
        verified=verified,
    )


@dataclass(frozen=True)
class DatasetAdded(Result):
    """``monte dataset add``: the plan, and unless a dry run the Dataset frozen (a dry run's
    document has no ``dataset`` key), a note (the Vault's part), and the ``.dvc`` pointer staged."""

    dry_run: bool
    plan: dict[str, Any]
    dataset: DatasetShown | None = None
    note: str = ""
    dvc_pointer: str | None = None  # the .dvc file that makes DVC track the folder (staged in git)

    def to_dict(self) -> dict[str, Any]:
        out = super().to_dict()
        if self.dataset is None:
            del out["dataset"]
        return out


def add(
    *,
    name: str,
    from_file: Path | None,
    from_hf: str | None,
    hf_file: str | None,
    kind: str | None,
    input_key: str,
    output_key: str,
    dry_run: bool,
    ws: Workspace | None,
    prompt_key: str = "prompt",
    chosen_key: str = "chosen",
    rejected_key: str = "rejected",
    from_env: str | None = None,
) -> DatasetAdded:
    """See :func:`monte.api.dataset_add`. ``ws`` is resolved here, after the arguments are checked,
    so a bad one is refused the same inside a repository or outside one."""
    from monte import staging
    from monte.datasets.freeze import screen_jsonl
    from monte.hashing import sha256_file
    from monte.ledger.vault_ref import Vault, name_taken
    from monte.manifest import MANIFEST, FileEntry, read_manifest

    check_name(name, "dataset name")
    tracking.check_trackable("dataset", name)
    if sum(map(bool, (from_file, from_hf, from_env))) != 1:
        raise error("E_USAGE", "name the rows once: --from-file F, --from-hf REPO[@REV] or --from-env ENV",
                    "monte dataset add NAME --from-file rows.jsonl")
    if from_env and kind != "sft":  # a curriculum becomes demonstrations, which only the sft trainer reads
        raise error("E_USAGE", "--from-env writes an environment's curriculum as SFT demonstrations",
                    f"monte dataset add {name} --from-env {from_env} --kind sft")
    if from_env:
        check_name(from_env, "environment name")
        input_key, output_key = "input", "output"  # the demonstrations' own columns
    if hf_file and not from_hf:
        raise error("E_USAGE", "--file picks a file of a --from-hf repo", "drop --file, or use --from-hf")
    if kind not in KINDS:
        raise error("E_USAGE", f"unknown --kind {kind!r}", f"use one of: {', '.join(k for k in KINDS if k)}")
    ws = ws or open_workspace()
    vault = Vault(ws.store)
    dest = ws.dataset_dir(name)
    if not dry_run:
        frozen.sweep_staging(ws)
        resumed = frozen.resume_upload(ws, "dataset", name, dest)
        if resumed is not None:
            return DatasetAdded(dry_run=False, plan={"name": name}, dataset=dataset_info(resumed[0], dest),
                                    note=resumed[1], dvc_pointer=frozen.track(ws, "dataset", name, dest))
    from monte.storage import vault_remote as remote_vault

    # The Dataset side asks the Vault first, and refuses any Environment of that name there.
    where = remote_vault.access(ws, write=not dry_run)
    if where.reader is not None:
        if where.reader.claim_of("environment", name) is not None:
            raise frozen.source_conflict(name, "environment")
        if frozen.claimed(where.reader, "dataset", name):
            raise name_taken("dataset", name, f"the Vault {where.url}")

    def check(snap: Snapshot | None = None) -> None:
        # The Dataset side is the stricter one: any environment of that name refuses.
        if vault.get("environment", name, snap) is not None or os.path.lexists(ws.env_dir(name)):
            raise frozen.source_conflict(name, "environment")
        if vault.get("dataset", name, snap) is not None:
            raise name_taken("dataset", name, "the vault ref")
        if os.path.lexists(dest):  # a dangling symlink too: the freeze's rename would fail on it
            raise name_taken("dataset", name, f"this data root, {dest}")

    check()
    plan: dict[str, Any]
    curriculum = _curriculum(ws, from_env) if from_env else None
    if from_hf:
        repo, _, rev = from_hf.partition("@")
        plan = {"name": name, "source": "hf", "repo": repo, "revision": rev or None, "file": hf_file}
    elif curriculum is not None:
        plan = {"name": name, "source": "environment", "environment": from_env, "join": demonstrations.JOIN}
    else:
        assert from_file is not None
        plan = {"name": name, "source": "file", "path": str(Path(from_file).resolve())}
    plan.update(kind=kind, input_key=input_key, output_key=output_key)
    if kind == "preference":  # the keys of the kind it is screened as
        plan.update(prompt_key=prompt_key, chosen_key=chosen_key, rejected_key=rejected_key)
        del plan["input_key"], plan["output_key"]
    if dry_run:
        return DatasetAdded(dry_run=True, plan=plan, note=where.note)
    made: tempfile.TemporaryDirectory[str] | None = None  # --from-env: the demonstrations, written here first
    if from_hf:
        from monte.storage.hub import fetch_dataset_file

        src, sha, fname = fetch_dataset_file(repo, rev or None, hf_file)
        provenance: dict[str, Any] = {"source": "hf", "repo": repo, "revision": sha,
                                      "requested_revision": rev or None, "file": fname}
    elif curriculum is not None:
        made = tempfile.TemporaryDirectory(prefix="monte-demos-")
        src = Path(made.name) / "rows.jsonl"
        provenance = {"source": "environment", "environment": from_env, "fingerprint": curriculum[1],
                      "curriculum_sha256": curriculum[2], "join": demonstrations.JOIN}
    else:
        src = Path(from_file)  # type: ignore[arg-type]
        if not src.is_file():
            raise error("E_NOT_FOUND", f"no file {src}", "check the --from-file path")
        # where the rows came from, as the repository names it (a file elsewhere: its name only)
        inside = src.resolve().is_relative_to(ws.repo_root.resolve())
        provenance = ({"source": "file", "path": src.resolve().relative_to(ws.repo_root.resolve()).as_posix()}
                      if inside else {"source": "file", "file": src.name})
    try:
        if made is not None:
            demonstrations.write(curriculum[0], src, str(from_env))  # type: ignore[index]
        rows, columns = screen_jsonl(src, kind=kind, input_key=input_key, output_key=output_key,
                                     prompt_key=prompt_key, chosen_key=chosen_key, rejected_key=rejected_key)
    except BaseException:
        if made is not None:
            made.cleanup()
        raise
    staged = staging.staging_dir(ws.data_root, dest)  # on dest's file system: the rows are whole there first
    recorded = False
    added: list[str] = []  # objects this freeze put into DVC's cache
    try:
        shutil.copyfile(src, staged / "rows.jsonl")
        digest = sha256_file(staged / "rows.jsonl")
        provenance["sha256"] = digest
        manifest = Manifest(
            kind="dataset", name=name, files={"rows.jsonl": FileEntry(sha256=digest, size=(staged / "rows.jsonl").stat().st_size)},
            provenance=provenance, dataset_kind=kind, columns=columns, rows=rows,  # type: ignore[arg-type]
        )
        (staged / MANIFEST).write_bytes(manifest.dumps())
        dvc, added = frozen.commit_staged(ws, staged)  # into DVC's cache; its hash recorded with the freeze
        if where.writer is not None and not where.writer.claim("dataset", name, manifest.fingerprint):
            raise frozen.lost_claim("dataset", name, where.url)
        vault.record(manifest, check, trailers=dvc.trailers())
        recorded = True
        staging.move_into_place(staged, dest)
    finally:
        if not recorded or os.path.lexists(dest):  # recorded, not in place: kept for the next sweep
            staging.discard(staged)
        if not recorded:
            frozen.uncommit(ws, added)
        if made is not None:
            made.cleanup()
    m = read_manifest(dest)
    assert m is not None
    pointer = frozen.track(ws, "dataset", name, dest, dvc)
    note = where.note
    if where.writer is not None:
        frozen.upload_or_keep(where.writer, m, dest, "dataset add", dvc)
        note = f"pushed to the Vault {where.url}"
    return DatasetAdded(dry_run=False, plan=plan, dataset=dataset_info(m, dest), note=note, dvc_pointer=pointer)


def _curriculum(ws: Workspace, env: str) -> tuple[Path, str, str]:
    """A trainable environment's curriculum here, re-proven: (its file, the environment's
    fingerprint, the curriculum's sha256)."""
    from monte.frozen import without_custody
    from monte.manifest import read_manifest, verify_folder

    m = read_manifest(ws.env_dir(env))
    if m is None or m.kind != "environment":
        raise error("E_NOT_FOUND", f"no environment named {env!r} on this data root",
                    f"freeze it with `monte env add --server {env} --dev {env} --test {env}`, or bring it here "
                    f"with `monte env install {env}`")
    if m.env_kind != "trainable" or not m.curriculum:
        raise error("E_REFUSED", f"environment {env!r} is eval-only: it has no curriculum to write as "
                    "demonstrations", "freeze a trainable one with `monte env add --server B --dev B --test B`")
    verify_folder(ws.env_dir(env), without_custody(m, ws.env_dir(env), bool(ws.config.get("grader"))))
    return ws.env_dir(env) / m.curriculum, m.fingerprint, m.files[m.curriculum].sha256


def list_datasets(ws: Workspace, *, vault: bool) -> list[DatasetShown] | list[VaultEntry]:
    """See :func:`monte.api.dataset_list`."""
    from monte.manifest import read_manifest

    if vault:
        return frozen.vault_names(ws, "dataset")
    root = ws.data_root / "datasets"
    out = []
    for folder in sorted(root.iterdir()) if root.is_dir() else []:
        m = read_manifest(folder)
        if m is not None:
            out.append(dataset_info(m, folder))
    return out


def show(*, name: str, ws: Workspace | None) -> DatasetShown:
    """See :func:`monte.api.dataset_show`. ``ws`` is resolved here, after the name is checked."""
    from monte.ledger.vault_ref import Vault
    from monte.manifest import read_manifest, verify_folder

    check_name(name, "dataset name")
    ws = ws or open_workspace()
    folder = ws.dataset_dir(name)
    if not folder.exists():
        frozen.sweep_staging(ws)  # a freeze killed before its folder was moved into place
    m = read_manifest(folder)
    if m is None:
        m = frozen.fetch_from_vault(ws, "dataset", name, folder)
    recorded = Vault(ws.store).get("dataset", name)
    if m is None:
        if recorded is None:
            raise error("E_NOT_FOUND", f"no dataset named {name!r}",
                        "list them with `monte dataset list`; freeze one with `monte dataset add`")
        raise error("E_NOT_FOUND", f"dataset {name!r} is recorded on the vault ref but its rows are not on this data root",
                    "copy the folder from the machine that froze it (Vault fetch: `monte config set vault`)")
    if recorded is not None and recorded.fingerprint != m.fingerprint:
        raise error("E_INTEGRITY", f"dataset {name!r}: {folder}/manifest.json differs from the vault ref's manifest",
                    f"move {folder} aside and restore the frozen copy")
    verify_folder(folder, m)
    info = dataset_info(m, folder, verified=True)
    frozen.track(ws, "dataset", name, folder)
    return info
