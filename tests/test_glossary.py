"""docs/glossary.md: one meaning per word monte uses. Each term the vocabulary names has its entry,
each entry is a term used in the rest of the documentation (a glossary of words nobody reads is
dead text), and the entries are in order, so a reader finds one."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
GLOSSARY = ROOT / "docs" / "glossary.md"
TERMS = ("cohort", "seal", "test read", "baseline", "claim", "nomination", "chunk", "cycle", "strike", "floor",
         "fact", "fold", "view", "let in", "adopt", "smoke", "admissible")


def entries(text: str) -> list[str]:
    return re.findall(r"^\*\*([a-z ]+)\*\*:", text, flags=re.M)


def test_every_term_has_one_entry_in_order() -> None:
    found = entries(GLOSSARY.read_text(encoding="utf-8"))
    assert sorted(found) == sorted(TERMS)
    assert found == sorted(found)  # alphabetical: a reader finds a word without reading them all


def test_every_term_is_used_in_the_docs() -> None:
    others = " ".join(p.read_text(encoding="utf-8").lower() for p in [ROOT / "README.md", *(ROOT / "docs").rglob("*.md")]
                      if p != GLOSSARY)
    unused = [t for t in TERMS if not re.search(rf"\b{t}", others)]
    assert unused == []


def test_the_check_catches_a_missing_entry(tmp_path: Path) -> None:
    text = GLOSSARY.read_text(encoding="utf-8").replace("**strike**:", "strike:")
    assert "strike" not in entries(text) and len(entries(text)) == len(TERMS) - 1
