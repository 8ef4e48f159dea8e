"""Monte commands one after another in one interpreter, as a script run in the repository they
set up: ``python tests/support/batch.py '[["init"], ["env", "add", ...]]' [--constant-answers]``.

The benchmarks' setups (never timed) use it: a fresh interpreter costs a second or more a command
on a loaded machine, and torch's import is paid once. ``["copy", DEST]`` copies the repository as
it stands at that point. ``--constant-answers``: every generation answers "0" (a smoke run's
baselines only gate training; they are no figure). Run by path, it imports only the installed
``monte``, whatever the working directory.
"""

from __future__ import annotations

import json
import shutil
import sys


def main(argv: list[str]) -> str | None:
    if "--constant-answers" in argv[1:]:
        import monte.models.generate as g

        g.generate = lambda model, tok, prompts, **kw: ["0" for _ in prompts]
    from monte.cli.main import main as monte

    for args in json.loads(argv[0]):
        if args[0] == "copy":
            shutil.copytree(".", args[1], symlinks=True)
            continue
        try:
            monte(args)
        except SystemExit as e:
            if e.code:
                return f"monte {' '.join(args)} exited {e.code}"
    return None


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
