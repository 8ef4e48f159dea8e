"""Names a user gives monte: experiments, environments, datasets, runs.

A name becomes a git ref component and a folder under the data root, so it must be safe for
both: no path separators, no ``..``, no whitespace, nothing git refuses in a ref.
"""

from __future__ import annotations

import re

from monte.errors import error

MAX_NAME = 64
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


def check_name(name: str, what: str = "name") -> str:
    """Return ``name`` if it is a valid monte name, else refuse with ``E_INVALID_NAME``."""
    fix = (
        f"use 1-{MAX_NAME} characters from letters, digits, '.', '_' and '-', "
        "starting with a letter or digit"
    )
    if not name:
        raise error("E_INVALID_NAME", f"the {what} is empty", fix)
    if len(name) > MAX_NAME:
        raise error("E_INVALID_NAME", f"the {what} {name[:20]!r}... is {len(name)} characters long", fix)
    if (
        not _NAME.fullmatch(name)  # not match: "$" also matches before a trailing newline
        or ".." in name
        or name.endswith((".", ".lock"))
    ):
        raise error("E_INVALID_NAME", f"the {what} {name!r} is not a valid name", fix)
    return name


def is_relpath(path: str) -> bool:
    """A path inside a frozen folder: relative, POSIX, no ``..``, nothing odd
    (:func:`monte.manifest.check_relpath` refuses any other)."""
    return not (not path or "\\" in path or "\x00" in path or path.startswith("/")
                or any(part in ("", ".", "..") for part in path.split("/")))
