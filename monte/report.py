"""``monte report``: one self-contained HTML page of an experiment, a view of what ``monte status``
already says (:func:`monte.status.experiment_status`), the rows' own fields (``monte show``) and
each eval's per-task results (``tasks.jsonl``). Nothing here derives a statistic of its own.

The page requests nothing when it is opened: its style and script are inline (kept beside this
module as package data, ``monte/page/report.css`` and ``report.js``), it names no font,
and its data is embedded. It is the same bytes each time it is made from the same ledger (no
clock, no random, every list in record or sorted order).

- the lineage tree as SVG, drawn here (:func:`tree_svg`): a node per checkpoint with its step and
  dev scores, each run's first hop labelled with its move (``algorithm:source``), a stage boundary
  drawn as a double dashed hop, a parent that is not readable here as an ``(unread)`` node;
- the cycles with the paired dev delta, its interval, the verdict, the exam's constant-answer
  floor and the smallest effect a test read can show;
- the flips between any two evals of one exam split, chosen in the page (a cycle's click picks
  its baseline and its eval). Each eval's ``tasks.jsonl`` is embedded as it is in the ledger,
  compressed (zlib, base64), one blob per eval, inflated (``DecompressionStream``) and parsed in
  the browser for the two evals of the pair only: 1,000 runs of 200 tasks stay under 2 MB;
- the test reads of each cohort and exam (two per cohort), the repository-wide disclosure, the
  final claim with its nomination or selection and its verdict;
- each run's provenance: recipe and its hash, source, base model and weights identity (the
  cohort), the commit it ran at (when its row records one), the host.

Imports nothing heavy (no pydantic model is built either): a read-only command.
"""

from __future__ import annotations

import base64
import functools
import html
import json
import os
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from monte.errors import error
from monte.ledger.predicates import is_sealed
from monte.result_type import Result

if TYPE_CHECKING:
    from monte.workspace import Workspace

TOUCHES = 2  # test reads per cohort and exam: test@0 and the final claim


#: past this many lineage lines the list folds (the tree draws every path); past this many cycles
#: their table scrolls in its own box: at 1,000 runs (35 paths, 200 cycles) the test reads sat
#: ~8,000 px down the page
LINEAGE_OPEN = 8
CYCLES_OPEN = 12


def check_out(out: Path | str) -> Path:
    """Refuse an output path the page cannot be written to (before anything is read)."""
    path = Path(out)
    if path.suffix.lower() not in (".html", ".htm"):
        raise error("E_USAGE", f"--out {str(out)!r} is not an .html file",
                    "name the file FILE.html (monte report --out report.html)")
    parent = path.parent if str(path.parent) else Path(".")
    if not parent.is_dir():
        raise error("E_NOT_FOUND", f"the folder {str(parent)!r} for --out does not exist",
                    f"create it first (mkdir -p {parent}) or write the page elsewhere")
    if path.is_dir():
        raise error("E_USAGE", f"--out {str(out)!r} is a folder", "name a file: FILE.html")
    return path


# --- the data --------------------------------------------------------------------------------------


def _pack(obj: Any) -> str:
    """JSON, zlib-compressed, base64: what the page inflates with ``DecompressionStream('deflate')``."""
    raw = json.dumps(obj, separators=(",", ":"), sort_keys=True, ensure_ascii=False).encode()
    return base64.b64encode(zlib.compress(raw, 9)).decode("ascii")


def _split_items(ws: Workspace, path: str) -> list[dict[str, Any]] | None:
    """The frozen split's items (id, prompt, answer) from the data root, or None when absent here."""
    from monte import jsonl

    f = ws.data_root / path
    try:
        return jsonl.load_lines(f.read_bytes())
    except (OSError, ValueError, UnicodeDecodeError):
        return None


def _text(v: Any) -> str:
    return v if isinstance(v, str) else json.dumps(v, sort_keys=True, ensure_ascii=False)


def _provenance(r: Mapping[str, Any]) -> dict[str, Any]:
    """What a row records of where it came from (``monte show``'s fields), or None where it records none."""
    plan = r.get("plan") or {}
    recipe = plan.get("recipe") or {}
    remote = plan.get("remote") or {}
    launch = plan.get("launch") or {}
    target = plan.get("target") or {}
    commit = (remote.get("commit") or launch.get("git_sha") or launch.get("commit") or plan.get("git_sha")
              or plan.get("commit"))
    if commit and not remote and plan.get("git_dirty"):  # tracked files differed from that commit
        commit = f"{commit} (dirty)"
    return {"recipe": recipe.get("name") or target.get("recipe"), "recipe_sha256": recipe.get("sha256"),
            "source": plan.get("source"), "base_model": plan.get("base_model") or r.get("model") or None,
            "weights": plan.get("weights") or None, "git": commit, "host": r.get("host") or None,
            "box": remote.get("box"), "launch": launch or None}


#: Bump when :func:`_row_facts` changes (the derived cache's key also carries the installed
#: package's digest, :func:`monte.codekey.code_digest`).
FACTS_VERSION = "report-facts 2"


def _facts_version() -> str:
    from monte.codekey import code_digest

    return f"{FACTS_VERSION} {code_digest()[:16]}"


def _row_facts(index: dict[str, Any]) -> list[Any]:
    """What the page reads of each row of one fan-out index (its dicts, no model object):
    run, exam, split, provenance."""
    return [(r["run"], r.get("exam"), r.get("split"), _provenance(r)) for r in index.values()]


def _tasks(ws: Workspace, commit: bytes | None) -> dict[str, bytes]:
    """Every run's ``tasks.jsonl`` at the ledger tip, run -> bytes: one ``git ls-tree`` and one
    ``git cat-file --batch`` (a blob at a time through dulwich's packs is ~30 ms under load)."""
    from monte.ledger.gitread import Git
    from monte.ledger.views import RUNS

    if commit is None:
        return {}
    git = Git(ws.store.repo.commondir())
    listing = git.run(["ls-tree", "-r", "-z", commit.decode(), "--", f"{RUNS}/"])
    wanted: dict[bytes, list[str]] = {}  # two evals that graded alike hold one blob
    for entry in listing.split(b"\0"):
        head, _, path = entry.partition(b"\t")
        if path.endswith(b"/tasks.jsonl"):
            wanted.setdefault(head.split()[2], []).append(path.decode().rsplit("/", 2)[1])
    blobs = git.objects(list(wanted))
    return {run: blobs[sha][1] for sha, runs in wanted.items() if sha in blobs for run in runs}


def _pack_raw(raw: bytes) -> str:
    """Bytes zlib-compressed, base64: what the page inflates with ``DecompressionStream('deflate')``."""
    return base64.b64encode(zlib.compress(raw, 6)).decode("ascii")


def collect(ws: Workspace, experiment: str | None) -> dict[str, Any]:
    """Everything the page shows, JSON types only: ``status`` (as ``monte status --json`` gives it),
    each run's provenance, each eval's per-task results (packed) and each exam split's items."""
    from monte.ledger.experiment import Ledger, one_experiment
    from monte.status import experiment_status

    exp = one_experiment(ws.store, experiment)
    status = experiment_status(ws, exp)
    ledger = Ledger(ws.store, exp)
    snap = ledger.snapshot()
    meas: Any = ledger.measurement_view(snap)
    facts = {f[0]: f for f in ledger.derived(snap, "report", _facts_version(), _row_facts)}
    blobs = _tasks(ws, snap.commit_id)
    splits: dict[str, dict[str, Any]] = {}
    for exam in sorted(meas.exams):
        for name, sp in sorted(meas.exams[exam].splits.items()):
            items = _split_items(ws, sp.path)
            splits[f"{exam}/{name}"] = {"exam": exam, "split": name, "n": sp.n, "sha256": sp.sha256,
                                        "items": items}
    evals: list[dict[str, Any]] = []
    for row in status["rows"]:
        if row["kind"] != "eval" or row["smoke"] or row["status"] != "succeeded" or row["run"] not in blobs:
            continue
        _, exam, split, _ = facts.get(row["run"], (None, None, None, None))
        key = f"{exam}/{split}"
        if key not in splits:
            continue
        evals.append({"run": row["run"], "key": key, "target": row["target"], "cohort": row["cohort"],
                      "score": row["score"], "n": row["n"], "role": row["role"]})
    # each eval's tasks.jsonl as it is (id, score, answer a line), compressed: the page parses the
    # two of a pair when they are picked (parsing 160,000 lines here was most of the time). zlib
    # lets go of the GIL: the blobs compress on every core, each the same bytes as alone.
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=min(8, os.cpu_count() or 1)) as pool:
        for e, blob in zip(evals, pool.map(_pack_raw, [blobs[e["run"]] for e in evals]), strict=True):
            e["blob"] = blob
    packed_splits = {}
    for key, entry in splits.items():
        items = entry["items"]
        packed_splits[key] = {
            "exam": entry["exam"], "split": entry["split"], "n": entry["n"], "sha256": entry["sha256"],
            "items": _pack([[str(it.get("id")), _text(it.get("prompt", "")), _text(it.get("answer", ""))]
                            for it in items]) if items else "",
            "on_data_root": items is not None}
    runs = []
    for row in status["rows"]:
        prov = facts[row["run"]][3] if row["run"] in facts else _provenance({})
        runs.append({**{k: row[k] for k in ("run", "kind", "status", "what", "target", "step", "score", "n",
                                            "role", "cohort", "created_at", "smoke")},
                     # recorded by `monte recover` from a kept result, not by the process that generated it
                     "recovered": bool(row.get("recovered")), **prov})
    return {"status": status, "runs": runs, "evals": evals, "splits": packed_splits}


# --- the lineage tree ------------------------------------------------------------------------------

NODE_W, ROW_H, COL_W, PAD = 170, 18, 290, 16


def tree_layout(checkpoints: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Nodes and edges of the lineage tree from status's ``checkpoints`` (record order): one node
    per checkpoint, a ``base`` root per cohort, an ``(unread)`` node per parent not readable here.
    A run's checkpoints follow each other; its first hangs off its parent. Columns are depth,
    rows are leaves in depth-first order (a node sits on its first child's row)."""
    refs = {c["checkpoint"] for c in checkpoints}
    by_run: dict[str, list[Mapping[str, Any]]] = {}
    for c in checkpoints:
        by_run.setdefault(c["checkpoint"].rsplit("@", 1)[0], []).append(c)
    nodes: dict[str, dict[str, Any]] = {}
    children: dict[str, list[str]] = {}
    edges: list[dict[str, Any]] = []
    roots: list[str] = []

    def add(node_id: str, kind: str, **kw: Any) -> None:
        if node_id not in nodes:
            nodes[node_id] = {"id": node_id, "kind": kind, **kw}
            children.setdefault(node_id, [])
            if kind != "ck":
                roots.append(node_id)

    for cks in by_run.values():
        cks = sorted(cks, key=lambda c: int(c["checkpoint"].rsplit("@", 1)[1]))
        for i, c in enumerate(cks):
            ref = c["checkpoint"]
            if i:
                parent, first = cks[i - 1]["checkpoint"], False
            elif c["parent"] == "base":
                parent, first = f"base:{c['cohort']}", True
                add(parent, "base", cohort=c["cohort"])
            else:
                parent, first = c["parent"], True
                if parent not in refs:
                    add(parent, "unread")
            add(ref, "ck", ck=c)
            children.setdefault(parent, []).append(ref)
            edges.append({"from": parent, "to": ref, "move": c["move"] if first else None,
                          "boundary": bool(c["boundary"]) and first})
    row = 0
    pos: dict[str, tuple[int, int]] = {}
    for root in roots:  # iterative depth-first: a long chain is deep
        stack: list[tuple[str, int, bool]] = [(root, 0, False)]
        while stack:
            node, depth, done = stack.pop()
            kids = children.get(node, [])
            if done:
                pos[node] = (depth, pos[kids[0]][1])
                continue
            if not kids:
                pos[node] = (depth, row)
                row += 1
                continue
            stack.append((node, depth, True))
            stack.extend((k, depth + 1, False) for k in reversed(kids))
    return {"nodes": [nodes[n] for n in nodes], "edges": edges, "pos": pos, "rows": max(row, 1)}


def _e(s: Any) -> str:
    return html.escape(str(s), quote=True)


def _num(x: Any, fmt: str = "+.3f") -> str:
    return "-" if x is None else format(x, fmt)


def tree_svg(status: Mapping[str, Any]) -> str:
    """The lineage tree as an inline SVG (text, no font named: the reader's own sans-serif)."""
    cks = status["checkpoints"]
    lay = tree_layout(cks)
    pos = lay["pos"]
    cycle_of: dict[str, list[int]] = {}
    for i, c in enumerate(status["cycles"]):
        cycle_of.setdefault(c["checkpoint"], []).append(i)
    verdict_of = {c["checkpoint"]: c["verdict"] for c in status["cycles"]}
    claims = {d["target"] for d in status["deltas"] if d.get("role") == "claim"}
    nominated = {c.get("nomination") for c in status["cohorts"] if c.get("nomination")}
    exams = sorted({e for c in cks for e in c["dev"]})
    box_h = 36 + 14 * max(len(exams), 1)
    row_h = box_h + ROW_H
    width = PAD * 2 + (max((p[0] for p in pos.values()), default=0)) * COL_W + NODE_W
    height = PAD * 2 + lay["rows"] * row_h

    def xy(node: str) -> tuple[int, int]:
        d, r = pos[node]
        return PAD + d * COL_W, PAD + r * row_h

    out = [f'<svg xmlns="http://www.w3.org/2000/svg" id="tree" width="{width}" height="{height}" '
           f'viewBox="0 0 {width} {height}" role="img" aria-label="lineage tree">']
    for e in lay["edges"]:
        (x1, y1), (x2, y2) = xy(e["from"]), xy(e["to"])
        x1, y1, y2 = x1 + NODE_W, y1 + box_h // 2, y2 + box_h // 2
        cls = "hop boundary" if e["boundary"] else "hop"
        mid = (x1 + x2) // 2
        path = f"M{x1},{y1} C{mid},{y1} {mid},{y2} {x2},{y2}"
        out.append(f'<path class="{cls}" d="{path}"/>')
        if e["boundary"]:
            out.append(f'<path class="hop boundary2" d="{path}"/>')
        if e["move"]:
            label = f"={e['move']}=>" if e["boundary"] else f"-{e['move']}->"
            out.append(f'<text class="move" x="{x2 - 8}" y="{y2 - 5}" text-anchor="end">{_e(label)}</text>')
    for n in lay["nodes"]:
        x, y = xy(n["id"])
        if n["kind"] == "base":
            out.append(f'<g class="root" data-cohort="{_e(n["cohort"])}"><rect x="{x}" y="{y}" width="{NODE_W}" '
                       f'height="{box_h}" rx="12"/><text x="{x + 12}" y="{y + 16}">base model</text>'
                       f'<text class="sub" x="{x + 12}" y="{y + 30}">step 0</text><text class="sub" x="{x + 12}" '
                       f'y="{y + 44}">cohort {_e(n["cohort"][:12])}</text></g>')
            continue
        if n["kind"] == "unread":
            out.append(f'<g class="unread"><rect x="{x}" y="{y}" width="{NODE_W}" height="{box_h}"/>'
                       f'<text x="{x + 10}" y="{y + 16}">{_e(n["id"])}</text><text class="sub" x="{x + 10}" '
                       f'y="{y + 30}">(unread): not in this ledger</text></g>')
            continue
        c = n["ck"]
        ref = c["checkpoint"]
        step = ref.rsplit("@", 1)[1]
        classes = ["ck", f"v-{verdict_of.get(ref, 'none')}"]
        if ref in claims:
            classes.append("claim")
        if ref in nominated:
            classes.append("nominated")
        cyc = " ".join(str(i) for i in cycle_of.get(ref, []))
        tip = (f"{ref} (cohort {c['cohort']}), move {c['move']}, recipe {c['recipe']}, parent {c['parent']}"
               + (" (stage boundary)" if c["boundary"] else ""))
        lines = [f'<text class="ref" x="{x + 8}" y="{y + 15}">{_e(ref)}</text>',
                 f'<text class="step" x="{x + 8}" y="{y + 29}">step {_e(step)}</text>']
        for k, exam in enumerate(exams):
            s = c["dev"].get(exam)
            low = exam in c.get("at_floor", [])
            lines.append(f'<text class="sub{" low" if low else ""}" x="{x + 8}" y="{y + 43 + 14 * k}">dev {_e(exam)} '
                         f'{"-" if s is None else format(s, ".3f")}{" (at floor)" if low else ""}</text>')
        mark = ""
        if ref in claims:
            mark = f'<text class="mark" x="{x + NODE_W - 8}" y="{y + box_h - 5}" text-anchor="end">claim</text>'
        elif ref in nominated:
            mark = f'<text class="mark" x="{x + NODE_W - 8}" y="{y + box_h - 5}" text-anchor="end">nominated</text>'
        out.append(f'<g class="{" ".join(classes)}" data-ref="{_e(ref)}" data-cycles="{cyc}" tabindex="0">'
                   f'<title>{_e(tip)}</title><rect x="{x}" y="{y}" width="{NODE_W}" height="{box_h}" rx="4"/>'
                   + "".join(lines) + mark + "</g>")
    out.append("</svg>")
    return "".join(out)


# --- the page --------------------------------------------------------------------------------------


def _table(head: Sequence[str], rows: Sequence[str], cls: str = "") -> str:
    return (f'<table class="{cls}"><thead><tr>' + "".join(f"<th>{_e(h)}</th>" for h in head)
            + "</tr></thead><tbody>" + "".join(rows) + "</tbody></table>")


def _interval(d: Mapping[str, Any]) -> str:
    from monte.stats.paired import format_interval

    if d.get("lower") is None or d.get("upper") is None:
        return "-"
    return format_interval(d["lower"], d["upper"], 3)


def _cycles_html(status: Mapping[str, Any], pair_of: Mapping[int, tuple[str, str] | None]) -> str:
    floors = status.get("floors", {})
    effect = {x["exam"]: (x.get("detectable") or {}).get("effect") for x in status.get("exams", [])}
    rows = []
    for i, c in enumerate(status["cycles"]):
        f = floors.get(f"{c['exam']}/dev")
        pair = pair_of.get(i)
        attrs = (f' data-base="{_e(pair[0])}" data-cand="{_e(pair[1])}"' if pair else "")
        eff = effect.get(c["exam"])
        rows.append(
            f'<tr class="cycle v-{_e(c["verdict"])}" data-cycle="{i}"{attrs}><td>{_e(c["checkpoint"])}</td>'
            f'<td>{_e(c["exam"])}</td><td>{c["step"]}</td><td>{_e(c["eval"])}</td><td>{_num(c["delta"])}</td>'
            f'<td>{_e(_interval(c))}</td><td class="verdict">{_e(c["verdict"])}</td>'
            f'<td>{"-" if f is None else _e(format(f["score"], ".3f") + " (" + str(f["answer"]) + ")")}</td>'
            f'<td>{"-" if eff is None else "+" + format(eff, ".3f")}</td>'
            f'<td>{"show flips" if pair else "no baseline"}</td></tr>')
    if not rows:
        return '<p class="note">no cycle yet: no checkpoint has a dev eval</p>'
    table = _table(["checkpoint", "exam", "step", "eval", "dev Δ", "95% interval", "verdict",
                    "constant-answer floor", "test read detects", ""], rows, "cycles")
    # a long search's cycles scroll in their own box (the header stays), not down the page
    return f'<div class="scroll tall">{table}</div>' if len(rows) > CYCLES_OPEN else table


def _search_html(status: Mapping[str, Any]) -> str:
    """The search verdict, as ``monte status`` prints it: each cohort's search (K tried, the best judged as
    the best of K), each cycle against its parent checkpoint, and the cycles not learning."""
    from monte.status.facts import move_verdict
    from monte.status.search import search_line

    lines = [search_line(s) for s in status.get("search", ())]
    moves = [f"{c['checkpoint']} {move_verdict(c['parent'])}" for c in status["cycles"] if c.get("parent")]
    if moves:
        lines.append("cycles vs parent: " + "; ".join(moves))
    idle = [c["checkpoint"] for c in status["cycles"] if c.get("not_learning")]
    if idle:
        lines.append("cycles not learning (at or below the constant-answer floor): " + ", ".join(idle))
    return "".join(f'<p class="note mono search">{_e(line)}</p>' for line in lines)


def _claims_html(status: Mapping[str, Any]) -> str:
    noms = {c["cohort"]: c.get("nomination") for c in status["cohorts"] if c.get("cohort")}
    out = []
    for d in status["deltas"]:
        if d.get("role") != "claim":
            continue
        nom = noms.get(d["cohort"])
        how = (f"nominated ({_e(nom)})" if nom else
               "selected by the rule: the best paired dev delta (no nomination)")
        verdict = d.get("verdict") or ("unjudged (unpaired)" if not d.get("paired") else "-")
        out.append(f'<div class="claim"><b>final claim {_e(d["target"])}</b> on {_e(d["exam"])}/test, cohort '
                   f'{_e(d["cohort"])}: test Δ {_num(d["delta"])} {_e(_interval(d))} vs test@0, '
                   f'{"paired" if d.get("paired") else "unpaired"}, n {d.get("n")}'
                   + (f", fixed {d['fixed']}, broken {d['broken']}" if d.get("fixed") is not None else "")
                   + f' → <span class="verdict v-{_e(verdict)}">{_e(verdict)}</span><br>{how} · eval '
                   f'{_e(d["run"])}</div>')
    pending = [c for c in status["cohorts"] if c.get("nomination")
               and not any(d.get("role") == "claim" and d["cohort"] == c["cohort"] for d in status["deltas"])]
    for c in pending:
        out.append(f'<div class="claim">cohort {_e(c["cohort"])}: nominated {_e(c["nomination"])}, '
                   "not yet claimed (the final test read will score it)</div>")
    return "".join(out) or '<p class="note">no final claim yet</p>'


def _listed(v: Any) -> str:
    return ", ".join(str(i) for i in v) if isinstance(v, list) else "-" if v is None else str(v)


def _budget_html(status: Mapping[str, Any]) -> str:
    exams = [x["exam"] for x in status.get("exams", [])]
    rows = []
    for c in status["cohorts"]:
        if not c.get("cohort"):
            continue
        for exam in exams:
            used = c.get("test_touches", {}).get(exam, 0)
            rows.append(f'<tr><td>{_e(c["cohort"])}</td><td>{_e(c.get("model", ""))}</td><td>{_e(exam)}</td>'
                        f'<td>{used} of {TOUCHES}</td><td>{max(TOUCHES - used, 0)}</td></tr>')
    cohort_table = _table(["cohort (base weights)", "base model", "exam", "test reads", "left"], rows, "budget")
    disc = []
    for x in status.get("exams", []):
        det = x.get("detectable") or {}
        from monte.stats.power import describe_detectable

        disc.append(f'<tr><td>{_e(x["exam"])}</td><td class="mono">{_e(x["split_sha256"][:16])}</td>'
                    f'<td>{x.get("test_reads")}</td><td>{_e(_listed(x.get("cohorts")))}</td>'
                    f'<td>{_e(_listed(x.get("experiments")))}</td>'
                    f'<td>{_e(describe_detectable(det)) if det else "-"}</td></tr>')
    return (cohort_table + "<h3>disclosure: reads of each test exam's content across this repository</h3>"
            + _table(["exam", "content sha256", "test reads", "cohorts", "experiments", "what a test read can show"],
                     disc, "disclosure"))


def _pairs(status: Mapping[str, Any], evals: Sequence[Mapping[str, Any]]) -> dict[int, tuple[str, str] | None]:
    """Each cycle's pair: its cohort's dev baseline of the exam and the cycle's eval (both with tasks)."""
    have = {e["run"] for e in evals}
    base = {(c["cohort"], k): b["run"] for c in status["cohorts"] if c.get("cohort")
            for k, b in c.get("baselines", {}).items()}
    cohort_of = {c["checkpoint"]: c["cohort"] for c in status["checkpoints"]}
    out: dict[int, tuple[str, str] | None] = {}
    for i, c in enumerate(status["cycles"]):
        b = base.get((cohort_of.get(c["checkpoint"], ""), f"{c['exam']}/dev"))
        out[i] = (b, c["eval"]) if b is not None and b in have and c["eval"] in have else None
    return out


def _json_script(obj: Any, id_: str) -> str:
    raw = json.dumps(obj, separators=(",", ":"), sort_keys=True, ensure_ascii=True)
    # nothing in it may end the script element or open a comment
    raw = raw.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
    return f'<script type="application/json" id="{id_}">{raw}</script>'


#: the fields of each run the page's runs table reads, in this order
RUN_FIELDS = ("run", "kind", "what", "target", "status", "smoke", "role", "score", "n", "recipe", "recipe_sha256",
              "source", "base_model", "cohort", "weights", "git", "box", "host", "created_at", "recovered")


@functools.cache
def page_part(name: str) -> str:
    """The page's style sheet or script, ``monte/page/<name>``: package data, shipped in the wheel."""
    from importlib.resources import files

    return (files("monte") / "page" / name).read_text(encoding="utf-8")


def render(data: Mapping[str, Any]) -> bytes:
    """The page's bytes from :func:`collect`'s data (pure)."""
    status = data["status"]
    evals = data["evals"]
    pairs = _pairs(status, evals)
    deltas = status["deltas"]
    lineage = "".join(f"<li class=\"mono\">{_e(line)}</li>" for line in status["lineage"])
    paths = f'<ul class="paths">{lineage}</ul>'
    if len(status["lineage"]) > LINEAGE_OPEN:  # a grown tree's lines fold: the tree above draws them
        paths = f'<details class="paths"><summary>{len(status["lineage"])} paths, one line each</summary>{paths}</details>'
    n_ck = len(status["checkpoints"])
    page_data = {
        "evals": [{k: e[k] for k in ("run", "key", "target", "cohort", "score", "n", "role", "blob")} for e in evals],
        "splits": data["splits"],
        # the runs table, packed (columns in RUNCOLS' order): 1,000 rows of provenance are ~400 kB as JSON
        "runs": _pack([[r.get(k) for k in RUN_FIELDS] for r in data["runs"]]),
        # what the flips' summary says of a candidate's recorded delta (against its cohort's baseline)
        "deltas": {d["run"]: [None if d.get("delta") is None else round(d["delta"], 6), d.get("fixed"),
                              d.get("broken"), d.get("verdict")] for d in deltas if not is_sealed(d.get("split"))
                   or d.get("role") == "claim"},
        # each eval's cohort baseline of its exam split (what its recorded delta is against)
        "baselines": {f"{c['cohort']}|{k}": b["run"] for c in status["cohorts"] if c.get("cohort")
                      for k, b in sorted(c.get("baselines", {}).items())},
    }
    body = f"""<header><h1>monte report: experiment {_e(status['experiment'])}</h1>
<p class="meta">environment {_e(status['environment'])} · {len(status['rows'])} runs · {n_ck} checkpoints ·
{len(status['cycles'])} cycles · {len(evals)} evals with per-task results</p></header>
<nav class="toc"><a href="#claim">final claim</a> · <a href="#budget">test reads</a> · <a href="#lineage">lineage</a>
· <a href="#cycles">cycles</a> · <a href="#flips">flips</a> · <a href="#runs">runs</a></nav>
<section id="claim"><h2>Final claim</h2>{_claims_html(status)}</section>
<section id="budget"><h2>Test reads</h2>{_budget_html(status)}</section>
<section id="lineage"><h2>Lineage</h2>
<p class="legend"><span class="k ok"></span>cycle ok <span class="k strike"></span>STRIKE
<span class="k unj"></span>unjudged (unpaired) <span class="k none"></span>no cycle ·
a double dashed hop is a stage boundary (weights-only warm start) · click a checkpoint with a cycle for its flips</p>
<div class="scroll">{tree_svg(status)}</div>
{paths}</section>
<section id="cycles"><h2>Cycles</h2>
<p class="note">the first admissible dev eval at a new highest step along each path, paired against its cohort's
dev baseline; click one for the tasks that flipped</p>{_cycles_html(status, pairs)}{_search_html(status)}</section>
<section id="flips"><h2>Flips</h2>
<div class="pick">exam split <select id="key"></select> baseline <select id="base"></select>
candidate <select id="cand"></select> <input id="search" type="search" placeholder="search prompt, answer, id"></div>
<p id="flipsum" class="note">pick two evals of one exam split</p>
<div class="scroll tall"><table class="flips"><thead><tr><th>task</th><th>flip</th><th>prompt</th><th>expected</th><th>baseline answer</th>
<th>candidate answer</th></tr></thead><tbody id="fliprows"></tbody></table></div></section>
<section id="runs"><h2>Runs and their provenance</h2>
<input id="runsearch" type="search" placeholder="filter runs">
<div class="scroll tall"><table class="runs"><thead><tr><th>run</th><th>kind</th><th>what</th><th>target</th><th>status</th><th>score</th>
<th>n</th><th>recipe</th><th>recipe sha256</th><th>source</th><th>base model</th><th>weights (cohort)</th>
<th>commit</th><th>host</th><th>created</th></tr></thead><tbody id="runrows"></tbody></table></div></section>"""
    page = (f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
            f'<meta name="viewport" content="width=device-width, initial-scale=1">'
            f"<title>monte report: {_e(status['experiment'])}</title><style>{page_part('report.css')}</style></head><body>"
            f"{body}{_json_script(page_data, 'data')}<script>{page_part('report.js')}</script></body></html>\n")
    return page.encode()


@dataclass(frozen=True)
class ReportWritten(Result):
    """``monte report``: the page's path and size, and what it shows."""

    path: str
    bytes: int
    experiment: str
    runs: int
    checkpoints: int
    cycles: dict[str, int]
    evals: int
    claims: list[str]


def write_report(*, out: Path | str, experiment: str | None = None, ws: Workspace | None = None) -> ReportWritten:
    """Read the ledger tip, write the page to ``out`` atomically; what it shows."""
    from monte.workspace import open_workspace

    path = check_out(out)
    ws = ws or open_workspace(require_data_root=False)
    data = collect(ws, experiment)
    page = render(data)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        tmp.write_bytes(page)
        os.replace(tmp, path)
    except OSError as e:
        raise error("E_STORAGE", f"cannot write {path}: {e.strerror or e}",
                    "write the page to a folder you can write to (--out DIR/report.html)") from None
    finally:
        tmp.unlink(missing_ok=True)
    status = data["status"]
    verdicts = {"ok": 0, "STRIKE": 0, "unjudged": 0}
    for c in status["cycles"]:
        verdicts[c["verdict"]] = verdicts.get(c["verdict"], 0) + 1
    return ReportWritten(path=str(path), bytes=len(page), experiment=status["experiment"], runs=len(status["rows"]),
                         checkpoints=len(status["checkpoints"]), cycles=verdicts, evals=len(data["evals"]),
                         claims=[d["target"] for d in status["deltas"] if d.get("role") == "claim"])

