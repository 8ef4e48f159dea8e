"""``monte hooks install`` / ``uninstall``, and what each hook does in real git operations.

- install keeps a hook that was there as ``<name>.local``, which still runs first (with the same
  arguments and stdin, and its refusal stands); uninstall removes monte's only and puts it back;
- reference-transaction refuses a forged record arriving by ``git fetch`` too;
- pre-push refuses to send a forged record (and lets an honest push through).
"""

from __future__ import annotations

import os
import shutil
import stat
from pathlib import Path

from monte.api import HOOK_MARK, HOOKS
from tests.verify.forgehelp import Honest, g, git_run, ledger_ref, rev, short, update_ref
from tests.verify.test_forged_histories import rewritten_finished_row

LOCAL_LOGGER = """#!/bin/sh
# a team's own hook, here before monte
printf '%s|' "$1" >> "{log}"
cat >> "{log}"
echo >> "{log}"
exit {status}
"""


def _hooks(repo: Path) -> Path:
    return repo / ".git" / "hooks"


def _write_hook(path: Path, text: str) -> None:
    path.write_text(text)
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)


def _local(repo: Path, name: str, log: Path, status: int = 0) -> str:
    text = LOCAL_LOGGER.format(log=log, status=status)
    _write_hook(_hooks(repo) / name, text)
    return text


def _next_record(h: Honest) -> tuple[str, str]:
    """An honest record written by monte, with the ref put back: (old, new) to replay by git."""
    from monte import api

    old = rev(h.path, ledger_ref())
    a = h["a"]
    api.nominate(ref=f"{a}@50")
    new = rev(h.path, ledger_ref())
    assert old and new and update_ref(h.path, ledger_ref(), old, hooks=False).returncode == 0
    return old, new


# --- install / uninstall ---------------------------------------------------------------------------


def test_install_writes_three_marked_hooks_and_is_idempotent(honest: Honest, monte) -> None:
    r = monte("hooks", "install", "--json")
    assert r.code == 0, r.out
    paths = [Path(p) for p in r.json()["installed"]]
    assert [p.name for p in paths] == list(HOOKS)
    texts = {}
    for p in paths:
        assert p.parent == _hooks(honest.path)
        assert os.access(p, os.X_OK) and HOOK_MARK in p.read_text()
        texts[p.name] = p.read_text()
    assert monte("hooks", "install").code == 0  # again: monte's own hook is not kept as .local
    for name, text in texts.items():
        assert (_hooks(honest.path) / name).read_text() == text
        assert not (_hooks(honest.path) / f"{name}.local").exists()


def test_install_chains_an_existing_hook_which_runs_first(honest: Honest, monte, tmp_path: Path) -> None:
    log = tmp_path / "local.log"
    original = _local(honest.path, "reference-transaction", log)
    assert monte("hooks", "install").code == 0
    kept = _hooks(honest.path) / "reference-transaction.local"
    assert kept.read_text() == original and os.access(kept, os.X_OK)
    assert HOOK_MARK in (_hooks(honest.path) / "reference-transaction").read_text()

    # an honest update: both hooks run; the local one sees git's arguments and stdin
    old, new = _next_record(honest)
    log.write_text("")
    r = update_ref(honest.path, ledger_ref(), new, old)
    assert r.returncode == 0, r.stderr.decode()
    seen = log.read_text()
    assert f"prepared|{old} {new} {ledger_ref()}" in seen and "committed|" in seen

    # a forgery: monte refuses, and the local hook had already run (it runs first)
    case = rewritten_finished_row(honest)
    log.write_text("")
    r = update_ref(honest.path, ledger_ref(), case.forged.sha)
    assert r.returncode != 0 and rev(honest.path, ledger_ref()) == new
    assert "[append-only]" in r.stderr.decode()
    assert f"prepared|{new} {case.forged.sha} {ledger_ref()}" in log.read_text() or \
        f"prepared|{'0' * 40} {case.forged.sha} {ledger_ref()}" in log.read_text()


def test_a_chained_hooks_refusal_stands(honest: Honest, monte, tmp_path: Path) -> None:
    old, new = _next_record(honest)
    _local(honest.path, "reference-transaction", tmp_path / "local.log", status=1)
    assert monte("hooks", "install").code == 0
    r = update_ref(honest.path, ledger_ref(), new, old)  # honest, but the team's hook says no
    assert r.returncode != 0 and rev(honest.path, ledger_ref()) == old


def test_uninstall_removes_only_monte_and_restores_the_chained_hook(honest: Honest, monte, tmp_path: Path) -> None:
    original = _local(honest.path, "pre-push", tmp_path / "local.log")
    foreign = _hooks(honest.path) / "post-commit"
    _write_hook(foreign, "#!/bin/sh\nexit 0\n")
    assert monte("hooks", "install").code == 0
    r = monte("hooks", "uninstall", "--json")
    assert r.code == 0, r.out
    assert sorted(Path(p).name for p in r.json()["removed"]) == sorted(HOOKS)
    hooks = _hooks(honest.path)
    assert (hooks / "pre-push").read_text() == original  # put back under its own name
    assert not (hooks / "pre-push.local").exists()
    assert not (hooks / "reference-transaction").exists() and not (hooks / "pre-receive").exists()
    assert foreign.read_text() == "#!/bin/sh\nexit 0\n"
    # nothing of monte's is left: a second uninstall removes nothing, and a forged update passes git
    r = monte("hooks", "uninstall", "--json")
    assert r.code == 0 and r.json()["removed"] == []
    assert (hooks / "pre-push").read_text() == original
    case = rewritten_finished_row(honest)
    assert update_ref(honest.path, ledger_ref(), case.forged.sha).returncode == 0


def test_install_refuses_when_a_hook_and_its_local_both_exist(honest: Honest, monte, tmp_path: Path) -> None:
    _local(honest.path, "pre-push", tmp_path / "a.log")
    _write_hook(_hooks(honest.path) / "pre-push.local", "#!/bin/sh\nexit 0\n")
    r = monte("hooks", "install", "--json")
    assert r.code == 3 and r.json()["error"]["code"] == "E_REFUSED"
    assert HOOK_MARK not in (_hooks(honest.path) / "pre-push").read_text()


def test_install_into_a_bare_repository(tmp_path: Path) -> None:
    from monte import api

    bare = tmp_path / "srv.git"
    g(tmp_path, "init", "-q", "--bare", str(bare))
    out = api.hooks_install(git_dir=bare)
    assert sorted(Path(p).name for p in out.installed) == sorted(HOOKS)
    assert HOOK_MARK in (bare / "hooks" / "pre-receive").read_text()


# --- reference-transaction on fetch ----------------------------------------------------------------


def test_fetch_of_a_forged_ledger_is_refused(honest: Honest, monte, tmp_path: Path) -> None:
    from monte import api
    from monte.workspace import open_workspace

    forger = tmp_path / "forger"
    shutil.copytree(honest.path, forger, symlinks=True)
    assert monte("hooks", "install").code == 0
    tip = rev(honest.path, ledger_ref())
    # the other clone records an honest nomination: fetched, it lands
    api.nominate(ref=f"{honest['a']}@50", ws=open_workspace(forger))
    good = rev(forger, ledger_ref())
    r = git_run(honest.path, "fetch", str(forger), f"{ledger_ref()}:{ledger_ref()}")
    assert r.returncode == 0, r.stderr.decode()
    assert rev(honest.path, ledger_ref()) == good
    # then it forges a record: fetched, git refuses to move the ref
    case = rewritten_finished_row(Honest(forger, honest.ids))
    assert update_ref(forger, ledger_ref(), case.forged.sha, hooks=False).returncode == 0
    r = git_run(honest.path, "fetch", str(forger), f"{ledger_ref()}:{ledger_ref()}")
    assert r.returncode != 0
    assert rev(honest.path, ledger_ref()) == good != tip
    assert "[append-only]" in r.stderr.decode() and case.forged.short in r.stderr.decode()


# --- pre-push ----------------------------------------------------------------------------------------


def _fresh_bare(tmp_path: Path, honest: Honest, *, seed: bool) -> Path:
    bare = tmp_path / "remote.git"
    g(tmp_path, "init", "-q", "--bare", str(bare))
    if seed:  # the remote already holds the honest history
        r = git_run(honest.path, "push", "-q", str(bare), "refs/heads/monte/*", env={"MONTE_HOOKS": "off"})
        assert r.returncode == 0, r.stderr.decode()
    return bare


def test_pre_push_lets_an_honest_new_record_through(honest: Honest, monte, tmp_path: Path) -> None:
    from monte import api

    bare = _fresh_bare(tmp_path, honest, seed=True)
    assert monte("hooks", "install").code == 0
    api.nominate(ref=f"{honest['a']}@50")
    r = git_run(honest.path, "push", str(bare), "refs/heads/monte/*")
    assert r.returncode == 0, r.stderr.decode()
    assert rev(bare, ledger_ref()) == rev(honest.path, ledger_ref())


PRE_PUSH_BLIND = (
    "pre-push verifies nothing: `ledger verify --updates --local` rewrites each line's old value to "
    "0000..., which verify_update reads as 'not given: read the ref', gets the local ref (already the "
    "pushed commit), and walks an empty range; so a forged tip is pushed. --local should verify the "
    "whole line (since=None) instead")
PRE_PUSH_BASE = (
    "pre-push refuses every first push of a repository that has a cohort: for a base ref the "
    "same 'read the ref' fallback finds the ref at the pushed commit and reports "
    "'would move: a cohort's base commit is written once'")
PRE_PUSH_REFSPEC = (
    "pre-push filters and names updates by the *local* ref ($1); `git push REMOTE SHA:refs/heads/monte/...` "
    "has no local monte ref, so it is not checked at all. The hook should use the remote ref ($3)")


def test_pre_push_refuses_a_forged_ledger(honest: Honest, monte, tmp_path: Path) -> None:
    bare = _fresh_bare(tmp_path, honest, seed=True)
    assert monte("hooks", "install").code == 0
    before = rev(bare, ledger_ref())
    case = rewritten_finished_row(honest)
    assert update_ref(honest.path, ledger_ref(), case.forged.sha, hooks=False).returncode == 0
    r = git_run(honest.path, "push", str(bare), ledger_ref())
    assert r.returncode != 0 and rev(bare, ledger_ref()) == before
    assert "[append-only]" in r.stderr.decode() and case.forged.short in r.stderr.decode()


def test_pre_push_checks_a_pushed_commit_by_its_remote_ref(honest: Honest, monte, tmp_path: Path) -> None:
    bare = _fresh_bare(tmp_path, honest, seed=True)
    assert monte("hooks", "install").code == 0
    before = rev(bare, ledger_ref())
    case = rewritten_finished_row(honest)
    r = git_run(honest.path, "push", str(bare), f"{case.forged.sha}:{ledger_ref()}")
    assert r.returncode != 0 and rev(bare, ledger_ref()) == before
    assert f"[{'append-only'}]" in r.stderr.decode()


def test_pre_push_lets_an_honest_first_push_through(honest: Honest, monte, tmp_path: Path) -> None:
    bare = _fresh_bare(tmp_path, honest, seed=False)
    assert monte("hooks", "install").code == 0
    r = git_run(honest.path, "push", str(bare), "refs/heads/monte/*")
    assert r.returncode == 0, r.stderr.decode()
    assert rev(bare, ledger_ref()) == rev(honest.path, ledger_ref())


def test_pre_push_is_skipped_with_no_verify_and_with_hooks_off(honest: Honest, monte, tmp_path: Path) -> None:
    """The escape hatches documented for repairs (the server's pre-receive is the backstop)."""
    bare = _fresh_bare(tmp_path, honest, seed=False)
    assert monte("hooks", "install").code == 0
    r = git_run(honest.path, "push", str(bare), "refs/heads/monte/*", env={"MONTE_HOOKS": "off"})
    assert r.returncode == 0, r.stderr.decode()
    assert short(rev(bare, ledger_ref()) or "") == short(rev(honest.path, ledger_ref()) or "")


def test_git_gc_packs_monte_refs_with_the_hooks_in_place(honest: Honest, monte) -> None:
    """`git pack-refs` (run by `git gc`) removes each loose ref file in a transaction the
    reference-transaction hook sees as a deletion; it is not one: the ref stays, packed."""
    assert monte("hooks", "install").code == 0
    tip = rev(honest.path, ledger_ref())
    r = git_run(honest.path, "gc", "-q")
    assert r.returncode == 0, r.stderr.decode()
    assert rev(honest.path, ledger_ref()) == tip
    assert f"{tip} {ledger_ref()}" in (honest.path / ".git" / "packed-refs").read_text()
    # a real deletion of the packed ref is still refused; monte appends on top of it as before
    r = git_run(honest.path, "update-ref", "-d", ledger_ref())
    assert r.returncode != 0 and rev(honest.path, ledger_ref()) == tip
    from monte import api

    api.nominate(ref=f"{honest['a']}@50")
    assert monte("ledger", "verify").code == 0
