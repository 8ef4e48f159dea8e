"""Ctrl-C and SIGTERM in the middle of a chunk end it as they end an eval's read
(:func:`monte.runs.lifecycle.running`): the row reads failed, and the command refuses naming the
run and what its row reads, with the code an eval gives (E_INTERRUPTED, E_STOPPED)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from monte.ledger.experiment import Ledger
from monte.ledger.store import Store
from tests.support.helpers import monte_signalled


@pytest.mark.parametrize(("sig", "code", "words"), [("SIGINT", "E_INTERRUPTED", "was interrupted"),
                                                    ("SIGTERM", "E_STOPPED", "was stopped")])
def test_a_signal_mid_chunk_refuses_as_an_eval_does(repo: Path, monte, ready: str, sig: str, code: str,
                                                    words: str) -> None:
    # the chunk's training is where the signal lands: the row is started, nothing is saved yet
    r = monte_signalled(sig, "monte.training.run:train_chunk", "train", "--recipe", "sft-t", "--source",
                        "parity-sft", "--from-base", "--yes", "--json", cwd=repo)
    err = json.loads(r.stdout)["error"]
    run = [row for row in Ledger(Store(repo), ready).rows() if row.kind == "train"][0]
    assert err["code"] == code, r.stdout + r.stderr
    assert f"run {run.run} {words}" in err["message"] and "its row reads failed" in err["message"], err
    assert "start a new run" in err["fix"] or "run the command again" in err["fix"], err
    assert run.status == "failed"
