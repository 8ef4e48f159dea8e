"""A NeMo Gym row: ``{"responses_create_params": {"input": [messages]}, ...verifier fields}``.

Frozen verbatim, in NeMo Gym's own shape: monte adds no key to it. A row's task id is its place in
its file (``<exam>/<split>/<index>``, ``curriculum/<index>``), as the catalog's items are numbered;
its prompt is the chat its ``input`` holds, rendered by the model's chat template.
"""

from __future__ import annotations

from typing import Any

from monte.errors import error

RCP = "responses_create_params"


def is_gym_row(row: dict[str, Any]) -> bool:
    return RCP in row


def messages(row: dict[str, Any]) -> list[dict[str, str]]:
    """The chat the row asks (``input`` as a list of ``{role, content}``, or one user string)."""
    inp = (row.get(RCP) or {}).get("input")
    if isinstance(inp, str):
        return [{"role": "user", "content": inp}]
    out = []
    for m in inp or []:
        content = m.get("content")
        if isinstance(content, list):  # content parts: keep the text ones
            content = "".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
        out.append({"role": str(m.get("role", "user")), "content": str(content or "")})
    return out


def prompt_text(row: dict[str, Any]) -> str:
    """What the row asks, as one string (for disjointness and the leak check)."""
    if not is_gym_row(row):
        return str(row["prompt"])
    return "\n".join(f"{m['role']}: {m['content']}" for m in messages(row))


def check_row(row: object, where: str) -> dict[str, Any]:
    """A row NeMo Gym can serve: a JSON object whose ``responses_create_params.input`` asks
    something. Anything else refuses, naming the row."""
    if not isinstance(row, dict) or not isinstance(row.get(RCP), dict):
        raise error("E_BAD_INPUT", f"{where} has no {RCP} object: it is not a NeMo Gym row",
                    f"every row needs {RCP}.input (the chat to answer) beside the verifier's fields")
    inp = row[RCP].get("input")
    ok = isinstance(inp, str) and inp.strip() or (
        isinstance(inp, list) and inp and all(isinstance(m, dict) and "content" in m for m in inp))
    if not ok:
        raise error("E_BAD_INPUT", f"{where}: {RCP}.input holds no messages",
                    f"{RCP}.input must be a non-empty list of {{role, content}} messages (or a string)")
    return row
