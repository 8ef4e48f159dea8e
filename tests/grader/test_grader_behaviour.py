"""A new base's behavioural fingerprint, taken on the grader.

A base no record knows by its weights is known by how it behaves (``monte.models.fingerprint``:
one forward pass over fixed probes). Before this file, a test read through the grader took that
fingerprint in the agent's process: the client imported torch and loaded the model only for it,
which made the first test read of a cohort twice as slow through the grader as a local read
(``bench/grader_overhead.py``). Now the grader takes it, on the copy it hashed and will read, and
answers it before anything is spent; the client compares it with the recorded ones (arithmetic on
recorded numbers) and only then sends the go. A model that behaves as a recorded base is refused
there with nothing spent, on either side.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.support.grader import Setup

# the tests build on each other in order: under `-n 2 --dist loadgroup` the module runs whole on one worker
pytestmark = pytest.mark.xdist_group("test_grader_behaviour")

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
import fingerprint_corpus as corpus  # noqa: E402 - the benchmark's variants: one definition of each


def _bases(s: Setup) -> dict[str, Any]:
    from monte.ledger.lineage import known_bases
    from monte.workspace import open_workspace

    ws = open_workspace(s.repo, require_data_root=False)
    return {b.experiment: b for b in known_bases(ws.store)}


def _test_reads(s: Setup, experiment: str) -> list[dict[str, Any]]:
    from monte.ledger.experiment import Ledger
    from monte.workspace import open_workspace

    ws = open_workspace(s.repo, require_data_root=False)
    return [r.model_dump(mode="json") for r in Ledger(ws.store, experiment).rows() if r.split == "test"]


def _no_torch(s: Setup) -> str:
    """A folder whose ``torch`` refuses to import: on PYTHONPATH, the agent's process loads no model."""
    shim = s.agent.home / "no-torch"
    (shim / "torch").mkdir(parents=True, exist_ok=True)
    (shim / "torch" / "__init__.py").write_text(
        'raise ImportError("the client of a grader read loads no model (tests/grader/test_grader_behaviour.py)")\n')
    shutil.chown(shim, s.agent.name)
    shutil.chown(shim / "torch", s.agent.name)
    return str(shim)


def test_a_new_bases_fingerprint_is_taken_on_the_grader_and_the_client_loads_no_model(grader_setup: Setup) -> None:
    s = grader_setup
    s.agent_monte("experiment", "init", "behave", "--eval", "parity", "--model", "base-model", check=True)
    # the first record of the cohort is its test@0: the base is new, its behaviour unknown here
    r = s.agent_monte("eval", "-e", "behave", "--split", "test", "--yes", "--json", PYTHONPATH=_no_torch(s))
    assert r.returncode == 0, r.stderr
    row = json.loads(r.stdout)["runs"][0]
    assert s.grader_reads()[row["run"]]["statement"]["statement"]["score"] == row["score"]
    from monte.models.fingerprint import distance, fingerprint

    recorded = _bases(s)["behave"].fingerprint  # the grader's, on the copy it read: the one a local read takes
    assert recorded is not None and distance(recorded, fingerprint(s.repo / "base-model")) == 0.0
    assert not list((s.home / "weights").glob("*")), "the read's copy of the weights stays on the grader"
    s.agent_monte("ledger", "verify", "--all", check=True)


def test_a_copy_of_a_recorded_base_that_behaves_as_it_is_refused_with_nothing_spent(grader_setup: Setup) -> None:
    s = grader_setup
    copy = s.agent.home / "noised-base"
    shutil.copytree(s.repo / "base-model", copy)
    corpus.VARIANTS["noise 1%"](copy, s.repo / "base-model")  # other bytes, the same behaviour
    for p in [copy, *copy.rglob("*")]:
        shutil.chown(p, s.agent.name)
    s.agent_monte("experiment", "init", "behave2", "--eval", "parity", "--model", str(copy), check=True)
    plan = json.loads(s.agent_monte("eval", "-e", "behave2", "--split", "test", "--dry-run", "--json",
                                    check=True).stdout)["plan"]
    assert plan["behaviour_unchecked"] is True  # known by its behaviour only: the grader takes it
    before = s.grader_reads()
    r = s.agent_monte("eval", "-e", "behave2", "--split", "test", "--yes", "--json", PYTHONPATH=_no_torch(s))
    assert r.returncode == 3, r.stdout + r.stderr
    err = json.loads(r.stdout)["error"]
    assert err["code"] == "E_SEALED" and "behaves as the base model of cohort" in err["message"], err
    assert "nothing was spent" in err["message"] and "--model" in err["fix"]
    assert s.grader_reads() == before, "the grader recorded a read the client withdrew"
    assert not list((s.home / "weights").glob("*")), "a withdrawn read's weights stay on the grader"
    assert _test_reads(s, "behave2") == [] and "behave2" not in _bases(s)
    s.agent_monte("ledger", "verify", "--all", check=True)
