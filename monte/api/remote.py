"""The API's rules and verb of ``--remote`` (a run submitted to a box) and of ``--hosts`` (a
chunk's nodes on your own machines): which options go together, checked here so a Python caller
meets the same refusals as ``monte train`` and ``monte eval``, and :func:`submit`."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from monte.api.shapes import Submitted
from monte.errors import error
from monte.workspace import Workspace, open_workspace

if TYPE_CHECKING:
    from monte.evals import EvalPlan
    from monte.training.plan import TrainPlan


def check_remote(*, remote: bool, push: bool = False, dry_run: bool = False, provider: str = "lambda",
                 host: str | None = None, ws: Workspace | None = None) -> None:
    """The options of ``--remote`` taken together, then its reproducibility gate (a clean tree;
    origin holds HEAD), in the order docs/remote.md lists: ``provider`` and ``host`` only with
    ``remote``; no ``push`` (the box pushes) and no ``dry_run`` (a submission is real compute)."""
    if not remote:
        if host or provider != "lambda":
            raise error("E_USAGE", "--provider and --host choose where --remote runs", "add --remote, or drop them")
        return
    if push:
        raise error("E_USAGE", "--remote already runs the box job with --push",
                    "drop --push: the box uploads its results after each transition")
    if dry_run:
        raise error("E_USAGE", "--remote submits real compute, so it has no dry run",
                    "run the same command without --remote and with --dry-run to see the plan")
    remote_gate(ws=ws)


def check_train_remote(*, remote: bool, recipe: str, hosts: str | None) -> None:
    """A chunk goes to a box (``remote``) or to your hosts (``hosts``), not both; and a box
    resolves recipes in its own checkout, so ``remote`` takes a recipe by name, not by path."""
    if hosts and remote:
        raise error("E_USAGE", "--hosts runs the chunk's nodes on your machines over SSH; --remote submits it to a box",
                    "drop one of them (on a box, --processes N uses its GPUs)")
    if remote and ("/" in recipe or recipe.endswith((".yaml", ".yml"))):
        raise error("E_USAGE", f"--remote cannot take a path-spelled recipe ({recipe}): the box resolves recipes "
                    "in its own checkout, where that file does not exist",
                    "commit the file to recipes/ and name it bare (--recipe NAME)")


def check_eval_remote(*, remote: bool, split: str, smoke: bool, ws: Workspace | None = None) -> None:
    """A test read never goes to a box while a grader holds the seal: the box is the agent's."""
    from monte.ledger.predicates import spends_test_read

    if remote and spends_test_read(split, smoke):
        if (ws or open_workspace(require_data_root=False)).config.get("grader"):
            raise error("E_REFUSED", "a test read does not go to a box when a grader holds the seal: the box is "
                        "the agent's (its weights and files are the agent's to change)",
                        "run `monte eval --split test` without --remote: the read runs on the grader")


def remote_gate(*, ws: Workspace | None = None) -> str:
    """``--remote``'s reproducibility gate (a clean tree; origin holds HEAD); the commit to run."""
    from monte.remote.submit import gate

    return gate((ws or open_workspace(require_data_root=False)).repo_root)


def submit(*, plan: EvalPlan | TrainPlan, kind: str | None = None, provider: str = "lambda",
           host: str | None = None, ssh_key: str | None = None, on_step: Any = None,
           ws: Workspace | None = None) -> Submitted:
    """``--remote``: start the run rows here, ship the code, credentials and tree to a box, and
    launch the job there detached (see :mod:`monte.remote.submit`). The box's command line is
    derived from ``plan`` (:mod:`monte.remote.jobargs`), so it runs what the plan showed;
    ``kind`` (``eval`` or ``train``) is the plan's own unless named."""
    from monte.evals import EvalPlan
    from monte.remote import submit as remote

    kind = kind or ("eval" if isinstance(plan, EvalPlan) else "train")
    return Submitted(**remote.submit(ws or open_workspace(), kind=kind, plan=plan, provider=provider, host=host,
                                     ssh_key=ssh_key, on_step=on_step))
