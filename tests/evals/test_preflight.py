"""Everything a read needs is proven before its ``started`` record (issue 29.5), and an
interrupted test read says what it spent (issue 29.6).

Each case was reproduced on the code before this file: from the light install, ``monte eval
--split test --yes`` wrote the ``started`` row and only then refused "needs 'torch'" (the row read
``failed baseline`` and the cohort could never take test@0 again); a base folder with the same
weights and a broken ``tokenizer.json`` spent test@0 the same way; Ctrl-C during a test read said
"run the command again" and SIGTERM "start a new run", though the read was spent and the next try
is E_SEALED.

The light install is real (a wheel of this checkout in a fresh virtualenv, its dependencies from
the package index: bench/light_install.py's way); the model and the broken tokenizer are real
files. The one stand-in is the generation step in the interrupt cases, wrapped to signal the
process at the right moment; the model itself still runs.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.support.helpers import monte_signalled, snapshot_state

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def light_python(light_install) -> Path:
    """The light install (``pip install monte``: no torch, transformers, TRL) of this checkout."""
    python: Path = light_install.python
    return python


def _light(python: Path, repo: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}  # the wheel's monte, nothing else
    return subprocess.run([str(python), "-m", "monte", *args], cwd=repo, capture_output=True, text=True,
                          env=env, timeout=300)


@pytest.mark.parametrize("split", ["test", "dev"])
def test_the_light_install_refuses_an_eval_before_it_spends_anything(repo: Path, monte, exp: str,
                                                                    light_python: Path, split: str) -> None:
    before = snapshot_state(repo)
    r = _light(light_python, repo, "eval", "--split", split, "--yes", "--json")
    err = json.loads(r.stdout)["error"]
    assert r.returncode == 4 and err["code"] == "E_NOT_FOUND", r.stdout + r.stderr
    assert "light install" in err["message"] and "pip install" in err["fix"]
    assert snapshot_state(repo) == before  # no started row: nothing spent
    r = monte("eval", "--split", split, "--yes", "--json")  # the full install: the read is still there
    assert r.code == 0, r.out
    assert r.json()["runs"][0]["status"] == "succeeded"


def _broken_copy(base_model: Path, dest: Path) -> Path:
    shutil.copytree(base_model, dest)
    (dest / "tokenizer.json").write_text('{"version": "1.0", "model": {"type": "BPE", "vocab": 5}}')
    return dest


@pytest.mark.parametrize("split", ["test", "dev"])
def test_a_broken_tokenizer_refuses_before_the_read_is_spent(repo: Path, monte, exp: str, base_model: Path,
                                                           tmp_path: Path, split: str) -> None:
    broken = _broken_copy(base_model, tmp_path / "same-weights")  # the same weights: the same cohort
    before = snapshot_state(repo)
    r = monte("eval", "--model", str(broken), "--split", split, "--yes", "--json")
    err = r.json()["error"]
    assert err["code"] == "E_NOT_FOUND" and "not a loadable model folder" in err["message"], r.out
    assert snapshot_state(repo) == before
    r = monte("eval", "--split", split, "--yes", "--json")
    assert r.code == 0, r.out
    row = r.json()["runs"][0]
    assert row["status"] == "succeeded" and (split == "dev" or row["role"] == "baseline")


@pytest.mark.parametrize(("sig", "code", "old_words"), [("SIGINT", "E_INTERRUPTED", "run the command again"),
                                                          ("SIGTERM", "E_STOPPED", "start a new run")])
def test_an_interrupted_test_read_says_it_was_spent(repo: Path, monte, exp: str, sig: str, code: str,
                                                    old_words: str) -> None:
    # the read itself is where the signal lands, not the preflight's one token
    r = monte_signalled(sig, "monte.models.generate:generate", "eval", "--split", "test", "--yes", "--json",
                        cwd=repo, when="k.get('max_new_tokens', 0) > 1")
    err = json.loads(r.stdout)["error"]
    assert err["code"] == code, r.stdout + r.stderr
    assert "spent test@0" in err["message"] and "E_SEALED" in err["message"], err
    assert old_words not in err["fix"] and "new cohort" in err["fix"], err
    again = monte("eval", "--split", "test", "--yes", "--json")  # what the words say: refused
    assert again.json()["error"]["code"] == "E_SEALED", again.out
