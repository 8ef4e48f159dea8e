"""Verify before a test read is spent, and before a ref update lands (the store's compare-and-swap,
the hooks, push and sync): the records since the tip last verified, and the repository-wide seal.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path

from dulwich.objects import ObjectID

from monte.ledger.predicates import (
    is_test_read,
)
from monte.ledger.records import RunRow
from monte.ledger.refs import (
    PREFIX,
    VAULT_REF,
    ZERO,
    experiment_of_ledger,
    ledger_ref,
)
from monte.ledger.store import Store
from monte.ledger.tips import Ancestry
from monte.ledger.transaction import Proposed, proposed
from monte.ledger.verify.lineage import Verifier
from monte.ledger.verify.model import Violation
from monte.ledger.views import OWN_DIR


def experiments(store: Store) -> list[str]:
    """The experiments whose ledger ref exists, and those whose ledger monte remembers (a deleted
    ledger is a finding, not an experiment that never was)."""
    from monte.ledger.experiment import experiment_names

    remembered = (experiment_of_ledger(ref) for ref in store.tips.heads(PREFIX))
    return sorted(set(experiment_names(store)) | {n for n in remembered if n})

def verify_before_spend(store: Store) -> None:
    """Before a test read is spent: every ledger of the repository (each one a seal key may be
    counted in, and each one monte remembers, deleted or not) is verified from the tip this
    check last saw pass (:data:`VERIFIED`; the whole history the first time) to its tip now, and
    no ``refs/heads/monte/`` ref monte remembers (a ledger, a cohort's base, a lineage, the
    vault: as ``monte ledger verify`` checks them) was moved back or removed. A forged forward
    commit (a read's row deleted by hand) or a rewind refuses ``E_VERIFY`` here, before the
    ``started`` record, instead of letting the read be planned and counted on the forged count.
    Between two test reads a ledger has moved by the records made since: only those are walked."""
    from monte.errors import error

    v = Verifier(store)
    found: list[tuple[str, Violation]] = []
    verified = _verified(store)
    for x in v.rewound(PREFIX):  # a deleted base ref frees the seal key its cohort was counted under
        found.append((_experiment_of(x), x))
    for exp in experiments(store):
        ref = ledger_ref(exp)
        tip = store.tip(ref)
        if tip is None:
            continue
        known = verified.get(ref)
        if known == tip:
            continue
        since = known if known is not None and known in Ancestry(store.repo.object_store, tip) else None
        walk = v.verify(exp, tip=tip, since=since)
        found += [(exp, x) for x in walk]
        if not walk:
            _remember_verified(store, ref, tip)  # the next read walks only what came after
    if found:
        lines = "; ".join(f"{exp}: {x.commit} [{x.rule}] {x.message}" for exp, x in found[:10])
        fixes = [x.fix for _, x in found if x.fix]
        raise error("E_VERIFY", f"no test read is spent on a ledger that fails verify: {len(found)} violation(s): "
                    f"{lines}", fixes[0] if len(fixes) == len(found) else
                    "the ledger was written outside monte; run `monte ledger verify --all`, find who wrote these "
                    "commits (`git show COMMIT`) and restore the ref from a good copy",
                    details=[{"experiment": exp, **x.to_dict()} for exp, x in found])

def _experiment_of(x: Violation) -> str:
    """The experiment a rewind's message names (its ref ``refs/heads/monte/<exp>/...``), ``-``
    for the vault."""
    for word in x.message.split():
        if word.startswith(PREFIX) and word.count("/") >= 4:
            return word[len(PREFIX):].split("/")[0]
    return "-"

VERIFIED = f"{OWN_DIR}/verified.log"

def _line(store: Store, ref: str, tip: bytes, *, create: bool) -> bytes | None:
    """One :data:`VERIFIED` line, ``<ref> <sha> <mac>``, signed with the repository's key
    (:func:`monte.ledger.derived.mac`); None where no key can be read or made."""
    from monte.ledger.derived import mac

    body = b"%s %s" % (ref.encode(), tip)
    sig = mac(store.repo.commondir(), body, create=create)
    return None if sig is None else b"%s %s\n" % (body, sig.hex().encode())

def _verified(store: Store) -> dict[str, ObjectID]:
    """ref -> the newest tip :func:`verify_before_spend` saw pass (``<git dir>/monte/verified.log``,
    one ``<ref> <sha> <mac>`` line per pass). Not ``tips.log``: monte also logs there each tip it
    appended, and an append on top of a commit forged by hand does not make it verified. A line
    whose MAC under the repository's key does not hold (appended by hand, torn, or written before
    lines were signed) is not believed: that ledger is walked again from further back."""
    import hmac

    out: dict[str, ObjectID] = {}
    try:
        data = (Path(store.repo.commondir()) / VERIFIED).read_bytes()
    except OSError:
        return out
    for line in data.split(b"\n"):
        parts = line.split(b" ")
        if len(parts) != 3 or len(parts[1]) != 40:
            continue
        ref = parts[0].decode(errors="replace")
        expected = _line(store, ref, parts[1], create=False)
        if expected is not None and hmac.compare_digest(expected, line + b"\n"):
            out[ref] = ObjectID(parts[1])
    return out

def _remember_verified(store: Store, ref: str, tip: ObjectID) -> None:
    if isinstance(store, Proposed):
        return
    path = Path(store.repo.commondir()) / VERIFIED
    try:
        line = _line(store, ref, tip, create=True)
        if line is None:
            return  # no key this user can write: the next read verifies again
        if path.exists() and path.stat().st_size > 1 << 20:  # keep the newest line of each ref
            keep = b"".join(_line(store, r, sha, create=False) or b"" for r, sha in _verified(store).items())
            tmp = path.with_name(f"{path.name}.{os.getpid()}")
            tmp.write_bytes(keep)
            os.replace(tmp, path)
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, line)
        finally:
            os.close(fd)
    except OSError:
        pass  # a repository verify cannot write to: the next read verifies again

def verify_updates(store: Store, updates: Sequence[tuple[str, bytes, bytes]], *,
                   full: bool = False) -> list[tuple[str, Violation]]:
    """Check the ref updates of one transaction (a push: ``(ref, old, new)`` each) together:
    each is judged against the repository with all of them in place
    (:class:`~monte.ledger.transaction.Proposed`), so a ledger arriving with the vault, base and
    lineage refs it refers to passes in any order, and a forged record fails wherever it is.
    The test reads the pushed records add are counted with every other ledger's (rule ``seal``)."""
    ours = [u for u in updates if u[0].startswith(PREFIX)]
    view = proposed(store, ours)
    out: list[tuple[str, Violation]] = []
    wrote: dict[str, set[str]] = {}
    for ref, old, new in ours:
        runs: set[str] = set()
        out += [(ref, v) for v in verify_update(store, ref, old, new, full=full, view=view, wrote=runs)]
        if (exp := experiment_of_ledger(ref)) is not None and runs:
            wrote[exp] = runs
    if not out and wrote:
        out += [(ledger_ref(exp), v) for exp, v in seal_violations(view, new_runs=wrote)]
        out += grader_violations(store, view, wrote)
    based = {ref: ref.rpartition("/base/")[2] for ref, _, new in ours if "/base/" in ref and new != ZERO}
    if not out and based:  # a new cohort's base commit: it behaves as no model recorded before it
        from monte.ledger.verify.behaviour import behaviour_violations

        for ref, cohort in sorted(based.items()):
            out += [(ref, v) for _, v in behaviour_violations(view, cohorts={cohort})]
    return out


#: what a refused unsigned or forged test read tells the pusher (rule ``grader``)
GRADER_FIX = ("a test read is recorded only from the grader's signed result: find who wrote this row, restore the "
              "ledger ref from a good copy, then `monte recover EXP` fetches the signed result again")


def grader_violations(store: Store, view: Store, wrote: Mapping[str, set[str]]) -> list[tuple[str, Violation]]:
    """Rule ``grader`` over the rows a push brings: in a grader-pinned repository
    (:func:`monte.ledger.grader_statement.repository_pin`: a bare server's own ``git config
    monte.graderKey``, else the committed ``.monte.yaml``) each finished test read among them must
    carry the grader's statement, signed by the pinned key, saying exactly what its row records."""
    from monte.ledger.experiment import Ledger

    reads = {exp: {r.run for r in (Ledger(view, exp).row(run) for run in runs)
                   if r is not None and is_test_read(r) and r.status == "succeeded"}
             for exp, runs in wrote.items()}
    if not any(reads.values()):  # most pushes bring no finished test read: no pin is looked up
        return []
    from monte.ledger.grader_statement import ledger_violations, repository_pin

    key = repository_pin(store)
    if key is None:
        return []
    out = []
    for exp, run, why in ledger_violations(view, sorted(reads), key, only=reads):
        tip = view.tip(ledger_ref(exp))
        out.append((ledger_ref(exp), Violation(tip.decode()[:12] if tip else "-", "grader", f"run {run}: {why}",
                                               GRADER_FIX)))
    return out

def seal_violations(store: Store, *, new_runs: Mapping[str, set[str]] | None = None) -> list[tuple[str, Violation]]:
    """Rule ``seal`` over every ledger ``store`` sees (:func:`monte.ledger.seal.seal_breaks`):
    (experiment, violation) per break, named after the ledger of its newest read. ``new_runs``
    (experiment -> runs whose rows just landed: a push's): only the seal keys of the test reads
    among them are judged, and nothing is read when there are none."""
    from monte.ledger.experiment import Ledger
    from monte.ledger.seal import SEAL_FIX, Seal, seal_breaks

    seal = Seal(store)
    only: list[RunRow] | None = None
    if new_runs is not None:
        only = []
        for exp, runs in sorted(new_runs.items()):
            ledger = Ledger(store, exp)
            snap = store.snapshot(ledger_ref(exp))
            only += [r for r in (ledger.row(run, snap) for run in sorted(runs)) if r is not None and is_test_read(r)]
        if not only:
            return []
    out = []
    for b in seal_breaks(seal, only):
        last = b.rows[-1]
        tip = store.tip(b.where[-1])
        out.append((last.experiment, Violation(tip.decode()[:12] if tip else "-", "seal", b.message(), SEAL_FIX)))
    return out

def verify_update(store: Store, ref: str, old: bytes, new: bytes, *, full: bool = False,
                  view: Store | None = None, wrote: set[str] | None = None) -> list[Violation]:
    """Check one proposed ref update (from a git hook: ``old new ref``) before it happens.

    ``full``: verify the new tip's whole history (pre-push: the remote's old value may not be
    here, and the local ref already points at what is pushed); the remote's ``old`` must then be
    an ancestor of ``new`` (no force-push moves a monte ref back). Either way ``new`` must hold
    every tip of ``ref`` this repository remembers (rule ``rewound``). ``view``: the repository
    the records are judged in (:func:`verify_updates`: the other updates of the transaction in
    place); ``store`` is read for the ref's current value. ``wrote``: filled with the runs whose
    rows the new records wrote (a ledger's)."""
    if not ref.startswith(PREFIX):
        return []
    if new == ZERO:
        if old != ZERO and _packing(store, ref, ObjectID(old)):
            return []  # `git pack-refs` (run by `git gc`) removing the loose copy: the ref stays, packed
        return [Violation(old.decode()[:12], "append-only", f"{ref} would be deleted: monte refs are never removed")]
    if not full and _packed_under_loose(store, ref, new):
        return []  # `git pack-refs` writing a tip it read to packed-refs: the loose ref stays the ref
    out: list[Violation] = []
    if full:
        since = ZERO
        if old != ZERO:
            out += _fast_forward(store, ref, ObjectID(old), ObjectID(new))
            if not out and old != new:
                since = old  # what the remote already holds (and accepted): only the records after it
        old = since  # a first push (the remote holds no copy): the whole history
    elif old == ZERO:  # `git update-ref REF NEW` does not say the old value: read it
        current = store.tip(ref)
        old = current if current is not None else ZERO
    if old == new and not out:
        return []  # nothing moves (`git pack-refs` writing packed-refs, say)
    v = Verifier(view or store)
    out += _verify_tip(v, ref, ObjectID(new), None if old == ZERO else ObjectID(old))
    if wrote is not None:
        wrote |= v.wrote
    return out + v.rewound(ref, tips={ref: ObjectID(new)}, exact=True)

def _packing(store: Store, ref: str, old: ObjectID) -> bool:
    """Whether a deletion of ``ref`` is ``git pack-refs`` pruning its loose file: git has already
    written the same value to ``packed-refs`` (a real ``update-ref -d`` of a loose ref finds it
    unpacked; of a packed one, no loose file). The loose file may be gone already: a second
    pack-refs (``git gc`` beside a ``pack-refs``) pruned it first, and git prunes anyway; that
    prune is told apart from a real deletion of a packed ref by ``packed-refs.lock``, which the
    deletion holds and the prune does not."""
    from pathlib import Path

    from dulwich.refs import Ref

    name = Ref(ref.encode())
    try:
        if store.repo.refs.get_packed_refs().get(name) != old:
            return False
        loose = store.repo.refs.read_loose_ref(name)
        return loose == old or (loose is None and not (Path(store.repo.commondir()) / "packed-refs.lock").exists())
    except (OSError, ValueError):
        return False

def _packed_under_loose(store: Store, ref: str, new: bytes) -> bool:
    """Whether this update is ``git pack-refs`` writing ``packed-refs`` while a loose file of
    ``ref`` exists: git reads the loose file first, so the write moves nothing, whatever tip it
    packs. monte may have moved the loose ref on since pack-refs read it; the write then packs
    an older tip, which is not a rewind (and git prunes the loose file only while it still holds
    the packed value: :func:`_packing`). Told apart from a real update of the ref, which writes
    the new value into the ref's own ``.lock`` before the hook runs, by that lock and by
    ``packed-refs.lock``, which pack-refs holds."""
    from pathlib import Path

    git_dir = Path(store.repo.commondir())
    loose = git_dir / ref
    try:
        if (loose.parent / (loose.name + ".lock")).read_bytes().strip() == new:
            return False  # the ref's own update (git update-ref, fetch): judged as any other
    except OSError:
        pass
    return (git_dir / "packed-refs.lock").exists() and loose.is_file()

def _verify_tip(v: Verifier, ref: str, new: ObjectID, since: ObjectID | None) -> list[Violation]:
    parts = ref.split("/")
    if ref == VAULT_REF:
        return v.verify_vault(tip=new, since=since)
    if len(parts) == 5 and parts[4] == "ledger":
        return v.verify(parts[3], tip=new, since=since)
    if len(parts) == 6 and parts[4] == "lineage":
        return v.verify_lineage(parts[3], parts[5], tip=new, since=since)
    if len(parts) == 6 and parts[4] == "base":
        if since is not None:
            return [Violation(new.decode()[:12], "append-only",
                              f"{ref} would move: a cohort's base commit is written once")]
        return []
    return [Violation(new.decode()[:12], "well-formed", f"{ref} is not a ref monte writes")]

PUSH_FIX = ("fetch the remote's records and let them in first (`git fetch REMOTE`, then `git update-ref REF SHA` "
            "when this ledger is behind; two ledgers that diverged are merged by monte through the results bucket: "
            "`monte push`, `monte sync`), then push again; never force-push a monte ref")

def _fast_forward(store: Store, ref: str, remote: ObjectID, new: ObjectID) -> list[Violation]:
    """pre-push: the remote's ``ref`` is at ``remote``; pushing ``new`` must not move it back."""
    if remote == new:
        return []
    if remote not in store.repo.object_store:
        why = f"which this repository does not have: the remote holds records this {ref} lacks"
    elif remote not in Ancestry(store.repo.object_store, new):
        why = f"which is not an ancestor of {new.decode()[:12]}: the push would move it back and lose records"
    else:
        return []
    return [Violation(remote.decode()[:12], "rewound", f"the remote's {ref} is at {remote.decode()[:12]}, {why}; "
                      + PUSH_FIX, PUSH_FIX)]
