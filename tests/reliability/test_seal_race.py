"""Issue 26, case 2: one writer per seal key, across the experiments of one repository.

Four ``monte eval --split test`` processes in four experiments on the same base model and exam
(one seal: the same test content, eval settings and base weights) used to all take ``test@0``:
``start_row`` re-checked the seal inside its own ledger's compare-and-swap and took no lock over
the other ledgers. Now the started record of a test read is written under the seal key's lock
(:func:`monte.ledger.seal.seal_lock`): exactly one process takes test@0, the three others refuse
``E_SEALED`` naming it, and the repository verifies. Real processes, started together.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

from tests.support.concurrency import fsck, monte_cli

EXPS = ("e1", "e2", "e3", "e4")


def test_four_experiments_race_for_one_test0(repo: Path, monte: Any, base_model: Path) -> None:
    assert monte("env", "add", "--server", "parity", "--dev", "parity", "--test", "parity").code == 0
    for exp in EXPS:
        r = monte("experiment", "init", exp, "--eval", "parity", "--model", str(base_model), "--json")
        assert r.code == 0, r.out
    results: dict[str, Any] = {}

    def one(exp: str) -> None:
        results[exp] = monte_cli(repo, "eval", "-e", exp, "--split", "test", "--yes", "--json",
                                 env={"OMP_NUM_THREADS": "1"})

    threads = [threading.Thread(target=one, args=(exp,)) for exp in EXPS]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    won = [exp for exp, p in results.items() if p.returncode == 0]
    assert len(won) == 1, {exp: (p.returncode, p.stdout[-400:], p.stderr[-400:]) for exp, p in results.items()}
    winner = json.loads(results[won[0]].stdout)["runs"][0]["run"]
    for exp, p in results.items():
        if exp in won:
            continue
        assert p.returncode == 3, p.stdout + p.stderr
        err = json.loads(p.stdout)["error"]
        assert err["code"] == "E_SEALED" and f"{won[0]}/{winner}" in err["message"], err
    reads = 0
    for exp in EXPS:
        status = monte("status", "-e", exp, "--json").json()  # in-process: the race is over
        reads += sum(1 for r in status["rows"] if r["kind"] == "eval" and r["role"] == "baseline")
    assert reads == 1
    r = monte("ledger", "verify", "--all", "--json")
    assert r.code == 0, r.out
    assert not fsck(repo), fsck(repo)
