"""The GCS key ladders: where monte finds the service-account key for the bucket and the Vault.

Two ladders, tried top to bottom; the first rung that is *set* decides:

* read (``monte sync``, any Vault read): ``--key-file PATH``, ``MONTE_GCS_KEY_FILE`` (a path),
  ``MONTE_GCS_KEY_OP`` (the name of a 1Password document, read with ``op document get``);
* write (``monte push``, Vault freezes): ``--key-file PATH``, ``MONTE_GCS_BOX_KEY_FILE``,
  ``MONTE_GCS_BOX_KEY_OP``, then the whole read ladder.

A rung that is set but broken (a missing or unreadable file, something that is not a JSON key,
no ``op`` on PATH, ``op`` failing) is refused with ``E_STORAGE``; it never falls through to the
next rung. An empty variable counts as unset.

The key itself is only ever held in memory: it is never written to disk, never put in argv and
never quoted in a message. Nor is the *value* of a key variable or ``--key-file``: a key pasted
where its path belongs (``MONTE_GCS_KEY_FILE="$(cat key.json)"``) is the key. Messages name the
variable and what is wrong with it, nothing else.
Stdlib only, so importing this costs nothing.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from monte.errors import Code, error

KEY_FILE = "MONTE_GCS_KEY_FILE"
KEY_OP = "MONTE_GCS_KEY_OP"
BOX_KEY_FILE = "MONTE_GCS_BOX_KEY_FILE"
BOX_KEY_OP = "MONTE_GCS_BOX_KEY_OP"

#: The rungs in order, by their human names, for messages.
READ_LADDER: tuple[str, ...] = ("--key-file", KEY_FILE, KEY_OP)
WRITE_LADDER: tuple[str, ...] = ("--key-file", BOX_KEY_FILE, BOX_KEY_OP, KEY_FILE, KEY_OP)

#: Credential types google-auth can load from a JSON document.
KEY_TYPES = frozenset({
    "service_account",
    "authorized_user",
    "external_account",
    "external_account_authorized_user",
    "impersonated_service_account",
    "gdch_service_account",
})

MAX_KEY_BYTES = 1 << 20  # a key is a few KiB; anything past this is not one
OP_TIMEOUT_S = 120.0  # room for a person to approve the 1Password prompt

# (variable, "file" | "op", on the read-write part of the ladder)
_READ_RUNGS = ((KEY_FILE, "file", False), (KEY_OP, "op", False))
_WRITE_RUNGS = ((BOX_KEY_FILE, "file", True), (BOX_KEY_OP, "op", True), *_READ_RUNGS)
_FILE_FOR_OP = {KEY_OP: KEY_FILE, BOX_KEY_OP: BOX_KEY_FILE}


@dataclass(frozen=True)
class Key:
    """A resolved key. ``info`` is the parsed JSON, in memory only; it never shows in repr/str."""

    info: dict[str, Any] = field(repr=False)
    source: str  # where it came from, printable: never the content
    writable_ladder: bool  # came from --key-file or a BOX variable (the read-write rungs)

    def __repr__(self) -> str:
        return f"Key(source={self.source!r}, writable_ladder={self.writable_ladder})"

    def __str__(self) -> str:
        return self.source


def read_key(key_file: str | Path | None = None) -> Key | None:
    """The key for reading: ``--key-file``, ``MONTE_GCS_KEY_FILE``, ``MONTE_GCS_KEY_OP``; None if
    no rung is set."""
    return _resolve(key_file, _READ_RUNGS)


def write_key(key_file: str | Path | None = None) -> Key | None:
    """The key for writing: ``--key-file``, ``MONTE_GCS_BOX_KEY_FILE``, ``MONTE_GCS_BOX_KEY_OP``,
    then the read ladder; None if no rung is set."""
    return _resolve(key_file, _WRITE_RUNGS)


def require(key: Key | None, what: str, *, write: bool) -> Key:
    """``key``, or ``E_STORAGE`` saying no key resolved for ``what`` and listing the ladder."""
    if key is not None:
        return key
    ladder = WRITE_LADDER if write else READ_LADDER
    raise error(
        "E_STORAGE",
        f"no GCS key resolved for {what}",
        f"set the first that suits, in this order: {', '.join(ladder)} "
        "(--key-file and *_FILE take the path of a service-account JSON key; "
        "*_OP names a 1Password document, read with `op document get`)",
    )


def write_secret_file(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` as mode 0600, creating parent folders. The file is created 0600
    and, if it already existed, truncated and chmodded before a byte is written, so the data is
    never readable by anyone else, not even for an instant."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_CREAT | os.O_TRUNC | os.O_WRONLY | os.O_CLOEXEC, 0o600)
    try:
        os.fchmod(fd, 0o600)
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
    finally:
        os.close(fd)


# --- resolution ----------------------------------------------------------------------------------


def _resolve(key_file: str | Path | None,
             rungs: tuple[tuple[str, str, bool], ...]) -> Key | None:
    if key_file is not None and str(key_file) != "":
        return _from_file(str(key_file), "--key-file", True)
    for var, kind, writable in rungs:
        value = os.environ.get(var, "")
        if not value:
            continue
        if kind == "file":
            return _from_file(value, var, writable)
        return _from_op(value, var, writable)
    return None


def looks_like_a_secret(value: str) -> bool:
    """A value where a path or a name belongs that is more likely the secret itself: several
    lines, a JSON document, a PEM block, or far longer than any path."""
    v = value.strip()
    return ("\n" in v or "\r" in v or v.startswith(("{", "[")) or "PRIVATE KEY" in v or "-----BEGIN" in v
            or len(v) > 1024)


def scrub(text: str, value: str) -> str:
    """``text`` (a tool's error line) with ``value`` (a variable's, which the tool may echo) cut out."""
    return text.replace(value, "<…>") if value else text


def pasted_key(label: str, what: str) -> str:
    """The message for a key pasted into ``label``, which takes ``what`` (never the value)."""
    return f"{label} holds what looks like a key itself, not {what}"


def _file_fix(label: str) -> str:
    if label == "--key-file":
        return "pass --key-file the path of a Google service-account JSON key"
    return f"point {label} at a Google service-account JSON key, or unset it"


def _from_file(value: str, label: str, writable: bool) -> Key:
    """The key in the file ``value`` names. No message holds ``value``: it may be the key itself."""
    if looks_like_a_secret(value):
        raise error("E_STORAGE", "GCS key " + pasted_key(label, "the path of a key file"),
                    f"save the key in a file only you can read and set {label} to that file's path")
    problem = ""
    raw = b""
    try:
        with open(os.path.expanduser(value), "rb") as f:
            raw = f.read(MAX_KEY_BYTES + 1)
    except FileNotFoundError:
        problem = "the file it names does not exist"
    except IsADirectoryError:
        problem = "it names a directory, not a key file"
    except ValueError:  # a NUL byte
        problem = "it is not a path"
    except OSError as e:
        problem = f"the file it names cannot be read ({e.strerror or type(e).__name__})"
    if problem:
        raise error("E_STORAGE", f"GCS key {label} is not a path to a key file: {problem}", _file_fix(label))
    info = _parse(raw)
    if info is None:
        raise error("E_STORAGE", f"GCS key {label}: the file it names is not a JSON key file", _file_fix(label))
    return Key(info=info, source=label, writable_ladder=writable)


def _from_op(name: str, var: str, writable: bool) -> Key:
    source = f"the 1Password document {var} names"
    alt = _FILE_FOR_OP[var]
    if looks_like_a_secret(name):  # refused before it reaches op's argv (or op's error line)
        raise error("E_STORAGE", "GCS key " + pasted_key(var, "the name of a 1Password document"),
                    f"store the key as a 1Password document and set {var} to its name, or set {alt} "
                    "to a key file's path instead")
    op = shutil.which("op")
    if op is None:
        raise error(
            "E_STORAGE",
            f"{var} is set, but the 1Password CLI `op` is not on PATH",
            f"install the 1Password CLI and sign in (`op signin`), or set {alt} to a key file "
            f"path instead (and unset {var})",
        )
    # The name is not a secret, so argv is fine; the document comes back on stdout, in memory.
    out = run_op([op, "document", "get", name], timeout=OP_TIMEOUT_S, code="E_STORAGE",
                 what=f"`op document get` (the document {var} names)", secret=name,
                 fix_retry=f"sign in with `op signin` and try again, or set {alt} instead",
                 fix_failed=f"sign in with `op signin`, check the document name in {var}, or set {alt} instead")
    info = _parse(out)
    del out
    if info is None:
        raise error("E_STORAGE", f"{source} is not a JSON key file",
                    f"store the service-account JSON key itself as that document, or set {alt}")
    return Key(info=info, source=source, writable_ladder=writable)


def _parse(raw: bytes) -> dict[str, Any] | None:
    """The key as a dict, or None. Parse errors are swallowed here and never re-raised or chained:
    a JSONDecodeError holds the whole document, and a UnicodeDecodeError its bytes."""
    if len(raw) > MAX_KEY_BYTES:
        return None
    try:
        info = json.loads(raw)
    except ValueError:  # JSONDecodeError and UnicodeDecodeError alike
        return None
    if not isinstance(info, dict) or not isinstance(info.get("type"), str) \
            or info["type"] not in KEY_TYPES:
        return None
    return info


def run_op(argv: list[str], *, timeout: float, code: Code, what: str, fix_retry: str, fix_failed: str,
           secret: str = "") -> bytes:
    """Run the 1Password CLI and return its stdout (a secret: held in memory only). A timeout, a
    failure to start or a non-zero exit refuses with ``code``, naming ``what`` and op's first
    stderr line (op never prints the secret there; it may echo the name it was given, the
    variable's value ``secret``, which is cut out), never the output."""
    problem = ""
    try:
        proc = subprocess.run(argv, capture_output=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired:  # holds partial stdout: raised outside this block
        problem = f"did not answer within {timeout:g} s"
    except OSError as e:
        problem = f"could not be run ({e.strerror or type(e).__name__})"
    if problem:
        raise error(code, f"{what} {problem}", fix_retry)
    if proc.returncode != 0:
        lines = [ln.strip() for ln in proc.stderr.decode("utf-8", "replace").splitlines()]
        first = scrub(next((ln for ln in lines if ln), ""), secret)[:200]
        raise error(code, f"{what} failed with exit status {proc.returncode}" + (f": {first}" if first else ""),
                    fix_failed)
    return proc.stdout
