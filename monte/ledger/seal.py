"""The seal across the repository: test reads counted per exam *content*, not per experiment.

The improvement loop defines a cohort as "the group of runs that share a base model and the same
frozen evaluation settings", and the seal allows two reads of a test split per cohort. So reads
are counted per (test split content hash x frozen eval settings x base weights identity) over
every experiment's ledger in the repository (and the results bucket's mirrors ``monte sync``
wrote): a second experiment, or the same split re-added under another name, shares the seal.

A row's base weights are read from its cohort's base commit (``base.json``, ``weights``). A
cohort begun before cohorts were weights has no such field; its identity is then recomputed from
the base model folder ``base.json`` names when that folder still holds the recorded bytes, and
otherwise it is matched by its old file-listing id.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from monte.hashing import sha256_bytes
from monte.ledger.experiment import Ledger, experiment_names
from monte.ledger.refs import MIRROR, base_ref, mirror_ref
from monte.ledger.store import Store

if TYPE_CHECKING:  # annotations only: a read of the rows needs no pydantic
    from monte.ledger.records import RunRow


def settings_key(settings: dict[str, Any]) -> str:
    """The frozen eval settings as one comparable string."""
    return sha256_bytes(json.dumps(settings, sort_keys=True, separators=(",", ":")).encode())[:16]


def is_test_read_dict(r: Mapping[str, Any]) -> bool:
    """:func:`is_test_read` of a row as an index holds it."""
    return r["kind"] == "eval" and r["split"] == "test" and not r["smoke"]


def is_test_read(r: RunRow) -> bool:
    """A spent touch: every non-smoke test eval row, whatever became of it."""
    return r.kind == "eval" and r.split == "test" and not r.smoke


@dataclass(frozen=True)
class SealKey:
    """What one seal covers: a test split's content, the eval settings, the base weights."""

    split_sha256: str
    settings: str  # settings_key(...)
    weights: str  # the base weights identity
    legacy_cohort: str = ""  # the same base's older file-listing cohort id


@dataclass
class Seal:
    """Test reads across every ledger of one repository (read lazily, once)."""

    store: Store
    #: recompute an older cohort's identity from its base folder (reads its weights); off for
    #: read-only disclosures, which then count such a cohort by its old id
    hash_legacy: bool = True
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

    def matches(self, r: RunRow, key: SealKey) -> bool:
        plan = r.plan
        if plan.get("split_sha256") != key.split_sha256:
            return False
        if settings_key(plan.get("settings") or {}) != key.settings:
            return False
        w = self.weights_of(r.experiment, r.cohort or "")
        return w == key.weights or (bool(key.legacy_cohort) and w == f"legacy:{key.legacy_cohort}")

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
