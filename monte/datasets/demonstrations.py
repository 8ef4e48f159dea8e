"""An environment's curriculum as SFT demonstrations: what ``monte dataset add NAME --from-env ENV
--kind sft`` freezes.

A curriculum item is a question (``prompt``) and its reference ``answer``; a demonstration is the
flat pair ``{"input": prompt, "output": answer}`` the sft trainer reads. The trainer joins the two
as plain text (TRL's prompt/completion format: the completion's tokens follow the prompt's), so the
answer is written as the model would go on after the prompt: after one space when the prompt does
not already end in whitespace (``"p 21474 ="`` + ``" even"``). Without it the model learns to glue
its answer to the prompt's last token, which is not how the prompt's words are tokenised.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from monte.errors import error

#: what joins an input to its output, recorded in the Dataset's provenance
JOIN = "output = ' ' + answer, unless the prompt ends in whitespace"


def demonstration(item: dict[str, Any]) -> dict[str, str] | None:
    """The demonstration of one curriculum item, or None when it is no question with an answer."""
    prompt, answer = item.get("prompt"), item.get("answer")
    if not isinstance(prompt, str) or not prompt or answer is None or answer == "" or isinstance(answer, dict | list):
        return None
    answer = str(answer)
    return {"input": prompt, "output": answer if prompt[-1].isspace() or answer[0].isspace() else " " + answer}


def write(curriculum: Path, out: Path, env: str) -> int:
    """Write every item of ``curriculum`` as a demonstration into ``out``; the rows written."""
    n = 0
    with open(curriculum, encoding="utf-8") as src, open(out, "w", encoding="utf-8") as dst:
        for lineno, line in enumerate(src, start=1):
            if not line.strip():
                continue
            row = demonstration(json.loads(line))
            if row is None:  # a NeMo Gym row: its reward comes from its server, not from a reference answer
                raise error("E_REFUSED", f"environment {env!r}: curriculum line {lineno} holds no 'prompt' with "
                            "an 'answer', so it cannot be written as a demonstration",
                            f"train on it with a grpo recipe (`--source {env}`), or freeze your own rows with "
                            "`monte dataset add NAME --from-file F --kind sft`")
            dst.write(json.dumps(row, ensure_ascii=False) + "\n")
            n += 1
    return n
