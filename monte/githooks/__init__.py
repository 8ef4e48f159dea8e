"""monte's git hooks: the scripts beside this file, installing them, and what they ask monte.

Each script (``reference-transaction``, ``pre-push``, ``pre-receive``) hands the
``refs/heads/monte/*`` updates it sees to ``python -m monte ledger verify --updates``
(:func:`judge`), which judges them together, as one transaction
(:func:`monte.ledger.verify.verify_updates`). A script whose python cannot import monte refuses
every monte/ update (and nothing else) with the line that installs it.

:func:`install` writes each script, whole, into a repository's ``hooks/`` (a working
repository's, or a bare server repository's), with the python that runs monte fixed (the
python that installed them, written into each script: a hook takes no python, path or
``MONTE_*`` variable from whoever runs git) and offering the pinned pip line CI installs; a hook
that was there before is kept as ``<name>.local`` and runs first.
"""

from __future__ import annotations

import shlex
import stat
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from monte.errors import error

if TYPE_CHECKING:  # imported when a hook runs: `monte --help` imports this module
    from monte.ledger.store import Store

HOOKS = ("reference-transaction", "pre-push", "pre-receive")
HOOK_MARK = "# installed by `monte hooks install`"
TEMPLATES = Path(__file__).parent


def script(name: str, python: str | None = None, spec: str | None = None) -> str:
    """The hook ``name`` as installed: the script itself, after a preamble that runs a hook
    that was there before (``<name>.local``), with the python that runs monte fixed.

    ``python`` (default: the python installing the hook) is written into the script, once: the
    hook never looks for monte when it runs (``$MONTE_PYTHON``, ``PATH``, ``PYTHONPATH`` are
    whoever runs git's, and a pusher's reach a local ``receive-pack``), and it starts that python
    with ``-E -P`` after dropping every ``PYTHON*`` and ``MONTE_*`` variable. A python that is
    later gone refuses every monte/ update, offering the pin CI installs (``spec``:
    :func:`monte.ci.resolve`), never a local folder, and ``monte hooks install`` to record
    another."""
    body = (TEMPLATES / name).read_text().split("\n", 1)[1]
    py = python or sys.executable
    install = (f"python3 -m pip install {shlex.quote(spec)}" if spec else
               "python3 -m pip install 'monte @ git+https://github.com/ORG/monte@COMMIT' (the pin CI uses: "
               "`monte init --ci-install SPEC` sets it)")
    for line, value in ((PY_LINE, f"py={shlex.quote(py)}"), (INSTALL_LINE, f"install={shlex.quote(install)}")):
        if f"\n{line}\n" not in body:
            raise AssertionError(f"the {name} template lost its line {line!r}")
        body = body.replace(f"\n{line}\n", f"\n{value}\n", 1)
    return (
        "#!/bin/sh\n"
        f"{HOOK_MARK}; `monte hooks uninstall` removes it.\n"
        "# A hook that was here before runs first, as <name>.local.\n"
        "input=$(cat)\n"
        'if [ -x "$0.local" ]; then printf "%s\\n" "$input" | "$0.local" "$@" || exit $?; fi\n'
        'printf "%s\\n" "$input" | (\n'
        f"{body.rstrip()}\n"
        ")\n"
    )

#: the template lines :func:`script` fixes (a copy made by hand keeps them: python3 on PATH)
PY_LINE = "py=python3"
INSTALL_LINE = 'install="$py -m pip install monte"'


def install(git_dir: Path, *, python: str | None = None, spec: str | None = None) -> list[str]:
    """Install the hooks into ``git_dir``/hooks; return their paths. ``python``/``spec``: see
    :func:`script`."""
    hooks = git_dir / "hooks"
    hooks.mkdir(exist_ok=True)
    foreign = [hooks / n for n in HOOKS if (hooks / n).exists() and HOOK_MARK not in (hooks / n).read_text(errors="replace")]
    for path in foreign:  # all refused before any is touched: never half installed
        local = path.with_name(f"{path.name}.local")
        if local.exists():
            raise error("E_REFUSED", f"{path} is not monte's and {local} exists too",
                        "merge them by hand, then run `monte hooks install` again")
    done = []
    for name in HOOKS:
        path = hooks / name
        if path in foreign:
            path.rename(hooks / f"{name}.local")
        path.write_text(script(name, python, spec))
        path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
        done.append(str(path))
    precompile()
    return done


def precompile() -> None:
    """Compile monte's modules where they are installed, once (best effort): a hook runs monte in
    a new process on every push and ref update, and an install that keeps no bytecode (an image
    run with ``PYTHONDONTWRITEBYTECODE=1``) would compile each module it imports every time.
    What is up to date is skipped; a folder this user cannot write is left as it is."""
    import compileall
    import contextlib
    import io

    import monte

    with contextlib.suppress(OSError), contextlib.redirect_stdout(io.StringIO()):
        compileall.compile_dir(str(Path(monte.__file__).parent), quiet=2)


def uninstall(git_dir: Path) -> list[str]:
    """Remove monte's hooks from ``git_dir``/hooks (a chained ``<name>.local`` is put back)."""
    hooks = git_dir / "hooks"
    removed = []
    for name in HOOKS:
        path = hooks / name
        if path.exists() and HOOK_MARK in path.read_text(errors="replace"):
            path.unlink()
            removed.append(str(path))
            local = hooks / f"{name}.local"
            if local.exists():
                local.rename(path)
    return removed


def judge(lines: list[str], store: Store, *, full: bool = False, hook: str | None = None) -> list[dict[str, str]]:
    """The violations of the updates in ``lines`` (``old new ref``), judged together.

    ``hook`` (the script's ``$MONTE_HOOK``): ``pre-receive`` remembers the updates of a push it
    accepts, and ``reference-transaction`` lets exactly those through: ``git receive-pack``
    applies a push one ref at a time, after pre-receive judged it whole
    (:mod:`monte.ledger.transaction`)."""
    from monte.ledger.transaction import Accepted, parse_updates
    from monte.ledger.verify import verify_updates

    updates = parse_updates(lines)
    accepted = Accepted(store.repo.commondir())
    if hook == "reference-transaction":
        updates = [u for u in updates if not accepted.holds(u)]
    found = verify_updates(store, updates, full=full)
    if not found and hook == "pre-receive":
        accepted.record(updates)
    return [{"ref": ref, **v.to_dict()} for ref, v in found]


def refuse(lines: list[str], store: Store, *, full: bool = False, hook: str | None = None) -> int:
    """:func:`judge`, refusing E_VERIFY with every violation when there is one; else the number
    of updates judged. What each hook (and ``monte ledger verify --updates``) says."""
    violations = judge(lines, store, full=full, hook=hook)
    if violations:
        said = "; ".join(f"{x['ref']} {x['commit']} [{x['rule']}] {x['message']}" for x in violations[:20])
        raise error("E_VERIFY", f"refused by monte: {said}",
                    "this update would break the record's rules; set MONTE_HOOKS=off only to repair by hand",
                    details=violations)
    return sum(1 for line in lines if line.strip())

