"""``monte diff RUN_A RUN_B``: two dev evals of one exam, item by item (:func:`diff`).

Each item of the frozen dev split with its prompt, expected answer, both recorded outputs and
scores, and the flip (``fixed``: A failed, B passed; ``broken``: the other way; ``same``), paged
and optionally grouped by a field of the item's metadata. ``tasks.jsonl`` holds only id, score
and answer, so the prompt and the expected answer come from the frozen split on the data root,
its sha256 proved against the measurement first.

Dev only, by construction: an eval of the test split is refused (``E_SEALED``) before anything
of it is read, so no sealed item, answer or per-item test outcome leaves through here.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from monte.errors import error
from monte.result_type import Result
from monte.workspace import Workspace, open_workspace

#: a score at or above this passes, below fails: a partial credit is not a pass, so a flip is an
#: exact-match flip (the verdict on fractional scores has its own method: docs/statistics.md)
PASS = 1.0
FLIPS = ("fixed", "broken")


@dataclass(frozen=True)
class Outcome(Result):
    """One eval's answer to an item (``tasks.jsonl``) and its score."""

    output: Any
    score: float | None


@dataclass(frozen=True)
class ItemFlip(Result):
    """One item of the dev split: its prompt and expected answer, both outcomes, the flip, and
    the value of the metadata field the diff groups by (None when it groups by none)."""

    id: str
    prompt: Any
    expected: Any
    a: Outcome
    b: Outcome
    flip: str
    group: Any = None


@dataclass(frozen=True)
class GroupCount(Result):
    """How many items of one value of the grouping field were fixed, broken and the same."""

    group: str
    fixed: int
    broken: int
    same: int


@dataclass(frozen=True)
class Diff(Result):
    """``monte diff``: the two evals (run id and what each scored), the counts of each flip over
    ``n`` items, the groups (``group_by`` given) and the items ``only`` keeps."""

    experiment: str
    exam: str
    split: str
    a: str
    b: str
    a_target: str
    b_target: str
    n: int
    counts: dict[str, int]
    only: str
    group_by: str | None
    groups: tuple[GroupCount, ...] | None
    items: tuple[ItemFlip, ...]

    def to_dict(self) -> dict[str, Any]:
        """As ``--json`` has always printed it: an item has a ``group`` key only in a grouped diff."""
        out = super().to_dict()
        if self.group_by is None:
            for item in out["items"]:
                del item["group"]
        return out


def _eval_row(ws: Workspace, ref: str, experiment: str | None) -> tuple[str, dict[str, Any]]:
    from monte.reads import row_json

    exp, row = row_json(ws, ref, experiment)
    if row["kind"] != "eval":
        raise error("E_USAGE", f"run {row['run']} is a train run; a diff compares two evals",
                    "name two dev evals (`monte status` lists them)")
    if row["split"] != "dev":
        raise error("E_SEALED", f"run {row['run']} read the sealed test split; its items never leave the seal",
                    "diff two dev evals (`monte status` lists them)")
    if row["status"] != "succeeded" or row["smoke"]:
        raise error("E_NOT_EVIDENCE", f"run {row['run']} is {row['status']}{' (smoke)' if row['smoke'] else ''}; "
                    "it holds no graded items", "diff two succeeded dev evals (`monte status` lists them)")
    return exp, row


def _tasks(ws: Workspace, exp: str, run: str) -> dict[str, dict[str, Any]]:
    from monte import jsonl
    from monte.ledger.experiment import Ledger
    from monte.ledger.views import run_dir

    raw = Ledger(ws.store, exp).snapshot().read(f"{run_dir(run)}/tasks.jsonl")
    if raw is None:
        raise error("E_NOT_FOUND", f"run {run} records no tasks.jsonl", "diff two succeeded dev evals")
    return {str(t["id"]): t for t in jsonl.load_lines(raw)}


def split_items(ws: Workspace, exp: str, exam: str, split: str = "dev") -> list[dict[str, Any]]:
    """The frozen split's items from the data root, its bytes proved against the measurement."""
    from monte import jsonl
    from monte.ledger.experiment import Ledger

    if split != "dev":  # never a sealed split: this module's promise
        raise error("E_SEALED", f"the {split} split is sealed", "read dev items only")
    ledger = Ledger(ws.store, exp)
    sp = ledger.measurement_view(ledger.snapshot()).exams[exam].splits[split]
    path = ws.data_root / sp.path
    try:
        data = path.read_bytes()
    except OSError:
        raise error("E_NOT_FOUND", f"the frozen {exam}/{split} split is not on this data root ({path})",
                    "bring it here with `monte env install ENV`") from None
    if hashlib.sha256(data).hexdigest() != sp.sha256:
        raise error("E_INTEGRITY", f"{path} does not match the sha256 the measurement froze",
                    "restore it with `monte env install ENV`")
    return jsonl.load_lines(data)


def _field(meta: Any, dotted: str) -> Any:
    for part in dotted.split("."):
        if not isinstance(meta, Mapping) or part not in meta:
            return None
        meta = meta[part]
    return meta if isinstance(meta, str | int | float | bool) or meta is None else json.dumps(meta, sort_keys=True)


def flip(a: float | None, b: float | None) -> str:
    """``fixed`` (A failed, B passed), ``broken`` (A passed, B failed) or ``same``."""
    pa, pb = (a or 0.0) >= PASS, (b or 0.0) >= PASS
    return "fixed" if pb and not pa else "broken" if pa and not pb else "same"


def diff(*, run_a: str, run_b: str, experiment: str | None = None, only: str = "flips",
         group_by: str | None = None, ws: Workspace | None = None) -> Diff:
    """Per item of one dev exam: ``id``, ``prompt``, ``expected``, ``a``/``b`` (output, score),
    ``flip``, and ``group`` (the metadata field ``group_by`` names, dotted for nested). ``only``:
    ``flips`` (fixed and broken items; the default), ``all``, ``fixed``, ``broken``, ``same``.
    ``groups``: per group value, how many items fixed, broken and same."""
    if only not in ("flips", "all", "fixed", "broken", "same"):
        raise error("E_USAGE", f"--only {only!r} is not one of flips, all, fixed, broken, same",
                    "pass --only flips (the default), all, fixed, broken or same")
    ws = ws or open_workspace()
    exp_a, a = _eval_row(ws, run_a, experiment)
    exp_b, b = _eval_row(ws, run_b, experiment or exp_a)
    if (exp_a, a["exam"]) != (exp_b, b["exam"]):
        raise error("E_USAGE", f"runs {a['run']} ({exp_a}, {a['exam']}) and {b['run']} ({exp_b}, {b['exam']}) "
                    "evaluate different exams", "diff two dev evals of one exam of one experiment")
    ta, tb = _tasks(ws, exp_a, a["run"]), _tasks(ws, exp_b, b["run"])
    items = split_items(ws, exp_a, str(a["exam"]))
    counts = {"fixed": 0, "broken": 0, "same": 0}
    groups: dict[str, dict[str, int]] = {}
    rows: list[ItemFlip] = []
    for it in items:
        i = str(it["id"])
        if i not in ta or i not in tb:
            continue
        sa, sb = ta[i].get("score"), tb[i].get("score")
        f = flip(sa, sb)
        counts[f] += 1
        group = _field(it.get("metadata"), group_by) if group_by else None
        if group_by:
            g = groups.setdefault(str(group), {"fixed": 0, "broken": 0, "same": 0})
            g[f] += 1
        if only == "all" or f == only or (only == "flips" and f in FLIPS):
            rows.append(ItemFlip(id=i, prompt=it.get("prompt"), expected=it.get("answer"),
                                 a=Outcome(output=ta[i].get("answer"), score=sa),
                                 b=Outcome(output=tb[i].get("answer"), score=sb), flip=f, group=group))
    return Diff(experiment=exp_a, exam=a["exam"], split="dev", a=a["run"], b=b["run"],
                a_target=_target(a), b_target=_target(b), n=sum(counts.values()), counts=counts,
                only=only, group_by=group_by,
                groups=tuple(GroupCount(group=k, **v) for k, v in sorted(groups.items())) if group_by else None,
                items=tuple(rows))


def _target(row: Mapping[str, Any]) -> str:
    t = (row.get("plan") or {}).get("target") or {}
    return "base" if t.get("kind") == "base" else f"{t.get('run')}@{t.get('step')}"


def flips(*, run: str, experiment: str | None = None, only: str = "flips", group_by: str | None = None,
          ws: Workspace | None = None) -> Diff:
    """:func:`diff` of a dev eval against the baseline its paired delta was taken against."""
    from monte.reads import row_json

    ws = ws or open_workspace()
    exp, row = _eval_row(ws, run, experiment)
    baseline = (row.get("delta") or {}).get("baseline")
    if not baseline:
        raise error("E_UNPAIRABLE", f"run {row['run']} has no paired delta (it is a baseline, or unpaired)",
                    "name a checkpoint's dev eval, or diff two runs with `monte diff RUN_A RUN_B`")
    row_json(ws, str(baseline), exp)  # it exists in this experiment
    return diff(run_a=str(baseline), run_b=row["run"], experiment=exp, only=only, group_by=group_by, ws=ws)
