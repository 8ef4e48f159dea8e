"""Freezing an lm-eval task: its whole closure, its documents as local JSON lines, its hashes.

What lands in the environment's folder, for the exam named after the task:

- ``lmeval/<exam>/task/...``: the task's YAML, every ``include:`` parent, and the ``!function``
  modules beside them (nothing else of their folders), in their layout;
- ``lmeval/<exam>/modules/...``: every module those import that no installed distribution owns
  (:mod:`monte.envs.lmeval.imports`), imported from there at every eval; the distributions are
  recorded by version. Every frozen file is read-only;
- ``lmeval/<exam>/data/{dev,test,fewshot}.jsonl``: the documents of each split, as the task's
  dataset gave them (before ``process_docs``, which runs again at every eval), and the few-shot
  pool; at eval the task reads these through ``dataset_path: json`` (nothing reads a hub again);
- ``exams/<exam>/{dev,test}.jsonl``: the exam's items, one a document: ``id``, ``doc_id``, the
  rendered ``prompt`` (few-shot context included), the ``answer`` (lm-eval's target), and lm-eval's
  own ``doc_hash``/``prompt_hash``/``target_hash`` of it.

Each prompt is the one a plain ``lm_eval`` run of the task renders: dev and test are parts of
lm-eval's run of their whole split, the few-shot sampler's draws for the documents a part leaves
out replayed (:class:`Replay`), and every prompt proven against that run at the freeze. A chat
template, few-shot turns and a system instruction (``chat``) are lm-eval's renderings, recorded in
the grader and applied by lm-eval at eval with the model's tokenizer.

Dev and test come from the task's own ``validation_split`` and ``test_split`` when it has both;
else monte splits its one eval split in two with a recorded seed. Either way a document whose
question (its normalised ``doc_to_text``) is already in test is dropped from dev, and the count
recorded. The grader record (``{"kind": "lm-eval", "tasks": {exam: ...}}``) holds what makes the
task's output: ``num_fewshot``, the few-shot split and seed, ``generation_kwargs``,
``filter_list``, ``metric_list``, ``metadata.version``, lm-eval's version, the metric and filter
scored, every file's sha256 and the task hash of each split.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from monte.envs.lmeval import KIND, PREFIX, is_task_spec
from monte.envs.lmeval.imports import Closure, frozen_imports, scan
from monte.errors import MonteError, error
from monte.hashing import hash_tree, sha256_bytes
from monte.manifest import MANIFEST, FileEntry, Manifest

#: the loaders of ``datasets`` that read local files named by ``data_files``
LOCAL_LOADERS = ("json", "csv", "parquet", "text", "arrow")
#: monte's split of a task with one eval split: the seed is recorded in the grader
SPLIT_SEED = 20_261_201
OUTPUT_TYPES = ("generate_until", "multiple_choice", "loglikelihood")
#: simple_evaluate's default few-shot seed (lm_eval.defaults.DEFAULT_OTHER_SEED), recorded
FEWSHOT_SEED = 1234


@dataclass
class LmEvalPlan:
    name: str
    form: Literal["benchmark", "exams"]
    task: str
    include_path: str | None
    yaml_path: str
    env_kind: Literal["eval-only"] = "eval-only"
    provider: str = KIND
    exams: dict[str, dict[str, str]] = field(default_factory=dict)
    #: where the freeze writes what lm-eval said (its warnings), instead of the terminal
    log: str | None = None
    #: how lm-eval renders the prompts for the model (:func:`chat_options`); None: as plain text
    chat: dict[str, Any] | None = None

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "form": self.form, "kind": self.env_kind, "exams": self.exams,
                "curriculum": None, "task": self.task, "yaml": self.yaml_path}


def quiet() -> None:
    """lm-eval and datasets log to stderr at INFO and draw progress bars: keep to warnings."""
    import logging

    for name in ("lm_eval", "datasets"):
        logging.getLogger(name).setLevel(logging.WARNING)
    try:
        import datasets

        datasets.disable_progress_bars()
    except ImportError:  # pragma: no cover - lm-eval depends on datasets
        pass


#: the loggers lm-eval's run writes to (its own, and the datasets it loads through)
CHATTY = ("lm_eval", "datasets")


@contextmanager
def captured() -> Iterator[list[str]]:
    """Inside: lm-eval kept off the terminal. Its log records (warnings and up) and the Python
    warnings it raises are collected, one line each, into the list yielded (filled on exit), for
    the run's event file; its progress bars (``tqdm`` in ``lm_eval.api``) are not drawn, so monte's
    own progress is the one shown."""
    import logging
    import warnings

    import lm_eval.api.model
    import lm_eval.api.task  # noqa: F401 - their progress bars are turned off below

    quiet()
    out: list[str] = []
    records: list[logging.LogRecord] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            records.append(record)

    keep = Keep(level=logging.WARNING)
    saved = []
    for name in CHATTY:
        logger = logging.getLogger(name)
        saved.append((logger, list(logger.handlers), logger.propagate))
        logger.handlers, logger.propagate = [keep], False
    bars = []
    for name in ("lm_eval.api.task", "lm_eval.api.model"):
        module = sys.modules.get(name)
        if module is not None and hasattr(module, "tqdm"):
            bars.append((module, module.tqdm))
            module.tqdm = _no_bar(module.tqdm)  # type: ignore[attr-defined]
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            yield out
    finally:
        for logger, handlers, propagate in saved:
            logger.handlers, logger.propagate = handlers, propagate
        for module, bar in bars:
            module.tqdm = bar  # type: ignore[attr-defined]
        out += [f"{r.levelname} {r.name}: {r.getMessage()}" for r in records]
        out += [f"{w.category.__name__}: {w.message}" for w in caught]


def _no_bar(bar: Any) -> Any:
    """``tqdm`` never drawn, whatever ``disable=`` its caller passes."""
    def drawn_nowhere(*args: Any, **kwargs: Any) -> Any:
        return bar(*args, **{**kwargs, "disable": True})

    return drawn_nowhere


def chat_options(apply_chat_template: str | None, fewshot_as_multiturn: bool | None,
                 system_instruction: str | None) -> dict[str, Any] | None:
    """The rendering options as lm-eval's CLI takes them: ``apply_chat_template`` (True, or a
    template's name in a tokenizer holding several), ``fewshot_as_multiturn`` (default: on with a
    chat template, as lm-eval's CLI has it; refused without one), ``system_instruction``."""
    if apply_chat_template is None and fewshot_as_multiturn is None and system_instruction is None:
        return None
    if fewshot_as_multiturn and apply_chat_template is None:
        raise error("E_USAGE", "--fewshot-as-multiturn renders the few-shot examples as chat turns: it needs a chat "
                    "template", "add --apply-chat-template (or drop --fewshot-as-multiturn)")
    chat: Any = False if apply_chat_template is None else apply_chat_template or True
    return {"apply_chat_template": True if chat == "default" else chat,
            "fewshot_as_multiturn": bool(chat) if fewshot_as_multiturn is None else fewshot_as_multiturn,
            "system_instruction": system_instruction}


def plan_freeze(*, name: str | None, benchmark: str | None, server: str | None, dev: tuple[str, ...],
                test: tuple[str, ...], include_path: str | None) -> LmEvalPlan:
    """The flag mix and the task's place (unknown task, a group, a YAML that does not parse refuse)."""
    usage = "the lm-eval forms are: --benchmark lm-eval:TASK [--as N] | " \
            "--dev lm-eval:TASK --test lm-eval:TASK --as N  (both with [--include-path DIR])"
    if server:
        raise error("E_USAGE", "an lm-eval task is an exam, not a curriculum: it cannot be a --server",
                    "freeze demonstrations to train on with `monte dataset add --from-file F --kind sft`")
    specs = [s for s in (benchmark, *dev, *test) if s]
    if not all(is_task_spec(s) for s in specs):
        raise error("E_USAGE", "lm-eval: exams cannot be mixed with other sources in one environment", usage)
    if benchmark:
        if dev or test:
            raise error("E_USAGE", "--benchmark stands alone (with --as)", usage)
        task, form = benchmark[len(PREFIX):], "benchmark"
    else:
        if len(dev) != 1 or len(test) != 1:
            raise error("E_USAGE", "an lm-eval environment takes one --dev lm-eval:TASK and one --test lm-eval:TASK",
                        usage)
        if dev[0] != test[0]:
            raise error("E_USAGE", f"--dev {dev[0]} and --test {test[0]} differ: dev and test are one task's "
                        "documents (its validation and test splits, or its one eval split cut in two by monte)",
                        "name the same lm-eval:TASK for both")
        if not name:
            raise error("E_USAGE", "--as NAME is required with --dev/--test alone", usage)
        task, form = dev[0][len(PREFIX):], "exams"
    yaml_path = locate_task(task, include_path)
    plan = LmEvalPlan(name or task, form, task, include_path, str(yaml_path))  # type: ignore[arg-type]
    plan.exams = {task: {"dev": f"{PREFIX}{task}", **({"test": f"{PREFIX}{task}"} if form == "exams" else {})}}
    return plan


def task_manager(include_path: str | None, defaults: bool) -> Any:
    quiet()
    from lm_eval.tasks import TaskManager

    return TaskManager(include_path=include_path, include_defaults=defaults)


def locate_task(task: str, include_path: str | None) -> Path:
    """The YAML file that defines ``task``: under ``include_path`` first, then lm-eval's own."""
    from lm_eval.tasks._index import Kind

    if include_path is not None and not Path(include_path).is_dir():
        raise error("E_NOT_FOUND", f"--include-path {include_path} is not a folder",
                    "name the folder that holds the task's YAML")
    entry = None
    if include_path is not None:
        entry = task_manager(include_path, False).task_index.get(task)
    if entry is None:
        entry = task_manager(include_path, True).task_index.get(task)
    if entry is None:
        broken = _unparsable(Path(include_path)) if include_path else None
        raise error("E_BAD_INPUT" if broken else "E_NOT_FOUND",
                    f"no lm-eval task named {task!r}" + (f" under {include_path}" if include_path else "")
                    + " or among lm-eval's own tasks" + (f"; {broken}" if broken else ""),
                    "fix that YAML" if broken else "pass --include-path DIR, the folder holding the task's YAML "
                    "(`lm-eval ls tasks` lists lm-eval's own)")
    if entry.kind != Kind.TASK or entry.yaml_path is None:
        raise error("E_REFUSED", f"lm-eval's {task!r} is a {entry.kind.name.lower().replace('_', ' ')}, not one YAML "
                    "task: an exam is one task's documents", "name one of its tasks")
    return Path(entry.yaml_path)


def _unparsable(folder: Path) -> str | None:
    for path in sorted(folder.rglob("*.yaml")):
        try:
            _load_raw(path)
        except MonteError as e:
            return e.message
    return None


# --- the closure --------------------------------------------------------------------------------------------------


class _Function(str):
    """A ``!function`` value as written (``utils.process_results``), kept apart from plain strings."""


def _load_raw(path: Path) -> dict[str, Any]:
    """One YAML file as written (``!function`` values kept as :class:`_Function`); ``E_BAD_INPUT``."""
    import yaml

    class Loader(yaml.SafeLoader):  # type: ignore[misc]  # PyYAML: untyped here
        pass

    Loader.add_constructor("!function", lambda loader, node: _Function(loader.construct_scalar(node)))
    try:
        with open(path, "rb") as f:
            cfg = yaml.load(f, Loader=Loader)  # noqa: S506 - a SafeLoader with one more tag
    except FileNotFoundError:
        raise error("E_NOT_FOUND", f"the task YAML {path} does not exist", "fix the include: path") from None
    except yaml.YAMLError as e:
        raise error("E_BAD_INPUT", f"the task YAML {path} does not parse: {str(e).splitlines()[0]}",
                    "fix the YAML") from None
    if not isinstance(cfg, dict):
        raise error("E_BAD_INPUT", f"the task YAML {path} is not a mapping", "fix the YAML")
    return cfg


def _walk(path: Path, seen: list[Path]) -> dict[str, Any]:
    """The merged config of ``path`` as lm-eval merges it (includes first, local keys win), every
    YAML visited appended to ``seen``."""
    path = path.resolve()
    if path in seen:
        raise error("E_BAD_INPUT", f"the task YAML {path} includes itself", "fix the include: chain")
    seen.append(path)
    cfg = _load_raw(path)
    includes = cfg.pop("include", None)
    merged: dict[str, Any] = {}
    for inc in ([] if includes is None else includes if isinstance(includes, list) else [includes]):
        parent = _walk(path.parent / str(inc) if not Path(str(inc)).is_absolute() else Path(str(inc)), seen)
        parent.pop("task_list", None)
        merged.update(parent)
    merged.update(cfg)
    return merged


def _functions(value: Any) -> list[str]:
    if isinstance(value, _Function):
        return [str(value)]
    if isinstance(value, dict):
        return [f for v in value.values() for f in _functions(v)]
    if isinstance(value, list):
        return [f for v in value for f in _functions(v)]
    return []


def _plain(value: Any) -> Any:
    """The config as JSON: a ``!function`` as ``"!function NAME"``."""
    if isinstance(value, _Function):
        return f"!function {value}"
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


def closure(yaml_path: Path) -> tuple[dict[str, Any], list[Path], Path, Closure]:
    """The merged raw config, the task's files (its YAMLs and the ``!function`` modules beside
    them, nothing else of their folders), the folder they are kept under, and what those modules
    import (:func:`monte.envs.lmeval.imports.scan`).

    Every ``!function`` must import (``E_BAD_INPUT`` naming it otherwise), as lm-eval resolves it:
    a module file beside the YAML that names it, else an importable module."""
    from lm_eval.tasks._yaml_loader import _import_func_in_yml

    yamls: list[Path] = []
    merged = _walk(yaml_path, yamls)
    files = list(yamls)
    named: list[str] = []
    for y in yamls:
        for fn in _functions(_load_raw(y)):
            try:
                _import_func_in_yml(fn, y.parent)
            except Exception as e:
                raise error("E_BAD_INPUT", f"the !function {fn} in {y} does not import: {type(e).__name__}: {e}",
                            "fix the function's module (it is looked for beside the YAML, then on the path)") from None
            mod = fn.rpartition(".")[0]
            beside = (y.parent / f"{mod.replace('.', '/')}.py").resolve()
            if beside.exists():  # lm-eval loads it by its path
                files.append(beside)
            else:  # lm-eval imports it by its name
                named.append(mod)
    unique = sorted(set(files))
    root = Path(os.path.commonpath([str(p.parent) for p in unique]))
    return merged, unique, root, scan([p for p in unique if p.suffix == ".py"], named)


# --- the documents ------------------------------------------------------------------------------------------------


def _data_files(kwargs: dict[str, Any]) -> list[str]:
    files = kwargs.get("data_files")
    if isinstance(files, str):
        return [files]
    if isinstance(files, list):
        return [str(f) for f in files]
    if isinstance(files, dict):
        return [str(f) for v in files.values() for f in ([v] if isinstance(v, str) else v)]
    return []


def check_data(task: str, cfg: dict[str, Any]) -> None:
    """Refuse, before lm-eval loads anything, a data file missing or not JSON, and a task whose
    documents live on the Hugging Face Hub with no token here to fetch them once."""
    path = cfg.get("dataset_path")
    kwargs = cfg.get("dataset_kwargs") or {}
    if cfg.get("custom_dataset") is not None:
        return
    if path in LOCAL_LOADERS:
        files = _data_files(kwargs if isinstance(kwargs, dict) else {})
        if not files and not (isinstance(kwargs, dict) and kwargs.get("data_dir")):
            raise error("E_BAD_INPUT", f"task {task!r} reads dataset_path {path} but names no data_files",
                        "give dataset_kwargs: {data_files: {test: PATH, ...}}")
        for f in files:
            p = Path(f).expanduser()
            if not p.is_file():
                raise error("E_NOT_FOUND", f"task {task!r}: its data file {f} does not exist",
                            "fix dataset_kwargs.data_files (a path relative to where monte runs, or absolute)")
            if path == "json":
                _check_json(task, p)
        return
    if path and Path(str(path)).expanduser().is_dir():
        return
    if os.environ.get("HF_HUB_OFFLINE") in ("1", "true", "True") or not _hub_token():
        raise error("E_REFUSED", f"task {task!r} reads its documents from the Hugging Face Hub (dataset_path "
                    f"{path}), and there is no token here to fetch them (nothing was written)",
                    "set HF_TOKEN (and leave HF_HUB_OFFLINE unset) to let the freeze fetch them once, or point the "
                    "task at local files: dataset_path: json, dataset_kwargs: {data_files: {test: PATH}}")


def _hub_token() -> str | None:
    token = os.environ.get("HF_TOKEN") or os.environ.get("HUGGING_FACE_HUB_TOKEN")
    if token:
        return token
    try:
        from huggingface_hub import get_token

        return get_token()
    except ImportError:
        return None


def _check_json(task: str, path: Path) -> None:
    text = path.read_bytes()
    try:
        json.loads(text)
        return
    except ValueError:
        pass
    for n, line in enumerate(text.split(b"\n"), 1):
        if line.strip():
            try:
                json.loads(line)
            except ValueError as e:
                raise error("E_BAD_INPUT", f"task {task!r}: its data file {path} is not JSON (line {n}: {e})",
                            "write one JSON object a line (or one JSON document)") from None


def build(cfg: dict[str, Any] | Path) -> Any:
    """lm-eval's Task for a YAML file or a config dict; ``E_BAD_INPUT`` on failure."""
    tm = task_manager(None, False)  # no index: a path or a config needs none
    name = cfg.get("task") if isinstance(cfg, dict) else str(cfg)
    try:
        loaded = tm.load([cfg if isinstance(cfg, dict) else str(cfg)])
    except (MonteError, ModuleNotFoundError):  # a module it imports: the caller names it
        raise
    except Exception as e:
        raise error("E_BAD_INPUT", f"lm-eval could not build task {name!r}: {type(e).__name__}: {e}",
                    "fix the task's YAML or its data files") from None
    tasks = loaded["tasks"]
    if len(tasks) != 1 or loaded["groups"]:
        raise error("E_REFUSED", f"{name!r} builds {len(tasks)} tasks: an exam is one task's documents",
                    "name one of its tasks")
    return next(iter(tasks.values()))


def primary(task: Any) -> tuple[str, str, list[str], list[str]]:
    """(metric, filter, every metric, every filter) scored: the first of each, refused when the
    metric is not a per-document mean (a corpus-level metric such as BLEU cannot be paired)."""
    from lm_eval.api.metrics import mean

    aggregation = task.aggregation()
    metrics = list(aggregation)
    if not metrics:
        raise error("E_REFUSED", f"task {task.task_name!r} names no metric", "give it a metric_list")
    for m in metrics[:1]:
        agg = aggregation[m]
        if agg is not mean:
            how = getattr(agg, "__name__", str(agg))
            raise error("E_REFUSED", f"task {task.task_name!r}: its metric {m!r} is aggregated over the whole corpus "
                        f"({how}), so no document has a score of its own and two evals cannot be paired by document",
                        "score the task with a per-document metric (aggregation: mean), such as exact_match, acc "
                        "or a process_results that returns one number a document")
    filters = [str(f.get("name", "none")) for f in (task.config.filter_list or [])] or ["none"]
    return metrics[0], filters[0], metrics, filters


def _processed(task: Any, raw: list[dict[str, Any]]) -> list[dict[str, Any] | None]:
    """Each raw document after the task's ``process_docs`` (None: it drops the document)."""
    fn = task.config.process_docs
    if fn is None:
        return list(raw)
    import datasets

    whole = list(fn(datasets.Dataset.from_list(raw))) if raw else []
    if len(whole) == len(raw):
        return whole
    out: list[dict[str, Any] | None] = []
    for doc in raw:
        got = list(fn(datasets.Dataset.from_list([doc])))
        out.append(got[0] if got else None)
    return out


def _key(task: Any, doc: dict[str, Any]) -> str:
    from monte.envs.freeze import normalise

    return normalise(str(task.doc_to_text(doc)))


def _rows(task: Any, split: str) -> list[dict[str, Any]]:
    return [dict(r) for r in task.dataset[split]]


def _pool_split(task: Any) -> str | None:
    cfg = task.config
    if getattr(task.fewshot_cfg, "split", None):
        return str(task.fewshot_cfg.split)
    if getattr(task.fewshot_cfg, "samples", None) is not None:
        return None
    if (cfg.num_fewshot or 0) > 0:
        split = cfg.training_split or cfg.validation_split
        return str(split) if split else None
    return None


def eval_config(spec: dict[str, Any], folder: Path, split: str) -> dict[str, Any]:
    """The frozen task's config for one split: the frozen YAML (its functions resolved from the
    frozen copies), its documents the frozen JSON lines (absolute paths on this data root): the
    split's own and the few-shot pool's, never the other exam split's (a dev eval never opens
    the test documents, which a grader may hold instead of this data root)."""
    from lm_eval.tasks._yaml_loader import load_yaml

    cfg = load_yaml(folder / spec["main"], resolve_func=True)
    data = {s: str(folder / rel) for s, rel in spec["data"].items() if rel and s in (split, "fewshot")}
    cfg.update(dataset_path="json", dataset_name=None, dataset_kwargs={"data_files": data},
               test_split=split, validation_split=None)
    pool = "fewshot" if "fewshot" in data else None
    cfg["training_split"] = pool if cfg.get("training_split") else None
    cfg["fewshot_split"] = pool if cfg.get("fewshot_split") else None
    if isinstance(cfg.get("fewshot_config"), dict) and cfg["fewshot_config"].get("split"):
        cfg["fewshot_config"] = {**cfg["fewshot_config"], "split": pool}
    cfg.pop("custom_dataset", None)
    return dict(cfg)


class Replay:
    """lm-eval's few-shot sampler, advanced over the documents of the whole eval split that this
    part of it leaves out, so each document gets the examples a plain ``lm_eval`` run gives it.

    lm-eval's default sampler draws from one ``random.Random`` (seeded 1234) once per document, in
    ``doc_id`` order, over every document it renders: a dev or test half rendered alone would give
    most documents other examples. ``positions`` are this part's documents' places in the whole
    split (lm-eval's ``doc_id`` there, after ``process_docs``); before each document the draws of
    the documents skipped since the last one are made and thrown away. A draw depends on the pool
    and ``n`` only (no eval document is passed: a pool that is the exam's own split is refused), so
    the replay is exact; the freeze proves it against the whole split's rendering all the same."""

    def __init__(self, inner: Any, positions: list[int]) -> None:
        self.inner, self.positions, self.calls = inner, list(positions), 0

    def set_rnd(self, rnd: int | None) -> Replay:
        self.inner.set_rnd(rnd)
        self.calls = 0  # a new seed is a new pass over the split
        return self

    def sample(self, n: int, eval_doc: Any = None, df: Any = None, **kwargs: Any) -> Any:
        start = self.positions[self.calls - 1] + 1 if self.calls else 0
        for _ in range(self.positions[self.calls] - start):
            self.inner.sample(n, eval_doc=None, df=df, **kwargs)
        self.calls += 1
        return self.inner.sample(n, eval_doc=eval_doc, df=df, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def replayed(task: Any, positions: list[int] | None) -> Any:
    """``task`` with its sampler replaying the whole split (:class:`Replay`) when it draws at all."""
    if positions is not None and (task.config.num_fewshot or 0) > 0 and hasattr(task, "sampler"):
        task.sampler = Replay(task.sampler, positions)
    return task


def imports_of(spec: dict[str, Any], folder: Path) -> tuple[Path | None, list[str]]:
    """The frozen ``modules/`` folder of a task and the modules it holds (none: an older freeze)."""
    modules = dict(spec.get("modules") or {})
    if not modules:
        return None, []
    return folder / str(spec["modules_dir"]), list(modules)


def requests_of(task: Any, seed: int, system_instruction: str | None = None) -> list[dict[str, Any]]:
    """Per document, in doc_id order: the prompt (as plain text: a chat template is the model's,
    applied at eval), target, choices and lm-eval's three hashes, computed as lm-eval's evaluator
    logs them (no model needed)."""
    from lm_eval.utils import handle_non_serializable, hash_string

    task.set_fewshot_seed(seed=seed)
    task.build_all_requests(limit=None, rank=0, world_size=1, system_instruction=system_instruction)
    by_doc: dict[int, list[Any]] = {}
    for inst in task.instances:
        by_doc.setdefault(inst.doc_id, []).append(inst)
    out = []
    for doc_id in sorted(by_doc):
        reqs = sorted(by_doc[doc_id], key=lambda x: x.idx)
        doc = reqs[0].doc
        target = task.doc_to_target(doc)
        prompt = reqs[0].arguments[0]
        entry = {
            "doc_id": doc_id, "prompt": prompt if isinstance(prompt, str) else json.dumps(prompt),
            "target": target,
            "doc_hash": hash_string(json.dumps(doc, indent=2, default=handle_non_serializable, ensure_ascii=False)),
            "prompt_hash": hash_string(reqs[0].arguments[0]),
            "target_hash": hash_string(str(target)),
        }
        if task.OUTPUT_TYPE == "multiple_choice":
            entry["choices"] = [str(c) for c in task.doc_to_choice(doc)]
        out.append(entry)
    return out


def task_hash(hashes: list[dict[str, Any]], filters: list[str]) -> str:
    """lm-eval's task hash (EvaluationTracker.save_results_aggregated): over its logged samples,
    which repeat every document once per filter."""
    from lm_eval.utils import hash_string

    return str(hash_string("".join(h["doc_hash"] + h["prompt_hash"] + h["target_hash"] for _ in filters for h in hashes)))


def _places(processed: list[dict[str, Any] | None]) -> dict[int, int]:
    """Raw index -> lm-eval's ``doc_id`` (its place after ``process_docs`` dropped some)."""
    kept = [i for i, d in enumerate(processed) if d is not None]
    return {i: n for n, i in enumerate(kept)}


def whole_split(plan: LmEvalPlan, task: Any, split: str) -> list[dict[str, Any]]:
    """Every document of ``split`` as a plain ``lm_eval`` run of the task renders it (its whole
    split, lm-eval's order, its seed): the task as written, or, for a split that is not its eval
    split (a validation split beside a test split), the task with that split as its eval split."""
    cfg = task.config
    own = cfg.test_split if task.has_test_docs() else cfg.validation_split
    if split != own:
        from lm_eval.tasks._yaml_loader import load_yaml

        raw = load_yaml(plan.yaml_path, resolve_func=True)
        raw.update(test_split=split, validation_split=None)
        task = build(raw)
    return requests_of(task, FEWSHOT_SEED, (plan.chat or {}).get("system_instruction"))


def _same_as_lm_eval(plan: LmEvalPlan, task: Any, split: str, positions: list[int],
                     hashes: list[dict[str, Any]], rendered: dict[str, dict[int, dict[str, Any]]]) -> None:
    """Refuse a frozen prompt that a plain run of the whole split does not render (a sampler whose
    draws depend on the document cannot be replayed on a part of the split)."""
    if split not in rendered:  # dev and test cut from one split: it is rendered once
        rendered[split] = {r["doc_id"]: r for r in whole_split(plan, task, split)}
    reference = rendered[split]
    for pos, h in zip(positions, hashes, strict=True):
        want = reference.get(pos)
        if want is None or want["prompt_hash"] != h["prompt_hash"] or want["doc_hash"] != h["doc_hash"]:
            raise error("E_REFUSED", f"task {plan.task!r}: document {pos} of {split} renders another prompt as part "
                        f"of the exam than in lm-eval's run of the whole split (its few-shot sampler "
                        f"{type(getattr(task, 'sampler', None)).__name__} cannot be replayed on a part of the "
                        "split), so its scores would not be lm-eval's", "give the task the default sampler or "
                        "fewshot_config: {sampler: first_n}")


def _write_docs(path: Path, rows: list[dict[str, Any]], task: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        text = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows)
    except (TypeError, ValueError) as e:
        raise error("E_REFUSED", f"task {task!r}: its documents are not JSON ({e}), so they cannot be frozen as "
                    "JSON lines", "freeze a task whose documents are text and numbers") from None
    path.write_text(text, encoding="utf-8")


def prepare(plan: LmEvalPlan, folder: Path) -> Manifest:
    """Freeze the task into ``folder`` and return its manifest (not yet written); what lm-eval
    said meanwhile goes to ``plan.log``, not the terminal."""
    with captured() as said:
        manifest = _prepare(plan, folder)
    if plan.log and said:  # (a refused freeze writes nothing, this log included)
        log = Path(plan.log)
        log.parent.mkdir(parents=True, exist_ok=True)
        with open(log, "a", encoding="utf-8") as f:
            f.write("".join(f"{line}\n" for line in said))
    return manifest


def _prepare(plan: LmEvalPlan, folder: Path) -> Manifest:
    import lm_eval

    quiet()
    merged, files, root, imported = closure(Path(plan.yaml_path))
    check_data(plan.task, merged)
    task = build(Path(plan.yaml_path))
    if task.OUTPUT_TYPE not in OUTPUT_TYPES:
        raise error("E_REFUSED", f"task {plan.task!r} is a {task.OUTPUT_TYPE} task: its score (a perplexity) is "
                    "corpus-level and cannot be paired by document", f"freeze a task of type {', '.join(OUTPUT_TYPES)}")
    metric, filt, metrics, filters = primary(task)
    cfg = task.config
    exam = plan.task
    # the documents of each split, and where they came from
    splits: dict[str, tuple[str, list[int]]] = {}
    seed: int | None = None
    if plan.form == "exams" and cfg.validation_split and cfg.test_split:
        splits["dev"] = (cfg.validation_split, list(range(len(task.dataset[cfg.validation_split]))))
        splits["test"] = (cfg.test_split, list(range(len(task.dataset[cfg.test_split]))))
    else:
        one = cfg.test_split or cfg.validation_split
        if not one:
            raise error("E_REFUSED", f"task {plan.task!r} has no test_split or validation_split to examine",
                        "give the task an eval split")
        n = len(task.dataset[one])
        if plan.form == "benchmark":
            splits["dev"] = (one, list(range(n)))
        else:
            seed = SPLIT_SEED
            order = list(range(n))
            random.Random(seed).shuffle(order)
            half = (n + 1) // 2
            splits["test"] = (one, sorted(order[:half]))
            splits["dev"] = (one, sorted(order[half:]))
    pool = _pool_split(task)
    if pool is not None and pool in {s for s, _ in splits.values()}:
        raise error("E_REFUSED", f"task {plan.task!r} draws its few-shot examples from {pool!r}, the split its exam "
                    "documents come from: a sealed document would be shown in other prompts",
                    "give the task a fewshot_split (or training_split) of its own")
    # disjoint by content: test first, then dev without what test holds
    dropped: dict[str, int] = {}
    picked: dict[str, list[dict[str, Any]]] = {}
    sources: dict[str, list[int]] = {}
    positions: dict[str, list[int]] = {}  # each kept document's doc_id in lm-eval's run of its whole split
    whole: dict[str, list[dict[str, Any] | None]] = {}
    seen: set[str] = set()
    for split in ("test", "dev"):
        if split not in splits:
            continue
        name, idx = splits[split]
        raw = _rows(task, name)
        if name not in whole:
            whole[name] = _processed(task, raw)
        place = _places(whole[name])
        rows = [raw[i] for i in idx]
        keep_rows, keep_idx, keys, d = [], [], set(), 0
        for i, doc in zip(idx, rows, strict=True):
            processed = whole[name][i]
            if processed is None:
                continue  # process_docs drops it: it would never be scored
            k = _key(task, processed)
            if k in seen or k in keys:
                d += 1
                continue
            keys.add(k)
            keep_rows.append(doc)
            keep_idx.append(i)
        seen |= keys
        picked[split], sources[split], dropped[split] = keep_rows, keep_idx, d
        positions[split] = [place[i] for i in keep_idx]
        if not keep_rows:
            raise error("E_REFUSED", f"task {plan.task!r} leaves no {split} document (after dropping those shared "
                        "with test)", "freeze a task with more documents")
    # the closure, then the documents, into the folder
    base = f"lmeval/{exam}"
    copies = [(p, folder / base / "task" / p.relative_to(root)) for p in files]
    copies += [(imported.modules[m], folder / base / "modules" / imported.relpath(m)) for m in imported.modules]
    for origin, dest in copies:
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(origin, dest)
        dest.chmod(0o444)  # frozen: an edit is refused at the next eval anyway, and should not be easy
    data: dict[str, str] = {}
    for split, rows in picked.items():
        data[split] = f"{base}/data/{split}.jsonl"
        _write_docs(folder / data[split], rows, plan.task)
    if pool is not None:
        data["fewshot"] = f"{base}/data/fewshot.jsonl"
        _write_docs(folder / data["fewshot"], _rows(task, pool), plan.task)
    spec: dict[str, Any] = {
        "task": task.task_name,
        "main": f"{base}/task/{Path(plan.yaml_path).resolve().relative_to(root).as_posix()}",
        "data": data,
        "output_type": task.OUTPUT_TYPE,
        "metric": metric, "filter": filt, "metrics": metrics, "filters": filters,
        "num_fewshot": cfg.num_fewshot or 0,
        "fewshot_split": pool, "fewshot_seed": FEWSHOT_SEED,
        "generation_kwargs": _plain(merged.get("generation_kwargs")),
        "filter_list": _plain(merged.get("filter_list")),
        "metric_list": _plain(merged.get("metric_list")),
        "version": (cfg.metadata or {}).get("version"),
        "lm_eval": lm_eval.__version__,
        "source_splits": {s: splits[s][0] for s in picked},
        "split_seed": seed,
        "dropped_for_disjointness": dropped,
        # what the task's modules import: the modules no distribution owns, frozen under modules/
        # (imported from there at every eval), and the distributions, by version
        "modules": {m: f"{base}/modules/{imported.relpath(m)}" for m in sorted(imported.modules)},
        "modules_dir": f"{base}/modules",
        "distributions": dict(sorted(imported.distributions.items())),
    }
    if plan.chat is not None:  # the rendering is part of the exam's grader: another cohort, same documents
        spec["chat"] = dict(plan.chat)
    if (cfg.num_fewshot or 0) > 0:  # the sampler draws: each part replays the whole split's draws
        spec["positions"] = positions
    # the frozen task, built from the frozen files, renders every prompt and hashes it; each prompt
    # must be the one lm-eval renders in a plain run of the task's whole split
    task_hashes: dict[str, str] = {}
    files_for: dict[str, str] = {}
    rendered: dict[str, dict[int, dict[str, Any]]] = {}
    for split in picked:
        with frozen_imports(*imports_of(spec, folder)):
            frozen = replayed(build(eval_config(spec, folder, split)), (spec.get("positions") or {}).get(split))
            hashes = requests_of(frozen, FEWSHOT_SEED, (plan.chat or {}).get("system_instruction"))
        if len(hashes) != len(picked[split]):
            raise error("E_REFUSED", f"task {plan.task!r}: its process_docs gives {len(hashes)} documents of the "
                        f"{len(picked[split])} frozen for {split}", "freeze a task whose process_docs keeps each "
                        "document it is given")
        _same_as_lm_eval(plan, task, splits[split][0], positions[split], hashes, rendered)
        task_hashes[split] = task_hash(hashes, filters)
        items = []
        for h, src in zip(hashes, sources[split], strict=True):
            item = {"id": f"{exam}/{split}/{h['doc_id']:05d}", "doc_id": h["doc_id"], "prompt": h["prompt"],
                    "answer": str(h["target"]), "source": {"split": splits[split][0], "index": src},
                    "lm_eval": {k: h[k] for k in ("doc_hash", "prompt_hash", "target_hash")}}
            if "choices" in h:
                item["choices"] = h["choices"]
            items.append(item)
        rel = f"exams/{exam}/{split}.jsonl"
        (folder / rel).parent.mkdir(parents=True, exist_ok=True)
        (folder / rel).write_text("".join(json.dumps(i, sort_keys=True, ensure_ascii=False) + "\n" for i in items),
                                  encoding="utf-8")
        files_for[split] = rel
    spec["task_hash"] = task_hashes
    hashed = {k: FileEntry(**v) for k, v in hash_tree(folder).items() if k != MANIFEST}  # type: ignore[arg-type]
    spec["files"] = {k: v.sha256 for k, v in sorted(hashed.items()) if k.startswith(f"{base}/")}
    return Manifest(
        kind="environment", name=plan.name, files=hashed,
        provenance={"source": KIND, "task": plan.task, "yaml": sha256_bytes(Path(plan.yaml_path).read_bytes()),
                    "sizes": {f"{exam}/{s}": len(r) for s, r in picked.items()}},
        env_kind="eval-only", form=plan.form, exams={exam: files_for},
        grader={"kind": KIND, "tasks": {exam: spec}, "benchmarks": {exam: f"{PREFIX}{plan.task}"}},
    )
