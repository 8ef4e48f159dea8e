"""The facts ``monte status`` derives from one row (:func:`row_fact`, cached per fan-out index by
:mod:`monte.ledger.derived`), and how a row and a delta print (:func:`table_line`,
:func:`delta_head`). Pure: no I/O."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from monte.ledger.predicates import is_test_read_dict
from monte.ledger.rules import LIVE
from monte.ledger.views import ROW_FIELDS, with_row_defaults

#: The facts :func:`row_fact` derives from one row, by position (a tuple: 10,000 of them are
#: cached and loaded per status call, see :mod:`monte.ledger.derived`).
(SEQ, RUN, KIND, STATUS, COHORT, BASE_MODEL, EXAM, SPLIT, STEP, SMOKE, SCORE, N, ROLE, CREATED, TKIND, TRUN,
 TSTEP, WHAT, DELTA, WHO, FULL, RECOVERED, JSON_ROW, TABLE_LINE, DELTA_HEAD) = range(25)
#: Bump when :func:`row_fact` changes the shape of its facts. The cache's key also carries the
#: digest of the whole installed package (:func:`monte.codekey.code_digest`), so an edit anywhere
#: the facts reach (a helper in stats/, a rule) derives them again.
FACTS_VERSION = "status-facts 4"


def facts_version() -> str:
    """:data:`FACTS_VERSION`, the digest of the code that runs, and what derived them: the facts
    hold each row already serialized by orjson (:func:`dump_row`) where it is installed and
    nothing where it is not (the light install), so a cache the other install wrote is another
    version's, derived again, never an entry verify calls forged."""
    from importlib.util import find_spec

    from monte.codekey import code_digest

    return f"{FACTS_VERSION} {code_digest()[:16]} {'orjson' if find_spec('orjson') else 'json'}"


def row_fact(r: Mapping[str, Any]) -> tuple[Any, ...]:
    """The facts ``monte status`` reads of one row (as its fan-out index holds it): its output
    line's fields, what the aggregates need (cohort, exam, split, target, delta), who runs it
    (a started/running row, for the liveness probe), the whole row for the few that need it
    (training rows for the lineage, test reads for the seal's disclosure), and the output row
    already serialized (compact, sorted keys, as the compact status JSON writes it), its table
    line and its delta line (as the human status prints them)."""
    if not r.keys() >= ROW_FIELDS:
        r = with_row_defaults(dict(r))
    plan = r["plan"] or {}
    kind, status, smoke = r["kind"], r["status"], bool(r["smoke"])
    t = plan.get("target") or {}
    if kind == "eval":
        what = f"{r['exam']}/{r['split']}"
    else:
        what = f"{(plan.get('recipe') or {}).get('algorithm', '?')}:{plan.get('source', '?')}"
    full = kind == "train" or is_test_read_dict(r)
    tkind = t.get("kind")
    # the delta line as status lists it (its target, then the recorded delta's own fields)
    delta = {"run": r["run"], "cohort": r["cohort"], "exam": r["exam"], "split": r["split"],
             "target": target_of(tkind, t.get("run"), t.get("step")), "role": r["role"],
             **r["delta"]} if r["delta"] and kind == "eval" else None
    fact = (r["seq"], r["run"], kind, status, r["cohort"], plan.get("base_model", ""), r["exam"], r["split"],
            r["step"], smoke, r["score"], r["n"], r["role"], r["created_at"], tkind, t.get("run"),
            t.get("step"), what, delta,
            (r["host"], r["pid"], r["proc_start"]) if status in LIVE else None,
            dict(r) if full else None,
            # finished by `monte recover` from a kept result, not by the process that generated it
            r.get("recovered") is True)
    out = out_row(fact, status)
    return (*fact, dump_row(out), table_line(out), delta_head(delta) if delta is not None else None)


def status_text(row: Mapping[str, Any]) -> str:
    """A status row's status as the table shows it: with ``smoke``, the test read's role and
    ``recovered`` (recorded by ``monte recover`` from a kept result)."""
    return (str(row["status"]) + (" smoke" if row["smoke"] else "") + (f" {row['role']}" if row["role"] else "")
            + (" recovered" if row.get("recovered") else ""))


def table_line(row: Mapping[str, Any]) -> str:
    """A status row as the runs table's tab-separated line (off a terminal): run, kind, what,
    target, status (with smoke and role), score, n."""
    score, n = row["score"], row["n"]
    return (f"{row['run']}\t{row['kind']}\t{row['what']}\t{row['target']}\t{status_text(row)}\t"
            f"{format(score, '.4f') if type(score) is float else '-' if score is None else score}\t"
            f"{'-' if n is None else n}")


def delta_head(d: Mapping[str, Any]) -> str:
    """A delta line as status prints it, up to its verdict (the floor's note follows it)."""
    from monte.stats.paired import format_interval

    kind = "paired" if d.get("paired") else f"unpaired ({d.get('method')})"
    fixed = d.get("fixed")
    counts = f", fixed {fixed}, broken {d['broken']}" if fixed is not None else ""
    if (d.get("samples") or 1) > 1:  # K samples per item (docs/statistics.md); K = 1 prints as it always did
        counts += (f", K {d['samples']}, effective n {d['effective_n']:.0f}, design effect {d['design_effect']:.2f}"
                   + "".join(f"; pass@{k} {p['delta']:+.4f} {format_interval(p['lower'], p['upper'])}"
                             for k, p in sorted((d.get("pass_at") or {}).items(), key=lambda kv: int(kv[0]))))
    lo, hi = d["lower"], d["upper"]
    # format_interval: a lower end above 0 never prints as 0 beside an ok (docs/statistics.md, "What is printed"); a bound
    # of at least 1e-4 prints as it is (the common case, inline: status formats ~10,000 of these)
    interval = (f"[{lo:+.4f}, {hi:+.4f}]" if abs(lo) >= 1e-4 and abs(hi) >= 1e-4
                else format_interval(lo, hi))
    return (f"delta {d['exam']}/{d['split']} {d['target']} vs base: {d['delta']:+.4f} {interval} {kind} "
            f"(n {d['n']}{counts})" + (f" {d['verdict']}" if d.get("verdict") else "")
            + (f"; {vs_parent(d['parent'])}" if d.get("parent") else ""))


def move_verdict(p: Mapping[str, Any]) -> str:
    """A cycle's delta against its parent, compactly: ``vs A@50 -0.1250 regression``."""
    word = "regression" if p.get("regression") else p.get("verdict") or "unjudged"
    return f"vs {p['checkpoint']} {p['delta']:+.4f} {word}"


def vs_parent(p: Mapping[str, Any]) -> str:
    """A checkpoint's delta against its parent checkpoint (the search verdict, docs/statistics.md), as status prints it."""
    from monte.stats.paired import format_interval

    return (f"vs parent {p['checkpoint']}: {p['delta']:+.4f} {format_interval(p['lower'], p['upper'])} "
            f"{p.get('verdict') or 'unjudged'}" + (" (a significant regression)" if p.get("regression") else ""))


def target_of(kind: str | None, run: Any, step: Any) -> str:
    """An eval's target as status names it: ``base``, or the checkpoint ``RUN@STEP``."""
    return "base" if kind == "base" else f"{run}@{step}"


def shown(f: tuple[Any, ...]) -> str:
    """A row's target as the table shows it: an eval's ``base`` or ``RUN@STEP``; a chunk's steps,
    ``12 -> 16`` (from its start to the step it trains to, while it runs too)."""
    if f[KIND] == "eval":
        return target_of(f[TKIND], f[TRUN], f[TSTEP])
    if f[SMOKE]:
        return "smoke"
    plan = (f[FULL] or {}).get("plan") or {}
    start, steps = plan.get("start_step"), plan.get("steps")
    if isinstance(start, int) and isinstance(steps, int):
        return f"{start} -> {start + steps}"
    return f"-> {f[STEP]}"


def out_row(f: tuple[Any, ...], status: str) -> dict[str, Any]:
    return {"run": f[RUN], "kind": f[KIND], "status": status, "what": f[WHAT], "target": shown(f),
            "step": f[STEP], "score": None if f[SMOKE] else f[SCORE], "n": f[N], "smoke": f[SMOKE],
            "role": f[ROLE], "cohort": f[COHORT], "created_at": f[CREATED], "recovered": f[RECOVERED]}


def dump_row(row: dict[str, Any]) -> bytes | None:
    """The row as the compact status JSON writes it (orjson, sorted keys), or None without orjson
    or for a row orjson refuses (then the document is written the slow way)."""
    try:
        import orjson
    except ImportError:  # pragma: no cover - depends on the environment
        return None
    try:
        out: bytes = orjson.dumps(row, option=orjson.OPT_SORT_KEYS)
    except (TypeError, ValueError):
        return None
    return out


def derive_facts(index: dict[str, Any]) -> list[Any]:
    return [row_fact(r) for r in index.values()]


def by_seq(f: tuple[Any, ...]) -> Any:
    return f[SEQ]

