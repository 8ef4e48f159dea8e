"""The search a status shows (the search verdict, docs/statistics.md): per cohort and dev exam, how many distinct checkpoints
were dev-evaluated against the baseline (K), and the best (or nominated) one judged as the best
of K (:func:`monte.stats.search.judge`). Pure: from what :func:`monte.status.fold.fold` gathered."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from monte.stats.printing import format_bound, format_interval

__all__ = ["search_line", "search_section"]


def search_section(first: Mapping[tuple[str, int, str], Any], nominations: Mapping[str, str],
                   memo: dict[Any, Any] | None = None) -> list[dict[str, Any]]:
    """One entry per (cohort, dev exam): ``cohort``, ``exam``, ``split`` and the search verdict's
    fields (:class:`monte.stats.search.Search`). ``first``: each checkpoint's first admissible dev
    eval, ``(checkpoint run, step, exam) -> (eval run, seq, delta line)``, as the fold keeps it;
    a checkpoint whose first dev eval has no delta (no baseline) is no try. ``memo``: the status's
    kept figures, where each search test's cutoff is kept (:func:`monte.stats.search.cutoff_memo`)."""
    from monte.stats.search import Candidate, cutoff_memo, judge_chosen

    # (a plain tuple a try: a status of 10,000 runs holds ~900 of them; one becomes a Candidate)
    groups: dict[tuple[str, str], list[tuple[float, int, int, str, Mapping[str, Any]]]] = {}
    for (trun, tstep, exam), (_run, seq, delta) in first.items():
        if not delta or delta.get("delta") is None:
            continue
        key = (str(delta.get("cohort") or "-"), exam)
        groups.setdefault(key, []).append((float(delta["delta"]), int(tstep), seq, f"{trun}@{tstep}", delta))
    out = []
    for (cohort, exam), tried in sorted(groups.items()):
        nominated = nominations.get(cohort)
        pick = next((t for t in tried if t[3] == nominated), None) if nominated else None
        chosen = "nominated" if pick is not None else "best"
        if pick is None:  # as the claim's rule picks: the highest delta, then the later step, then eval
            pick = max(tried, key=lambda t: t[:3])
        cand = Candidate.of(pick[3], pick[4], pick[1])
        cutoff_memo(cand.n, len(tried), memo)
        out.append({"cohort": cohort, "exam": exam, "split": "dev", **judge_chosen(cand, len(tried), chosen).record()})
    return out


def search_line(s: Mapping[str, Any]) -> str:
    """The human status's line of one search: K beside the chosen delta and both verdicts."""
    head = (f"search {s['exam']}/dev (cohort {s['cohort']}): K {s['k']} checkpoint(s) tried; "
            f"{s['chosen']} {s['checkpoint']} {s['delta']:+.4f} per cycle {s['verdict'] or 'unjudged'}")
    if s["k"] == 1:
        return head + "; as the best of 1: the same"
    if s["search_verdict"] is None:
        return head + f"; as the best of {s['k']}: {s['why']}"
    return (head + f"; as the best of {s['k']}: {s['search_verdict']} {format_interval(s['lower'], s['upper'])}, "
            f"adjusted estimate {format_bound(s['estimate'])}")
