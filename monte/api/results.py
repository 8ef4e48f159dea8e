"""The API's verbs of the results bucket: push one experiment's record and run files, sync
every experiment's back."""

from __future__ import annotations

from typing import TYPE_CHECKING

from monte.errors import error
from monte.names import check_name
from monte.workspace import Workspace, open_workspace

if TYPE_CHECKING:
    from monte.storage.results import Pushed, Synced


def push(*, experiment: str | None = None, run: str | None = None, bucket: str | None = None,
         key_file: str | None = None, ws: Workspace | None = None) -> Pushed:
    """Upload one experiment's ledger objects, refs and run files to the results bucket."""
    from monte.runs import experiment_name
    from monte.storage import results

    ws = ws or open_workspace(require_data_root=False)
    exp = experiment_name(ws, experiment)
    if run is not None:
        from monte.runs import parse_run_ref

        r_exp, run, _ = parse_run_ref(run, exp)
        if r_exp and r_exp != exp:
            raise error("E_USAGE", f"--run {run} names experiment {r_exp}, not {exp}", "name one experiment")
        check_name(run, "run id")
    return results.push(ws, exp, run=run, bucket=bucket, key_file=key_file)


def sync(*, experiments: list[str] | None = None, bucket: str | None = None, key_file: str | None = None,
         ws: Workspace | None = None) -> Synced:
    """Pull the results bucket into mirror refs and run folders; merge each ledger (the union)."""
    from monte.storage import results

    ws = ws or open_workspace(require_data_root=False)
    return results.sync(ws, experiments or None, bucket=bucket, key_file=key_file)
