"""The tools ``monte mcp`` serves: the loop's verbs, each a JSON-schema input, one
:mod:`monte.api` call and a result sized for a context window (:mod:`monte.mcp.paging`).

Three kinds, by what they can change (:data:`KINDS`): ``read`` tools change nothing; ``write``
tools append to the record (train, a dev eval, a nomination, a frozen dataset, a recipe file)
and never rewrite it; ``test`` tools spend the sealed test split's budget, so they are
destructive and served only with ``--allow-test``. No tool returns a sealed item, answer or
per-item test outcome: the per-item tools read dev evals only (:mod:`monte.diff` refuses a test
eval), and a test read's result is its row's score and delta, as ``monte status`` prints them.

The catalog imports nothing of the MCP SDK; :mod:`monte.mcp.server` serves it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, cast

from monte.errors import error
from monte.mcp.paging import BUDGET, fit, page, size

if TYPE_CHECKING:
    from monte.api.shapes import DatasetShown
    from monte.diff import Diff

Kind = Literal["read", "write", "test"]
KINDS: tuple[Kind, ...] = ("read", "write", "test")


class Call:
    """What a running tool may tell the server: progress (done of total), and each transition
    of the run it started (so a cancelled call can stop that run as ``monte stop`` does)."""

    def __init__(self, progress: Callable[[int, int], None] | None = None) -> None:
        self._progress = progress
        self.run: tuple[str, str] | None = None  # (experiment, run) once one has started
        self.cancelled = False

    def progress(self, done: int, total: int) -> None:
        if self.cancelled:  # the run's own failure path records it; the abandoned record stands
            raise error("E_STOPPED", "cancelled by the MCP client", "")
        if self._progress is not None:
            self._progress(done, total)

    def transition(self, row: Any, what: str) -> None:
        if what == "started":
            self.run = (str(row.experiment), str(row.run))


Handler = Callable[[dict[str, Any], Call], Any]


@dataclass(frozen=True)
class Tool:
    name: str
    kind: Kind
    description: str
    properties: dict[str, Any]
    required: tuple[str, ...]
    handler: Handler
    #: a long tool: it reports progress and can be cancelled
    long: bool = False
    title: str = field(default="")

    def input_schema(self) -> dict[str, Any]:
        return {"type": "object", "properties": self.properties, "required": list(self.required),
                "additionalProperties": False}

    def annotations(self) -> dict[str, Any]:
        """MCP's hints: read tools read only; write tools append (never destroy; not idempotent:
        each call is a new record); test tools spend the seal's budget, which nothing gives back."""
        return {"title": self.title or self.name.replace("_", " "), "readOnlyHint": self.kind == "read",
                "destructiveHint": self.kind == "test", "idempotentHint": self.kind == "read",
                "openWorldHint": False}


# --- the inputs, by name (one spelling of each across the tools) ---------------------------------

def _s(description: str, **kw: Any) -> dict[str, Any]:
    return {"type": "string", "description": description, **kw}


EXPERIMENT = _s("The experiment (default: the only one).")
RUN = _s("A run id (RUN, or EXP/RUN).")
CHECKPOINT = _s("A checkpoint, RUN@STEP.")
CURSOR = _s("The next_cursor of the previous page; none for the first.")
LIMIT = {"type": "integer", "minimum": 1, "maximum": 500, "description": "At most this many rows (default 50; "
         "fewer when the page would pass the result's size budget)."}
ONLY = {"type": "string", "enum": ["flips", "all", "fixed", "broken", "same"],
        "description": "Which items: flips (fixed and broken; the default), all, fixed, broken, same."}
GROUP_BY = _s("Group the counts by this field of the items' metadata (dotted for a nested one).")
RECIPE = _s("A recipe name (the recipes tool lists them).")
SOURCE = _s("A frozen dataset (sft) or trainable environment.")
PARENT = _s("Continue (same recipe) or warm-start (another recipe) from this checkpoint, RUN@STEP.")
FROM_BASE = {"type": "boolean", "description": "Open a fresh branch from the base model at step 0."}
STEP = {"type": "integer", "minimum": 0, "description": "The checkpoint at this absolute step."}
SECTION = {"type": "string", "enum": ["brief", "rows", "deltas", "checkpoints", "cycles", "lineage"],
           "description": "brief (the default): the one-screen summary; or one section of the full status, paged."}


# --- read tools ---------------------------------------------------------------------------------

def _status(a: dict[str, Any], call: Call) -> Any:
    from monte import api

    section = a.get("section") or "brief"
    if section == "brief":
        return fit(api.status_brief(experiment=a.get("experiment")).to_dict())
    doc: dict[str, Any] = dict(api.status(experiment=a.get("experiment")))
    return page({"experiment": doc.get("experiment"), "section": section}, section,
                list(doc.get(section) or []), cursor=a.get("cursor"), limit=a.get("limit"))


def _show(a: dict[str, Any], call: Call) -> Any:
    from monte import api

    return fit(dict(api.show(ref=a["run"], experiment=a.get("experiment"))))


def _logs(a: dict[str, Any], call: Call) -> Any:
    from monte import api
    from monte.runs.curve import read_events, summary

    events = read_events(api.logs(ref=a["run"], experiment=a.get("experiment")))
    head = {"run": a["run"], "curve": summary(events)}
    tail = a.get("tail")
    rows = events[-tail:] if tail else events
    return page(head, "events", rows, cursor=a.get("cursor"), limit=a.get("limit"))


def _per_item(diff: Diff, a: dict[str, Any]) -> Any:
    """A diff paged by item; its groups, most flips first, as many as a third of the budget holds
    (a field with a value per item, say, has as many groups as items: ``groups_total`` says so)."""
    doc = diff.to_dict()
    items = doc.pop("items")
    groups = doc.get("groups")
    if groups:
        groups.sort(key=lambda g: (-(g["fixed"] + g["broken"]), str(g["group"])))
        doc["groups_total"] = len(groups)
        while len(groups) > 1 and size(groups) > BUDGET // 3:
            del groups[max(1, len(groups) * 2 // 3):]
    return page(doc, "items", items, cursor=a.get("cursor"), limit=a.get("limit"))


def _flips(a: dict[str, Any], call: Call) -> Any:
    from monte import api

    return _per_item(api.flips(run=a["run"], experiment=a.get("experiment"), only=a.get("only") or "flips",
                               group_by=a.get("group_by")), a)


def _diff(a: dict[str, Any], call: Call) -> Any:
    from monte import api

    return _per_item(api.diff(run_a=a["run_a"], run_b=a["run_b"], experiment=a.get("experiment"),
                              only=a.get("only") or "flips", group_by=a.get("group_by")), a)


def _recipes(a: dict[str, Any], call: Call) -> Any:
    from monte import api

    shown = api.config_show()
    rows = [{"name": n, "path": p} for n, p in sorted(shown.recipes.items())]
    return page({"recipe_path": shown.recipe_path}, "recipes", rows, cursor=a.get("cursor"), limit=a.get("limit"))


def _environments(a: dict[str, Any], call: Call) -> Any:
    from monte import api

    return page({}, "environments", [e.to_dict() for e in api.env_list_local()], cursor=a.get("cursor"),
                limit=a.get("limit"))


def _datasets(a: dict[str, Any], call: Call) -> Any:
    from monte import api

    rows = [{k: v for k, v in d.to_dict().items() if k in ("name", "kind", "rows", "columns", "sha256")}
            for d in cast("list[DatasetShown]", api.dataset_list())]
    return page({}, "datasets", rows, cursor=a.get("cursor"), limit=a.get("limit"))


def _train_plan(a: dict[str, Any]) -> Any:
    from monte import api

    return api.plan_train(recipe=a["recipe"], source=a["source"], parent=a.get("parent"),
                          from_base=bool(a.get("from_base")), experiment=a.get("experiment"))


def _dev_plan(a: dict[str, Any]) -> Any:
    from monte import api

    return api.plan_eval(experiment=a.get("experiment"), split="dev", step=a.get("step"),
                         checkpoint=a.get("checkpoint"))


def _plan_train(a: dict[str, Any], call: Call) -> Any:
    plan = _train_plan(a)
    return fit({"dry_run": True, "experiment": plan.experiment, "plan": plan.lines()})


def _plan_eval(a: dict[str, Any], call: Call) -> Any:
    plan = _dev_plan(a)
    return fit({"dry_run": True, "experiment": plan.experiment, "target": plan.target.label,
                "plan": plan.lines()})


# --- write tools --------------------------------------------------------------------------------

def _train(a: dict[str, Any], call: Call) -> Any:
    from monte import api

    r = api.run_train(_train_plan(a), on_progress=call.progress, on_transition=call.transition)
    row = r.run
    plan = row.get("plan") or {}
    return fit({"experiment": r.experiment, "run": row["run"], "status": row["status"],
                "checkpoints": [f"{row['run']}@{c['step']}" for c in row.get("checkpoints") or ()],
                "recipe": (plan.get("recipe") or {}).get("name"), "source": plan.get("source"),
                "parent": plan.get("parent"), "boundary": plan.get("boundary"), "curve": r.curve})


def _eval_rows(r: Any) -> dict[str, Any]:
    """An eval's rows as an agent decides on them: score, n, the paired delta, the floor. A
    test read's row holds nothing per item: its score and delta are what status prints."""
    keep = ("run", "exam", "split", "step", "score", "n", "role", "delta", "status", "smoke")
    return {"experiment": r.experiment,
            "runs": [{**{k: row.get(k) for k in keep},
                      "floor": r.floors.get(f"{row.get('exam')}/{row.get('split')}"),
                      "exact_match": r.exact.get(f"{row.get('exam')}/{row.get('split')}"),
                      "grader": r.rules.get(str(row.get("exam")))} for row in r.runs],
            "settings": r.settings}


def _eval(a: dict[str, Any], call: Call) -> Any:
    from monte import api

    return fit(_eval_rows(api.run_eval(_dev_plan(a), on_progress=call.progress, on_transition=call.transition)))


def _nominate(a: dict[str, Any], call: Call) -> Any:
    from monte import api

    return fit(api.nominate(ref=a["checkpoint"], experiment=a.get("experiment")).to_dict())


def _dataset_add(a: dict[str, Any], call: Call) -> Any:
    from monte import api

    r = api.dataset_add(name=a["name"], from_file=Path(a["from_file"]), kind=a.get("kind"))
    return fit(r.to_dict())


def _recipe_add(a: dict[str, Any], call: Call) -> Any:
    from monte import api

    return fit(api.recipe_add(name=a["name"], text=a["yaml"]).to_dict())


# --- the sealed test split: two reads per cohort --------------------------------------------------

def _test_read(a: dict[str, Any], call: Call, role: str) -> Any:
    from monte import api

    plan = api.plan_eval(experiment=a.get("experiment"), split="test")  # the rules pick the target
    wrong = [e.exam for e in plan.exams if e.role != role]
    if wrong:
        other = "test_baseline" if role == "claim" else "claim"
        raise error("E_REFUSED", f"this test read would be the {'baseline' if role == 'claim' else 'claim'} "
                    f"of {', '.join(wrong)}, not its {role}", f"call the {other} tool for that read")
    return fit(_eval_rows(api.run_eval(plan, on_progress=call.progress, on_transition=call.transition)))


def _test_baseline(a: dict[str, Any], call: Call) -> Any:
    return _test_read(a, call, "baseline")


def _claim(a: dict[str, Any], call: Call) -> Any:
    return _test_read(a, call, "claim")


PAGED = {"cursor": CURSOR, "limit": LIMIT}

TOOLS: tuple[Tool, ...] = (
    Tool("status", "read", "What an agent decides on: the best paired dev delta per exam with its 95% interval "
         "and verdict, the constant-answer floor, the test reads left, the last move. section= one part of the "
         "full status (rows, deltas, checkpoints, cycles, lineage), paged.",
         {"experiment": EXPERIMENT, "section": SECTION, **PAGED}, (), _status),
    Tool("show", "read", "One run's full row: plan, recipe, launch, score, delta, checkpoints.",
         {"run": RUN, "experiment": EXPERIMENT}, ("run",), _show),
    Tool("logs", "read", "A run's event file, paged, with its training curve in a few numbers (first, last and "
         "lowest loss, grad norm, samples and epochs seen, seconds). tail= only the last N events.",
         {"run": RUN, "experiment": EXPERIMENT,
          "tail": {"type": "integer", "minimum": 1, "description": "Only the last N events."}, **PAGED},
         ("run",), _logs),
    Tool("flips", "read", "A dev eval against the baseline of its paired delta, item by item: prompt, expected "
         "answer, both outputs and scores, fixed or broken; counts grouped by a metadata field. Dev only.",
         {"run": RUN, "experiment": EXPERIMENT, "only": ONLY, "group_by": GROUP_BY, **PAGED}, ("run",), _flips),
    Tool("diff", "read", "Two dev evals of one exam, item by item: prompt, expected answer, both outputs, the "
         "flip; counts grouped by a metadata field. Dev only (a test eval is refused E_SEALED).",
         {"run_a": RUN, "run_b": RUN, "experiment": EXPERIMENT, "only": ONLY, "group_by": GROUP_BY, **PAGED},
         ("run_a", "run_b"), _diff),
    Tool("recipes", "read", "The recipes a train call can name, first match on the search path.", dict(PAGED), (),
         _recipes),
    Tool("environments", "read", "The frozen environments on this data root: exams, splits, benchmarks.",
         dict(PAGED), (), _environments),
    Tool("datasets", "read", "The frozen datasets on this data root: name, kind, rows, sha256.", dict(PAGED), (),
         _datasets),
    Tool("plan_train", "read", "A train call's plan, every refusal checked; nothing runs or is written.",
         {"recipe": RECIPE, "source": SOURCE, "parent": PARENT, "from_base": FROM_BASE, "experiment": EXPERIMENT},
         ("recipe", "source"), _plan_train),
    Tool("plan_eval", "read", "A dev eval's plan, every refusal checked; nothing runs or is written.",
         {"checkpoint": CHECKPOINT, "step": STEP, "experiment": EXPERIMENT}, (), _plan_eval),
    Tool("train", "write", "Train one chunk (the experiment's steps_per_chunk steps) and record its checkpoint; "
         "returns the run, its checkpoints and its loss curve. Reports progress; cancelling records the run "
         "abandoned, as `monte stop` does.",
         {"recipe": RECIPE, "source": SOURCE, "parent": PARENT, "from_base": FROM_BASE, "experiment": EXPERIMENT},
         ("recipe", "source"), _train, long=True),
    Tool("eval", "write", "Score a checkpoint (default: the newest) or the base on dev and record the row; returns "
         "the score, the paired delta with its interval and verdict, the floor. Reports progress.",
         {"checkpoint": CHECKPOINT, "step": STEP, "experiment": EXPERIMENT}, (), _eval, long=True),
    Tool("nominate", "write", "Name the checkpoint the final test claim scores (it must carry an admissible dev eval).",
         {"checkpoint": CHECKPOINT, "experiment": EXPERIMENT}, ("checkpoint",), _nominate),
    Tool("dataset_add", "write", "Freeze a JSONL file as a dataset (rows {\"input\", \"output\"} for sft); a name "
         "is frozen once.",
         {"name": _s("The dataset's name."), "from_file": _s("A JSONL file (a path on this machine)."),
          "kind": {"type": "string", "enum": ["sft"], "description": "What the rows are for (sft: supervised demonstrations)."}},
         ("name", "from_file"), _dataset_add),
    Tool("recipe_add", "write", "Write recipes/NAME.yaml once it resolves as a recipe (every bad key named); a "
         "taken name is refused.",
         {"name": _s("The recipe's name."), "yaml": _s("The recipe, as YAML: algorithm and TRL settings.")},
         ("name", "yaml"), _recipe_add),
    Tool("test_baseline", "test", "Spend the first of the cohort's two sealed test reads: test@0 on the base model. "
         "Returns its score only.", {"experiment": EXPERIMENT}, (), _test_baseline, long=True),
    Tool("claim", "test", "Spend the cohort's last sealed test read: the final claim on the nominated (or best "
         "dev) checkpoint. Returns its score, paired delta and verdict; a third read is refused.",
         {"experiment": EXPERIMENT}, (), _claim, long=True),
)


def served(*, read_only: bool = False, allow_test: bool = False) -> tuple[Tool, ...]:
    """The tools a server lists: read tools always; write tools unless ``read_only``; the test
    tools only with ``allow_test`` (and never ``read_only``: a test read writes a record)."""
    return tuple(t for t in TOOLS if t.kind == "read" or (t.kind == "write" and not read_only)
                 or (t.kind == "test" and allow_test and not read_only))


def switched_off(tool: Tool, *, read_only: bool, allow_test: bool) -> Exception:
    """The refusal of a call to a tool this server does not serve."""
    if tool.kind == "test":
        return error("E_SEALED", f"the {tool.name} tool spends the sealed test split; this server was started "
                     "without it", "restart the server with `monte mcp --allow-test`, or run `monte eval --split "
                     "test` yourself")
    return error("E_REFUSED", f"the {tool.name} tool writes to the record; this server was started --read-only",
                 "restart the server without --read-only (`monte mcp`)")
