"""The reads of one row that ``monte show`` and ``monte logs`` make (:func:`show`, :func:`logs`),
outside :mod:`monte.api` so a reader imports only what they need (``monte.api`` re-exports them)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from monte.errors import error
from monte.names import check_name
from monte.workspace import Workspace, open_workspace

if TYPE_CHECKING:
    from monte.api.shapes import RowDoc


def show(*, ref: str, experiment: str | None = None, ws: Workspace | None = None) -> RowDoc:
    """One full row, with every provenance field: its ``row.json`` at the tip (one blob; a
    started/running row whose process died reads ``abandoned``, as :func:`status` reads it)."""
    from monte.processes import is_dead_at

    _, row = row_json(ws or open_workspace(require_data_root=False), ref, experiment)
    if is_dead_at(row["status"], row["host"], row["pid"], row["proc_start"]):
        row = {**row, "status": "abandoned", "error": "the process died without finishing"}
    if row["kind"] == "train":  # how the chunk was launched (an older row: not recorded)
        row["launch"] = (row["plan"] or {}).get("launch")
    return cast("RowDoc", row)


def row_json(ws: Workspace, ref: str, experiment: str | None) -> tuple[str, dict[str, Any]]:
    """The experiment and the row (its fields, defaults filled in, not validated: a read-only
    view, as status reads the rows; ``monte ledger verify`` checks every ``row.json``) that
    ``ref`` names, as :func:`monte.runs.find_run` finds it, without reading any other row."""
    import json

    from monte.ledger.experiment import Ledger, experiment_names
    from monte.ledger.views import run_dir, with_row_defaults
    from monte.runs.naming import parse_run_ref

    exp0, run, _ = parse_run_ref(ref, None)
    exps = [experiment or exp0] if (experiment or exp0) else experiment_names(ws.store)
    for exp in exps:
        snap = Ledger(ws.store, check_name(exp or "", "experiment name")).snapshot()
        raw = snap.read(f"{run_dir(run)}/row.json") if len(run) >= 2 else None
        if raw:
            return str(exp), with_row_defaults(json.loads(raw))
    raise error("E_NOT_FOUND", f"no run {run!r}" + (f" in experiment {exps[0]}" if len(exps) == 1 else ""),
                "list runs with `monte status`")


def logs(*, ref: str, experiment: str | None = None, ws: Workspace | None = None) -> Path:
    """The run's event file (JSON lines)."""
    ws = ws or open_workspace()
    exp, row = row_json(ws, ref, experiment)
    path = ws.run_folder(exp, row["run"]) / "events.jsonl"
    if not path.exists():
        raise error("E_NOT_FOUND", f"run {row['run']} has no event file on this data root ({path})",
                    "its events live where it ran; `monte sync` brings the bucket's copy")
    return path
