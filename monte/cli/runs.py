from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, cast

import click

from monte.cli import complete
from monte.cli.commands import STATUS_CODE
from monte.cli.output import (
    Rendered,
    compact_json,
    experiment_named,
    experiment_option,
    handled,
    is_tty,
    table,
)
from monte.result_type import Result

if TYPE_CHECKING:
    from monte.api.shapes import Recovered


def _at_floor(floor: float | None) -> str:
    return f" - not learning: at or below the constant-answer floor {floor:.4f}" if floor is not None else ""


#: the widest line `monte status` prints (the runs table aside); `--wide` prints every line whole
WIDTH = 119


def _fit(line: str, wide: bool, keep: str | None = None) -> str:
    """``line`` folded at :data:`WIDTH` at spaces, its continuation lines indented under it;
    ``keep``: a phrase that is not broken, nor parted from the word before it (the legend)."""
    if wide or len(line) <= WIDTH or "\n" in line:
        return line
    import textwrap

    if keep and " " + keep in line:  # the legend stays with the hop it explains (`=move=> STEP`)
        head, _, tail = line.partition(" " + keep)
        head = "\0".join(head.rsplit(" ", 1)) if head.count(" ") > 1 else head
        line = head + "\0" + keep.replace(" ", "\0") + tail
    indent = " " * (len(line) - len(line.lstrip()) + 4)
    return "\n".join(textwrap.wrap(line, WIDTH, subsequent_indent=indent, break_long_words=False,
                                    break_on_hyphens=False)).replace("\0", " ")


def claim_lines(r: Any) -> list[str]:
    """The final claims (a test read on a checkpoint), as status opens with them."""
    from monte.stats.paired import format_interval

    scores = {x["run"]: x for x in r["rows"]} if isinstance(r["rows"], list) else {}
    out = []
    for d in r["deltas"]:
        if d.get("role") != "claim":
            continue
        row = scores.get(d["run"]) or {}  # (the kept text view lists no rows here: the table's lines)
        score = f"test {row['score']:.4f}, " if isinstance(row.get("score"), float) else ""
        out.append(f"final claim {d['target']} on {d['exam']}/test: {score}delta {d['delta']:+.4f} "
                   f"{format_interval(d['lower'], d['upper'])} vs test@0 (n {d['n']}): "
                   f"{d.get('verdict') or 'unjudged'} (run {d['run']})")
    return out


def render_status(r: Any) -> None:
    if isinstance(r, Rendered):  # the status as this state of the repository printed it before
        r.write()
        return
    if isinstance(r, Result):  # the one result status gives: --brief's
        from monte.status.brief import StatusBrief, brief_text

        click.echo(brief_text(cast("StatusBrief", r)), nl=False)
        return
    from monte.stats.power import describe_detectable
    from monte.status import delta_head, status_text, table_line
    from monte.status.facts import move_verdict
    from monte.status.search import search_line

    wide = bool(r.get("_wide"))
    sampling = r.get("sampling")
    head = [*claim_lines(r), f"experiment {r['experiment']} (environment {r['environment']}"
            + (f"; K = {sampling['samples']} samples per item at temperature {sampling['temperature']:g}"
               if sampling else "") + ")"]
    click.echo("\n".join(_fit(line, wide) for line in head))
    columns = ["run", "kind", "what", "target", "status", "score", "n"]
    pre = r.get("_table")  # the lines status formatted from its cache (``api.status(table=True)``)
    rows = pre.rows if pre is not None else [table_line(x) for x in r["rows"]]
    if rows and (pre is not None or not is_tty()):  # tab-separated lines (a pipe; or 10,000 rows)
        click.echo("\t".join(columns) + "\n" + "\n".join(rows))
    else:
        table([{**x, "status": status_text(x)} for x in r["rows"]], columns, title="runs")
    lines: list[str] = []
    out = lines.append  # one write at the end: 10,000 delta lines are 10,000 echo calls otherwise
    for c in r["cohorts"]:
        touches = ", ".join(f"{e} {n}/2" for e, n in sorted(c.get("test_touches", {}).items())) or "none"
        out(f"cohort {c['cohort']}: test reads {touches}"
            + (f"; nominated {c['nomination']}" if c.get("nomination") else ""))
        for key, b in sorted(c.get("baselines", {}).items()):
            floor = r.get("floors", {}).get(key)
            out(f"  baseline {key}@0: {b['score']:.4f} (n={b['n']}, run {b['run']})"
                + (f"; constant-answer floor {floor['score']:.4f}" if floor else ""))
    for x in r.get("exams", []):
        if x["test_reads"]:
            out(f"test content of {x['exam']}: read {x['test_reads']} time(s) in this repository, "
                f"in {x['cohorts']} cohort(s) ({', '.join(x['experiments'])})")
        if x.get("leak_refusals"):
            out(f"test content of {x['exam']}: {x['leak_refusals']} leak refusal(s) (each told whether rows "
                "were in it)")
    for x in r.get("exams", []):
        floors = [(k.split("/", 1)[1], f) for k, f in r.get("floors", {}).items() if k.split("/", 1)[0] == x["exam"]]
        line = "; ".join(f"{split} {f['score']:.4f} (always {f['answer']!r})" for split, f in floors)
        line = f"constant-answer floor {line}; " if floors else ""
        if x.get("detectable"):
            out(f"exam {x['exam']}: {line}{describe_detectable(x['detectable'])}")
    heads = pre.deltas if pre is not None else [delta_head(d) for d in r["deltas"]]
    for head, d in zip(heads, r["deltas"], strict=True):
        out(head + (_at_floor(d.get("floor")) if d.get("at_floor") else ""))
    for line in r["lineage"]:  # the legend ends each line that crosses a stage boundary (=move=>)
        out(_fit(f"lineage: {line}" + (f" {r['legend']}" if r["legend"] and "=>" in line else ""), wide,
                 keep=r["legend"]))
    several = len({c["exam"] for c in r["cycles"]}) > 1
    out("cycles:" + "".join(f"{',' if i else ''} {c['checkpoint']}" + (f" {c['exam']}" if several else "")
                            + f" {c['verdict']}" for i, c in enumerate(r["cycles"])))
    moves = [f"{c['checkpoint']} {move_verdict(c['parent'])}" for c in r["cycles"] if c.get("parent")]
    if moves:  # what each move did, against its parent checkpoint (the search verdict, docs/statistics.md)
        out("cycles vs parent: " + "; ".join(moves))
    if any(c.get("not_learning") for c in r["cycles"]):
        out("cycles not learning (at or below the constant-answer floor): "
            + ", ".join(c["checkpoint"] for c in r["cycles"] if c.get("not_learning")))
    lines += map(search_line, r.get("search", ()))  # K tried, the best judged as the best of K (the search verdict, docs/statistics.md)
    out("checkpoints:" + ("" if r["checkpoints"] else " none"))
    for c in r["checkpoints"]:
        floors = r.get("floors", {})
        dev = ", ".join(f"{e} {s:.4f}" + (_at_floor(floors[f"{e}/dev"]["score"]) if e in c.get("at_floor", ()) else "")
                        for e, s in c["dev"].items() if s is not None) or "no dev eval"
        out(f"  {c['checkpoint']}  {c['move']}  from {c['parent']}"
            + ("  (stage boundary)" if c["boundary"] else "") + f"  dev: {dev}")
    click.echo("\n".join(_fit(line, wide) for line in lines))


@click.command()
@click.argument("experiment", required=False, shell_complete=complete.experiments)
@experiment_option
@click.option("--brief", is_flag=True, help="One screen of what an agent decides on (docs/agents.md).")
@click.option("--wide", is_flag=True, help=f"Print every line whole (by default a line folds at {WIDTH + 1} columns).")
@handled(render_status)
def status(experiment: str | None, experiment_opt: str | None, brief: bool, wide: bool, as_json: bool) -> Any:
    """The final claim, rows, delta lines, lineage, cycles and checkpoints of an experiment.

    Example: monte status, or monte status EXP (also -e EXP) with several experiments.
    """
    from monte import api

    name = experiment_named(experiment, experiment_opt)
    if brief:
        return api.status_brief(experiment=name)
    if not as_json and sys.stderr.isatty():  # for a person: one line on stderr, where the seal is held
        click.echo(api.seal_line(), err=True)  # (stdout stays what a program reads: the view as kept)
    if wide and not as_json:  # not a kept view: the text of those is folded
        return {**api.status(experiment=name), "_wide": True}
    if sys.stdout.isatty():  # for a person: the table (rich), indented JSON
        return api.status(experiment=name)
    # for a program (a pipe, a file): the output as printed, made once per state of the
    # repository and kept (monte.status.status_view); each read still probes the live runs
    mode = "json" if as_json else "text"
    render, code = STATUS_RENDERERS[mode]
    return Rendered(api.status_view(experiment=name, mode=mode, render=render, code=code))


def _status_text(r: dict[str, Any]) -> str:
    """What :func:`render_status` prints off a terminal, as text."""
    import contextlib
    import io

    buf = io.StringIO()  # not a terminal: the tab-separated form
    with contextlib.redirect_stdout(buf):
        render_status(r)
    return buf.getvalue()


#: how each view of ``monte status`` is rendered, and the files that render it (its cache key;
#: ``monte ledger verify`` renders the views again with these)
STATUS_RENDERERS: dict[str, tuple[Callable[[dict[str, Any]], bytes | str], tuple[str, ...]]] = {
    "json": (compact_json, STATUS_CODE["json"]),
    "text": (_status_text, STATUS_CODE["text"]),
}


@click.command()
@click.argument("run", metavar="[EXP/]RUN", shell_complete=complete.runs)
@click.option("--experiment", "-e", metavar="EXP", shell_complete=complete.experiments,
              help="The run's experiment (default: the only one; or write EXP/RUN).")
@handled(lambda r: click.echo(json.dumps(r, indent=2, sort_keys=True)))
def show(run: str, experiment: str | None) -> Any:
    """One full row with all provenance fields."""
    from monte import api

    return api.show(ref=run, experiment=experiment)


@click.command()
@click.argument("run", metavar="[EXP/]RUN", shell_complete=complete.runs)
@click.option("--follow", "-f", is_flag=True, help="Keep printing new events until the run ends.")
@click.option("--json", "as_json", is_flag=True, help="One JSON document: {run, events: [...]} (no --follow).")
@click.option("--experiment", "-e", metavar="EXP", shell_complete=complete.experiments,
              help="The run's experiment (default: the only one; or write EXP/RUN).")
def logs(run: str, follow: bool, as_json: bool, experiment: str | None) -> None:
    """The run's event file, as JSON lines."""
    if as_json:
        _logs_json(run, follow, experiment, as_json=True)
    else:
        _logs(run, follow, experiment)


@handled()
def _logs_json(run: str, follow: bool, experiment: str | None) -> Any:
    """``--json``: every event so far as one document (JSON lines are not one document)."""
    from monte import api
    from monte.errors import error

    if follow:
        raise error("E_USAGE", "--follow prints events as they come; it cannot be one JSON document",
                    "drop --json to follow, or drop --follow for the events so far")
    path = api.logs(ref=run, experiment=experiment)
    events = []
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            try:
                events.append(json.loads(line))
            except ValueError:  # a line torn by a crash: kept as text, not dropped
                events.append({"unparsed": line.rstrip("\n")})
    return {"run": path.parent.name, "experiment": path.parent.parent.name, "events": events}


@handled(None)
def _logs(run: str, follow: bool, experiment: str | None) -> None:
    from monte import api

    path = api.logs(ref=run, experiment=experiment)
    with open(path, encoding="utf-8") as f:
        while True:
            line = f.readline()
            if line:
                sys.stdout.write(line)
                sys.stdout.flush()
                if follow and json.loads(line).get("event") in ("succeeded", "failed", "abandoned"):
                    return
                continue
            if not follow:
                return
            time.sleep(0.5)


@click.command()
@click.argument("run", metavar="[EXP/]RUN", shell_complete=complete.runs)
@click.option("--reason", hidden=True, help="Why, recorded on the row (a box's job wrapper uses it).")
@click.option("--experiment", "-e", metavar="EXP", shell_complete=complete.experiments,
              help="The run's experiment (default: the only one; or write EXP/RUN).")
@handled(lambda r: click.echo(f"{r.run}: abandoned" + (" (process signalled)" if r.signalled else "")))
def stop(run: str, reason: str | None, experiment: str | None) -> Any:
    """Terminate a running Run; its row reads abandoned."""
    from monte import api

    return api.stop(ref=run, experiment=experiment, reason=reason)


def _recovered(r: list[Recovered]) -> None:
    if not r:
        click.echo("nothing to recover: every finished run is recorded")
    for x in r:
        if x.status == "running":  # a test read still running on the grader: recorded once it ends
            click.echo(f"{x.run}: still running on the grader; run `monte recover` again once it ends")
            continue
        click.echo(f"{x.run}: recorded {x.status}" + (f", score {x.score:.4f} (n={x.n})" if x.score is not None else "")
                   + (f": {x.error}" if x.error else ""))


@click.command()
@click.argument("experiment", required=False, shell_complete=complete.experiments)
@handled(_recovered)
def recover(experiment: str | None) -> Any:
    """Record the results runs kept in their folders when the ledger could not be written.

    A run whose finishing record failed (a full or read-only disk) keeps its result in its run
    folder; once its process is gone, this records the finish with the real score. The next
    `monte eval` in the experiment does the same first. With a grader pinned, a test read whose
    client died is fetched from the grader by run id: its signed result, or failed with why (a
    worker killed there is found by its lock), or still running.
    """
    from monte import api

    return api.recover(experiment=experiment)
