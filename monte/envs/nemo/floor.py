"""The constant-answer floor of a NeMo Gym exam (:mod:`monte.envs.floor` is the catalog's).

What a model scores that always gives one answer, graded by the exam's own resources server at
freeze time, through the same ``/verify`` path an eval's answers take
(:meth:`monte.envs.nemo.server.GymServer.verify_many`; the score is the mean ``reward``).

- **Candidates.** The rows' reference answer is the first of :data:`REFERENCE_FIELDS` every row
  holds as a non-empty string or number (``expected_answer`` for mcqa and math_with_judge,
  ``answer`` for reasoning_gym, ``expected_judgement`` for math_proof_judgement). Its
  :data:`CANDIDATES` most frequent values (ties by text) are the constant answers graded.
- **How a constant is written.** Servers extract the answer from different forms (mcqa wants
  ``\\boxed{X}``, reasoning_gym ``<answer>X</answer>``). :data:`FORMS` are tried in order on up to
  :data:`PROBE` rows with the row's own reference answer, until one is credited on all of them;
  the form the server credits most (ties: the first) writes every candidate. A server that
  credits none of them gets no floor.
- **Cost.** At most ``len(FORMS) * PROBE`` probes plus ``CANDIDATES * n`` verifies per split, in
  batches, on one server per exam.
- **No floor, said so.** Rows with no reference answer, or a server whose ``/verify`` calls a
  judge model (not running at freeze time): no floor is recorded, and the reason is (in the
  manifest's ``provenance.floor``, and in ``env add``'s output). Never a made-up one.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

from monte.manifest import Floor

#: Where a NeMo Gym row keeps its reference answer, in the order they are looked for.
REFERENCE_FIELDS = ("expected_answer", "answer", "expected_judgement", "ground_truth", "expected_result")
#: How a constant answer is written for the server to extract it: bare, boxed, in answer tags.
FORMS = ("{a}", "\\boxed{{{a}}}", "<answer>{a}</answer>")
#: Rows the forms are tried on, each with its own reference answer.
PROBE = 4
#: How many of the most frequent reference answers are graded as constant outputs: fewer than the
#: catalog's 5 (:data:`monte.envs.floor.CANDIDATES`), as each is a server round trip per item (and
#: math_with_judge forks a process per verify).
CANDIDATES = 3


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


def gym_floor(server: Any, rows: Sequence[dict[str, Any]], k: int = CANDIDATES) -> tuple[Floor | None, dict[str, Any]]:
    """The best mean reward of one constant output over ``rows``, graded by ``server``; and what
    the record says of it (the field, the form, or why there is none)."""
    field = reference_field(rows)
    assert field is not None
    probe = list(rows[:PROBE])
    credit: list[float] = []
    for form in FORMS:  # in order, until one is credited on every probe row
        replies = server.verify_many(probe, [form.format(a=str(r[field])) for r in probe],
                                     ids=[f"floor-probe/{form}/{i}" for i in range(len(probe))])
        credit.append(sum(float(x["reward"]) for x in replies))
        if credit[-1] >= len(probe):
            break
    best_form = max(range(len(credit)), key=lambda i: (credit[i], -i))
    note: dict[str, Any] = {"field": field, "forms": {FORMS[i]: credit[i] for i in range(len(credit))},
                            "probe_rows": len(probe)}
    if credit[best_form] <= 0:
        note["none"] = ("the server credits none of the forms a constant is written in, even with each row's own "
                        "reference answer: no constant answer it would grade")
        return None, note
    form = FORMS[best_form]
    ranked = [form.format(a=a) for a in candidates(rows, field, k)]
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
