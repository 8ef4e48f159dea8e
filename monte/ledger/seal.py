"""The seal across the repository: test reads counted per exam *content*, not per experiment.

The improvement loop defines a cohort as "the group of runs that share a base model and the same
frozen evaluation settings", and the seal allows two reads of a test split per cohort. So reads
are counted per (test exam x output settings x base weights identity) over every experiment's
ledger in the repository (and the results bucket's mirrors ``monte sync`` wrote): a second
experiment, or the same split re-added under another name, shares the seal.

- The exam is its items (``monte.envs.items``): two test splits are one exam for the seal when
  their files are the same bytes, when they hold the same set of normalised items (any order,
  file or environment name: the same ``exam_key``), or when one shares at least
  :data:`SAME_EXAM` of the smaller one's items with the other (:func:`overlap`, estimated from
  the bottom-k sketch each test read records). A read recorded before reads recorded their
  exam is given one from its split's file on this data root (``exam_of``), when it is here.
- The settings are those that change what is generated or graded (:func:`settings_key`): an
  execution detail (batch size, device, backend, processes) never makes a new seal.

A row's base weights are read from its cohort's base commit (``base.json``, ``weights``). A
cohort begun before cohorts were weights has no such field; its identity is then recomputed from
the base model folder ``base.json`` names when that folder still holds the recorded bytes, and
otherwise it is matched by its old file-listing id.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from monte.hashing import sha256_bytes
from monte.ledger.experiment import Ledger, experiment_names
from monte.ledger.refs import MIRROR, base_ref, mirror_ref
from monte.ledger.store import Store
from monte.ledger.views import output_settings

if TYPE_CHECKING:  # annotations only: a read of the rows needs no pydantic
    from monte.ledger.records import RunRow


def settings_key(settings: Mapping[str, Any]) -> str:
    """The frozen eval settings that change what is generated or graded, as one comparable
    string: an execution detail (``views.EXECUTION_DETAILS``: batch size, device, backend,
    processes) is left out, wherever a row recorded it (an older row holds ``batch_size`` among
    its ``settings``)."""
    out = output_settings(settings)
    return sha256_bytes(json.dumps(out, sort_keys=True, separators=(",", ":")).encode())[:16]


def is_test_read_dict(r: Mapping[str, Any]) -> bool:
    """:func:`is_test_read` of a row as an index holds it."""
    return r["kind"] == "eval" and r["split"] == "test" and not r["smoke"]


def is_test_read(r: RunRow) -> bool:
    """A spent touch: every non-smoke test eval row, whatever became of it."""
    return r.kind == "eval" and r.split == "test" and not r.smoke


#: two test splits sharing at least this share of the smaller one's items are one exam for the seal
SAME_EXAM = 0.5


def overlap(a: Mapping[str, Any], b: Mapping[str, Any]) -> float:
    """The share of the smaller split's items the other one holds, |A ∩ B| / min(|A|, |B|),
    from two exam sketches (``monte.envs.items.exam_sketch``: ``items``, the count of distinct
    items, and ``sketch``, the smallest item keys). Exact when both sketches hold every key;
    otherwise Broder's bottom-k estimate of the Jaccard index J, turned into the intersection
    J (|A| + |B|) / (1 + J)."""
    if a.get("key") and a.get("key") == b.get("key"):
        return 1.0
    na, nb = int(a.get("items") or 0), int(b.get("items") or 0)
    sa, sb = set(a.get("sketch") or ()), set(b.get("sketch") or ())
    if not (na and nb and sa and sb):
        return 0.0
    if len(sa) == na and len(sb) == nb:
        return len(sa & sb) / min(na, nb)
    k = min(len(sa), len(sb))
    union = sorted(sa | sb)[:k]
    j = sum(1 for x in union if x in sa and x in sb) / len(union)
    return min(1.0, j * (na + nb) / (1 + j) / min(na, nb))


@dataclass(frozen=True)
class SealKey:
    """What one seal covers: a test exam (its split file's hash and, where known, its items), the
    output settings, the base weights."""

    split_sha256: str
    settings: str  # settings_key(...)
    weights: str  # the base weights identity
    legacy_cohort: str = ""  # the same base's older file-listing cohort id
    #: the exam's items (monte.envs.items.exam_sketch: key, items, sketch); None: its hash alone.
    #: Not part of the key's equality or hash: two reads are one exam by :meth:`Seal.same_exam`.
    exam: Mapping[str, Any] | None = field(default=None, compare=False)


@dataclass
class Seal:
    """Test reads across every ledger of one repository (read lazily, once)."""

    store: Store
    #: recompute an older cohort's identity from its base folder (reads its weights); off for
    #: read-only disclosures, which then count such a cohort by its old id
    hash_legacy: bool = True
    #: (experiment, exam, split sha256) -> that split's exam sketch, read from this data root, for a
    #: read recorded before reads recorded their exam (None: not here, or another file now)
    exam_of: Callable[[str, str, str], Mapping[str, Any] | None] | None = None
    #: run -> how a read that is not the same file was found to be the same exam
    why: dict[str, str] = field(default_factory=dict)
    _exams: dict[tuple[str, str, str], Mapping[str, Any] | None] = field(default_factory=dict)
    _rows: dict[str, list[RunRow]] | None = None
    _weights: dict[tuple[str, str], str] = field(default_factory=dict)
    _read: dict[str, list[RunRow]] = field(default_factory=dict)

    def know(self, experiment: str, rows: Sequence[RunRow]) -> None:
        """Use these rows (read by the caller from the experiment's tip) instead of reading them
        again: ``monte status`` has its own experiment's rows in hand."""
        self._read[experiment] = [r for r in rows if is_test_read(r)]

    def ledgers(self) -> dict[str, list[RunRow]]:
        """experiment -> its rows that read a test split (local ledgers, then bucket mirrors of
        experiments not held locally)."""
        if self._rows is None:
            self._rows = {}
            for exp in experiment_names(self.store):
                self._rows[exp] = self._read[exp] if exp in self._read else [
                    r for r in Ledger(self.store, exp).rows() if is_test_read(r)]
            for ref in self.store.refs_under(MIRROR + "/"):
                exp = ref[len(MIRROR) + 1:-len("/ledger")] if ref.endswith("/ledger") else ""
                if not exp or "/" in exp or exp in self._rows:
                    continue
                snap = self.store.snapshot(mirror_ref(exp, "ledger"))
                self._rows[exp] = [r for r in Ledger(self.store, exp).rows(snap) if is_test_read(r)]
        return self._rows

    def weights_of(self, experiment: str, cohort: str) -> str:
        """The base weights identity of a cohort ("legacy:<cohort>" when it cannot be known)."""
        key = (experiment, cohort)
        if key not in self._weights:
            self._weights[key] = self._read_weights(experiment, cohort)
        return self._weights[key]

    def _read_weights(self, experiment: str, cohort: str) -> str:
        from monte.ledger.lineage import servable_files, weights_identity

        tip = self.store.tip(base_ref(experiment, cohort))
        raw = self.store.snapshot(base_ref(experiment, cohort)).read("base.json") if tip is not None else None
        if raw is None:
            return f"legacy:{cohort}"
        base = json.loads(raw)
        if base.get("weights"):
            return str(base["weights"])
        folder = Path(str(base.get("model") or ""))
        if not self.hash_legacy:
            return f"legacy:{cohort}"
        try:  # an older cohort: its folder, if it still holds the bytes base.json recorded
            files = servable_files(folder)
            if files == base.get("files"):
                return weights_identity(folder, files)
        except Exception:  # noqa: BLE001 - gone, moved or unreadable: fall back to its old id
            pass
        return f"legacy:{cohort}"

    def exam_sketch(self, r: RunRow) -> Mapping[str, Any] | None:
        """The exam a test read read: as its row records it, else from its split's file here."""
        recorded = r.plan.get("exam_id")
        if isinstance(recorded, Mapping):
            return recorded
        if self.exam_of is None:
            return None
        at = (r.experiment, r.exam or "", str(r.plan.get("split_sha256") or ""))
        if at not in self._exams:
            try:
                self._exams[at] = self.exam_of(*at)
            except Exception:  # noqa: BLE001 - unreadable here: the read is matched by its hash alone
                self._exams[at] = None
        return self._exams[at]

    def same_exam(self, r: RunRow, key: SealKey) -> bool:
        if r.plan.get("split_sha256") == key.split_sha256:
            return True
        if key.exam is None:
            return False
        theirs = self.exam_sketch(r)
        if theirs is None:
            return False
        share = overlap(theirs, key.exam)
        if share < SAME_EXAM:
            return False
        self.why[r.run] = ("the same items in another order or file" if share >= 1.0 and theirs.get("key") ==
                           key.exam.get("key") else f"about {share:.0%} of the items in common")
        return True

    def matches(self, r: RunRow, key: SealKey) -> bool:
        plan = r.plan
        if settings_key(plan.get("settings") or {}) != key.settings:
            return False
        w = self.weights_of(r.experiment, r.cohort or "")
        if not (w == key.weights or (bool(key.legacy_cohort) and w == f"legacy:{key.legacy_cohort}")):
            return False
        return self.same_exam(r, key)

    def touches(self, key: SealKey, own: tuple[str, Sequence[RunRow]] | None = None) -> list[RunRow]:
        """Every test read under ``key``, oldest first within each ledger. ``own``: (experiment,
        rows) to use for that experiment instead of its stored tip (the tip being appended to)."""
        out: list[RunRow] = []
        seen: set[str] = set()
        for exp, rows in sorted(self.ledgers().items()):
            if own and exp == own[0]:
                continue
            out.extend(r for r in rows if r.run not in seen and self.matches(r, key))
            seen.update(r.run for r in out)
        if own:
            mine = [r for r in own[1] if is_test_read(r) and r.run not in seen and self.matches(r, key)]
            out = mine + out
        return out

    def disclosure(self, split_sha256: str) -> dict[str, Any]:
        """How often a test split's content has been read here, over every cohort."""
        reads = [r for rows in self.ledgers().values() for r in rows
                 if r.plan.get("split_sha256") == split_sha256]
        groups = {(self.weights_of(r.experiment, r.cohort or ""), settings_key(r.plan.get("settings") or {}))
                  for r in reads}
        return {"reads": len({r.run for r in reads}), "cohorts": len(groups),
                "experiments": sorted({r.experiment for r in reads})}


def describe(touches: Iterable[RunRow]) -> str:
    return ", ".join(f"{t.experiment}/{t.run}" for t in touches)


def overlap_note(seal: Seal, touches: Iterable[RunRow]) -> str:
    """How the reads of another test split were found to be this exam, for the refusal."""
    notes = [f"{t.experiment}/{t.run} read {t.exam!r}, {seal.why[t.run]}" for t in touches if t.run in seal.why]
    if not notes:
        return ""
    return (f"; another test split is this exam for the seal ({'; '.join(notes)}: a split sharing "
            f"{SAME_EXAM:.0%} or more of its items is the same exam)")
