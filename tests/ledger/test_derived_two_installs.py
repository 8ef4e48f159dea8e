"""Issue 26, case 6: one repository, two installs, one derivation.

``monte status``'s derived cache (:mod:`monte.ledger.derived`) holds, per row, the row already
serialized by orjson where orjson is installed, and nothing where it is not. A cache the full
install wrote used to fail ``monte ledger verify --all`` under the light install (what CI and the
pre-commit hook run), and the reverse: ``[cache] ... entr(ies) that are not what the index
derives``. Now the cache is keyed by what derived it (:func:`monte.status.facts_version`): the
other install derives again, and verify never calls it forged.

The light install is real: a fresh virtualenv holding only monte's core dependencies (dulwich,
click, pydantic, ruamel.yaml, rich and what they need, linked from this environment: nothing is
fetched), with this checkout on its path; orjson is not there, and the test proves it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from monte.ledger import derived
from tests.support.helpers import append_evals

CORE = ("dulwich", "urllib3", "click", "pydantic", "pydantic_core", "annotated_types", "typing_extensions.py",
        "typing_inspection", "ruamel", "rich", "markdown_it", "mdurl", "pygments")
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def light_python(tmp_path_factory: pytest.TempPathFactory) -> Path:
    import site

    venv = tmp_path_factory.mktemp("light") / "venv"
    subprocess.run([getattr(sys, "_base_executable", sys.executable), "-m", "venv", "--without-pip", str(venv)],
                   check=True)
    here = Path(site.getsitepackages()[0])
    (there,) = (venv / "lib").glob("python*/site-packages")
    for name in CORE:
        (there / name).symlink_to(here / name)
        for info in here.glob(f"{name.removesuffix('.py').replace('_', '?')}-*.dist-info"):
            (there / info.name).symlink_to(info)
    python = venv / "bin" / "python"
    probe = subprocess.run([str(python), "-c", "import orjson"], capture_output=True, env=_env())
    assert probe.returncode != 0  # the light install has no orjson
    return python


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT)}


def _monte(python: str | Path, repo: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(python), "-c", "from monte.cli.main import main; main()", *args], cwd=repo,
                          capture_output=True, text=True, env=_env(), timeout=300)


@pytest.mark.parametrize("writer", ["full", "light"])
def test_a_cache_one_install_wrote_verifies_under_the_other(repo: Path, monte, light_python: Path,
                                                            writer: str) -> None:
    assert monte("env", "add", "--benchmark", "parity").code == 0
    assert monte("experiment", "init", "exp", "--eval", "parity").code == 0
    append_evals(repo, 3)
    first, second = (sys.executable, light_python) if writer == "full" else (light_python, sys.executable)
    r = _monte(first, repo, "status", "--json")
    assert r.returncode == 0, r.stderr
    assert derived.cache_path(repo / ".git", "exp", "status").exists()
    rows = {}
    for python in (second, first, second):
        r = _monte(python, repo, "ledger", "verify", "--all", "--json")
        assert r.returncode == 0 and json.loads(r.stdout)["ok"] is True, r.stdout + r.stderr
        s = _monte(python, repo, "status", "--json")  # each derives what it can, and writes its own
        assert s.returncode == 0, s.stderr
        rows[str(python)] = json.loads(s.stdout)["rows"]
    assert rows[str(first)] == rows[str(second)]  # the same status, whichever install reads it
