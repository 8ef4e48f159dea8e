"""A ledger ref moved back by plain git: the third test read it would buy is refused, and verify
names what was lost (rule ``rewound``).

The bypass these tests pin down: `git update-ref monte/exp/ledger <before the final claim>` made
`monte ledger verify --all` pass and let a new final claim through; so did deleting the
experiment's refs and running `monte experiment init` again; and pre-push let a force-push of the
rewound ledger through to a plain remote. monte now remembers every tip it wrote or saw
(``.git/monte/tips.log``, git's reflogs), and a copy elsewhere (a remote-tracking ref, the results
bucket's mirror) still holds the records when a person wiped all of that too.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from tests.support.helpers import snapshot_state
from tests.verify.forgehelp import Honest, g, git_run, ledger_ref, rev, short, update_ref

MIRROR = "refs/remotes/results/monte/exp/ledger"


def _tip(h: Honest) -> str:
    sha = rev(h.path, ledger_ref())
    assert sha is not None
    return sha


def _claim(h: Honest, monte: Any) -> tuple[str, str]:
    """Nominate the selected checkpoint and make the final claim with the CLI; the ledger's tip
    before the claim and after it."""
    sel = h["selected"]
    assert monte("nominate", f"{sel}@{50 if sel == h['a'] else 100}").code == 0
    before = _tip(h)
    r = monte("eval", "--split", "test", "--yes", "--json")
    assert r.code == 0, r.out
    return before, _tip(h)


def _verify(monte: Any, *args: str) -> tuple[int, dict[str, Any]]:
    r = monte("ledger", "verify", "--json", *args)
    return r.code, r.json()


def _rewound(out: dict[str, Any], commit: str) -> list[dict[str, str]]:
    return [d for d in out["error"]["details"] if d["rule"] == "rewound" and d["commit"] == short(commit)]


def _forget(repo: Path) -> None:
    """What a person can still do locally: wipe monte's tip log and git's reflogs."""
    (repo / ".git" / "monte" / "tips.log").unlink(missing_ok=True)
    g(repo, "reflog", "expire", "--expire=now", "--all")


# --- (a) a rewind to before the final claim --------------------------------------------------------


def test_a_plain_git_rewind_before_the_claim_fails_verify_and_buys_no_third_read(honest: Honest, monte) -> None:
    assert monte("hooks", "uninstall").code == 0  # as the bypass was found: no hooks at all
    before, claimed = _claim(honest, monte)
    assert update_ref(honest.path, ledger_ref(), before).returncode == 0
    code, out = _verify(monte, "--all")
    assert code == 5 and out["error"]["code"] == "E_VERIFY", out
    hits = _rewound(out, claimed)
    assert hits and hits[0]["experiment"] == "exp", out
    restore = f"git update-ref {ledger_ref()} {claimed}"
    assert ledger_ref() in hits[0]["message"] and "moved back by something other than monte" in hits[0]["message"]
    assert restore in hits[0]["message"] and restore in hits[0]["fix"] and restore in out["error"]["fix"]
    # the incremental check CI runs finds it too
    code, out = _verify(monte, "exp", "--from", g(honest.path, "rev-parse", f"{before}~1"))
    assert code == 5 and _rewound(out, claimed), out
    # a new final claim is refused by monte itself, before anything is written
    state = snapshot_state(honest.path)
    r = monte("eval", "--split", "test", "--yes", "--json")
    assert r.code == 5 and r.json()["error"]["code"] == "E_VERIFY", r.out
    assert short(claimed) in r.json()["error"]["message"] and restore in r.json()["error"]["fix"]
    assert snapshot_state(honest.path) == state
    # restored as the fix says (with the hooks in place, which check that move), all is well
    assert monte("hooks", "install").code == 0
    r = update_ref(honest.path, ledger_ref(), claimed)
    assert r.returncode == 0, r.stderr.decode()
    assert _verify(monte)[0] == 0


def test_with_the_hooks_init_installs_git_itself_refuses_the_rewind(honest: Honest, monte) -> None:
    before, claimed = _claim(honest, monte)
    r = update_ref(honest.path, ledger_ref(), before)
    assert r.returncode != 0 and _tip(honest) == claimed
    assert "[rewound]" in r.stderr.decode() and short(claimed) in r.stderr.decode()


def test_monte_moves_show_in_git_reflog(honest: Honest, monte) -> None:
    _claim(honest, monte)
    moves = g(honest.path, "reflog", "show", "--format=%gs", "monte/exp/ledger").splitlines()
    assert moves[0].startswith("monte: eval parity/test") and any(m.startswith("monte: nominate") for m in moves)


def test_a_tip_only_git_saw_is_remembered_too(honest: Honest, monte, tmp_path: Path) -> None:
    """Records fetched with plain git (another clone's) are in git's reflog; rewinding them away
    is caught, though monte never wrote them."""
    from monte import api
    from monte.workspace import open_workspace

    other = tmp_path / "other"
    shutil.copytree(honest.path, other, symlinks=True)
    api.nominate(ref=f"{honest['a']}@50", ws=open_workspace(other))
    fetched = rev(other, ledger_ref())
    assert fetched is not None
    before = _tip(honest)
    r = git_run(honest.path, "fetch", str(other), f"{ledger_ref()}:{ledger_ref()}")
    assert r.returncode == 0, r.stderr.decode()
    r = update_ref(honest.path, ledger_ref(), before)  # the hooks refuse the rewind
    assert r.returncode != 0 and "[rewound]" in r.stderr.decode() and short(fetched) in r.stderr.decode()
    assert update_ref(honest.path, ledger_ref(), before, hooks=False).returncode == 0
    code, out = _verify(monte)
    assert code == 5 and _rewound(out, fetched), out
    assert "git reflog" in _rewound(out, fetched)[0]["message"]
    # monte's writer checks the tips monte wrote or a verify saw pass (its own log, one read):
    # once verify has seen the fetched tip, a rewind of it stops the next append as well
    assert update_ref(honest.path, ledger_ref(), fetched).returncode == 0
    assert _verify(monte)[0] == 0
    assert update_ref(honest.path, ledger_ref(), before, hooks=False).returncode == 0
    r = monte("nominate", f"{honest['b']}@100", "--json")
    assert r.code == 5 and r.json()["error"]["code"] == "E_VERIFY" and short(fetched) in r.json()["error"]["message"]


# --- (b) the refs deleted and the experiment made again -------------------------------------------


def test_deleting_the_refs_and_init_again_is_refused_and_fails_verify(honest: Honest, monte,
                                                                      recorded_models: dict[int, Path]) -> None:
    _, claimed = _claim(honest, monte)
    refs = g(honest.path, "for-each-ref", "--format=%(refname)", "refs/heads/monte/exp/").split()
    assert ledger_ref() in refs
    for ref in refs:
        assert git_run(honest.path, "update-ref", "-d", ref, env={"MONTE_HOOKS": "off"}).returncode == 0
    r = monte("experiment", "init", "exp", "--eval", "parity", "--model", str(recorded_models[0]), "--json")
    assert r.code == 5 and r.json()["error"]["code"] == "E_VERIFY", r.out
    assert "was deleted" in r.json()["error"]["message"] and short(claimed) in r.json()["error"]["message"]
    assert g(honest.path, "for-each-ref", "refs/heads/monte/exp/") == ""
    # verify still knows the experiment and says what was lost, named or not
    for args in (("--all",), ("exp",)):
        code, out = _verify(monte, *args)
        assert code == 5, out
        hits = _rewound(out, claimed)
        assert hits and "was deleted" in hits[0]["message"] and hits[0]["experiment"] == "exp", out
    # restored, it verifies (the lineage and base refs are remembered too: put them back as well)
    for d in _verify(monte)[1]["error"]["details"]:
        ref, sha = d["fix"].split("`git update-ref ")[1].rstrip("`").split()
        assert update_ref(honest.path, ref, sha, hooks=False).returncode == 0
    assert _verify(monte)[0] == 0


# --- (c) pre-push ----------------------------------------------------------------------------------


def _plain_remote(tmp_path: Path) -> Path:
    bare = tmp_path / "remote.git"
    g(tmp_path, "init", "-q", "--bare", str(bare))  # no hooks there: only the pusher's pre-push
    return bare


def test_pre_push_refuses_to_force_a_rewound_ledger_onto_a_remote(honest: Honest, monte, tmp_path: Path) -> None:
    bare = _plain_remote(tmp_path)
    before, claimed = _claim(honest, monte)
    r = git_run(honest.path, "push", str(bare), "refs/heads/monte/*")  # honest: the hook lets it through
    assert r.returncode == 0, r.stderr.decode()
    assert rev(bare, ledger_ref()) == claimed
    assert update_ref(honest.path, ledger_ref(), before, hooks=False).returncode == 0
    _forget(honest.path)  # even with no local memory: the remote's tip is not an ancestor
    r = git_run(honest.path, "push", "-f", str(bare), ledger_ref())
    err = r.stderr.decode()
    assert r.returncode != 0 and rev(bare, ledger_ref()) == claimed, err
    assert "[rewound]" in err and ledger_ref() in err and short(claimed) in err and "never force" in err
    # MONTE_HOOKS=off is the documented escape hatch (a plain remote then takes it: use pre-receive there)
    r = git_run(honest.path, "push", "-f", str(bare), ledger_ref(), env={"MONTE_HOOKS": "off"})
    assert r.returncode == 0 and rev(bare, ledger_ref()) == before


def test_pre_push_refuses_to_overwrite_records_it_has_never_seen(honest: Honest, monte, tmp_path: Path) -> None:
    from monte import api
    from monte.workspace import open_workspace

    bare = _plain_remote(tmp_path)
    assert git_run(honest.path, "push", str(bare), "refs/heads/monte/*").returncode == 0
    other = tmp_path / "other"
    shutil.copytree(honest.path, other, symlinks=True)
    api.nominate(ref=f"{honest['a']}@50", ws=open_workspace(other))
    r = git_run(other, "push", str(bare), ledger_ref())  # a fast-forward: fine
    assert r.returncode == 0, r.stderr.decode()
    theirs = rev(bare, ledger_ref())
    api.nominate(ref=f"{honest['b']}@100")  # this clone records something else meanwhile
    r = git_run(honest.path, "push", "-f", str(bare), ledger_ref())
    err = r.stderr.decode()
    assert r.returncode != 0 and rev(bare, ledger_ref()) == theirs, err
    assert "[rewound]" in err and "does not have" in err and short(theirs or "") in err
    # an honest fast-forward still goes through
    r = git_run(other, "push", str(bare), ledger_ref())
    assert r.returncode == 0, r.stderr.decode()


# --- (e) a copy elsewhere still holds the records --------------------------------------------------


def test_the_results_mirror_holding_lost_records_fails_verify_until_sync(honest: Honest, monte, tmp_path: Path) -> None:
    (tmp_path / "bucket").mkdir()
    assert monte("config", "set", "bucket", str(tmp_path / "bucket")).code == 0
    before, claimed = _claim(honest, monte)
    r = monte("push", "--json")
    assert r.code == 0, r.out
    assert rev(honest.path, MIRROR) == claimed
    # the ledger put back and every local memory of it wiped: only the mirror still knows
    assert update_ref(honest.path, ledger_ref(), before, hooks=False).returncode == 0
    _forget(honest.path)
    code, out = _verify(monte)
    assert code == 5, out
    hits = _rewound(out, claimed)
    assert hits and MIRROR in hits[0]["message"] and "monte sync" in hits[0]["fix"], out
    # sync brings the records back; then all is well
    r = monte("sync", "--json")
    assert r.code == 0, r.out
    assert _tip(honest) == claimed
    assert _verify(monte)[0] == 0


def test_a_remote_tracking_ledger_holding_lost_records_brings_them_back(honest: Honest, monte, tmp_path: Path) -> None:
    """A git remote's copy (refs/remotes/origin/...) ahead of a ledger moved back: any monte
    command lets its records in again (monte.ledger.remotes), so the claim is back and a third
    read is refused; a rewound ledger that was appended to meanwhile has diverged: rule rewound."""
    bare = _plain_remote(tmp_path)
    before, claimed = _claim(honest, monte)
    assert git_run(honest.path, "push", str(bare), "refs/heads/monte/*").returncode == 0
    g(honest.path, "fetch", "-q", str(bare), "refs/heads/monte/*:refs/remotes/origin/monte/*")
    assert update_ref(honest.path, ledger_ref(), before, hooks=False).returncode == 0
    _forget(honest.path)
    r = monte("eval", "--split", "test", "--yes", "--json")
    assert r.code == 3 and r.json()["error"]["code"] == "E_SEALED", r.out
    assert _tip(honest) == claimed
    code, out = _verify(monte)
    assert code == 0, out
    # moved back and appended to: the two copies diverged, and verify names the lost claim
    assert update_ref(honest.path, ledger_ref(), before, hooks=False).returncode == 0
    _forget(honest.path)
    g(honest.path, "update-ref", "-d", "refs/remotes/origin/monte/exp/ledger")
    assert monte("nominate", f"{honest['other']}@{50 if honest['other'] == honest['a'] else 100}").code == 0
    g(honest.path, "fetch", "-q", str(bare), "refs/heads/monte/*:refs/remotes/origin/monte/*")
    code, out = _verify(monte)
    assert code == 5, out
    hits = _rewound(out, claimed)
    assert hits and "refs/remotes/origin/monte/exp/ledger" in hits[0]["message"], out


def test_with_every_local_memory_wiped_a_third_read_is_caught_at_sync(honest: Honest, monte, tmp_path: Path) -> None:
    """The residue docs/hooks-and-ci.md names ("A ref moved back"): ref moved back, tip log and reflogs deleted. Locally nothing
    remembers, so monte takes the read; the bucket's copy refuses the union and verify keeps
    naming the lost claim."""
    (tmp_path / "bucket").mkdir()
    assert monte("config", "set", "bucket", str(tmp_path / "bucket")).code == 0
    before, claimed = _claim(honest, monte)
    assert monte("push").code == 0
    assert update_ref(honest.path, ledger_ref(), before, hooks=False).returncode == 0
    _forget(honest.path)
    assert monte("eval", "--split", "test", "--yes").code == 0  # the third read, bought locally
    r = monte("sync", "--json")
    assert r.code == 3 and r.json()["error"]["code"] == "E_SEALED", r.out
    code, out = _verify(monte)
    assert code == 5 and _rewound(out, claimed), out
