"""What ``tasks.jsonl`` keeps of a model's answer: one quoting for every grader (the catalog's, a
JSONL exam's, lm-eval's, NeMo Gym's) and for ``monte recover``, which checks a kept result's
quotes before it grades the answers again."""

from __future__ import annotations

from typing import Any

#: how much of an answer ``tasks.jsonl`` (a git blob of the ledger) keeps. A model can output any
#: length; 200 answers of a megabyte each would make a blob git and dulwich refuse to read back
#: (their loose-object limit is 512 MiB). A longer answer is kept as its first ANSWER_KEEP
#: characters, marked with its whole length and the sha256 of its UTF-8 bytes; the whole text is
#: in the run folder's result file, which is what ``monte recover`` grades again.
ANSWER_KEEP = 4096


def answer_fields(answer: str) -> dict[str, Any]:
    """What ``tasks.jsonl`` records of one answer: the whole of it, or its head, length and hash."""
    if len(answer) <= ANSWER_KEEP:
        return {"answer": answer}
    import hashlib

    digest = hashlib.sha256(answer.encode("utf-8", "surrogatepass")).hexdigest()
    return {"answer": answer[:ANSWER_KEEP], "answer_chars": len(answer), "answer_sha256": digest}
