"""The derived cohort index: ``cohorts/<cohort>/index.json``, a cohort's baselines and test reads.

Finishing an eval pairs it against its cohort's baseline, and planning a training chunk checks
that every exam has its baselines; both used to read every row of the ledger for that. Every
record that writes a row of a cohort also keeps this small file up to date (in
:func:`monte.ledger.experiment.record_change`), so those questions cost one blob read:

- ``base``: ``{exam: {split: [[seq, run], ...]}}``, every admissible eval of the base model (an
  eval that succeeded, not smoke, whose target is the base), sorted by ``(seq, run)``: the first
  is :func:`monte.ledger.rules.baseline` over the rows (the rows read in record order, ties by
  run id, as ``Ledger.rows`` sorts them);
- ``test``: ``{exam: [[seq, run], ...]}``, every read of the sealed test split
  (:func:`monte.ledger.rules.test_touches`: non-smoke test evals, whatever became of them), in
  the same order.

The fold (:func:`fold`) is a pure function of (old index, new row): the new version of a row
replaces the old one wherever it was listed, so the index is the same whatever order the rows'
versions arrive in, and it equals :func:`build` over the rows (the property tests check this).
``monte ledger verify`` re-derives it record by record; a merge of two ledgers unions it
(:func:`union`); a ledger written before it existed has none, and its readers fall back to the
rows (the next record of the cohort creates it).

No I/O here.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from monte.ledger.predicates import is_base_eval, is_test_read
from monte.ledger.views import cohort_index_path

if TYPE_CHECKING:  # annotations only: a read of the rows needs no pydantic
    from monte.ledger.records import RunRow

#: a cohort name that can be a folder under ``cohorts/`` (what verify lets in there)
NAME = re.compile(r"^[0-9a-zA-Z._-]+$")
PATH = re.compile(r"^cohorts/([0-9a-zA-Z._-]+)/index\.json$")

Index = dict[str, Any]


def index_path(cohort: str) -> str | None:
    """Where the cohort's index lives; None for a cohort name that cannot be a folder (its
    readers scan the rows)."""
    if not cohort or cohort in (".", "..") or not NAME.match(cohort):
        return None
    return cohort_index_path(cohort)


def empty() -> Index:
    return {"base": {}, "test": {}}


def _insert(entries: list[list[Any]], seq: int, run: str) -> None:
    entries.append([seq, run])
    entries.sort(key=lambda e: (int(e[0]), str(e[1])))


def fold(index: Mapping[str, Any] | None, row: RunRow) -> Index:
    """The index after ``row`` (a new row, or a new version of one already folded in) of the
    index's cohort; a new dict, ``index`` is left as it was."""
    old = index or {}
    run = row.run
    base: dict[str, dict[str, list[list[Any]]]] = {
        exam: {split: [list(e) for e in entries if e[1] != run] for split, entries in splits.items()}
        for exam, splits in (old.get("base") or {}).items()}
    test: dict[str, list[list[Any]]] = {
        exam: [list(e) for e in entries if e[1] != run] for exam, entries in (old.get("test") or {}).items()}
    if row.exam is not None and row.split is not None and is_base_eval(row):
        _insert(base.setdefault(row.exam, {}).setdefault(row.split, []), row.seq, run)
    if row.exam is not None and is_test_read(row):
        _insert(test.setdefault(row.exam, []), row.seq, run)
    return {"base": {exam: kept for exam, splits in base.items()
                     if (kept := {s: e for s, e in splits.items() if e})},
            "test": {exam: entries for exam, entries in test.items() if entries}}


def build(rows: Iterable[RunRow], cohort: str) -> Index:
    """The index of ``cohort`` over these rows (a ledger without one: its first record creates it)."""
    index = empty()
    for row in rows:
        if row.cohort == cohort:
            index = fold(index, row)
    return index


def baseline(index: Mapping[str, Any], exam: str, split: str) -> str | None:
    """The run id of the cohort's baseline on this exam and split (:func:`monte.ledger.rules.baseline`)."""
    entries = ((index.get("base") or {}).get(exam) or {}).get(split) or []
    return str(entries[0][1]) if entries else None


def test_reads(index: Mapping[str, Any], exam: str) -> list[str]:
    """The run ids of the exam's test reads, oldest first (:func:`monte.ledger.rules.test_touches`)."""
    return [str(e[1]) for e in (index.get("test") or {}).get(exam) or []]


def union(base: Mapping[str, Any] | None, ours: Mapping[str, Any], theirs: Mapping[str, Any]) -> Index:
    """The index of the union of two ledgers that forked at ``base`` (None: it had no index).

    Each run's rows are written by one side only, so each entry is kept exactly where a
    three-way merge of sets keeps it: on both sides, or added by one (one side removing an
    entry is a row that side rewrote)."""

    def entries(index: Mapping[str, Any] | None) -> set[tuple[str, str, str, int, str]]:
        out: set[tuple[str, str, str, int, str]] = set()
        for exam, splits in ((index or {}).get("base") or {}).items():
            for split, listed in splits.items():
                out |= {("base", exam, split, int(e[0]), str(e[1])) for e in listed}
        for exam, listed in ((index or {}).get("test") or {}).items():
            out |= {("test", exam, "", int(e[0]), str(e[1])) for e in listed}
        return out

    b, o, t = entries(base), entries(ours), entries(theirs)
    kept = (b & o & t) | (o - b) | (t - b)
    out: Index = empty()
    for what, exam, split, seq, run in sorted(kept, key=lambda e: (e[3], e[4], e[0], e[1], e[2])):
        if what == "base":
            out["base"].setdefault(exam, {}).setdefault(split, []).append([seq, run])
        else:
            out["test"].setdefault(exam, []).append([seq, run])
    return out
