"""Plain JSONL exams: ``monte env add --dev file:DEV.jsonl --test file:TEST.jsonl --grader G --as NAME``.

Each row is ``{"id", "prompt", "answer"}`` (extra keys are kept as the item's ``metadata``). The
grader ``G`` is one of

- ``exact[:OPTIONS]``: the graded answer (the last ``<answer>`` tag's content, else the first line,
  stripped: :func:`monte.envs.catalog.extract_answer_text`) equals the reference. ``OPTIONS`` are
  lm-eval's ``exact_match`` normalisations, comma-separated: ``ignore_case``,
  ``ignore_punctuation``, ``ignore_numbers``;
- ``numeric[:TOL]``: the first number of the graded answer is within ``TOL`` (default 0) of the
  reference;
- ``regex:PATTERN``: ``PATTERN`` is searched in the raw answer; its first group (or the whole
  match) is then compared exactly; no match scores 0;
- ``python:MODULE:FUNCTION``: ``FUNCTION(item, answer) -> float`` of a module found from the
  current directory or ``sys.path``; its file is frozen with the exam (``graders/MODULE.py``) and
  graded from that copy, proven by its sha256.

Dev and test may not share an item (by normalised prompt): the freeze refuses ``E_LEAK`` naming
one shared id. Nothing here imports lm-eval, torch or transformers.
"""

from __future__ import annotations

import importlib.util
import json
import re
import string
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from monte.envs.base import Item
from monte.errors import MonteError, error
from monte.hashing import hash_tree, sha256_bytes
from monte.manifest import MANIFEST, FileEntry, Floor, Manifest

PREFIX = "file:"
KIND = "jsonl"
EXACT_OPTIONS = ("ignore_case", "ignore_punctuation", "ignore_numbers")
_NUMBER = re.compile(r"-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?")


def is_file_spec(spec: str | None) -> bool:
    return bool(spec) and str(spec).startswith(PREFIX)


@dataclass
class JsonlPlan:
    """``--dev``/``--test`` JSONL files and the grader that scores them (nothing read yet)."""

    name: str
    form: Literal["benchmark", "exams"]
    files: dict[str, Path]  # split -> file
    grader: str
    env_kind: Literal["eval-only"] = "eval-only"
    provider: str = KIND
    exams: dict[str, dict[str, str]] = field(default_factory=dict)

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "form": self.form, "kind": self.env_kind, "exams": self.exams,
                "curriculum": None, "files": {s: str(p) for s, p in self.files.items()}, "grader": self.grader}


def parse_grader(spec: str) -> dict[str, Any]:
    """The grader spelled ``spec`` as a record (refused ``E_USAGE`` when it is none of the four)."""
    kind, _, arg = spec.partition(":")
    fix = "--grader is one of: exact[:ignore_case,ignore_punctuation,ignore_numbers], numeric[:TOL], " \
          "regex:PATTERN, python:MODULE:FUNCTION"
    if kind == "exact":
        options = [o for o in arg.split(",") if o] if arg else []
        bad = [o for o in options if o not in EXACT_OPTIONS]
        if bad:
            raise error("E_USAGE", f"--grader {spec!r}: unknown exact option {bad[0]!r}", fix)
        return {"kind": "exact", "options": sorted(options)}
    if kind == "numeric":
        try:
            tol = float(arg) if arg else 0.0
        except ValueError:
            raise error("E_USAGE", f"--grader {spec!r}: the tolerance {arg!r} is not a number", fix) from None
        if not tol >= 0:
            raise error("E_USAGE", f"--grader {spec!r}: the tolerance must be >= 0", fix)
        return {"kind": "numeric", "tolerance": tol}
    if kind == "regex":
        try:
            re.compile(arg)
        except re.error as e:
            raise error("E_USAGE", f"--grader {spec!r}: the pattern does not compile ({e})", fix) from None
        if not arg:
            raise error("E_USAGE", "--grader regex: needs a PATTERN", fix)
        return {"kind": "regex", "pattern": arg}
    if kind == "python":
        module, _, function = arg.partition(":")
        if not module or not function or not function.isidentifier() or \
                not all(p.isidentifier() for p in module.split(".")):
            raise error("E_USAGE", f"--grader {spec!r}: spell it python:MODULE:FUNCTION", fix)
        return {"kind": "python", "module": module, "function": function}
    raise error("E_USAGE", f"--grader {spec!r} is not a grader monte knows", fix)


def plan_freeze(*, name: str | None, benchmark: str | None, server: str | None, dev: tuple[str, ...],
                test: tuple[str, ...], grader: str | None) -> JsonlPlan:
    usage = "the JSONL forms are: --benchmark file:F.jsonl --grader G [--as N] | " \
            "--dev file:DEV.jsonl --test file:TEST.jsonl --grader G --as N"
    if server:
        raise error("E_USAGE", "a JSONL file of questions is an exam, not a curriculum: it cannot be a --server",
                    "freeze demonstrations to train on with `monte dataset add --from-file F --kind sft`")
    if not grader:
        raise error("E_USAGE", "a JSONL exam needs --grader G (exact, numeric[:TOL], regex:PATTERN or "
                    "python:MODULE:FUNCTION)", usage)
    parse_grader(grader)
    if benchmark:
        if dev or test:
            raise error("E_USAGE", "--benchmark stands alone (with --as)", usage)
        files = {"dev": Path(benchmark[len(PREFIX):])}
        form: Literal["benchmark", "exams"] = "benchmark"
        default = files["dev"].stem
    else:
        if len(dev) != 1 or len(test) != 1:
            raise error("E_USAGE", "a JSONL exam takes exactly one --dev file: and one --test file:", usage)
        if not name:
            raise error("E_USAGE", "--as NAME is required with --dev/--test alone", usage)
        files = {"dev": Path(dev[0][len(PREFIX):]), "test": Path(test[0][len(PREFIX):])}
        form = "exams"
        default = name
    if not all(is_file_spec(s) for s in (benchmark, *dev, *test) if s):
        raise error("E_USAGE", "file: exams cannot be mixed with other sources in one environment", usage)
    plan_name = name or default
    plan = JsonlPlan(plan_name, form, files, grader)
    plan.exams = {plan_name: dict.fromkeys(files, f"{PREFIX}{plan_name}")}
    return plan


#: the largest exam file (and python grader module) frozen: a read of ``/dev/zero`` or of a FIFO
#: would otherwise never end
MAX_EXAM_BYTES = 256 << 20
MAX_GRADER_BYTES = 16 << 20


def read_rows(path: Path, split: str) -> list[Item]:
    """The file's rows as items, each ``{"id", "prompt", "answer"}`` checked (``E_BAD_INPUT``); a
    FIFO, a device or a file over :data:`MAX_EXAM_BYTES` is refused before it is read."""
    from monte.hashing import read_bounded

    if not path.exists() and not path.is_symlink():
        raise error("E_NOT_FOUND", f"--{split} file {path} does not exist", "name an existing JSONL file")
    raw = read_bounded(path, MAX_EXAM_BYTES, f"--{split} file")
    items: list[Item] = []
    seen: set[str] = set()
    for n, line in enumerate(raw.split(b"\n"), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except (ValueError, UnicodeDecodeError) as e:
            raise error("E_BAD_INPUT", f"{path} line {n} is not JSON ({e})",
                        'write one JSON object a line: {"id": ..., "prompt": ..., "answer": ...}') from None
        if not isinstance(row, dict) or not all(k in row for k in ("id", "prompt", "answer")):
            raise error("E_BAD_INPUT", f"{path} line {n} is not an object with \"id\", \"prompt\" and \"answer\"",
                        'write one JSON object a line: {"id": ..., "prompt": ..., "answer": ...}')
        if not isinstance(row["prompt"], str) or isinstance(row["id"], (dict, list)) or \
                isinstance(row["answer"], (dict, list)):
            raise error("E_BAD_INPUT", f"{path} line {n}: \"prompt\" must be a string and \"id\", \"answer\" "
                        "plain values", "fix the row")
        rid = str(row["id"])
        if rid in seen:
            raise error("E_BAD_INPUT", f"{path} line {n}: the id {rid!r} is used twice", "give each row its own id")
        seen.add(rid)
        extra = {k: v for k, v in row.items() if k not in ("id", "prompt", "answer")}
        item: Item = {"id": rid, "prompt": row["prompt"], "answer": str(row["answer"])}
        if extra:
            item["metadata"] = extra
        items.append(item)
    if not items:
        raise error("E_BAD_INPUT", f"{path} holds no rows", "an exam needs at least one row")
    return items


def leak_check(dev: list[Item], test: list[Item]) -> None:
    """Refuse ``E_LEAK`` when a dev item's normalised prompt is a test item's."""
    from monte.envs.freeze import normalise

    sealed = {normalise(str(t["prompt"])): str(t["id"]) for t in test}
    for d in dev:
        hit = sealed.get(normalise(str(d["prompt"])))
        if hit is not None:
            raise error("E_LEAK", f"dev and test share an item: dev id {d['id']!r} is test id {hit!r} "
                        "(the same prompt after normalising case and spaces)",
                        "remove the shared items from one of the files; a sealed test item seen in dev is not sealed")


def _module_file(module: str) -> Path:
    """The source file of ``module``, found from the current directory first, then ``sys.path``."""
    here = str(Path.cwd())
    added = here not in sys.path
    if added:
        sys.path.insert(0, here)
    try:
        spec = importlib.util.find_spec(module)
    except (ImportError, ValueError):
        spec = None
    finally:
        if added:
            sys.path.remove(here)
    if spec is None or not spec.origin or not spec.origin.endswith(".py"):
        raise error("E_BAD_INPUT", f"--grader python:{module}: no Python source file for module {module!r} here",
                    "run from the folder that holds MODULE.py, or install the module")
    return Path(spec.origin)


def load_function(path: Path, function: str, name: str) -> Any:
    """``function`` of the module file ``path`` (refused ``E_BAD_INPUT`` when it will not import)."""
    spec = importlib.util.spec_from_file_location(f"monte_grader_{sha256_bytes(str(path).encode())[:12]}", path)
    if spec is None or spec.loader is None:
        raise error("E_BAD_INPUT", f"grader module {name} ({path}) cannot be loaded", "fix the module")
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except Exception as e:
        raise error("E_BAD_INPUT", f"grader module {name} ({path}) does not import: {type(e).__name__}: {e}",
                    "fix the module") from None
    fn = getattr(module, function, None)
    if not callable(fn):
        raise error("E_BAD_INPUT", f"grader module {name} has no function {function!r}", "name a function it defines")
    return fn


def _normalise_exact(text: str, options: list[str]) -> str:
    # lm-eval's exact_match options, in its order
    if "ignore_case" in options:
        text = text.lower()
    if "ignore_punctuation" in options:
        text = text.translate(str.maketrans("", "", string.punctuation))
    if "ignore_numbers" in options:
        text = text.translate(str.maketrans("", "", string.digits))
    return text


def _number(text: str) -> float | None:
    m = _NUMBER.search(text.replace(",", ""))
    return float(m.group(0)) if m else None


@dataclass
class JsonlGrader:
    """One exam's grader (the :class:`monte.envs.base.Benchmark` ``grade`` the floor uses too)."""

    spec: dict[str, Any]
    folder: Path | None = None  # the frozen environment (a python grader's module copy is there)
    _fn: Any = field(default=None, init=False, repr=False)
    #: what the python grader raised, and how often (a grader that raises on every item is broken,
    #: not a model that answered nothing right: :meth:`check_graded`)
    raised: int = field(default=0, init=False)
    last_error: str = field(default="", init=False)

    def grade(self, item: Item, answer: str) -> float:
        from monte.envs.catalog import MAX_ANSWER_CHARS, extract_answer_text

        kind = self.spec["kind"]
        if not isinstance(answer, str):
            return 0.0
        if kind == "python":
            return self._python(item, answer)
        if kind == "regex":
            m = re.search(self.spec["pattern"], answer[:MAX_ANSWER_CHARS])
            if m is None:
                return 0.0
            got = (m.group(1) if m.re.groups else m.group(0)) or ""
            return 1.0 if got.strip() == str(item["answer"]).strip() else 0.0
        got = extract_answer_text(answer)
        if not got or len(got) > MAX_ANSWER_CHARS:
            return 0.0
        if kind == "numeric":
            x, want = _number(got), _number(str(item["answer"]))
            if x is None or want is None:
                return 0.0
            return 1.0 if abs(x - want) <= float(self.spec["tolerance"]) + 1e-12 * max(1.0, abs(want)) else 0.0
        options = list(self.spec.get("options", []))
        return 1.0 if _normalise_exact(got, options) == _normalise_exact(str(item["answer"]).strip(), options) else 0.0

    def _python(self, item: Item, answer: str) -> float:
        if self._fn is None:
            assert self.folder is not None
            path = self.folder / str(self.spec["file"])
            if sha256_bytes(path.read_bytes()) != self.spec["sha256"]:
                raise error("E_INTEGRITY", f"the grader module {path} does not match the sha256 frozen with the "
                            "environment", "restore it with `monte env install ENV`; a changed grader is a new "
                            "experiment")
            self._fn = load_function(path, str(self.spec["function"]), str(self.spec["module"]))
        try:
            score = float(self._fn(item, answer))
        except MonteError:
            raise
        except Exception as e:  # a grader choking on odd text is a wrong answer, not a crash
            self.raised += 1
            self.last_error = f"{type(e).__name__}: {str(e)[:200]}"
            return 0.0
        return 0.0 if score != score else min(1.0, max(0.0, score))

    def check_graded(self, n: int) -> None:
        """Refuse (``E_BAD_INPUT``) when the python grader raised on each of the ``n`` items just
        graded: every score would be a zero the grader never gave, spent as a read."""
        if n and self.raised >= n:
            raise error("E_BAD_INPUT", f"the python grader {self.spec.get('module')}.{self.spec.get('function')} "
                        f"raised on every item ({n} of {n}; the last: {self.last_error}): no score is recorded",
                        "fix the grader and freeze it as a new environment (`monte env add ... --grader "
                        "python:MODULE:FUNCTION`); a changed grader is a new experiment")


def prepare(plan: JsonlPlan, folder: Path) -> Manifest:
    """Read and check the files, refuse a leak, write the splits (and a python grader's module)."""
    from monte.envs.floor import constant_floor

    spec = parse_grader(plan.grader)
    items = {split: read_rows(path, split) for split, path in plan.files.items()}
    if "test" in items:
        leak_check(items["dev"], items["test"])
    if spec["kind"] == "python":
        source = _module_file(spec["module"])
        load_function(source, spec["function"], spec["module"])  # refuse a grader that does not import now
        rel = f"graders/{spec['module']}.py"
        (folder / "graders").mkdir(parents=True, exist_ok=True)
        from monte.hashing import read_bounded

        code = read_bounded(source, MAX_GRADER_BYTES, "the grader module")
        (folder / rel).write_bytes(code)
        spec.update(file=rel, sha256=sha256_bytes(code))
    exam = plan.name
    files_for: dict[str, str] = {}
    floors: dict[str, Floor] = {}
    grader = JsonlGrader(spec, folder)
    for split, rows in items.items():
        rel = f"exams/{exam}/{split}.jsonl"
        (folder / rel).parent.mkdir(parents=True, exist_ok=True)
        (folder / rel).write_text("".join(json.dumps(r, sort_keys=True, ensure_ascii=False) + "\n" for r in rows),
                                  encoding="utf-8")
        files_for[split] = rel
        floor = constant_floor(grader, rows)  # type: ignore[arg-type]
        if floor is not None:
            floors[split] = floor
    files = {k: FileEntry(**v) for k, v in hash_tree(folder).items() if k != MANIFEST}  # type: ignore[arg-type]
    return Manifest(
        kind="environment", name=plan.name, files=files,
        provenance={"source": KIND, "files": {s: str(p) for s, p in plan.files.items()},
                    "sizes": {f"{exam}/{s}": len(r) for s, r in items.items()}},
        env_kind="eval-only", form=plan.form, exams={exam: files_for},
        grader={"kind": KIND, "graders": {exam: spec}, "benchmarks": {exam: f"{PREFIX}{exam}"}},
        floors={exam: floors} if floors else {},
    )
