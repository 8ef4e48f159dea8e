"""What ``monte status`` shows, computed from the rows at the ledger tip (pure; no torch, no walk).

- delta lines: every admissible eval that has a paired (or unpaired) delta against its cohort's
  baseline, with the 95% interval;
- ``lineage:`` lines, one per descent path, in the notation of docs/commands.md;
- ``cycles:``: the first admissible dev eval at a new highest step along each path, judged
  ``ok`` / ``STRIKE`` (paired) or unjudged (unpaired);
- the checkpoint list.
"""

from __future__ import annotations

import gc
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NamedTuple, cast

from monte.jsonl import RawJson
from monte.ledger.predicates import is_admissible, is_test_read_dict
from monte.ledger.rules import LIVE, Checkpoint, row_checkpoints
from monte.ledger.views import ROW_FIELDS, MeasurementLike, with_row_defaults
from monte.workspace import Workspace

if TYPE_CHECKING:  # annotations only: a status reads no model object (pydantic costs ~50 ms to import)
    from monte.ledger.derived import Fold, View
    from monte.ledger.experiment import Ledger
    from monte.ledger.records import RunRow
    from monte.ledger.store import Snapshot
    from monte.manifest import Floor

LEGEND = "(=move=> is a stage boundary: weights-only warm start, ADR 0002)"

#: how a live-looking row's process is judged: (recorded status, host, pid, process start) -> dead
Dead = Callable[[str, Any, Any, Any], bool]


@dataclass(frozen=True)
class Hop:
    run: str
    label: str
    start: int  # absolute step the hop started from
    end: int  # absolute step of the hop's last checkpoint on this path
    boundary: bool
    parent: tuple[str, int] | None


def _hops(cks: Sequence[Checkpoint]) -> dict[str, Hop]:
    by_run: dict[str, list[Checkpoint]] = {}
    for c in cks:
        by_run.setdefault(c.run, []).append(c)
    return {run: Hop(run, cs[0].label, cs[0].start_step, max(c.step for c in cs), cs[0].boundary, cs[0].parent)
            for run, cs in by_run.items()}


def descent_paths(cks: Sequence[Checkpoint]) -> list[list[Hop]]:
    """One path per leaf run (no run continues from its last checkpoint), root first."""
    hops = _hops(cks)
    continued = {h.parent for h in hops.values() if h.parent}
    leaves = [h for h in hops.values() if (h.run, h.end) not in continued]
    order = {c.run: c.seq for c in cks}
    paths = []
    for leaf in sorted(leaves, key=lambda h: order[h.run]):
        path = [leaf]
        seen = {leaf.run}
        while path[0].parent and path[0].parent[0] in hops and path[0].parent[0] not in seen:
            parent = hops[path[0].parent[0]]
            seen.add(parent.run)
            path.insert(0, parent)
        paths.append(path)
    return paths


def render_path(path: Sequence[Hop]) -> str:
    first = path[0]
    if first.parent is None:
        text, prev_end = "base", 0
    else:  # the parent row is not readable here: the path is truncated
        text, prev_end = f"{first.parent[0]}(unread)", first.start
    for hop in path:
        if hop.start != prev_end:
            text += f" from {hop.start}"
        if hop.boundary:
            text += f" ={hop.label}(+{hop.end - hop.start})=> {hop.end}"
        else:
            text += f" -{hop.label}-> {hop.end}"
        prev_end = hop.end
    return text


def by_run(cks: Sequence[Checkpoint]) -> dict[str, list[Checkpoint]]:
    """Checkpoints grouped by run, each run's in step order."""
    out: dict[str, list[Checkpoint]] = {}
    for c in sorted(cks, key=lambda c: c.step):
        out.setdefault(c.run, []).append(c)
    return out


def path_checkpoints(path: Sequence[Hop], runs: dict[str, list[Checkpoint]]) -> list[Checkpoint]:
    """The checkpoints a path passes through, in order (a hop's own, up to where the next hop forks)."""
    out: list[Checkpoint] = []
    for i, hop in enumerate(path):
        limit = path[i + 1].start if i + 1 < len(path) else hop.end
        out += [c for c in runs.get(hop.run, []) if c.step <= limit]
    return out


def first_dev_evals(rows: Sequence[RunRow]) -> dict[tuple[str, int, str], RunRow]:
    """The first admissible dev eval of each (checkpoint run, step, exam), in one pass."""
    first: dict[tuple[str, int, str], RunRow] = {}
    for r in rows:
        t = r.plan.get("target", {})
        if not (is_admissible(r) and r.split == "dev" and t.get("kind") == "checkpoint"):
            continue
        key = (str(t.get("run")), int(t.get("step", -1)), r.exam or "")
        if key not in first or r.seq < first[key].seq:
            first[key] = r
    return first


class Lines(NamedTuple):
    """What the human status prints of each row and each delta, already formatted (``table``):
    the runs table's lines, and each delta line up to its verdict, in ``deltas``' order."""

    rows: list[str]
    deltas: list[str]


class FirstEval(NamedTuple):
    """What a cycle reads of the first admissible dev eval of a checkpoint (a RunRow has these too)."""

    run: str
    seq: int
    delta: dict[str, Any] | None


def cycles(rows: Sequence[RunRow], cks: Sequence[Checkpoint], paths: Sequence[Sequence[Hop]],
           dev_exams: Sequence[str], *, first: Mapping[tuple[str, int, str], RunRow | FirstEval] | None = None,
           ) -> list[dict[str, Any]]:
    """A Cycle: the first admissible dev eval at a new highest step along one path. Keyed on the
    path, so two branches off one checkpoint each get their own; a shared prefix counts once.
    Linear in rows plus path lengths (``first``: :func:`first_dev_evals`, when already made)."""
    first = first_dev_evals(rows) if first is None else first
    runs = by_run(cks)
    out: dict[tuple[str, str], dict[str, Any]] = {}
    for path in paths:
        on_path = path_checkpoints(path, runs)
        for exam in dev_exams:
            highest = 0
            for ck in on_path:
                ev = first.get((ck.run, ck.step, exam))
                if ev is None or ck.step <= highest:
                    continue
                highest = ck.step
                d = ev.delta or {}
                verdict = d.get("verdict") if d.get("paired") else None
                out.setdefault((ck.ref, exam), {
                    "checkpoint": ck.ref, "exam": exam, "step": ck.step, "eval": ev.run,
                    "verdict": verdict or "unjudged", "delta": d.get("delta"),
                    "lower": d.get("lower"), "upper": d.get("upper"), "seq": ev.seq})
    return sorted(out.values(), key=lambda c: c["seq"])


#: The facts :func:`row_fact` derives from one row, by position (a tuple: 10,000 of them are
#: cached and loaded per status call, see :mod:`monte.ledger.derived`).
(SEQ, RUN, KIND, STATUS, COHORT, BASE_MODEL, EXAM, SPLIT, STEP, SMOKE, SCORE, N, ROLE, CREATED, TKIND, TRUN,
 TSTEP, WHAT, DELTA, WHO, FULL, JSON_ROW, TABLE_LINE, DELTA_HEAD) = range(24)
#: Bump when :func:`row_fact` changes: a cache of facts another version derived is derived again.
#: The cache's key also carries a digest of this file and of the row fields' module
#: (:func:`facts_version`), so an edit that forgets the bump cannot serve facts of another code.
FACTS_VERSION = "status-facts 2"


def facts_version() -> str:
    """:data:`FACTS_VERSION`, a digest of the code that derives the facts, and what derived them:
    the facts hold each row already serialized by orjson (:func:`_dump_row`) where it is
    installed and nothing where it is not (the light install), so a cache the other install
    wrote is another version's, derived again, never an entry verify calls forged."""
    import hashlib
    from importlib.util import find_spec
    from pathlib import Path

    from monte.ledger import views

    h = hashlib.sha256()
    for path in (__file__, views.__file__):
        h.update(Path(path).read_bytes())
    return f"{FACTS_VERSION} {h.hexdigest()[:16]} {'orjson' if find_spec('orjson') else 'json'}"


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
             "target": _target(tkind, t.get("run"), t.get("step")), "role": r["role"],
             **r["delta"]} if r["delta"] and kind == "eval" else None
    fact = (r["seq"], r["run"], kind, status, r["cohort"], plan.get("base_model", ""), r["exam"], r["split"],
            r["step"], smoke, r["score"], r["n"], r["role"], r["created_at"], tkind, t.get("run"),
            t.get("step"), what, delta,
            (r["host"], r["pid"], r["proc_start"]) if status in LIVE else None,
            dict(r) if full else None)
    out = _out_row(fact, status)
    return (*fact, _dump_row(out), table_line(out), delta_head(delta) if delta is not None else None)


def status_text(row: Mapping[str, Any]) -> str:
    """A status row's status as the table shows it: with ``smoke`` and the test read's role."""
    return str(row["status"]) + (" smoke" if row["smoke"] else "") + (f" {row['role']}" if row["role"] else "")


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
    if (d.get("samples") or 1) > 1:  # K samples per item (issue 33); K = 1 prints as it always did
        counts += (f", K {d['samples']}, effective n {d['effective_n']:.0f}, design effect {d['design_effect']:.2f}"
                   + "".join(f"; pass@{k} {p['delta']:+.4f} {format_interval(p['lower'], p['upper'])}"
                             for k, p in sorted((d.get("pass_at") or {}).items(), key=lambda kv: int(kv[0]))))
    lo, hi = d["lower"], d["upper"]
    # format_interval: a lower end above 0 never prints as 0 beside an ok (issue 18); a bound
    # of at least 1e-4 prints as it is (the common case, inline: status formats ~10,000 of these)
    interval = (f"[{lo:+.4f}, {hi:+.4f}]" if abs(lo) >= 1e-4 and abs(hi) >= 1e-4
                else format_interval(lo, hi))
    return (f"delta {d['exam']}/{d['split']} {d['target']} vs base: {d['delta']:+.4f} {interval} {kind} "
            f"(n {d['n']}{counts})" + (f" {d['verdict']}" if d.get("verdict") else ""))


def _target(kind: str | None, run: Any, step: Any) -> str:
    """An eval's target as status names it: ``base``, or the checkpoint ``RUN@STEP``."""
    return "base" if kind == "base" else f"{run}@{step}"


def _shown(f: tuple[Any, ...]) -> str:
    if f[KIND] == "eval":
        return _target(f[TKIND], f[TRUN], f[TSTEP])
    return "smoke" if f[SMOKE] else f"-> {f[STEP]}"


def _out_row(f: tuple[Any, ...], status: str) -> dict[str, Any]:
    return {"run": f[RUN], "kind": f[KIND], "status": status, "what": f[WHAT], "target": _shown(f),
            "step": f[STEP], "score": None if f[SMOKE] else f[SCORE], "n": f[N], "smoke": f[SMOKE],
            "role": f[ROLE], "cohort": f[COHORT], "created_at": f[CREATED]}


def _dump_row(row: dict[str, Any]) -> bytes | None:
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


def from_facts(meas: MeasurementLike, facts: Sequence[tuple[Any, ...]], nominations: dict[str, str], *,
               json_rows: bool = False, table: bool = False, dead: Dead | None = None,
               judged: list[tuple[str, tuple[Any, ...], bool]] | None = None) -> dict[str, Any]:
    """The status document from the rows' facts (:func:`row_fact`, in record order). One pass
    gathers what every section needs, a few tuple and dict operations a row: the hot loop of
    ``monte status`` at 10,000 runs and more. No row becomes a model object except the training
    rows (for the lineage). A started/running row's process is probed (a dead one reads
    ``abandoned``). ``json_rows``: the rows as one already-serialized JSON array
    (:class:`monte.jsonl.RawJson`) for the compact output, when every row has its serialized form.
    ``table``: also ``"_table"``, the table's lines and the delta lines' heads already formatted
    (:class:`Lines`, for the human status; ``rows`` is then empty). ``dead``: how a live-looking
    row's process is judged (default :func:`monte.processes.is_dead_at`); ``judged`` gets each
    judgement, in record order (what a cached view of this status was made with)."""
    acc = new_fold(facts, json_rows=json_rows, table=table)
    fold(acc, facts, dead=dead)
    if judged is not None:
        judged.extend(acc["judged"])
    return finish(meas, acc, nominations)


def new_fold(facts: Sequence[tuple[Any, ...]], *, json_rows: bool = False, table: bool = False) -> dict[str, Any]:
    """What :func:`fold` gathers, empty: plain containers only (``marshal`` keeps them, see
    :class:`monte.ledger.derived.FoldCache`). ``facts``: the rows it will be given first (the
    compact rows are kept serialized when each has its serialized form)."""
    return {"table": table, "serialized": json_rows and all(f[JSON_ROW] is not None for f in facts),
            "max_seq": None, "judged": [], "deltas": [], "cohorts": {}, "dev_scores": {}, "first": {},
            "trains": [], "test_reads": [], "out_rows": [], "out_json": [], "scores": {}, "table_lines": [],
            "heads": [], "dev_summary": {}, "epoch": 0, "lineage": None}


def fold(acc: dict[str, Any], facts: Sequence[tuple[Any, ...]], *, dead: Dead | None = None) -> None:
    """Gather ``facts`` (in record order, each of a later record than any gathered before) into
    ``acc`` (:func:`new_fold`): the one pass :func:`from_facts` makes, which a kept fold
    continues with the rows appended since (:func:`experiment_status`)."""
    from monte.stats.power import add_to_summary, new_summary

    if dead is None:
        from monte.processes import is_dead_at

        dead = is_dead_at
    table, serialized = acc["table"], acc["serialized"]
    judged, deltas, cohorts, dev_scores, first = (acc["judged"], acc["deltas"], acc["cohorts"], acc["dev_scores"],
                                                  acc["first"])
    trains, test_reads, out_rows, out_json, scores = (acc["trains"], acc["test_reads"], acc["out_rows"],
                                                      acc["out_json"], acc["scores"])
    table_lines, heads, dev_summary = acc["table_lines"], acc["heads"], acc["dev_summary"]
    epoch = acc["epoch"]
    for f in facts:
        (seq, run, kind, recorded, cohort, base_model, exam, split, _step, smoke, score, n, role, _created,
         tkind, trun, tstep, _what, delta, who, full, row_json, line, head) = f
        status = recorded
        if who is not None:
            gone = dead(recorded, *who)
            judged.append((recorded, tuple(who), gone))
            if gone:
                status = "abandoned"
        if table:
            table_lines.append(line if status == recorded else table_line(_out_row(f, status)))
        elif not serialized:
            out_rows.append(_out_row(f, status))
        elif status == recorded:
            out_json.append(row_json)
        else:
            out_json.append(_dump_row(_out_row(f, status)) or b"null")
        if full is not None:
            if kind == "train":
                epoch += 1  # the lineage section is made again (:func:`lineage_section`)
            (trains if kind == "train" else test_reads).append(
                full if status == recorded else {**full, "status": status,
                                                 "error": "the process died without finishing"})
        c = cohorts.get(cohort or "-")
        if c is None:
            c = cohorts[cohort or "-"] = {"cohort": cohort, "model": base_model,
                                          "test_touches": {}, "baselines": {}}
        if kind != "eval" or smoke:
            continue
        if split == "test":
            c["test_touches"][exam] = c["test_touches"].get(exam, 0) + 1
        if status != "succeeded":
            continue
        if delta is not None:
            deltas.append(delta)
            if table:  # (the compact JSON prints no delta line)
                heads.append(head)
            scores[run] = score
            if split == "dev" and delta.get("paired"):  # what a test read of the exam can show
                summary = dev_summary.get(exam)
                if summary is None:
                    summary = dev_summary[exam] = new_summary()
                add_to_summary(summary, delta)
        if tkind == "base":
            key = f"{exam}/{split}"
            if key not in c["baselines"]:
                c["baselines"][key] = {"run": run, "score": score, "n": n}
        elif split == "dev" and tkind == "checkpoint":
            epoch += 1
            dev_scores.setdefault(_target(tkind, trun, tstep), {}).setdefault(exam or "", score)
            fkey = (str(trun), int(tstep if tstep is not None else -1), exam or "")
            if fkey not in first or seq < first[fkey][1]:
                first[fkey] = (run, seq, delta)  # the line holds the delta's fields
    if facts:
        acc["max_seq"] = facts[-1][SEQ]
    acc["epoch"] = epoch


def lineage_section(meas: MeasurementLike, acc: dict[str, Any]) -> dict[str, Any]:
    """The document's ``lineage``, ``legend``, ``cycles`` and ``checkpoints``, from the training
    rows and the first dev evals :func:`fold` gathered; kept in ``acc`` and made again only when
    a row that changes them was folded since (a training run, a checkpoint's dev eval: ``epoch``)
    or the measurement's dev exams differ."""
    dev_exams = sorted(e for e, x in meas.exams.items() if "dev" in x.splits)
    key = [acc["epoch"], dev_exams]
    kept = acc["lineage"]
    if kept is not None and kept[0] == key:
        section: dict[str, Any] = kept[1]
        return section
    cks = [c for r in acc["trains"] if not r["smoke"]
           for c in row_checkpoints(r["run"], r["seq"], r["cohort"], r["plan"], r["checkpoints"])]
    paths = descent_paths(cks)
    first = {k: FirstEval(*v) for k, v in acc["first"].items()}
    dev_scores = acc["dev_scores"]
    section = {
        "lineage": _lineage_lines(paths),
        "legend": LEGEND if any(h.boundary for p in paths for h in p) else None,
        "cycles": cycles([], cks, paths, dev_exams, first=first),
        "checkpoints": [{"checkpoint": c.ref, "cohort": c.cohort, "move": c.label, "recipe": c.recipe,
                         "parent": f"{c.parent[0]}@{c.parent[1]}" if c.parent else "base",
                         "boundary": c.boundary, "dev": dict(dev_scores.get(c.ref, {}))} for c in cks],
    }
    acc["lineage"] = [key, section]
    return section


def finish(meas: MeasurementLike, acc: dict[str, Any], nominations: dict[str, str]) -> dict[str, Any]:
    """The status document from what :func:`fold` gathered (its containers become the
    document's: ``acc`` is not used again)."""
    section = lineage_section(meas, acc)
    cohorts = acc["cohorts"]
    for cohort, ck in nominations.items():
        cohorts.setdefault(cohort, {"cohort": cohort})["nomination"] = ck
    rows_out: Any = RawJson(b"[" + b",".join(acc["out_json"]) + b"]") if acc["serialized"] else acc["out_rows"]
    return {
        "experiment": meas.experiment,
        "environment": meas.environment,
        "rows": rows_out,
        "cohorts": list(cohorts.values()),
        "deltas": acc["deltas"],
        **section,
        "_test_reads": acc["test_reads"],
        "_scores": acc["scores"],
        "_dev_summary": acc["dev_summary"],
        **({"_table": Lines(rows=acc["table_lines"], deltas=acc["heads"])} if acc["table"] else {}),
    }


def _lineage_lines(paths: Sequence[list[Hop]]) -> list[str]:
    """One line per descent path; two paths that read the same (two continuations of one
    checkpoint by the same move) are told apart by their leaf run."""
    lines = [render_path(p) for p in paths]
    return [f"{line}  (run {p[-1].run})" if lines.count(line) > 1 and p else line
            for line, p in zip(lines, paths, strict=True)]


def experiment_status(ws: Workspace, experiment: str | None, *, json_rows: bool = False,
                      table: bool = False, dead: Dead | None = None,
                      made: dict[str, Any] | None = None, kept: Fold | None = None,
                      at: bytes | None = None) -> dict[str, Any]:
    """``monte status``: the experiment's state from its ledger tip (one tree), and for each
    exam, how often its test content has been read in this repository across all cohorts.
    ``dead``, as :func:`from_facts`; ``made``, when given, gets what the status was made from
    beyond the refs (``judged``: the liveness judgements; ``depends``: what it read outside git;
    ``fold``: what it gathered of the rows, to continue from, :class:`monte.ledger.derived.Fold`).
    ``kept``: a fold of this experiment made by this code (:func:`fold_view`), continued with the
    rows appended since when the ledger only appended rows to its tip, and each live-looking run
    it judged is judged the same; otherwise every row is gathered again. ``at``: the ledger
    commit to read instead of the tip (verify re-derives a fold at its own)."""
    import marshal
    from types import SimpleNamespace

    from monte.ledger.derived import Fold
    from monte.ledger.experiment import Ledger, one_experiment
    from monte.ledger.seal import Seal
    from monte.ledger.store import Snapshot

    exp = one_experiment(ws.store, experiment)
    ledger = Ledger(ws.store, exp)
    snap = ledger.snapshot() if at is None else Snapshot(ws.store.repo, at)  # type: ignore[arg-type]
    meas: MeasurementLike = ledger.measurement_view(snap)
    collecting = gc.isenabled()
    gc.disable()  # ~10 objects a row, none of them garbage: the collector's scans would be most of the time
    try:
        acc = _continued(ledger, snap, kept, dead) if kept is not None else None
        if acc is None:
            facts = (ledger.derived(snap, "status", facts_version(), derive_facts) if at is None
                     else [row_fact(entry) for entry in ledger.entries(snap)])
            facts.sort(key=_by_seq)
            acc = new_fold(facts, json_rows=json_rows, table=table)
            fold(acc, facts, dead=dead)
        memo: dict[Any, Any] = dict(kept.memo) if kept is not None else {}
        lineage_section(meas, acc)  # (kept with the fold)
        state = marshal.dumps(acc) if made is not None else b""
        noms = {}
        for cohort in snap.listdir("cohorts"):
            raw = snap.read(f"cohorts/{cohort}/nomination.json")
            if raw:
                noms[cohort] = json.loads(raw)["checkpoint"]
        judged = list(acc["judged"])
        out = finish(meas, acc, noms)
        seal = Seal(ws.store, hash_legacy=False)
        # the seal reads a test read's run, experiment, cohort, plan, kind, split and smoke: the
        # index's dicts as attributes (no model object)
        seal.know(exp, cast("list[RunRow]", [SimpleNamespace(**r) for r in out.pop("_test_reads")]))
        out["exams"] = [{"exam": exam, "split_sha256": x.splits["test"].sha256,
                         **_renamed(seal.disclosure(x.splits["test"].sha256))}
                        for exam, x in sorted(meas.exams.items()) if "test" in x.splits]
        floors, source = floors_and_source(ws, meas.environment)
        add_floors_and_reach(out, meas, floors, scores=out.pop("_scores"), memo=memo,
                             summaries=out.pop("_dev_summary"))
        if made is not None:
            made["judged"] = judged
            made["depends"] = [("floors", source)]
            made["fold"] = Fold("", bytes(snap.commit_id or b""), state, memo)
    finally:
        if collecting:
            gc.enable()
    return out


def _continued(ledger: Ledger, snap: Snapshot, kept: Fold, dead: Dead | None) -> dict[str, Any] | None:
    """``kept``'s accumulators with the rows appended since its tip folded in, or None when the
    ledger did more than append rows (:meth:`monte.ledger.experiment.Ledger.appended`), a run
    it judged is judged otherwise now, or an appended row cannot follow (a record number not
    after every row kept, a row without the serialized form the kept rows have)."""
    import marshal

    if dead is None:
        from monte.processes import is_dead_at

        dead = is_dead_at
    entries = ledger.appended(kept.tip, snap)
    if entries is None:
        return None
    try:
        acc: dict[str, Any] = marshal.loads(kept.state)
    except (ValueError, EOFError, TypeError):
        return None
    if any(dead(recorded, *who) != gone for recorded, who, gone in acc["judged"]):
        return None
    facts = derive_facts({str(i): e for i, e in enumerate(entries)})
    facts.sort(key=_by_seq)
    seqs = [f[SEQ] for f in facts]
    last = acc["max_seq"]
    if (any(type(q) is not int for q in seqs) or len(set(seqs)) != len(seqs)
            or (facts and last is not None and seqs[0] <= last)
            or (acc["serialized"] and any(f[JSON_ROW] is None for f in facts))):
        return None
    fold(acc, facts, dead=dead)
    return acc


def derive_facts(index: dict[str, Any]) -> list[Any]:
    return [row_fact(r) for r in index.values()]


def _by_seq(f: tuple[Any, ...]) -> Any:
    return f[SEQ]


def frozen_floors(ws: Workspace, environment: str) -> Mapping[str, Mapping[str, Any]]:
    """:func:`monte.envs.floor.exam_floors` for a read-only view: the floors the vault's manifest
    of ``environment`` records, read as JSON (no pydantic); without them (a freeze older than
    floors, or no vault), ``exam_floors`` itself (the data root's manifest)."""
    return floors_and_source(ws, environment)[0]


def floors_and_source(ws: Workspace, environment: str) -> tuple[Mapping[str, Mapping[str, Any]], str]:
    """:func:`frozen_floors`, and where they came from: ``vault`` (the vault ref's manifest),
    ``none`` (no vault manifest and no environment folder on the data root) or ``data-root``
    (the data root's manifest: files outside git, which no view of the ledger can key)."""
    import json

    from monte.ledger.refs import VAULT_REF
    from monte.ledger.views import manifest_path

    raw = ws.store.snapshot(VAULT_REF).read(manifest_path("environment", environment))
    try:
        floors = json.loads(raw).get("floors") if raw else None
        if floors:
            return ({exam: {split: {"score": float(f["score"]), "answer": str(f["answer"]), "n": int(f["n"]),
                                    "candidates": int(f["candidates"])} for split, f in splits.items()}
                     for exam, splits in floors.items()}, "vault")
    except (ValueError, TypeError, KeyError, AttributeError):
        pass  # not the shape monte writes: validated below, reported as exam_floors reports it
    if not raw and not ws.env_dir(environment).is_dir():
        return {}, "none"
    from monte.envs.floor import exam_floors

    return exam_floors(ws, environment), "data-root"


def _renamed(d: dict[str, Any]) -> dict[str, Any]:
    return {"test_reads": d["reads"], "cohorts": d["cohorts"], "experiments": d["experiments"]}


def add_floors_and_reach(out: dict[str, Any], meas: MeasurementLike,
                         floors: Mapping[str, Mapping[str, Floor | Mapping[str, Any]]], *,
                         scores: Mapping[str, Any] | None = None, memo: dict[Any, Any] | None = None,
                         summaries: Mapping[str, list[Any]] | None = None) -> None:
    """Beside the scores (issue 18): each exam split's constant-answer floor (``floors``), what a
    test read of each exam can show (``exams[i]["detectable"]``, :func:`monte.stats.power.detectable`),
    and a flag on every checkpoint score at or below its floor (``at_floor`` on delta lines, the
    exams ``at_floor`` on checkpoints): beating a garbage base is not learning. ``memo``: as
    :func:`monte.stats.power.detectable`'s; ``summaries``: each exam's dev deltas as
    :func:`monte.stats.power.add_to_summary` gathered them (:func:`fold` does), instead of the deltas."""
    from monte.stats.power import detectable, detectable_from, new_summary

    out["floors"] = {f"{exam}/{split}": dict(f) if isinstance(f, Mapping) else f.model_dump()
                     for exam, splits in sorted(floors.items()) for split, f in sorted(splits.items())}
    floor = {k: f["score"] for k, f in out["floors"].items()}
    if scores is None:  # each delta's own score (``out["rows"]`` as a list)
        scores = {r["run"]: r["score"] for r in out["rows"]}
    dev: dict[str, list[dict[str, Any]]] = {}
    keys: dict[tuple[str, str], tuple[Any, list[dict[str, Any]] | None]] = {}
    for d in out["deltas"]:
        exam, split = d["exam"], d["split"]
        found = keys.get((exam, split))
        if found is None:
            found = keys[exam, split] = (floor.get(f"{exam}/{split}"),
                                         dev.setdefault(exam, []) if split == "dev" and summaries is None else None)
        at, dev_list = found
        d["floor"] = at
        score = scores.get(d["run"])
        d["at_floor"] = at is not None and score is not None and score <= at
        if dev_list is not None:
            dev_list.append(d)
    for c in out["checkpoints"]:
        c["at_floor"] = sorted(e for e, s in c["dev"].items()
                               if s is not None and f"{e}/dev" in floor and s <= floor[f"{e}/dev"])
    for x in out.get("exams", []):
        test = meas.exams[x["exam"]].splits["test"]
        summary = summaries.get(x["exam"]) if summaries is not None else None
        x["detectable"] = (detectable(test.n, dev.get(x["exam"], []), memo=memo) if summaries is None
                           else detectable_from(test.n, summary or new_summary(), memo=memo))


# --- a status as printed, kept for the state it was made from --------------------------------

#: Bump when what a view holds changes. A view's key also digests the code that makes the
#: document (:data:`VIEW_CODE`, :func:`facts_version`) and the renderer's (``code``).
VIEW_VERSION = "status-view 1"
#: monte's modules a status document is made by, beside this one (paths under ``monte/``)
VIEW_CODE = ("ledger/views.py", "ledger/rules.py", "ledger/seal.py", "ledger/experiment.py",
             "stats/power.py", "stats/paired.py", "stats/printing.py", "stats/inputs.py", "stats/unpaired.py",
             "stats/t_intervals.py", "jsonl.py")
#: renders a status document (``api.status``'s dict, ``json_rows`` for ``json``, ``table`` for
#: ``text``) as the command prints it
Render = Callable[[dict[str, Any]], "bytes | str"]


def code_digest(paths: Sequence[str]) -> str:
    """A digest of the files that make a view: this module's facts, :data:`VIEW_CODE`, ``paths``."""
    import hashlib
    from pathlib import Path

    here = Path(__file__).resolve().parent
    h = hashlib.sha256(facts_version().encode())
    for path in (*(here / p for p in VIEW_CODE), *map(Path, paths)):
        h.update(Path(path).read_bytes())
    return h.hexdigest()[:32]


def state_key(ws: Workspace, experiment: str, mode: str, code: str) -> str:
    """A digest of everything a status of ``experiment`` reads from git: its ledger tip (rows,
    measurement, nominations), every ledger's tip and the results bucket's mirrors (the seal's
    disclosure counts their test reads), every cohort's base ref (its weights identity), the
    vault's tip (the floors); with the output's ``mode`` and the ``code`` that makes it. Refs
    only: a few files read, no object."""
    import hashlib

    from monte.ledger.experiment import experiment_names
    from monte.ledger.refs import MIRROR, VAULT_REF, experiment_ref, ledger_ref

    store = ws.store
    parts = [VIEW_VERSION, code, mode, experiment, f"vault {store.tip(VAULT_REF)!r}"]
    names = experiment_names(store)
    for name in names:
        parts.append(f"{name} {store.tip(ledger_ref(name))!r}")
        parts += [f"{ref} {sha!r}" for ref, sha in sorted(store.refs_under(experiment_ref(name, "base")).items())]
    parts += [f"{ref} {sha!r}" for ref, sha in sorted(store.refs_under(MIRROR).items())]
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()


def _depends_hold(ws: Workspace, depends: Sequence[tuple[str, Any]]) -> bool:
    return all(what == "floors" and found in ("vault", "none") for what, found in depends)


def make_view(ws: Workspace, experiment: str, mode: str, render: Render, key: str,
              dead: Dead | None = None, kept: Fold | None = None, code: str = "") -> tuple[bytes | str, View | None,
                                                                                        Fold | None]:
    """The status of ``experiment`` rendered, its view for the cache (None when it read what no
    key covers: the data root's floors), and what it gathered of the rows (``code``'s; None
    with the view). ``kept``: a fold to continue from (:func:`experiment_status`)."""
    from monte.ledger.derived import Fold, View

    made: dict[str, Any] = {}
    doc = experiment_status(ws, experiment, json_rows=mode == "json", table=mode == "text", dead=dead, made=made,
                            kept=kept)
    out = render(doc)
    depends = made["depends"]
    if not _depends_hold(ws, depends):
        return out, None, None
    return out, View(key, made["judged"], depends, out), Fold(code, *made["fold"][1:])


def status_view(ws: Workspace, experiment: str | None, mode: str, render: Render,
                code: Sequence[str] = ()) -> bytes | str:
    """``monte status`` as printed off a terminal (``mode``: ``json`` or ``text``; ``render``:
    how, from ``code``'s files), made once per state of the repository (:func:`state_key`) and
    kept in the experiment's view cache (:class:`monte.ledger.derived.ViewCache`, signed, checked
    by ``monte ledger verify``). Each read still judges every live-looking run's process: a view
    is printed only when each is judged as it was then; otherwise the status is made again.
    Made again, it continues from the rows gathered for the last view
    (:class:`monte.ledger.derived.FoldCache`) when the ledger only appended rows since."""
    from monte.ledger.derived import FoldCache, ViewCache
    from monte.ledger.experiment import one_experiment
    from monte.processes import is_dead_at

    exp = one_experiment(ws.store, experiment)
    digest = code_digest(code)
    key = state_key(ws, exp, mode, digest)
    git_dir = ws.store.repo.commondir()
    cache = ViewCache(git_dir, exp, mode, VIEW_VERSION)
    view = cache.view
    if (view is not None and view.key == key and _depends_hold(ws, view.depends)
            and all(is_dead_at(recorded, *who) == gone for recorded, who, gone in view.live)):
        return view.payload
    folds = FoldCache(git_dir, exp, mode, VIEW_VERSION)
    kept = folds.fold if folds.fold is not None and folds.fold.code == digest else None
    out, made, gathered = make_view(ws, exp, mode, render, key, kept=kept, code=digest)
    if made is not None and gathered is not None:
        folds.save(gathered)
        cache.save(made)
    return out


def rederive_view(ws: Workspace, experiment: str, mode: str, stored: View, render: Render,
                  code: Sequence[str] = ()) -> View | None:
    """For ``monte ledger verify``: the view of the repository's current state made again, with
    the liveness judgements ``stored`` holds (a process that died since is not a forgery);
    None when ``stored`` is not of the current state (it is never used)."""
    from monte.ledger.experiment import experiment_names

    if experiment not in experiment_names(ws.store):
        return None
    key = state_key(ws, experiment, mode, code_digest(code))
    if stored.key != key:
        return None
    _, again, _ = make_view(ws, experiment, mode, render, key, dead=_replay(stored.live))
    return again


def _replay(live: Sequence[tuple[str, Any, bool]]) -> Dead:
    """Judges each live-looking run as ``live`` records it (the rest as now)."""
    judged = {(recorded, tuple(who)): gone for recorded, who, gone in live}

    def replay(recorded: str, *who: Any) -> bool:
        found = judged.get((recorded, tuple(who)))
        if found is None:
            from monte.processes import is_dead_at

            return is_dead_at(recorded, *who)
        return found

    return replay


def refold(ws: Workspace, experiment: str, mode: str, stored: Fold,
           code: Sequence[str] = ()) -> tuple[Any, dict[Any, Any]] | None:
    """For ``monte ledger verify``: what a status gathers of the rows at ``stored``'s ledger
    commit (marshal-loaded, with the liveness judgements ``stored`` holds), and each of its memo's
    figures computed again; None when ``stored`` is another code's (never used) or its commit is
    not in this repository."""
    import marshal

    from monte.ledger.experiment import experiment_names
    from monte.stats.power import recompute_memo

    if experiment not in experiment_names(ws.store) or stored.code != code_digest(code):
        return None
    try:
        ws.store.repo.object_store[stored.tip]  # type: ignore[index]
    except (KeyError, ValueError):
        return None
    try:
        acc: dict[str, Any] = marshal.loads(stored.state)
        live = acc["judged"]
    except (ValueError, EOFError, TypeError, KeyError):
        live = []
    made: dict[str, Any] = {}
    experiment_status(ws, experiment, json_rows=mode == "json", table=mode == "text", dead=_replay(live),
                      made=made, at=stored.tip)
    memo = {}
    for k in stored.memo:
        try:
            memo[k] = recompute_memo(k)
        except (ValueError, TypeError):
            memo[k] = ("not a figure", k)
    return marshal.loads(made["fold"].state), memo
