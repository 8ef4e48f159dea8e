"""Proving and screening a JSONL pile before it is frozen."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

from monte.errors import error


def screen_jsonl(
    path: Path, *, kind: str | None, input_key: str, output_key: str,
    prompt_key: str = "prompt", chosen_key: str = "chosen", rejected_key: str = "rejected",
) -> tuple[int, dict[str, str] | None]:
    """Prove every line of ``path`` is a JSON object; with a ``kind`` also that every row carries
    what that kind's trainer needs. Returns the row count and the declared columns.

    ``kind="sft"``: a flat pair (``input_key`` and ``output_key``, both non-empty strings) or a
    conversation (``messages``: a list of ``{"role", "content"}`` objects).

    ``kind="preference"`` (what DPO trains on, in TRL's shapes): ``chosen_key`` and
    ``rejected_key`` both text, or both conversations (lists of messages), with the prompt
    explicit (``prompt_key``: text, or a conversation, of the same form) or implicit (absent: the
    shared start of chosen and rejected). A pair whose chosen equals its rejected teaches nothing
    and is refused.

    A pile must use one shape throughout.
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
                elif kind == "preference":
                    this, why = _preference_shape(row, prompt_key, chosen_key, rejected_key)
                    if this is None:
                        raise error("E_BAD_INPUT", f"{path}, line {lineno}: not a preference row: {why}",
                                    "name the columns with --prompt-key/--chosen-key/--rejected-key, or fix the row")
                    if shape and this != shape:
                        raise error("E_BAD_INPUT", f"{path}, line {lineno}: mixes {this} rows with {shape} rows", fix)
                    shape = this
        except UnicodeDecodeError:
            raise error("E_BAD_INPUT", f"{path}, line {lineno + 1}: not UTF-8 text", fix) from None
    if rows == 0:
        raise error("E_BAD_INPUT", f"{path} holds no rows", "a dataset needs at least one JSON object line")
    if kind == "preference":
        explicit = shape is not None and shape.startswith("explicit")
        return rows, {**({"prompt": prompt_key} if explicit else {}), "chosen": chosen_key, "rejected": rejected_key}
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


def _messages(value: Any) -> bool:
    return isinstance(value, list) and bool(value) and all(
        isinstance(m, dict) and isinstance(m.get("role"), str) and isinstance(m.get("content"), str) for m in value)


def _form(value: Any) -> str | None:
    """``text`` (a non-empty string), ``conversational`` (a list of messages), or None."""
    if isinstance(value, str) and value:
        return "text"
    return "conversational" if _messages(value) else None


def _preference_shape(row: dict, prompt_key: str, chosen_key: str,  # type: ignore[type-arg]
                      rejected_key: str) -> tuple[str | None, str]:
    """The row's shape (``explicit text``, ``implicit conversational``, ...), or None and why not."""
    missing = [k for k in (chosen_key, rejected_key) if k not in row]
    if missing:
        return None, (f"it has no {' and no '.join(repr(k) for k in missing)} (a preference row holds "
                      f"{chosen_key!r} and {rejected_key!r}, and optionally {prompt_key!r})")
    chosen, rejected = _form(row[chosen_key]), _form(row[rejected_key])
    for key, form in ((chosen_key, chosen), (rejected_key, rejected)):
        if form is None:
            return None, f"{key!r} is neither non-empty text nor a list of {{role, content}} messages"
    if chosen != rejected:
        return None, f"{chosen_key!r} is {chosen} and {rejected_key!r} is {rejected}; a pair has one form"
    if row[chosen_key] == row[rejected_key]:
        return None, f"{chosen_key!r} equals {rejected_key!r}: the pair prefers nothing"
    if prompt_key not in row:
        return f"implicit {chosen}", ""
    prompt = _form(row[prompt_key])
    if prompt != chosen:
        return None, (f"{prompt_key!r} is {prompt or 'neither text nor a list of messages'} and the pair is "
                      f"{chosen}; the prompt has the pair's form")
    return f"explicit {chosen}", ""


def _sft_shape(row: dict, input_key: str, output_key: str) -> str | None:  # type: ignore[type-arg]
    if _messages(row.get("messages")):
        return "messages"
    a, b = row.get(input_key), row.get(output_key)
    if isinstance(a, str) and isinstance(b, str) and a and b:
        return "pair"
    return None
