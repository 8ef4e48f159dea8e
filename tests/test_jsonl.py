"""``monte/jsonl.py``: any text round-trips; a line is what ends in \\n, for every reader."""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

from monte.jsonl import dump_lines, load_lines

#: every str, lone surrogates included (hypothesis leaves category Cs out unless asked)
ANY_TEXT = st.text(st.characters(codec=None, exclude_categories=()))
SEPARATORS = "\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"


@given(st.lists(st.dictionaries(ANY_TEXT, ANY_TEXT, max_size=3), min_size=1, max_size=5))
def test_any_text_round_trips_and_each_object_is_one_line_for_any_splitter(objs: list[dict[str, str]]) -> None:
    raw = dump_lines(objs)
    text = raw.decode("utf-8")  # valid UTF-8, lone surrogates and all
    assert load_lines(raw) == objs
    assert len(text.splitlines()) == len(objs)  # str.splitlines breaks at no character inside
    assert not set(SEPARATORS) & set(text.replace("\n", ""))


def test_lines_written_raw_by_an_older_monte_still_read() -> None:
    objs = [{"answer": f"a{sep}b"} for sep in SEPARATORS if sep not in "\n\r"]
    raw = b"".join(json.dumps(o, ensure_ascii=False).encode() + b"\n" for o in objs)
    assert load_lines(raw) == objs
    assert load_lines(raw.replace(b"\n", b"\r\n")) == objs  # CRLF: the \r is JSON whitespace
