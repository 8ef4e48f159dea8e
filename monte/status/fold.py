"""The one pass ``monte status`` makes over the rows' facts (:func:`fold`), what it gathers
(:func:`new_fold`: plain containers, kept between reads by :class:`monte.ledger.derived.FoldCache`)
and the document made of it (:func:`finish`). Pure: no I/O."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, NamedTuple

from monte.jsonl import RawJson
from monte.ledger.predicates import is_sealed
from monte.ledger.rules import Checkpoint, row_checkpoints
from monte.ledger.views import MeasurementLike
from monte.status.facts import JSON_ROW, SEQ, dump_row, out_row, table_line, target_of
from monte.status.lineage import LEGEND, FirstEval, cycles, descent_paths, lineage_lines

#: how a live-looking row's process is judged: (recorded status, host, pid, process start) -> dead
Dead = Callable[[str, Any, Any, Any], bool]


class Lines(NamedTuple):
    """What the human status prints of each row and each delta, already formatted (``table``):
    the runs table's lines, and each delta line up to its verdict, in ``deltas``' order."""

    rows: list[str]
    deltas: list[str]



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


def new_fold(facts: Sequence[tuple[Any, ...]], *, json_rows: bool = False, table: bool = False,
             floors: Mapping[str, float] | None = None) -> dict[str, Any]:
    """What :func:`fold` gathers, empty: plain containers only (``marshal`` keeps them, see
    :class:`monte.ledger.derived.FoldCache`). ``facts``: the rows it will be given first (the
    compact rows are kept serialized when each has its serialized form). ``floors``: each
    ``exam/split``'s constant-answer floor score; given with serialized rows, each delta line is
    kept serialized too, its ``floor`` and ``at_floor`` in it (:func:`add_floors_and_reach`'s), in
    ``deltas_json`` (a kept fold is continued only under the same floors)."""
    serialized = json_rows and all(f[JSON_ROW] is not None for f in facts)
    return {"table": table, "serialized": serialized,
            "max_seq": None, "judged": [], "deltas": [], "cohorts": {}, "dev_scores": {}, "first": {}, "tried": {},
            "trains": [], "test_reads": [], "out_rows": [], "out_json": [], "scores": {}, "table_lines": [],
            "heads": [], "dev_summary": {}, "epoch": 0, "lineage": None,
            "floor": dict(floors) if floors is not None and serialized else None,
            "deltas_json": [] if floors is not None and serialized else None}


class Unserialized(ValueError):
    """A delta line orjson refuses (:func:`fold` with ``floors``): fold the rows again without."""


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
    tried = acc.setdefault("tried", {})
    deltas_json, floor = acc.get("deltas_json"), acc.get("floor")
    for f in facts:
        (seq, run, kind, recorded, cohort, base_model, exam, split, _step, smoke, score, n, role, _created,
         tkind, trun, tstep, _what, delta, who, full, _recovered, row_json, line, head) = f
        status = recorded
        if who is not None:
            gone = dead(recorded, *who)
            judged.append((recorded, tuple(who), gone))
            if gone:
                status = "abandoned"
        if table:
            table_lines.append(line if status == recorded else table_line(out_row(f, status)))
        elif not serialized:
            out_rows.append(out_row(f, status))
        elif status == recorded:
            out_json.append(row_json)
        else:
            out_json.append(dump_row(out_row(f, status)) or b"null")
        if full is not None and kind == "train":
            epoch += 1  # the lineage section is made again (:func:`lineage_section`)
            if not smoke:  # its checkpoints, as plain tuples (the fields of Checkpoint, in order)
                trains.append([(c.run, c.step, c.seq, c.cohort, c.label, c.recipe, c.parent, c.start_step, c.boundary,
                                c.commit) for c in row_checkpoints(full["run"], full["seq"], full["cohort"],
                                                                   full["plan"], full["checkpoints"])])
        elif full is not None:
            test_reads.append(full if status == recorded else {**full, "status": status,
                                                               "error": "the process died without finishing"})
        c = cohorts.get(cohort or "-")
        if c is None:
            c = cohorts[cohort or "-"] = {"cohort": cohort, "model": base_model,
                                          "test_touches": {}, "baselines": {}}
        if kind != "eval" or smoke:
            continue
        if is_sealed(split):
            c["test_touches"][exam] = c["test_touches"].get(exam, 0) + 1
        if status != "succeeded":
            continue
        if delta is not None:
            if split == "dev" and tkind == "checkpoint":  # K so far: the distinct checkpoints tried (the search verdict, docs/statistics.md)
                seen = tried.setdefault(f"{cohort}\t{exam}", {})
                seen.setdefault(f"{trun}@{tstep}", len(seen) + 1)
                delta = {**delta, "tries": len(seen)}
            if deltas_json is not None:
                at = floor.get(f"{exam}/{split}")  # type: ignore[union-attr]
                line = dump_row({**delta, "floor": at, "at_floor": at is not None and score is not None and score <= at})
                if line is None:
                    raise Unserialized(run)
                deltas_json.append(line)
            else:
                deltas.append(delta)
                scores[run] = score  # (for add_floors_and_reach: a serialized line holds its at_floor)
            if table:  # (the compact JSON prints no delta line)
                heads.append(head)
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
            dev_scores.setdefault(target_of(tkind, trun, tstep), {}).setdefault(exam or "", score)
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
    cks = [Checkpoint(*c) for saved in acc["trains"] for c in saved]
    paths = descent_paths(cks)
    first = {k: FirstEval(*v) for k, v in acc["first"].items()}
    dev_scores = acc["dev_scores"]
    section = {
        "lineage": lineage_lines(paths),
        "legend": LEGEND if any(h.boundary for p in paths for h in p) else None,
        "cycles": cycles([], cks, paths, dev_exams, first=first),
        "checkpoints": [{"checkpoint": c.ref, "cohort": c.cohort, "move": c.label, "recipe": c.recipe,
                         "parent": f"{c.parent[0]}@{c.parent[1]}" if c.parent else "base",
                         "boundary": c.boundary, "dev": dict(dev_scores.get(c.ref, {}))} for c in cks],
    }
    acc["lineage"] = [key, section]
    return section


def finish(meas: MeasurementLike, acc: dict[str, Any], nominations: dict[str, str],
           memo: dict[Any, Any] | None = None) -> dict[str, Any]:
    """The status document from what :func:`fold` gathered (its containers become the
    document's: ``acc`` is not used again). ``memo``: figures kept between reads (the search
    tests' cutoffs, :func:`monte.status.search.search_section`)."""
    from monte.status.search import search_section

    section = lineage_section(meas, acc)
    cohorts = acc["cohorts"]
    for cohort, ck in nominations.items():
        cohorts.setdefault(cohort, {"cohort": cohort})["nomination"] = ck
    rows_out: Any = RawJson(b"[" + b",".join(acc["out_json"]) + b"]") if acc["serialized"] else acc["out_rows"]
    return {
        "experiment": meas.experiment,
        "environment": meas.environment,
        # K answers per item: shown from the start, not only once a delta names its K
        **({"sampling": {"samples": meas.eval.samples, "temperature": meas.eval.temperature}}
           if meas.eval.samples > 1 else {}),
        "rows": rows_out,
        "cohorts": list(cohorts.values()),
        "deltas": (RawJson(b"[" + b",".join(acc["deltas_json"]) + b"]") if acc.get("deltas_json") is not None
                   else acc["deltas"]),
        **section,
        "search": search_section(acc["first"], nominations, memo),
        "_test_reads": acc["test_reads"],
        "_scores": acc["scores"],
        "_dev_summary": acc["dev_summary"],
        **({"_table": Lines(rows=acc["table_lines"], deltas=acc["heads"])} if acc["table"] else {}),
    }

