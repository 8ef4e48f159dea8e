"""The documentation stands alone: the README is a short front door, every relative link in it and
in docs/ lands on a file of this repository (and a ``#fragment`` on a heading there), and nothing
in the repository points at notes outside it."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
PAGES = [README, *sorted((ROOT / "docs").rglob("*.md"))]

FENCE = re.compile(r"^(```|~~~).*?^\1[ \t]*$", re.M | re.S)
CODE_SPAN = re.compile(r"(`+)(?:(?!\1).)+?\1", re.S)
LINK = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
SCHEME = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:")


def _prose(text: str) -> str:
    """The text with fenced blocks and code spans blanked out (a link inside code is not a link)."""
    return CODE_SPAN.sub("", FENCE.sub("", text))


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = CODE_SPAN.sub(lambda m: m.group(0).strip("`"), heading.strip()).lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def _anchors(page: Path) -> set[str]:
    headings = re.findall(r"^#{1,6}\s+(.+?)\s*#*\s*$", FENCE.sub("", page.read_text(encoding="utf-8")), re.M)
    return {_slug(h) for h in headings}


def relative_links(page: Path) -> list[str]:
    return [t for t in LINK.findall(_prose(page.read_text(encoding="utf-8"))) if not SCHEME.match(t)]


def test_the_readme_is_a_front_door() -> None:
    size = len(README.read_bytes())
    assert size < 8192, f"README.md is {size} bytes; move reference text into a docs/ page and link it"


def test_every_relative_link_resolves_to_a_file_here() -> None:
    broken = []
    for page in PAGES:
        links = relative_links(page)
        for target in links:
            path, _, fragment = target.partition("#")
            dest = (page.parent / path).resolve() if path else page
            where = f"{page.relative_to(ROOT)}: ({target})"
            if not dest.is_relative_to(ROOT):
                broken.append(f"{where} points outside the repository")
            elif not dest.is_file():
                broken.append(f"{where} names no file")
            elif fragment and dest.suffix == ".md" and fragment not in _anchors(dest):
                broken.append(f"{where}: {dest.relative_to(ROOT)} has no heading #{fragment}")
    assert not broken, "\n".join(broken)
    assert any(relative_links(README)), "the README links no docs/ page"


def test_the_readme_links_every_docs_page() -> None:
    linked = {(README.parent / t.partition("#")[0]).resolve() for t in relative_links(README)}
    top = {p.resolve() for p in (ROOT / "docs").glob("*.md")}
    assert not top - linked, sorted(str(p.relative_to(ROOT)) for p in top - linked)


#: notes that live outside this repository: nothing here may send a reader to them
OUTSIDE = ("STATS.md", "DESIGN.md", "TRAINING-NOTES", "NEMO-GYM-NOTES", "STYLE.md", "../shared")
SKIP_DIRS = {"__pycache__", ".mypy_cache", ".ruff_cache", ".pytest_cache", ".hypothesis"}


def _files() -> list[Path]:
    files = [README]
    for top in ("monte", "docs", "tests", "bench"):
        files += [p for p in sorted((ROOT / top).rglob("*"))
                  if p.is_file() and not SKIP_DIRS & set(p.relative_to(ROOT).parts)]
    return [p for p in files if p.resolve() != Path(__file__).resolve()]


def test_nothing_points_at_notes_outside_the_repository() -> None:
    hits = []
    for path in _files():
        data = path.read_bytes()
        if b"\0" in data[:8192]:  # a binary file (a figure)
            continue
        for n, line in enumerate(data.decode("utf-8", "replace").splitlines(), 1):
            hits += [f"{path.relative_to(ROOT)}:{n}: {name}" for name in OUTSIDE if name in line]
    assert not hits, "say it here, or point at a page of docs/:\n" + "\n".join(hits)


#: pages that are a dated log of measurements: a section names the change it measured
LOGS = {"benchmarks.md"}


def test_the_pages_name_what_a_user_can_use() -> None:
    """Issue 46.6/13: the install line named a package no index serves (`pip install monte`), a
    page used a recipe that does not ship (`sft-small`), and the pages cited internal issue numbers."""
    import monte

    recipes = {p.stem for p in (Path(monte.__file__).parent / "recipes").glob("*.yaml")}
    for page in PAGES:
        text = page.read_text(encoding="utf-8")
        where = page.relative_to(ROOT)
        for name in re.findall(r"--recipe ([\w-]+)", text):
            assert name in recipes or name in ("R", "NAME", "my-recipe"), f"{where}: no recipe {name!r} ships"
        if page.name in LOGS:  # what was measured, as it was named then
            continue
        assert not re.search(r"pip install monte\b(?!\[)", text), f"{where}: no package index serves `monte`"
        assert not re.search(r"\bissues? \d", text, re.I), f"{where}: cites an internal issue number"
