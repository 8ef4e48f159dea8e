"""Object stores under the Vault and the results bucket: GCS (``gs://bucket/prefix``) or a local
folder, behind one small interface.

What monte needs from a store is four things beyond get/put: a **create-only** write (name claims,
immutable packs), a **compare-and-swap** on an object's generation (the bucket's ref documents), a
listing with content hashes (push uploads new and changed files only), and clear errors.

- GCS: create-only is ``ifGenerationMatch=0`` and compare-and-swap is ``ifGenerationMatch=<gen>``,
  GCS's own preconditions. The ``gcp-storage-emulator`` the tests run against accepts and
  *ignores* ``ifGenerationMatch`` (``tests/storage/test_objects.py`` shows it), so on a server
  found to ignore it (probed once, only when ``STORAGE_EMULATOR_HOST`` is set) monte uses the
  closest real mechanism that server has: unique, never-overwritten claim objects and a strongly
  consistent listing — the claim with the lowest generation wins (the emulator serves one request
  at a time and stamps generations from its clock, so that order is the write order). A swap on
  such a server holds a lock built from the same claims.
- A local folder: create-only is ``link(2)`` of a fully written temporary file (atomic, fails if
  the name exists), compare-and-swap holds ``flock(2)`` on a lock file while it compares the
  object's generation (inode and mtime) and renames the new bytes into place.

Keys: a GCS store needs a :class:`~monte.storage.keys.Key` (against an emulator any resolvable
key is accepted and requests go unauthenticated, as the emulator has no IAM). A local folder needs
none: its file permissions are its key.
"""

from __future__ import annotations

import base64
import contextlib
import fcntl
import hashlib
import os
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from monte.errors import MonteError, error, in_words, is_network_failure

_CLAIM_STALE_S = 60.0
#: how long a writer waits for a claim lock before it reads the store's clock to age the others'
_CLAIM_CLOCK_AFTER_S = 2.0


@dataclass(frozen=True)
class Stat:
    generation: str
    size: int
    md5: str  # hex


def is_gcs(url: str) -> bool:
    return url.startswith("gs://")


def open_store(url: str, key: Any = None, *, what: str = "the bucket") -> ObjectStore:
    """The store at ``url``: ``gs://bucket[/prefix]`` or a local folder path."""
    if is_gcs(url):
        bucket, _, prefix = url[len("gs://"):].partition("/")
        if not bucket:
            raise error("E_USAGE", f"{url!r} names no bucket", "write gs://BUCKET[/PREFIX]")
        if key is None:
            raise error("E_STORAGE", f"no GCS key resolved for {what} ({url})",
                        "set MONTE_GCS_KEY_FILE or MONTE_GCS_KEY_OP (writes: MONTE_GCS_BOX_KEY_FILE or "
                        "MONTE_GCS_BOX_KEY_OP)")  # push/sync's --key-file is named by their own refusal
        return GcsStore(bucket, prefix.strip("/"), key, what=what)
    path = Path(os.path.expanduser(url[len("file://"):] if url.startswith("file://") else url))
    return LocalStore(path, what=what)


class ObjectStore:
    url: str
    what: str

    def get(self, name: str) -> bytes | None:
        raise NotImplementedError

    def get_with_generation(self, name: str) -> tuple[bytes, str] | None:
        raise NotImplementedError

    def stat(self, name: str) -> Stat | None:
        raise NotImplementedError

    def put(self, name: str, data: bytes) -> None:
        raise NotImplementedError

    def create(self, name: str, data: bytes) -> bool:
        """Write ``name`` only if it does not exist; False when it already does."""
        raise NotImplementedError

    def swap(self, name: str, data: bytes, generation: str | None) -> bool:
        """Replace ``name`` only if it is still at ``generation`` (None: only if absent)."""
        raise NotImplementedError

    def list(self, prefix: str) -> dict[str, Stat]:
        raise NotImplementedError

    def delete(self, name: str) -> None:
        raise NotImplementedError

    def check(self) -> None:
        """Refuse clearly when the bucket or folder itself is missing."""
        raise NotImplementedError

    def can_write(self) -> bool:
        """The write probe: create and delete one small object. False when the key is read-only."""
        name = f"monte/.probe/{uuid.uuid4().hex}"
        try:
            self.put(name, b"probe\n")
        except MonteError as e:
            if getattr(e, "forbidden", False):
                return False
            raise
        with contextlib.suppress(MonteError):
            self.delete(name)
        return True


def _md5(data: bytes) -> str:
    return hashlib.md5(data, usedforsecurity=False).hexdigest()


def md5_file(path: Path) -> str:
    h = hashlib.md5(usedforsecurity=False)
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _storage_error(store: ObjectStore, message: str, fix: str, *, forbidden: bool = False) -> MonteError:
    e = error("E_STORAGE", message, fix)
    e.forbidden = forbidden  # type: ignore[attr-defined]
    return e


# --- a local folder ----------------------------------------------------------------------------


class LocalStore(ObjectStore):
    def __init__(self, root: Path, *, what: str = "the bucket") -> None:
        self.root = root
        self.url = str(root)
        self.what = what

    def check(self) -> None:
        if not os.path.isdir(self.root):  # False on any OSError (a name too long, too), not a raise
            raise _storage_error(self, f"{self.what} {self.root} does not exist",
                                 f"create the folder (mkdir -p {self.root}) or fix the URL with `monte config set`")

    def _path(self, name: str) -> Path:
        parts = name.split("/")
        if not name or any(p in ("", ".", "..") for p in parts) or name.startswith("/"):
            raise error("E_UNSAFE_PATH", f"object name {name!r} is not a plain relative path",
                        "this is a bug in monte or a tampered listing")
        return self.root.joinpath(*parts)

    def _wrap(self, op: str, name: str, e: OSError) -> MonteError:
        forbidden = isinstance(e, PermissionError) or e.errno in (13, 30)  # EACCES, EROFS
        return _storage_error(self, f"{self.what} {self.root}: cannot {op} {name}: {e.strerror}",
                              "check the folder's permissions and free space" if not forbidden else
                              f"this machine cannot write {self.root}; use a writable folder",
                              forbidden=forbidden)

    @staticmethod
    def _gen(st: os.stat_result) -> str:
        return f"{st.st_ino}.{st.st_mtime_ns}"

    def get(self, name: str) -> bytes | None:
        got = self.get_with_generation(name)
        return got[0] if got else None

    def get_with_generation(self, name: str) -> tuple[bytes, str] | None:
        self.check()
        path = self._path(name)
        try:
            with open(path, "rb") as f:
                return f.read(), self._gen(os.fstat(f.fileno()))
        except FileNotFoundError:
            return None
        except OSError as e:
            raise self._wrap("read", name, e) from None

    def stat(self, name: str) -> Stat | None:
        path = self._path(name)
        try:
            st = path.stat()
        except FileNotFoundError:
            return None
        return Stat(self._gen(st), st.st_size, md5_file(path))

    def _temp(self, path: Path, data: bytes) -> Path:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.parent / f".{path.name}.{uuid.uuid4().hex[:12]}.tmp"
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        return tmp

    def put(self, name: str, data: bytes) -> None:
        self.check()
        path = self._path(name)
        try:
            tmp = self._temp(path, data)
            os.replace(tmp, path)
        except OSError as e:
            raise self._wrap("write", name, e) from None

    def create(self, name: str, data: bytes) -> bool:
        self.check()
        path = self._path(name)
        tmp = None
        try:
            tmp = self._temp(path, data)
            os.link(tmp, path)
            return True
        except FileExistsError:
            return False
        except OSError as e:
            raise self._wrap("write", name, e) from None
        finally:
            if tmp is not None:
                tmp.unlink(missing_ok=True)

    def swap(self, name: str, data: bytes, generation: str | None) -> bool:
        self.check()
        path = self._path(name)
        lock = path.parent / f".{path.name}.lock"
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(lock, os.O_CREAT | os.O_RDWR, 0o644)
        except OSError as e:
            raise self._wrap("lock", name, e) from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            try:
                current: str | None = self._gen(path.stat())
            except FileNotFoundError:
                current = None
            if current != generation:
                return False
            tmp = self._temp(path, data)
            os.replace(tmp, path)
            return True
        except OSError as e:
            raise self._wrap("write", name, e) from None
        finally:
            os.close(fd)

    def list(self, prefix: str) -> dict[str, Stat]:
        self.check()
        base = self.root
        out: dict[str, Stat] = {}
        start = base / prefix if prefix else base
        folder = start if start.is_dir() else start.parent
        if not folder.is_dir():
            return out
        for dirpath, _dirs, files in os.walk(folder):
            for f in files:
                if f.startswith("."):
                    continue  # temporaries and locks
                p = Path(dirpath) / f
                rel = p.relative_to(base).as_posix()
                if rel.startswith(prefix):
                    st = p.stat()
                    out[rel] = Stat(self._gen(st), st.st_size, md5_file(p))
        return out

    def delete(self, name: str) -> None:
        try:
            self._path(name).unlink(missing_ok=True)
        except OSError as e:
            raise self._wrap("delete", name, e) from None


# --- Google Cloud Storage ----------------------------------------------------------------------


def emulator_host() -> str | None:
    host = os.environ.get("STORAGE_EMULATOR_HOST", "").strip()
    if not host:
        return None
    return host if "://" in host else f"http://{host}"


def _retry() -> Any:
    from google.api_core.retry import Retry
    from google.cloud.storage.retry import DEFAULT_RETRY

    deadline = float(os.environ.get("MONTE_GCS_RETRY_S", "30"))
    return DEFAULT_RETRY.with_timeout(deadline) if isinstance(DEFAULT_RETRY, Retry) else DEFAULT_RETRY


class GcsStore(ObjectStore):
    _no_preconditions: dict[str, bool] = {}  # per emulator host, probed once per process

    def __init__(self, bucket: str, prefix: str, key: Any, *, what: str = "the bucket") -> None:
        self.bucket_name = bucket
        self.prefix = prefix
        self.url = f"gs://{bucket}" + (f"/{prefix}" if prefix else "")
        self.what = what
        self.key = key
        self._client: Any = None
        self._bucket: Any = None
        self._checked = False

    # plumbing

    def _b(self) -> Any:
        if self._bucket is None:
            self._client = gcs_client(self.key)
            self._bucket = self._client.bucket(self.bucket_name)
        return self._bucket

    def _name(self, name: str) -> str:
        return f"{self.prefix}/{name}" if self.prefix else name

    def _wrap(self, op: str, name: str, e: Exception) -> MonteError:
        from google.api_core import exceptions as gx

        source = getattr(self.key, "source", "the key")
        if isinstance(e, gx.NotFound):
            return _storage_error(self, f"{self.what} {self.url}: the bucket does not exist (while trying to {op} {name})",
                                  f"create gs://{self.bucket_name} or fix the URL (`monte config set`)")
        if isinstance(e, gx.Forbidden | gx.Unauthorized):
            return _storage_error(self, f"{self.what} {self.url}: the key from {source} may not {op} {name}",
                                  "use a key with access (writes: MONTE_GCS_BOX_KEY_FILE or MONTE_GCS_BOX_KEY_OP)",
                                  forbidden=True)
        if is_network_failure(e):  # urllib3's pool and retry prose names neither the reason nor the fix
            return _storage_error(self, f"{self.what} {self.url}: could not {op} {name}: {in_words(e)}",
                                  "check the network connection (and any proxy), then run the command again; "
                                  "nothing was lost")
        return _storage_error(self, f"{self.what} {self.url}: could not {op} {name}: {in_words(e)}",
                              "check the connection and retry; nothing was lost")

    def _call(self, op: str, name: str, fn: Any) -> Any:
        try:
            return fn()
        except MonteError:
            raise
        except Exception as e:  # google.api_core, requests and urllib3 errors alike
            from google.api_core import exceptions as gx

            if isinstance(e, gx.PreconditionFailed):
                raise
            raise self._wrap(op, name, e) from None

    def check(self) -> None:
        if self._checked:
            return
        from google.api_core import exceptions as gx

        try:
            self._b().reload(timeout=30, retry=_retry())
        except gx.Forbidden:
            pass  # an object-only key may not read bucket metadata; the object calls will tell
        except Exception as e:
            raise self._wrap("open", "the bucket", e) from None
        self._checked = True

    # reads

    def get(self, name: str) -> bytes | None:
        got = self.get_with_generation(name)
        return got[0] if got else None

    def get_with_generation(self, name: str) -> tuple[bytes, str] | None:
        from google.api_core import exceptions as gx

        self.check()
        blob = self._call("read", name, lambda: self._b().get_blob(self._name(name), timeout=30, retry=_retry()))
        if blob is None:
            return None
        generation = blob.generation  # a download may reset it from headers the emulator omits
        try:  # pinned to the generation just read, so bytes and generation agree
            data = blob.download_as_bytes(if_generation_match=generation, timeout=60, retry=_retry())
        except gx.NotFound:
            return None
        except Exception as e:
            raise self._wrap("read", name, e) from None
        return data, str(generation)

    def stat(self, name: str) -> Stat | None:
        self.check()
        blob = self._call("read", name, lambda: self._b().get_blob(self._name(name), timeout=30, retry=_retry()))
        return _stat(blob) if blob is not None else None

    def list(self, prefix: str) -> dict[str, Stat]:
        self.check()
        full = self._name(prefix)
        cut = len(self.prefix) + 1 if self.prefix else 0

        def go() -> dict[str, Stat]:
            return {b.name[cut:]: _stat(b) for b in self._client.list_blobs(
                self.bucket_name, prefix=full, timeout=60, retry=_retry())}

        self._b()
        return self._call("list", prefix or "/", go)  # type: ignore[no-any-return]

    # writes

    def put(self, name: str, data: bytes) -> None:
        self.check()
        blob = self._b().blob(self._name(name))
        self._call("write", name, lambda: blob.upload_from_string(data, timeout=120, retry=_retry()))

    def delete(self, name: str) -> None:
        from google.api_core import exceptions as gx

        blob = self._b().blob(self._name(name))
        try:
            blob.delete(timeout=30, retry=_retry())
        except gx.NotFound:
            pass
        except Exception as e:
            raise self._wrap("delete", name, e) from None

    def _honours_preconditions(self) -> bool:
        host = emulator_host()
        if host is None:
            return True  # real GCS
        if host not in self._no_preconditions:
            probe = f"monte/.probe/precondition-{uuid.uuid4().hex}"
            self.put(probe, b"1")
            ignored = self._precondition_write(probe, b"2", 0)
            self.delete(probe)
            GcsStore._no_preconditions[host] = ignored
        return not self._no_preconditions[host]

    def _precondition_write(self, name: str, data: bytes, generation: int) -> bool:
        from google.api_core import exceptions as gx

        blob = self._b().blob(self._name(name))
        try:
            # A conditional write is safe to retry: a replay fails the precondition.
            blob.upload_from_string(data, if_generation_match=generation, timeout=120, retry=_retry())
        except gx.PreconditionFailed:
            return False
        except Exception as e:
            raise self._wrap("write", name, e) from None
        return True

    def create(self, name: str, data: bytes) -> bool:
        self.check()
        if self._honours_preconditions():
            return self._precondition_write(name, data, 0)
        with self._claim_lock(name):
            if self.stat(name) is not None:
                return False
            self.put(name, data)
            return True

    def swap(self, name: str, data: bytes, generation: str | None) -> bool:
        self.check()
        if self._honours_preconditions():
            return self._precondition_write(name, data, int(generation) if generation else 0)
        with self._claim_lock(name):
            st = self.stat(name)
            if (st.generation if st else None) != generation:
                return False
            self.put(name, data)
            return True

    @contextlib.contextmanager
    def _claim_lock(self, name: str) -> Iterator[None]:
        """A lock for servers that ignore preconditions: write a unique claim object, list the
        claims, and hold the lock when ours has the lowest (generation, name) among the fresh
        ones. Claims are never overwritten, so no precondition is needed; a holder that died
        leaves a claim that goes stale after a minute."""
        folder = f"monte/.locks/{hashlib.sha256(name.encode()).hexdigest()[:32]}/"
        mine = folder + uuid.uuid4().hex
        self.put(mine, b"")
        try:
            start = time.monotonic()
            deadline = start + 120
            now: int | None = None  # the store's clock, read while waiting (generations are its timestamps)
            while True:
                claims = {n: int(s.generation) for n, s in self.list(folder).items()}
                ref = max(claims.get(mine, max(claims.values(), default=0)), now or 0)
                unit = 1e9 if ref > 1e17 else 1e6  # the emulator stamps nanoseconds, GCS microseconds
                # our own claim is never stale to us; another's is once the store's clock passed it by
                # a minute (measured against our claim alone, a holder that died just before we came
                # would stay fresh for as long as we waited)
                fresh = sorted((g, n) for n, g in claims.items() if n == mine or ref - g < _CLAIM_STALE_S * unit)
                if fresh and fresh[0][1] == mine:
                    break
                if time.monotonic() > deadline:
                    raise _storage_error(self, f"{self.what} {self.url}: could not take the lock on {name}",
                                         "another writer holds it; retry")
                time.sleep(0.02 + 0.05 * (uuid.uuid4().int % 100) / 100)
                if time.monotonic() - start > _CLAIM_CLOCK_AFTER_S:
                    now = self._clock()
            yield
        finally:
            self.delete(mine)

    def _clock(self) -> int | None:
        """The store's clock now: the generation of an empty object written and removed (beside the
        locks' folders, never in one: no writer takes it for a claim)."""
        probe = f"monte/.locks/clock/{uuid.uuid4().hex}"
        self.put(probe, b"")
        try:
            st = self.stat(probe)
            return int(st.generation) if st is not None else None
        finally:
            self.delete(probe)


def _stat(blob: Any) -> Stat:
    md5 = base64.b64decode(blob.md5_hash).hex() if blob.md5_hash else ""
    return Stat(str(blob.generation), int(blob.size or 0), md5)


def gcs_client(key: Any) -> Any:
    """A google-cloud-storage client for ``key`` (against an emulator: unauthenticated)."""
    from google.cloud import storage

    info = getattr(key, "info", None) or {}
    project = info.get("project_id") or info.get("quota_project_id") or "monte"
    if emulator_host():
        from google.auth.credentials import AnonymousCredentials

        return storage.Client(project=project, credentials=AnonymousCredentials())
    scopes = ["https://www.googleapis.com/auth/devstorage.read_write"]
    try:
        if info.get("type") == "authorized_user":
            from google.oauth2.credentials import Credentials as UserCredentials

            creds: Any = UserCredentials.from_authorized_user_info(info, scopes=scopes)
        else:
            from google.oauth2 import service_account

            creds = service_account.Credentials.from_service_account_info(info, scopes=scopes)
    except (ValueError, KeyError):
        raise error("E_STORAGE", f"the key from {getattr(key, 'source', 'the ladder')} is not a usable "
                    "GCS key", "use a service-account JSON key file") from None
    return storage.Client(project=project, credentials=creds)
