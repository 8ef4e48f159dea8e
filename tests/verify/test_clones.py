"""Clones just work: the ledgers a `git clone` or `git fetch` brings are let in.

The bugs pinned here: after `git clone` of a monte repository the ledgers were only
``refs/remotes/origin/monte/*``, and `monte init` + `monte ledger verify --all` printed "ok: 0
record(s) in 0 experiment(s)"; after a plain `git fetch` of records another clone made, verify
called the local ledger ``rewound`` (a remote-tracking copy ahead of it); and verify could not
run at all outside a monte repository (a CI checkout of a ledger branch: E_NOT_INITIALIZED).

Now any monte command lets a remote's copies in (:mod:`monte.ledger.remotes`): a missing ref is
created, one that is behind is fast-forwarded, each judged first like a push into the clone,
so a forged record in a remote's copy is named and never let in.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from tests.verify.forgehelp import Honest, g, git_run, ledger_ref, rev, update_ref
from tests.verify.test_forged_histories import _honest_claim, rewritten_finished_row


def _clone(src: Path, dest: Path) -> Path:
    r = git_run(src.parent, "clone", "-q", str(src), str(dest))
    assert r.returncode == 0, r.stderr.decode()
    return dest


def _status(monte: Any) -> dict[str, Any]:
    r = monte("status", "--json")
    assert r.code == 0, r.out
    return r.json()


def _monte_refs(repo: Path) -> dict[str, str]:
    out = g(repo, "for-each-ref", "--format=%(refname) %(objectname)", "refs/heads/monte/")
    return dict(line.split() for line in out.splitlines())


def test_clone_then_init_gives_the_same_status_and_verify(honest: Honest, monte, tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    _honest_claim(honest)
    before = _status(monte)
    r = monte("ledger", "verify", "--all", "--json")
    assert r.code == 0, r.out
    records = r.json()["records"]
    clone = _clone(honest.path, tmp_path / "clone")
    assert _monte_refs(clone) == {}  # git leaves them at refs/remotes/origin/monte/*
    monkeypatch.chdir(clone)
    r = monte("init", "--json")
    assert r.code == 0, r.out
    assert _monte_refs(clone) == _monte_refs(honest.path)
    assert _status(monte) == before
    r = monte("ledger", "verify", "--all", "--json")
    assert r.code == 0 and r.json()["records"] == records and r.json()["experiments"] == ["exp"], r.out
    # the clone's hooks are in place: a forged record fetched into it is refused by git
    assert (clone / ".git" / "hooks" / "reference-transaction").exists()


def test_status_in_a_clone_works_without_init(honest: Honest, monte, tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """A team commits .monte.yaml: a clone has it, and reads the ledgers with no `monte init`."""
    g(honest.path, "add", "-A")
    g(honest.path, "commit", "-q", "-m", "the experiment's repository")
    before = _status(monte)
    clone = _clone(honest.path, tmp_path / "clone")
    monkeypatch.chdir(clone)
    assert _status(monte) == before
    r = monte("ledger", "verify", "--json")
    assert r.code == 0 and r.json()["records"] > 0 and set(r.json()["adopted"]) == set(), r.out


def test_a_plain_fetch_of_new_records_reads_as_ahead_not_rewound(honest: Honest, monte, tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    clone = _clone(honest.path, tmp_path / "clone")
    monkeypatch.chdir(clone)
    assert monte("init").code == 0
    first = rev(clone, ledger_ref())
    # the source records more (the nomination and the final claim); the clone fetches with plain git
    monkeypatch.chdir(honest.path)
    _honest_claim(honest)
    monkeypatch.chdir(clone)
    g(clone, "fetch", "-q", "origin")
    assert rev(clone, ledger_ref()) == first != rev(honest.path, ledger_ref())
    r = monte("ledger", "verify", "--all", "--json")
    assert r.code == 0, r.out
    assert r.json()["adopted"] == {ledger_ref(): "refs/remotes/origin/monte/exp/ledger"}
    assert rev(clone, ledger_ref()) == rev(honest.path, ledger_ref())
    r = monte("ledger", "verify")
    assert r.code == 0 and "let in" not in r.out  # nothing more to let in


def test_a_forged_record_in_a_remotes_copy_is_named_and_not_let_in(honest: Honest, monte, tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    clone = _clone(honest.path, tmp_path / "clone")
    monkeypatch.chdir(clone)
    assert monte("init").code == 0
    good = rev(clone, ledger_ref())
    case = rewritten_finished_row(honest)
    assert update_ref(honest.path, ledger_ref(), case.forged.sha, hooks=False).returncode == 0
    g(clone, "fetch", "-q", "origin")  # remote-tracking refs: no hook stands in the way
    r = monte("ledger", "verify", "--all", "--json")
    assert r.code == 5, r.out
    hits = [d for d in r.json()["error"]["details"] if d["commit"] == case.forged.short]
    assert hits and hits[0]["rule"] == "append-only", r.out
    assert "refs/remotes/origin/monte/exp/ledger" in hits[0]["message"] and "not let in" in hits[0]["message"]
    assert rev(clone, ledger_ref()) == good
    # status reads the honest ledger meanwhile
    assert monte("status", "--json").code == 0 and rev(clone, ledger_ref()) == good


def test_a_remotes_copy_that_diverged_stays_and_is_named(honest: Honest, monte, tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    from monte import api

    clone = _clone(honest.path, tmp_path / "clone")
    monkeypatch.chdir(clone)
    assert monte("init").code == 0
    api.nominate(ref=f"{honest['a']}@50")  # the clone records one thing ...
    mine = rev(clone, ledger_ref())
    monkeypatch.chdir(honest.path)
    api.nominate(ref=f"{honest['b']}@100")  # ... and the source another
    monkeypatch.chdir(clone)
    g(clone, "fetch", "-q", "origin")
    r = monte("ledger", "verify", "--all", "--json")
    assert r.code == 5 and rev(clone, ledger_ref()) == mine, r.out
    assert any(d["rule"] == "rewound" and "refs/remotes/origin/monte/exp/ledger" in d["message"]
               for d in r.json()["error"]["details"]), r.out


def test_verify_reads_a_ledger_branch_checkout_with_no_monte_config(honest: Honest, monte, tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """What CI has after actions/checkout of a ledger branch: the ledger's tree as the work tree,
    that branch local, every other ref under refs/remotes/origin/."""
    ci = tmp_path / "ci"
    g(tmp_path, "init", "-q", str(ci))
    g(ci, "remote", "add", "origin", str(honest.path))
    g(ci, "fetch", "-q", "origin", "+refs/heads/*:refs/remotes/origin/*")
    g(ci, "checkout", "-q", "--force", "-B", "monte/exp/ledger", "refs/remotes/origin/monte/exp/ledger")
    assert not (ci / ".monte.yaml").exists() and (ci / "measurement.json").exists()
    monkeypatch.chdir(ci)
    r = monte("ledger", "verify", "--all", "--json")
    assert r.code == 0 and r.json()["experiments"] == ["exp"] and r.json()["records"] > 0, r.out


def test_verify_is_never_ok_over_nothing_while_ledgers_exist_elsewhere(_template: Path, honest: Honest, monte,
                                                                       tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """A repository whose only monte records sit under a ref monte does not read (a history
    rewrite's backup, say): verify names it instead of passing over zero records."""
    repo = tmp_path / "empty"
    shutil.copytree(_template, repo, symlinks=True)
    g(repo, "fetch", "-q", str(honest.path), "refs/heads/monte/exp/ledger:refs/original/refs/heads/monte/exp/ledger")
    monkeypatch.chdir(repo)
    r = monte("ledger", "verify", "--all", "--json")
    assert r.code == 4 and r.json()["error"]["code"] == "E_NOT_FOUND", r.out
    assert "refs/original/refs/heads/monte/exp/ledger" in r.json()["error"]["message"]
    # with a ledger checked too, the other ref is still named
    # one transaction (`--atomic`): the hook judges the refs together, as pre-receive does
    g(repo, "fetch", "-q", "--atomic", str(honest.path), "refs/heads/monte/*:refs/heads/monte/*")
    r = monte("ledger", "verify", "--all")
    assert r.code == 0 and "not checked: refs/original/refs/heads/monte/exp/ledger" in r.out, r.out
    assert json.loads(monte("ledger", "verify", "--json").out)["unchecked"]


def test_a_clone_monte_may_not_write_reads_the_remotes_copies_where_they_are(
        honest: Honest, monte, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A read-only file system (refs cannot be written; as root here, a read-only mount is the one
    thing faked: every ref write fails as EROFS would)."""
    from monte.ledger.store import Store

    g(honest.path, "add", "-A")
    g(honest.path, "commit", "-q", "-m", "the experiment's repository")
    before = _status(monte)
    clone = _clone(honest.path, tmp_path / "clone")
    monkeypatch.chdir(clone)

    def read_only(self: Store, *args: Any, **kw: Any) -> bool:
        raise OSError(30, "Read-only file system")

    monkeypatch.setattr(Store, "set_ref", read_only)
    r = monte("ledger", "verify", "--all", "--json")
    assert r.code == 0 and r.json()["records"] > 0 and r.json()["experiments"] == ["exp"], r.out
    assert _status(monte) == before
    assert _monte_refs(clone) == {}  # nothing was written, nothing remembered
    assert not (clone / ".git" / "monte" / "tips.log").exists()
