"""Frozen Environments on this data root: add (freeze and push), list, install (verify, fetch
or restore). The catalog and the freeze itself are :mod:`monte.envs.registry` and
:mod:`monte.envs.freeze`; what Environments share with Datasets (Vault claims, uploads,
staging, fetches) is :mod:`monte.frozen`."""

from __future__ import annotations

import os
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from monte import frozen
from monte.envs import jsonl_exam, lmeval
from monte.errors import MonteError, error
from monte.manifest import Manifest
from monte.names import check_name
from monte.result_type import Result
from monte.storage import tracking
from monte.workspace import Workspace, open_workspace

if TYPE_CHECKING:
    from monte.ledger.store import Snapshot
    from monte.ledger.vault_ref import Vault
    from monte.storage.vault_remote import VaultEntry


@dataclass(frozen=True)
class EnvInfo(Result):
    """One frozen environment on this data root (``monte env list``, an add's ``environment``):
    its kind and form, exam -> its splits, the benchmarks graded, files, fingerprint and folder."""

    name: str
    kind: str
    form: str
    exams: dict[str, list[str]]
    benchmarks: list[str]
    files: int
    fingerprint: str
    folder: str
    #: "exam/split" (and "curriculum") -> the rows frozen there, counted in the files here
    tasks: dict[str, int] = field(default_factory=dict)


def _rows_in(path: Path) -> int | None:
    try:
        with open(path, "rb") as f:
            return sum(1 for line in f if line.strip())
    except OSError:
        return None


def env_info(m: Manifest, folder: Path) -> EnvInfo:
    benches = sorted(set((m.grader or {}).get("benchmarks", {}).values()) | set(
        (m.provenance.get("benchmarks") or {}).keys()))
    return EnvInfo(
        name=m.name, kind=m.env_kind or "", form=m.form or "",
        exams={e: sorted(s) for e, s in m.exams.items()}, benchmarks=benches,
        files=len(m.files), fingerprint=m.fingerprint, folder=str(folder),
        tasks={k: n for k, rel in [*((f"{e}/{sp}", f) for e, ss in sorted(m.exams.items()) for sp, f in sorted(ss.items())),
                                   *([("curriculum", m.curriculum)] if m.curriculum else [])]
               if (n := _rows_in(folder / rel)) is not None},
    )


@dataclass(frozen=True)
class EnvAddResult(Result):
    """``monte env add``: the plan, the environment frozen (None in a dry run), a note (the
    Vault's part), the ``.dvc`` pointer staged, and the floors the freeze recorded."""

    dry_run: bool
    plan: dict[str, Any]
    environment: EnvInfo | None = None
    note: str = ""
    dvc_pointer: str | None = None  # the .dvc file that makes DVC track the folder (staged in git)
    #: "exam/split" -> its constant-answer floor as frozen (``score``, ``answer``, ``n``), or
    #: ``{"none": why}`` where the freeze recorded none (a NeMo Gym exam whose rows carry no answer)
    floors: dict[str, dict[str, Any]] = field(default_factory=dict)


def floors_of(m: Manifest) -> dict[str, dict[str, Any]]:
    """What a freeze says of its floors: each one recorded, and each split recorded without one."""
    out: dict[str, dict[str, Any]] = {}
    for exam, splits in sorted(m.exams.items()):
        for split in sorted(splits):
            f = m.floors.get(exam, {}).get(split)
            why = ((m.provenance.get("floor") or {}).get(f"{exam}/{split}") or {}).get("none")
            if f is not None:
                out[f"{exam}/{split}"] = f.model_dump(mode="json")
            elif why:
                out[f"{exam}/{split}"] = {"none": str(why)}
    return out


@dataclass(frozen=True)
class CatalogEntry(Result):
    """A benchmark the catalog could freeze (``env list --available``): the built-in catalog's
    (provider ``monte`` or a plugin's), and NeMo Gym's resources servers and benchmarks."""

    benchmark: str
    provider: str
    trainable: bool
    sizes: dict[str, int]
    description: str
    kind: str = "catalog"  # "catalog" | NeMo Gym's "server" | "benchmark"
    #: the model servers its grading calls (a judge); empty: graded without one
    judge: list[str] = field(default_factory=list)
    #: NeMo Gym: what freezes without a Hugging Face token ("generator", a shipped file, ...)
    offline: str | None = None


@dataclass(frozen=True)
class EnvInstallResult(Result):
    """What ``install`` did to one environment: verified, fetched (from the Vault) or restored,
    and the NeMo Gym benchmarks it registered (a mock-only one registers none: ``note`` says so)."""

    name: str
    action: str
    files: int
    folder: str
    registered: list[str] = field(default_factory=list)
    note: str = ""
    #: an edited folder this install replaced with the frozen copy: what differed, and where it went
    changed: str = ""
    set_aside: str | None = None


#: what ``install`` says of an environment whose test splits the grader drew (its custody)
CUSTODY_NOTE = ("its test split(s) were drawn by the grader with its own secret seed and stay in its custody: not "
                "generated here (the catalog's public seed does not give them)")
MOCK_ONLY_NOTE = ("declares no Gym benchmarks (a mock-only environment, graded in-process by monte's catalog): "
                  "nothing to register")


def add(
    ws: Workspace,
    *,
    benchmark: str | None,
    server: str | None,
    dev: tuple[str, ...],
    test: tuple[str, ...],
    name: str | None,
    dry_run: bool,
    grader: str | None = None,
    include_path: str | None = None,
    apply_chat_template: str | None = None,
    fewshot_as_multiturn: bool | None = None,
    system_instruction: str | None = None,
    hand_over: Any = None,
    draw_test: Any = None,
) -> EnvAddResult:
    """See :func:`monte.api.env_add`. ``hand_over(staged, manifest, writer)``: with a grader
    pinned, sends each test split to it and removes it from the staging folder, after prepare and
    before anything is recorded or committed to DVC's cache (:mod:`monte.grader.client`).
    ``draw_test``: with a grader pinned, draws a catalog exam's test split on the grader with its
    own seed (:func:`monte.envs.freeze.prepare`'s ``sealed``): it is never generated here."""
    from monte import staging
    from monte.ledger.vault_ref import Vault, name_taken
    from monte.manifest import MANIFEST, drawn_by_grader, read_manifest
    from monte.storage import vault_remote as remote_vault

    if name is not None:
        check_name(name, "environment name")
    plan = _plan(name=name, benchmark=benchmark, server=server, dev=dev, test=test, grader=grader,
                 include_path=include_path)
    check_name(plan.name, "environment name")
    chat = (apply_chat_template, fewshot_as_multiturn, system_instruction)
    if getattr(plan, "provider", None) == lmeval.KIND:  # where lm-eval's warnings go, off the terminal
        from monte.envs.lmeval import freeze as lm_freeze

        plan.log = str(ws.data_root / "logs" / f"lm-eval-{plan.name}.log")
        plan.chat = lm_freeze.chat_options(*chat)  # how lm-eval renders the prompts: part of the grader
    elif any(c is not None for c in chat):
        raise error("E_USAGE", "--apply-chat-template, --fewshot-as-multiturn and --system-instruction are lm-eval's "
                    "renderings: no exam here is lm-eval:TASK", "drop them, or name the exams as lm-eval:TASK")
    tracking.check_trackable("environment", plan.name)
    vault = Vault(ws.store)
    dest = ws.env_dir(plan.name)
    if not dry_run:
        frozen.sweep_staging(ws)
        resumed = frozen.resume_upload(ws, "environment", plan.name, dest)
        if resumed is not None:
            return EnvAddResult(dry_run=False, plan=plan.describe(), environment=env_info(resumed[0], dest),
                                note=resumed[1], dvc_pointer=frozen.track(ws, "environment", plan.name, dest))

    def check_local() -> None:
        if vault.get("environment", plan.name) is not None:
            raise name_taken("environment", plan.name, "the vault ref")
        if os.path.lexists(dest):  # a dangling symlink too: the freeze's rename would fail on it
            raise name_taken("environment", plan.name, f"this data root, {dest}")
        if plan.env_kind == "trainable":
            frozen.refuse_source_conflict(ws, vault, plan.name, holder="dataset")

    check_local()  # refuse before prepare runs: prepare can be expensive
    where = remote_vault.access(ws, write=not dry_run)
    if where.reader is not None:
        if plan.env_kind == "trainable" and where.reader.claim_of("dataset", plan.name) is not None:
            raise frozen.source_conflict(plan.name, "dataset")
        if frozen.claimed(where.reader, "environment", plan.name):
            raise name_taken("environment", plan.name, f"the Vault {where.url}")
    if dry_run:
        if hasattr(plan, "count"):  # NeMo Gym: the rows the freeze will take, not the sizes' maxima
            plan.count()
        return EnvAddResult(dry_run=True, plan=plan.describe(), note=where.note)
    staged = staging.staging_dir(ws.data_root, dest)  # on dest's file system: whole there before the record
    recorded = False
    added: list[str] = []  # objects this freeze put into DVC's cache
    handed: list[dict[str, Any]] = []  # the test splits now in the grader's custody
    try:
        manifest = _prepare(plan, staged, draw_test)
        (staged / MANIFEST).write_bytes(manifest.dumps())
        if hand_over is not None:
            handed = hand_over(staged, manifest, where.writer)
        dvc, added = frozen.commit_staged(ws, staged)  # into DVC's cache; its hash recorded with the freeze
        if where.writer is not None and not where.writer.claim("environment", plan.name, manifest.fingerprint):
            raise frozen.lost_claim("environment", plan.name, where.url)

        def check(snap: Snapshot) -> None:
            if os.path.lexists(dest):
                raise name_taken("environment", plan.name, f"this data root, {dest}")
            if plan.env_kind == "trainable" and vault.get("dataset", plan.name, snap):
                raise frozen.source_conflict(plan.name, "dataset")

        vault.record(manifest, check, trailers=dvc.trailers())
        recorded = True
        staging.move_into_place(staged, dest)
    finally:
        if not recorded or os.path.lexists(dest):  # recorded, not in place: kept for the next sweep
            staging.discard(staged)
        if not recorded:
            frozen.uncommit(ws, added)
    m = read_manifest(dest)
    assert m is not None
    pointer = frozen.track(ws, "environment", plan.name, dest, dvc)
    note = where.note
    if where.writer is not None:
        frozen.upload_or_keep(where.writer, m, dest, "env add", dvc)
        note = f"pushed to the Vault {where.url}"
    sent = [t for t in handed if not t.get("drawn")]
    if sent:
        note += (f"; test split(s) of {', '.join(t['exam'] for t in sent)} handed to the grader"
                 + (" (the Vault keeps them encrypted to its key)" if where.writer is not None else ""))
    if drawn_by_grader(m):
        kept = all(t.get("vault") for t in handed if t.get("drawn"))
        note += (f"; test split(s) of {', '.join(sorted(t for t, sp in m.exams.items() if 'test' in sp))} drawn "
                 "by the grader with its own secret seed: never generated here, and the catalog's public seed does "
                 "not draw them again" + ("" if where.writer is None else " (the Vault keeps them encrypted to its "
                                          "key)" if kept else " (the Vault keeps no copy: back up the grader's home)"))
    return EnvAddResult(dry_run=False, plan=plan.describe(), environment=env_info(m, dest), note=note,
                        dvc_pointer=pointer, floors=floors_of(m))


def _plan(*, name: str | None, benchmark: str | None, server: str | None, dev: tuple[str, ...],
          test: tuple[str, ...], grader: str | None = None, include_path: str | None = None) -> Any:
    """The catalog's plan, or NeMo Gym's when the names are NeMo Gym's (a name both know is the
    catalog's; ``server:NAME`` / ``benchmark:NAME`` are always NeMo Gym's). NeMo Gym is looked
    for only when a name is not in the catalog: the catalog's freezes never read it."""
    from monte.envs import freeze
    from monte.envs.registry import catalog

    specs = [s for s in (benchmark, server, *dev, *test) if s]
    if grader is not None and not any(jsonl_exam.is_file_spec(s) for s in specs):
        raise error("E_USAGE", "--grader grades a file: exam (JSONL); the catalog's and lm-eval's exams bring "
                    "their own grader", "drop --grader, or name the exams as file:DEV.jsonl / file:TEST.jsonl")
    if include_path is not None and not any(lmeval.is_task_spec(s) for s in specs):
        raise error("E_USAGE", "--include-path names where lm-eval task YAMLs are; no exam here is lm-eval:TASK",
                    "drop --include-path, or name the exams as lm-eval:TASK")
    if any(lmeval.is_task_spec(s) for s in specs):
        from monte.envs.lmeval import freeze as lm_freeze

        return lm_freeze.plan_freeze(name=name, benchmark=benchmark, server=server, dev=dev, test=test,
                                     include_path=include_path)
    if any(jsonl_exam.is_file_spec(s) for s in specs):
        return jsonl_exam.plan_freeze(name=name, benchmark=benchmark, server=server, dev=dev, test=test,
                                      grader=grader)
    known = set(catalog())
    if any(s not in known for s in specs):
        from monte.envs.nemo import freeze as gym_freeze
        from monte.envs.nemo import stack as gym_stack

        if gym_freeze.names_gym(gym_stack.find(), specs, known):
            return gym_freeze.plan_freeze(name=name, benchmark=benchmark, server=server, dev=dev, test=test)
    return freeze.plan_freeze(name=name, benchmark=benchmark, server=server, dev=dev, test=test)


def _prepare(plan: Any, staged: Path, draw_test: Any = None) -> Manifest:
    from monte.envs import freeze

    if getattr(plan, "provider", None) == jsonl_exam.KIND:
        return jsonl_exam.prepare(plan, staged)
    if getattr(plan, "provider", None) == lmeval.KIND:
        from monte.envs.lmeval import freeze as lm_freeze

        return lm_freeze.prepare(plan, staged)
    if getattr(plan, "provider", None) == "nemo-gym":
        from monte.envs.nemo import freeze as gym_freeze

        return gym_freeze.prepare(plan, staged)
    return freeze.prepare(plan, staged, sealed=draw_test)


def _gym_available() -> list[CatalogEntry]:
    """NeMo Gym's resources servers and benchmarks, when a stack is found (its files only)."""
    from monte.envs.nemo import stack as gym_stack
    from monte.envs.nemo.freeze import SIZES

    stack = gym_stack.find()
    if stack is None:
        return []
    out = []
    for e in gym_stack.entries(stack):
        sizes = ({"dev": SIZES["dev"], "test": SIZES["test"], **({"curriculum": SIZES["curriculum"]}
                 if e.trainable else {})} if e.kind == "server" else {})  # a benchmark: what its prepare gives
        out.append(CatalogEntry(benchmark=e.name, provider=gym_stack.PROVIDER, trainable=e.trainable, sizes=sizes,
                                description=(e.description.splitlines() or [""])[0][:200], kind=e.kind,
                                judge=list(e.judge), offline=e.offline))
    return out


def gym_missing_note() -> str | None:
    """What `env list --available` says when no NeMo Gym stack is found here: why, and how to
    point monte at one (None: found)."""
    from monte.envs.nemo import stack as gym_stack

    if gym_stack.find() is not None:
        return None
    _, why = gym_stack.local_checkout()
    return (f"NeMo Gym was not found ({why}), so its servers and benchmarks are not listed: set "
            f"{gym_stack.LOCAL} to a NeMo Gym checkout, or {gym_stack.PYTHON} to the python of a virtualenv with "
            "nemo-gym installed (`python -m monte.envs.nemo.venv DEST` builds one)")


def list_envs(
    *, available: bool, vault: bool, ws: Workspace | None,
) -> list[CatalogEntry] | list[VaultEntry] | list[EnvInfo]:
    """See :func:`monte.api.env_list`. ``ws`` is resolved here, after the flags are checked:
    ``available`` reads the catalog and needs no repository."""
    if available and vault:
        raise error("E_USAGE", "--available and --vault name different places to look",
                    "pass one of them, or neither for what is usable here")
    if available:
        from monte.envs.registry import catalog

        return [
            CatalogEntry(benchmark=e.name, provider=e.provider, trainable=e.benchmark.trainable,
                         sizes=e.benchmark.sizes, description=e.benchmark.description)
            for e in catalog().values()
        ] + _gym_available()
    ws = ws or open_workspace()
    if vault:
        return frozen.vault_names(ws, "environment")
    from monte.manifest import read_manifest

    out = []
    root = ws.data_root / "environments"
    for folder in sorted(root.iterdir()) if root.is_dir() else []:
        m = read_manifest(folder)
        if m is not None:
            out.append(env_info(m, folder))
    return out


def install(*, name: str | None, all_: bool, ws: Workspace | None) -> list[EnvInstallResult]:
    """See :func:`monte.api.env_install`. ``ws`` is resolved here, after the flags are checked."""
    from monte.ledger.vault_ref import Vault

    if bool(name) == bool(all_):
        raise error("E_USAGE", "name one environment or pass --all", "monte env install NAME | --all")
    ws = ws or open_workspace()
    frozen.sweep_staging(ws)
    if all_:
        root = ws.data_root / "environments"
        names = sorted(p.name for p in root.iterdir() if (p / "manifest.json").is_file()) if root.is_dir() else []
    else:
        names = [check_name(name or "", "environment name")]
    vault = Vault(ws.store)
    return [install_one(ws, vault, n) for n in names]


def install_one(ws: Workspace, vault: Vault, name: str) -> EnvInstallResult:
    """Put the environment's files here, then register what NeMo Gym grades (a mock-only
    environment has nothing to register, and says so). Refused before any fetch when a NeMo Gym
    environment meets a machine whose ``MONTE_LOCAL`` has no stack."""
    from monte.envs.nemo import register
    from monte.manifest import drawn_by_grader, read_manifest

    folder = ws.env_dir(name)
    known = read_manifest(folder) or vault.get("environment", name)
    if known is not None and register.is_gym(known):
        register.require_checkout(name)
    result = _install_files(ws, vault, name)
    m = read_manifest(folder)
    assert m is not None
    if drawn_by_grader(m):  # whichever way the files came, its test split was not among them
        result = replace(result, note=CUSTODY_NOTE)
    if register.is_gym(m):
        return replace(result, registered=register.register(m, folder, register.require_checkout(name)))
    return replace(result, note=f"{result.note}; {MOCK_ONLY_NOTE}" if result.note else MOCK_ONLY_NOTE)


def _install_files(ws: Workspace, vault: Vault, name: str) -> EnvInstallResult:
    """A manifest here: prove the folder against it (and it against the vault ref). None here:
    fetch the folder from the Vault, or else re-create it from the vault ref's manifest."""
    from monte import staging
    from monte.manifest import MANIFEST, read_manifest, verify_folder

    folder = ws.env_dir(name)
    recorded = vault.get("environment", name)
    here = read_manifest(folder)
    if here is None:
        fetched = frozen.fetch_from_vault(ws, "environment", name, folder)
        if fetched is not None:
            return EnvInstallResult(name=name, action="fetched", files=len(fetched.files), folder=str(folder))
    if here is not None:
        if recorded is not None and recorded.fingerprint != here.fingerprint:
            raise error("E_INTEGRITY",
                        f"environment {name!r}: {folder / MANIFEST} differs from the vault ref's manifest",
                        f"move {folder} aside and run `monte env install {name}` to restore it")
        try:  # a test split in the pinned grader's custody is missing here on purpose
            verify_folder(folder, frozen.without_custody(here, folder, bool(ws.config.get("grader"))))
        except MonteError as e:
            if e.code != "E_INTEGRITY" or recorded is None:
                raise
            return _restore_edited(ws, vault, name, folder, e)
        frozen.track(ws, "environment", name, folder)
        return EnvInstallResult(name=name, action="verified", files=len(here.files), folder=str(folder))
    if recorded is None:
        raise error("E_NOT_FOUND", f"no environment named {name!r} on this data root or the vault ref",
                    "list what is here with `monte env list`; freeze one with `monte env add`")
    if folder.exists() and any(folder.iterdir()):
        raise error("E_INTEGRITY", f"{folder} exists but holds no manifest.json",
                    f"move {folder} aside, then run `monte env install {name}` again")
    staged = staging.staging_dir(ws.data_root, folder)
    try:
        recreate(recorded, staged)
        verify_folder(staged, frozen.without_custody(recorded, staged, False))
        (staged / MANIFEST).write_bytes(recorded.dumps())
        if folder.exists():
            folder.rmdir()
        staging.move_into_place(staged, folder)
    finally:
        staging.discard(staged)
    frozen.track(ws, "environment", name, folder)
    return EnvInstallResult(name=name, action="restored", files=len(recorded.files), folder=str(folder))


def _restore_edited(ws: Workspace, vault: Vault, name: str, folder: Path, changed: MonteError) -> EnvInstallResult:
    """A frozen folder whose files were changed after the freeze: set it aside (nothing of the
    user's is deleted), restore the frozen copy (the Vault, or the vault ref's recipe), and say
    what differed and where the edited copy went. A restore that fails puts the folder back."""
    aside = frozen.set_aside(ws, "environment", name, folder)
    try:
        result = _install_files(ws, vault, name)
    except BaseException:
        if not os.path.lexists(folder):
            os.replace(aside, folder)
        raise
    prefix = f"environment {name!r}: "
    return replace(result, changed=changed.message.removeprefix(prefix), set_aside=str(aside))


def recreate(m: Manifest, staged: Path) -> None:
    """Re-run the freeze's prepare from what the manifest recorded (catalog environments). A test
    split the grader drew with its own seed is never generated: dev and the curriculum are drawn
    as that freeze drew them, and the test split stays the grader's (only it ever held it)."""
    from monte.envs import freeze
    from monte.envs.registry import catalog
    from monte.manifest import drawn_by_grader

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
    plan = freeze.FreezePlan(m.name, m.form, m.env_kind, exams, roles.get("curriculum"),  # type: ignore[arg-type]
                             dict(prov.get("sizes", {})))
    freeze.prepare(plan, staged, custody=drawn_by_grader(m))
