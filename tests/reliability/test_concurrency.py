"""Concurrent writers, for real: processes, not threads.

- **Appenders**: N processes append eval runs (a ``started`` and a ``failed`` record each, as
  ``tests/storage/test_results.py`` makes them) to one experiment through the store's own API
  (``Ledger(Store(repo), exp).append_row``), all released at once: every record is kept exactly
  once (commits counted with ``git rev-list --count``, runs by their ``Monte-Run`` trailers and
  by the rows of the tip), ``monte ledger verify`` and ``git fsck --strict`` pass.
- **The final claim**: K processes run ``monte eval --split test`` on a ready experiment (both
  baselines, a checkpoint with a dev eval): exactly one wins, the others refuse ``E_SEALED``
  (exit 3), and the ledger holds one claim.
- **One bucket, two clones**: a laptop and a box append, push at the same moment and then sync,
  round after round (the GCS emulator): both, and a third clone, read the union; nothing lost,
  nothing duplicated.

The helpers are the campaign's too (``tests/support/concurrency.py``; ``bench/concurrency_campaign.py``
runs them longer).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.support.concurrency import (
    bucket_rounds,
    check_appenders,
    check_race,
    check_union,
    claim_race,
    fsck,
    monte_cli,
    ready_for_claim,
    run_appenders,
)
from tests.support.helpers import new_machine

# --- the tests ------------------------------------------------------------------------------------


def test_eight_processes_append_and_lose_nothing(repo: Path, benchmark_exp: str, monte: Any, tmp_path: Path) -> None:
    writers, runs_each = 8, 8  # 16 records each, 128 in all (the campaign: 8 x 100)
    res = run_appenders(repo, benchmark_exp, writers, runs_each, tmp_path / "work")
    figures = check_appenders(res, writers, runs_each)
    assert figures["records_lost"] == 0 and figures["lost_races"] > 0  # they did collide
    r = monte("ledger", "verify", "--json")
    assert r.code == 0, r.out
    assert not fsck(repo), fsck(repo)
    assert monte("status", "--json").code == 0


def test_four_processes_race_for_the_final_claim(repo: Path, monte: Any, base_model: Path,
                                                  tiny_models: dict[int, Path]) -> None:
    ready_for_claim(repo, lambda *a: (lambda r: (r.code, r.out))(monte(*a)), base_model, tiny_models[1])
    res = claim_race(repo, 4)
    check_race(res, 4)
    r = monte("ledger", "verify", "--json")
    assert r.code == 0, r.out
    assert not fsck(repo), fsck(repo)
    r = monte("eval", "--split", "test", "--yes", "--json")  # and a fifth, later, is refused too
    assert r.code == 3 and r.json()["error"]["code"] == "E_SEALED"


def test_two_clones_push_and_sync_one_bucket_round_after_round(repo: Path, benchmark_exp: str, monte: Any, gcs: dict[str, str],
                                                                tmp_path: Path) -> None:
    assert monte("config", "set", "bucket", gcs["url"] + "/results").code == 0
    assert monte("push").code == 0
    box = new_machine(repo, tmp_path / "box")
    assert monte_cli(box, "sync").returncode == 0
    res = bucket_rounds(repo, box, rounds=2, per_round=3)
    assert res["push_merges"] >= 1  # the bucket moved under at least one push: merged, not lost
    third = new_machine(repo, tmp_path / "third")
    assert monte_cli(third, "sync").returncode == 0
    figures = check_union(res["made"], repo, box, third)
    assert figures["runs_lost"] == 0
