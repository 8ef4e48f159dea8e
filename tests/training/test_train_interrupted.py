"""Ctrl-C and SIGTERM in the middle of a chunk end it as they end an eval's read
(:func:`monte.runs.lifecycle.running`): the row reads failed, and the command refuses naming the
run and what its row reads, with the code an eval gives (E_INTERRUPTED, E_STOPPED)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from monte.ledger.experiment import Ledger
from monte.ledger.store import Store

# the chunk's training is where the signal lands: the row is started, nothing is saved yet
_SIGNAL = """
import os, signal, sys, time
# a Ctrl-C as a terminal delivers it: a process started under pytest-xdist inherits SIGINT ignored
signal.signal(signal.SIGINT, signal.default_int_handler)
import monte.training.run as r
def train_chunk(*a, **k):
    os.kill(os.getpid(), getattr(signal, os.environ["MONTE_TEST_SIGNAL"]))
    time.sleep(30)
r.train_chunk = train_chunk
from monte.cli.main import main
main(sys.argv[1:])
"""


@pytest.mark.parametrize(("sig", "code", "words"), [("SIGINT", "E_INTERRUPTED", "was interrupted"),
                                                    ("SIGTERM", "E_STOPPED", "was stopped")])
def test_a_signal_mid_chunk_refuses_as_an_eval_does(repo: Path, monte, ready: str, sig: str, code: str,
                                                    words: str) -> None:
    r = subprocess.run([sys.executable, "-c", _SIGNAL, "train", "--recipe", "sft-t", "--source", "parity-sft",
                        "--from-base", "--yes", "--json"], cwd=repo, capture_output=True, text=True, timeout=300,
                       env={**os.environ, "MONTE_TEST_SIGNAL": sig})
    err = json.loads(r.stdout)["error"]
    run = [row for row in Ledger(Store(repo), ready).rows() if row.kind == "train"][0]
    assert err["code"] == code, r.stdout + r.stderr
    assert f"run {run.run} {words}" in err["message"] and "its row reads failed" in err["message"], err
    assert "start a new run" in err["fix"] or "run the command again" in err["fix"], err
    assert run.status == "failed"
