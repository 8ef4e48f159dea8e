"""The tensors of a weight file, read without torch: a safetensors header checked as
safetensors checks it, and a ``pytorch_model.bin`` (torch's zip of a pickle) through a restricted
unpickler that builds nothing but descriptions. A :class:`Tensor` says where its elements lie in
the file; its digest hashes them in C order."""

from __future__ import annotations

import hashlib
import json
import math
import pickle
import struct
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from monte.errors import error

MAX_HEADER = 100 << 20  # safetensors' own limit on the JSON header

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


def bad_file(path: Path, why: str) -> Exception:
    return error("E_BAD_INPUT", f"{path} is not a readable model file: {why}",
                 "pass a model folder saved with save_pretrained (or `monte model init DIR`)")


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
                        raise bad_file(self.path, f"tensor {self.name} runs past the end of the file")
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
                raise bad_file(path, "shorter than a safetensors header")
            (n,) = struct.unpack("<Q", head)
            if n > MAX_HEADER or 8 + n > size:
                raise bad_file(path, "its header length is out of range")
            raw = f.read(n)
    except OSError as e:
        raise bad_file(path, e.strerror or type(e).__name__) from None
    try:
        header = json.loads(raw.decode("utf-8"))
    except (ValueError, UnicodeDecodeError, RecursionError, OverflowError) as e:
        raise bad_file(path, f"its header is not JSON ({type(e).__name__})") from None
    if not isinstance(header, dict):
        raise bad_file(path, "its header is not a JSON object")
    data = size - 8 - n
    out: list[Tensor] = []
    for name, meta in header.items():
        if name == "__metadata__":
            continue
        if not isinstance(meta, dict):
            raise bad_file(path, f"tensor {name!r} has no description")
        dtype, shape, offsets = meta.get("dtype"), meta.get("shape"), meta.get("data_offsets")
        if not isinstance(dtype, str) or dtype not in DTYPES:
            raise bad_file(path, f"tensor {name!r} has an unknown dtype")
        if not isinstance(shape, list) or len(shape) > 64 or not all(_is_int(d) and 0 <= d < 1 << 62 for d in shape):
            raise bad_file(path, f"tensor {name!r} has no valid shape")
        if (not isinstance(offsets, list) or len(offsets) != 2 or not all(_is_int(x) for x in offsets)
                or not 0 <= offsets[0] <= offsets[1] <= data):
            raise bad_file(path, f"tensor {name!r} has data offsets outside the file")
        if math.prod(shape) * DTYPES[dtype][0] != offsets[1] - offsets[0]:
            raise bad_file(path, f"tensor {name!r}: its shape does not fill its data offsets")
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
        raise bad_file(path, f"{info.filename} is compressed (torch writes storages uncompressed)")
    with open(path, "rb") as f:
        f.seek(info.header_offset)
        local = f.read(30)
    if len(local) != 30 or local[:4] != b"PK\x03\x04":
        raise bad_file(path, "a zip member has no local header")
    name_len, extra_len = struct.unpack("<HH", local[26:30])
    return int(info.header_offset + 30 + name_len + extra_len)


def torch_tensors(path: Path) -> list[Tensor]:
    """The tensors of a ``pytorch_model.bin`` (torch's zip format), read without torch."""
    try:
        with zipfile.ZipFile(path) as z:
            names = z.namelist()
            pkl = [n for n in names if n.endswith("/data.pkl") and n.count("/") == 1]
            if len(pkl) != 1:
                raise bad_file(path, "not a torch zip file with one data.pkl (re-save it with torch >= 1.6)")
            prefix = pkl[0][: -len("data.pkl")]
            order = z.read(prefix + "byteorder").decode().strip() if prefix + "byteorder" in names else "little"
            if order != "little":
                raise bad_file(path, "big-endian tensors")
            obj = _Unpickler(z.open(pkl[0])).load()
            if not isinstance(obj, dict) or not all(isinstance(k, str) and isinstance(v, _TensorRef)
                                                    for k, v in obj.items()):
                raise bad_file(path, "not a flat dictionary of tensors (a state dict)")
            out: list[Tensor] = []
            for name, ref in obj.items():
                st = ref.storage
                try:
                    info = z.getinfo(f"{prefix}data/{st.key}")
                except KeyError:
                    raise bad_file(path, f"tensor {name!r}: its storage {st.key} is missing") from None
                item = DTYPES[st.dtype][0]
                if info.file_size != st.numel * item:
                    raise bad_file(path, f"tensor {name!r}: its storage has the wrong size")
                if ref.shape and math.prod(ref.shape) and (
                        ref.offset + sum((d - 1) * s for d, s in zip(ref.shape, ref.strides, strict=True)) >= st.numel):
                    raise bad_file(path, f"tensor {name!r} reaches past its storage")
                base = _stored_offset(path, z, info) + ref.offset * item
                out.append(Tensor(name, st.dtype, ref.shape, path, base, ref.strides))
            return out
    except (zipfile.BadZipFile, pickle.UnpicklingError, EOFError, ValueError, TypeError, AttributeError,
            IndexError, KeyError, RecursionError, OverflowError, UnicodeDecodeError, MemoryError) as e:
        raise bad_file(path, f"not a torch tensor file ({type(e).__name__})") from None
