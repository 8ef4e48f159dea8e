"""Errors with stable codes, and the exit-code table.

Every refusal monte makes is a :class:`MonteError` with a stable ``code`` (``E_*``), a message
that says what is wrong and a ``fix`` that says what to do. The exit status is decided by the
error's *family*, one per kind of failure, so scripts can branch on it without parsing text.
"""

from __future__ import annotations

import re
from enum import IntEnum
from typing import Literal, get_args


class Exit(IntEnum):
    """monte's exit statuses. Documented in docs/exit-codes.md; a test keeps them in step."""

    OK = 0
    INTERNAL = 1  # a bug in monte: please report it
    USAGE = 2  # the command line itself is wrong (also click's own usage errors)
    REFUSED = 3  # a rule of the record refuses the request
    NOT_FOUND = 4  # an experiment, run, environment, dataset or file does not exist
    INTEGRITY = 5  # bytes on disk do not match the hash the record holds
    BAD_INPUT = 6  # a file handed to monte (JSONL, manifest, recipe) cannot be accepted
    STORAGE = 7  # storage or network: vault, bucket, hub, key ladders
    BOX = 8  # remote boxes and jobs
    ENV = 9  # an environment's grader: a NeMo Gym resources server that cannot start or answer
    LAUNCH = 10  # past one process: a rank that died, a backend or rendezvous port that is not there
    INTERRUPTED = 130  # Ctrl-C (SIGINT): the shell's own convention, 128 + 2
    STOPPED = 143  # SIGTERM (`monte stop`, a box's watchdog): 128 + 15


#: Every code monte can emit. A typo in ``error("E_...")`` fails the type check (mypy runs in
#: ``make test``), and :data:`CODES` must name each exactly once (checked when this module imports).
Code = Literal[
    "E_INTERNAL", "E_USAGE", "E_INVALID_NAME", "E_CONFIRM_REQUIRED", "E_CANCELLED", "E_REFUSED",
    "E_NOT_INITIALIZED", "E_MEASUREMENT_EXISTS", "E_NAME_TAKEN", "E_SOURCE_CONFLICT", "E_CONFLICT",
    "E_PREFLIGHT", "E_SEALED", "E_NO_BASELINE", "E_UNPAIRABLE", "E_NOT_EVIDENCE", "E_LEAK", "E_NOT_FOUND",
    "E_DATA_ROOT", "E_INTEGRITY", "E_VERIFY", "E_BAD_INPUT", "E_UNSAFE_PATH", "E_STORAGE", "E_BOX",
    "E_INTERRUPTED", "E_ENV", "E_STOPPED", "E_LAUNCH", "E_RANK",
]


class MonteError(Exception):
    """Base of every refusal. Subclasses fix ``exit_code``; instances carry ``code``."""

    exit_code: Exit = Exit.INTERNAL
    default_code: Code = "E_INTERNAL"

    def __init__(self, message: str, *, fix: str = "", code: Code | None = None,
                 details: list[dict[str, str]] | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.fix = fix
        self.code = code or self.default_code
        self.details = details

    def to_dict(self) -> dict[str, object]:
        out: dict[str, object] = {
            "code": self.code,
            "message": self.message,
            "fix": self.fix,
            "exit_code": int(self.exit_code),
        }
        if self.details is not None:
            out["details"] = self.details
        return out

    def __str__(self) -> str:
        return f"{self.code}: {self.message}" + (f" ({self.fix})" if self.fix else "")


class InternalError(MonteError):
    exit_code = Exit.INTERNAL
    default_code = "E_INTERNAL"


class UsageError(MonteError):
    exit_code = Exit.USAGE
    default_code = "E_USAGE"


class RuleRefusal(MonteError):
    exit_code = Exit.REFUSED
    default_code = "E_REFUSED"


class NotFound(MonteError):
    exit_code = Exit.NOT_FOUND
    default_code = "E_NOT_FOUND"


class IntegrityError(MonteError):
    exit_code = Exit.INTEGRITY
    default_code = "E_INTEGRITY"


class BadInput(MonteError):
    exit_code = Exit.BAD_INPUT
    default_code = "E_BAD_INPUT"


class StorageError(MonteError):
    exit_code = Exit.STORAGE
    default_code = "E_STORAGE"


class BoxError(MonteError):
    exit_code = Exit.BOX
    default_code = "E_BOX"


class EnvServerError(MonteError):
    exit_code = Exit.ENV
    default_code = "E_ENV"


class LaunchError(MonteError):
    exit_code = Exit.LAUNCH
    default_code = "E_LAUNCH"


class Interrupted(MonteError):
    exit_code = Exit.INTERRUPTED
    default_code = "E_INTERRUPTED"


class Stopped(MonteError):
    exit_code = Exit.STOPPED
    default_code = "E_STOPPED"


#: Every code monte can emit, with its family. docs/exit-codes.md's table is generated from and tested
#: against this mapping, so a new code must be added here.
CODES: dict[Code, type[MonteError]] = {
    "E_INTERNAL": InternalError,
    "E_USAGE": UsageError,
    "E_INVALID_NAME": UsageError,
    "E_CONFIRM_REQUIRED": UsageError,
    "E_CANCELLED": UsageError,
    "E_REFUSED": RuleRefusal,
    "E_NOT_INITIALIZED": RuleRefusal,
    "E_MEASUREMENT_EXISTS": RuleRefusal,
    "E_NAME_TAKEN": RuleRefusal,
    "E_SOURCE_CONFLICT": RuleRefusal,
    "E_CONFLICT": RuleRefusal,
    "E_PREFLIGHT": RuleRefusal,
    "E_SEALED": RuleRefusal,
    "E_NO_BASELINE": RuleRefusal,
    "E_UNPAIRABLE": RuleRefusal,
    "E_NOT_EVIDENCE": RuleRefusal,
    "E_LEAK": RuleRefusal,
    "E_NOT_FOUND": NotFound,
    "E_DATA_ROOT": NotFound,
    "E_INTEGRITY": IntegrityError,
    "E_VERIFY": IntegrityError,
    "E_BAD_INPUT": BadInput,
    "E_UNSAFE_PATH": BadInput,
    "E_STORAGE": StorageError,
    "E_BOX": BoxError,
    "E_ENV": EnvServerError,
    "E_LAUNCH": LaunchError,
    "E_RANK": LaunchError,
    "E_INTERRUPTED": Interrupted,
    "E_STOPPED": Stopped,
}
if set(CODES) != set(get_args(Code)):  # pragma: no cover - fails at import, never at a user's run
    raise ImportError(f"monte.errors: CODES and Code differ: {sorted(set(CODES) ^ set(get_args(Code)))}")


def error(code: Code, message: str, fix: str = "", details: list[dict[str, str]] | None = None) -> MonteError:
    """Build the right :class:`MonteError` subclass for ``code``."""
    try:
        cls = CODES[code]
    except KeyError:  # a typo in monte itself, not the user's fault
        raise InternalError(f"unknown error code {code!r}") from None
    return cls(message, fix=fix, code=code, details=details)


#: exception class names that HTTP clients (httpx, httpcore, requests, urllib3, aiohttp) raise
#: when the network, not the request, failed: refused, unreachable, timed out, TLS, DNS
_NETWORK_NAMES = {"ConnectError", "ConnectTimeout", "ReadTimeout", "WriteTimeout", "PoolTimeout", "TimeoutException",
                  "NetworkError", "TransportError", "ConnectionError", "ProxyError", "SSLError", "NewConnectionError",
                  "MaxRetryError", "NameResolutionError", "RemoteProtocolError", "ReadError", "WriteError",
                  "ClientConnectorError", "ServerDisconnectedError", "OfflineModeIsEnabled"}
_NETWORK_MODULES = ("httpx", "httpcore", "requests", "urllib3", "aiohttp", "huggingface_hub", "httpx2")


def is_network_failure(e: BaseException) -> bool:
    """Whether ``e`` (or what it was raised from) is a failure to reach a server: the network,
    not monte (a refusal ``E_STORAGE`` naming it, never ``E_INTERNAL``)."""
    seen = 0
    cur: BaseException | None = e
    while cur is not None and seen < 8:
        for cls in type(cur).__mro__:
            if cls.__name__ in _NETWORK_NAMES and cls.__module__.split(".")[0] in _NETWORK_MODULES:
                return True
        if isinstance(cur, ConnectionError | TimeoutError):  # the socket's own (refused, reset, timed out)
            return True
        cur = cur.__cause__ or cur.__context__
        seen += 1
    return False


def network_refusal(e: BaseException, what: str) -> MonteError:
    """``E_STORAGE`` for a server monte could not reach (``what``: which, in words)."""
    return error("E_STORAGE", f"could not reach {what}: the network failed ({type(e).__name__}: {e})",
                 "check the network connection (and any proxy), then run the command again")


_ERRNO_WORDS = re.compile(r"\[Errno -?\d+\] ([^'\")\]]+)")
_HOST_PORT = re.compile(r"host='([^']+)', port=(\d+)")


def in_words(e: BaseException, limit: int = 200) -> str:
    """What a library's exception says, fit for a refusal's message: the network's reason and
    host alone for a failure to connect (not urllib3's pool/retry prose), else the first line of
    the message without a tool's ``ERROR:`` prefix, cut at a word (``…``), never mid-word."""
    text = str(e).strip()
    if is_network_failure(e):
        chain, cur, seen = [text], e.__cause__ or e.__context__, 0
        while cur is not None and seen < 8:
            chain.append(str(cur))
            cur, seen = cur.__cause__ or cur.__context__, seen + 1
        joined = " ".join(chain)
        reason = _ERRNO_WORDS.search(joined)
        host = _HOST_PORT.search(joined)
        words = reason.group(1).strip().rstrip(".") if reason else ("timed out" if "imeout" in joined else "")
        if words or host:
            where = f" ({host.group(1)}:{host.group(2)})" if host else ""
            return _cut(f"the network failed: {words or 'no connection'}{where}", limit)
    line = next((ln.strip() for ln in text.splitlines() if ln.strip()), "")
    line = re.sub(r"^(ERROR|WARNING):\s*", "", line)
    return _cut(line, limit) if line else type(e).__name__


def _cut(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    head = text[:limit]
    space = head.rfind(" ")
    return (head[:space] if space > limit // 2 else head).rstrip(" ,;:-(") + "…"
