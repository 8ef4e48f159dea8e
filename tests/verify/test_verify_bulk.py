"""verify's fast paths find what its object-by-object walk finds, and fail clearly.

A long history is read through git in bulk (``rev-list``, ``cat-file --batch``, ``diff-tree
--stdin``: :mod:`monte.ledger.gitread`); ``--from`` reads the state at REV lazily, a fan-out
folder at a time; all lineage refs are walked in one pass. Each must give the same violations,
in the same order, as the plain walk, on every forged history the suite knows; a git that fails
or is missing is ``E_INTEGRITY`` naming git, never a traceback.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from monte.ledger import verify as vf
from monte.ledger.verify import core as _core  # noqa: F401  (vf.core, vf.walk: loaded)
from tests.verify.forgehelp import Honest, ledger_ref, rev, update_ref
from tests.verify.test_forged_histories import FORGERIES


def _walk(repo: Path, tip: str, since: str | None = None, exp: str = "exp") -> list[vf.Violation]:
    from monte.ledger.store import Store

    v = vf.Verifier(Store(repo))
    return v.verify(exp, tip=tip.encode(), since=since.encode() if since else None)  # type: ignore[arg-type]


def _no_lazy(*_: object) -> None:
    raise vf.NeedAll


def _bulk(monkeypatch: pytest.MonkeyPatch, n: int) -> None:
    """How long a history the walk reads object by object before it reads through git in bulk
    (``BULK``), where the walk and the first-parent chain read it."""
    monkeypatch.setattr(vf.core, "BULK", n)
    monkeypatch.setattr(vf.walk, "BULK", n)


@pytest.mark.parametrize("name", ["honest", *FORGERIES])
def test_bulk_and_lazy_reads_find_what_the_plain_walk_finds(honest: Honest, name: str,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    exp = "exp"
    if name == "honest":
        tip = rev(honest.path, ledger_ref())
        assert tip is not None
    else:
        case = FORGERIES[name](honest)
        exp, tip = case.ref.split("/")[3], case.forged.sha
    _bulk(monkeypatch, 10**9)  # object by object, as before
    plain = _walk(honest.path, tip, exp=exp)
    _bulk(monkeypatch, 1)  # through git in bulk from the second commit on
    assert _walk(honest.path, tip, exp=exp) == plain
    assert (plain == []) == (name == "honest")
    for back in (1, 3, 6, 12):
        since = rev(honest.path, f"{tip}~{back}")
        if since is None:
            continue  # a shorter ledger (another experiment's)
        lazy = _walk(honest.path, tip, since, exp=exp)
        monkeypatch.setattr(vf.walk, "Since", _no_lazy)  # every row read up front, as before
        assert lazy == _walk(honest.path, tip, since, exp=exp), back
        monkeypatch.undo()
        _bulk(monkeypatch, 1)


def test_all_lineage_refs_in_one_pass_find_what_each_walk_finds(honest: Honest, monte) -> None:
    from monte.ledger.refs import lineage_prefix
    from monte.ledger.store import Store

    store = Store(honest.path)
    refs = store.refs_under(lineage_prefix("exp"))
    assert len(refs) >= 2
    walks = {ref: vf.Verifier(store).verify_lineage("exp", ref.rsplit("/", 1)[1]) for ref in refs}
    assert vf.Verifier(store).verify_lineages("exp", refs) == walks
    # a lineage ref moved onto a commit that is not a checkpoint: named on every ref above it
    other = next(iter(refs))
    assert update_ref(honest.path, other, rev(honest.path, ledger_ref()) or "", hooks=False).returncode == 0
    refs = store.refs_under(lineage_prefix("exp"))
    walks = {ref: vf.Verifier(store).verify_lineage("exp", ref.rsplit("/", 1)[1]) for ref in refs}
    assert any(walks.values())
    assert vf.Verifier(store).verify_lineages("exp", refs) == walks


def _fake_git(tmp_path: Path, script: str | None) -> str:
    bin_ = tmp_path / "bin"
    bin_.mkdir()
    if script is not None:
        (bin_ / "git").write_text(script)
        (bin_ / "git").chmod(0o755)
    return str(bin_)


@pytest.mark.parametrize("git", ["fails", "missing"])
def test_git_failing_is_a_clear_error(honest: Honest, monte, tmp_path: Path, git: str,
                                      monkeypatch: pytest.MonkeyPatch) -> None:
    _bulk(monkeypatch, 1)
    script = "#!/bin/sh\necho 'fatal: the object store is on fire' >&2\nexit 128\n" if git == "fails" else None
    monkeypatch.setenv("PATH", _fake_git(tmp_path, script))
    r = monte("ledger", "verify", "--json")
    assert r.code != 0
    err = r.json()["error"]
    assert err["code"] == "E_INTEGRITY", err
    assert "git" in err["message"] and "Traceback" not in r.out + r.err
    if git == "fails":
        assert "the object store is on fire" in err["message"] and "exit 128" in err["message"]
    else:
        assert "could not run `git" in err["message"] and "install git" in err["fix"]


def test_from_checks_the_lineage_of_the_runs_its_records_wrote(honest: Honest, monte) -> None:
    """``--from REV`` reads the lineage refs of the runs written after REV (not every run's):
    one of them moved onto a commit that is no checkpoint is named, as the full check names it."""
    from tests.verify.forgehelp import g, lineage_ref, short

    b = honest["b"]
    log = g(honest.path, "log", "--format=%H %s", ledger_ref()).splitlines()
    started_b = next(i for i, line in enumerate(log) if line.endswith(f"started: {b}"))
    before_b = log[started_b + 1].split()[0]
    code = monte("ledger", "verify", "--json", "exp", "--from", before_b).code
    assert code == 0
    not_a_checkpoint = rev(honest.path, ledger_ref()) or ""
    assert update_ref(honest.path, lineage_ref(b), not_a_checkpoint, hooks=False).returncode == 0
    for args in (("exp", "--from", before_b), ("exp",)):
        r = monte("ledger", "verify", "--json", *args)
        assert r.code == 5, r.out
        found = {(d["commit"], d["rule"]) for d in r.json()["error"]["details"]}
        assert (short(not_a_checkpoint), "lineage") in found, (args, found)
