"""The seal across the repository: test reads counted per exam *content* and base weights, not
per experiment nor per eval settings.

The improvement loop defines a cohort as "the group of runs that share a base model and the same
frozen evaluation settings". Cohorts still pair deltas by their settings, but the budget is
stricter than "two reads per cohort": a repository gets two test reads (test@0 and one final
claim) of a given exam content on given base weights, whatever the settings (a
near-greedy temperature, another K, template or grader sampled the same answers again as a
"fresh" cohort). So reads are counted per (test content x base weights identity) over every
experiment's ledger in the repository (and the results bucket's mirrors ``monte sync`` wrote).
A read records the rule it was counted under (``plan.seal`` = :data:`SEAL_RULE`); a read recorded
before it (no field) kept the older count, per (content x output settings x base weights), and
verify judges those reads among themselves as they were counted (:func:`seal_breaks`).

- The exam is its items (``monte.envs.items``): its documents' normalised question (an lm-eval
  item: its document), recorded exactly on every test read (every item key, not an estimate).
  Two test splits are one exam for the seal when their files are the same bytes, when they hold
  the same set of items (any order, file or environment name, template or few-shot context: the
  same ``exam_key``), or when they share :data:`SHARED_SHARE` of either side's items or
  :data:`SHARED_ITEMS` items (:func:`same_content`). A read recorded before reads recorded every
  key is given them from its split's file on this data root (``exam_of``) when that file is here
  with the bytes it read; otherwise its recorded smallest keys are compared (:func:`shared`).
- Execution details (batch size, device, backend, processes) never made a new seal, and since
  :data:`SEAL_RULE` no eval setting does.

A row's base weights are read from its cohort's base commit (``base.json``, ``weights``). A
cohort begun before cohorts were weights has no such field; its identity is then recomputed from
the base model folder ``base.json`` names when that folder still holds the recorded bytes, and
otherwise it is matched by its old file-listing id.
"""

from __future__ import annotations

import fcntl
import json
import os
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from monte.hashing import sha256_bytes
from monte.jsonl import log_records
from monte.ledger.exam_ids import EXAM_ID_VERSION, exam_keys
from monte.ledger.experiment import Ledger, experiment_names
from monte.ledger.predicates import is_test_read, is_test_read_dict  # noqa: F401  (where callers look)
from monte.ledger.refs import MIRROR, base_ref, experiment_of_ledger, ledger_ref, mirror_ref
from monte.ledger.rules import read_role
from monte.ledger.store import Store
from monte.ledger.views import output_settings, own_dir

if TYPE_CHECKING:  # annotations only: a read of the rows needs no pydantic
    from monte.ledger.records import RunRow


def settings_key(settings: Mapping[str, Any]) -> str:
    """The frozen eval settings that change what is generated or graded, as one comparable
    string: an execution detail (``views.EXECUTION_DETAILS``: batch size, device, backend,
    processes) is left out, wherever a row recorded it (an older row holds ``batch_size`` among
    its ``settings``)."""
    out = output_settings(settings)
    return sha256_bytes(json.dumps(out, sort_keys=True, separators=(",", ":")).encode())[:16]


#: a test split shares a sealed content (its read counts as a read of it) when the items they have
#: in common are at least SHARED_SHARE of either side, or at least SHARED_ITEMS items
SHARED_SHARE = 0.05
SHARED_ITEMS = 10
#: the budget rule a test read was counted under, recorded on it (``plan.seal``): from 2 on, two
#: reads per exam content and base weights whatever the eval settings; before (no field), two per
#: exam content, eval settings and base weights (the older rows keep their meaning)
SEAL_RULE = 2


def by_content(r: RunRow) -> bool:
    """Was this test read counted per exam content and base weights, whatever its settings?"""
    rule = r.plan.get("seal")
    return isinstance(rule, int) and not isinstance(rule, bool) and rule >= SEAL_RULE


def shared(a: Mapping[str, Any], b: Mapping[str, Any]) -> float:
    """How many items two exam ids (``monte.envs.items.exam_sketch``) have in common: exact when
    both hold every key (every read since exam ids were version 2); when one holds only the
    smallest keys (an older read), the share of those the other's exact set holds, times its
    count (no choice of added keys hides a shared item from an exact set); when neither is
    exact, Broder's bottom-k estimate of the Jaccard index J, as J (|A| + |B|) / (1 + J)."""
    if a.get("key") and a.get("key") == b.get("key"):
        return float(max(int(a.get("items") or 0), 1))
    na, nb = int(a.get("items") or 0), int(b.get("items") or 0)
    (sa, xa), (sb, xb) = exam_keys(a), exam_keys(b)
    if not (na and nb and sa and sb):
        return 0.0
    if xa and xb:
        return float(len(sa & sb))
    if xa or xb:
        exact, part, n_part = (sa, sb, nb) if xa else (sb, sa, na)
        return len(part & exact) / len(part) * n_part
    k = min(len(sa), len(sb))
    union = sorted(sa | sb)[:k]
    j = sum(1 for x in union if x in sa and x in sb) / len(union)
    return min(float(min(na, nb)), j * (na + nb) / (1 + j))


def overlap(a: Mapping[str, Any], b: Mapping[str, Any]) -> float:
    """The share of the smaller split's items the other one holds (:func:`shared` / min)."""
    na, nb = int(a.get("items") or 0), int(b.get("items") or 0)
    return min(1.0, shared(a, b) / min(na, nb)) if na and nb else 0.0


def same_content(a: Mapping[str, Any], b: Mapping[str, Any]) -> tuple[bool, float]:
    """Is a split a read of the other's content (:data:`SHARED_SHARE` of either side, or
    :data:`SHARED_ITEMS` items, in common)? And how many items they share."""
    n = shared(a, b)
    na, nb = int(a.get("items") or 0), int(b.get("items") or 0)
    small = min(na, nb)
    return (n > 0 and (round(n) >= SHARED_ITEMS or (small > 0 and n >= SHARED_SHARE * small))), n


@dataclass(frozen=True)
class SealKey:
    """What one seal covers: a test exam (its split file's hash and, where known, its items), the
    output settings, the base weights."""

    split_sha256: str
    settings: str  # settings_key(...)
    weights: str  # the base weights identity
    legacy_cohort: str = ""  # the same base's older file-listing cohort id
    #: count only reads of these settings: a read recorded under the older rule (per cohort), as
    #: a claim bundle lists the reads of its own seal. False (a read now): every setting counts
    by_settings: bool = False
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
        # (lineage costs ~30 ms to import: only an older cohort, hashed here, needs it)
        from monte.ledger.lineage import servable_files, weights_identity

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
        if isinstance(recorded, Mapping) and recorded.get("v") == EXAM_ID_VERSION:
            return recorded
        # an older read recorded its smallest keys only (or nothing), and an lm-eval item by its
        # rendered prompt: its split's file, where it is here with the bytes read, gives it exactly
        fallback = recorded if isinstance(recorded, Mapping) else None
        if self.exam_of is None:
            return fallback
        at = (r.experiment, r.exam or "", str(r.plan.get("split_sha256") or ""))
        if at not in self._exams:
            try:
                self._exams[at] = self.exam_of(*at)
            except Exception:  # noqa: BLE001 - unreadable here: the read is matched by what it recorded
                self._exams[at] = None
        return self._exams[at] or fallback

    def same_exam(self, r: RunRow, key: SealKey) -> bool:
        if r.plan.get("split_sha256") == key.split_sha256:
            return True
        if key.exam is None:
            return False
        theirs = self.exam_sketch(r)
        if theirs is None:
            return False
        same, n = same_content(theirs, key.exam)
        if not same:
            return False
        self.why[r.run] = ("the same items in another order or file" if theirs.get("key") == key.exam.get("key")
                           else f"{round(n)} of its items in common")
        return True

    def matches(self, r: RunRow, key: SealKey) -> bool:
        w = self.weights_of(r.experiment, r.cohort or "")
        if key.by_settings and settings_key(r.plan.get("settings") or {}) != key.settings:
            return False
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


def seal_key(seal: Seal, r: RunRow) -> tuple[str, str, str]:
    """The seal a test read counts against: (the exam's test content, the output-relevant eval
    settings, the base weights identity); the settings are ``"*"`` for a read counted under
    :data:`SEAL_RULE` (every setting shares one budget). The one place a row's seal key is made:
    how an exam or a weights identity is keyed changes here, and every count (the CLI's,
    verify's, the hooks', push and sync) follows."""
    plan = r.plan
    exam = seal.exam_sketch(r)  # an exam is its items: the same items in another file are one exam
    content = str(exam["key"]) if exam and exam.get("key") else str(plan.get("split_sha256") or "")
    settings = "*" if by_content(r) else settings_key(plan.get("settings") or {})
    return (content, settings, seal.weights_of(r.experiment, r.cohort or ""))


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
        scope = ("whatever the eval settings" if settings == "*" else f"eval settings {settings}")
        return (f"the repository-wide seal of test content {split[:12]} ({scope}, base weights "
                f"{weights.removeprefix('legacy:')[:12]}) holds {what} across experiments: {runs}; the seal allows "
                "test@0 and one final claim per exam content and base weights, whichever experiment, ledger or "
                "eval settings read it")


SEAL_FIX = ("these ledgers each spent a read of the same sealed test content and base weights; "
            "both reads stay on the record: decide which claim stands and report the other with it, or take a "
            "sealed claim in a new cohort (other base weights); see docs/reliability.md (the seal under attack)")


def _breaks(ordered: list[tuple[RunRow, str]], key: tuple[str, str, str]) -> list[SealBreak]:
    out: list[SealBreak] = []
    found = False
    for what, role in (("claims", "claim"), ("baselines", "baseline")):
        same = [x for x in ordered if read_role(x[0]) == role]
        if len(same) > 1 and len({r.experiment for r, _ in same}) > 1:
            out.append(SealBreak(key, what, tuple(r for r, _ in same), tuple(w for _, w in same)))
            found = True
    if not found and len(ordered) > 2:
        out.append(SealBreak(key, "reads", tuple(r for r, _ in ordered), tuple(w for _, w in ordered)))
    return out


def seal_breaks(seal: Seal, only: Iterable[RunRow] | None = None) -> list[SealBreak]:
    """Where the test reads of every ledger ``seal`` sees break the seal together, among reads of
    more than one ledger (one ledger's own reads are its walk's ``two-touch``): two final claims,
    two test@0 or more than two reads. Reads of one exam content and base weights are judged
    together: the older ones (recorded before :data:`SEAL_RULE`) per eval settings, as they were
    counted; each read counted under the rule against every read of that content and weights
    before it, whatever their settings. ``only``: judge just the seal keys of these reads (a
    push's new ones), with these rows in place of the stored ones of their runs."""
    ledgers = seal.ledgers()
    groups: dict[tuple[str, str], dict[str, tuple[RunRow, str]]] = {}

    def group(r: RunRow) -> tuple[str, str]:
        content, _, weights = seal_key(seal, r)
        return content, weights

    for exp, rows in sorted(ledgers.items()):
        for r in rows:
            groups.setdefault(group(r), {}).setdefault(r.run, (r, seal.sources.get(exp, ledger_ref(exp))))
    wanted: set[tuple[str, str]] | None = None
    if only is not None:
        wanted = set()
        for r in only:
            if not is_test_read(r):
                continue
            g = group(r)
            wanted.add(g)
            groups.setdefault(g, {})[r.run] = (r, seal.sources.get(r.experiment, ledger_ref(r.experiment)))
    out: list[SealBreak] = []
    for (content, weights), reads in sorted(groups.items()):
        if wanted is not None and (content, weights) not in wanted:
            continue
        if len({r.experiment for r, _ in reads.values()}) < 2:
            continue
        ordered = sorted(reads.values(), key=lambda x: (x[0].created_at, x[0].run))
        older: dict[str, list[tuple[RunRow, str]]] = {}
        for x in ordered:
            if not by_content(x[0]):
                older.setdefault(settings_key(x[0].plan.get("settings") or {}), []).append(x)
        for settings, same in sorted(older.items()):
            if len({r.experiment for r, _ in same}) > 1:
                out.extend(_breaks(same, (content, settings, weights)))
        # a read under the rule: judged with every read of the content and weights up to it
        for i, x in enumerate(ordered):
            if not by_content(x[0]):
                continue
            upto = ordered[:i + 1]
            if len({r.experiment for r, _ in upto}) < 2:
                continue
            role = read_role(x[0])
            if len(upto) > 2 or any(read_role(y[0]) == role for y in upto[:-1]):
                found = _breaks(upto, (content, "*", weights))
                out.extend(found or [SealBreak((content, "*", weights), "reads", tuple(r for r, _ in upto),
                                               tuple(w for _, w in upto))])
                break  # the first read that breaks it is named; the later ones follow from it
    return out


@contextmanager
def seal_lock(store: Store, key: SealKey) -> Iterator[None]:
    """One writer per seal key: held while a test read is checked against every ledger and its
    ``started`` record lands, so test reads of one seal in any experiments of this repository
    (any worktree: the lock is in the common git directory) start one at a time and each sees
    the others' records. An exclusive ``flock`` on ``<git dir>/monte/seal/<key>.lock``: the
    kernel drops it when its holder dies, so a killed process never leaves it held."""
    folder = own_dir(store.repo.commondir()) / "seal"
    # keyed by the weights alone, not the split's file nor the settings: an exam is its items, two
    # files of overlapping items are one exam, and every setting shares a budget, so every test
    # read of one base shares a lock
    name = sha256_bytes(f"weights\0{key.weights}".encode())[:32]
    try:
        folder.mkdir(parents=True, exist_ok=True)
        fd = os.open(folder / f"{name}.lock", os.O_RDWR | os.O_CREAT, 0o644)
    except (FileExistsError, NotADirectoryError, IsADirectoryError):
        from monte.errors import error

        raise error("E_STORAGE", f"{folder} (or its lock) is not what monte keeps there: the test read's lock "
                    "cannot be taken", f"move {folder} away (monte keeps a folder of lock files there and "
                    "makes it again), then run the command again") from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing the descriptor releases the lock


#: where leak refusals were counted before they were records (the common git directory, not
#: pushed): still counted, never written
LEAK_REFUSALS = "leak-refusals.jsonl"
LEAK_EVENT = "leak-refusal"


def _leak_log(store: Store) -> Path:
    return own_dir(store.repo.commondir()) / LEAK_REFUSALS


def record_leak_refusal(store: Store, *, split_sha256: str, content: str, experiment: str, source: str,
                        rows: int, at: str) -> None:
    """Count one leak refusal against a sealed test content: each one answered a membership
    question ("are these rows in test?"), so each is disclosed beside the content's test reads
    (:func:`leak_refusals`). A record on the experiment's ledger (``leaks/<key>.json``, event
    ``leak-refusal``): it travels wherever the ledger does (push, sync, a clone), so another
    copy of the repository sees the questions asked here. The one refusal that writes a record:
    it writes nothing else, and no row, read or seal moves."""
    from monte.ledger.store import Change
    from monte.ledger.views import leak_refusal_path

    body = {"split_sha256": split_sha256, "content": content, "experiment": experiment, "source": source,
            "rows": rows, "at": at, "nonce": os.urandom(8).hex()}  # (two refusals in one second: two records)
    key = sha256_bytes(json.dumps(body, sort_keys=True).encode())[:32]

    def build(snap: Any) -> Change:
        return Change(summary=f"leak refusal: {source} holds {rows} row(s) of a sealed test content",
                      writes={leak_refusal_path(key): json.dumps(body, indent=2, sort_keys=True).encode() + b"\n"},
                      trailers={"Monte-Event": LEAK_EVENT})

    store.append(ledger_ref(experiment), build)


def _leak_records(store: Store) -> Iterator[dict[str, Any]]:
    """Every leak refusal recorded: on each experiment's ledger (and the bucket mirrors of
    experiments this repository does not hold), and in the common git directory's older log."""
    from monte.ledger.store import Snapshot
    from monte.ledger.views import LEAKS

    for ref in _ledger_refs(store):
        snap = Snapshot(store.repo, store.tip(ref))
        for fan in snap.listdir(LEAKS):
            for name in snap.listdir(f"{LEAKS}/{fan}"):
                try:
                    doc = json.loads(snap.read(f"{LEAKS}/{fan}/{name}") or b"")
                except ValueError:
                    continue
                if isinstance(doc, dict):
                    yield doc
    yield from log_records(_leak_log(store))


def _ledger_refs(store: Store) -> list[str]:
    """Each experiment's ledger ref, or its bucket mirror where this repository holds no ledger of it."""
    refs = {name: ledger_ref(name) for name in experiment_names(store)}
    for ref in store.refs_under(MIRROR + "/"):
        name = ref[len(MIRROR) + 1:-len("/ledger")] if ref.endswith("/ledger") else ""
        if name and name not in refs:
            refs[name] = ref
    return [r for r in refs.values() if store.tip(r) is not None]


def leak_refusals(store: Store, split_sha256: str, content: str = "") -> int:
    """How many leak refusals this repository counted against a test content (by its split's
    sha256, or its content key), whichever ledger recorded them."""
    return sum(1 for doc in _leak_records(store)
               if doc.get("split_sha256") == split_sha256 or (content and doc.get("content") == content))


def overlap_note(seal: Seal, touches: Iterable[RunRow]) -> str:
    """How the reads of another test split were found to be this exam, for the refusal."""
    notes = [f"{t.experiment}/{t.run} read {t.exam!r}, {seal.why[t.run]}" for t in touches if t.run in seal.why]
    if not notes:
        return ""
    return (f"; another test split is this exam for the seal ({'; '.join(notes)}: a split sharing "
            f"{SHARED_SHARE:.0%} of either side's items, or {SHARED_ITEMS} items, with a read content is a "
            "read of it)")
