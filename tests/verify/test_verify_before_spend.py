"""Issue 26, case 4: the CLI verifies before it spends a test read.

On the current main a forward commit that deletes the final claim's row (put in place with
``MONTE_HOOKS=off git update-ref``) let ``monte eval --split test`` plan and run a second claim;
deleting one experiment's refs and starting another experiment on the same exam and base got a
fresh ``test@0``; a ``--dry-run`` on a rewound ledger planned "touch 2 of 2" where the real run
refused. Now a test read verifies every ledger from the tip monte last remembered of it before
the ``started`` record (``monte.ledger.verify.verify_before_spend``): each refuses ``E_VERIFY``
first, ``--dry-run`` the same way, and nothing is written.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.support.helpers import snapshot_state
from tests.verify.forgehelp import (
    Honest,
    cat,
    compact,
    dumps,
    forge,
    g,
    git_run,
    index_path,
    ledger_ref,
    rev,
    run_dir,
    short,
    update_ref,
)
from tests.verify.test_rewinds import _claim


def _claim_run(h: Honest, tip: str) -> dict[str, Any]:
    """The final claim's row at ``tip`` (the cohort index's newest test read)."""
    index = json.loads(cat(h.path, tip, f"cohorts/{h['cohort']}/index.json") or b"{}")
    run = index["test"]["parity"][-1][1]
    row = json.loads(cat(h.path, tip, f"{run_dir(run)}/row.json") or b"{}")
    assert row["role"] == "claim", row
    return dict(row)


def _delete_claim(h: Honest, tip: str) -> str:
    """A forward commit that removes the claim's row, its per-task file and its index entries."""
    row = _claim_run(h, tip)
    run = row["run"]
    index = json.loads(cat(h.path, tip, index_path(run)) or b"{}")
    index.pop(run)
    cohort_path = f"cohorts/{row['cohort']}/index.json"
    cohort = json.loads(cat(h.path, tip, cohort_path) or b"{}")
    cohort["test"]["parity"] = [e for e in cohort["test"]["parity"] if e[1] != run]
    meta = json.loads(cat(h.path, tip, "meta.json") or b"{}")
    changes: dict[str, bytes | None] = {f"{run_dir(run)}/row.json": None, f"{run_dir(run)}/tasks.jsonl": None,
                                        index_path(run): compact(index), cohort_path: compact(cohort),
                                        "meta.json": dumps({"records": meta.get("records", 0) + 1})}
    forged = forge(h.path, changes, "tidy up", parent=tip)
    assert update_ref(h.path, ledger_ref(), forged.sha, hooks=False).returncode == 0
    return forged.sha


def _refused_first(r: Any, *shas: str) -> None:
    assert r.code == 5, r.out
    err = r.json()["error"]
    assert err["code"] == "E_VERIFY" and "no test read is spent" in err["message"], err
    for sha in shas:
        assert short(sha) in err["message"], err


def test_a_forged_tip_that_drops_the_claim_refuses_before_a_second_claim(honest: Honest, monte) -> None:
    _, claimed = _claim(honest, monte)
    forged = _delete_claim(honest, claimed)
    before = snapshot_state(honest.path)
    _refused_first(monte("eval", "--split", "test", "--dry-run", "--json"), forged)
    _refused_first(monte("eval", "--split", "test", "--yes", "--json"), forged)
    assert snapshot_state(honest.path) == before  # no started record, no run folder
    assert rev(honest.path, ledger_ref()) == forged


def test_a_dry_run_on_a_rewound_ledger_says_what_the_real_run_does(honest: Honest, monte) -> None:
    before_claim, claimed = _claim(honest, monte)
    assert update_ref(honest.path, ledger_ref(), before_claim, hooks=False).returncode == 0
    dry = monte("eval", "--split", "test", "--dry-run", "--json")
    real = monte("eval", "--split", "test", "--yes", "--json")
    for r in (dry, real):
        assert r.code == 5 and r.json()["error"]["code"] == "E_VERIFY", r.out
        assert short(claimed) in r.json()["error"]["message"], r.out
    assert rev(honest.path, ledger_ref()) == before_claim


def test_a_deleted_experiment_keeps_its_read_for_the_next_experiment_on_that_seal(
        honest: Honest, monte, recorded_models: dict[int, Path]) -> None:
    """exp's refs deleted (its tips log kept): a new experiment on the same exam and base gets no
    fresh test@0; the deletion is named before anything is spent."""
    tip = rev(honest.path, ledger_ref())
    assert tip is not None
    for ref in g(honest.path, "for-each-ref", "--format=%(refname)", "refs/heads/monte/exp/").split():
        assert git_run(honest.path, "update-ref", "-d", ref, env={"MONTE_HOOKS": "off"}).returncode == 0
    r = monte("experiment", "init", "exp2", "--eval", "parity", "--model", str(recorded_models[0]), "--json")
    assert r.code == 0, r.out
    assert monte("eval", "-e", "exp2", "--yes", "--json").code == 0  # dev reads are not the seal's
    before = snapshot_state(honest.path)
    for args in (("--dry-run",), ("--yes",)):
        r = monte("eval", "-e", "exp2", "--split", "test", *args, "--json")
        _refused_first(r, tip)
        assert "was deleted" in r.json()["error"]["message"], r.out
    assert snapshot_state(honest.path) == before


# --- issue 43, cases 3 and 4: no unauthenticated memory; every remembered monte ref ---------------


def test_a_line_appended_to_verified_log_does_not_make_a_forged_tip_verified(honest: Honest, monte) -> None:
    """Case 3: on main one appended ``<ref> <sha>`` line in ``.git/monte/verified.log`` made the
    check skip a forged tip and a third read was taken. The lines are signed with the
    repository's key now: a hand-written one (old shape, or with a made-up MAC) is not believed."""
    _, claimed = _claim(honest, monte)
    forged = _delete_claim(honest, claimed)
    log = honest.path / ".git" / "monte" / "verified.log"
    assert log.is_file()
    with open(log, "ab") as f:
        f.write(f"{ledger_ref()} {forged}\n".encode())
        f.write(f"{ledger_ref()} {forged} {'0' * 64}\n".encode())
    before = snapshot_state(honest.path)
    _refused_first(monte("eval", "--split", "test", "--yes", "--json"), forged)
    assert snapshot_state(honest.path) == before


def test_a_deleted_base_ref_refuses_before_a_test_read(honest: Honest, monte) -> None:
    """Case 4: a cohort's base ref deleted by hand (tips.log kept): on main the CLI checked only
    ledger refs for rewinds and went on; every remembered ``refs/heads/monte/`` ref is checked now."""
    _claim(honest, monte)
    base = f"refs/heads/monte/exp/base/{honest['cohort']}"
    tip = rev(honest.path, base)
    assert tip is not None
    assert git_run(honest.path, "update-ref", "-d", base, env={"MONTE_HOOKS": "off"}).returncode == 0
    before = snapshot_state(honest.path)
    for args in (("--dry-run",), ("--yes",)):
        r = monte("eval", "--split", "test", *args, "--json")
        # refused either by the rules (the cohort the deleted ref leaves has no test@0 to pair
        # against) or, where they let it through, by the history check that names the deletion
        assert r.code in (3, 5), r.out
        err = r.json()["error"]
        assert err["code"] == "E_PREFLIGHT" or (err["code"] == "E_VERIFY" and f"{base} was deleted" in err["message"])
    assert snapshot_state(honest.path) == before
