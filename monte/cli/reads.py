"""The read-only commands a program runs most, without click: ``monte status`` and ``monte
status --json`` to a pipe, ``monte show RUN`` and ``monte logs RUN`` (click, and the group's
command modules, are ~35 ms of a process that prints a kept view in ~100 ms). Only these exact
command lines; they print what the click commands print (:mod:`monte.cli.runs`), byte for byte.
On a refusal, or anything else before the output, nothing is printed here and the command
runs through click (:mod:`monte.cli.app`), which reports it as it always did."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any, NoReturn

from monte.cli.commands import STATUS_CODE


def run(args: list[str]) -> bool:
    """``args`` run and printed here (True), or left to click (False: nothing printed)."""
    if args in HOOK_ARGS:
        return _hook_updates(args)
    if len(args) == 2 and args[0] in ("show", "logs") and not args[1].startswith("-"):
        out: Callable[[], bytes | str | None] = (lambda: _show(args[1])) if args[0] == "show" else lambda: _logs(args[1])
        as_json = False
    elif args in (["status"], ["status", "--json"]) and not sys.stdout.isatty():
        as_json = len(args) == 2
        out = lambda: _status("json" if as_json else "text")  # noqa: E731
    else:
        return False
    try:
        data = out()
    except KeyboardInterrupt:
        _interrupted(as_json)
    except Exception:  # noqa: BLE001 - click's command reports it (and exits) as it always did
        return False
    if data is None:
        return False
    try:
        if isinstance(data, str):
            sys.stdout.write(data)
            sys.stdout.flush()
        else:
            sys.stdout.flush()
            sys.stdout.buffer.write(data)
            sys.stdout.buffer.flush()
    except BrokenPipeError:
        from monte.cli.output import closed_pipe

        closed_pipe()
    return True


def _interrupted(as_json: bool) -> NoReturn:
    from monte.cli.output import report_error
    from monte.errors import error

    stopped = error("E_INTERRUPTED", "interrupted", "run the command again")
    report_error(stopped, as_json)
    sys.exit(int(stopped.exit_code))


# what monte's git hooks run (monte/githooks/): every push and every ref update of a repository
# with the hooks pays for this process's start, so it starts without click
HOOK_ARGS = (["ledger", "verify", "--updates"], ["ledger", "verify", "--updates", "--local"])


def _hook_updates(args: list[str]) -> bool:
    """``monte ledger verify --updates [--local]``, as a hook runs it: the ``old new ref`` lines on
    stdin judged together; nothing printed when they pass. A refusal is reported as click's
    command reports one (:func:`monte.cli.output.handled`); anything else goes to that command,
    with the same stdin, which reports it as it always did."""
    import io

    from monte.api.verify import ledger_verify_updates
    from monte.errors import MonteError

    data = sys.stdin.read()
    try:
        ledger_verify_updates([line for line in data.splitlines() if line.strip()], full="--local" in args)
    except KeyboardInterrupt:
        _interrupted(False)
    except MonteError as e:  # E_VERIFY, E_USAGE: judged once, said in click's words
        from monte.cli.output import report_error

        report_error(e, False)
        sys.exit(int(e.exit_code))
    except Exception:  # noqa: BLE001 - click's command reports it (and exits) as it always did
        sys.stdin = io.StringIO(data)
        return False
    return True


def _plain_text(text: str) -> str | None:
    """``text`` as click.echo writes it to this stdout (a pipe: ANSI escapes stripped), or None
    where that is not plainly ``text`` (an escape in it; an ASCII-only stdout click re-wraps)."""
    import codecs

    if "\x1b" in text or codecs.lookup(getattr(sys.stdout, "encoding", None) or "ascii").name == "ascii":
        return None
    return text


def _status(mode: str) -> bytes | str | None:
    from monte.status.view import status_view
    from monte.workspace import open_workspace

    def render(doc: dict[str, Any]) -> bytes | str:  # a view made again: click's renderer
        from monte.cli.runs import STATUS_RENDERERS

        return STATUS_RENDERERS[mode][0](doc)

    ws = open_workspace(require_data_root=False)
    data = status_view(ws, None, mode, render, STATUS_CODE[mode])
    if mode == "text" and sys.stderr.isatty():  # for a person: one line on stderr, where the seal is held
        from monte.ledger.grader_statement import seal_line

        sys.stderr.write(seal_line(ws.config) + "\n")
    if isinstance(data, str):
        return _plain_text(data)
    if getattr(sys.stdout, "buffer", None) is None:
        return None
    return data


def _show(ref: str) -> str | None:
    import json

    from monte.reads import show

    return _plain_text(json.dumps(show(ref=ref), indent=2, sort_keys=True) + "\n")


def _logs(ref: str) -> str | None:
    from monte.reads import logs

    with open(logs(ref=ref), encoding="utf-8") as f:
        return f.read()  # (a file that is not UTF-8: click's command prints up to where it fails)
