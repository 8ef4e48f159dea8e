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
  sha256 of its bytes in C order), sorted: the same for a safetensors file, a resharded copy,
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
import pickle
import random
import struct
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from monte.errors import error

SAFE_WEIGHTS = "model.safetensors"
SAFE_INDEX = "model.safetensors.index.json"
PT_WEIGHTS = "pytorch_model.bin"
PT_INDEX = "pytorch_model.bin.index.json"
#: Files a trainer writes beside the weights that are not part of the servable model.
TRAINER_STATE = frozenset({"optimizer.pt", "scheduler.pt", "trainer_state.json", "training_args.bin", "scaler.pt"})
MAX_HEADER = 100 << 20  # safetensors' own limit on the JSON header
MAX_JSON = 64 << 20  # a config, an index, a tokenizer file

#: safetensors dtype -> (bytes per element, struct code or None: compared by raw value)
DTYPES: dict[str, tuple[int, str | None]] = {
    "F64": (8, "<d"), "F32": (4, "<f"), "F16": (2, "<e"), "BF16": (2, None), "I64": (8, "<q"), "I32": (4, "<i"),
    "I16": (2, "<h"), "I8": (1, "<b"), "U64": (8, "<Q"), "U32": (4, "<I"), "U16": (2, "<H"), "U8": (1, "<B"),
    "BOOL": (1, "<B"), "F8_E4M3": (1, "<B"), "F8_E5M2": (1, "<B"),
}
#: a ``pytorch_model.bin`` storage class -> the safetensors dtype of its elements
TORCH_STORAGES = {
    "DoubleStorage": "F64", "FloatStorage": "F32", "HalfStorage": "F16", "BFloat16Storage": "BF16",
    "LongStorage": "I64", "IntStorage": "I32", "ShortStorage": "I16", "CharStorage": "I8", "ByteStorage": "U8",
    "BoolStorage": "BOOL",
}

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


def _bad(path: Path, why: str) -> Exception:
    return error("E_BAD_INPUT", f"{path} is not a readable model file: {why}",
                 "pass a model folder saved with save_pretrained (or `monte model init DIR`)")


def read_json(path: Path) -> Any:
    """A JSON file of a model folder; anything unreadable (deep nesting, huge numbers) is E_BAD_INPUT."""
    try:
        if path.stat().st_size > MAX_JSON:
            raise _bad(path, "larger than 64 MiB")
        return json.loads(path.read_bytes().decode("utf-8"))
    except (ValueError, UnicodeDecodeError, RecursionError, OverflowError) as e:
        raise _bad(path, f"not JSON ({type(e).__name__})") from None
    except OSError as e:
        raise _bad(path, e.strerror or type(e).__name__) from None


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
        raise _bad(path, "not a JSON object")
    return config


def _shard(folder: Path, name: Any, named_by: str) -> str:
    if not isinstance(name, str) or not name:
        raise _bad(folder / named_by, "a weight file is not named by a string")
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
        raise _bad(folder / index_name, "an index needs a weight_map object and metadata")
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
            raise _bad(folder / "config.json", "transformers_weights names neither a safetensors file nor its index")
        name = _shard(folder, explicit, "config.json")
        return _index_shards(folder, name) if name.endswith(".index.json") else [name]
    for name, index in ((SAFE_WEIGHTS, False), (SAFE_INDEX, True), (PT_WEIGHTS, False), (PT_INDEX, True)):
        if (folder / name).is_file():
            return _index_shards(folder, name) if index else [name]
    raise error("E_NOT_FOUND", f"{folder} holds no weights transformers would load ({SAFE_WEIGHTS}, {SAFE_INDEX}, "
                f"{PT_WEIGHTS} or {PT_INDEX})", "pass a folder saved with save_pretrained")


# --- tensors ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Tensor:
    """One tensor as stored: where its elements are, and in what layout."""

    name: str
    dtype: str
    shape: tuple[int, ...]
    path: Path
    offset: int  # byte offset of element 0 in the file
    strides: tuple[int, ...]  # in elements

    @property
    def itemsize(self) -> int:
        return DTYPES[self.dtype][0]

    @property
    def numel(self) -> int:
        return math.prod(self.shape)

    def contiguous(self) -> bool:
        expect, want = 1, []
        for d in reversed(self.shape):
            want.append(expect)
            expect *= d
        return self.numel <= 1 or all(s == w for s, w, d in zip(self.strides, reversed(want), self.shape, strict=True) if d > 1)

    def element_offset(self, i: int) -> int:
        """Byte offset (in the file) of the i-th element in C order."""
        if self.contiguous():
            return self.offset + i * self.itemsize
        pos = 0
        for d, s in zip(reversed(self.shape), reversed(self.strides), strict=True):
            i, r = divmod(i, d)
            pos += r * s
        return self.offset + pos * self.itemsize

    def digest(self) -> str:
        h = hashlib.sha256()
        with open(self.path, "rb") as f:
            if self.contiguous():
                f.seek(self.offset)
                left = self.numel * self.itemsize
                while left:
                    chunk = f.read(min(left, 1 << 20))
                    if not chunk:
                        raise _bad(self.path, f"tensor {self.name} runs past the end of the file")
                    h.update(chunk)
                    left -= len(chunk)
            else:  # a strided view (a .bin may hold one): its elements in C order
                size = self.itemsize
                for i in range(self.numel):
                    f.seek(self.element_offset(i))
                    h.update(f.read(size))
        return h.hexdigest()


def _is_int(x: Any) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


def safetensors_tensors(path: Path) -> list[Tensor]:
    """The tensors of a safetensors file, its header checked as safetensors checks it (a
    hostile header, with ``1e999`` offsets or nesting 100,000 deep, is E_BAD_INPUT)."""
    try:
        size = path.stat().st_size
        with open(path, "rb") as f:
            head = f.read(8)
            if len(head) != 8:
                raise _bad(path, "shorter than a safetensors header")
            (n,) = struct.unpack("<Q", head)
            if n > MAX_HEADER or 8 + n > size:
                raise _bad(path, "its header length is out of range")
            raw = f.read(n)
    except OSError as e:
        raise _bad(path, e.strerror or type(e).__name__) from None
    try:
        header = json.loads(raw.decode("utf-8"))
    except (ValueError, UnicodeDecodeError, RecursionError, OverflowError) as e:
        raise _bad(path, f"its header is not JSON ({type(e).__name__})") from None
    if not isinstance(header, dict):
        raise _bad(path, "its header is not a JSON object")
    data = size - 8 - n
    out: list[Tensor] = []
    for name, meta in header.items():
        if name == "__metadata__":
            continue
        if not isinstance(meta, dict):
            raise _bad(path, f"tensor {name!r} has no description")
        dtype, shape, offsets = meta.get("dtype"), meta.get("shape"), meta.get("data_offsets")
        if not isinstance(dtype, str) or dtype not in DTYPES:
            raise _bad(path, f"tensor {name!r} has an unknown dtype")
        if not isinstance(shape, list) or len(shape) > 64 or not all(_is_int(d) and 0 <= d < 1 << 62 for d in shape):
            raise _bad(path, f"tensor {name!r} has no valid shape")
        if (not isinstance(offsets, list) or len(offsets) != 2 or not all(_is_int(x) for x in offsets)
                or not 0 <= offsets[0] <= offsets[1] <= data):
            raise _bad(path, f"tensor {name!r} has data offsets outside the file")
        if math.prod(shape) * DTYPES[dtype][0] != offsets[1] - offsets[0]:
            raise _bad(path, f"tensor {name!r}: its shape does not fill its data offsets")
        strides, s = [], 1
        for d in reversed(shape):
            strides.append(s)
            s *= d
        out.append(Tensor(name, dtype, tuple(shape), path, 8 + n + offsets[0], tuple(reversed(strides))))
    return out


@dataclass(frozen=True)
class _Storage:
    key: str
    dtype: str
    numel: int


@dataclass(frozen=True)
class _TensorRef:
    storage: _Storage
    offset: int
    shape: tuple[int, ...]
    strides: tuple[int, ...]


def _rebuild_tensor(storage: Any, offset: Any, size: Any, stride: Any, *_: Any) -> _TensorRef:
    if (not isinstance(storage, _Storage) or not _is_int(offset) or not isinstance(size, tuple)
            or not isinstance(stride, tuple) or len(size) != len(stride)
            or not all(_is_int(x) and x >= 0 for x in (*size, *stride))):
        raise ValueError("not a tensor")
    return _TensorRef(storage, offset, size, stride)


class _StateDict(dict):  # type: ignore[type-arg]
    """A state dict's ``OrderedDict``; torch pickles its ``_metadata`` attribute too."""


class _Unpickler(pickle.Unpickler):
    """Reads a torch zip pickle of tensors, building nothing but descriptions: any other global
    is refused (so a .bin cannot run code here, unlike ``torch.load`` without ``weights_only``)."""

    def find_class(self, module: str, name: str) -> Any:
        if module == "torch._utils" and name == "_rebuild_tensor_v2":
            return _rebuild_tensor
        if module == "collections" and name == "OrderedDict":
            return _StateDict
        if module == "torch" and name in TORCH_STORAGES:
            return ("storage-class", TORCH_STORAGES[name])
        raise pickle.UnpicklingError(f"{module}.{name} is not part of a tensor file")

    def persistent_load(self, pid: Any) -> Any:
        if (isinstance(pid, tuple) and len(pid) == 5 and pid[0] == "storage" and isinstance(pid[1], tuple)
                and pid[1][:1] == ("storage-class",) and isinstance(pid[2], str) and _is_int(pid[4])):
            return _Storage(pid[2], pid[1][1], pid[4])
        raise pickle.UnpicklingError("not a tensor storage")


def _stored_offset(path: Path, z: zipfile.ZipFile, info: zipfile.ZipInfo) -> int:
    """Where an uncompressed zip member's bytes start in the file."""
    if info.compress_type != zipfile.ZIP_STORED:
        raise _bad(path, f"{info.filename} is compressed (torch writes storages uncompressed)")
    with open(path, "rb") as f:
        f.seek(info.header_offset)
        local = f.read(30)
    if len(local) != 30 or local[:4] != b"PK\x03\x04":
        raise _bad(path, "a zip member has no local header")
    name_len, extra_len = struct.unpack("<HH", local[26:30])
    return int(info.header_offset + 30 + name_len + extra_len)


def torch_tensors(path: Path) -> list[Tensor]:
    """The tensors of a ``pytorch_model.bin`` (torch's zip format), read without torch."""
    try:
        with zipfile.ZipFile(path) as z:
            names = z.namelist()
            pkl = [n for n in names if n.endswith("/data.pkl") and n.count("/") == 1]
            if len(pkl) != 1:
                raise _bad(path, "not a torch zip file with one data.pkl (re-save it with torch >= 1.6)")
            prefix = pkl[0][: -len("data.pkl")]
            order = z.read(prefix + "byteorder").decode().strip() if prefix + "byteorder" in names else "little"
            if order != "little":
                raise _bad(path, "big-endian tensors")
            obj = _Unpickler(z.open(pkl[0])).load()
            if not isinstance(obj, dict) or not all(isinstance(k, str) and isinstance(v, _TensorRef)
                                                    for k, v in obj.items()):
                raise _bad(path, "not a flat dictionary of tensors (a state dict)")
            out: list[Tensor] = []
            for name, ref in obj.items():
                st = ref.storage
                try:
                    info = z.getinfo(f"{prefix}data/{st.key}")
                except KeyError:
                    raise _bad(path, f"tensor {name!r}: its storage {st.key} is missing") from None
                item = DTYPES[st.dtype][0]
                if info.file_size != st.numel * item:
                    raise _bad(path, f"tensor {name!r}: its storage has the wrong size")
                if ref.shape and math.prod(ref.shape) and (
                        ref.offset + sum((d - 1) * s for d, s in zip(ref.shape, ref.strides, strict=True)) >= st.numel):
                    raise _bad(path, f"tensor {name!r} reaches past its storage")
                base = _stored_offset(path, z, info) + ref.offset * item
                out.append(Tensor(name, st.dtype, ref.shape, path, base, ref.strides))
            return out
    except (zipfile.BadZipFile, pickle.UnpicklingError, EOFError, ValueError, TypeError, AttributeError,
            IndexError, KeyError, RecursionError, OverflowError, UnicodeDecodeError, MemoryError) as e:
        raise _bad(path, f"not a torch tensor file ({type(e).__name__})") from None


def tied(config: dict[str, Any]) -> bool:
    """Does the loader tie the output embedding to the input one (transformers' default: yes)?"""
    text = config.get("text_config")
    value = config.get("tie_word_embeddings", text.get("tie_word_embeddings", True) if isinstance(text, dict) else True)
    return bool(value)


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
                raise _bad(path, f"tensor {t.name!r} is in two weight files")
            tensors[t.name] = t
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
