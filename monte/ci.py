"""CI that runs where the ledgers are: two GitHub Actions workflows monte writes.

GitHub runs the workflow files of the commit a push brings, and a ledger commit holds only the
ledger. So every ledger commit carries :data:`LEDGER_WORKFLOW` in its own tree (the store writes
it with each record; ``monte ledger verify`` allows the path and merges treat it as derived): a
push of ``monte/<exp>/ledger`` runs a full ``monte ledger verify <exp>`` of that ledger.
``monte init`` writes :data:`DEFAULT_WORKFLOW` on the default branch: on each push there, every
day, and by hand, it fetches every ``refs/heads/monte/*`` and verifies all ledgers.

Both install monte from a pinned source, never ``pip install .`` (on the default branch that
would be the user's project; a ledger branch has none): ``MONTE_CI_INSTALL`` (a pip
requirement, e.g. ``monte @ git+https://github.com/ORG/monte@<commit>``) when set where the
workflow is written, else ``monte==<this version>``; the light install (no torch, DVC, ...).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from monte import __version__

#: Where a ledger commit carries its workflow (a path in the ledger's tree).
LEDGER_WORKFLOW = ".github/workflows/monte-ledger.yml"
#: Where ``monte init`` writes the default branch's workflow (a path in the work tree).
DEFAULT_WORKFLOW = ".github/workflows/monte-verify.yml"
#: The actions the workflows use, pinned by major version.
CHECKOUT = "actions/checkout@v4"
SETUP_PYTHON = "actions/setup-python@v5"
PYTHON = "3.11"


def install_spec() -> str:
    """The pip requirement CI installs: ``$MONTE_CI_INSTALL``, else this monte's version."""
    return os.environ.get("MONTE_CI_INSTALL", "").strip() or f"monte=={__version__}"


def _install_steps(spec: str) -> str:
    return (f"      - uses: {SETUP_PYTHON}\n"
            f"        with:\n"
            f"          python-version: \"{PYTHON}\"\n"
            f"      - name: install monte, light and pinned (no torch, transformers or DVC)\n"
            f"        run: python -m pip install {json.dumps(spec)}\n")


def ledger_workflow(spec: str | None = None) -> bytes:
    """The workflow every ledger commit carries (at :data:`LEDGER_WORKFLOW`)."""
    return (
        "# Written by monte into every record of this ledger branch: GitHub runs the workflow files\n"
        "# of the commit a push brings, so a push of monte/<exp>/ledger verifies that ledger here.\n"
        "# Change the pin with MONTE_CI_INSTALL where monte writes the records.\n"
        "name: monte ledger\n"
        "on:\n"
        "  push:\n"
        "    branches: [\"monte/**\"]\n"
        "permissions:\n"
        "  contents: read\n"
        "jobs:\n"
        "  verify:\n"
        "    runs-on: ubuntu-latest\n"
        "    timeout-minutes: 30\n"
        "    steps:\n"
        f"      - uses: {CHECKOUT}\n"
        "        with:\n"
        "          fetch-depth: 0\n"
        + _install_steps(spec or install_spec()) +
        "      - name: verify this ledger (every rule, from its whole history)\n"
        "        run: |\n"
        "          exp=\"${GITHUB_REF_NAME#monte/}\"\n"
        "          monte ledger verify \"${exp%/ledger}\"\n"
    ).encode()


def default_workflow(branch: str = "main", spec: str | None = None) -> str:
    """The default branch's workflow (at :data:`DEFAULT_WORKFLOW`): every ledger, verified."""
    return (
        "# Written by `monte init`: verify every monte ledger of this repository on each push of the\n"
        "# default branch, every day, and by hand. (A push of a ledger branch runs the workflow that\n"
        "# its own commits carry.) Change the pin with MONTE_CI_INSTALL and `monte init` again.\n"
        "name: monte ledgers\n"
        "on:\n"
        "  push:\n"
        f"    branches: [{json.dumps(branch)}]\n"
        "  schedule:\n"
        "    - cron: \"17 4 * * *\"\n"
        "  workflow_dispatch: {}\n"
        "permissions:\n"
        "  contents: read\n"
        "jobs:\n"
        "  verify:\n"
        "    runs-on: ubuntu-latest\n"
        "    timeout-minutes: 30\n"
        "    steps:\n"
        f"      - uses: {CHECKOUT}\n"
        "        with:\n"
        "          fetch-depth: 0\n"
        "      - name: fetch every monte ref\n"
        "        run: git fetch --atomic origin '+refs/heads/monte/*:refs/heads/monte/*'\n"
        + _install_steps(spec or install_spec()) +
        "      - name: verify every ledger\n"
        "        run: monte ledger verify --all\n"
    )


def write_default_workflow(repo_root: Path) -> str | None:
    """Write :data:`DEFAULT_WORKFLOW` for the repository's default branch (the branch ``HEAD``
    names) unless a file is there already; the path written, relative to ``repo_root``."""
    path = repo_root / DEFAULT_WORKFLOW
    if path.exists():
        return None
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(default_workflow(_default_branch(repo_root)))
    return DEFAULT_WORKFLOW


def _default_branch(repo_root: Path) -> str:
    head = repo_root / ".git" / "HEAD"
    try:
        line = head.read_text().strip()
    except OSError:
        return "main"
    prefix = "ref: refs/heads/"
    return line[len(prefix):] if line.startswith(prefix) else "main"
