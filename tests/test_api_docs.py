"""The pages of the Python API: docs/api.md's loop runs as it is written, and
docs/environment-variables.md lists every ``MONTE_*`` variable the code reads."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
API_PAGE = ROOT / "docs" / "api.md"
ENV_PAGE = ROOT / "docs" / "environment-variables.md"
TOKEN = re.compile(r"\bMONTE_[A-Z0-9_]*")


def python_blocks(page: Path) -> list[str]:
    return re.findall(r"^```python\n(.*?)^```", page.read_text(encoding="utf-8"), re.M | re.S)


@pytest.mark.slow  # a tiny model trained and scored on CPU (about a minute)
def test_the_api_page_loop_runs_as_written(tmp_path: Path) -> None:
    blocks = python_blocks(API_PAGE)
    assert len(blocks) == 3 and "api.train(" in blocks[1] and "api.run_eval(plan" in blocks[1]
    r = subprocess.run([sys.executable, "-c", "\n".join(blocks)], cwd=tmp_path, capture_output=True, text=True,
                       timeout=900)
    assert r.returncode == 0, r.stderr[-3000:]
    out = r.stdout.splitlines()
    assert any(re.fullmatch(r"\w+@\d+: dev \d\.\d{3}, delta [+-]\d\.\d{3}", line) for line in out), out
    assert any(re.match(r"plan: eval \w+@\d+ of cohort ", line) for line in out), out  # the claim's plan, shown
    assert any(re.fullmatch(r"test \d\.\d{3} \(n=\d+\), paired delta [+-]\d\.\d{3}", line) for line in out), out
    roles = [line.split()[3] for line in out if re.match(r"\w+ eval parity/test ", line)]
    assert roles == ["baseline", "claim"], out  # the status rows: both test reads, and no third
    assert "test reads: 2 spent, 0 left" in out, out  # the brief, a result read by field
    assert out[-3] == "E_SEALED", out  # the third read refused: its code, what happened, the fix
    assert (tmp_path / "loop" / ".monte.yaml").is_file()


# --- every MONTE_* variable has its line ----------------------------------------------------------


def read_names(root: Path) -> dict[str, str]:
    """Each ``MONTE_*`` name in the package's code (string literals, docstrings aside; the hook
    scripts' lines, comments aside) -> where it is first seen. A name ending in ``_`` is a prefix
    (``MONTE_MODEL_<NAME>``); a bare ``MONTE_`` (every variable) names none."""
    found: dict[str, str] = {}
    for p in sorted(root.rglob("*")):
        if not p.is_file() or "__pycache__" in p.parts:
            continue
        text = p.read_text(encoding="utf-8", errors="replace")
        rel = p.relative_to(root.parent).as_posix()
        if p.suffix == ".py":
            tree = ast.parse(text)
            docs = {id(n.body[0].value) for n in ast.walk(tree)
                    if isinstance(n, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
                    and n.body and isinstance(n.body[0], ast.Expr) and isinstance(n.body[0].value, ast.Constant)}
            lines = [(n.lineno, n.value) for n in ast.walk(tree)
                     if isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in docs]
        elif p.suffix in ("", ".sh", ".yaml", ".yml", ".toml", ".txt"):
            lines = [(i, line) for i, line in enumerate(text.splitlines(), 1) if not line.lstrip().startswith("#")]
        else:
            continue
        for lineno, s in lines:
            for name in TOKEN.findall(s):
                if name != "MONTE_":
                    found.setdefault(name, f"{rel}:{lineno}")
    return found


def listed(page: Path) -> set[str]:
    """The names in the page's tables (a row's first cell); ``MONTE_MODEL_<NAME>`` lists a prefix."""
    return {m.replace("<NAME>", "") for m in re.findall(r"^\| `(MONTE_[A-Z0-9_<>]+)`", page.read_text(), re.M)}


def unlisted(found: dict[str, str], names: set[str]) -> list[str]:
    return sorted(f"{name} ({where})" for name, where in found.items()
                  if not (name in names or name.endswith("_") and any(n.startswith(name) for n in names)))


def test_every_monte_variable_the_code_reads_is_on_the_page() -> None:
    found = read_names(ROOT / "monte")
    assert {"MONTE_DATA_ROOT", "MONTE_HOOKS", "MONTE_MODEL_", "MONTE_LAMBDA_KEY"} <= set(found)
    assert unlisted(found, listed(ENV_PAGE)) == []


def test_the_page_lists_no_variable_the_code_does_not_read() -> None:
    found = read_names(ROOT / "monte")
    stale = sorted(n for n in listed(ENV_PAGE) if n not in found and not any(f.endswith("_") and n.startswith(f)
                                                                           for f in found))
    assert stale == []


def test_the_check_catches_a_planted_variable(tmp_path: Path) -> None:
    pkg = tmp_path / "monte"
    pkg.mkdir()
    (pkg / "knob.py").write_text('"""MONTE_IN_A_DOCSTRING is prose."""\nimport os\n\n'
                                 'WAIT = os.environ.get("MONTE_NEW_KNOB", "")\nKEYS = "MONTE_GCS_BOX_KEY_*"\n')
    (pkg / "hook").write_text('#!/bin/sh\n# MONTE_IN_A_COMMENT\n[ "$MONTE_HOOKS" = off ] && exit 0\n')
    found = read_names(pkg)
    assert set(found) == {"MONTE_NEW_KNOB", "MONTE_GCS_BOX_KEY_", "MONTE_HOOKS"}
    assert unlisted(found, listed(ENV_PAGE)) == ["MONTE_NEW_KNOB (monte/knob.py:4)"]
