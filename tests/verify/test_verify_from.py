"""``monte ledger verify EXP --from REV``: only the records after REV, from REV's state."""

from __future__ import annotations

import pytest

from tests.verify.forgehelp import Honest, g, ledger_ref, lineage_ref, rev, short, update_ref
from tests.verify.test_forged_histories import rewritten_finished_row, third_test_read


def _verify(monte, *args: str):
    r = monte("ledger", "verify", "--json", *args)
    return r.code, r.json()


def test_last_ten_records_of_an_honest_ledger_pass(honest: Honest, monte) -> None:
    base = rev(honest.path, f"{ledger_ref()}~10")
    assert base is not None
    code, out = _verify(monte, "exp", "--from", base)
    assert code == 0, out
    assert out["ok"] is True and out["records"] == 10
    # from the tip itself: nothing new, nothing wrong
    code, out = _verify(monte, "exp", "--from", rev(honest.path, ledger_ref()) or "")
    assert code == 0 and out["records"] == 0
    # a full ref name is a REV too
    code, out = _verify(monte, "exp", "--from", ledger_ref())
    assert code == 0 and out["records"] == 0


@pytest.mark.parametrize("back", [1, 5, 10, 16])
def test_state_at_rev_is_rebuilt_so_rules_still_bite(honest: Honest, monte, back: int) -> None:
    """A third test read after REV is caught although the first two reads (and the checkpoints)
    lie before REV: the touches are re-derived from REV's tree."""
    base = rev(honest.path, f"{ledger_ref()}~{back}")
    assert base is not None
    case = third_test_read(honest)
    assert update_ref(honest.path, ledger_ref(), case.forged.sha, hooks=False).returncode == 0
    code, out = _verify(monte, "exp", "--from", base)
    assert code == 5 and out["error"]["code"] == "E_VERIFY"
    assert {"commit": case.forged.short, "rule": "two-touch"} in [
        {k: d[k] for k in ("commit", "rule")} for d in out["error"]["details"]]


def test_a_forgery_after_rev_is_flagged_one_before_is_not_looked_at(honest: Honest, monte) -> None:
    case = rewritten_finished_row(honest)
    assert update_ref(honest.path, ledger_ref(), case.forged.sha, hooks=False).returncode == 0
    code, out = _verify(monte, "exp", "--from", case.forged.parent)
    assert code == 5
    found = [(d["commit"], d["rule"]) for d in out["error"]["details"]]
    # the rewrite itself, and (its score no longer matching its tasks) nothing from other commits
    assert (case.forged.short, "append-only") in found and {c for c, _ in found} == {case.forged.short}
    # REV at (or after) the forgery: the walk starts there, trusting it
    code, out = _verify(monte, "exp", "--from", case.forged.sha)
    assert code == 0 and out["records"] == 0
    # the full walk still finds it
    assert _verify(monte, "exp")[0] == 5


def test_rev_that_is_not_an_ancestor_is_reported(honest: Honest, monte) -> None:
    tip = rev(honest.path, ledger_ref())
    # a checkpoint's lineage commit: a commit, but not on the ledger's line
    other = rev(honest.path, lineage_ref(honest["a"]))
    assert other is not None
    code, out = _verify(monte, "exp", "--from", other)
    assert code == 5 and out["error"]["code"] == "E_VERIFY"
    d = out["error"]["details"]
    assert any(x["rule"] == "append-only" and "not an ancestor" in x["message"] and short(other) in x["message"]
               and x["commit"] == short(tip or "") for x in d), d
    # a record from a rewritten history: the old tip, after the ref was moved to a sibling
    case = rewritten_finished_row(honest)
    sibling = case.forged.sha
    assert update_ref(honest.path, ledger_ref(), sibling, hooks=False).returncode == 0
    assert update_ref(honest.path, ledger_ref(), case.forged.parent, hooks=False).returncode == 0
    assert update_ref(honest.path, ledger_ref(), f"{case.forged.parent}~1", hooks=False).returncode == 0
    code, out = _verify(monte, "exp", "--from", case.forged.parent)
    assert code == 5
    assert any("not an ancestor" in x["message"] for x in out["error"]["details"])


def test_from_refusals(honest: Honest, monte) -> None:
    r = monte("ledger", "verify", "--json", "--from", "HEAD")
    assert r.code == 2 and r.json()["error"]["code"] == "E_USAGE"
    r = monte("ledger", "verify", "--json", "--all", "--from", "HEAD")
    assert r.code == 2 and r.json()["error"]["code"] == "E_USAGE"
    code, out = _verify(monte, "exp", "--from", "0" * 40)
    assert code == 4 and out["error"]["code"] == "E_NOT_FOUND"
    code, out = _verify(monte, "exp", "--from", "no-such-rev")
    assert code == 4 and out["error"]["code"] == "E_NOT_FOUND"
    code, out = _verify(monte, "ghost", "--from", "0" * 40)
    assert code == 4 and out["error"]["code"] == "E_NOT_FOUND"


def test_from_takes_the_short_ids_verify_prints(honest: Honest, monte) -> None:
    base = g(honest.path, "rev-parse", f"{ledger_ref()}~10")
    code, out = _verify(monte, "exp", "--from", short(base))
    assert code == 0 and out["records"] == 10, out
