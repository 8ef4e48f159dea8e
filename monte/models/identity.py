"""A model folder's identity: what the loader reads, hashed canonically, and a sketch of it.

Four things, all read without torch (the standard library only: safetensors headers, the zip
and pickle of a ``pytorch_model.bin`` read through a restricted unpickler that builds nothing):

- :func:`weight_files`: the files ``AutoModelForCausalLM.from_pretrained(folder)`` loads, found
  the way transformers finds them in a local folder: ``config.json``'s ``transformers_weights``
  when it names one, else ``model.safetensors``, else ``model.safetensors.index.json`` and the
  shards its ``weight_map`` names, else ``pytorch_model.bin``, else its index. Nothing else in
  the folder counts. A folder transformers would load from elsewhere is refused: an index or
  ``transformers_weights`` naming a file outside the folder or in a subfolder (``E_UNSAFE_PATH``)
  or a file monte keeps out of a model (trainer state, ``rng_state*``, a hidden file:
  ``E_REFUSED``), and a PEFT adapter folder (``adapter_config.json``: its base is elsewhere).
- :func:`weights_identity`: a sha256 over those files' tensors, each by (name, dtype, shape,
  sha256 of its bytes in C order), sorted, each name canonical as the loader maps it
  (:func:`canonical_names`: the class's ``base_model_prefix`` added or a doubled one dropped, the
  legacy renames such as ``LayerNorm.gamma``): the same for a safetensors file, a resharded copy,
  another tensor order or ``__metadata__``, and a ``pytorch_model.bin`` holding the same tensors.
  Tied weights count once: with ``tie_word_embeddings`` (transformers' default), an
  ``lm_head.weight`` equal to another tensor of the folder is that tensor.
- :func:`setup`: what else changes what the model computes or how a prompt is tokenized:
  ``config.json`` (every field but :data:`CONFIG_METADATA`), ``generation_config.json`` (every
  field but :data:`GENERATION_METADATA`), and the tokenizer: ``tokenizer.json`` (but its runtime
  ``padding``/``truncation``), the fields :data:`TOKENIZER_FIELDS` of ``tokenizer_config.json``,
  ``special_tokens_map.json``, ``added_tokens.json``, the chat template files and vocabulary files
  (:data:`TOKENIZER_FILES`), each canonical (JSON parsed and re-written; key order, whitespace
  and the fields named as metadata do not count).
- :func:`sketch` / :func:`distance`: :data:`K` values of each tensor at seeded positions (chosen
  from the tensor's name and shape alone, so two folders are sampled at the same places), and the
  share of a known model's parameters (each tensor weighted by its size) whose sampled values a
  candidate does not reproduce within :data:`RTOL`. A near-copy (a flipped bit, a dtype round
  trip, an extra tensor, a junk file) is within :data:`NEAR` of the model it copies; another seed,
  another size or a real fine-tuning step is far beyond it (docs/reliability.md has the figures).
"""

from __future__ import annotations

import base64
import hashlib
import json
import math
import os
import random
import struct
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from monte.errors import error
from monte.models.tensors import DTYPES, Tensor, bad_file, safetensors_tensors, torch_tensors

SAFE_WEIGHTS = "model.safetensors"
SAFE_INDEX = "model.safetensors.index.json"
PT_WEIGHTS = "pytorch_model.bin"
PT_INDEX = "pytorch_model.bin.index.json"
#: Files a trainer writes beside the weights that are not part of the servable model.
TRAINER_STATE = frozenset({"optimizer.pt", "scheduler.pt", "trainer_state.json", "training_args.bin", "scaler.pt"})
MAX_JSON = 64 << 20  # a config, an index, a tokenizer file

#: config.json fields that say where the folder came from, not what it computes.
CONFIG_METADATA = frozenset({"_name_or_path", "transformers_version", "_commit_hash", "use_cache",
                             "_attn_implementation_autoset"})
GENERATION_METADATA = frozenset({"transformers_version", "_from_model_config"})
#: tokenizer_config.json fields that change how text becomes ids and back (the rest, such as
#: ``tokenizer_class``, ``name_or_path``, ``is_local`` or ``padding_side``, which monte sets
#: itself, are how a version of transformers writes the file).
TOKENIZER_FIELDS = frozenset({
    "chat_template", "bos_token", "eos_token", "unk_token", "sep_token", "cls_token", "mask_token",
    "additional_special_tokens", "extra_special_tokens", "added_tokens_decoder", "add_bos_token",
    "add_eos_token", "add_prefix_space", "clean_up_tokenization_spaces", "do_lower_case", "legacy",
    "model_max_length", "split_special_tokens", "spaces_between_special_tokens", "strip_accents",
    "tokenize_chinese_chars", "normalization", "errors",
})
#: tokenizer files read whole (JSON ones canonical); ``tokenizer.json`` less its runtime sections
TOKENIZER_FILES = ("tokenizer.json", "special_tokens_map.json", "added_tokens.json", "chat_template.jinja",
                   "chat_template.json", "vocab.json", "vocab.txt", "merges.txt", "tokenizer.model", "spiece.model",
                   "sentencepiece.bpe.model")

#: sampled values per tensor
K = 32
#: a sampled value is reproduced when within this relative distance (twice the largest relative
#: error of a bf16 round trip, 2**-9: bf16 keeps 8 significant bits)
RTOL = 2.0 ** -8
#: a candidate within this distance of a known model is a near-copy of it (docs/reliability.md)
NEAR = 0.25
SKETCH_VERSION = 1


def read_json(path: Path) -> Any:
    """A JSON file of a model folder; anything unreadable (deep nesting, huge numbers) is E_BAD_INPUT."""
    try:
        if path.stat().st_size > MAX_JSON:
            raise bad_file(path, "larger than 64 MiB")
        return json.loads(path.read_bytes().decode("utf-8"))
    except (ValueError, UnicodeDecodeError, RecursionError, OverflowError) as e:
        raise bad_file(path, f"not JSON ({type(e).__name__})") from None
    except OSError as e:
        raise bad_file(path, e.strerror or type(e).__name__) from None


def kept_out(name: str) -> bool:
    """A file monte never counts as part of a model (trainer state, RNG state, hidden files)."""
    return name in TRAINER_STATE or name.startswith("rng_state") or name.startswith(".")


# --- which files the loader reads ---------------------------------------------------------------


def config_of(folder: Path) -> dict[str, Any]:
    path = folder / "config.json"
    if not path.is_file():
        raise error("E_NOT_FOUND", f"{folder} is not a model folder (no config.json)",
                    "pass a folder saved with save_pretrained, or build one with `monte model init DIR`")
    config = read_json(path)
    if not isinstance(config, dict):
        raise bad_file(path, "not a JSON object")
    return config


def _shard(folder: Path, name: Any, named_by: str) -> str:
    if not isinstance(name, str) or not name:
        raise bad_file(folder / named_by, "a weight file is not named by a string")
    if name != os.path.basename(name) or name in (".", "..") or "\\" in name:
        raise error("E_UNSAFE_PATH", f"{folder / named_by} points at {name!r}, outside the model folder",
                    "a model's weights are files at the top of its folder; copy the shard in and name it there")
    if kept_out(name):
        raise error("E_REFUSED", f"{folder / named_by} points at {name}, a file monte keeps out of a model "
                    "(trainer state, RNG state or a hidden file): the loader would read weights the record "
                    "would not hold", "rename the shard (model-00001-of-00002.safetensors, ...) and its "
                    f"entries in {named_by}")
    if not (folder / name).is_file():
        raise error("E_NOT_FOUND", f"{folder / named_by} names {name}, which is not in {folder}",
                    "copy the missing shard in, or save the model again with save_pretrained")
    return name


def _index_shards(folder: Path, index_name: str) -> list[str]:
    index = read_json(folder / index_name)
    if not isinstance(index, dict) or not isinstance(index.get("weight_map"), dict) or "metadata" not in index:
        raise bad_file(folder / index_name, "an index needs a weight_map object and metadata")
    return sorted({_shard(folder, n, index_name) for n in index["weight_map"].values()})


def weight_files(folder: Path) -> list[str]:
    """The weight files transformers loads from this local folder (names, top level), in the
    order it looks for them (see the module docstring)."""
    config = config_of(folder)
    if (folder / "adapter_config.json").exists():
        raise error("E_REFUSED", f"{folder} holds adapter_config.json: with peft installed transformers loads "
                    "an adapter onto the base model it names, weights outside this folder",
                    "merge the adapter into its base (peft's merge_and_unload, then save_pretrained) and pass that")
    explicit = config.get("transformers_weights")
    if explicit is not None:
        if not isinstance(explicit, str) or not explicit.endswith((".safetensors", ".safetensors.index.json")):
            raise bad_file(folder / "config.json", "transformers_weights names neither a safetensors file nor its index")
        name = _shard(folder, explicit, "config.json")
        return _index_shards(folder, name) if name.endswith(".index.json") else [name]
    for name, index in ((SAFE_WEIGHTS, False), (SAFE_INDEX, True), (PT_WEIGHTS, False), (PT_INDEX, True)):
        if (folder / name).is_file():
            return _index_shards(folder, name) if index else [name]
    raise error("E_NOT_FOUND", f"{folder} holds no weights transformers would load ({SAFE_WEIGHTS}, {SAFE_INDEX}, "
                f"{PT_WEIGHTS} or {PT_INDEX})", "pass a folder saved with save_pretrained")


def tied(config: dict[str, Any]) -> bool:
    """Does the loader tie the output embedding to the input one (transformers' default: yes)?"""
    text = config.get("text_config")
    value = config.get("tie_word_embeddings", text.get("tie_word_embeddings", True) if isinstance(text, dict) else True)
    return bool(value)


#: ``base_model_prefix`` of the model classes whose base model is not at ``model`` (transformers'
#: default for the decoder families: llama, qwen2, mistral, gemma, phi, opt, ...), by ``model_type``,
#: so that the identity needs no import of transformers (and torch) to know it
BASE_MODEL_PREFIX = {"gpt2": "transformer", "gptj": "transformer", "gpt_bigcode": "transformer",
                     "bloom": "transformer", "falcon": "transformer", "mpt": "transformer", "codegen": "transformer",
                     "gpt_neo": "transformer", "ctrl": "transformer", "t5": "transformer", "gpt_neox": "gpt_neox",
                     "gpt_neox_japanese": "gpt_neox_japanese", "rwkv": "rwkv", "xlnet": "transformer"}
#: transformers' legacy key renames, applied to every checkpoint it loads (its "legacy" conversion
#: mapping): a tensor saved under the old name is the tensor of the new one
LEGACY_RENAMES = (("LayerNorm.gamma", "LayerNorm.weight"), ("LayerNorm.beta", "LayerNorm.bias"),
                  (".weight_g", ".parametrizations.weight.original0"),
                  (".weight_v", ".parametrizations.weight.original1"))


def base_model_prefix(config: dict[str, Any]) -> str:
    model_type = config.get("model_type")
    return BASE_MODEL_PREFIX.get(model_type, "model") if isinstance(model_type, str) else "model"


def canonical_names(names: Iterator[str] | list[str], prefix: str) -> dict[str, str]:
    """Each stored tensor name -> the name the loader gives it: the legacy renames, then the base
    model's prefix as transformers maps it when a checkpoint holds the base model's tensors
    without it (every name but the output head's gains it) or nested once more (one level
    dropped). A checkpoint saved by ``save_pretrained`` keeps every name (its identity is the one
    it always had); one with its names moved the loader undoes is the same tensors."""
    out: dict[str, str] = {}
    for name in names:
        new = name
        for old, repl in LEGACY_RENAMES:
            new = new.replace(old, repl)
        out[name] = new
    p = prefix + "."
    if out and not any(n.startswith(p) for n in out.values()):
        out = {k: n if _is_output_embedding(n) else p + n for k, n in out.items()}
    elif out and all(n.startswith(p + p) or _is_output_embedding(n) for n in out.values()):
        out = {k: n.removeprefix(p) if n.startswith(p + p) else n for k, n in out.items()}
    return out


def _is_output_embedding(name: str) -> bool:
    return name == "lm_head.weight" or name.endswith(".lm_head.weight")


@dataclass(frozen=True)
class Weights:
    """The tensors the loader reads from a folder, canonical, with each one's digest."""

    files: tuple[str, ...]
    tensors: dict[str, Tensor]
    digests: dict[str, str]
    tied_once: tuple[str, ...] = ()  # the tied duplicates left out

    def entries(self) -> list[list[Any]]:
        return sorted((["tensor", n, t.dtype, list(t.shape), self.digests[n]] for n, t in self.tensors.items()),
                      key=lambda e: json.dumps(e, sort_keys=True))

    def identity(self) -> str:
        body = json.dumps(self.entries(), sort_keys=True, separators=(",", ":")).encode()
        return hashlib.sha256(body).hexdigest()


def read_weights(folder: Path) -> Weights:
    """Every tensor of the folder's weight files (:func:`weight_files`), tied duplicates once."""
    folder = Path(folder)
    config = config_of(folder)
    files = weight_files(folder)
    tensors: dict[str, Tensor] = {}
    for name in files:
        path = folder / name
        found = torch_tensors(path) if name.endswith(".bin") else safetensors_tensors(path)
        for t in found:
            if t.name in tensors:
                raise bad_file(path, f"tensor {t.name!r} is in two weight files")
            tensors[t.name] = t
    # the names the loader gives them: a renamed copy is the same tensors, so the same cohort
    names = canonical_names(sorted(tensors), base_model_prefix(config))
    if len(set(names.values())) < len(names):
        raise bad_file(folder / files[0], "two tensors are loaded under one name (a renamed copy beside the original)")
    tensors = {names[n]: t for n, t in tensors.items()}
    digests = {n: t.digest() for n, t in tensors.items()}
    dropped: list[str] = []
    if tied(config):
        content = {(t.dtype, t.shape, digests[n]): n for n, t in sorted(tensors.items())
                   if not _is_output_embedding(n)}
        for n in [n for n in tensors if _is_output_embedding(n)]:
            if (tensors[n].dtype, tensors[n].shape, digests[n]) in content:
                del tensors[n], digests[n]
                dropped.append(n)
    return Weights(tuple(files), tensors, digests, tuple(dropped))


def weights_identity(folder: Path) -> str:
    """The sha256 of the tensors the loader reads (see the module docstring)."""
    return read_weights(folder).identity()


# --- config and tokenizer -----------------------------------------------------------------------


def _canonical(value: Any) -> bytes:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def setup(folder: Path) -> dict[str, str]:
    """sha256 of each part of the folder that changes what the model computes or how prompts
    are tokenized, besides its weights: ``config``, ``generation`` and ``tokenizer``."""
    folder = Path(folder)
    config = {("dtype" if k == "torch_dtype" else k): v for k, v in config_of(folder).items()
              if k not in CONFIG_METADATA}
    parts: dict[str, Any] = {"config": config}
    gen = folder / "generation_config.json"
    if gen.is_file():
        raw = read_json(gen)
        parts["generation"] = {k: v for k, v in raw.items() if k not in GENERATION_METADATA} \
            if isinstance(raw, dict) else raw
    else:
        parts["generation"] = None
    tok: dict[str, Any] = {}
    cfg = folder / "tokenizer_config.json"
    if cfg.is_file():
        raw = read_json(cfg)
        tok["tokenizer_config.json"] = {k: v for k, v in raw.items() if k in TOKENIZER_FIELDS and v is not None} \
            if isinstance(raw, dict) else raw
    for name in TOKENIZER_FILES:
        path = folder / name
        if not path.is_file():
            continue
        if name.endswith(".json"):
            raw = read_json(path)
            if name == "tokenizer.json" and isinstance(raw, dict):
                raw = {k: v for k, v in raw.items() if k not in ("padding", "truncation")}
            tok[name] = raw
        else:
            tok[name] = hashlib.sha256(path.read_bytes()).hexdigest()
    parts["tokenizer"] = tok
    return {k: hashlib.sha256(_canonical(v)).hexdigest() for k, v in parts.items()}


# --- the sketch ---------------------------------------------------------------------------------


def positions(name: str, shape: tuple[int, ...] | list[int], k: int = K) -> list[int]:
    """The seeded element positions sampled from a tensor of this name and shape."""
    n = math.prod(shape)
    rng = random.Random(f"monte-sketch-v{SKETCH_VERSION}:{name}:{list(shape)}")
    return sorted(rng.sample(range(n), min(k, n)))


def _value(t: Tensor, raw: bytes) -> float:
    code = DTYPES[t.dtype][1]
    if t.dtype == "BF16":
        v: float = struct.unpack("<f", b"\x00\x00" + raw)[0]
    else:
        assert code is not None
        v = float(struct.unpack(code, raw)[0])
    return v


def _f32(v: float) -> bytes:
    try:
        return struct.pack("<f", v)
    except OverflowError:
        return struct.pack("<f", math.copysign(math.inf, v))


def sketch_of(weights: Weights) -> dict[str, Any]:
    """:data:`K` values of each tensor at :func:`positions` (float32, URL-safe base64, so that no
    value reads as a machine's folder), and its shape."""
    tensors: dict[str, Any] = {}
    for name, t in sorted(weights.tensors.items()):
        values = bytearray()
        with open(t.path, "rb") as f:
            for i in positions(name, t.shape):
                f.seek(t.element_offset(i))
                values += _f32(_value(t, f.read(t.itemsize)))
        tensors[name] = {"shape": list(t.shape), "values": base64.urlsafe_b64encode(bytes(values)).decode()}
    return {"v": SKETCH_VERSION, "k": K, "tensors": tensors}


def sketch(folder: Path) -> dict[str, Any]:
    return sketch_of(read_weights(folder))


def _values(entry: dict[str, Any]) -> list[float]:
    raw = base64.urlsafe_b64decode(entry["values"])
    return [v for (v,) in struct.iter_unpack("<f", raw)]


def _close(a: float, b: float, atol: float) -> bool:
    return a == b or abs(a - b) <= RTOL * abs(a) + atol


def distance(known: dict[str, Any], candidate: dict[str, Any], stop: float | None = None) -> float:
    """The share of ``known``'s parameters (each tensor weighted by its size) whose sampled values
    ``candidate`` does not reproduce within :data:`RTOL` (a tensor it lacks, or holds in another
    shape, counts whole). 0: every sampled value is there; 1: none is. Tensors only the candidate
    has do not count (the loader ignores a tensor its model has no place for). ``stop``: return
    as soon as the distance is known to exceed it (the largest tensors first)."""
    if known.get("v") != SKETCH_VERSION or candidate.get("v") != SKETCH_VERSION or known.get("k") != candidate.get("k"):
        return 1.0
    mine, theirs = known.get("tensors") or {}, candidate.get("tensors") or {}
    try:
        sizes = {name: float(math.prod(entry["shape"])) for name, entry in mine.items()}
        total = sum(sizes.values())
        if not total:
            return 1.0
        missed = 0.0
        for name in sorted(sizes, key=lambda k: -sizes[k]):
            entry, other, n = mine[name], theirs.get(name), sizes[name]
            if other is None or other.get("shape") != entry["shape"]:
                missed += n
            else:
                a, b = _values(entry), _values(other)
                if len(a) != len(b) or not a:
                    missed += n
                else:
                    mags = sorted(abs(x) for x in a if math.isfinite(x))
                    atol = RTOL * (mags[len(mags) // 2] if mags else 0.0)
                    missed += n * sum(1 for x, y in zip(a, b, strict=True) if not _close(x, y, atol)) / len(a)
            if stop is not None and missed / total > stop:
                break
        return missed / total
    except (KeyError, TypeError, ValueError, AttributeError):  # a sketch written by hand: nothing known
        return 1.0


@dataclass(frozen=True)
class ModelIdentity:
    """What monte knows of a model folder: its weight files, weights identity, setup and sketch."""

    files: tuple[str, ...]
    weights: str
    setup: dict[str, str]
    sketch: dict[str, Any]
    tied_once: tuple[str, ...] = ()


def identify(folder: Path) -> ModelIdentity:
    """One read of the folder: :func:`weights_identity`, :func:`setup` and :func:`sketch`."""
    w = read_weights(folder)
    return ModelIdentity(files=w.files, weights=w.identity(), setup=setup(folder), sketch=sketch_of(w),
                         tied_once=w.tied_once)


def nearest(candidate: dict[str, Any], known: Iterator[tuple[Any, dict[str, Any]]]) -> tuple[Any, float] | None:
    """The known model (``(label, sketch)`` pairs) nearest the candidate, and its distance."""
    best: tuple[Any, float] | None = None
    for label, sk in known:
        d = distance(sk, candidate)
        if best is None or d < best[1]:
            best = (label, d)
    return best
