"""Recipes: the training method of one Run, as a YAML file.

A recipe names its ``algorithm`` (sft, dpo, grpo, rloo or distillation), optionally a ``model``,
and any field of TRL's own config class for that algorithm (``SFTConfig``, ``DPOConfig``,
``GRPOConfig``, ``RLOOConfig``, ``DistillationConfig``: read from ``dataclasses.fields``, not a
hand-kept list), except the
fields monte owns (:data:`OWNED`, each with its reason). Every bad key of a recipe is named in one
refusal. A recipe cannot set the step count: ``steps_per_chunk`` belongs to the experiment,
because that count is what ``train@N`` means (``num_train_epochs`` is accepted, and, as in TRL
whenever ``max_steps`` is set, has no effect). A ``null`` value keeps monte's default.

A TRL dump pastes (``SFTConfig(...).to_dict()`` written as YAML): a key monte owns that holds
TRL's default, or what monte sets itself, is ignored with a note (:attr:`ResolvedRecipe.ignored`);
one that asks for something else (``push_to_hub: true``) is refused. Every value TRL's own
constructor takes is taken (``scale_rewards: false``). Every number is checked against a sane
range (:data:`RANGES`) and every setting that depends on the machine (``deepspeed``, ``fsdp``,
``bf16``, ...) against the machine that runs the chunk (:func:`check_machine`), before the
``started`` record and with ``--dry-run`` too.

A decaying learning-rate schedule (``cosine``, ``linear``, a ``warmup_steps`` ratio below 1, ...)
is declared over a horizon, ``schedule_steps: N``: the trainer is built for N steps every chunk
and each chunk stops at its own end, so a same-recipe continuation continues the one schedule
(4 + 4 steps equal 8); a stage boundary restarts the trainer's counter, and so its schedule.
Without ``schedule_steps`` (TRL's own default is ``linear``) the horizon is the one chunk, as in
TRL with ``max_steps``; a same-recipe continuation of it is refused (its schedule would restart).

Resolution: a path (contains ``/`` or ends in ``.yaml``/``.yml``), else a name looked up in the
repository's ``recipes/`` and then the packaged ``monte/recipes/`` (first match wins).
"""

from __future__ import annotations

import dataclasses
import difflib
import enum
import os
import types
from pathlib import Path
from typing import Annotated, Any, Literal, NamedTuple

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from monte.errors import error
from monte.hashing import sha256_bytes


class _Common(BaseModel):
    # strict: `per_device_train_batch_size: true` or a quoted number is a mistake, not a value
    model_config = ConfigDict(extra="forbid", strict=True)
    model: str | None = None
    learning_rate: float = Field(1e-4, gt=0, lt=1)
    lr_scheduler_type: str = "constant_with_warmup"  # TRL's names; a decaying one needs schedule_steps
    warmup_steps: int | float = Field(0, ge=0)  # below 1: a ratio of the horizon (schedule_steps)
    schedule_steps: int | None = Field(None, ge=1)  # the horizon of a decaying schedule (monte's)
    per_device_train_batch_size: int = Field(8, ge=1)
    gradient_accumulation_steps: int = Field(1, ge=1)
    weight_decay: float = Field(0.0, ge=0)
    max_grad_norm: float = Field(1.0, gt=0)
    seed: int = 0


class SFTRecipe(_Common):
    algorithm: Literal["sft"]
    max_length: Annotated[int, Field(ge=8)] | None = 256  # None: no truncation (TRL)
    completion_only_loss: bool | None = True


class GRPORecipe(_Common):
    algorithm: Literal["grpo"]
    num_generations: int = Field(8, ge=2)
    beta: float = Field(0.04, ge=0)  # > 0: a KL anchor to the stage's starting checkpoint
    max_completion_length: int = Field(16, ge=1)
    temperature: float = Field(1.0, gt=0)
    reward_threshold: float = Field(1.0, gt=0, le=1)  # reward 1 only for a full grader score


class DPORecipe(_Common):
    algorithm: Literal["dpo"]
    # the reference model is the stage's starting weights (the parent checkpoint at a stage
    # boundary, the base model from base): TRL loads it from the path the policy came from
    beta: float = Field(0.1, gt=0)  # the strength of the pull toward that reference
    max_length: Annotated[int, Field(ge=8)] | None = 256  # prompt + completion tokens; None: no truncation


class RLOORecipe(_Common):
    algorithm: Literal["rloo"]
    num_generations: int = Field(4, ge=2)  # the leave-one-out baseline needs at least two
    beta: float = Field(0.05, ge=0)  # the KL penalty toward the stage's starting checkpoint
    max_completion_length: int = Field(16, ge=1)
    temperature: float = Field(1.0, gt=0)
    reward_threshold: float = Field(1.0, gt=0, le=1)  # reward 1 only for a full grader score


class DistillationRecipe(_Common):
    algorithm: Literal["distillation"]
    teacher: str  # a model folder (absolute, or relative to the repository root)
    max_completion_length: int = Field(16, ge=1)
    temperature: float = Field(1.0, gt=0)
    beta: float = Field(0.0, ge=0, le=1)


Recipe = SFTRecipe | DPORecipe | GRPORecipe | RLOORecipe | DistillationRecipe
_BY_ALGO: dict[str, type[BaseModel]] = {"sft": SFTRecipe, "dpo": DPORecipe, "grpo": GRPORecipe, "rloo": RLOORecipe,
                                        "distillation": DistillationRecipe}
#: The TRL config class of each algorithm (``trl.<name>``).
TRL_CONFIG = {"sft": "SFTConfig", "dpo": "DPOConfig", "grpo": "GRPOConfig", "rloo": "RLOOConfig",
              "distillation": "DistillationConfig"}
#: Algorithms that sample completions in generation buffers (a chunk edge must not split one).
GENERATING = frozenset({"grpo", "rloo"})
#: Recipe keys that are monte's, not TRL's (never passed to the trainer).
MONTE_KEYS = frozenset({"algorithm", "model", "teacher", "reward_threshold", "schedule_steps"})

_STEPS = "a chunk's step count is the experiment's steps_per_chunk"
_SAVES = "monte saves one checkpoint per chunk, at its end, and records its files in the lineage"
_HUB = "`monte train --push` uploads each checkpoint to the experiment's hub repo with its lineage"
_EVAL = "monte measures on sealed exams with `monte eval`; the trainer is given no eval set"
#: TRL fields a recipe may not set, and why: monte owns them.
OWNED: dict[str, str] = {
    "steps": _STEPS, "max_steps": _STEPS, "steps_per_chunk": _STEPS,
    "output_dir": "the trainer writes into the run's folder, which monte chooses",
    "overwrite_output_dir": "the trainer writes into the run's folder, which monte chooses",
    **dict.fromkeys(("save_strategy", "save_steps", "save_total_limit", "save_only_model", "save_on_each_node",
                     "save_safetensors", "enable_jit_checkpoint"), _SAVES),
    **dict.fromkeys(("push_to_hub", "hub_token", "hub_private_repo", "hub_model_id", "hub_strategy",
                     "hub_always_push", "hub_revision", "log_completions_hub_repo"), _HUB),
    "report_to": "monte records the trainer's logs in the run's event file (`monte logs RUN`)",
    "resume_from_checkpoint": "monte resumes a same-recipe continuation itself (`--parent RUN@STEP`)",
    "ignore_data_skip": "a continuation resumes the data position, so that it equals one longer chunk",
    **dict.fromkeys(("eval_strategy", "eval_steps", "eval_delay", "eval_on_start", "do_eval", "do_predict",
                     "load_best_model_at_end", "metric_for_best_model", "greater_is_better"), _EVAL),
    "teacher_model_name_or_path": "the teacher is the recipe's `teacher:` (a folder whose files the row records)",
}
#: Owned keys a dump carries whatever it holds: where files go is monte's, and nothing a recipe
#: means by them is lost.
_IGNORED_ANY = frozenset({"output_dir", "overwrite_output_dir"})
#: Values of owned keys that mean "as TRL/monte would have it", besides the field's default:
#: what ``to_dict()`` writes for them (a redacted token, no reporting) and what monte sets.
_AS_MONTE = {"hub_token": ("<HUB_TOKEN>",), "report_to": ([], "none", ["none"]), "save_strategy": ("steps", "no"),
             "save_only_model": (False,)}
#: Keys TRL no longer has, with what replaced them.
_RENAMED = {"warmup_ratio": "TRL folded it into warmup_steps: a value below 1 is a ratio of the horizon"}
#: Settings whose checks depend on the machine (a GPU, an installed backend): TRL checks them when
#: the chunk runs there, not on the laptop that plans it.
_DEVICE = frozenset({"bf16", "fp16", "tf32", "bf16_full_eval", "fp16_full_eval", "use_cpu", "use_liger_kernel",
                     "use_vllm", "deepspeed", "fsdp", "fsdp_config", "ddp_backend", "parallelism_config",
                     "accelerator_config", "torch_compile", "torch_compile_backend", "torch_compile_mode"})
#: Sane ranges of TRL's numeric fields (inclusive), each with what the number is: a value past
#: them crashes the trainer mid-chunk (``islice`` of a 1e32 batch), or takes the machine down
#: (100,000 dataloader worker processes). Any other number must be finite and below 2**53.
RANGES: dict[str, tuple[float, float, str]] = {
    **dict.fromkeys(("per_device_train_batch_size", "per_device_eval_batch_size", "gradient_accumulation_steps",
                     "steps_per_generation", "num_iterations", "generation_batch_size"),
                    (1, 2**16, "a count of examples or micro-batches")),
    "dataloader_num_workers": (0, 256, "worker processes (each a fork of the trainer)"),
    "dataloader_prefetch_factor": (1, 1024, "batches each worker loads ahead"),
    "num_generations": (2, 4096, "completions per prompt"),
    **dict.fromkeys(("max_length", "max_completion_length", "max_prompt_length", "max_seq_length"),
                    (1, 2**20, "tokens")),
    **dict.fromkeys(("seed", "data_seed"), (0, 2**32 - 1, "a random seed (numpy takes below 2**32)")),
    "warmup_steps": (0, 10**9, "steps (below 1: a ratio)"),
    "schedule_steps": (1, 10**9, "steps"),
    "num_train_epochs": (0, 10**6, "epochs"),
    "logging_steps": (0, 10**9, "steps (below 1: a ratio)"),
}
_MAX_NUMBER = 2**53
#: Schedules that do not depend on the run's length.
_FLAT = frozenset({"constant", "constant_with_warmup"})
#: A recipe's nested values (lists, mappings) are bounded: a YAML alias bomb expands exponentially.
_MAX_NODES = 10_000


class ResolvedRecipe(BaseModel):
    name: str
    path: str
    sha256: str
    algorithm: str
    spelled_as_path: bool
    settings: dict[str, Any]
    #: keys of a pasted TRL dump that monte owns and that held TRL's default or monte's own value:
    #: key -> why it is ignored (never passed to the trainer, never recorded as a setting)
    ignored: dict[str, str] = {}

    def parsed(self) -> Any:
        model = _BY_ALGO[self.algorithm]  # monte's typed keys; the other TRL fields: trl_settings()
        return model.model_validate({k: v for k, v in self.settings.items() if k in model.model_fields})

    def identity(self) -> dict[str, str]:
        return {"name": self.name, "sha256": self.sha256, "algorithm": self.algorithm}

    def trl_settings(self) -> dict[str, Any]:
        """The recipe's settings that are TRL config fields (monte's own keys left out)."""
        return {k: v for k, v in self.settings.items() if k not in MONTE_KEYS}


def trl_config_class(algorithm: str) -> Any:
    """TRL's config class for ``algorithm`` (imports trl: train and plan paths only)."""
    import trl

    return getattr(trl, TRL_CONFIG[algorithm])


def _field_names(algorithm: str) -> set[str]:
    return {f.name for f in dataclasses.fields(trl_config_class(algorithm)) if f.init}


def check_chunk(rec: ResolvedRecipe, resume_step: int, steps: int) -> None:
    """Refuse a chunk the recipe cannot run exactly: past its schedule's horizon, or (GRPO, RLOO) ending
    inside a generation buffer, which a checkpoint does not keep."""
    s = rec.settings
    horizon = s.get("schedule_steps")
    if horizon is None and resume_step > 0 and decays(s):
        raise error("E_REFUSED", f"recipe {rec.name} declares no schedule_steps, so its schedule "
                    f"({s.get('lr_scheduler_type')!r}, warmup_steps {s.get('warmup_steps')!r}) spans one chunk; "
                    "continuing it would start that schedule again at this chunk's edge",
                    "cross a stage boundary with another recipe (its schedule starts afresh), or declare the "
                    "stage's horizon with schedule_steps: N in a new recipe")
    if horizon is not None and resume_step + steps > horizon:
        warm = s.get("warmup_steps") or 0
        raise error("E_REFUSED", f"recipe {rec.name} declares schedule_steps: {horizon}, and this chunk would "
                    f"train steps {resume_step} -> {resume_step + steps} of its stage: its schedule ends at step "
                    f"{horizon}",
                    "go on across a stage boundary with another recipe (a new recipe, schedule_steps raised or "
                    "not, is a new stage): its schedule starts afresh at its own step 0"
                    + (f", warmup included (this one warms up over {warm!r} steps; a warmup again drops the "
                       "learning rate and the score dips): give the new recipe warmup_steps: 0" if warm else "")
                    + ", and a learning_rate no higher than where this stage's schedule left it")
    if rec.algorithm in GENERATING:
        gas = int(s.get("gradient_accumulation_steps", 1))
        cycle = int(s.get("steps_per_generation") or gas) * int(s.get("num_iterations") or 1)
        if (steps * gas) % cycle:
            raise error("E_REFUSED", f"recipe {rec.name}: one generation buffer spans {cycle} micro-batches "
                        f"(steps_per_generation x num_iterations), and a {steps}-step chunk of "
                        f"{steps * gas} micro-batches would end inside one; the buffer is not in a checkpoint",
                        "make steps_per_chunk x gradient_accumulation_steps a multiple of steps_per_generation "
                        "x num_iterations")


def search_path(repo_root: Path) -> list[Path]:
    import monte

    return [repo_root / "recipes", Path(monte.__file__).parent / "recipes"]


class RecipeHead(NamedTuple):
    """What a recipe is, read without importing TRL (which imports torch): enough for the
    refusals that need no trainer (a starting point, a source's kind, a baseline)."""

    name: str
    algorithm: str
    model: Any


def _find(spec: str, repo_root: Path) -> tuple[Path, bool]:
    as_path = "/" in spec or spec.endswith((".yaml", ".yml"))
    if as_path:
        path = Path(os.path.expanduser(spec))  # ~nosuchuser stays as typed (Path.expanduser raises)
        if not path.is_absolute():
            path = (Path.cwd() / path)
        if not path.is_file():
            raise error("E_NOT_FOUND", f"no recipe file {path}", "check the path, or name a recipe (`monte config`)")
    else:
        for folder in search_path(repo_root):
            hits = [folder / f"{spec}{ext}" for ext in (".yaml", ".yml") if (folder / f"{spec}{ext}").is_file()]
            if hits:
                path = hits[0]
                break
        else:
            raise error("E_NOT_FOUND", f"no recipe named {spec!r}",
                        "list the resolvable names with `monte config`")
    return path, as_path


def peek(spec: str, repo_root: Path) -> RecipeHead:
    """The recipe's name, algorithm and model, its YAML proven; its TRL fields are proven by
    :func:`resolve`."""
    path, _ = _find(spec, repo_root)
    data = _load(path.read_bytes(), path)
    return RecipeHead(name=path.stem, algorithm=data["algorithm"], model=data.get("model"))


def resolve(spec: str, repo_root: Path) -> ResolvedRecipe:
    path, as_path = _find(spec, repo_root)
    raw = path.read_bytes()
    settings = _validate(raw, path)
    ignored = settings.pop("_ignored")
    return ResolvedRecipe(name=path.stem, path=str(path), sha256=sha256_bytes(raw),
                          algorithm=settings["algorithm"], spelled_as_path=as_path, settings=settings,
                          ignored=ignored)


def _load(raw: bytes, path: Path) -> dict[str, Any]:
    """The recipe's settings as plain values, its algorithm known (no TRL import)."""
    from ruamel.yaml import YAML
    from ruamel.yaml.error import YAMLError

    try:
        data = YAML(typ="rt").load(raw.decode())
    except (YAMLError, UnicodeDecodeError) as e:
        raise error("E_BAD_INPUT", f"recipe {path} is not valid YAML: {e}", "fix the file") from None
    except RecursionError:
        raise error("E_BAD_INPUT", f"recipe {path} nests too deeply to be a recipe", "fix the file") from None
    if not isinstance(data, dict):
        raise error("E_BAD_INPUT", f"recipe {path} must be a mapping of settings", "fix the file")
    for k in data:
        if not isinstance(k, str | int | float | bool):
            raise error("E_BAD_INPUT", f"recipe {path}: a key must be a name, not a {type(k).__name__}",
                        "fix the file")
    # TRL takes lists and mappings (report_to, lr_scheduler_kwargs, ...): walked with one budget,
    # so a YAML alias bomb is refused before it expands
    budget = [_MAX_NODES]
    try:
        data = {str(k): _plain(v, budget) for k, v in data.items()}
    except RecursionError:
        raise error("E_BAD_INPUT", f"recipe {path} nests too deeply to be a recipe", "fix the file") from None
    if budget[0] < 0:
        raise error("E_BAD_INPUT", f"recipe {path}: a setting holds more than {_MAX_NODES} values (a YAML alias "
                    "bomb?)", "fix the file")
    algo = data.get("algorithm")
    if algo is None:
        raise error("E_BAD_INPUT", f"recipe {path} has no 'algorithm'",
                    "add `algorithm: sft` (or dpo, grpo, rloo, distillation)")
    if not isinstance(algo, str) or algo not in _BY_ALGO:
        raise error("E_BAD_INPUT", f"recipe {path}: unknown algorithm {algo!r}",
                    f"use one of: {', '.join(_BY_ALGO)}")
    return data


def _validate(raw: bytes, path: Path) -> dict[str, Any]:
    data = _load(raw, path)
    algo = data["algorithm"]
    model = _BY_ALGO[algo]
    cls = trl_config_class(algo)
    fields = {f.name: f for f in dataclasses.fields(cls) if f.init}
    bad: list[tuple[str, str]] = []  # (key, why): every one is named in the one refusal
    extras: dict[str, Any] = {}
    suggestions: dict[str, list[str]] = {}
    ignored: dict[str, str] = {}
    for k, v in data.items():
        if k in OWNED:
            if k in _IGNORED_ANY or (k in fields and _as_default(fields[k], v)) or v in _AS_MONTE.get(k, ()):
                ignored[k] = OWNED[k]  # a pasted dump's own default: nothing asked of the trainer
            else:
                bad.append((k, f"cannot be set by a recipe: {OWNED[k]} (it holds {v!r}; TRL's default, "
                            "which a dump carries, is ignored)"))
        elif k in model.model_fields:
            continue
        elif k in fields and k.endswith("_token") and v == f"<{k.upper()}>":
            ignored[k] = "to_dict() writes this placeholder for a token field; TRL's default stands"
        elif k in fields:
            why = _type_error(fields[k].type, v)
            if why and _trl_maps(cls, fields[k], v):
                why = None  # TRL maps it itself (scale_rewards: false is "none")
            if why:
                bad.append((k, f"{why} (got {v!r})"))
            elif v is not None:  # null: the default (monte's where it sets one, else TRL's)
                extras[k] = v
        else:
            close = [x for x in difflib.get_close_matches(k, [*fields, *model.model_fields], n=3, cutoff=0.5)
                     if x not in OWNED]
            close.sort(key=lambda x: x not in model.model_fields)  # monte's typed keys first, stably
            suggestions[k] = close
            other = [a for a in TRL_CONFIG if a != algo and k in _field_names(a)]
            bad.append((k, f"unknown key (not a field of trl.{TRL_CONFIG[algo]})"
                        + (f"; it is a field of trl.{TRL_CONFIG[other[0]]}, for a {other[0]} recipe" if other
                           else f"; {_RENAMED[k]}" if k in _RENAMED
                           else f"; did you mean: {', '.join(close)}" if close else "")))
    derived = _derived(data, extras)
    if derived:
        ignored[derived] = "TRL derives it from steps_per_generation (a dump carries both; TRL takes one)"
        del extras[derived]
    known = {k: v for k, v in data.items() if k in model.model_fields}
    parsed: Any = None
    try:
        parsed = model.model_validate(known)
    except ValidationError as e:
        for err in e.errors():
            key = ".".join(str(x) for x in err["loc"][:1]) or "?"
            bad.append((key, "a required key is missing" if err["type"] == "missing"
                        else f"{err['msg']} (got {known.get(key)!r})"))
    bad += _schedule_errors({**model.model_construct().model_dump(), **known})
    named = {k for k, _ in bad}
    bad += [(k, why) for k, why in _range_errors({**known, **extras}) if k not in named]
    if bad:
        raise _refusal(path, algo, bad, suggestions)
    settings: dict[str, Any] = parsed.model_dump()
    if settings.get("schedule_steps") is None:
        del settings["schedule_steps"]  # an existing recipe's recorded settings stay as they were
    settings.update(extras)
    settings["_ignored"] = ignored  # taken out by resolve()
    import warnings

    try:  # TRL's own checks on the values (choices, combinations), before anything runs
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            cls(**{"output_dir": str(path.parent), "use_cpu": True,
                   **{k: v for k, v in settings.items() if k not in MONTE_KEYS | _DEVICE | {"_ignored"}},
                   "max_steps": 1, "report_to": []})
    except (ValueError, TypeError, KeyError, AttributeError) as e:
        raise error("E_BAD_INPUT", f"recipe {path}: trl.{TRL_CONFIG[algo]} refuses these settings: {e}",
                    "fix the value it names") from None
    return settings


def _refusal(path: Path, algo: str, bad: list[tuple[str, str]], _near: dict[str, list[str]]) -> Exception:
    keys = list(dict.fromkeys(k for k, _ in bad))
    lines = "; ".join(f"{k!r}: {why}" for k, why in bad)
    if any(k in ("steps", "max_steps", "steps_per_chunk") for k in keys):
        fix = "a chunk's step count is the experiment's steps_per_chunk; remove the key"
    else:
        fix = ""
    named = ", ".join(repr(k) + (f" (did you mean {near[0]}?)" if (near := _near.get(k)) else "") for k in keys)
    fix = "; ".join(x for x in (fix, f"fix or remove {named}; a {algo} recipe takes "
                                f"the fields of trl.{TRL_CONFIG[algo]} except those monte owns, and monte's "
                                f"own: {', '.join(sorted(MONTE_KEYS & set(_BY_ALGO[algo].model_fields)))}") if x)
    n = f"{len(keys)} bad keys" if len(keys) > 1 else "a bad key"
    return error("E_BAD_INPUT", f"recipe {path}: {n}: {lines}", fix)


def _schedule_errors(s: dict[str, Any]) -> list[tuple[str, str]]:
    """A schedule TRL knows. (One that depends on the run's length spans ``schedule_steps``, or
    without it the one chunk: :func:`check_chunk` refuses to continue it.)"""
    from transformers.trainer_utils import SchedulerType

    sched = s.get("lr_scheduler_type")
    names = [t.value for t in SchedulerType]
    if isinstance(sched, str) and sched not in names:
        return [("lr_scheduler_type", f"unknown schedule {sched!r}; TRL's are: {', '.join(names)}")]
    return []


def decays(settings: dict[str, Any]) -> bool:
    """Whether the schedule depends on the run's length (a decay, or a warm-up ratio)."""
    sched, warm = settings.get("lr_scheduler_type"), settings.get("warmup_steps")
    return (isinstance(sched, str) and sched not in _FLAT) or (
        isinstance(warm, int | float) and not isinstance(warm, bool) and 0 < warm < 1)


def _range_errors(s: dict[str, Any]) -> list[tuple[str, str]]:
    """Every number within its sane range (:data:`RANGES`), finite and below 2**53."""
    import math

    out = []
    for k, v in s.items():
        if isinstance(v, bool) or not isinstance(v, int | float):
            continue
        lo, hi, what = RANGES.get(k, (-_MAX_NUMBER, _MAX_NUMBER, "a number"))
        if isinstance(v, float) and not math.isfinite(v):
            out.append((k, f"{v!r} is not a finite number"))
        elif not lo <= v <= hi:
            out.append((k, f"{v!r} is out of range: {lo:g} to {hi:g} ({what})"))
    return out


def _derived(data: dict[str, Any], extras: dict[str, Any]) -> str | None:
    """GRPO's ``generation_batch_size`` when a dump holds it beside the ``steps_per_generation``
    TRL derived it from (batch x steps per generation, one process): the one TRL computed."""
    gen, spg = extras.get("generation_batch_size"), extras.get("steps_per_generation")
    batch = data.get("per_device_train_batch_size", 8)
    if isinstance(gen, int) and isinstance(spg, int) and isinstance(batch, int) and gen == batch * spg:
        return "generation_batch_size"
    return None


def _as_default(f: dataclasses.Field[Any], value: Any) -> bool:
    """Whether ``value`` is TRL's default for the field, as a dump writes it."""
    if value is None:
        return True
    default = (f.default if f.default is not dataclasses.MISSING
               else f.default_factory() if f.default_factory is not dataclasses.MISSING else None)
    if isinstance(default, enum.Enum):
        default = default.value
    return bool(value == default and type(value) is type(default))


def _trl_maps(cls: Any, f: dataclasses.Field[Any], value: Any) -> bool:
    """Whether TRL's own constructor maps ``value`` onto a value of the field's type (GRPO's
    ``scale_rewards: false`` becomes ``"none"``); a value it keeps as given (``packing: 3``) is
    not one it understood."""
    import warnings

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            mapped = getattr(cls(output_dir="trainer_output", use_cpu=True, report_to=[], **{f.name: value}), f.name)
    except Exception:  # noqa: BLE001 (any refusal of TRL's is a no)
        return False
    return bool(mapped != value and _type_error(f.type, mapped) is None)


_SIMPLE = (bool, int, float, str, type(None))


def _type_error(annotation: Any, value: Any) -> str | None:
    """A check of a value against a TRL field's annotation, where it is a plain type or a union of
    them (enums accept their names as str; anything richer is left to TRL's constructor)."""
    options = annotation.__args__ if isinstance(annotation, types.UnionType) else (annotation,)
    if not all(isinstance(o, type) for o in options):
        return None
    for o in options:
        if issubclass(o, enum.Enum) and isinstance(value, str):
            names = [str(m.value) for m in o]
            return None if value in names else f"{value!r} is not one of: {', '.join(names)}"
    plain = [o for o in options if o in _SIMPLE]
    if len(plain) != len(options):
        if any(isinstance(value, o) for o in options if o not in _SIMPLE) or isinstance(value, str):
            return None
        if not plain:
            return None
    ok = any(type(value) is o or (o is float and type(value) is int) for o in plain)
    return None if ok else f"expects {' or '.join(o.__name__ for o in options)}, not {type(value).__name__}"


def _plain(obj: Any, budget: list[int] | None = None) -> Any:
    """Plain Python values (ruamel's scalar subclasses made builtins); stops walking once
    ``budget`` is spent, so a YAML alias bomb is never expanded."""
    budget = [_MAX_NODES] if budget is None else budget
    budget[0] -= 1
    if budget[0] < 0:
        return None  # the caller refuses
    if isinstance(obj, dict):
        return {str(k): _plain(v, budget) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_plain(x, budget) for x in obj]
    for t in (bool, int, float, str):
        if isinstance(obj, t):
            return t(obj)
    return obj


def add_recipe(repo_root: Path, name: str, text: str) -> dict[str, Any]:
    """``recipes/NAME.yaml`` written from ``text``, refused unless it resolves as any recipe does
    (every bad key named) and NAME is not a recipe already (a recipe is part of a run's record:
    its bytes are hashed into each plan, so one is never overwritten)."""
    from monte.names import check_name

    check_name(name, "recipe name")
    folder = repo_root / "recipes"
    taken = [f for d in search_path(repo_root) for f in (d / f"{name}.yaml", d / f"{name}.yml") if f.is_file()]
    if taken:
        raise error("E_NAME_TAKEN", f"a recipe named {name!r} exists ({taken[0]})",
                    "pick another name (`monte config` lists the recipes)")
    raw = text.encode()
    path = folder / f"{name}.yaml"
    settings = _validate(raw, path)
    folder.mkdir(parents=True, exist_ok=True)
    tmp = folder / f".{name}.yaml.tmp"
    try:
        tmp.write_bytes(raw)
        os.replace(tmp, path)
    finally:  # a refused write (a folder where the file goes, a full disk) leaves no half-file behind
        tmp.unlink(missing_ok=True)
    return {"name": name, "path": str(path), "sha256": sha256_bytes(raw), "algorithm": settings["algorithm"]}
