"""A checkpoint's Hugging Face model card (``README.md``): where the weights come from, in the
ledger's own terms, so a promoted folder or a hub revision carries its story.

The card holds the ``lineage:`` line, the ledger commit it was written at, every test read of the
checkpoint's cohort that bears on it (the baseline ``test@0`` and any final claim on this
checkpoint) with its verdict, the exam and grader hashes, each file's sha256 as the lineage
commit records it, and the ``monte train`` commands that reproduce the checkpoint. Its metadata
(``huggingface_hub.ModelCardData``) has ``base_model`` (when the base is a hub id) and the eval
results as a model index. ``monte promote`` writes it into the destination; a ``--push`` chunk
uploads it with the checkpoint (before any read of the checkpoint exists).
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from monte.hashing import sha256_bytes
from monte.ledger.predicates import is_admissible, is_sealed, is_test_read
from monte.ledger.records import Measurement, RunRow
from monte.ledger.rules import Checkpoint, read_role

#: A hub model id (``org/name``), not a folder: only such a base goes in ``base_model``.
_HUB_ID = re.compile(r"[A-Za-z0-9][\w.-]*/[\w.-]+")


@dataclass
class Story:
    experiment: str
    ref: str  # RUN@STEP
    cohort: str
    base_model: str  # as the experiment or the chunk named it (a folder or a hub id)
    lineage: str  # monte status's ``lineage:`` line
    ledger_commit: str
    ledger_ref: str
    lineage_commit: str  # this checkpoint's lineage commit ("" before it exists: a --push upload)
    files: dict[str, str]
    hops: list[dict[str, Any]]  # root first: {run, recipe, recipe_sha256, source, parent, start, end, boundary}
    meas: Measurement | None = None
    reads: list[RunRow] = field(default_factory=list)  # eval rows: this checkpoint's, and test@0
    notes: list[str] = field(default_factory=list)
    #: the card's license: the base model's (its own card's ``license``), else "other"
    license: str = "other"


def base_license(folder: Path | None) -> str | None:
    """The ``license`` of a model folder's own card (``README.md`` front matter), if it has one."""
    if folder is None:
        return None
    try:
        text = (folder / "README.md").read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None
    m = re.match(r"---\n(.*?)\n---", text, re.S)
    found = re.search(r"^license:\s*['\"]?([\w.+-]+)['\"]?\s*$", m.group(1), re.M) if m else None
    return found.group(1) if found else None


def baseline_reads(rows: Sequence[RunRow], cohort: str) -> list[RunRow]:
    """The cohort's admissible test baselines (test@0): what a final claim pairs against."""
    return [r for r in rows if is_admissible(r) and is_test_read(r) and r.cohort == cohort
            and read_role(r) == "baseline"]


def reads_for(rows: Sequence[RunRow], ck: Checkpoint) -> list[RunRow]:
    """The admissible eval rows that speak of ``ck``: its own evals (dev, and a final claim on test)
    and the cohort's test baseline a claim pairs against."""
    out = []
    for r in rows:
        if not is_admissible(r) or r.cohort != ck.cohort:
            continue
        t = r.plan.get("target") or {}
        on_ck = t.get("kind") == "checkpoint" and t.get("run") == ck.run and int(t.get("step", -1)) == ck.step
        baseline = is_sealed(r.split) and read_role(r) == "baseline"
        if on_ck or baseline:
            out.append(r)
    return out


def hops_for(rows: Sequence[RunRow], cks: Sequence[Checkpoint], ck: Checkpoint) -> list[dict[str, Any]]:
    """The training moves from the base model to ``ck``, root first."""
    by_run = {r.run: r for r in rows if r.kind == "train"}
    first = {c.run: c for c in reversed(cks)}
    out: list[dict[str, Any]] = []
    cur: tuple[str, int] | None = (ck.run, ck.step)
    seen: set[str] = set()
    while cur is not None and cur[0] in by_run and cur[0] not in seen:
        seen.add(cur[0])
        row, c = by_run[cur[0]], first.get(cur[0])
        rec = row.plan.get("recipe") or {}
        parent = row.plan.get("parent")
        out.insert(0, {"run": row.run, "recipe": rec.get("name", "?"), "recipe_sha256": rec.get("sha256", ""),
                       "algorithm": rec.get("algorithm", "?"), "source": row.plan.get("source", "?"),
                       "parent": f"{parent['run']}@{parent['step']}" if parent else None,
                       "start": int(row.plan.get("start_step", 0)), "end": cur[1],
                       "boundary": bool(c.boundary) if c else bool(row.plan.get("boundary"))})
        cur = (parent["run"], int(parent["step"])) if parent else None
    return out


def lineage_line(hops: Sequence[dict[str, Any]]) -> str:
    """The hops in ``monte status``'s ``lineage:`` notation."""
    from monte.status import LEGEND, Hop, render_path

    path = [Hop(h["run"], f"{h['algorithm']}:{h['source']}", h["start"], h["end"], h["boundary"],
                (h["parent"].split("@")[0], int(h["parent"].split("@")[1])) if h["parent"] else None) for h in hops]
    line = f"lineage: {render_path(path)}"
    return line + (f"  {LEGEND}" if any(h.boundary for h in path) else "")


def reproduce(experiment: str, hops: Sequence[dict[str, Any]]) -> list[str]:
    """The ``monte train`` commands, one per chunk, that retrace the checkpoint's lineage (a new
    run gets a new id: each ``--parent`` names the checkpoint the previous command made)."""
    cmds = []
    for h in hops:
        start = f"--parent {h['parent']}" if h["parent"] else "--from-base"
        cmds.append(f"monte train -e {experiment} --recipe {h['recipe']} --source {h['source']} {start}"
                    f"   # recipe sha256 {h['recipe_sha256'][:12]}, steps {h['start']} -> {h['end']}")
    return cmds


def _verdict(r: RunRow) -> str:
    d = r.delta or {}
    if read_role(r) == "baseline" and is_sealed(r.split):
        return "baseline (test@0)"
    if not d.get("paired"):
        return "unjudged (unpaired)"
    return str(d.get("verdict") or "unjudged")


def render(s: Story) -> str:
    """The card's text: YAML metadata (``ModelCardData``) and a markdown body."""
    from huggingface_hub import EvalResult, ModelCardData

    model_name = f"{s.experiment} {s.ref}"
    results = [EvalResult(task_type="text-generation", dataset_type=f"monte/{r.exam}", dataset_name=str(r.exam),
                          dataset_split=r.split, metric_type="accuracy", metric_value=r.score,
                          metric_name=f"{r.exam}/{r.split} accuracy (monte eval run {r.run})")
               for r in s.reads if r.score is not None and not _base(r)]
    base = s.base_model if _HUB_ID.fullmatch(s.base_model) else None
    data = ModelCardData(library_name="transformers", base_model=base, tags=["monte", *_algos(s)],
                         model_name=model_name, eval_results=results or None, license=s.license)
    body = [f"# {s.experiment}: checkpoint {s.ref}", "",
            f"Trained with monte from the base model `{s.base_model}` (cohort `{s.cohort}`).",
            "", "```", s.lineage, "```", "",
            f"- ledger commit: `{s.ledger_commit}` (`{s.ledger_ref}`)"]
    if s.lineage_commit:
        body.append(f"- lineage commit of this checkpoint: `{s.lineage_commit}`")
    body += s.notes
    if s.license == "other":
        body.append("- license: `other`: the base model's card names none; its terms, and the training data's, apply")
    body += ["", "## Test reads", ""]
    tests = [r for r in s.reads if is_sealed(r.split)]
    if tests:
        body += ["| exam | read | run | score | n | delta [95% CI] | verdict |", "|---|---|---|---|---|---|---|"]
        for r in tests:
            d = r.delta or {}
            ci = (f"{d['delta']:+.3f} [{d.get('lower', float('nan')):+.3f}, {d.get('upper', float('nan')):+.3f}]"
                  if isinstance(d.get("delta"), int | float) else "-")
            what = "test@0 (base model)" if _base(r) else f"final claim on {s.ref}"
            body.append(f"| {r.exam} | {what} | `{r.run}` | {_num(r.score)} | {r.n or '-'} | {ci} | {_verdict(r)} |")
    else:
        body.append("No test read of this cohort yet.")
    dev = [r for r in s.reads if r.split == "dev"]
    if dev:
        body += ["", "## Dev evals of this checkpoint", "", "| exam | run | score | n | verdict |", "|---|---|---|---|---|"]
        body += [f"| {r.exam} | `{r.run}` | {_num(r.score)} | {r.n or '-'} | {_verdict(r)} |" for r in dev]
    if s.meas is not None:
        grader = json.dumps(s.meas.grader, sort_keys=True, separators=(",", ":"))
        body += ["", "## Exams and grader", "",
                 f"- environment `{s.meas.environment}`, fingerprint `{s.meas.environment_fingerprint}`",
                 f"- grader `{grader}` (sha256 of its canonical JSON `{sha256_bytes(grader.encode())}`)"]
        for exam, x in sorted(s.meas.exams.items()):
            for split, sp in sorted(x.splits.items()):
                body.append(f"- exam `{exam}` {split}: {sp.n} items, sha256 `{sp.sha256}`")
    body += ["", "## Reproduce", "", "```"] + reproduce(s.experiment, s.hops) + ["```", "",
             "## Files", "", "Every file's sha256, as the lineage commit records it:", "",
             "| file | sha256 |", "|---|---|"]
    body += [f"| `{name}` | `{digest}` |" for name, digest in sorted(s.files.items())]
    return f"---\n{data.to_yaml()}\n---\n\n" + "\n".join(body) + "\n"


def _base(r: RunRow) -> bool:
    return (r.plan.get("target") or {}).get("kind") == "base"


def _algos(s: Story) -> list[str]:
    return list(dict.fromkeys(str(h["algorithm"]) for h in s.hops))


def _num(x: float | None) -> str:
    return "-" if x is None else f"{x:.3f}"
