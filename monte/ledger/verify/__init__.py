"""``monte ledger verify``: re-derive every rule from the commit history alone.

Nothing a row says about itself is trusted: touches are counted from the records that created
them, deltas for the final claim's selection are recomputed from the per-task files, baselines
are the records themselves, and checkpoints are checked against their lineage commits. Each
violation names the commit, the rule and a one-line explanation.

Rules (the names printed):

- ``one-record``: one record per commit (a row, a nomination, or a leak refusal), with a ``Monte-Event`` trailer,
  on a single first-parent line from the experiment's creation. The one other commit allowed is
  a merge of two ledgers that diverged (``monte.ledger.merge``): two parents, a ``Monte-Event:
  merge`` trailer, and a tree that is exactly the union of its parents (re-derived here). The
  records it merges in (reachable from its second parent, not its first) are checked as records,
  oldest first, on top of the state before the merge, under every rule below: two machines
  that each spent the final test read break ``two-touch`` at the merge. Their violations name the
  merge commit and the merged-in record (a ``two-touch`` one's fix says two ledgers were merged;
  monte's own merge now refuses such a union, ``E_SEALED``).
- ``well-formed``: every path is one monte writes (the CI workflow every record carries,
  :data:`monte.ci.LEDGER_WORKFLOW`, among them: derived, like ``meta.json``); every row parses;
  the derived fan-out index equals the rows it indexes; each cohort's derived index
  (``cohorts/<cohort>/index.json``: its baselines and test reads, :mod:`monte.ledger.cohorts`)
  that a record writes equals the fold of the rows before it, and a record that changes a
  cohort's baselines or test reads rewrites the index where the ledger keeps one.
- ``append-only``: no record removed; no finished row rewritten; identity fields never change;
  ``measurement.json`` never changes; per-task files never change once written.
- ``unique-run-id``: a new run never reuses an id.
- ``two-touch``: at most two test reads per sealed exam per cohort; ``test@0`` on the base model,
  before any checkpoint of the cohort and only once; the second read on a checkpoint, after
  ``test@0``, and on the nominated or rule-selected checkpoint.
- ``baselines-first``: a real training chunk only after every exam's baselines.
- ``lineage``: each checkpoint's lineage commit exists, names its run and step, hangs off the
  parent the plan names (or the cohort's base commit), and absolute steps add up.
- ``frozen-hashes``: the split hashes in ``measurement.json`` match the vault's manifest.
- ``no-smoke-evidence``: a smoke run is never a parent, an eval target or a nominee.
- ``rewound``: every tip monte remembers of a ``refs/heads/monte/`` ref (each one the store
  wrote, git's reflog of it, each one a verify saw pass: :mod:`monte.ledger.tips`) is still in
  that ref's history, and the ref still exists; a remote-tracking copy of a ledger holds no record
  the local ledger lacks: the results bucket's mirror (``monte sync`` merges it), or a git
  remote's copy that diverged from the local ledger (one simply ahead is let in before verify
  reads: :mod:`monte.ledger.remotes`). The violation names the lost commit. A rewind that drops only commits
  that monte never wrote and that each break a rule (a forgery put back by hand, with
  ``MONTE_HOOKS=off``) is a repair, not a rewind.
- ``seal``: the repository-wide seal. The test reads of every ledger the repository holds (and
  the results bucket's mirrors of experiments it does not, and, in a hook, the ledgers a push
  brings) are counted per seal key (:func:`monte.ledger.seal.seal_key`: the exam's test content,
  the output-relevant eval settings, the base weights identity), whatever experiment holds
  them: two final claims, two test@0 or a third read under one key, spread over ledgers that
  each keep ``two-touch`` on their own, break it. The violation names every read, its
  experiment and where it was read from (:func:`seal_violations`).

The rules a new row must keep are plain functions over the re-derived state
(:mod:`monte.ledger.verify.rules`: ``no_smoke_evidence``, ``baselines_first``, ``two_touch``), which a
test can call on rows without a walk; the walk applies :data:`~monte.ledger.verify.rules.NEW_ROW_RULES`
to each new row.
- ``behaviour``: a base commit recorded as a new cohort behaves as no model recorded before it:
  its recorded fingerprint is not within the threshold of a checkpoint of another cohort nor of
  a base of other weights (:mod:`monte.ledger.verify.behaviour`: the recorded fingerprints
  compared, nothing recomputed; in a hook, the base refs a push brings).
"""

from monte.ledger.verify.lineage import Verifier
from monte.ledger.verify.model import (
    BULK,
    COHORT_INDEX,
    IDENTITY,
    INDEX,
    MERGED_TOUCH_FIX,
    NOMINATION,
    READ,
    ROW,
    ROW_STATUS_MOVES,
    TASKS,
    NeedAll,
    Passed,
    Seen,
    Violation,
    json_line,
)
from monte.ledger.verify.rules import NEW_ROW_RULES, RowRule, new_row_violations
from monte.ledger.verify.state import WalkState
from monte.ledger.verify.updates import (
    PUSH_FIX,
    VERIFIED,
    experiments,
    seal_violations,
    verify_before_spend,
    verify_update,
    verify_updates,
)

__all__ = [
    "Verifier",
    "NEW_ROW_RULES",
    "RowRule",
    "new_row_violations",
    "Passed",
    "ROW_STATUS_MOVES",
    "ROW",
    "TASKS",
    "INDEX",
    "NOMINATION",
    "READ",
    "BULK",
    "COHORT_INDEX",
    "IDENTITY",
    "Violation",
    "MERGED_TOUCH_FIX",
    "Seen",
    "NeedAll",
    "json_line",
    "WalkState",
    "experiments",
    "verify_before_spend",
    "VERIFIED",
    "verify_updates",
    "seal_violations",
    "verify_update",
    "PUSH_FIX",
]
