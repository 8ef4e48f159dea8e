"""What a record's commit says besides its tree: the message (one summary line, then
``Monte-*`` trailers) and who made it, when (git's environment and config, as git reads them)."""

from __future__ import annotations

import os
import time
from collections.abc import Mapping

from dulwich.repo import Repo


def format_message(summary: str, trailers: Mapping[str, str]) -> str:
    summary = " ".join(summary.split())  # one line, always
    if not trailers:
        return summary + "\n"
    lines = [f"{k}: {' '.join(str(v).split())}" for k, v in trailers.items()]
    return summary + "\n\n" + "\n".join(lines) + "\n"


def parse_trailers(message: bytes | str) -> dict[str, str]:
    text = message.decode() if isinstance(message, bytes) else message
    paragraphs = text.strip().split("\n\n")
    if len(paragraphs) < 2:
        return {}
    out = {}
    for line in paragraphs[-1].splitlines():
        key, sep, value = line.partition(": ")
        if sep and key.startswith("Monte-"):
            out[key] = value
    return out


def commit_identity(repo: Repo, user: tuple[str | None, str | None] | None = None) -> tuple[bytes, int, int]:
    """Who and when. Honours GIT_COMMITTER_NAME/EMAIL/DATE (epoch seconds) like git does, so
    tests can pin commit ids; else the repo's user.name/user.email (``user``, when the caller has
    read them already: :func:`config_user`); else ``monte``."""
    name = os.environ.get("GIT_COMMITTER_NAME")
    email = os.environ.get("GIT_COMMITTER_EMAIL")
    if not (name and email):
        cfg_name, cfg_email = user if user is not None else config_user(repo)
        name = name or cfg_name
        email = email or cfg_email
    who = f"{name or 'monte'} <{email or 'monte@localhost'}>".encode()
    date = os.environ.get("GIT_COMMITTER_DATE", "")
    when = int(time.time())
    if date:
        first = date.lstrip("@").split()[0]
        if first.isdigit():
            when = int(first)
    return who, when, 0


def config_user(repo: Repo) -> tuple[str | None, str | None]:
    """The repository's ``user.name`` and ``user.email`` (git's config stack), or None each."""
    cfg = repo.get_config_stack()
    out: list[str | None] = []
    for key in (b"name", b"email"):
        try:
            out.append(cfg.get((b"user",), key).decode())
        except KeyError:
            out.append(None)
    return out[0], out[1]
