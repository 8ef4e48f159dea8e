"""How every command talks: human output or ``--json``, errors, the plan/confirm step.

- ``--json``: exactly one JSON document on stdout, errors included
  (``{"error": {"code", "message", "fix", "exit_code"}}``).
- Human output: tables (rich) only when stdout is a terminal; otherwise plain tab-separated
  lines that ``grep`` and ``cut`` can read. Errors go to stderr as ``E_CODE: message`` and a
  ``fix:`` line.
- The exit status comes from the error's family (``monte.errors.Exit``).
"""

from __future__ import annotations

import functools
import inspect
import json
import os
import re
import sys
from collections.abc import Callable, Sequence
from typing import Any, NoReturn

import click

from monte.errors import Exit, MonteError, error
from monte.jsonl import RawJson


class Rendered:
    """A command's output already made (a status kept between calls): written as it is, by
    :func:`print_json` and by the command's human renderer alike."""

    __slots__ = ("data",)

    def __init__(self, data: bytes | str) -> None:
        self.data = data

    def write(self) -> None:
        binary = getattr(sys.stdout, "buffer", None)
        if isinstance(self.data, str):
            click.echo(self.data, nl=False)
        elif binary is None:  # a text-only stream (a caller's StringIO)
            click.echo(self.data.decode(), nl=False)
        else:
            sys.stdout.flush()
            binary.write(self.data)
            binary.flush()


def compact_json(obj: Any) -> bytes:
    """What :func:`print_json` writes off a terminal, as bytes (its trailing newline included)."""
    fast = _orjson(obj)
    if fast is not None:
        return fast + b"\n"
    text = json.dumps(obj, sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=_default)
    return (_utf8(text) + "\n").encode("utf-8", "surrogateescape")


def print_json(obj: Any) -> None:
    """Indented on a terminal; compact (the C encoder, several times faster on a large status)
    when a program reads it."""
    if isinstance(obj, Rendered):
        obj.write()
        return
    if sys.stdout.isatty():
        text = json.dumps(obj, indent=2, sort_keys=True, ensure_ascii=False, default=_default)
    else:
        fast = _orjson(obj)
        if fast is not None:
            binary = getattr(sys.stdout, "buffer", None)
            if binary is None:  # a text-only stream (a caller's StringIO)
                click.echo(fast.decode())
            else:  # UTF-8 bytes as they are: no decode and encode of an 8 MB document
                sys.stdout.flush()
                binary.write(fast + b"\n")
                binary.flush()  # a closed pipe raises here, inside the command (exit 0)
            return
        text = json.dumps(obj, sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=_default)
    click.echo(_utf8(text))


def _orjson(obj: Any) -> bytes | None:
    """The compact document through orjson when it is installed (7x faster than the standard
    library on a 5 MB status): the same values, floats written in their shortest form, and a
    float that is not a number written ``null`` (valid JSON; json would write ``NaN``). None
    when orjson is absent or refuses the document (a lone surrogate, an integer beyond 64 bits)."""
    try:
        import orjson
    except ImportError:
        return None
    try:
        # dataclasses (the api's results) through to_dict, so their keys are sorted as a dict's
        out: bytes = orjson.dumps(obj, option=orjson.OPT_SORT_KEYS | orjson.OPT_PASSTHROUGH_DATACLASS,
                                  default=_orjson_default)
    except (TypeError, ValueError):
        return None
    return out


def _orjson_default(obj: Any) -> Any:
    if isinstance(obj, RawJson):  # already serialized (compact, sorted keys): written as it is
        import orjson

        return orjson.Fragment(obj.raw)
    return _default(obj)


def _utf8(text: str) -> str:
    """JSON text is UTF-8. A lone surrogate (an argv byte that was not UTF-8, echoed back in a
    message) would reach stdout as that raw byte: write it as its ``\\uXXXX`` escape instead,
    which decodes to the same string."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return re.sub("[\ud800-\udfff]", lambda m: f"\\u{ord(m.group()):04x}", text)
    return text


def _default(obj: Any) -> Any:
    """What json cannot encode by itself: pydantic models (and paths, tuples of them...)."""
    if isinstance(obj, RawJson):
        return obj.value()
    if hasattr(obj, "model_dump"):
        return obj.model_dump(mode="json")
    if hasattr(obj, "to_dict"):  # the api's results (monte.api.shapes.Result)
        return obj.to_dict()
    return str(obj)


def report_error(e: MonteError, as_json: bool) -> None:
    if as_json:
        print_json({"error": e.to_dict()})
    else:
        click.echo(f"{e.code}: {e.message}", err=True)
        if e.fix:
            click.echo(f"  fix: {e.fix}", err=True)


def is_tty() -> bool:
    return sys.stdout.isatty()


def table(rows: Sequence[Any], columns: Sequence[str], title: str | None = None) -> None:
    """A table on a terminal; tab-separated lines (with a header) otherwise. A row is a dict, a
    result (:class:`monte.api.shapes.Result`) or a pydantic model (its JSON fields)."""
    rows = [r.model_dump(mode="json") if hasattr(r, "model_dump") else r.to_dict() if hasattr(r, "to_dict") else r
            for r in rows]
    if not rows:
        if title:
            click.echo(f"{title}: none")
        return
    if is_tty():
        from rich.console import Console
        from rich.table import Table

        t = Table(title=title, show_edge=False, header_style="bold")
        for c in columns:
            t.add_column(c)
        for r in rows:
            t.add_row(*[cell(r.get(c)) for c in columns])
        Console().print(t)
    else:  # one write: a status of 10,000 rows is 10,000 lines
        lines = ["\t".join(columns)]
        lines += ["\t".join([cell(r.get(c)) for c in columns]) for r in rows]
        click.echo("\n".join(lines))


def cell(v: Any) -> str:
    """A table cell's text: ``-`` for None, a score to 4 places, lists and dicts joined."""
    if type(v) is str:
        return v
    if v is None:
        return "-"
    if isinstance(v, list | tuple):
        return ",".join(str(x) for x in v)
    if isinstance(v, dict):
        return ",".join(f"{k}:{'+'.join(x) if isinstance(x, list) else x}" for k, x in v.items())
    if isinstance(v, float):
        return f"{v:.4f}"
    return str(v)


def json_option(f: Callable[..., Any]) -> Callable[..., Any]:
    return click.option("--json", "as_json", is_flag=True, help="Print one JSON document on stdout.")(f)


def handled(human: Callable[[Any], None] | None = None) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Wrap a command body: adds ``--json``, renders its return value, maps errors to exits."""

    def deco(f: Callable[..., Any]) -> Callable[..., Any]:
        wants_json = "as_json" in inspect.signature(f).parameters

        @json_option
        @functools.wraps(f)
        def wrapper(*args: Any, as_json: bool = False, **kwargs: Any) -> None:
            if wants_json:  # the body needs to know (e.g. to keep a plan off stdout)
                kwargs["as_json"] = as_json
            try:
                result = f(*args, **kwargs)
            except MonteError as e:
                report_error(e, as_json)
                sys.exit(int(e.exit_code))
            except KeyboardInterrupt:
                stopped = error("E_INTERRUPTED", "interrupted", "run the command again")
                report_error(stopped, as_json)
                sys.exit(int(stopped.exit_code))
            except click.exceptions.ClickException:
                raise
            except BrokenPipeError:
                closed_pipe()
            except Exception as e:  # a bug: say so plainly, keep the traceback for MONTE_DEBUG
                # the api already refuses these; this catches what the command's own code met
                from monte.api.refusals import refusal_for

                refusal = refusal_for(e)
                if refusal is not None:
                    report_error(refusal, as_json)
                    sys.exit(int(refusal.exit_code))
                if os.environ.get("MONTE_DEBUG"):
                    raise
                err = error("E_INTERNAL", f"monte hit an unexpected error: {type(e).__name__}: {e}",
                            "re-run with MONTE_DEBUG=1 for the traceback, and report it")
                report_error(err, as_json)
                sys.exit(int(Exit.INTERNAL))
            try:
                if as_json:
                    print_json(result)
                elif human is not None:
                    human(result)
                elif result is not None:
                    print_json(result)
                sys.stdout.flush()
            except BrokenPipeError:
                closed_pipe()

        return wrapper

    return deco


def confirm_plan(plan: Sequence[str], *, yes: bool, dry_run: bool, as_json: bool = False) -> bool:
    """Show the plan; return True to go ahead, False for a dry run.

    ``--yes`` skips the question. With no terminal and no ``--yes`` it refuses rather than hang.
    """
    if not as_json or dry_run:
        out = sys.stderr if as_json else sys.stdout
        for line in plan:
            click.echo(line, file=out)
    if dry_run:
        return False
    if yes:
        return True
    if not sys.stdin.isatty():
        raise error("E_CONFIRM_REQUIRED", "this command needs confirmation and there is no terminal to ask on",
                    "pass --yes to go ahead, or --dry-run to see the plan only")
    if not click.confirm("Go ahead?", default=False, err=True):
        raise error("E_CANCELLED", "cancelled; nothing was changed", "run it again and answer y, or pass --yes")
    return True


def yes_dry_run_options(f: Callable[..., Any]) -> Callable[..., Any]:
    f = click.option("--dry-run", is_flag=True, help="Print the plan and change nothing.")(f)
    return click.option("--yes", "-y", is_flag=True, help="Skip the confirmation question.")(f)


def progress(label: str, unit: str) -> Callable[[int, int], None]:
    """A progress bar on stderr with rate and ETA (``rich.progress``; used only on a terminal,
    colourless under ``NO_COLOR``). ``update(done, total)``; the bar closes itself at the end."""
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeRemainingColumn,
    )

    bar = Progress(TextColumn(label), BarColumn(), MofNCompleteColumn(), TextColumn(unit),
                   TextColumn("{task.fields[rate]}"), TimeRemainingColumn(),
                   console=Console(stderr=True, no_color=bool(os.environ.get("NO_COLOR"))), transient=False)
    task: list[Any] = []
    start: list[float] = []

    def update(done: int, total: int) -> None:
        import time

        if not task:
            bar.start()
            start.append(time.monotonic())
            task.append(bar.add_task(label, total=total, rate=""))
        rate = done / max(time.monotonic() - start[0], 1e-9)
        bar.update(task[0], completed=done, total=total, rate=f"{rate:.1f} {unit}/s")
        if done >= total:
            bar.stop()

    return update


def closed_pipe() -> NoReturn:
    """The reader went away (``monte status | head -1``): a normal end, exit 0, with no traceback
    from the interpreter's last flush. (Not 141: under ``set -o pipefail``, GitHub Actions' default
    shell, a status of 141 would fail the step although the reader had all it asked for; click's
    own EPIPE handling would exit 1.)"""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    sys.exit(0)


def experiment_option(f: Callable[..., Any]) -> Callable[..., Any]:
    """``-e/--experiment EXP`` beside a positional ``EXPERIMENT``: one spelling works everywhere."""
    from monte.cli import complete

    return click.option("--experiment", "-e", "experiment_opt", metavar="EXP", shell_complete=complete.experiments,
                        help="The experiment (same as the EXPERIMENT argument).")(f)


def experiment_named(positional: str | None, option: str | None) -> str | None:
    """The experiment the command line names, as the EXPERIMENT argument or ``--experiment`` (both:
    the same one, else E_USAGE), or None; which experiment None means is the ledger's to say
    (:func:`monte.ledger.experiment.one_experiment`)."""
    if positional and option and positional != option:
        raise error("E_USAGE", f"two experiments named: {positional} and --experiment {option}", "name one")
    return positional or option
