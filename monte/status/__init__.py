"""What ``monte status`` shows, computed from the rows at the ledger tip (pure; no torch, no walk).

- delta lines: every admissible eval that has a paired (or unpaired) delta against its cohort's
  baseline, with the 95% interval;
- ``lineage:`` lines, one per descent path, in the notation of docs/commands.md;
- ``cycles:``: the first admissible dev eval at a new highest step along each path, judged
  ``ok`` / ``STRIKE`` (paired) or unjudged (unpaired);
- the checkpoint list.

In parts: :mod:`~monte.status.lineage` (descent paths, lineage lines, cycles),
:mod:`~monte.status.facts` (what one row gives, cached per index), :mod:`~monte.status.fold` (the
one pass over the rows, kept between reads), :mod:`~monte.status.document` (an experiment's
document: seal, floors) and :mod:`~monte.status.view` (the status as printed, kept per state).
Every name stays importable from ``monte.status``.
"""

from __future__ import annotations

from monte.status.document import (
    add_floors_and_reach,
    experiment_status,
    floors_and_source,
    frozen_floors,
)
from monte.status.facts import (
    BASE_MODEL,
    COHORT,
    CREATED,
    DELTA,
    DELTA_HEAD,
    EXAM,
    FACTS_VERSION,
    FULL,
    JSON_ROW,
    KIND,
    ROLE,
    RUN,
    SCORE,
    SEQ,
    SMOKE,
    SPLIT,
    STATUS,
    STEP,
    TABLE_LINE,
    TKIND,
    TRUN,
    TSTEP,
    WHAT,
    WHO,
    N,
    delta_head,
    derive_facts,
    facts_version,
    row_fact,
    status_text,
    table_line,
)
from monte.status.fold import Dead, Lines, finish, fold, from_facts, lineage_section, new_fold
from monte.status.lineage import (
    LEGEND,
    FirstEval,
    Hop,
    by_run,
    cycles,
    descent_paths,
    first_dev_evals,
    lineage_lines,
    path_checkpoints,
    render_path,
)
from monte.status.view import (
    VIEW_VERSION,
    Render,
    code_digest,
    make_view,
    rederive_view,
    refold,
    state_key,
    status_view,
)

__all__ = [
    "BASE_MODEL", "COHORT", "CREATED", "DELTA", "DELTA_HEAD", "EXAM", "FACTS_VERSION", "FULL", "JSON_ROW", "KIND",
    "LEGEND", "N", "ROLE", "RUN", "SCORE", "SEQ", "SMOKE", "SPLIT", "STATUS", "STEP", "TABLE_LINE", "TKIND", "TRUN",
    "TSTEP", "VIEW_VERSION", "WHAT", "WHO", "Dead", "FirstEval", "Hop", "Lines", "Render",
    "add_floors_and_reach", "by_run", "code_digest", "cycles", "delta_head", "derive_facts", "descent_paths",
    "experiment_status", "facts_version", "finish", "first_dev_evals", "floors_and_source", "fold", "from_facts",
    "frozen_floors", "lineage_lines", "lineage_section", "make_view", "new_fold", "path_checkpoints", "rederive_view",
    "refold", "render_path", "row_fact", "state_key", "status_text", "status_view", "table_line",
]
