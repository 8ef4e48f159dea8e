"""The exam id a test read records, as the seal reads it (the standard library only).

``monte.envs.items.exam_sketch`` makes one: ``v`` (:data:`EXAM_ID_VERSION`), ``key`` (the sha256
of the set of item keys), ``items`` (how many distinct items) and ``keys``, every item key packed
(:func:`pack_keys`). A read recorded before version 2 kept ``sketch``, its 64 smallest keys.
"""

from __future__ import annotations

import base64
from collections.abc import Iterable, Mapping
from typing import Any

#: version 2: every item key is recorded, and an lm-eval item is its document
EXAM_ID_VERSION = 2


def pack_keys(keys: Iterable[str]) -> str:
    """Item keys (16 hex digits each) as 8 bytes each, sorted, URL-safe base64: about 11 KB per
    thousand items, small enough to record every key of a test split on its read."""
    return base64.urlsafe_b64encode(b"".join(bytes.fromhex(k) for k in sorted(keys))).decode()


def unpack_keys(packed: str) -> set[str]:
    raw = base64.urlsafe_b64decode(packed)
    return {raw[i:i + 8].hex() for i in range(0, len(raw) - len(raw) % 8, 8)}


def exam_keys(exam: Mapping[str, Any]) -> tuple[set[str], bool]:
    """The item keys an exam id holds, and whether they are all of its items (a version 2 id, or
    an older sketch of a split no larger than its sketch) or its smallest ones only."""
    if exam.get("v") == EXAM_ID_VERSION and isinstance(exam.get("keys"), str):
        try:
            return unpack_keys(exam["keys"]), True
        except (ValueError, TypeError):
            return set(), False
    sketch = {str(k) for k in exam.get("sketch") or ()}
    return sketch, bool(sketch) and len(sketch) == int(exam.get("items") or 0)
