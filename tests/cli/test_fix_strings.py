"""Every refusal's fix names things that exist (issue 46.3).

The walker reads every ``error(code, message, fix)`` call in ``monte/`` (and the fix texts bound to
a name the call passes), keeps the literal text of each (an f-string's fields become ``…``), and
resolves what it names against the click CLI itself: each ``monte COMMAND [SUBCOMMAND]`` must be a
command, each ``--flag`` that follows it on the same clause must be one of that command's options,
and a ``--flag`` named without a command must be an option of some command. Reproduced before:
``monte dataset install NAME`` (no such command), ``git branch`` where ``monte experiment list``
is meant. A fix shared by commands with and without the flag it names ("pass --bucket B" to
``eval --push``, "set --key-file" to ``env list --vault``) is checked by running those commands.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

import click
import pytest

from monte.cli.app import cli

MONTE = Path(__file__).resolve().parents[2] / "monte"
HOLE = "…"


def _texts(node: ast.AST, names: dict[str, list[ast.AST]], depth: int = 0) -> Iterator[str]:
    """The literal texts an expression can take (both arms of a conditional, each string of a
    concatenation joined, an f-string with its fields as holes)."""
    if depth > 6:
        return
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        yield node.value
    elif isinstance(node, ast.JoinedStr):
        texts = [""]
        for v in node.values:  # a field that is a choice of literals ({'env' if … else 'dataset'}): each
            value = v.value if isinstance(v, ast.FormattedValue) else v
            parts = list(_texts(value, {}, depth + 1)) if isinstance(value, ast.Constant | ast.IfExp) else []
            texts = [t + part for t in texts for part in (parts or [HOLE])]
        yield from texts
    elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        for left in _texts(node.left, names, depth + 1):
            for right in _texts(node.right, names, depth + 1):
                yield left + right
    elif isinstance(node, ast.IfExp):
        yield from _texts(node.body, names, depth + 1)
        yield from _texts(node.orelse, names, depth + 1)
    elif isinstance(node, ast.Name):
        for bound in names.get(node.id, []):
            yield from _texts(bound, names, depth + 1)


def fix_texts() -> list[tuple[str, str]]:
    """(where, fix text) of every error() call in monte/."""
    out = []
    for path in sorted(MONTE.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for fn in ast.walk(tree):
            if not isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef | ast.Module):
                continue
            names: dict[str, list[ast.AST]] = {}
            for node in ast.walk(fn):
                if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
                    names.setdefault(node.targets[0].id, []).append(node.value)
            for node in ast.walk(fn):
                if not (isinstance(node, ast.Call) and getattr(node.func, "id", getattr(node.func, "attr", None))
                        == "error"):
                    continue
                arg = node.args[2] if len(node.args) >= 3 else next(
                    (k.value for k in node.keywords if k.arg == "fix"), None)
                if arg is None:
                    continue
                for text in _texts(arg, names):
                    out.append((f"{path.relative_to(MONTE.parent)}:{node.lineno}", text))
    return sorted(set(out))


def _commands() -> dict[str, click.Command]:
    """``"eval"``, ``"env add"``, …: every command and subcommand by its words."""
    ctx = click.Context(cli)
    out: dict[str, click.Command] = {}
    for name in cli.list_commands(ctx):
        cmd = cli.get_command(ctx, name)
        assert cmd is not None
        out[name] = cmd
        if isinstance(cmd, click.Group):
            for sub_name, sub in cmd.commands.items():
                out[f"{name} {sub_name}"] = sub
    return out


def _options(cmd: click.Command) -> set[str]:
    return {o for p in cmd.params for o in (*p.opts, *p.secondary_opts) if o.startswith("-")} | {"--help", "-h"}


COMMAND = re.compile(r"\bmonte ([a-z][a-z-]*)(?: ([a-z][a-z-]*))?")
FLAG = re.compile(r"(?<![\w-])--[a-z][a-z0-9-]*")
CLAUSE = re.compile(r";|\||, (?:or|and|then) |\bor\b|\(|\)|\. ")


def _clause_problems(clause: str, commands: dict[str, click.Command], every_option: set[str],
                     quoted: bool) -> list[str]:
    found = []
    m = COMMAND.search(clause)
    if m and not quoted and m.group(1) not in commands:
        m = None  # prose ("monte picks a free one"), not a command
    named = None
    if m:
        first, second = m.group(1), m.group(2)
        if first not in commands:
            return [f"`monte {first}` is no command"]
        named = first
        if isinstance(commands[first], click.Group) and second and second not in ("…", "..."):
            if f"{first} {second}" not in commands:
                return [f"`monte {first} {second}` is no command"]
            named = f"{first} {second}"
    for flag in FLAG.findall(clause[m.end():] if m else clause):
        if named is not None and flag not in _options(commands[named]):
            found.append(f"`monte {named}` has no {flag}")
        elif named is None and flag not in every_option:
            found.append(f"no command has {flag}")
    return found


def problems(text: str, commands: dict[str, click.Command], command: str | None = None) -> list[str]:
    """What ``text`` names that the CLI lacks. A backticked command is resolved whole (another
    tool's, `git …` or `op …`, is not monte's to check); prose is read clause by clause. A flag
    named without a command must be an option of ``command`` (the one that refused), when known."""
    every_option = (_options(commands[command]) if command else
                    set().union(*(_options(c) for c in commands.values())))
    found = []
    for i, part in enumerate(text.split("`")):
        if i % 2:  # inside backticks
            if part.startswith("monte "):
                found += _clause_problems(part, commands, every_option, quoted=True)
            continue
        for clause in CLAUSE.split(part):
            found += _clause_problems(clause, commands, every_option, quoted=False)
    return found


def test_the_walker_finds_what_it_should() -> None:
    """The walker itself: the three reproduced fixes are problems, and true ones are not."""
    commands = _commands()
    assert problems("pass --bukket B", commands) == ["no command has --bukket"]
    assert problems("run `monte dataset install NAME`", commands) == ["`monte dataset install` is no command"]
    assert problems("run `monte env list --key-file K`", commands) == ["`monte env list` has no --key-file"]
    assert problems("run `monte eval --split test --yes`", commands) == []
    assert problems("`monte env install NAME`, or `monte experiment list`", commands) == []
    assert len(fix_texts()) > 300  # it reads the fixes: most of monte's refusals


def test_every_fix_names_commands_and_flags_that_exist() -> None:
    commands = _commands()
    bad = [f"{where}: {p}\n    {text}" for where, text in fix_texts() for p in problems(text, commands)]
    assert not bad, "\n".join(bad)


@pytest.fixture
def experiment(repo: Path, monte, base_model: Path) -> str:
    assert monte("env", "add", "--server", "parity", "--dev", "parity", "--test", "parity").code == 0
    assert monte("dataset", "add", "parity-sft", "--from-env", "parity", "--kind", "sft").code == 0
    assert monte("experiment", "init", "exp", "--eval", "parity", "--model", str(base_model)).code == 0
    return "exp"


@pytest.mark.parametrize("args", [["eval", "--push"], ["train", "--recipe", "sft-tiny", "--source", "parity-sft",
                                                       "--smoke", "--push"]])
def test_a_push_with_no_bucket_names_only_what_the_command_takes(repo: Path, monte, experiment: str,
                                                                 args: list[str]) -> None:
    """Reproduced: eval/train --push with no bucket said "pass --bucket B"; neither has it."""
    r = monte(*args, "--yes", "--json")
    err = r.json()["error"]
    assert r.code == 7 and err["code"] == "E_STORAGE", r.out
    assert "monte config set bucket" in err["fix"] and not problems(err["fix"], _commands(), command=args[0]), err
    r = monte("push", "--json")  # push takes --bucket: its refusal may say so
    assert r.json()["error"]["code"] == "E_STORAGE" and "--bucket" in r.json()["error"]["fix"]


def test_a_vault_list_with_no_key_names_no_key_file_flag(repo: Path, monte) -> None:
    """Reproduced: `env list --vault` with no key said "set --key-file"; it has none."""
    assert monte("config", "set", "vault", "gs://monte-no-such-bucket/vault").code == 0
    for kind in ("env", "dataset"):
        r = monte(kind, "list", "--vault", "--json")
        err = r.json()["error"]
        assert err["code"] == "E_STORAGE" and "MONTE_GCS_KEY_FILE" in err["fix"], err
        assert not problems(err["fix"], _commands(), command=f"{kind} list"), err


def test_a_missing_experiment_names_the_command_that_lists_them(repo: Path, monte, experiment: str) -> None:
    err = monte("status", "-e", "nope", "--json").json()["error"]
    assert err["code"] == "E_NOT_FOUND" and "`monte experiment list`" in err["fix"], err
    assert monte("experiment", "list").code == 0
