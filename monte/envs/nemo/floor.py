"""The constant-answer floor of a NeMo Gym exam (:mod:`monte.envs.floor` is the catalog's).

What a model scores that always gives one answer, graded by the exam's own resources server at
freeze time, through the same ``/verify`` path an eval's answers take
(:meth:`monte.envs.nemo.server.GymServer.verify_many`; the score is the mean ``reward``).

- **Candidates.** The rows' reference answer is the first of :data:`REFERENCE_FIELDS` every row
  holds as a non-empty string or number (``expected_answer`` for mcqa and math_with_judge,
  ``answer`` for reasoning_gym, ``expected_judgement`` for math_proof_judgement). Its
  :data:`CANDIDATES` most frequent values (ties by text) are the constant answers graded.
- **How a constant is written.** Servers extract the answer from different forms (mcqa wants
  ``\\boxed{X}``, reasoning_gym ``<answer>X</answer>``). Each of :data:`FORMS` is tried on up to
  :data:`PROBE` rows with the row's own reference answer; the form the server credits most
  (ties: the first) writes every candidate. A server that credits none of them gets no floor.
- **Cost.** ``len(FORMS) * PROBE`` probes plus ``CANDIDATES * n`` verifies per split, in two
  batches, on one server per exam.
- **No floor, said so.** Rows with no reference answer, or a server whose ``/verify`` calls a
  judge model (not running at freeze time): no floor is recorded, and the reason is (in the
  manifest's ``provenance.floor``, and in ``env add``'s output). Never a made-up one.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

from monte.envs.floor import CANDIDATES
from monte.manifest import Floor

#: Where a NeMo Gym row keeps its reference answer, in the order they are looked for.
REFERENCE_FIELDS = ("expected_answer", "answer", "expected_judgement", "ground_truth", "expected_result")
#: How a constant answer is written for the server to extract it: bare, boxed, in answer tags.
FORMS = ("{a}", "\\boxed{{{a}}}", "<answer>{a}</answer>")
#: Rows the forms are tried on, each with its own reference answer.
PROBE = 8


def _scalar(v: object) -> str | None:
    if isinstance(v, bool) or not isinstance(v, str | int | float):
        return None
    s = str(v)
    return s if s.strip() else None


def reference_field(rows: Sequence[dict[str, Any]]) -> str | None:
    """The field every row keeps its reference answer in (``None``: the rows carry none)."""
    for f in REFERENCE_FIELDS:
        if rows and all(_scalar(r.get(f)) is not None for r in rows):
            return f
    return None


def candidates(rows: Sequence[dict[str, Any]], field: str, k: int = CANDIDATES) -> list[str]:
    """The ``k`` most frequent reference answers (ties by text)."""
    counts = Counter(str(r[field]) for r in rows)
    return sorted(counts, key=lambda a: (-counts[a], a))[:k]


def why_none(rows: Sequence[dict[str, Any]], judge: Sequence[str]) -> str | None:
    """Why this split gets no floor, before any server runs (``None``: it can have one)."""
    if not rows:
        return "the split is empty"
    if judge:
        return (f"its server's /verify calls a judge model ({', '.join(judge)}), which does not run at freeze "
                "time: a constant answer cannot be graded")
    if reference_field(rows) is None:
        return (f"its rows carry no reference answer (none of {', '.join(REFERENCE_FIELDS)} in every row): "
                "no constant answer to grade")
    return None


def gym_floor(server: Any, rows: Sequence[dict[str, Any]]) -> tuple[Floor | None, dict[str, Any]]:
    """The best mean reward of one constant output over ``rows``, graded by ``server``; and what
    the record says of it (the field, the form, or why there is none)."""
    field = reference_field(rows)
    assert field is not None
    probe = list(rows[:PROBE])
    texts = [form.format(a=str(r[field])) for form in FORMS for r in probe]
    replies = server.verify_many(probe * len(FORMS), texts, ids=[f"floor-probe/{i}" for i in range(len(texts))])
    credit = [sum(float(x["reward"]) for x in replies[i * len(probe):(i + 1) * len(probe)]) for i in range(len(FORMS))]
    best_form = max(range(len(FORMS)), key=lambda i: (credit[i], -i))
    note: dict[str, Any] = {"field": field, "forms": {FORMS[i]: credit[i] for i in range(len(FORMS))},
                            "probe_rows": len(probe)}
    if credit[best_form] <= 0:
        note["none"] = ("the server credits none of the forms a constant is written in, even with each row's own "
                        "reference answer: no constant answer it would grade")
        return None, note
    form = FORMS[best_form]
    ranked = [form.format(a=a) for a in candidates(rows, field)]
    n = len(rows)
    replies = server.verify_many(list(rows) * len(ranked), [t for t in ranked for _ in range(n)],
                                 ids=[f"floor/{i}" for i in range(n * len(ranked))])
    best: Floor | None = None
    for c, text in enumerate(ranked):
        score = sum(float(x["reward"]) for x in replies[c * n:(c + 1) * n]) / n
        if best is None or score > best.score:
            best = Floor(score=score, answer=text, n=n, candidates=len(ranked))
    note["form"] = form
    return best, note
