"""`monte.ledger.tips`: every ref move the store makes is remembered where plain git does not
reach (``.git/monte/tips.log`` and the newest tip per ref), a git reflog line shows it, and the
store refuses to append to a ref that something else moved back. Checked with the ``git`` binary."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest
from dulwich.objects import ObjectID

from monte.errors import MonteError
from monte.ledger.refs import ZERO
from monte.ledger.store import Change, Snapshot, Store
from monte.ledger.tips import Ancestry, Tips
from tests.support.helpers import git

REF = "refs/heads/monte/t/ledger"


def record(n: int) -> Callable[[Snapshot], Change]:
    return lambda _snap: Change(summary=f"record {n}", writes={"n": str(n).encode()},
                                trailers={"Monte-Event": "bump"})


def appended(store: Store, n: int) -> list[ObjectID]:
    return [store.append(REF, record(i)) for i in range(n)]


def plain_git(repo: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """git as a person runs it, monte's hooks (if any) standing aside."""
    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True,
                          env={**os.environ, "MONTE_HOOKS": "off"})


def test_each_move_is_one_log_line(repo: Path) -> None:
    store = Store(repo)
    tips = appended(store, 3)
    log = (repo / ".git" / "monte" / "tips.log").read_text().splitlines()
    mine = [line.split() for line in log if line.startswith(REF + " ")]
    assert [(old, new) for _, old, new, _ in mine] == [
        (ZERO.decode(), tips[0].decode()), (tips[0].decode(), tips[1].decode()), (tips[1].decode(), tips[2].decode())]
    assert all(when.isdigit() for *_, when in mine)
    assert Tips(repo / ".git").newest(REF) == tips[2]
    # one remembered head per ref: each line proves its old tip is an ancestor of its new one
    assert [h.sha for h in Tips(repo / ".git").heads()[REF]] == [tips[2]]


def test_git_reflog_shows_monte_moves(repo: Path) -> None:
    appended(Store(repo), 2)
    out = git(repo, "reflog", "show", "--format=%gs", "monte/t/ledger").splitlines()
    assert out == ["monte: record 1", "monte: record 0"]


def test_a_torn_last_line_is_skipped(repo: Path) -> None:
    store = Store(repo)
    tips = appended(store, 2)
    with open(repo / ".git" / "monte" / "tips.log", "ab") as f:
        f.write(f"{REF} {tips[1].decode()} deadbeef".encode())  # a writer killed mid-line
    heads = Tips(repo / ".git").heads()
    assert [h.sha for h in heads[REF]] == [tips[1]]
    assert store.append(REF, record(9))


def test_update_ref_d_leaves_the_memory(repo: Path) -> None:
    tip = appended(Store(repo), 1)[0]
    assert plain_git(repo, "update-ref", "-d", REF).returncode == 0
    assert Tips(repo / ".git").newest(REF) == tip


def test_append_on_a_ref_moved_back_by_git_is_refused(repo: Path) -> None:
    store = Store(repo)
    tips = appended(store, 3)
    assert plain_git(repo, "update-ref", REF, tips[0].decode()).returncode == 0
    with pytest.raises(MonteError) as e:
        store.append(REF, record(7))
    assert e.value.code == "E_VERIFY"
    assert tips[2].decode()[:12] in e.value.message and "moved back" in e.value.message
    assert f"git update-ref {REF} {tips[2].decode()}" in e.value.fix
    assert git(repo, "rev-parse", REF).strip() == tips[0].decode()  # nothing written
    # restored, monte appends again
    assert plain_git(repo, "update-ref", REF, tips[2].decode()).returncode == 0
    assert store.append(REF, record(8))


def test_recreating_a_deleted_ref_is_refused(repo: Path) -> None:
    store = Store(repo)
    tip = appended(store, 2)[-1]
    assert plain_git(repo, "update-ref", "-d", REF).returncode == 0
    with pytest.raises(MonteError) as e:
        store.append(REF, record(0), create=True)
    assert e.value.code == "E_VERIFY" and "was deleted" in e.value.message and tip.decode()[:12] in e.value.message
    assert git(repo, "for-each-ref", REF).strip() == ""


def test_a_ref_git_moved_forward_is_appended_to(repo: Path) -> None:
    """A fetch (here: update-ref to a descendant) moves the ref past the newest tip monte wrote:
    a walk from the new tip meets it, so the append goes ahead."""
    store = Store(repo)
    tips = appended(store, 2)
    ahead = store.write_commit({"n": b"x"}, "from elsewhere", {"Monte-Event": "bump"}, [tips[1]])
    assert plain_git(repo, "update-ref", REF, ahead.decode()).returncode == 0
    new = store.append(REF, record(5))
    assert git(repo, "rev-parse", f"{new.decode()}^").strip() == ahead.decode()


def test_a_stale_newest_tip_is_a_lost_race_not_a_refusal(repo: Path) -> None:
    """Another writer moved the ref (and the newest-tip file) after this one read ``old``."""
    store = Store(repo)
    tips = appended(store, 2)
    other = Store(repo)
    newer = other.append(REF, record(3))
    late = store.write_commit({"n": b"late"}, "late", {"Monte-Event": "bump"}, [tips[1]])
    assert store.set_ref(REF, tips[1], late) is False  # lost: retry on the new tip
    assert git(repo, "rev-parse", REF).strip() == newer.decode()


def test_mirror_refs_are_remembered_but_never_refused(repo: Path) -> None:
    store = Store(repo)
    tips = appended(store, 2)
    mirror = "refs/remotes/results/monte/t/ledger"
    assert store.set_ref(mirror, None, tips[1])
    assert store.set_ref(mirror, tips[1], tips[0])  # the bucket's copy may move any way
    assert mirror not in Tips(repo / ".git").heads()
    assert f"{mirror} {tips[1].decode()} {tips[0].decode()} " in (repo / ".git" / "monte" / "tips.log").read_text()


def test_newest_reads_the_log_backwards_past_other_refs(repo: Path) -> None:
    """The last line of the log is usually the ref being appended to; another ref's newest tip
    is found further back, across read chunks, and a ref never logged is None."""
    store = Store(repo)
    tips = appended(store, 2)
    log = Tips(repo / ".git")
    other = "refs/heads/monte/t/lineage/r1"
    for i in range(400):  # ~50 KiB of other lines: several chunks back
        log.record(other, tips[0], tips[1], when=i)
    assert log.newest(REF) == tips[1] and log.newest(other) == tips[1]
    assert log.newest("refs/heads/monte/t/lineage/r") is None  # a prefix of a ref is not that ref
    assert log.newest("refs/heads/monte/none/ledger") is None


def test_ancestry_walks_only_as_far_as_asked(repo: Path) -> None:
    store = Store(repo)
    tips = appended(store, 5)
    walk = Ancestry(store.repo.object_store, tips[4])
    assert tips[3] in walk and len(walk.seen) <= 3
    assert ObjectID(b"f" * 40) not in walk and len(walk.seen) == 5


def test_git_reflog_entries_are_remembered_and_monte_lines_are_not_read_back(repo: Path) -> None:
    store = Store(repo)
    tips = appended(store, 2)
    ahead = store.write_commit({"n": b"x"}, "from elsewhere", {"Monte-Event": "bump"}, [tips[1]])
    assert plain_git(repo, "update-ref", REF, ahead.decode()).returncode == 0  # git writes a reflog line
    for prefix in ("refs/heads/monte/", REF):  # a folder of refs, or one ref
        heads = {h.sha: h.source for h in Tips(repo / ".git").heads(prefix)[REF]}
        assert heads == {tips[1]: "tips.log", ahead: "git reflog"}
    assert plain_git(repo, "update-ref", REF, tips[0].decode()).returncode == 0
    heads = {h.sha: h.source for h in Tips(repo / ".git").heads(REF)[REF]}
    # tips[0] needs no walk of its own: monte's log proves it an ancestor of tips[1]
    assert heads == {tips[1]: "tips.log", ahead: "git reflog"}


@pytest.mark.parametrize("line", [b"%s %s A U Thor <a@b> 1700000000 +0000\tforeign\n",
                                  b"%s %s A U Thor <a@b> 1700000000 +0000\n",  # no message at all
                                  b"%s %s A U Thor <a@b> 1700000000 +0000\tsaid: monte: "])  # the last line, unended
def test_one_foreign_reflog_line_among_montes_own_is_read(repo: Path, line: bytes) -> None:
    store = Store(repo)
    tips = appended(store, 3)  # three lines of monte's own: a reflog that needs no reading
    assert {h.source for h in Tips(repo / ".git").heads(REF)[REF]} == {"tips.log"}
    ahead = store.write_commit({"n": b"y"}, "by hand", {"Monte-Event": "bump"}, [tips[2]])
    with open(repo / ".git" / "logs" / REF, "ab") as f:
        f.write(line % (tips[2], ahead))
    heads = {h.sha: h.source for h in Tips(repo / ".git").heads(REF)[REF]}
    assert heads[ahead] == "git reflog"
