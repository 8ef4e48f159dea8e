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

import fcntl
import json
import os
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from monte.hashing import sha256_bytes
from monte.ledger.experiment import Ledger, experiment_names
from monte.ledger.refs import MIRROR, base_ref, experiment_of_ledger, ledger_ref, mirror_ref
from monte.ledger.rules import read_role
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
    #: experiment -> the ref its reads were read from (its ledger, or the bucket's mirror of it)
    sources: dict[str, str] = field(default_factory=dict)

    def know(self, experiment: str, rows: Sequence[RunRow]) -> None:
        """Use these rows (read by the caller from the experiment's tip) instead of reading them
        again: ``monte status`` has its own experiment's rows in hand."""
        self._read[experiment] = [r for r in rows if is_test_read(r)]

    def ledgers(self) -> dict[str, list[RunRow]]:
        """experiment -> its rows that read a test split (local ledgers, then bucket mirrors of
        experiments not held locally). Where each came from: :attr:`sources`."""
        if self._rows is None:
            self._rows = {}
            names = set(experiment_names(self.store))
            # a view of the repository with a push's refs in place (a hook): its new ledgers too
            for ref, sha in (getattr(self.store, "proposed", None) or {}).items():
                exp = experiment_of_ledger(ref)
                if exp:
                    (names.add if sha is not None else names.discard)(exp)
            for exp in sorted(names):
                self.sources[exp] = ledger_ref(exp)
                self._rows[exp] = self._read[exp] if exp in self._read else [
                    r for r in Ledger(self.store, exp).rows() if is_test_read(r)]
            for ref in self.store.refs_under(MIRROR + "/"):
                exp = ref[len(MIRROR) + 1:-len("/ledger")] if ref.endswith("/ledger") else ""
                if not exp or "/" in exp or exp in self._rows:
                    continue
                snap = self.store.snapshot(mirror_ref(exp, "ledger"))
                self.sources[exp] = mirror_ref(exp, "ledger")
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

        ref = base_ref(experiment, cohort)
        if self.store.tip(ref) is None:  # an experiment the bucket's mirror holds, not this repository
            ref = mirror_ref(experiment, f"base/{cohort}")
        tip = self.store.tip(ref)
        raw = self.store.snapshot(ref).read("base.json") if tip is not None else None
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
        split, settings, w = seal_key(self, r)
        if split != key.split_sha256 or settings != key.settings:
            return False
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


def seal_key(seal: Seal, r: RunRow) -> tuple[str, str, str]:
    """The seal a test read counts against: (the exam's test content, the output-relevant eval
    settings, the base weights identity). The one place a row's seal key is made: how an exam
    or a weights identity is keyed changes here, and every count (the CLI's, verify's, the
    hooks', push and sync) follows."""
    plan = r.plan
    return (str(plan.get("split_sha256") or ""), settings_key(plan.get("settings") or {}),
            seal.weights_of(r.experiment, r.cohort or ""))


@dataclass(frozen=True)
class SealBreak:
    """Test reads under one seal key, spread over more than one ledger, that the seal cannot
    hold together. ``what``: "claims", "baselines" or "reads" (more than two)."""

    key: tuple[str, str, str]
    what: str
    rows: tuple[RunRow, ...]
    where: tuple[str, ...]  # each row's source (its ledger ref, or the bucket's mirror of it)

    def message(self) -> str:
        split, settings, weights = self.key
        what = {"claims": "two final claims", "baselines": "two test@0 reads",
                "reads": f"{len(self.rows)} reads"}[self.what]
        runs = ", ".join(f"{r.experiment}/{r.run} ({read_role(r)}, {r.status}, from {w})"
                         for r, w in zip(self.rows, self.where, strict=True))
        return (f"the repository-wide seal of test content {split[:12]} (eval settings {settings}, base weights "
                f"{weights.removeprefix('legacy:')[:12]}) holds {what} across experiments: {runs}; the seal allows "
                "test@0 and one final claim per cohort, whichever experiment or ledger reads it")


SEAL_FIX = ("these ledgers each spent a read of the same sealed test content, eval settings and base weights; "
            "both reads stay on the record: decide which claim stands and report the other with it, or take a "
            "sealed claim in a new cohort (other base weights); see docs/reliability.md (the seal under attack)")


def seal_breaks(seal: Seal, only: Iterable[RunRow] | None = None) -> list[SealBreak]:
    """Where the test reads of every ledger ``seal`` sees break the seal together: per seal key
    (:func:`seal_key`), two final claims, two test@0 or more than two reads, among reads of
    more than one ledger (one ledger's own reads are its walk's ``two-touch``). ``only``: judge
    just the seal keys of these reads (a push's new ones), with these rows in place of the
    stored ones of their runs."""
    ledgers = seal.ledgers()
    groups: dict[tuple[str, str, str], dict[str, tuple[RunRow, str]]] = {}
    for exp, rows in sorted(ledgers.items()):
        for r in rows:
            groups.setdefault(seal_key(seal, r), {}).setdefault(r.run, (r, seal.sources.get(exp, ledger_ref(exp))))
    wanted: set[tuple[str, str, str]] | None = None
    if only is not None:
        wanted = set()
        for r in only:
            if not is_test_read(r):
                continue
            k = seal_key(seal, r)
            wanted.add(k)
            src = seal.sources.get(r.experiment, ledger_ref(r.experiment))
            groups.setdefault(k, {})[r.run] = (r, src)
    out: list[SealBreak] = []
    for k, reads in sorted(groups.items()):
        if wanted is not None and k not in wanted:
            continue
        if len({r.experiment for r, _ in reads.values()}) < 2:
            continue
        ordered = sorted(reads.values(), key=lambda x: (x[0].created_at, x[0].run))
        found = False
        for what, role in (("claims", "claim"), ("baselines", "baseline")):
            same = [x for x in ordered if read_role(x[0]) == role]
            if len(same) > 1 and len({r.experiment for r, _ in same}) > 1:
                out.append(SealBreak(k, what, tuple(r for r, _ in same), tuple(w for _, w in same)))
                found = True
        if not found and len(ordered) > 2:
            out.append(SealBreak(k, "reads", tuple(r for r, _ in ordered), tuple(w for _, w in ordered)))
    return out


@contextmanager
def seal_lock(store: Store, key: SealKey) -> Iterator[None]:
    """One writer per seal key: held while a test read is checked against every ledger and its
    ``started`` record lands, so test reads of one seal in any experiments of this repository
    (any worktree: the lock is in the common git directory) start one at a time and each sees
    the others' records. An exclusive ``flock`` on ``<git dir>/monte/seal/<key>.lock``: the
    kernel drops it when its holder dies, so a killed process never leaves it held."""
    folder = Path(store.repo.commondir()) / "monte" / "seal"
    name = sha256_bytes("\0".join((key.split_sha256, key.settings, key.weights)).encode())[:32]
    folder.mkdir(parents=True, exist_ok=True)
    fd = os.open(folder / f"{name}.lock", os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing the descriptor releases the lock
