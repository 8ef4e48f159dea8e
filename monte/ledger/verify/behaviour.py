"""Rule ``behaviour``: a base model recorded as a new cohort behaves as no model recorded before it.

The CLI takes a candidate base's behavioural fingerprint (``monte.models.fingerprint``) and
refuses one within :data:`~monte.ledger.verify.behaviour.THRESHOLD` of a recorded checkpoint,
and makes one within it of a recorded base that base's cohort (``monte.ledger.lineage.identify_base``).
A base commit written by hand, or by a monte that skipped the check, would take a fresh seal for a
checkpoint renamed, permuted or noised. Verify re-derives the rule from what the commits record:
the fingerprints in ``base.json`` and ``checkpoint.json``, compared by
:func:`monte.models.fingerprint.distance` (pure Python: no torch, nothing recomputed), so the
light install, ``pre-push`` and ``pre-receive`` judge it too.

A base commit is judged against every checkpoint of another cohort (its own cohort's
checkpoints are its descendants) and every base of other weights recorded before it (a base
sharing its weights is its cohort; of two bases that behave alike, the later by commit time,
then commit id, is named). Base commits without a fingerprint (written
before fingerprints, or of a model transformers could not load) are known by their bytes alone.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from dulwich.objects import ObjectID

from monte.ledger.lineage import lineage_checkpoints
from monte.ledger.refs import PREFIX
from monte.ledger.store import Snapshot, Store
from monte.ledger.verify.model import Violation
from monte.models.fingerprint import THRESHOLD, distance

BEHAVIOUR_FIX = ("a base model that behaves as a model recorded before it is that model: evaluate the checkpoint "
                 "itself (`monte eval --checkpoint EXP/RUN@STEP`) or the recorded base's cohort; find who wrote "
                 "this base commit (`git show COMMIT`) and report its test reads with the cohort it copies; see "
                 "docs/reliability.md, the behavioural fingerprint")


@dataclass(frozen=True)
class _Recorded:
    kind: str  # "base" or "checkpoint"
    name: str  # how the message names it
    cohort: str
    weights: str
    time: int
    commit: str
    fingerprint: dict[str, Any]


def _json(store: Store, sha: ObjectID, path: str) -> dict[str, Any] | None:
    try:
        raw = Snapshot(store.repo, sha).read(path)
        out = json.loads(raw) if raw is not None else None
    except (KeyError, ValueError):
        return None
    return out if isinstance(out, dict) else None


def _recorded(store: Store, judged: set[str] | None) -> tuple[list[_Recorded], list[_Recorded], dict[str, str]]:
    """Every base commit and every checkpoint commit that records a fingerprint, and every
    cohort's base weights; the checkpoints only where a base of ``judged`` (None: any) has one."""
    weights_of: dict[str, str] = {}
    bases: list[_Recorded] = []
    checkpoints: list[_Recorded] = []
    for ref, tip in sorted(store.refs_under(PREFIX).items()):
        head, sep, cohort = ref[len(PREFIX):].rpartition("/base/")
        if sep and head and "/" not in cohort:
            base = _json(store, tip, "base.json")
            fp = base.get("fingerprint") if base else None
            if base is not None and base.get("weights"):
                weights_of[cohort] = str(base["weights"])
            if base is not None and isinstance(fp, dict):
                bases.append(_Recorded("base", f"base model of cohort {head}/{cohort}", cohort,
                                       str(base.get("weights") or ""), store.repo[tip].commit_time,  # type: ignore[attr-defined]
                                       tip.decode()[:12], fp))
    if not any(judged is None or b.cohort in judged for b in bases):
        return bases, checkpoints, weights_of  # no base to judge: the lineage is not walked
    for sha, time, info in lineage_checkpoints(store):
        fp = info.get("fingerprint")
        if isinstance(fp, dict):
            checkpoints.append(_Recorded(
                "checkpoint", f"checkpoint {info.get('experiment')}/{info.get('run')}@{info.get('step')}",
                str(info.get("cohort") or ""), "", time, sha.decode()[:12], fp))
    return bases, checkpoints, weights_of


def behaviour_violations(store: Store, *, cohorts: Iterable[str] | None = None) -> list[tuple[str, Violation]]:
    """Rule ``behaviour`` (module docstring): (experiment, violation) per base commit that behaves,
    within :data:`THRESHOLD`, as a checkpoint of another cohort or a base of other weights recorded
    before it. ``cohorts``: judge only the base commits of these cohorts (a push's new base refs)."""
    only = set(cohorts) if cohorts is not None else None
    bases, checkpoints, weights_of = _recorded(store, only)
    out: list[tuple[str, Violation]] = []
    # (weights_of: a checkpoint trained from the same weights in another experiment, under an
    # older cohort id, is still of this base's line)
    for b in bases:
        if only is not None and b.cohort not in only:
            continue
        # any checkpoint of another cohort (a forger sets commit times: none is trusted here), and
        # of two bases that behave alike the later one (ties by commit id: exactly one is named)
        earlier = [c for c in checkpoints if c.cohort != b.cohort and weights_of.get(c.cohort) != b.weights]
        earlier += [o for o in bases if o.weights != b.weights and o.cohort != b.cohort
                    and (o.time, o.commit) < (b.time, b.commit)]
        near: tuple[float, _Recorded] | None = None
        for other in earlier:
            d = distance(other.fingerprint, b.fingerprint)
            if d is not None and d <= THRESHOLD and (near is None or d < near[0]):
                near = (d, other)
        if near is not None:
            d, other = near
            experiment = b.name.split(" ")[-1].split("/")[0]
            what = ("a checkpoint is never a base model" if other.kind == "checkpoint"
                    else "it is that base's cohort, and shares its seal")
            out.append((experiment, Violation(
                b.commit, "behaviour",
                f"the {b.name} behaves as {other.name} (commit {other.commit}): behavioural "
                f"distance {d:.4f}, within {THRESHOLD}, by the fingerprints both commits record; {what}",
                BEHAVIOUR_FIX)))
    return out
