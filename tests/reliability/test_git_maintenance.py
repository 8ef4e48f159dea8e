"""Git maintenance beside monte is harmless: processes append to one ledger while real
``git gc --aggressive``, ``git pack-refs --all`` and ``git repack -ad`` run in loops beside them.

Before the store retried what git moves under it, 1-16 appends in 300 failed with an unhandled
``FileNotFoundError`` (a ref's or an object's ``.lock``: git had removed the folder dulwich had
just made) and a read could miss an object that ``repack`` was moving into a pack. Now: every
record is kept exactly once, no process fails, ``monte ledger verify`` and ``git fsck --strict``
pass. ``git prune --expire=now`` beside appends is unsafe (git says so: it deletes objects a
writer has written and not yet referenced); monte writes again what it still holds, and what is
lost anyway is a named refusal (``E_INTEGRITY``, with its fix), never ``E_INTERNAL``.

The deterministic version of each race is in ``tests/ledger/test_store.py`` (git run at the one
moment that matters); the long version is ``bench/fault_campaign.py`` (git maintenance part).
The helpers are the campaign's too (``tests/support/maintenance.py``).
"""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

from tests.support.maintenance import after_checks, appenders_beside


def test_eight_appenders_beside_gc_pack_refs_and_repack_lose_nothing(repo: Path, benchmark_exp: str,
                                                                    tmp_path: Path) -> None:
    res = appenders_beside(repo, benchmark_exp, 8, 13, ["gc", "pack-refs", "repack"], tmp_path / "work")
    assert not res["crashed"], res["crashed"][0]
    assert res["codes"] == {} and res["unhandled"] == [], res  # not one append failed
    assert res["records_appended"] == res["records_tried"] == res["records_found"] == 208, res
    assert res["records_lost"] == 0 and res["duplicated"] == 0, res
    assert all(m["runs"] >= 1 for m in res["maintenance"].values()), res["maintenance"]  # they overlapped
    # git's own runs fail now and then (two loops racing for packed-refs.lock), never on monte's hook
    assert not [w for m in res["maintenance"].values() for w in m["why"] if "hook" in w], res["maintenance"]
    after = after_checks(repo)
    assert after == {"verify": {"exit": 0, "code": "ok"}, "status": {"exit": 0, "code": "ok"}, "fsck": "ok"}, after


def test_appends_beside_prune_are_never_e_internal(repo: Path, benchmark_exp: str, tmp_path: Path) -> None:
    """`git prune --expire=now` deletes what a writer has written and not yet referenced (git
    documents it as unsafe beside a writer): an append or a read may be refused, by name, with
    the fix; nothing fails as an unhandled error, before or after the loop stops."""
    res = appenders_beside(repo, benchmark_exp, 4, 10, ["prune", "repack"], tmp_path / "work")
    assert not res["crashed"], res["crashed"][0]
    assert res["unhandled"] == [], res["unhandled"]
    assert set(res["codes"]) <= {"E_INTEGRITY"}, res["codes"]
    assert res["maintenance"]["prune"]["runs"] >= 1
    after = after_checks(repo)
    for name in ("verify", "status"):
        assert after[name] in ({"exit": 0, "code": "ok"}, {"exit": 5, "code": "E_INTEGRITY"}), after


def test_git_pack_refs_passes_monte_s_hook_while_monte_appends(repo: Path, benchmark_exp: str, tmp_path: Path) -> None:
    """`git pack-refs` (run by `git gc`) writes packed-refs with the tips it read; monte appending
    meanwhile leaves the loose ref, which git reads first, newer than the packed value. monte's
    reference-transaction hook judged that write as moving the ledger back and refused it, so
    `git gc` failed ("failed to run pack-refs") whenever monte wrote beside it. (The stress runs
    counted it: most gc and pack-refs runs failed.)"""
    from tests.support.helpers import append_evals

    ready, go = tmp_path / "ready", tmp_path / "go"
    local = repo / ".git" / "hooks" / "reference-transaction.local"  # monte's hook runs it first
    local.write_text(f'''#!/bin/sh
input=$(cat)
if [ "$1" = prepared ] && [ -e "{repo}/.git/packed-refs.lock" ] && printf "%s" "$input" | grep -q monte/exp/ledger; then
    touch "{ready}"; n=0
    while [ ! -e "{go}" ] && [ $n -lt 600 ]; do sleep 0.05; n=$((n+1)); done
fi
exit 0
''')
    local.chmod(0o755)
    packer = subprocess.Popen(["git", "-C", str(repo), "pack-refs", "--all"], stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while not ready.exists():  # git holds packed-refs.lock, about to write the ledger's old tip
            assert packer.poll() is None and time.monotonic() < deadline, packer.communicate()
            time.sleep(0.02)
        (run,) = append_evals(repo, 1)  # monte moves the loose ref on meanwhile
        tip = subprocess.run(["git", "-C", str(repo), "rev-parse", "monte/exp/ledger"], capture_output=True,
                             text=True, check=True).stdout
    finally:
        go.touch()
        _, err = packer.communicate(timeout=120)
    assert packer.returncode == 0 and "aborted by hook" not in err, err
    assert subprocess.run(["git", "-C", str(repo), "rev-parse", "monte/exp/ledger"], capture_output=True,
                          text=True, check=True).stdout == tip  # and the record stands
    after = after_checks(repo)
    assert after == {"verify": {"exit": 0, "code": "ok"}, "status": {"exit": 0, "code": "ok"}, "fsck": "ok"}, after


def test_two_pack_refs_at_once_pass_monte_s_hook(repo: Path, benchmark_exp: str, tmp_path: Path) -> None:
    """`git gc` beside a `git pack-refs` (or a second gc): the other one prunes the loose refs
    first, then this one prunes a loose file that is already gone, as git does. monte's hook
    judged that as deleting the ref (`refs/heads/monte/vault would be deleted`) and refused it,
    so gc failed. Staged here: the second pack-refs runs inside the first one's first prune."""
    fired = tmp_path / "fired"
    local = repo / ".git" / "hooks" / "reference-transaction.local"  # monte's hook runs it first
    local.write_text(f'''#!/bin/sh
input=$(cat)
if [ "$1" = prepared ] && [ -z "$NESTED" ] && [ ! -e "{fired}" ] && \\
   printf "%s" "$input" | grep -q " 0000000000000000000000000000000000000000 refs/heads/monte/"; then
    touch "{fired}"; NESTED=1 git -C "{repo}" pack-refs --all >/dev/null 2>&1
fi
exit 0
''')
    local.chmod(0o755)
    refs = subprocess.run(["git", "-C", str(repo), "for-each-ref"], capture_output=True, text=True).stdout
    p = subprocess.run(["git", "-C", str(repo), "pack-refs", "--all"], capture_output=True, text=True)
    assert fired.exists()
    assert p.returncode == 0 and "aborted by hook" not in p.stderr, p.stderr
    assert subprocess.run(["git", "-C", str(repo), "for-each-ref"], capture_output=True, text=True).stdout == refs
    assert not list((repo / ".git" / "refs" / "heads" / "monte").rglob("*"))  # all of them packed
    after = after_checks(repo)
    assert after == {"verify": {"exit": 0, "code": "ok"}, "status": {"exit": 0, "code": "ok"}, "fsck": "ok"}, after
