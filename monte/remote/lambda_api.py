"""A client for Lambda Cloud's public HTTP API (https://docs.lambda.ai/api/cloud). Stdlib only.

The few calls monte needs: instance types (and where they have capacity), instances, file
systems, SSH keys, launch and terminate. Every failure becomes ``E_BOX`` with Lambda's own code,
message and suggestion in plain words, and never the key.

Retries. Lambda limits requests to about one a second (launch: one per 12 s) and answers 429
past that. Reads and terminate are idempotent, so they are retried with jittered exponential
backoff on 429, 5xx and connection errors, within a bounded total time (the module constants
below; tests shrink them). A launch is retried only when it provably created nothing: a 429, or a
connection that was never made. When a launch's answer is lost after the request went out (a
timeout, a reset, a 5xx), the instance may exist, so it is looked up by the unique name monte
gave it and taken as this launch's; an instance that exists is never left running unseen.

The key: ``MONTE_LAMBDA_KEY``, else the 1Password item ``MONTE_LAMBDA_KEY_OP`` names, read with
``op item get NAME --fields label=credential --reveal`` (the secret comes back on stdout, in
memory; only the item's name is in argv). It is never written to disk, logged, or quoted.
"""

from __future__ import annotations

import email.utils
import errno
import http.client
import json
import os
import random
import shutil
import socket
import ssl
import sys
import time
import urllib.error
import urllib.request
from datetime import UTC, datetime
from typing import Any, TypeVar

from monte import __version__
from monte.errors import BoxError, MonteError, error

API_ENV = "MONTE_LAMBDA_API"
KEY_ENV = "MONTE_LAMBDA_KEY"
KEY_OP_ENV = "MONTE_LAMBDA_KEY_OP"
DEFAULT_API = "https://cloud.lambda.ai/api/v1"

#: Seconds one request may take before it counts as lost.
REQUEST_TIMEOUT_S = 30.0
#: Backoff: the first retry waits about RETRY_BASE_S, doubling, each wait at most
#: RETRY_MAX_SLEEP_S, and no retry starts once RETRY_BUDGET_S have passed since the first try.
RETRY_BASE_S = 1.0
RETRY_MAX_SLEEP_S = 15.0
RETRY_BUDGET_S = 90.0
#: While no request has reached anything (the name does not resolve, the connection is refused,
#: the network is unreachable: offline), retries stop after this long instead: waiting the whole
#: budget in silence was 83 s of nothing on a laptop with no network.
NO_NETWORK_BUDGET_S = 12.0
#: After a lost launch answer: how long to look for the instance by its name, and how often.
FIND_LAUNCHED_WAIT_S = 30.0
FIND_LAUNCHED_POLL_S = 3.0
#: Room for a person to approve the 1Password prompt.
OP_TIMEOUT_S = 120.0
MAX_RESPONSE_BYTES = 16 << 20

# Lambda's error codes that monte treats specially.
INSUFFICIENT_CAPACITY = "instance-operations/launch/insufficient-capacity"
INVALID_API_KEY = "global/invalid-api-key"
QUOTA_EXCEEDED = "global/quota-exceeded"
OBJECT_DOES_NOT_EXIST = "global/object-does-not-exist"

#: Instance statuses after which an instance is on its way out (and no longer bills for long).
GONE = frozenset({"terminated", "terminating"})

_KEY_FIX = (f"set {KEY_ENV} to a Lambda Cloud API key (Lambda Cloud → API keys), or {KEY_OP_ENV} "
            "to the name of the 1Password item holding it (read with "
            "`op item get NAME --fields label=credential --reveal`)")


class LambdaError(BoxError):
    """Lambda answered a request with an error: ``lambda_code`` is its code ('' if it gave none),
    ``status`` the HTTP status."""

    def __init__(self, message: str, *, fix: str, lambda_code: str, status: int) -> None:
        super().__init__(message, fix=fix)
        self.lambda_code = lambda_code
        self.status = status


class ResponseLost(BoxError):
    """A request went out and no answer came back: it may or may not have taken effect."""


class _Transient(Exception):
    """A failure worth retrying. ``maybe_done``: the request may have reached Lambda and acted."""

    def __init__(self, why: str, *, maybe_done: bool, retry_after: float | None = None,
                 no_network: bool = False) -> None:
        super().__init__(why)
        self.why = why
        self.maybe_done = maybe_done
        self.retry_after = retry_after
        self.no_network = no_network  # nothing was reached: offline, a wrong host, nothing listening


# --- the key -------------------------------------------------------------------------------------


class LambdaKey:
    """A resolved Lambda API key. Its repr and str name where it came from, never the key."""

    __slots__ = ("_secret", "source")

    def __init__(self, secret: str, source: str) -> None:
        self._secret = secret
        self.source = source

    def reveal(self) -> str:
        return self._secret

    def __repr__(self) -> str:
        return f"LambdaKey(source={self.source!r})"

    def __str__(self) -> str:
        return self.source


_T = TypeVar("_T")

def resolve_key() -> LambdaKey:
    """``MONTE_LAMBDA_KEY``, else the 1Password item ``MONTE_LAMBDA_KEY_OP`` names; else
    ``E_BOX`` naming both. A set rung that is broken refuses; it never falls through."""
    value = os.environ.get(KEY_ENV, "").strip()
    if value:
        return LambdaKey(value, KEY_ENV)
    item = os.environ.get(KEY_OP_ENV, "").strip()
    if item:
        return _key_from_op(item)
    raise error("E_BOX", f"no Lambda API key: neither {KEY_ENV} nor {KEY_OP_ENV} is set", _KEY_FIX)


def _key_from_op(item: str) -> LambdaKey:
    from monte.storage.keys import looks_like_a_secret, pasted_key, run_op

    if looks_like_a_secret(item):  # the key itself, pasted: kept out of op's argv and every message
        raise error("E_BOX", pasted_key(KEY_OP_ENV, "the name of a 1Password item"),
                    f"set {KEY_ENV} to the key instead, or {KEY_OP_ENV} to the name of the item holding it")
    op = shutil.which("op")
    if op is None:
        raise error("E_BOX", f"{KEY_OP_ENV} is set, but the 1Password CLI `op` is not on PATH",
                    f"install the 1Password CLI and sign in (`op signin`), or set {KEY_ENV} instead")
    # messages name the variable, never its value (a key pasted there would be the key)
    what = f"`op item get --fields label=credential` (the item {KEY_OP_ENV} names)"
    # the item's name is not a secret, so argv is fine; the key comes back on stdout
    out = run_op([op, "item", "get", item, "--fields", "label=credential", "--reveal"], timeout=OP_TIMEOUT_S,
                 code="E_BOX", what=what, secret=item,
                 fix_retry=f"sign in with `op signin` and try again, or set {KEY_ENV} instead",
                 fix_failed=f"sign in with `op signin`, check the item name in {KEY_OP_ENV} (its API key "
                 f"must be in a field labelled 'credential'), or set {KEY_ENV} instead")
    try:
        secret = out.decode("utf-8").strip()
    except UnicodeDecodeError:
        secret = ""
    del out
    if not secret or any(c.isspace() for c in secret):
        raise error("E_BOX", f"{what} did not print one API key",
                    f"store the Lambda API key in the item's 'credential' field, or set {KEY_ENV}")
    return LambdaKey(secret, f"the 1Password item {KEY_OP_ENV} names")


# --- the client ----------------------------------------------------------------------------------


class LambdaClient:
    """Lambda Cloud's API, at ``$MONTE_LAMBDA_API`` or https://cloud.lambda.ai/api/v1."""

    def __init__(self, key: LambdaKey, base_url: str | None = None) -> None:
        self._key = key
        self.base_url = (base_url or os.environ.get(API_ENV) or DEFAULT_API).rstrip("/")

    def __repr__(self) -> str:
        return f"LambdaClient({self.base_url!r}, key from {self._key.source})"

    # reads

    def instance_types(self) -> dict[str, dict[str, Any]]:
        """``{type name: {"instance_type": {...}, "regions_with_capacity_available": [...]}}``."""
        data = self._request("GET", "/instance-types", what="listing instance types")
        return _expect(data, dict, "instance types")

    def instances(self) -> list[dict[str, Any]]:
        data = self._request("GET", "/instances", what="listing instances")
        return [i for i in _expect(data, list, "instances") if isinstance(i, dict)]

    def instance(self, instance_id: str) -> dict[str, Any]:
        data = self._request("GET", f"/instances/{_segment(instance_id)}",
                             what=f"reading instance {instance_id}")
        return _expect(data, dict, f"instance {instance_id}")

    def file_systems(self) -> list[dict[str, Any]]:
        data = self._request("GET", "/file-systems", what="listing file systems")
        return [f for f in _expect(data, list, "file systems") if isinstance(f, dict)]

    def ssh_keys(self) -> list[dict[str, Any]]:
        data = self._request("GET", "/ssh-keys", what="listing SSH keys")
        return [k for k in _expect(data, list, "SSH keys") if isinstance(k, dict)]

    # writes

    def launch(self, *, name: str, region: str, instance_type: str, ssh_key: str,
               file_systems: list[str]) -> str:
        """Launch one instance named ``name`` (which must be unique on the account); return its
        id. A lost answer is resolved by finding the instance by that name."""
        body = {"region_name": region, "instance_type_name": instance_type,
                "ssh_key_names": [ssh_key], "file_system_names": list(file_systems), "name": name}
        what = f"launching {name} ({instance_type}) in {region}"
        try:
            data = self._request("POST", "/instance-operations/launch", body, idempotent=False,
                                 what=what)
        except ResponseLost as lost:
            return self._find_launched(name, lost)
        ids = _expect(data, dict, "the launch").get("instance_ids")
        if not isinstance(ids, list) or not ids or not all(isinstance(i, str) for i in ids):
            # It answered, so something may exist: the name finds it.
            return self._find_launched(name, ResponseLost(f"Lambda's answer to {what} named no instance"))
        if len(ids) > 1:  # one was asked for; never leave extras running
            self.terminate(ids[1:])
        return str(ids[0])

    def terminate(self, instance_ids: list[str]) -> list[dict[str, Any]]:
        """Terminate instances (an idempotent request: retried like a read). Instances already
        terminating or gone count as done."""
        what = f"terminating {', '.join(instance_ids)}"
        try:
            data = self._request("POST", "/instance-operations/terminate",
                                 {"instance_ids": list(instance_ids)}, what=what)
        except LambdaError as e:
            # A retried terminate whose first try got through finds its instances on the way out.
            if e.status < 500 and self._all_gone(instance_ids):
                return []
            raise
        done = _expect(data, dict, "the terminate").get("terminated_instances")
        return [i for i in done if isinstance(i, dict)] if isinstance(done, list) else []

    # internals

    def _all_gone(self, instance_ids: list[str]) -> bool:
        for iid in instance_ids:
            try:
                if self.instance(iid).get("status") not in GONE:
                    return False
            except LambdaError as e:
                if e.status != 404 and e.lambda_code != OBJECT_DOES_NOT_EXIST:
                    return False
            except MonteError:
                return False
        return True

    def _find_launched(self, name: str, lost: MonteError) -> str:
        """The launch's answer was lost: find the instance it may have made, by its unique name."""
        deadline = time.monotonic() + FIND_LAUNCHED_WAIT_S
        look = (f"run `monte box status`: if {name} is listed, `monte box down {name}` terminates "
                "it; then `monte box up` again")
        while True:
            try:
                found = [i for i in self.instances()
                         if i.get("name") == name and i.get("status") not in GONE
                         and isinstance(i.get("id"), str)]
            except MonteError as e:
                raise error("E_BOX", f"{lost.message}; looking for the instance it may have "
                            f"started ({name}) failed too: {e.message}", look) from None
            if found:
                if len(found) > 1:
                    self.terminate([i["id"] for i in found[1:]])
                iid: str = found[0]["id"]
                return iid
            if time.monotonic() >= deadline:
                raise error("E_BOX", f"{lost.message}, and no instance named {name} appeared "
                            f"within {FIND_LAUNCHED_WAIT_S:g} s", look)
            time.sleep(FIND_LAUNCHED_POLL_S)

    def _request(self, method: str, path: str, body: dict[str, Any] | None = None, *,
                 idempotent: bool = True, what: str) -> Any:
        """The ``data`` of Lambda's answer. Retries what is safe to retry (see the module doc)."""
        start = time.monotonic()
        attempt = 0
        offline = True  # every failure so far reached nothing
        while True:
            try:
                return self._send(method, path, body, what)
            except _Transient as t:
                if t.maybe_done and not idempotent:
                    raise ResponseLost(f"Lambda's API did not answer {what} ({t.why})",
                                       fix="run `monte box status` to see what is running") from None
                delay = t.retry_after if t.retry_after is not None else _backoff(attempt)
                delay = min(max(delay, 0.0), RETRY_MAX_SLEEP_S)
                attempt += 1
                offline = offline and t.no_network
                budget = NO_NETWORK_BUDGET_S if offline else RETRY_BUDGET_S
                spent = time.monotonic() - start
                if offline and spent + delay > budget:
                    raise error("E_BOX", f"could not reach Lambda's API at {self.base_url} {what}: the network "
                                f"failed ({t.why}; {attempt} tries in {spent:.0f} s)",
                                f"check the network connection (and any proxy), or {API_ENV} if it is set, "
                                "then run the command again") from None
                if spent + delay > budget:
                    raise error("E_BOX", f"Lambda's API kept failing {what}: {t.why} "
                                f"({attempt} tries in {spent:.0f} s)",
                                "try again in a few minutes; if it persists, check Lambda Cloud's "
                                "dashboard and status page") from None
                if attempt == 1:  # a wait is said, with its bound, before it starts (stderr: --json stays whole)
                    print(f"monte: Lambda's API did not answer {what} ({t.why}); trying again for up to "
                          f"{budget:g} s (Ctrl-C stops)", file=sys.stderr, flush=True)
                time.sleep(delay)

    def _send(self, method: str, path: str, body: dict[str, Any] | None, what: str) -> Any:
        data = None if body is None else json.dumps(body).encode()
        headers = {"Authorization": f"Bearer {self._key.reveal()}", "Accept": "application/json",
                   # urllib's default agent is refused by some front ends; say who we are
                   "User-Agent": f"monte/{__version__}"}
        if data is not None:
            headers["Content-Type"] = "application/json"
        req = urllib.request.Request(self.base_url + path, data=data, method=method, headers=headers)
        try:
            with urllib.request.urlopen(req, timeout=REQUEST_TIMEOUT_S) as resp:
                raw = resp.read(MAX_RESPONSE_BYTES + 1)
        except urllib.error.HTTPError as e:
            status = e.code
            retry_after = _retry_after(e.headers.get("Retry-After") if e.headers else None)
            try:
                raw = e.read(MAX_RESPONSE_BYTES + 1)
            except OSError:
                raw = b""
            finally:
                e.close()
            if status == 429:  # refused before doing anything
                raise _Transient("rate limited (HTTP 429)", maybe_done=False,
                                 retry_after=retry_after) from None
            if status >= 500:
                raise _Transient(f"HTTP {status}{_error_words(raw)}", maybe_done=True,
                                 retry_after=retry_after) from None
            raise self._refusal(status, raw, what) from None
        except urllib.error.URLError as e:
            reason = e.reason
            if isinstance(reason, ssl.SSLCertVerificationError):
                raise error("E_BOX", f"{what}: the TLS certificate of {self.base_url} did not verify",
                            f"check the network (a proxy?) or {API_ENV}") from None
            never_sent = isinstance(reason, ConnectionRefusedError | socket.gaierror) or (
                isinstance(reason, OSError) and reason.errno in (errno.ENETUNREACH, errno.EHOSTUNREACH))
            raise _Transient(_reason_words(reason), maybe_done=not never_sent, no_network=never_sent) from None
        except (OSError, ValueError, http.client.HTTPException) as e:  # timeouts, resets mid-body
            raise _Transient(f"{type(e).__name__}: {e}", maybe_done=True) from None
        try:
            doc = json.loads(raw) if len(raw) <= MAX_RESPONSE_BYTES else None
        except ValueError:
            doc = None
        if not isinstance(doc, dict) or "data" not in doc:
            raise error("E_BOX", f"Lambda's API answered {what} with something that is not its "
                        f"JSON ({len(raw)} bytes)", f"check {API_ENV} (now {self.base_url})")
        return doc["data"]

    def _refusal(self, status: int, raw: bytes, what: str) -> LambdaError:
        code, message, suggestion = _error_fields(raw)
        secret = self._key.reveal()

        def scrub(s: str) -> str:  # Lambda never echoes the key, but make sure
            return s.replace(secret, "***") if secret else s

        message, suggestion = scrub(message), scrub(suggestion)
        said = message or f"HTTP {status}"
        text = f"Lambda refused {what}: {said}" + (f" ({code})" if code else f" (HTTP {status})")
        if code == INVALID_API_KEY or (status in (401, 403) and not code):
            fix = (f"{suggestion} " if suggestion else "") + \
                f"(the key came from {self._key.source}); {_KEY_FIX}"
        elif code == QUOTA_EXCEEDED:
            fix = suggestion or ("terminate boxes you no longer need (`monte box status`, "
                                 "`monte box down`), or ask Lambda to raise the quota")
        else:
            fix = suggestion or "see `monte box status`, and Lambda Cloud's dashboard"
        return LambdaError(text, fix=fix, lambda_code=code, status=status)


# --- helpers -------------------------------------------------------------------------------------


def _reason_words(reason: object) -> str:
    """A connection failure in words: ``the name ... does not resolve``, ``connection refused``."""
    if isinstance(reason, socket.gaierror):
        return f"the host name does not resolve: {reason.strerror or reason}"
    if isinstance(reason, ConnectionRefusedError):
        return "the connection was refused"
    if isinstance(reason, OSError) and reason.errno in (errno.ENETUNREACH, errno.EHOSTUNREACH):
        return f"the network is unreachable ({reason.strerror})"
    return reason if isinstance(reason, str) else f"{type(reason).__name__}: {reason}"


def _backoff(attempt: int) -> float:
    """Exponential, with 'equal jitter': half fixed, half random, so clients spread out."""
    ceiling = min(RETRY_MAX_SLEEP_S, RETRY_BASE_S * (2 ** attempt))
    return float(ceiling / 2 + random.uniform(0, ceiling / 2))


def _retry_after(value: str | None) -> float | None:
    if not value:
        return None
    try:
        return float(value)
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - datetime.now(UTC)).total_seconds())


def _error_fields(raw: bytes) -> tuple[str, str, str]:
    try:
        doc = json.loads(raw)
    except ValueError:
        return "", "", ""
    err = doc.get("error") if isinstance(doc, dict) else None
    if not isinstance(err, dict):
        return "", "", ""

    def text(k: str) -> str:
        v = err.get(k)
        return " ".join(v.split())[:500] if isinstance(v, str) else ""

    return text("code"), text("message"), text("suggestion")


def _error_words(raw: bytes) -> str:
    code, message, _ = _error_fields(raw)
    said = ": ".join(x for x in (code, message) if x)
    return f" ({said})" if said else ""


def _expect(data: Any, kind: type[_T], what: str) -> _T:
    if not isinstance(data, kind):
        raise error("E_BOX", f"Lambda's API answered with {what} in a shape monte does not know",
                    "monte may need an update for a change in Lambda's API")
    return data


def _segment(instance_id: str) -> str:
    from urllib.parse import quote

    return quote(instance_id, safe="")
