"""Recipes: the training method of one Run, as a YAML file.

A recipe names its ``algorithm`` (sft, grpo or distillation), optionally a ``model``, and the
trainer settings monte lets it set. Unknown keys and wrong types refuse before anything runs,
naming the key. A recipe cannot set the step count: ``steps_per_chunk`` belongs to the experiment,
because that count is what ``train@N`` means.

Resolution: a path (contains ``/`` or ends in ``.yaml``/``.yml``), else a name looked up in the
repository's ``recipes/`` and then the packaged ``monte/recipes/`` (first match wins).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from monte.errors import error
from monte.hashing import sha256_bytes


class _Common(BaseModel):
    # strict: `per_device_train_batch_size: true` or a quoted number is a mistake, not a value
    model_config = ConfigDict(extra="forbid", strict=True)
    model: str | None = None
    learning_rate: float = Field(1e-4, gt=0, lt=1)
    lr_scheduler_type: Literal["constant", "constant_with_warmup"] = "constant_with_warmup"
    warmup_steps: int = Field(0, ge=0)
    per_device_train_batch_size: int = Field(8, ge=1)
    gradient_accumulation_steps: int = Field(1, ge=1)
    weight_decay: float = Field(0.0, ge=0)
    max_grad_norm: float = Field(1.0, gt=0)
    seed: int = 0


class SFTRecipe(_Common):
    algorithm: Literal["sft"]
    max_length: int = Field(256, ge=8)
    completion_only_loss: bool = True


class GRPORecipe(_Common):
    algorithm: Literal["grpo"]
    num_generations: int = Field(8, ge=2)
    beta: float = Field(0.04, ge=0)  # > 0: a KL anchor to the stage's starting checkpoint
    max_completion_length: int = Field(16, ge=1)
    temperature: float = Field(1.0, gt=0)
    reward_threshold: float = Field(1.0, gt=0, le=1)  # reward 1 only for a full grader score


class DistillationRecipe(_Common):
    algorithm: Literal["distillation"]
    teacher: str  # a model folder (absolute, or relative to the repository root)
    max_completion_length: int = Field(16, ge=1)
    temperature: float = Field(1.0, gt=0)
    beta: float = Field(0.0, ge=0, le=1)


Recipe = SFTRecipe | GRPORecipe | DistillationRecipe
_BY_ALGO: dict[str, type[BaseModel]] = {"sft": SFTRecipe, "grpo": GRPORecipe, "distillation": DistillationRecipe}


class ResolvedRecipe(BaseModel):
    name: str
    path: str
    sha256: str
    algorithm: str
    spelled_as_path: bool
    settings: dict[str, Any]

    def parsed(self) -> Any:
        return _BY_ALGO[self.algorithm].model_validate(self.settings)

    def identity(self) -> dict[str, str]:
        return {"name": self.name, "sha256": self.sha256, "algorithm": self.algorithm}


def search_path(repo_root: Path) -> list[Path]:
    import monte

    return [repo_root / "recipes", Path(monte.__file__).parent / "recipes"]


def resolve(spec: str, repo_root: Path) -> ResolvedRecipe:
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
    raw = path.read_bytes()
    settings = _validate(raw, path)
    return ResolvedRecipe(name=path.stem, path=str(path), sha256=sha256_bytes(raw),
                          algorithm=settings["algorithm"], spelled_as_path=as_path, settings=settings)


def _validate(raw: bytes, path: Path) -> dict[str, Any]:
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
    # Every setting is one value: refuse a list or mapping here, before anything walks it (a
    # YAML alias bomb expands exponentially once copied).
    for k, v in data.items():
        if not isinstance(k, str | int | float | bool):
            raise error("E_BAD_INPUT", f"recipe {path}: a key must be a name, not a {type(k).__name__}",
                        "fix the file")
        if isinstance(v, dict | list):
            raise error("E_BAD_INPUT", f"recipe {path}: {str(k)!r}: a setting takes one value, not a "
                        f"{'mapping' if isinstance(v, dict) else 'list'}", f"fix or remove {str(k)!r}")
    data = {str(k): v for k, v in data.items()}
    if "steps" in data or "max_steps" in data or "steps_per_chunk" in data:
        key = next(k for k in ("steps", "max_steps", "steps_per_chunk") if k in data)
        raise error("E_BAD_INPUT", f"recipe {path}: {key!r} cannot be set by a recipe",
                    "a chunk's step count is the experiment's steps_per_chunk; remove the key")
    algo = data.get("algorithm")
    if algo is None:
        raise error("E_BAD_INPUT", f"recipe {path} has no 'algorithm'", "add `algorithm: sft` (or grpo, distillation)")
    if not isinstance(algo, str) or algo not in _BY_ALGO:
        raise error("E_BAD_INPUT", f"recipe {path}: unknown algorithm {algo!r}",
                    "use one of: sft, grpo, distillation")
    try:
        parsed = _BY_ALGO[str(algo)].model_validate(_plain(data))
    except ValidationError as e:
        first = e.errors()[0]
        key = ".".join(str(x) for x in first["loc"]) or "?"
        msg = "unknown key" if first["type"] == "extra_forbidden" else first["msg"]
        raise error("E_BAD_INPUT", f"recipe {path}: {key!r}: {msg}",
                    f"fix or remove {key!r}; the keys a {algo} recipe takes are: "
                    + ", ".join(sorted(_BY_ALGO[str(algo)].model_fields))) from None
    return parsed.model_dump()


def _plain(obj: Any) -> Any:
    if isinstance(obj, dict):
        return {str(k): _plain(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_plain(x) for x in obj]
    return obj
