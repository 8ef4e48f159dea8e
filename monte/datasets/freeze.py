"""Proving and screening a JSONL pile before it is frozen."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

from monte.errors import error


def screen_jsonl(
    path: Path, *, kind: str | None, input_key: str, output_key: str
) -> tuple[int, dict[str, str] | None]:
    """Prove every line of ``path`` is a JSON object; with ``kind="sft"`` also that every row
    carries what the SFT trainer needs. Returns the row count and the declared columns.

    A row is SFT-ready as a flat pair (``input_key`` and ``output_key``, both non-empty strings)
    or as a conversation (``messages``: a list of ``{"role", "content"}`` objects). A pile must
    use one shape throughout.
    """
    fix = f"fix the line in {path} and add it again"
    shape: str | None = None
    rows = 0
    try:
        f = open(path, encoding="utf-8")
    except OSError as e:
        raise error("E_NOT_FOUND", f"cannot read {path}: {e.strerror}", "check the path") from None
    with f:
        lineno = 0
        try:
            for lineno, line in enumerate(f, start=1):  # noqa: B007
                if not line.strip():
                    raise error("E_BAD_INPUT", f"{path}, line {lineno}: the line is blank, not a JSON object", fix)
                try:
                    row = json.loads(line)
                except json.JSONDecodeError as e:
                    raise error("E_BAD_INPUT", f"{path}, line {lineno}: not valid JSON ({e.msg}, column {e.colno})", fix) from None
                except RecursionError:
                    raise error("E_BAD_INPUT", f"{path}, line {lineno}: nests too deeply to be a row", fix) from None
                except ValueError:  # Python's int-string limit: "Exceeds the limit (4300 digits)"
                    raise error("E_BAD_INPUT", f"{path}, line {lineno}: holds an integer too long to read (more "
                                f"than {sys.get_int_max_str_digits()} digits)", fix) from None
                if not isinstance(row, dict):
                    raise error("E_BAD_INPUT", f"{path}, line {lineno}: a JSON {type(row).__name__}, not an object", fix)
                if _LONE_SURROGATE.search(line) and _has_lone_surrogate(row):
                    # an escaped "\ud800" parses, but no tokenizer or UTF-8 writer takes it: training
                    # would crash on it much later (UnicodeEncodeError)
                    raise error("E_BAD_INPUT", f"{path}, line {lineno}: holds a lone surrogate (an escaped "
                                "\\ud800-\\udfff without its pair), which is not text", fix)
                rows += 1
                if kind == "sft":
                    this = _sft_shape(row, input_key, output_key)
                    if this is None:
                        raise error(
                            "E_BAD_INPUT",
                            f"{path}, line {lineno}: not an SFT row: it needs non-empty string fields "
                            f"{input_key!r} and {output_key!r}, or a 'messages' list of {{role, content}}",
                            "name the columns with --input-key/--output-key, or fix the row",
                        )
                    if shape and this != shape:
                        raise error("E_BAD_INPUT", f"{path}, line {lineno}: mixes {this} rows with {shape} rows", fix)
                    shape = this
        except UnicodeDecodeError:
            raise error("E_BAD_INPUT", f"{path}, line {lineno + 1}: not UTF-8 text", fix) from None
    if rows == 0:
        raise error("E_BAD_INPUT", f"{path} holds no rows", "a dataset needs at least one JSON object line")
    if kind != "sft":
        return rows, None
    if shape == "messages":
        return rows, {"messages": "messages"}
    return rows, {"input": input_key, "output": output_key}


#: an escaped surrogate in the raw line: only then is the parsed row worth walking
_LONE_SURROGATE = re.compile(r"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")


def _has_lone_surrogate(obj: Any) -> bool:
    """Does any string of ``obj`` (keys included) hold a surrogate code point? A valid escaped pair
    parses into one character, so what is left is lone."""
    try:
        json.dumps(obj, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def _sft_shape(row: dict, input_key: str, output_key: str) -> str | None:  # type: ignore[type-arg]
    msgs = row.get("messages")
    if isinstance(msgs, list) and msgs and all(
        isinstance(m, dict) and isinstance(m.get("role"), str) and isinstance(m.get("content"), str)
        for m in msgs
    ):
        return "messages"
    a, b = row.get(input_key), row.get(output_key)
    if isinstance(a, str) and isinstance(b, str) and a and b:
        return "pair"
    return None
