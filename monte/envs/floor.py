"""The constant-answer floor of an exam: what a model scores that always gives one answer.

A checkpoint that only learned the most common answer beats an untrained base (which scores 0) by
a wide, "significant" margin without learning the task: beating a base that scores nothing is not
learning. The floor is the best such score: each of the exam's most frequent reference
answers is graded, by the exam's own grader, as the output for every item, and the best mean
wins. For exact-match graders this is the most frequent answer's share; for graded environments it
is the best single output among a few cheap candidates. Computed at freeze time and stored in the
manifest (``floors``); ``monte status`` and ``monte eval`` print it and flag a checkpoint at or
below it.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from monte.envs.base import Benchmark, Item
from monte.errors import MonteError
from monte.ledger.vault_ref import Vault
from monte.manifest import Floor, read_manifest
from monte.workspace import Workspace

#: How many of the most frequent reference answers are graded as constant outputs.
CANDIDATES = 5


def constant_floor(bench: Benchmark, items: Sequence[Item], candidates: int = CANDIDATES) -> Floor | None:
    """The best mean score of one constant output over ``items``, graded by ``bench``; ``None``
    for an empty split. Candidates: the ``candidates`` most frequent reference answers (ties by
    text); the most frequent wins a tie in score."""
    if not items:
        return None
    counts = Counter(str(item.get("answer", "")) for item in items)
    ranked = sorted(counts, key=lambda a: (-counts[a], a))[:candidates]
    best: Floor | None = None
    for answer in ranked:
        score = sum(_grade(bench, item, answer) for item in items) / len(items)
        if best is None or score > best.score:
            best = Floor(score=score, answer=answer, n=len(items), candidates=len(ranked))
    return best


def _grade(bench: Benchmark, item: Item, answer: str) -> float:
    try:
        return min(1.0, max(0.0, float(bench.grade(item, answer))))
    except Exception:  # a grader that chokes on a constant answer scores it 0, as a wrong answer
        return 0.0


def exam_floors(ws: Workspace, environment: str) -> dict[str, dict[str, Floor]]:
    """exam -> split -> floor, as frozen with ``environment``: from the vault ref, else from the
    data root's manifest; empty when neither records floors (a freeze older than them)."""
    try:
        m = Vault(ws.store).get("environment", environment)
        if m is None or not m.floors:
            folder = ws.env_dir(environment)
            m = read_manifest(folder) if folder.is_dir() else None
    except (MonteError, OSError):  # the floors are advice: an unreadable manifest is reported elsewhere
        return {}
    return dict(m.floors) if m is not None else {}
