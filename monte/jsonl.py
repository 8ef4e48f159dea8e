"""JSON lines: the one way monte writes them and the one way it reads them.

A line is what ends in ``\\n``, and nothing else. ``str.splitlines()`` also breaks at U+0085,
U+2028, U+2029 and a few C0 controls, all of which a model may decode and JSON may hold raw in a
string, so a line cut there is no longer a JSON document. So:

- **writing** escapes those characters (``\\u2028``...; JSON's encoder escapes the C0 ones
  already) and every lone surrogate, which UTF-8 cannot encode but a model's decoded text can
  hold: every line is valid UTF-8 and a line to any reader, and the text reads back exactly;
- **reading** splits on ``\\n`` only, so a file an older monte wrote with those characters raw
  still reads.

Stdlib only.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

#: raw in a JSON string they are valid, but line splitters break at the first three, and UTF-8
#: cannot encode the rest (lone surrogates)
_UNSAFE = re.compile("[\u0085\u2028\u2029\ud800-\udfff]")


class RawJson:
    """A value already serialized as JSON, inside a document: the compact writer (orjson)
    writes the bytes as they are; any other writer parses them back (:meth:`value`). ``monte
    status --json`` keeps each row's serialized form between calls (monte.ledger.derived)."""

    __slots__ = ("raw",)

    def __init__(self, raw: bytes) -> None:
        self.raw = raw

    def value(self) -> Any:
        return json.loads(self.raw)


def escape_unsafe(text: str) -> str:
    """JSON text with every line-breaking character and lone surrogate as a ``\\uXXXX`` escape.
    Only valid on the output of :func:`json.dumps`: such characters only occur inside its strings,
    where an escape means the same character."""
    return _UNSAFE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


def dump_line(obj: Any) -> bytes:
    """One object as one compact line (sorted keys, UTF-8, ``\\n``-terminated)."""
    return (escape_unsafe(json.dumps(obj, sort_keys=True, ensure_ascii=False, separators=(",", ":")))
            + "\n").encode()


def dump_lines(objs: Iterable[Any]) -> bytes:
    return b"".join(dump_line(o) for o in objs)


def split_lines(text: str) -> list[str]:
    """The non-blank lines of JSON-lines text, split on ``\\n`` only (never ``splitlines``)."""
    return [line for line in text.split("\n") if line.strip()]


def load_lines(raw: bytes) -> list[Any]:
    """Every line of ``raw`` parsed. Raises ``ValueError`` (``UnicodeDecodeError`` and
    ``JSONDecodeError`` included) on bytes that are not UTF-8 JSON lines."""
    return [json.loads(line) for line in split_lines(raw.decode("utf-8"))]


def log_records(path: Path) -> Iterator[dict[str, Any]]:
    """The JSON objects of an append-only log, in order: none where the file cannot be read, and a
    line that is no JSON object (a write cut short) passed over."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return
    for line in split_lines(text):
        try:
            doc = json.loads(line)
        except ValueError:
            continue
        if isinstance(doc, dict):
            yield doc
