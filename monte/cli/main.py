"""``monte``: the entry point. Subcommands load lazily, so ``monte --help`` stays fast: the
top-level help is printed as click would print it without importing click at all
(:mod:`monte.cli.helptext`); the click group itself is :mod:`monte.cli.app` (``cli`` here too)."""

from __future__ import annotations

import os
import sys
from typing import Any

from monte.cli import helptext
from monte.cli.commands import COMMANDS, EXAMPLES, EXIT_CODES, SHORT_HELP, SUB_EXAMPLES  # noqa: F401  (where callers look)


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    if args in (["--help"], ["-h"]) and _help_width() == helptext.WIDTH:
        try:
            sys.stdout.write(helptext.TEXT)  # click's own text, kept (tests/cli/test_help.py compares them)
            sys.stdout.flush()
        except BrokenPipeError:  # the reader went away (`monte --help | head -0`): a normal end, exit 0
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return
    from monte.models import threads

    threads.wait_policy()  # before anything loads torch: OpenMP reads it once
    try:
        from monte.cli import reads

        if not reads.run(args):  # status, show RUN, logs RUN: without click where it can
            _main(args)
    except SystemExit as e:  # the interpreter's last flush must not meet a closed pipe either
        if e.code == 1 and type(sys.stdout).__name__.lstrip("_") == "PacifyFlushWrapper":  # click's own EPIPE exit
            from monte.cli.output import closed_pipe

            closed_pipe()
        _flush_stdout(e.code)
        raise
    _flush_stdout(0)


def _help_width() -> int:
    """The width click's help formatter takes here: the terminal's columns (``$COLUMNS`` first,
    else stdout's terminal, else 80, as ``shutil.get_terminal_size``), at most 80, less 2, at
    least 50."""
    try:
        columns = int(os.environ["COLUMNS"])
    except (KeyError, ValueError):
        columns = 0
    if columns <= 0:
        try:
            columns = os.get_terminal_size(sys.__stdout__.fileno()).columns or 80  # type: ignore[union-attr]
        except (AttributeError, ValueError, OSError):
            columns = 80
    return max(min(columns, 80) - 2, 50)


def _flush_stdout(code: object) -> None:
    try:
        sys.stdout.flush()
    except BrokenPipeError:
        if code in (0, None):
            from monte.cli.output import closed_pipe

            closed_pipe()
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())


def _main(args: list[str]) -> None:
    from monte.cli.app import run

    run(args)


def __getattr__(name: str) -> Any:
    """``cli`` and ``LazyGroup`` (the click group) from :mod:`monte.cli.app`, imported when asked."""
    if name in ("cli", "LazyGroup"):
        from monte.cli import app

        return getattr(app, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


if __name__ == "__main__":
    main()
