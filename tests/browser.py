"""A real headless Chromium (Debian's ``chromium`` package) driven through Playwright's Python
package (its own browser download never used: ``executable_path``), for the pages monte writes.

The browser starts with a fresh profile and without its background traffic (no component
updates, no sync, no QUIC, no first-run pages), so the only request of a page that requests
nothing is the page itself; every request the browser makes is kept (``requests``), as is every
console message and page error (``console``, ``errors``).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

CHROMIUM = os.environ.get("MONTE_CHROMIUM", "/usr/bin/chromium")
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"]


def need_chromium() -> str:
    """The browser's path, or skip saying how to get it (the Makefile's test-deps installs it)."""
    path = CHROMIUM if os.access(CHROMIUM, os.X_OK) else shutil.which("chromium")
    if not path:
        pytest.skip(f"no Chromium at {CHROMIUM}: `make test-deps` installs Debian's chromium "
                    "(apt-get install chromium, as root)")
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        pytest.skip("the playwright package is missing: pip install -e '.[dev]'")
    return path


@dataclass
class Browser:
    page: Any
    requests: list[str] = field(default_factory=list)
    console: list[tuple[str, str]] = field(default_factory=list)  # (type, text)
    errors: list[str] = field(default_factory=list)

    def console_errors(self) -> list[str]:
        return [text for kind, text in self.console if kind == "error"] + self.errors


@contextmanager
def chromium(width: int = 1400, height: int = 1000) -> Iterator[Browser]:
    """One page in a fresh Chromium profile; every request, console message and page error kept."""
    path = need_chromium()
    from playwright.sync_api import sync_playwright

    profile = tempfile.mkdtemp(prefix="monte-chromium-")
    try:
        with sync_playwright() as p:
            ctx = p.chromium.launch_persistent_context(
                profile, executable_path=path, headless=True, args=FLAGS,
                viewport={"width": width, "height": height})
            try:
                page = ctx.pages[0] if ctx.pages else ctx.new_page()
                b = Browser(page)
                ctx.on("request", lambda r: b.requests.append(r.url))
                page.on("console", lambda m: b.console.append((m.type, m.text)))
                page.on("pageerror", lambda e: b.errors.append(str(e)))
                yield b
            finally:
                ctx.close()
    finally:
        shutil.rmtree(profile, ignore_errors=True)


def open_file(b: Browser, path: Path) -> str:
    """Open a local file; its URL."""
    url = path.resolve().as_uri()
    b.page.goto(url, wait_until="load")
    return url
