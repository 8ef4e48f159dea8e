"""Where the Vault and the results bucket are: named once per repository.

``monte config set vault URL`` / ``monte config set bucket URL`` store them in ``.monte.yaml``
(committed, so every clone and box agrees); ``MONTE_VAULT`` / ``MONTE_BUCKET`` override them for
one shell; ``--bucket`` on push/sync overrides both. A URL is ``gs://bucket[/prefix]`` or a local
folder (relative paths are relative to the repository root). The Vault is also written into
``.dvc/config`` as the DVC remote ``vault`` (the default remote), so ``dvc`` itself sees it.
"""

from __future__ import annotations

import io
import os
from pathlib import Path

from monte.errors import error, in_words
from monte.workspace import CONFIG_FILE, Workspace

SETTINGS = {"vault": "MONTE_VAULT", "bucket": "MONTE_BUCKET"}


def normalise_url(url: str, repo_root: Path) -> str:
    url = url.strip()
    if not url:
        raise error("E_USAGE", "the URL is empty", "write gs://BUCKET[/PREFIX] or a folder path")
    if any(ord(c) < 32 or ord(c) == 127 for c in url) or not _encodable(url):
        raise error("E_USAGE", f"{url!r} holds control characters or bytes that are not text",
                    "write gs://BUCKET[/PREFIX] or a folder path")
    if url.startswith("gs://"):
        bucket = url[5:].split("/", 1)[0]
        if not bucket:
            raise error("E_USAGE", f"{url!r} names no bucket", "write gs://BUCKET[/PREFIX]")
        return url.rstrip("/")
    if "://" in url and not url.startswith("file://"):
        raise error("E_USAGE", f"{url!r}: only gs:// URLs and local folders are supported",
                    "write gs://BUCKET[/PREFIX] or a folder path")
    # os.path.expanduser leaves ~nosuchuser as typed (Path.expanduser raises RuntimeError)
    path = Path(os.path.expanduser(url[7:] if url.startswith("file://") else url))
    return str(path if path.is_absolute() else (repo_root / path).resolve())


def _encodable(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:  # lone surrogates: argv bytes that were not UTF-8
        return False
    return True


def url_for(ws: Workspace, setting: str, override: str | None = None) -> str | None:
    """The configured URL (``override`` > environment variable > ``.monte.yaml``), or None."""
    raw = override or os.environ.get(SETTINGS[setting]) or ws.config.get(setting)
    if not raw:
        return None
    if not isinstance(raw, str):
        raise error("E_BAD_INPUT", f"{CONFIG_FILE}: {setting} must be a URL string",
                    f"fix it with `monte config set {setting} URL`")
    return normalise_url(raw, ws.repo_root)


def require_url(ws: Workspace, setting: str, override: str | None = None, *, flag: str | None = None) -> str:
    """The configured URL, or a refusal naming how to set it; ``flag``: the caller's own option
    that overrides it (``push``/``sync``'s ``--bucket``), named only where the command has it."""
    url = url_for(ws, setting, override)
    if url is None:
        noun = "Vault" if setting == "vault" else "results bucket"
        extra = f", or pass {flag} B" if flag else ""
        raise error("E_STORAGE", f"no {noun} is configured for this repository",
                    f"name it once with `monte config set {setting} gs://BUCKET/PREFIX` (or a folder), "
                    f"or set {SETTINGS[setting]}{extra}")
    return url


def set_url(ws: Workspace, setting: str, url: str) -> tuple[str, str]:
    """Store ``url`` in ``.monte.yaml`` (comments kept); the Vault also in ``.dvc/config``.
    Returns the stored URL and a note. The Vault must be reachable first: a folder that exists,
    a bucket that answers when a key resolves."""
    from ruamel.yaml import YAML
    from ruamel.yaml.error import YAMLError

    if setting not in SETTINGS:
        raise error("E_USAGE", f"unknown setting {setting!r}", f"settable: {', '.join(SETTINGS)}")
    value = normalise_url(url, ws.repo_root)
    if setting == "vault" and not value.isascii():  # refused before either file is touched
        raise error("E_USAGE", f"the Vault {value!r} has non-ASCII characters, which DVC's config file "
                    "(.dvc/config, where the Vault is DVC's remote) cannot hold",
                    "put the Vault in a folder (or bucket) whose path is plain ASCII")
    path = ws.repo_root / CONFIG_FILE
    yaml = YAML()  # round-trip: the file's comments survive
    # Everything that can refuse runs before either file is written: the new text is made in
    # memory, DVC validates its remote (and writes .dvc/config), then .monte.yaml is replaced.
    try:
        data = yaml.load(path.read_bytes().decode("utf-8")) if path.exists() else None
        if data is None:
            data = {}
        if not isinstance(data, dict):
            raise error("E_BAD_INPUT", f"{path} must hold a mapping", f"fix or delete {path}")
        data[setting] = value
        text = io.StringIO()
        yaml.dump(data, text)
    except (YAMLError, UnicodeDecodeError, RecursionError) as e:
        raise error("E_BAD_INPUT", f"{path} cannot be updated ({type(e).__name__})", f"fix or delete {path}") from None
    note = ""
    if setting == "vault":
        note = check_vault(value)
        try:
            _dvc_remote(ws.repo_root, value)
        except Exception as e:  # noqa: BLE001 - DVC's ConfigError and its kin: DVC refuses the URL
            raise error("E_USAGE", f"DVC refuses {value!r} as its remote 'vault': {in_words(e)}",
                        "write gs://BUCKET[/PREFIX] or a folder path") from None
    tmp = path.with_suffix(".yaml.tmp")
    tmp.write_text(text.getvalue(), encoding="utf-8")
    os.replace(tmp, path)
    ws.config[setting] = value
    return value, note


def check_vault(url: str) -> str:
    """Refuse a Vault that cannot be reached, before anything is written: a folder that is not
    there (it is not made here: a typo would leave a stray folder), a bucket that does not exist
    or does not answer when a key resolves. Returns a note (what was not checked, and why)."""
    if url.startswith("gs://"):
        from monte.storage.keys import read_key, write_key
        from monte.storage.object_stores import open_store

        key = read_key() or write_key()
        if key is None:
            return (f"not checked: no GCS key resolved to reach {url} (MONTE_GCS_KEY_FILE, "
                    "MONTE_GCS_KEY_OP, or the write ladder's MONTE_GCS_BOX_KEY_*)")
        open_store(url, key, what="the Vault").check()  # E_STORAGE: no such bucket, no answer
        return ""
    folder = Path(url)
    fix = f"create the folder (mkdir -p {folder}) or fix the path, then run `monte config set vault` again"
    if os.path.lexists(folder) and not folder.is_dir():
        raise error("E_STORAGE", f"the Vault {folder} exists but is not a folder", fix)
    if not folder.is_dir():  # False on any OSError (a name too long, a component that is a file)
        raise error("E_STORAGE", f"the Vault folder {folder} does not exist; nothing was written", fix)
    return ""


def _dvc_remote(repo_root: Path, url: str) -> None:
    """Name the Vault as DVC's default remote ``vault`` in ``.dvc/config``."""
    from dvc.config import Config

    if not (repo_root / ".dvc").is_dir():
        return
    config = Config(dvc_dir=str(repo_root / ".dvc"), validate=False)
    with config.edit("repo") as conf:
        conf.setdefault("remote", {})["vault"] = {"url": url}
        conf.setdefault("core", {})["remote"] = "vault"
