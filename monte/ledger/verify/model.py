"""What verify reports and the shapes it reads: the paths of a ledger's files, a
:class:`Violation`, the result of a walk that passed (:class:`Passed`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from dulwich.objects import ObjectID

from monte.ledger import cohorts as cohort_index
from monte.ledger.records import RunRow

ROW = re.compile(r"^runs/([0-9a-z])/([0-9a-z])/([0-9a-z]{1,64})/row\.json$")

TASKS = re.compile(r"^runs/([0-9a-z])/([0-9a-z])/([0-9a-z]{1,64})/tasks\.jsonl$")
#: a test read's signed statement from the grader (monte.ledger.grader_statement.ROW_FILE)
GRADER = re.compile(r"^runs/([0-9a-z])/([0-9a-z])/([0-9a-z]{1,64})/grader\.json$")

INDEX = re.compile(r"^runs/([0-9a-z])/([0-9a-z])/index\.json$")

NOMINATION = re.compile(r"^cohorts/([0-9a-zA-Z._-]+)/nomination\.json$")

#: a leak refusal counted against a sealed test content (monte.ledger.views.leak_refusal_path)
LEAK_REFUSAL = re.compile(r"^leaks/([0-9a-f]{2})/([0-9a-f]{16,64})\.json$")

# the files whose bytes the walk reads (what _prefetch reads ahead), and the length of history
# past which the walk reads through git in bulk (monte.ledger.gitread) rather than object by object
READ = re.compile(r"^(runs/[0-9a-z]/[0-9a-z]/([0-9a-z]{1,64}/(row\.json|tasks\.jsonl)|index\.json)"
                  r"|cohorts/[0-9a-zA-Z._-]+/(nomination|index)\.json|measurement\.json)$")

BULK = 16

COHORT_INDEX = cohort_index.PATH  # cohorts/<cohort>/index.json, derived (monte.ledger.cohorts)

#: the status a run row may move to from each open status (a record rewrites its row)
ROW_STATUS_MOVES = {
    "started": {"running", "succeeded", "failed", "abandoned"},
    "running": {"running", "succeeded", "failed", "abandoned"},
}

IDENTITY = ("run", "experiment", "kind", "cohort", "exam", "split", "smoke", "created_at", "role")

@dataclass(frozen=True)
class Violation:
    commit: str
    rule: str
    message: str
    fix: str = ""  # what to do, where the ledger-wide fix ("written outside monte") is wrong

    def to_dict(self) -> dict[str, str]:
        out = {"commit": self.commit, "rule": self.rule, "message": self.message}
        return {**out, "fix": self.fix} if self.fix else out

MERGED_TOUCH_FIX = ("two ledgers that each spent this read were merged (by monte sync/push before this check "
                    "existed, or by git); both reads are spent and stay on the record: decide which claim "
                    "stands and report the other read with it, or take a sealed claim in a new cohort; see "
                    "docs/reliability.md (Two machines, one seal)")

@dataclass
class Seen:
    """The commits already in the verified state: a merge's records are those of its second
    parent not in here. With ``--from`` the ancestors of that commit are added the first time a
    merge needs them (``pending``), so a linear incremental check never walks the history."""

    ids: set[ObjectID] = field(default_factory=set)
    pending: ObjectID | None = None

class NeedAll(Exception):
    """The state at ``--from``, read lazily, was asked what only all of its rows answer."""


_SCAN: Callable[[str, int], tuple[Any, int]] = json.JSONDecoder().scan_once  # type: ignore[attr-defined]

def json_line(line: str) -> Any:
    """``json.loads(line)``, by json's own scanner without its per-call wrapping (a 10,000-record
    ledger holds ~a million per-task lines); anything it does not take whole is handed to
    ``json.loads``, which then answers, or raises, as it would have."""
    text = line.strip(" \t\n\r")  # the whitespace json.loads skips around a value
    try:
        value, end = _SCAN(text, 0)
    except (StopIteration, ValueError, RecursionError):
        return json.loads(line)
    return value if end == len(text) else json.loads(line)


class Passed(NamedTuple):
    """The last walk that found nothing: the rows the ledger's indexes hold at its tip, for the
    checks that read them next (the lineage refs, the warnings)."""

    experiment: str
    tip: ObjectID
    rows: dict[str, RunRow]
    complete: bool  # every row of the ledger (False: with --from, read lazily, those looked at)
