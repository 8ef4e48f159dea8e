"""Run references as users type them: ``RUN``, ``RUN@STEP``, ``EXP/RUN``, ``EXP/RUN@STEP``."""

from __future__ import annotations

from monte.errors import error
from monte.names import check_name


def parse_run_ref(text: str, default_experiment: str | None = None) -> tuple[str | None, str, int | None]:
    """``RUN``, ``RUN@STEP``, ``RUN/STEP``, ``EXP/RUN``, ``EXP/RUN@STEP`` -> (exp, run, step)."""
    exp: str | None = default_experiment
    body = text.strip()
    step: int | None = None
    if "@" in body:
        body, _, s = body.rpartition("@")
        step = _int(s, text)
    parts = body.split("/")
    if len(parts) == 2 and step is None and _is_step(parts[1]):
        run, step = parts[0], int(parts[1])  # RUN/STEP
    elif len(parts) == 2:
        exp, run = parts
        if not exp:
            raise error("E_USAGE", f"cannot read {text!r} as a run", "write EXP/RUN, RUN, or RUN@STEP")
        check_name(exp, "experiment name")
    elif len(parts) == 1:
        run = parts[0]
    else:
        raise error("E_USAGE", f"cannot read {text!r} as a run", "write EXP/RUN, RUN, or RUN@STEP")
    if not run:
        raise error("E_USAGE", f"cannot read {text!r} as a run", "write EXP/RUN, RUN, or RUN@STEP")
    check_name(run, "run id")
    return exp, run, step


def _is_step(s: str) -> bool:
    """ASCII digits only: ``str.isdigit`` also accepts '²' and '٣', which ``int`` refuses."""
    return s.isascii() and s.isdigit()


def _int(s: str, text: str) -> int:
    if not _is_step(s):
        raise error("E_USAGE", f"the step in {text!r} is not a number", "write RUN@STEP, e.g. ab12cd34ef56@50")
    return int(s)
