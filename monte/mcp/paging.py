"""Results sized for a context window: every tool result under :data:`LIMIT` bytes, rows paged
with an opaque ``cursor`` (:func:`page`), long strings cut with a note (:func:`fit`).

A tool result carries its JSON twice on the wire (``structuredContent``, and the same text in a
``TextContent`` block for clients that read only text, as the MCP spec asks), so one copy gets
:data:`BUDGET`, a little under half of :data:`LIMIT`."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from monte.errors import error

#: the most bytes one tool result takes on the wire (every result under 8 KB, so a client with a small window reads it whole)
LIMIT = 8192
#: the bytes one copy of a result's JSON may take (the wire carries two, plus the envelope)
BUDGET = 3900
#: a string longer than this is cut in a row (a model's output can be long; the row stays readable)
LONG = 400
DEFAULT_LIMIT = 50


def dumps(doc: Any) -> str:
    """The one way a result is serialized: compact, keys sorted, UTF-8 kept."""
    return json.dumps(doc, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def size(doc: Any) -> int:
    return len(dumps(doc).encode())


def cut(v: Any, longest: int = LONG) -> Any:
    """``v`` with every string over ``longest`` characters cut, its length said."""
    if isinstance(v, str) and len(v) > longest:
        return v[:longest] + f"... [{len(v)} chars]"
    if isinstance(v, dict):
        return {k: cut(x, longest) for k, x in v.items()}
    if isinstance(v, list):
        return [cut(x, longest) for x in v]
    return v


def _offset(cursor: str | None) -> int:
    if not cursor:
        return 0
    try:
        kind, _, n = cursor.partition(":")
        if kind != "o" or int(n) < 0:
            raise ValueError
        return int(n)
    except ValueError:
        raise error("E_USAGE", f"cursor {cursor!r} is not one this server gave",
                    "pass the next_cursor of the previous result, or none for the first page") from None


def page(head: dict[str, Any], key: str, rows: Sequence[Any], *, cursor: str | None = None,
         limit: int | None = None) -> dict[str, Any]:
    """``head`` with ``rows[cursor:]`` under ``key``: at most ``limit`` rows, and fewer while the
    result would pass :data:`BUDGET`; ``total`` rows, ``next_cursor`` (None on the last page)."""
    start = _offset(cursor)
    want = min(max(1, limit or DEFAULT_LIMIT), 500)
    chunk = [cut(r) for r in rows[start:start + want]]
    while True:
        end = start + len(chunk)
        doc = {**head, key: chunk, "total": len(rows),
               "next_cursor": f"o:{end}" if end < len(rows) else None}
        if size(doc) <= BUDGET or len(chunk) <= 1:
            break
        chunk = chunk[:max(1, len(chunk) * 2 // 3)]
    if size(doc) > BUDGET:  # one row alone too long: its strings cut harder
        doc[key] = [cut(r, 80) for r in chunk]
    return doc


def fit(doc: Any) -> Any:
    """A result that is not paged, within :data:`BUDGET`: long strings cut, then shorter."""
    for longest in (None, LONG, 120, 40):
        out = doc if longest is None else cut(doc, longest)
        if size(out) <= BUDGET:
            return out
    return {"truncated": True, "bytes": size(doc),
            "note": "this result is too long for one reply; page it (cursor) or read the record with the CLI"}
