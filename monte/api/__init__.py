"""The Python API: one function per verb (``__all__``). The CLI is a thin layer over this.

Functions take keyword arguments, return data (a frozen result named in :mod:`monte.api.shapes`,
a frozen plan, or one of two documents of JSON types, each named in its signature), and never
print. A refusal is a :class:`monte.errors.MonteError`, the disk's, git's and the network's
failures included (:mod:`monte.api.refusals`); when one is raised, nothing has been written to
the ledger, the vault ref or the data root. docs/api.md is the guide.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from monte.api.boxes import box_down as box_down
from monte.api.boxes import box_status as box_status
from monte.api.boxes import box_up as box_up
from monte.api.refusals import refusing as _refusing
from monte.api.remote import check_eval_remote as check_eval_remote
from monte.api.remote import check_remote as check_remote
from monte.api.remote import check_train_remote as check_train_remote
from monte.api.remote import remote_gate as remote_gate
from monte.api.remote import submit as submit
from monte.api.results import push as push
from monte.api.results import sync as sync
from monte.api.shapes import (
    GraderTaken,
    RecipeAdded,
    Recovered,
    Rerun,
    TakenSplit,
)
from monte.api.verify import hooks_install as hooks_install
from monte.api.verify import hooks_uninstall as hooks_uninstall
from monte.api.verify import ledger_verify as ledger_verify
from monte.api.verify import ledger_verify_updates as ledger_verify_updates
from monte.errors import MonteError, error
from monte.githooks import HOOK_MARK, HOOKS  # noqa: F401  (re-exported)
from monte.names import check_name
from monte.workspace import CONFIG_FILE, Workspace, open_workspace

if TYPE_CHECKING:  # the result models; their modules are imported when a verb runs
    from collections.abc import Callable, Sequence

    from monte.evals import EvalPlan, EvalResult
    from monte.runs import Transition
    from monte.training.plan import TrainPlan
    from monte.training.run import TrainResult

    Progress = Callable[[int, int], None]
    from monte.api.shapes import RowDoc, StatusDoc
    from monte.claim import ClaimExported, ClaimVerified
    from monte.configshow import ConfigShown
    from monte.datasets.manage import DatasetAdded, DatasetShown
    from monte.diff import Diff
    from monte.envs.listing import EnvListed
    from monte.envs.manage import CatalogEntry, EnvAddResult, EnvInfo, EnvInstallResult
    from monte.evals.nominate import Nominated
    from monte.experiments import ExperimentListed, ExperimentMade
    from monte.models.tiny import ModelMade
    from monte.plot import PlotWritten
    from monte.report import ReportWritten
    from monte.repository import ConfigSet, Initialized
    from monte.runs.lifecycle import StopResult
    from monte.status.brief import StatusBrief
    from monte.storage.vault_remote import VaultEntry
    from monte.training.promote import Promoted

# --- init ------------------------------------------------------------------------------------


def init(path: Path | None = None, *, hooks: bool = True, ci: bool = True,
         ci_install: str | None = None) -> Initialized:
    """Make the git repository at ``path`` (default: cwd) a monte repository. Idempotent.

    Writes ``.monte.yaml``, the data root with its ``.gitignore``, ``recipes/`` and ``.dvc/``
    (through DVC itself), unless ``ci`` is False the default branch's CI workflow
    (:mod:`monte.ci`: pinned to ``ci_install``, kept in ``.monte.yaml``, else ``MONTE_CI_INSTALL``,
    else where this monte came from; with no pin a runner can install, no workflow and a note
    saying what to set), and stages what it wrote. Unless ``hooks`` is False, installs monte's
    git hooks (:func:`hooks_install`), so plain git cannot forge or rewind the ledger either.
    In a clone, the ledgers ``git clone`` left under ``refs/remotes/`` are let in."""
    from monte import repository

    if ci_install is not None:
        from monte.ci import check_spec

        if not ci:
            raise error("E_USAGE", "--ci-install pins the CI workflow that --no-ci leaves out", "pass one of them")
        ci_install = check_spec(ci_install)
    result = repository.init(path)
    if ci:
        from monte import ci as workflows

        root = Path(result.repo_root)
        if ci_install is not None and workflows.configured(root) != ci_install:
            workflows.save_spec(root, ci_install)
            repository.stage(root, [CONFIG_FILE])
            result = dataclasses.replace(result, already_initialized=False)
        pin = workflows.resolve(root, ci_install)
        wrote = workflows.write_default_workflow(root, pin, rewrite=pin.source in ("--ci-install", "MONTE_CI_INSTALL"))
        if wrote is not None:
            repository.stage(root, [wrote])
            result = dataclasses.replace(result, created=[*result.created, wrote], already_initialized=False)
        note = (f"CI installs {pin.spec!r} ({pin.source})" if pin.spec is not None else workflows.how_to_pin(pin))
        result = dataclasses.replace(result, ci_note=note)
    # the unwrapped verb: a disk failure installing the hooks stays a failure, not a note below
    from monte.api.verify import hooks_install as install

    later = "`monte hooks install` installs them"
    if not hooks:
        return dataclasses.replace(result, hooks_note=f"git hooks not installed (--no-hooks); {later}")
    try:
        installed = install(ws=open_workspace(Path(result.repo_root), require_data_root=False)).installed
    except MonteError as e:  # a team's own hooks in the way: the repository is ready all the same
        return dataclasses.replace(result, hooks_note=f"git hooks not installed: {e.message}; {e.fix}")
    return dataclasses.replace(result, hooks=installed, hooks_note="git hooks installed (reference-transaction, "
                               "pre-push, pre-receive); `monte hooks uninstall` removes them")


# --- environments ------------------------------------------------------------------------------


def env_add(
    *,
    benchmark: str | None = None,
    server: str | None = None,
    dev: tuple[str, ...] = (),
    test: tuple[str, ...] = (),
    name: str | None = None,
    dry_run: bool = False,
    grader: str | None = None,
    include_path: str | None = None,
    apply_chat_template: str | None = None,
    fewshot_as_multiturn: bool | None = None,
    system_instruction: str | None = None,
    ws: Workspace | None = None,
) -> EnvAddResult:
    """Freeze an Environment from the catalog (the three forms of docs/environments.md), then push it
    to the Vault.

    Order: the flag mix; the name against this data root and the vault ref, then
    against the Vault with any key that reads (a ``--server`` freeze also against Datasets, local
    first); the write probe, before prepare runs; prepare; the create-only name claim in the
    Vault (a lost claim writes nothing here); the manifest and the folder; the upload. A failed
    upload keeps the freeze and refuses with ``E_STORAGE``; a keyless or read-only machine keeps
    the freeze here with a note.

    Besides the catalog's and NeMo Gym's names, an exam may be ``lm-eval:TASK`` (an
    lm-evaluation-harness task, its YAMLs found under ``include_path`` or lm-eval's own) or
    ``file:PATH.jsonl`` (rows ``{"id", "prompt", "answer"}``, scored by ``grader``); an lm-eval
    task's prompts are rendered as lm-eval's ``--apply_chat_template [NAME]``,
    ``--fewshot_as_multiturn`` and ``--system_instruction`` render them (docs/lm-eval.md).
    """
    from functools import partial

    from monte.envs import manage

    ws = ws or open_workspace()
    add = partial(manage.add, ws, benchmark=benchmark, server=server, dev=dev, test=test, name=name,
                  dry_run=dry_run, grader=grader, include_path=include_path, apply_chat_template=apply_chat_template,
                  fewshot_as_multiturn=fewshot_as_multiturn, system_instruction=system_instruction)
    if not ws.config.get("grader"):
        return add()
    # a grader pinned: the test splits go into its custody as part of the freeze (docs/grader.md)
    from monte.grader import client

    kept = name or server or benchmark
    if not dry_run and kept and _holds_test_split(ws, kept):  # a freeze kept here from before the pin
        client.take(ws, kept)  # into custody before the same command pushes the rest to the Vault
    return client.freeze_environment(ws, add, dry_run=dry_run)  # type: ignore[no-any-return]


def _holds_test_split(ws: Workspace, env: str) -> bool:
    from monte.manifest import read_manifest
    from monte.names import check_name

    try:
        check_name(env, "environment name")  # not a name (a NeMo Gym or lm-eval spec): the freeze says why
    except MonteError:
        return False
    m = read_manifest(ws.env_dir(env)) if ws.env_dir(env).is_dir() else None
    return m is not None and any((ws.env_dir(env) / s["test"]).is_file() for s in m.exams.values() if "test" in s)


def env_list(
    *, available: bool = False, vault: bool = False, ws: Workspace | None = None,
) -> list[CatalogEntry] | list[VaultEntry] | list[EnvInfo]:
    """``--available``: the catalog; ``--vault``: what the Vault holds (network); bare: what this
    data root holds (local, no network)."""
    from monte.envs import manage

    return manage.list_envs(available=available, vault=vault, ws=ws)


def env_list_local(*, ws: Workspace | None = None) -> list[EnvListed]:
    """What bare ``monte env list`` prints of each environment on this data root: name, kind,
    exams, benchmarks, files (:func:`env_list`'s rows in those columns, read without pydantic)."""
    from monte.envs.listing import local_envs

    return local_envs((ws or open_workspace()).data_root)


def env_install(*, name: str | None = None, all_: bool = False,
                ws: Workspace | None = None) -> list[EnvInstallResult]:
    """Verify (or restore) frozen environments on this data root.

    A manifest here: prove every file against it (and it against the vault ref), fetch nothing.
    No manifest here: fetch the folder from the Vault when it holds it; else, with a manifest on
    the vault ref, the provider re-creates the files (the catalog regenerates them from the
    recorded seeds) into a staging folder, every hash is proven, and only then is the folder
    moved into place.
    """
    from monte.envs import manage

    return manage.install(name=name, all_=all_, ws=ws)


# --- datasets ----------------------------------------------------------------------------------


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
    prompt_key: str = "prompt",
    chosen_key: str = "chosen",
    rejected_key: str = "rejected",
    from_env: str | None = None,
) -> DatasetAdded:
    """Freeze a JSONL pile as a Dataset: prove every line, hash it, record where it came from,
    then push it to the Vault (as :func:`env_add` does). ``kind``: ``sft`` (``input_key`` /
    ``output_key`` pairs, or messages) or ``preference`` (``prompt_key`` / ``chosen_key`` /
    ``rejected_key``, TRL's preference shapes), each screened row by row. ``from_env`` (with
    ``kind="sft"``): the rows are a trainable environment's curriculum written as demonstrations
    (:mod:`monte.datasets.demonstrations`)."""
    from monte.datasets import manage

    return manage.add(name=name, from_file=from_file, from_hf=from_hf, hf_file=hf_file, kind=kind,
                      input_key=input_key, output_key=output_key, dry_run=dry_run, ws=ws,
                      prompt_key=prompt_key, chosen_key=chosen_key, rejected_key=rejected_key,
                      from_env=from_env)


def dataset_list(*, vault: bool = False, ws: Workspace | None = None) -> list[DatasetShown] | list[VaultEntry]:
    """The frozen Datasets on this data root, from their manifests (no re-hash); ``vault``: what
    the Vault holds (network)."""
    from monte.datasets import manage

    return manage.list_datasets(ws or open_workspace(), vault=vault)


def dataset_show(*, name: str, ws: Workspace | None = None) -> DatasetShown:
    """One Dataset's manifest, with its hash re-proven against the bytes on disk (fetched from
    the Vault first when this data root lacks them)."""
    from monte.datasets import manage

    return manage.show(name=name, ws=ws)


# --- experiments -------------------------------------------------------------------------------


def experiment_init(
    *, name: str, eval_env: str, model: str | None = None, steps_per_chunk: int = 50,
    dry_run: bool = False, ws: Workspace | None = None, samples: int = 1, temperature: float | None = None,
    top_p: float | None = None, pass_at: Sequence[int] = (),
) -> ExperimentMade:
    """Freeze ``measurement.json`` as the experiment's first ledger record. ``samples`` (K),
    ``temperature`` and ``top_p`` are eval settings (they define the cohort and the seal);
    ``pass_at`` names the pass@k deltas reported beside the mean score's (K samples per item, docs/statistics.md)."""
    from functools import partial

    from monte import experiments

    create = partial(experiments.create, name=name, eval_env=eval_env, model=model, steps_per_chunk=steps_per_chunk,
                     samples=samples, temperature=temperature, top_p=top_p, pass_at=pass_at)
    if ws is None:
        try:
            ws = open_workspace()
        except MonteError:  # outside a repository: create refuses, naming the first thing wrong (a bad name first)
            return create(dry_run=dry_run, ws=None)
    if ws.config.get("grader"):  # the test splits into the grader's custody as part of the freeze
        from monte.grader import client

        return cast("ExperimentMade", client.freeze_experiment(ws, partial(create, ws=ws), env=eval_env,
                                                               dry_run=dry_run))
    return create(dry_run=dry_run, ws=ws)


def experiment_list(*, ws: Workspace | None = None) -> list[ExperimentListed]:
    """Every experiment in this repository, from its measurement."""
    from monte import experiments

    return experiments.summaries(ws or open_workspace())


# --- config ------------------------------------------------------------------------------------


def config_show(*, ws: Workspace | None = None) -> ConfigShown:
    """The data root, the Vault and the bucket, the recipe search path and every resolvable
    recipe name (first match wins)."""
    from monte.configshow import config_show

    return config_show(ws or open_workspace(require_data_root=False))


def config_set(*, setting: str, url: str, key: str | None = None, ws: Workspace | None = None) -> ConfigSet:
    """Name the Vault, the results bucket, or the grader (``url`` ssh://USER@HOST[:PORT] and its
    pinned public ``key``) for this repository (``.monte.yaml``)."""
    from monte import repository

    ws = ws or open_workspace(require_data_root=False)
    if setting == "grader":
        from monte.grader import client

        return repository.ConfigSet(**client.set_grader(ws, url, key))
    if key is not None:
        raise error("E_USAGE", "--key pins a grader's public key", f"drop --key for {setting}")
    return repository.config_set(ws, setting=setting, url=url)


def seal_line(*, ws: Workspace | None = None) -> str:
    """One line: where the seal on the test split is held, and what would make it hold against an
    agent with a shell on this account (docs/grader.md)."""
    from monte.ledger.grader_statement import seal_line as line

    return line((ws or open_workspace(require_data_root=False)).config)


def grader_take(*, env: str, ws: Workspace | None = None) -> GraderTaken:
    """Hand environment ``env``'s test splits to the configured grader; remove the local copies."""
    from monte.grader import client

    got = client.take(ws or open_workspace(), env)
    return GraderTaken(environment=got["environment"], grader=got["grader"],
                       taken=tuple(TakenSplit(**t) for t in got["taken"]), removed=list(got["removed"]),
                       redrawable=list(got.get("redrawable") or []))


# --- evaluation ----------------------------------------------------------------------------------


def plan_eval(*, experiment: str | None = None, model: str | None = None, split: str = "dev",
              step: int | None = None, checkpoint: str | None = None, smoke: bool = False,
              push: bool = False, adopt: dict[str, str] | None = None, processes: int = 1,
              remote: bool = False, ws: Workspace | None = None) -> EvalPlan:
    """Check every rule that can be proven before anything is written; return the plan.

    ``push``: upload the results to the results bucket after each transition (refused, E_STORAGE,
    when no bucket is configured). ``adopt`` (on a box): exam -> the run a ``--remote``
    submission started for it. ``remote``: the plan is for :func:`submit` (it pushes; a test read
    while a grader holds the seal is refused, :func:`check_eval_remote`)."""
    from monte import evals

    if split not in ("dev", "test"):
        raise error("E_USAGE", f"unknown split {split!r}", "use --split dev or --split test")
    check_eval_remote(remote=remote, split=split, smoke=smoke, ws=ws)
    plan = evals.plan_eval(ws or open_workspace(), experiment=experiment, model=model, split=split,
                           step=step, checkpoint=checkpoint, smoke=smoke, push=push or remote,
                           processes=processes)
    if adopt:
        unknown = sorted(set(adopt) - {e.exam for e in plan.exams})
        if unknown:
            raise error("E_USAGE", f"--adopt names exams this eval does not run: {', '.join(unknown)}", "")
        for run in adopt.values():
            check_name(run, "run id")
        plan = plan.model_copy(update={"adopt": dict(adopt)})
    return plan


def run_eval(plan: EvalPlan, *, on_progress: Progress | None = None, on_transition: Transition | None = None,
             ws: Workspace | None = None) -> EvalResult:
    """Record the start (``started``: a test eval spends its read there), read the proven split,
    generate, grade, finish.

    ``on_transition(row, transition)`` runs after each transition's record lands; a ``push`` plan
    with none given pushes the results then, and refuses E_STORAGE if a finished run's final
    push fails (the run itself stays recorded locally)."""
    from monte import evals
    from monte.ledger.predicates import spends_test_read

    ws = ws or open_workspace()
    if plan.exams and spends_test_read(plan.exams[0].split, plan.smoke) and ws.config.get("grader"):
        from monte.grader import client  # the seal held by another account: the read runs there

        return cast("EvalResult", client.run_test_read(ws, plan, on_transition=on_transition))
    return evals.run_eval(ws, plan, on_progress=on_progress, on_transition=on_transition)


def evaluate(*, experiment: str | None = None, model: str | None = None, split: str = "dev", step: int | None = None,
          checkpoint: str | None = None, smoke: bool = False, push: bool = False,
          on_progress: Progress | None = None, on_transition: Transition | None = None,
          ws: Workspace | None = None) -> EvalResult:
    """Plan and run one eval in one call (:func:`plan_eval`, then :func:`run_eval`; no
    confirmation: the Python caller has decided)."""
    ws = ws or open_workspace()
    plan = plan_eval(experiment=experiment, model=model, split=split, step=step, checkpoint=checkpoint,
                     smoke=smoke, push=push, ws=ws)
    return run_eval(plan, on_progress=on_progress, on_transition=on_transition, ws=ws)


def nominate(*, ref: str, experiment: str | None = None, ws: Workspace | None = None) -> Nominated:
    """Name the checkpoint the final claim scores (it must carry an admissible dev eval)."""
    from monte import evals

    return evals.nominate(ws or open_workspace(), ref=ref, experiment=experiment, model=None)


# --- reading the record --------------------------------------------------------------------------


def status(*, experiment: str | None = None, ws: Workspace | None = None, json_rows: bool = False,
           table: bool = False) -> StatusDoc:
    """Rows, delta lines, lineage, cycles and checkpoints, from the ledger tip (one tree).
    ``json_rows``: ``rows`` as one already-serialized JSON array (:class:`monte.jsonl.RawJson`,
    for ``monte status --json`` to write as it is) instead of a list of dicts. ``table``: the
    human status's row and delta lines already formatted (``_table``, ``rows`` empty)."""
    from monte import status as st

    return cast("StatusDoc", st.experiment_status(ws or open_workspace(require_data_root=False), experiment,
                                                 json_rows=json_rows, table=table))


def status_view(*, experiment: str | None = None, mode: str = "json", render: Callable[[dict[str, Any]], bytes | str],
                code: Sequence[str] = (), ws: Workspace | None = None) -> bytes | str:
    """:func:`status` as ``render`` prints it (``mode``: ``json``, from ``json_rows``; ``text``,
    from ``table``), made once per state of the repository and kept between calls
    (:func:`monte.status.status_view`; ``code``: the files that render it, part of its key)."""
    from monte import status as st

    return st.status_view(ws or open_workspace(require_data_root=False), experiment, mode, render, code)


def show(*, ref: str, experiment: str | None = None, ws: Workspace | None = None) -> RowDoc:
    """One full row, with every provenance field (:func:`monte.reads.show`)."""
    from monte import reads

    return reads.show(ref=ref, experiment=experiment, ws=ws)


def status_brief(*, experiment: str | None = None, ws: Workspace | None = None) -> StatusBrief:
    """The one-screen summary ``monte status --brief`` and the MCP ``status`` tool print: the best
    paired dev delta with its interval (and search verdict where status has one), the floor, the
    test budget left, the last move (:func:`monte.status.brief.brief`; docs/agents.md)."""
    from monte.status.brief import brief

    return brief(status(experiment=experiment, ws=ws))


def diff(*, run_a: str, run_b: str, experiment: str | None = None, only: str = "flips",
         group_by: str | None = None, ws: Workspace | None = None) -> Diff:
    """Two dev evals of one exam item by item: prompt, expected, both outputs, the flip
    (:func:`monte.diff.diff`); a test-split eval is refused E_SEALED."""
    from monte import diff as diffs

    return diffs.diff(run_a=run_a, run_b=run_b, experiment=experiment, only=only, group_by=group_by, ws=ws)


def flips(*, run: str, experiment: str | None = None, only: str = "flips", group_by: str | None = None,
          ws: Workspace | None = None) -> Diff:
    """A dev eval against the baseline of its paired delta, item by item (:func:`monte.diff.flips`)."""
    from monte import diff as diffs

    return diffs.flips(run=run, experiment=experiment, only=only, group_by=group_by, ws=ws)


def rerun(*, ref: str, experiment: str | None = None, ws: Workspace | None = None) -> Rerun:
    """The exact command and environment that would launch a train run's chunk again, from its
    launch record (:func:`monte.training.launch.rerun`); nothing runs."""
    from monte.runs import find_run
    from monte.training.launch import LAUNCH_DIR
    from monte.training.launch import rerun as rerun_of

    ws = ws or open_workspace(require_data_root=False)
    ledger, row = find_run(ws, ref, experiment)
    if row.kind != "train":
        raise error("E_USAGE", f"run {row.run} is an eval; `monte rerun` relaunches a train chunk",
                    "name a train run (`monte status` lists them)")
    folder = ws.run_folder(ledger.experiment, row.run) / LAUNCH_DIR
    return Rerun(**rerun_of(ledger.experiment, row.run, row.plan, str(folder), smoke=row.smoke))


def logs(*, ref: str, experiment: str | None = None, ws: Workspace | None = None) -> Path:
    """The run's event file (JSON lines; :func:`monte.reads.logs`)."""
    from monte import reads

    return reads.logs(ref=ref, experiment=experiment, ws=ws)


def stop(*, ref: str, experiment: str | None = None, reason: str | None = None,
         ws: Workspace | None = None) -> StopResult:
    """Terminate a running Run (on this host) and record it as abandoned (``reason``: why, for
    the row; a box's job wrapper says how its job ended)."""
    from monte.runs import stop as stop_run

    return stop_run(ws or open_workspace(), ref, experiment=experiment, reason=reason)


def recover(*, experiment: str | None = None, ws: Workspace | None = None) -> list[Recovered]:
    """Record each finish an earlier process kept in its run folder but could not append."""
    from monte import evals
    from monte.ledger.experiment import Ledger
    from monte.runs import experiment_name

    ws = ws or open_workspace()
    exp = experiment_name(ws, experiment)
    Ledger(ws.store, exp).measurement()  # an experiment that does not exist: E_NOT_FOUND, not "nothing to do"
    found = []
    if ws.config.get("grader"):  # a test read whose client died: its signed result, fetched by run id
        from monte.grader import client

        found += client.recover(ws, exp)
    found += evals.recover(ws, exp, test_reads=not ws.config.get("grader"))
    return [Recovered(**r) for r in found]


# --- training --------------------------------------------------------------------------------------


def plan_train(*, recipe: str, source: str, parent: str | None = None, from_base: bool = False,
               model: str | None = None, smoke: bool = False, push: bool = False, experiment: str | None = None,
               adopt: str | None = None, remote: bool = False, processes: int | None = 1, nodes: int = 1,
               accelerate_config: Path | str | None = None, port: int | None = None,
               hosts: str | None = None, ssh_key: str | None = None, ws: Workspace | None = None) -> TrainPlan:
    """Check every refusal of `monte train` before anything is written; return the chunk's plan.

    ``processes`` ranks per node on ``nodes`` nodes (loopback here; ``hosts``: one node per
    host over SSH, opened with ``ssh_key``), under torchrun or
    ``accelerate launch`` with ``accelerate_config`` (frozen into the plan); ``port``: the
    rendezvous port (default: a free one). See :mod:`monte.training.launch`.

    ``push``: results to the results bucket after each transition, and (a real chunk) the
    checkpoint to the hub repo ``MONTE_HUB_REPO`` / ``.monte.yaml`` ``hub``; either missing
    refuses E_STORAGE here, before any compute. ``adopt`` (on a box): the run a ``--remote``
    submission started for this chunk. ``remote``: the chunk runs on a box, which checks the
    recipe's machine-dependent values itself, and pushes (:func:`check_train_remote`: not with
    ``hosts``, nor a recipe named by its path)."""
    from monte.training import plan as train_plan

    check_train_remote(remote=remote, recipe=recipe, hosts=hosts)
    if hosts:  # the nodes' SSH key: the one named, else the environment's
        ssh_key = ssh_key or os.environ.get("MONTE_SSH_KEY_FILE")
    ws = ws or open_workspace()
    plan = train_plan.plan_train(ws, experiment=experiment, recipe=recipe, source=source,
                            parent=parent, from_base=from_base, model=model, smoke=smoke, push=push or remote,
                            remote=remote, processes=processes, nodes=nodes, accelerate_config=accelerate_config,
                            port=port, hosts=hosts, ssh_key=ssh_key)
    if plan.leak.get("sealed_on_grader"):  # the sealed items are the grader's: the leak check runs there
        from monte.grader import client

        client.leak_check(ws, plan.source, list(plan.leak["sealed_on_grader"]))
    if plan.launch and plan.launch.hosts:  # every host answers over SSH, sees this repository, runs this Python
        from monte.remote.hosts import check_plan

        check_plan(plan.launch, ws.repo_root)
    if adopt:
        plan = plan.model_copy(update={"adopt": check_name(adopt, "run id")})
    return plan


def run_train(plan: TrainPlan, *, on_progress: Progress | None = None, on_transition: Transition | None = None,
              ws: Workspace | None = None) -> TrainResult:
    """Train one chunk with TRL and record its checkpoint as a lineage commit (a ``push`` plan:
    after uploading it to the hub, and pushing the results after each transition)."""
    from monte.training import run

    nodes = None
    if plan.launch and plan.launch.hosts:  # the nodes start on their hosts over SSH
        from monte.remote.hosts import SSHNodes

        nodes = SSHNodes()
    return run.run_train(ws or open_workspace(), plan, on_progress=on_progress, on_transition=on_transition,
                         nodes=nodes)


def train(*, recipe: str, source: str, parent: str | None = None, from_base: bool = False,
          model: str | None = None, smoke: bool = False, push: bool = False, experiment: str | None = None,
          on_progress: Progress | None = None, on_transition: Transition | None = None,
          ws: Workspace | None = None) -> TrainResult:
    """Plan and run one chunk in one call (no confirmation: the Python caller has decided)."""
    ws = ws or open_workspace()
    plan = plan_train(recipe=recipe, source=source, parent=parent, from_base=from_base, model=model, smoke=smoke,
                      push=push, experiment=experiment, ws=ws)
    return run_train(plan, on_progress=on_progress, on_transition=on_transition, ws=ws)


def recipe_add(*, name: str, text: str, ws: Workspace | None = None) -> RecipeAdded:
    """Write ``recipes/NAME.yaml`` from ``text`` once it resolves as a recipe; a taken name is
    refused (:func:`monte.training.recipes.add_recipe`)."""
    from monte.training.recipes import add_recipe

    return RecipeAdded(**add_recipe((ws or open_workspace(require_data_root=False)).repo_root, name, text))


def model_init(*, path: Path, size: str = "tiny", seed: int = 0) -> ModelMade:
    """Write a randomly initialised small causal LM with its own tokenizer (no download)."""
    from monte.models.tiny import init_model

    return init_model(path, size=size, seed=seed)


def promote(*, ref: str, dest: Path, confirm: str, experiment: str | None = None, from_hub: bool = False,
            ws: Workspace | None = None) -> Promoted:
    """Export a succeeded training checkpoint's servable folder, sha256-verified file by file.

    ``from_hub``: export the hub copy its lineage commit records (a ``--push`` chunk's), every
    file proven against that commit before anything lands in ``dest`` (a mismatch: E_INTEGRITY)."""
    from monte.training import promote as pr

    return pr.promote(ws or open_workspace(), ref=ref, dest=dest, confirm=confirm, experiment=experiment,
                      from_hub=from_hub)


# --- a claim anyone can check ---------------------------------------------------------------------


def claim_export(*, ref: str, out: Path, key: Path, experiment: str | None = None, identity: str | None = None,
                 card: Path | None = None, ws: Workspace | None = None) -> ClaimExported:
    """Write the signed, self-contained bundle of the final claim ``ref`` to ``out`` (see
    :mod:`monte.claim`); ``card``: a promoted folder of the checkpoint whose model card names it."""
    from monte import claim

    return claim.export(ws or open_workspace(require_data_root=False), ref, out, key, experiment=experiment,
                        identity=identity, card=card)


def claim_verify(*, folder: Path, allowed_signers: Path, weights: Path | None = None,
                 signer: str | None = None, grader_key: str | None = None) -> ClaimVerified:
    """Check a claim bundle with its files alone: signatures, digests, the recomputed delta, the
    replayed ledger, every field of the Statement derived again from it, and the seal. Needs no
    repository and no network. ``signer``: the one key fingerprint (``SHA256:...``) accepted."""
    from monte import claim

    # the unwrapped verb: a disk failure while verifying the bundle breaks no rule of the ledger
    from monte.api.verify import ledger_verify as verify_ledgers

    return claim.verify(folder, allowed_signers, weights=weights, signer=signer, grader_key=grader_key,
                        verify_ledgers=lambda ws: verify_ledgers(all_=True, ws=ws))


# --- plot ----------------------------------------------------------------------------------------


def plot(*, out: Path, experiment: str | None = None, ws: Workspace | None = None) -> PlotWritten:
    """Draw each lineage path's dev delta against step (cycles, test reads) to ``out``.

    ``out`` must end in .png, .svg or .pdf (E_USAGE) and its folder must exist (E_NOT_FOUND).
    With no checkpoint dev eval yet the figure is still written, with ``note`` saying so.
    """
    from monte import plot as pl

    return pl.plot_experiment(out=out, experiment=experiment, ws=ws)


# --- report --------------------------------------------------------------------------------------


def report(*, out: Path, experiment: str | None = None, ws: Workspace | None = None) -> ReportWritten:
    """Write one self-contained HTML page of the experiment to ``out`` (a view of :func:`status`
    and the evals' per-task results); what it shows.

    ``out`` must end in .html (E_USAGE) and its folder must exist (E_NOT_FOUND)."""
    from monte import report as rp

    return rp.write_report(out=out, experiment=experiment, ws=ws)


#: The face of the API: every verb a caller may use (each one refuses with a MonteError, never a
#: raw OSError: :func:`monte.api.refusals.refusing`).
__all__ = [
    # the repository and its settings
    "init", "config_show", "config_set", "seal_line", "hooks_install", "hooks_uninstall",
    # what is frozen
    "env_add", "env_list", "env_list_local", "env_install", "dataset_add", "dataset_list", "dataset_show",
    "grader_take",
    # experiments and the loop
    "experiment_init", "experiment_list", "plan_eval", "run_eval", "evaluate", "nominate",
    "plan_train", "run_train", "train", "recipe_add", "model_init", "promote", "stop", "recover",
    # reading the record
    "status", "status_view", "status_brief", "show", "diff", "flips", "rerun", "logs", "ledger_verify",
    "ledger_verify_updates", "plot", "report",
    # results elsewhere: the bucket, boxes, --remote, a claim anyone can check
    "push", "sync", "box_up", "box_status", "box_down", "check_remote", "check_train_remote",
    "check_eval_remote", "remote_gate", "submit", "claim_export", "claim_verify",
]

# every verb raises its failures as refusals: what the disk, git's objects or the network did is
# the caller's to fix, and a Python caller meets the E_* code `monte` would print
for _name in __all__:
    globals()[_name] = _refusing(globals()[_name])
del _name
