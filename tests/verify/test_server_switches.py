"""Issue 26, case 3: a bare (server) repository does not take the pusher's word.

git hands the pushing environment to a local ``receive-pack`` (and ``--receive-pack='env ...'``
does the same over ssh), so ``MONTE_HOOKS=off git push -f`` used to skip the server's
``pre-receive`` and land a rewind that drops the final claim; and the bare repository, which
keeps no reflogs, remembered no tip it had accepted, so its own ``monte ledger verify`` said ok.

Now the server's hooks ignore MONTE_HOOKS from the push; the one switch is the bare
repository's own config (``git config monte.hooks off``, set there), and every monte/ tip it
accepts is remembered (``monte/tips.log``), so a rewind that lands while the switch is off is
``rewound`` to the server's verify. Real bare remotes with monte's hooks, real git pushes.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.verify.forgehelp import Honest, g, git_run, ledger_ref, rev, short, update_ref
from tests.verify.test_forged_histories import _honest_claim


def _push_claim(honest: Honest, bare: Path) -> tuple[str, str]:
    before = rev(honest.path, ledger_ref())
    _honest_claim(honest)
    claimed = rev(honest.path, ledger_ref())
    assert before and claimed
    r = git_run(honest.path, "push", str(bare), "refs/heads/monte/*")
    assert r.returncode == 0, r.stderr.decode()
    assert rev(bare, ledger_ref()) == claimed
    return before, claimed


def _verify_in(bare: Path, monte: Any, monkeypatch: pytest.MonkeyPatch) -> tuple[int, dict[str, Any]]:
    with monkeypatch.context() as mp:
        mp.chdir(bare)
        r = monte("ledger", "verify", "--all", "--json")
    return r.code, r.json()


@pytest.mark.parametrize("how", ["env", "receive-pack"])
def test_the_pushers_monte_hooks_off_does_not_reach_the_server(honest: Honest, bare: Path, monte, how: str,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    before, claimed = _push_claim(honest, bare)
    assert update_ref(honest.path, ledger_ref(), before, hooks=False).returncode == 0  # the claim dropped here
    if how == "env":
        r = git_run(honest.path, "push", "-f", str(bare), ledger_ref(), env={"MONTE_HOOKS": "off"})
    else:
        r = git_run(honest.path, "push", "-f", "--no-verify", "--receive-pack=env MONTE_HOOKS=off git-receive-pack",
                    str(bare), ledger_ref())
    err = r.stderr.decode()
    assert r.returncode != 0 and "pre-receive hook declined" in err, err
    assert rev(bare, ledger_ref()) == claimed  # the claim is still on the server
    assert "[rewound]" in err or "[append-only]" in err, err
    assert _verify_in(bare, monte, monkeypatch)[0] == 0


def test_the_servers_own_switch_lets_a_repair_in_and_its_verify_remembers_what_it_accepted(
        honest: Honest, bare: Path, monte, monkeypatch: pytest.MonkeyPatch) -> None:
    before, claimed = _push_claim(honest, bare)
    assert update_ref(honest.path, ledger_ref(), before, hooks=False).returncode == 0
    g(bare, "config", "monte.hooks", "off")  # set on the server, by whoever runs it
    r = git_run(honest.path, "push", "-f", str(bare), ledger_ref(), env={"MONTE_HOOKS": "off"})
    assert r.returncode == 0, r.stderr.decode()
    assert rev(bare, ledger_ref()) == before
    # the bare repository remembers the tip it accepted: the rewind that landed is named
    code, out = _verify_in(bare, monte, monkeypatch)
    assert code == 5 and out["error"]["code"] == "E_VERIFY", out
    hits = [d for d in out["error"]["details"] if d["rule"] == "rewound" and d["commit"] == short(claimed)]
    assert hits and ledger_ref() in hits[0]["message"], out
    # put back (the switch on again), it verifies
    g(bare, "config", "--unset", "monte.hooks")
    r = git_run(honest.path, "push", str(bare), f"{claimed}:{ledger_ref()}")
    assert r.returncode == 0, r.stderr.decode()
    assert _verify_in(bare, monte, monkeypatch)[0] == 0
