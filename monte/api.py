"""The Python API: one function per verb. The CLI is a thin layer over this.

Functions take keyword arguments, return data (pydantic models or plain dicts of JSON types),
and never print. A refusal is a :class:`monte.errors.MonteError`; when one is raised, nothing
has been written to the ledger, the vault ref or the data root.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from monte.errors import MonteError, error
from monte.names import check_name
from monte.workspace import (
    CONFIG_FILE,
    DEFAULT_DATA_ROOT,
    Workspace,
    data_root_for,
    find_repo_root,
    open_workspace,
)

# --- init ------------------------------------------------------------------------------------

DATA_ROOT_GITIGNORE = """\
# monte's data root: frozen inputs (tracked by DVC, not git), run folders, scratch.
*
!.gitignore
"""


class InitResult(BaseModel):
    repo_root: str
    data_root: str
    created: list[str]
    already_initialized: bool


def init(path: Path | None = None) -> InitResult:
    """Make the git repository at ``path`` (default: cwd) a monte repository. Idempotent."""
    repo_root = find_repo_root(path)
    data_root = data_root_for(repo_root)
    created: list[str] = []
    config = repo_root / CONFIG_FILE
    already = config.exists()
    if not already:
        config.write_text(
            "# monte repository config (see `monte config`).\n"
            f"# The data root is $MONTE_DATA_ROOT, or {DEFAULT_DATA_ROOT}/ here.\n"
            "version: 1\n"
        )
        created.append(CONFIG_FILE)
    if not data_root.is_dir():
        data_root.mkdir(parents=True)
        created.append(_rel(data_root, repo_root) + "/")
    gi = data_root / ".gitignore"
    if data_root.is_relative_to(repo_root) and not gi.exists():
        gi.write_text(DATA_ROOT_GITIGNORE)
        created.append(str(gi.relative_to(repo_root)))
    for folder in ("recipes",):
        p = repo_root / folder
        if not p.is_dir():
            p.mkdir()
            (p / "README.md").write_text(
                "Repository recipes: YAML files named here resolve by their stem "
                "(`monte train --recipe NAME`). `monte config` lists them.\n"
            )
            created.append(folder + "/")
    hooks = repo_root / ".git" / "hooks"
    if (repo_root / ".git").is_dir() and not hooks.is_dir():
        hooks.mkdir(parents=True)
        created.append(".git/hooks/")
    if not (repo_root / ".dvc").is_dir():
        _dvc_init(repo_root)
        created.append(".dvc/")
    _stage(repo_root, [CONFIG_FILE, "recipes/README.md", f"{DEFAULT_DATA_ROOT}/.gitignore"])
    return InitResult(repo_root=str(repo_root), data_root=str(data_root), created=created,
                      already_initialized=already and not created)


def _rel(p: Path, root: Path) -> str:
    return str(p.relative_to(root)) if p.is_relative_to(root) else str(p)


def _stage(repo_root: Path, paths: list[str]) -> None:
    """Stage what init wrote (as `dvc init` stages .dvc/), so one commit records it."""
    from dulwich import porcelain

    present = [str(repo_root / p) for p in paths if (repo_root / p).is_file()]
    if present:
        porcelain.add(str(repo_root), present)


def _dvc_init(repo_root: Path) -> None:
    """``.dvc/`` is made by DVC itself, so its layout is whatever this DVC version expects."""
    import contextlib
    import io
    import logging

    from dvc.exceptions import DvcException
    from dvc.repo import Repo as DvcRepo

    try:
        # DVC prints its own banner; monte's output (and --json) must stay monte's.
        dvc_log = logging.getLogger("dvc")
        level = dvc_log.level
        dvc_log.setLevel(logging.WARNING)
        with contextlib.redirect_stdout(io.StringIO()):
            dvc = DvcRepo.init(root_dir=str(repo_root), no_scm=False, subdir=False)
            # No analytics from a tool that runs in CI and on boxes.
            with dvc.config.edit() as conf:
                conf["core"]["analytics"] = False
            dvc.scm.add([str(repo_root / ".dvc" / "config")])
            dvc.close()
        dvc_log.setLevel(level)
    except DvcException as e:
        raise error("E_STORAGE", f"`dvc init` failed in {repo_root}: {e}",
                    "fix the DVC setup it names, then run `monte init` again") from None


# --- environments ------------------------------------------------------------------------------


class EnvInfo(BaseModel):
    name: str
    kind: str
    form: str
    exams: dict[str, list[str]]
    benchmarks: list[str]
    files: int
    fingerprint: str
    folder: str


def _env_info(m: Any, folder: Path) -> EnvInfo:
    benches = sorted(set((m.grader or {}).get("benchmarks", {}).values()) | set(
        (m.provenance.get("benchmarks") or {}).keys()))
    return EnvInfo(
        name=m.name, kind=m.env_kind or "", form=m.form or "",
        exams={e: sorted(s) for e, s in m.exams.items()}, benchmarks=benches,
        files=len(m.files), fingerprint=m.fingerprint, folder=str(folder),
    )


class EnvAddResult(BaseModel):
    dry_run: bool
    plan: dict[str, Any]
    environment: EnvInfo | None = None
    note: str = ""


def env_add(
    *,
    benchmark: str | None = None,
    server: str | None = None,
    dev: tuple[str, ...] = (),
    test: tuple[str, ...] = (),
    name: str | None = None,
    dry_run: bool = False,
    ws: Workspace | None = None,
) -> EnvAddResult:
    """Freeze an Environment from the catalog (the seeds' three forms), then push it to the Vault.

    Order (the seeds'): the flag mix; the name against this data root and the vault ref, then
    against the Vault with any key that reads (a ``--server`` freeze also against Datasets, local
    first); the write probe, before prepare runs; prepare; the create-only name claim in the
    Vault (a lost claim writes nothing here); the manifest and the folder; the upload. A failed
    upload keeps the freeze and refuses with ``E_STORAGE``; a keyless or read-only machine keeps
    the freeze here with a note.
    """
    from monte.envs import freeze
    from monte.ledger.vault import Vault, name_taken
    from monte.manifest import MANIFEST, read_manifest
    from monte.storage import vault as remote_vault

    ws = ws or open_workspace()
    if name is not None:
        check_name(name, "environment name")
    plan = freeze.plan_freeze(name=name, benchmark=benchmark, server=server, dev=dev, test=test)
    check_name(plan.name, "environment name")
    vault = Vault(ws.store)
    dest = ws.env_dir(plan.name)
    if not dry_run:
        _sweep_staging(ws)
        resumed = _resume_upload(ws, "environment", plan.name, dest)
        if resumed is not None:
            return EnvAddResult(dry_run=False, plan=plan.describe(), environment=_env_info(resumed, dest),
                                note="finished the Vault upload of the freeze kept on this data root")

    def check_local() -> None:
        if vault.get("environment", plan.name) is not None:
            raise name_taken("environment", plan.name, "the vault ref")
        if os.path.lexists(dest):  # a dangling symlink too: the freeze's rename would fail on it
            raise name_taken("environment", plan.name, f"this data root, {dest}")
        if plan.env_kind == "trainable":
            _refuse_source_conflict(ws, vault, plan.name, holder="dataset")

    check_local()  # refuse before prepare runs: prepare can be expensive
    where = remote_vault.access(ws, write=not dry_run)
    if where.reader is not None:
        if plan.env_kind == "trainable" and where.reader.claim_of("dataset", plan.name) is not None:
            raise _source_conflict(plan.name, "dataset")
        if _claimed(where.reader, "environment", plan.name):
            raise name_taken("environment", plan.name, f"the Vault {where.url}")
    if dry_run:
        return EnvAddResult(dry_run=True, plan=plan.describe(), note=where.note)
    staged = freeze.staging_dir(ws.data_root)
    try:
        manifest = freeze.prepare(plan, staged)
        (staged / MANIFEST).write_bytes(manifest.dumps())
        if where.writer is not None and not where.writer.claim("environment", plan.name, manifest.fingerprint):
            raise _lost_claim("environment", plan.name, where.url)

        def check(snap):  # type: ignore[no-untyped-def]
            if os.path.lexists(dest):
                raise name_taken("environment", plan.name, f"this data root, {dest}")
            if plan.env_kind == "trainable" and vault.get("dataset", plan.name, snap):
                raise _source_conflict(plan.name, "dataset")

        vault.record(manifest, check)
        freeze.move_into_place(staged, dest)
    finally:
        freeze.discard(staged)
    m = read_manifest(dest)
    assert m is not None
    note = where.note
    if where.writer is not None:
        _upload_or_keep(where.writer, m, dest, "env add")
        note = f"pushed to the Vault {where.url}"
    return EnvAddResult(dry_run=False, plan=plan.describe(), environment=_env_info(m, dest), note=note)


def _claimed(reader: Any, kind: str, name: str) -> bool:
    """Does the Vault hold ``name``? A claim whose upload never completed (no manifest in the
    Vault) and that neither the vault ref nor this data root records (the caller checked) is a
    freeze killed between claiming and recording: it does not refuse here. The freeze goes on,
    and the create-only claim decides: the same fingerprint takes it over, another one loses."""
    if reader.claim_of(kind, name) is None:
        return False
    return reader.manifest(kind, name) is not None


def _sweep_staging(ws: Workspace) -> None:
    """Staging folders in ``<data root>/tmp`` left by a freeze, install or fetch that was killed:
    one whose manifest the vault ref records while its folder is missing (killed between
    recording the freeze and moving it into place) is proven and moved into place; the rest
    are deleted. Folders of live processes are left alone."""
    from monte.envs import freeze
    from monte.ledger.vault import Vault
    from monte.manifest import read_manifest, verify_folder

    vault = Vault(ws.store)
    for staged in freeze.stale_staging(ws.data_root):
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
                    freeze.move_into_place(cand, dest)
                    break
            except (MonteError, OSError):
                continue
        freeze.discard(staged)


def _lost_claim(kind: str, name: str, url: str | None) -> MonteError:
    noun = "environment" if kind == "environment" else "dataset"
    fix = (f"re-add under another name with `--as NEW_NAME`, or run `monte env install {name}` to bring "
           "the winner's copy here") if kind == "environment" else (
        f"re-add under another NAME, or run `monte dataset show {name}` to bring the winner's copy here")
    return error("E_NAME_TAKEN", f"another writer claimed the {noun} name {name!r} in the Vault {url} "
                 "first; this freeze was discarded and nothing was written here", fix)


def _upload_or_keep(writer: Any, m: Any, dest: Path, cmd: str) -> None:
    """Push a freeze that is already in place; on any failure keep it and refuse E_STORAGE."""
    try:
        writer.upload(m, dest)
    except (MonteError, OSError, KeyboardInterrupt) as e:
        why = e.message if isinstance(e, MonteError) else ("interrupted" if isinstance(e, KeyboardInterrupt)
                                                            else str(e))
        raise error("E_STORAGE", f"the freeze survived on this data root, in {dest}, but the Vault upload "
                    f"failed: {why}", f"re-run the same `monte {cmd}` to finish the upload") from None


def _resume_upload(ws: Workspace, kind: str, name: str, dest: Path) -> Any:
    """A freeze kept here whose Vault claim is ours but whose upload never completed: finish it.
    Returns the manifest when it did, None when there is nothing to resume."""
    from monte.manifest import read_manifest
    from monte.storage import vault as remote_vault

    m = read_manifest(dest) if dest.is_dir() else None
    if m is None:
        return None
    where = remote_vault.access(ws, write=True)
    w = where.writer
    if w is None:
        return None
    claim = w.claim_of(kind, name)
    if claim is None or claim.fingerprint != m.fingerprint or w.manifest(kind, name) is not None:
        return None
    _upload_or_keep(w, m, dest, "env add" if kind == "environment" else "dataset add")
    return m


def _source_conflict(name: str, holder: str) -> MonteError:
    other = "a dataset" if holder == "dataset" else "an environment"
    return error(
        "E_SOURCE_CONFLICT",
        f"{other} already holds the name {name!r}; datasets and trainable environments share "
        "the --source namespace",
        "freeze under another name (--as NAME for an environment)",
    )


def _refuse_source_conflict(ws: Workspace, vault: Any, name: str, holder: str) -> None:
    if holder == "dataset":
        if vault.get("dataset", name) is not None or ws.dataset_dir(name).exists():
            raise _source_conflict(name, "dataset")
    else:
        if vault.get("environment", name) is not None or ws.env_dir(name).exists():
            raise _source_conflict(name, "environment")


def env_list(*, available: bool = False, vault: bool = False, ws: Workspace | None = None) -> list[dict[str, Any]]:
    """``--available``: the catalog; bare: what this data root holds (local, no network)."""
    if available and vault:
        raise error("E_USAGE", "--available and --vault name different places to look",
                    "pass one of them, or neither for what is usable here")
    if available:
        from monte.envs.registry import catalog

        return [
            {"benchmark": e.name, "provider": e.provider, "trainable": e.benchmark.trainable,
             "sizes": e.benchmark.sizes, "description": e.benchmark.description}
            for e in catalog().values()
        ]
    ws = ws or open_workspace()
    if vault:
        from monte.storage.vault import require_reader

        return require_reader(ws).names("environment")
    from monte.manifest import read_manifest

    out = []
    root = ws.data_root / "environments"
    for folder in sorted(root.iterdir()) if root.is_dir() else []:
        m = read_manifest(folder)
        if m is not None:
            out.append(_env_info(m, folder).model_dump())
    return out


def env_install(*, name: str | None = None, all_: bool = False, ws: Workspace | None = None) -> list[dict[str, Any]]:
    """Verify (or restore) frozen environments on this data root.

    A manifest here: prove every file against it (and it against the vault ref), fetch nothing.
    No manifest here but one on the vault ref: the provider re-creates the files (the catalog
    regenerates them from the recorded seeds) into a staging folder, every hash is proven, and
    only then is the folder moved into place.
    """
    from monte.ledger.vault import Vault

    if bool(name) == bool(all_):
        raise error("E_USAGE", "name one environment or pass --all", "monte env install NAME | --all")
    ws = ws or open_workspace()
    _sweep_staging(ws)
    if all_:
        root = ws.data_root / "environments"
        names = sorted(p.name for p in root.iterdir() if (p / "manifest.json").is_file()) if root.is_dir() else []
    else:
        names = [check_name(name or "", "environment name")]
    vault = Vault(ws.store)
    return [_install_one(ws, vault, n) for n in names]


def _install_one(ws: Workspace, vault: Any, name: str) -> dict[str, Any]:
    from monte.envs import freeze
    from monte.manifest import MANIFEST, read_manifest, verify_folder

    folder = ws.env_dir(name)
    recorded = vault.get("environment", name)
    here = read_manifest(folder)
    if here is None:
        fetched = _fetch_from_vault(ws, "environment", name, folder)
        if fetched is not None:
            return {"name": name, "action": "fetched", "files": len(fetched.files), "folder": str(folder)}
    if here is not None:
        if recorded is not None and recorded.fingerprint != here.fingerprint:
            raise error("E_INTEGRITY",
                        f"environment {name!r}: {folder / MANIFEST} differs from the vault ref's manifest",
                        f"move {folder} aside and run `monte env install {name}` to restore it")
        verify_folder(folder, here)
        return {"name": name, "action": "verified", "files": len(here.files), "folder": str(folder)}
    if recorded is None:
        raise error("E_NOT_FOUND", f"no environment named {name!r} on this data root or the vault ref",
                    "list what is here with `monte env list`; freeze one with `monte env add`")
    if folder.exists() and any(folder.iterdir()):
        raise error("E_INTEGRITY", f"{folder} exists but holds no manifest.json",
                    f"move {folder} aside, then run `monte env install {name}` again")
    staged = freeze.staging_dir(ws.data_root)
    try:
        _recreate(recorded, staged)
        verify_folder(staged, recorded)
        (staged / MANIFEST).write_bytes(recorded.dumps())
        if folder.exists():
            folder.rmdir()
        freeze.move_into_place(staged, folder)
    finally:
        freeze.discard(staged)
    return {"name": name, "action": "restored", "files": len(recorded.files), "folder": str(folder)}


def _recreate(m: Any, staged: Path) -> None:
    """Re-run the freeze's prepare from what the manifest recorded (catalog environments)."""
    from monte.envs import freeze
    from monte.envs.registry import catalog

    prov = m.provenance
    if prov.get("source") != "catalog":
        raise error("E_NOT_FOUND", f"environment {m.name!r} is not on this data root",
                    "copy its folder from the machine that froze it (Vault fetch: `monte config set vault`)")
    entries = catalog()
    for b, meta in prov.get("benchmarks", {}).items():
        if b not in entries:
            raise error("E_NOT_FOUND", f"benchmark {b!r} of environment {m.name!r} is not installed here",
                        f"install the package that provides {b!r} (provider {meta.get('provider')})")
        provider = entries[b].provider_obj
        if provider is not None and hasattr(provider, "install"):
            provider.install(m.name, staged, m.model_dump(mode="json"))
            return
    roles: dict[str, str] = prov["roles"]
    exams: dict[str, dict[str, str]] = {}
    for key, bench in roles.items():
        if key != "curriculum":
            exam, split = key.rsplit("/", 1)
            exams.setdefault(exam, {})[split] = bench
    plan = freeze.FreezePlan(m.name, m.form, m.env_kind, exams, roles.get("curriculum"),
                             dict(prov.get("sizes", {})))
    freeze.prepare(plan, staged)


def _fetch_from_vault(ws: Workspace, kind: str, name: str, folder: Path) -> Any:
    """Fetch a frozen folder this data root lacks from the Vault: into a staging folder, every
    hash proven against the Vault's manifest (and the vault ref's, when it has one), only then
    moved into place. None when no Vault or no key is there to ask (the caller decides)."""
    from monte.envs import freeze
    from monte.ledger.vault import Vault
    from monte.manifest import MANIFEST, verify_folder
    from monte.storage import vault as remote_vault

    where = remote_vault.access(ws, write=False)
    if where.reader is None:
        return None
    if where.reader.claim_of(kind, name) is None:
        return None
    if folder.exists() and any(folder.iterdir()):
        raise error("E_INTEGRITY", f"{folder} exists but holds no manifest.json",
                    f"move {folder} aside, then try again")
    local = Vault(ws.store)
    staged = freeze.staging_dir(ws.data_root)
    try:
        m = where.reader.fetch(kind, name, staged / "payload")
        recorded = local.get(kind, name)
        if recorded is not None and recorded.fingerprint != m.fingerprint:
            raise error("E_INTEGRITY", f"the Vault's {kind} {name!r} differs from the one the vault ref records",
                        "two freezes claim one name; inspect both, nothing was written")
        verify_folder(staged / "payload", m)
        extra = sorted(p.relative_to(staged / "payload").as_posix() for p in (staged / "payload").rglob("*")
                       if not p.is_dir() and p.relative_to(staged / "payload").as_posix() not in m.files
                       and p.name != MANIFEST)
        if extra:
            raise error("E_INTEGRITY", f"the Vault's copy of {kind} {name!r} holds files its manifest does not "
                        f"name ({', '.join(extra[:3])})", "the Vault was tampered with; nothing was written")
        (staged / "payload" / MANIFEST).write_bytes(m.dumps())
        if recorded is None:
            local.record(m)
        if folder.exists():
            folder.rmdir()
        freeze.move_into_place(staged / "payload", folder)
    finally:
        freeze.discard(staged)
    return m


# --- datasets ----------------------------------------------------------------------------------


class DatasetInfo(BaseModel):
    name: str
    kind: str | None
    rows: int
    columns: dict[str, str] | None
    sha256: str
    provenance: dict[str, Any]
    folder: str
    verified: bool = False


def _dataset_info(m: Any, folder: Path, verified: bool = False) -> DatasetInfo:
    if m.kind != "dataset" or "rows.jsonl" not in m.files:
        raise error("E_INTEGRITY", f"{folder}/manifest.json is not a dataset's manifest (no rows.jsonl)",
                    f"move {folder} aside and restore the frozen copy")
    return DatasetInfo(
        name=m.name, kind=m.dataset_kind, rows=m.rows or 0, columns=m.columns,
        sha256=m.files["rows.jsonl"].sha256, provenance=m.provenance, folder=str(folder),
        verified=verified,
    )


def dataset_add(
    *,
    name: str,
    from_file: Path | None = None,
    from_hf: str | None = None,
    hf_file: str | None = None,
    kind: str | None = None,
    input_key: str = "input",
    output_key: str = "output",
    dry_run: bool = False,
    ws: Workspace | None = None,
) -> dict[str, Any]:
    """Freeze a JSONL pile as a Dataset: prove every line, hash it, record where it came from."""
    from monte.datasets.freeze import screen_jsonl
    from monte.envs import freeze
    from monte.hashing import sha256_file
    from monte.ledger.vault import Vault, name_taken
    from monte.manifest import MANIFEST, FileEntry, Manifest, read_manifest

    check_name(name, "dataset name")
    if bool(from_file) == bool(from_hf):
        raise error("E_USAGE", "name the rows once: --from-file F or --from-hf REPO[@REV]",
                    "monte dataset add NAME --from-file rows.jsonl")
    if hf_file and not from_hf:
        raise error("E_USAGE", "--file picks a file of a --from-hf repo", "drop --file, or use --from-hf")
    if kind not in (None, "sft"):
        raise error("E_USAGE", f"unknown --kind {kind!r}", "the only kind today is sft")
    ws = ws or open_workspace()
    vault = Vault(ws.store)
    dest = ws.dataset_dir(name)
    if not dry_run:
        _sweep_staging(ws)
        resumed = _resume_upload(ws, "dataset", name, dest)
        if resumed is not None:
            return {"dry_run": False, "plan": {"name": name}, "dataset": _dataset_info(resumed, dest).model_dump(),
                    "note": "finished the Vault upload of the freeze kept on this data root"}
    from monte.storage import vault as remote_vault

    # The Dataset side asks the Vault first, and refuses any Environment of that name there.
    where = remote_vault.access(ws, write=not dry_run)
    if where.reader is not None:
        if where.reader.claim_of("environment", name) is not None:
            raise _source_conflict(name, "environment")
        if _claimed(where.reader, "dataset", name):
            raise name_taken("dataset", name, f"the Vault {where.url}")

    def check(snap: Any = None) -> None:
        # The Dataset side is the stricter one: any environment of that name refuses.
        if vault.get("environment", name, snap) is not None or os.path.lexists(ws.env_dir(name)):
            raise _source_conflict(name, "environment")
        if vault.get("dataset", name, snap) is not None:
            raise name_taken("dataset", name, "the vault ref")
        if os.path.lexists(dest):  # a dangling symlink too: the freeze's rename would fail on it
            raise name_taken("dataset", name, f"this data root, {dest}")

    check()
    if from_hf:
        repo, _, rev = from_hf.partition("@")
        plan = {"name": name, "source": "hf", "repo": repo, "revision": rev or None, "file": hf_file}
    else:
        assert from_file is not None
        plan = {"name": name, "source": "file", "path": str(Path(from_file).resolve())}
    plan.update(kind=kind, input_key=input_key, output_key=output_key)
    if dry_run:
        return {"dry_run": True, "plan": plan, "note": where.note}
    if from_hf:
        from monte.storage.hub import fetch_dataset_file

        src, sha, fname = fetch_dataset_file(repo, rev or None, hf_file)
        provenance: dict[str, Any] = {"source": "hf", "repo": repo, "revision": sha,
                                      "requested_revision": rev or None, "file": fname}
    else:
        src = Path(from_file)  # type: ignore[arg-type]
        if not src.is_file():
            raise error("E_NOT_FOUND", f"no file {src}", "check the --from-file path")
        provenance = {"source": "file", "path": str(src.resolve())}
    rows, columns = screen_jsonl(src, kind=kind, input_key=input_key, output_key=output_key)
    staged = freeze.staging_dir(ws.data_root)
    try:
        shutil.copyfile(src, staged / "rows.jsonl")
        digest = sha256_file(staged / "rows.jsonl")
        provenance["sha256"] = digest
        manifest = Manifest(
            kind="dataset", name=name, files={"rows.jsonl": FileEntry(sha256=digest, size=(staged / "rows.jsonl").stat().st_size)},
            provenance=provenance, dataset_kind=kind, columns=columns, rows=rows,  # type: ignore[arg-type]
        )
        (staged / MANIFEST).write_bytes(manifest.dumps())
        if where.writer is not None and not where.writer.claim("dataset", name, manifest.fingerprint):
            raise _lost_claim("dataset", name, where.url)
        vault.record(manifest, check)
        freeze.move_into_place(staged, dest)
    finally:
        freeze.discard(staged)
    m = read_manifest(dest)
    note = where.note
    if where.writer is not None:
        _upload_or_keep(where.writer, m, dest, "dataset add")
        note = f"pushed to the Vault {where.url}"
    return {"dry_run": False, "plan": plan, "dataset": _dataset_info(m, dest).model_dump(), "note": note}


def dataset_list(*, vault: bool = False, ws: Workspace | None = None) -> list[dict[str, Any]]:
    """The frozen Datasets on this data root, from their manifests (no re-hash)."""
    from monte.manifest import read_manifest

    ws = ws or open_workspace()
    if vault:
        from monte.storage.vault import require_reader

        return require_reader(ws).names("dataset")
    root = ws.data_root / "datasets"
    out = []
    for folder in sorted(root.iterdir()) if root.is_dir() else []:
        m = read_manifest(folder)
        if m is not None:
            out.append(_dataset_info(m, folder).model_dump())
    return out


def dataset_show(*, name: str, ws: Workspace | None = None) -> dict[str, Any]:
    """One Dataset's manifest, with its hash re-proven against the bytes on disk."""
    from monte.ledger.vault import Vault
    from monte.manifest import read_manifest, verify_folder

    check_name(name, "dataset name")
    ws = ws or open_workspace()
    folder = ws.dataset_dir(name)
    if not folder.exists():
        _sweep_staging(ws)  # a freeze killed before its folder was moved into place
    m = read_manifest(folder)
    if m is None:
        m = _fetch_from_vault(ws, "dataset", name, folder)
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
    return _dataset_info(m, folder, verified=True).model_dump()


# --- experiments -------------------------------------------------------------------------------


def experiment_init(
    *, name: str, eval_env: str, model: str | None = None, steps_per_chunk: int = 50,
    dry_run: bool = False, ws: Workspace | None = None,
) -> dict[str, Any]:
    """Freeze ``measurement.json`` as the experiment's first ledger record."""
    from monte.ledger.experiment import Ledger
    from monte.ledger.records import ExamFreeze, Measurement, SplitFreeze, TrainSettings
    from monte.ledger.vault import Vault
    from monte.manifest import now, read_manifest, verify_folder

    check_name(name, "experiment name")
    if name.lower() == "vault":  # refs/heads/monte/vault is the freeze manifests' ref, not a folder
        raise error("E_INVALID_NAME", "the experiment name 'vault' is reserved: refs/heads/monte/vault holds "
                    "the freeze manifests", "choose another experiment name")
    check_name(eval_env, "environment name")
    ws = ws or open_workspace()
    ledger = Ledger(ws.store, name)
    if ledger.exists():
        raise error("E_MEASUREMENT_EXISTS", f"experiment {name!r} already exists; its measurement is frozen",
                    "choose another experiment name; a changed measurement is a new experiment")
    folder = ws.env_dir(eval_env)
    m = read_manifest(folder)
    if m is None or m.kind != "environment":
        raise error("E_NOT_FOUND", f"no environment named {eval_env!r} on this data root",
                    f"freeze it with `monte env add`, or restore it with `monte env install {eval_env}`")
    recorded = Vault(ws.store).get("environment", eval_env)
    if recorded is not None and recorded.fingerprint != m.fingerprint:
        raise error("E_INTEGRITY", f"environment {eval_env!r}: the manifest here differs from the vault ref's",
                    f"move {folder} aside and run `monte env install {eval_env}`")
    verify_folder(folder, m)
    if model is not None and os.path.sep in model and not Path(model).exists():
        raise error("E_NOT_FOUND", f"no model folder {model}", "pass a local model folder or a hub id")
    exams = {
        exam: ExamFreeze(
            benchmark=(m.grader or {}).get("benchmarks", {}).get(exam, exam),
            splits={s: SplitFreeze(path=f"environments/{eval_env}/{rel}", sha256=m.files[rel].sha256,
                                   n=_count_lines(folder / rel)) for s, rel in splits.items()},
        )
        for exam, splits in m.exams.items()
    }
    measurement = Measurement(
        experiment=name, created_at=now(), environment=eval_env,
        environment_fingerprint=m.fingerprint, grader=m.grader or {}, exams=exams,
        model=str(Path(model).resolve()) if model and Path(model).exists() else model,
        train=TrainSettings(steps_per_chunk=steps_per_chunk),
    )
    if dry_run:
        return {"dry_run": True, "measurement": measurement.model_dump(mode="json")}
    commit = ledger.create(measurement)
    return {"dry_run": False, "measurement": measurement.model_dump(mode="json"), "commit": commit.decode(),
            "ref": ledger.ref}


def _count_lines(path: Path) -> int:
    with open(path, "rb") as f:
        return sum(1 for _ in f)


def experiment_list(*, ws: Workspace | None = None) -> list[dict[str, Any]]:
    from monte.ledger.experiment import Ledger, experiment_names

    ws = ws or open_workspace()
    names = experiment_names(ws.store)
    out = []
    for n in names:
        meas = Ledger(ws.store, n).measurement()
        out.append({"name": n, "environment": meas.environment, "exams": sorted(meas.exams),
                    "model": meas.model, "created_at": meas.created_at})
    return out


# --- config ------------------------------------------------------------------------------------


def config_show(*, ws: Workspace | None = None) -> dict[str, Any]:
    """The recipe search path and every resolvable recipe name (first match wins)."""
    import monte

    ws = ws or open_workspace(require_data_root=False)
    packaged = Path(monte.__file__).parent / "recipes"
    path = [ws.recipes_dir, packaged]
    recipes: dict[str, str] = {}
    for folder in path:
        for f in sorted(folder.glob("*.yaml")) + sorted(folder.glob("*.yml")) if folder.is_dir() else []:
            recipes.setdefault(f.stem, str(f))
    return {
        "repo_root": str(ws.repo_root),
        "data_root": str(ws.data_root),
        "config_file": str(ws.repo_root / CONFIG_FILE),
        "recipe_path": [str(p) for p in path],
        "recipes": recipes,
        "vault": _where(ws, "vault"),
        "bucket": _where(ws, "bucket"),
    }


def _where(ws: Workspace, setting: str) -> str | None:
    from monte.storage.locations import url_for

    try:
        return url_for(ws, setting)
    except MonteError:
        return None


def config_set(*, setting: str, url: str, ws: Workspace | None = None) -> dict[str, Any]:
    """Name the Vault or the results bucket for this repository (``.monte.yaml``)."""
    from monte.storage.locations import set_url

    ws = ws or open_workspace(require_data_root=False)
    value = set_url(ws, setting, url)
    dvc = ws.repo_root / ".dvc" / "config"
    return {"setting": setting, "url": value, "file": str(ws.repo_root / CONFIG_FILE),
            "dvc_config": str(dvc) if setting == "vault" and dvc.exists() else None}


# --- evaluation ----------------------------------------------------------------------------------


def plan_eval(*, experiment: str | None = None, model: str | None = None, split: str = "dev",
              step: int | None = None, checkpoint: str | None = None, smoke: bool = False,
              push: bool = False, adopt: dict[str, str] | None = None, ws: Workspace | None = None) -> Any:
    """Check every rule that can be proven before anything is written; return the plan.

    ``push``: upload the results to the results bucket after each transition (refused, E_STORAGE,
    when no bucket is configured). ``adopt`` (on a box): exam -> the run a ``--remote``
    submission started for it."""
    from monte import evals

    if split not in ("dev", "test"):
        raise error("E_USAGE", f"unknown split {split!r}", "use --split dev or --split test")
    plan = evals.plan_eval(ws or open_workspace(), experiment=experiment, model=model, split=split,
                           step=step, checkpoint=checkpoint, smoke=smoke, push=push)
    if adopt:
        unknown = sorted(set(adopt) - {e.exam for e in plan.exams})
        if unknown:
            raise error("E_USAGE", f"--adopt names exams this eval does not run: {', '.join(unknown)}", "")
        for run in adopt.values():
            check_name(run, "run id")
        plan.adopt = dict(adopt)
    return plan


def run_eval(plan: Any, *, on_progress: Any = None, on_transition: Any = None,
             ws: Workspace | None = None) -> Any:
    """Spend the touch (a ``started`` record), read the proven split, generate, grade, finish.

    ``on_transition(row, transition)`` runs after each transition's record lands; a ``push`` plan
    with none given pushes the results then, and refuses E_STORAGE if a finished run's final
    push fails (the run itself stays recorded locally)."""
    from monte import evals

    return evals.run_eval(ws or open_workspace(), plan, on_progress=on_progress, on_transition=on_transition)


def eval_(**kwargs: Any) -> Any:
    """Plan and run in one call (no confirmation: the Python caller has decided)."""
    ws = kwargs.pop("ws", None) or open_workspace()
    on_progress = kwargs.pop("on_progress", None)
    on_transition = kwargs.pop("on_transition", None)
    return run_eval(plan_eval(ws=ws, **kwargs), on_progress=on_progress, on_transition=on_transition, ws=ws)


def nominate(*, ref: str, experiment: str | None = None, ws: Workspace | None = None) -> dict[str, Any]:
    """Name the checkpoint the final claim scores (it must carry an admissible dev eval)."""
    from monte import evals

    return evals.nominate(ws or open_workspace(), ref=ref, experiment=experiment, model=None)


# --- reading the record --------------------------------------------------------------------------


def status(*, experiment: str | None = None, ws: Workspace | None = None) -> dict[str, Any]:
    """Rows, delta lines, lineage, cycles and checkpoints, from the ledger tip (one tree)."""
    from monte import evals
    from monte import status as st
    from monte.ledger.experiment import Ledger

    ws = ws or open_workspace(require_data_root=False)
    exp = evals.experiment_name(ws, experiment)
    ledger = Ledger(ws.store, exp)
    snap = ledger.snapshot()
    meas = ledger.measurement(snap)
    rows = evals.read_rows(ledger, snap)
    noms = {}
    for cohort in snap.listdir("cohorts"):
        raw = snap.read(f"cohorts/{cohort}/nomination.json")
        if raw:
            noms[cohort] = json.loads(raw)["checkpoint"]
    return st.build(meas, rows, noms)


def _find_run(ws: Workspace, ref: str, experiment: str | None) -> tuple[Any, Any]:
    from monte import evals
    from monte.ledger.experiment import Ledger, experiment_names
    from monte.runs import parse_run_ref

    exp0, run, _ = parse_run_ref(ref, None)
    exps = [experiment or exp0] if (experiment or exp0) else experiment_names(ws.store)
    for exp in exps:
        ledger = Ledger(ws.store, check_name(exp or "", "experiment name"))
        snap = ledger.snapshot()
        row = ledger.row(run, snap)
        if row is not None:
            rows = [r for r in evals.read_rows(ledger, snap) if r.run == run]
            return ledger, rows[0] if rows else row
    raise error("E_NOT_FOUND", f"no run {run!r}" + (f" in experiment {exps[0]}" if len(exps) == 1 else ""),
                "list runs with `monte status`")


def show(*, ref: str, experiment: str | None = None, ws: Workspace | None = None) -> dict[str, Any]:
    """One full row, with every provenance field."""
    ws = ws or open_workspace(require_data_root=False)
    _, row = _find_run(ws, ref, experiment)
    out: dict[str, Any] = row.model_dump(mode="json")
    return out


def logs(*, ref: str, experiment: str | None = None, ws: Workspace | None = None) -> Path:
    """The run's event file (JSON lines)."""
    from monte.runs import run_folder

    ws = ws or open_workspace()
    ledger, row = _find_run(ws, ref, experiment)
    path = run_folder(ws, ledger.experiment, row.run) / "events.jsonl"
    if not path.exists():
        raise error("E_NOT_FOUND", f"run {row.run} has no event file on this data root ({path})",
                    "its events live where it ran; `monte sync` brings the bucket's copy")
    return path


def stop(*, ref: str, experiment: str | None = None, reason: str | None = None,
         ws: Workspace | None = None) -> dict[str, Any]:
    """Terminate a running Run (on this host) and record it as abandoned (``reason``: why, for
    the row; a box's job wrapper says how its job ended)."""
    import signal
    import socket

    from monte.manifest import now
    from monte.runs import log_event

    ws = ws or open_workspace()
    ledger, row = _find_run(ws, ref, experiment)
    if row.status not in ("started", "running", "abandoned"):
        raise error("E_REFUSED", f"run {row.run} has {row.status}; only a running run can be stopped",
                    "nothing to do")
    killed = False
    if row.host == socket.gethostname() and row.pid and row.status != "abandoned":
        from monte.runs import proc_start

        if proc_start(row.pid) == row.proc_start:
            try:
                os.kill(row.pid, signal.SIGTERM)
                killed = True
            except ProcessLookupError:
                pass

    def make(snap: Any, seq: int) -> Any:
        current = ledger.row(row.run, snap)
        if current is None or current.status not in ("started", "running"):
            raise error("E_REFUSED", f"run {row.run} is no longer running", "nothing to do")
        return current.model_copy(update={"status": "abandoned", "updated_at": now(),
                                          "error": (reason or "stopped by `monte stop`")[:500]})

    done = ledger.append_row(make, event="abandoned", summary=lambda r: f"{r.kind} {r.run} abandoned (monte stop)")
    log_event(ws, ledger.experiment, row.run, "abandoned", reason=(reason or "monte stop")[:500], killed=killed)
    return {"run": done.run, "status": done.status, "signalled": killed}


# --- training --------------------------------------------------------------------------------------


def plan_train(*, recipe: str, source: str, parent: str | None = None, from_base: bool = False,
               model: str | None = None, smoke: bool = False, push: bool = False, experiment: str | None = None,
               adopt: str | None = None, ws: Workspace | None = None) -> Any:
    """Check every refusal of the seeds before anything is written; return the chunk's plan.

    ``push``: results to the results bucket after each transition, and (a real chunk) the
    checkpoint to the hub repo ``MONTE_HUB_REPO`` / ``.monte.yaml`` ``hub``; either missing
    refuses E_STORAGE here, before any compute. ``adopt`` (on a box): the run a ``--remote``
    submission started for this chunk."""
    from monte.training import chunk

    plan = chunk.plan_train(ws or open_workspace(), experiment=experiment, recipe=recipe, source=source,
                            parent=parent, from_base=from_base, model=model, smoke=smoke, push=push)
    if adopt:
        plan.adopt = check_name(adopt, "run id")
    return plan


def submit(*, kind: str, plan: Any, box_args: list[str], provider: str = "lambda", host: str | None = None,
           ssh_key: str | None = None, on_step: Any = None, ws: Workspace | None = None) -> dict[str, Any]:
    """``--remote``: start the run rows here, ship the code, credentials and tree to a box, and
    launch the job there detached (see :mod:`monte.remote.submit`)."""
    from monte.remote import submit as remote

    return remote.submit(ws or open_workspace(), kind=kind, plan=plan, box_args=box_args, provider=provider,
                         host=host, ssh_key=ssh_key, on_step=on_step)


def run_train(plan: Any, *, on_progress: Any = None, on_transition: Any = None,
              ws: Workspace | None = None) -> Any:
    """Train one chunk with TRL and record its checkpoint as a lineage commit (a ``push`` plan:
    after uploading it to the hub, and pushing the results after each transition)."""
    from monte.training import chunk

    return chunk.run_train(ws or open_workspace(), plan, on_progress=on_progress, on_transition=on_transition)


def train(**kwargs: Any) -> Any:
    """Plan and run one chunk in one call (no confirmation: the Python caller has decided)."""
    ws = kwargs.pop("ws", None) or open_workspace()
    on_progress = kwargs.pop("on_progress", None)
    on_transition = kwargs.pop("on_transition", None)
    return run_train(plan_train(ws=ws, **kwargs), on_progress=on_progress, on_transition=on_transition, ws=ws)


def model_init(*, path: Path, size: str = "tiny", seed: int = 0) -> dict[str, Any]:
    """Write a randomly initialised small causal LM with its own tokenizer (no download)."""
    from monte.models.tiny import init_model

    return init_model(path, size=size, seed=seed)


def promote(*, ref: str, dest: Path, confirm: str, experiment: str | None = None, from_hub: bool = False,
            ws: Workspace | None = None) -> dict[str, Any]:
    """Export a succeeded training checkpoint's servable folder, sha256-verified file by file.

    ``from_hub``: export the hub copy its lineage commit records (a ``--push`` chunk's), every
    file proven against that commit before anything lands in ``dest`` (a mismatch: E_INTEGRITY)."""
    from monte import evals
    from monte.ledger import rules
    from monte.ledger.experiment import Ledger
    from monte.runs import parse_run_ref
    from monte.training.chunk import _checkpoint_info

    ws = ws or open_workspace()
    if confirm.strip() != ref.strip():
        raise error("E_USAGE", f"--confirm {confirm!r} does not match {ref!r}",
                    f"type the checkpoint out in full: --confirm {ref}")
    exp0, run, step = parse_run_ref(ref, None)
    exp = evals.experiment_name(ws, experiment or exp0)
    ledger = Ledger(ws.store, exp)
    rows = evals.read_rows(ledger)
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
    info = _checkpoint_info(ws, exp, ck, local=not from_hub)
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
        from monte.hashing import sha256_files

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
    out = {"checkpoint": ck.ref, "experiment": exp, "dest": str(dest), "files": len(info["files"]),
           "bytes": size, "sha256": info["files"]}
    if from_hub:
        out["hub"] = {"repo": hub_copy["repo"], "revision": hub_copy["revision"]}
    return out


# --- plot ----------------------------------------------------------------------------------------


def plot(*, out: Path, experiment: str | None = None, ws: Workspace | None = None) -> dict[str, Any]:
    """Draw each lineage path's dev delta against step (cycles, test reads) to ``out``.

    ``out`` must end in .png, .svg or .pdf (E_USAGE) and its folder must exist (E_NOT_FOUND).
    With no checkpoint dev eval yet the figure is still written, with ``note`` saying so.
    """
    from monte import plot as pl

    return pl.plot_experiment(out=out, experiment=experiment, ws=ws)


# --- the ledger polices itself ---------------------------------------------------------------------


def ledger_verify(*, experiment: str | None = None, all_: bool = False, from_rev: str | None = None,
                  ws: Workspace | None = None) -> dict[str, Any]:
    """Re-derive every rule from the commit history; refuse (E_VERIFY) listing each violation."""
    from monte.ledger import verify as vf

    ws = ws or open_workspace(require_data_root=False)
    if experiment and all_:
        raise error("E_USAGE", "name one experiment or pass --all", "monte ledger verify EXP | --all")
    if from_rev and (all_ or not experiment):
        raise error("E_USAGE", "--from verifies one experiment's new records", "monte ledger verify EXP --from REV")
    names = vf.experiments(ws.store) if (all_ or not experiment) else [check_name(experiment, "experiment name")]
    if experiment and ws.store.tip(f"refs/heads/monte/{experiment}/ledger") is None:
        raise error("E_NOT_FOUND", f"no experiment named {experiment!r}", "list them with `monte experiment list`")
    since = None
    if from_rev:
        from dulwich.objectspec import parse_commit

        try:
            since = parse_commit(ws.store.repo, from_rev.encode()).id
        except (KeyError, ValueError):
            raise error("E_NOT_FOUND", f"no commit {from_rev!r}", "pass a commit id of the ledger") from None
    v = vf.Verifier(ws.store)
    violations = [{"experiment": "", **x.to_dict()} for x in v.verify_vault()]
    records = 0
    for name in names:
        found = v.verify(name, since=since)
        violations += [{"experiment": name, **x.to_dict()} for x in found]
        records += v.records
        violations += [{"experiment": name, **x.to_dict()} for x in _lineage_matches_ledger(ws, v, name)]
    if violations:
        lines = "; ".join(f"{x['commit']} [{x['rule']}] {x['message']}" for x in violations[:20])
        raise error("E_VERIFY", f"{len(violations)} violation(s): {lines}",
                    "the ledger was written outside monte; find who wrote these commits "
                    "(`git show COMMIT`) and restore the ref from a good copy", details=violations)
    return {"ok": True, "experiments": names, "records": records}


def _lineage_matches_ledger(ws: Workspace, v: Any, name: str) -> list[Any]:
    """Each lineage ref walks cleanly and its tip is the last checkpoint its run's row lists."""
    from monte.ledger.experiment import Ledger
    from monte.ledger.verify import Violation

    rows = {r.run: r for r in Ledger(ws.store, name).rows()}
    out = []
    for ref, tip in ws.store.refs_under(f"refs/heads/monte/{name}/lineage/").items():
        run = ref.rsplit("/", 1)[1]
        out += v.verify_lineage(name, run)
        row = rows.get(run)
        if row is None:
            out.append(Violation(tip.decode()[:12], "append-only", f"lineage ref of {run}: no such run in the "
                                 "ledger (a record was removed, or the ref was made by hand)"))
        elif row.checkpoints and row.checkpoints[-1]["commit"] != tip.decode():
            out.append(Violation(tip.decode()[:12], "lineage", f"the lineage ref of {run} is not the checkpoint "
                                 f"its row records ({row.checkpoints[-1]['commit'][:12]})"))
    return out


def ledger_verify_updates(lines: list[str], *, full: bool = False, ws: Workspace | None = None) -> dict[str, Any]:
    """For git hooks: check proposed updates (``old new ref`` per line) before they happen.

    Inside a hook the repository is the one git names (a bare one, with the pushed objects in
    quarantine); ``full`` verifies each new tip's whole history (pre-push)."""
    from monte.ledger import verify as vf
    from monte.ledger.store import Store

    store = Store.from_git_env() or (ws or open_workspace(require_data_root=False)).store
    violations = []
    for line in lines:
        parts = line.split()
        if len(parts) < 3:
            continue
        old, new, ref = parts[0].encode(), parts[1].encode(), parts[2]
        violations += [{"ref": ref, **x.to_dict()} for x in vf.verify_update(store, ref, old, new, full=full)]
    if violations:
        lines_ = "; ".join(f"{x['ref']} {x['commit']} [{x['rule']}] {x['message']}" for x in violations[:20])
        raise error("E_VERIFY", f"refused by monte: {lines_}",
                    "this update would break the record's rules; set MONTE_HOOKS=off only to repair by hand",
                    details=violations)
    return {"ok": True, "updates": len(lines)}


HOOKS = ("reference-transaction", "pre-push", "pre-receive")
HOOK_MARK = "# installed by `monte hooks install`"


def hooks_install(*, ws: Workspace | None = None, git_dir: Path | None = None) -> dict[str, Any]:
    """Install monte's git hooks; an existing hook is kept as ``<name>.local`` and runs first."""
    import stat as st
    import sys

    import monte

    if git_dir is None:
        ws = ws or open_workspace(require_data_root=False)
        git_dir = Path(ws.store.repo.controldir())
    hooks = git_dir / "hooks"
    hooks.mkdir(exist_ok=True)
    templates = Path(monte.__file__).parent / "githooks"
    done = []
    for name in HOOKS:
        path = hooks / name
        if path.exists() and HOOK_MARK not in path.read_text(errors="replace"):
            local = hooks / f"{name}.local"
            if local.exists():
                raise error("E_REFUSED", f"{path} is not monte's and {local} exists too",
                            "merge them by hand, then run `monte hooks install` again")
            path.rename(local)
        path.write_text(
            "#!/bin/sh\n"
            f"{HOOK_MARK}; `monte hooks uninstall` removes it.\n"
            "# A hook that was here before runs first, as <name>.local.\n"
            'input=$(cat)\n'
            'if [ -x "$0.local" ]; then printf "%s\\n" "$input" | "$0.local" "$@" || exit $?; fi\n'
            f"MONTE_PYTHON='{sys.executable}'; export MONTE_PYTHON\n"
            f'printf "%s\\n" "$input" | sh \'{templates / name}\' "$@"\n'
        )
        path.chmod(path.stat().st_mode | st.S_IXUSR | st.S_IXGRP | st.S_IXOTH)
        done.append(str(path))
    return {"installed": done}


def hooks_uninstall(*, ws: Workspace | None = None) -> dict[str, Any]:
    ws = ws or open_workspace(require_data_root=False)
    hooks = Path(ws.store.repo.controldir()) / "hooks"
    removed = []
    for name in HOOKS:
        path = hooks / name
        if path.exists() and HOOK_MARK in path.read_text(errors="replace"):
            path.unlink()
            removed.append(str(path))
            local = hooks / f"{name}.local"
            if local.exists():
                local.rename(path)
    return {"removed": removed}


# --- the results bucket --------------------------------------------------------------------------


def push(*, experiment: str | None = None, run: str | None = None, bucket: str | None = None,
         key_file: str | None = None, ws: Workspace | None = None) -> dict[str, Any]:
    """Upload one experiment's ledger objects, refs and run files to the results bucket."""
    from monte import evals
    from monte.storage import results

    ws = ws or open_workspace(require_data_root=False)
    exp = evals.experiment_name(ws, experiment)
    if run is not None:
        from monte.runs import parse_run_ref

        r_exp, run, _ = parse_run_ref(run, exp)
        if r_exp and r_exp != exp:
            raise error("E_USAGE", f"--run {run} names experiment {r_exp}, not {exp}", "name one experiment")
        check_name(run, "run id")
    return results.push(ws, exp, run=run, bucket=bucket, key_file=key_file)


def sync(*, experiments: list[str] | None = None, bucket: str | None = None, key_file: str | None = None,
         ws: Workspace | None = None) -> dict[str, Any]:
    """Pull the results bucket into mirror refs and run folders; merge each ledger (the union)."""
    from monte.storage import results

    ws = ws or open_workspace(require_data_root=False)
    return results.sync(ws, experiments or None, bucket=bucket, key_file=key_file)


# --- boxes ---------------------------------------------------------------------------------------


def _box_workspace() -> Workspace | None:
    """The workspace, when there is one: status and down work anywhere, and use it only to read
    and remove identity files."""
    try:
        ws = open_workspace(require_data_root=False)
    except MonteError:
        return None
    return ws if ws.data_root.is_dir() else None


def box_up(*, type_: str | None = None, region: str | None = None, cold: bool = False,
           keep_alive: bool = False, ssh_key: str | None = None, on_progress: Any = None,
           ws: Workspace | None = None) -> dict[str, Any]:
    """Launch a Lambda box (home region first, then anywhere), wait until it is active, write
    ``<data root>/boxes/<id>.json`` (0600) and arm its watchdog. ``on_progress(line)`` hears each
    step. A failure after the instance exists terminates it before refusing (``E_BOX``)."""
    from monte.remote import boxes

    ws = ws or open_workspace()
    return boxes.up(ws, type_=type_, region=region, cold=cold, keep_alive=keep_alive,
                    ssh_key=ssh_key, on_progress=on_progress)


def box_status(*, ws: Workspace | None = None) -> dict[str, Any]:
    """Every instance on the Lambda account: monte's own (``monte-*``) with ``age_hours`` and
    ``over_ttl``, everything else as ``foreign``."""
    from monte.remote import boxes

    return boxes.status(ws or _box_workspace())


def box_down(*, instance: str | None = None, ws: Workspace | None = None) -> dict[str, Any]:
    """Terminate one of monte's boxes through Lambda's API (default: the only one running) and
    remove its identity file. Refuses a foreign instance (``E_BOX``); several boxes and no
    ``instance`` is ``E_USAGE``."""
    from monte.remote import boxes

    return boxes.down(ws or _box_workspace(), instance)
