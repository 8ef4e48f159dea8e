"""`monte.ledger.store`: one commit per record, the whole state in the tip's tree, append-only
compare-and-swap, and packing, checked with the real ``git`` binary."""

from __future__ import annotations

import hashlib
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from dulwich.objects import Blob

from monte.errors import MonteError, error
from monte.ledger.store import Change, Snapshot, Store
from tests.support.helpers import fill, git, tmpfs

REF = "refs/heads/monte/t/ledger"
SHORT = "monte/t/ledger"


def put(writes: dict[str, bytes | None], summary: str = "record",
        trailers: dict[str, str] | None = None) -> Callable[[Snapshot], Change]:
    """A build function that always writes the same change."""
    return lambda _snap: Change(summary=summary, writes=writes, trailers=trailers or {})


def counting(tag: str) -> Callable[[Snapshot], Change]:
    """A record that bumps a shared counter read from the tip: a lost update would show."""

    def build(snap: Snapshot) -> Change:
        n = int(snap.read("count") or b"0") + 1
        return Change(summary=f"{tag} is record {n}",
                      writes={f"by/{tag}": tag.encode(), "count": str(n).encode()},
                      trailers={"Monte-Event": "bump", "Monte-Run": tag})

    return build


def refs(repo: Path) -> str:
    return git(repo, "for-each-ref", "--format=%(refname) %(objectname)")


def count_objects(repo: Path) -> dict[str, int]:
    out = git(repo, "count-objects", "-v")
    return {k: int(v) for k, v in (line.split(": ") for line in out.splitlines())}


def fsck(repo: Path) -> None:
    r = subprocess.run(["git", "-C", str(repo), "fsck", "--strict", "--no-dangling"],
                       capture_output=True, text=True)
    problems = [line for line in r.stderr.splitlines() if not line.startswith("notice:")]
    assert r.returncode == 0 and not problems, r.stdout + r.stderr


def first_parents(repo: Path, ref: str) -> list[tuple[str, list[str]]]:
    """(commit, parents) along the ref, oldest first."""
    lines = git(repo, "rev-list", "--parents", "--reverse", ref).splitlines()
    return [(line.split()[0], line.split()[1:]) for line in lines]


# --- one commit per record, read back with git ----------------------------------------------


def test_each_append_is_one_commit_with_summary_and_trailers_git_can_read(repo: Path) -> None:
    store = Store(repo)
    ids = [
        store.append(REF, put({"a.txt": b"one\n"}, "first record",
                              {"Monte-Event": "created", "Monte-Experiment": "t"})),
        store.append(REF, put({"b.txt": b"two\n"}, "second\nrecord  spread over lines",
                              {"Monte-Event": "started", "Monte-Run": "abc123",
                               "Monte-Step": "50"})),
        store.append(REF, put({"c.txt": b"three\n"}, "no trailers at all")),
    ]
    assert git(repo, "rev-list", "--count", SHORT).strip() == "3"
    assert git(repo, "rev-parse", SHORT).strip() == ids[-1].decode()
    # the summary is always one line, even when the caller passed several
    subjects = git(repo, "log", "--reverse", "--format=%s", SHORT).splitlines()
    assert subjects == ["first record", "second record spread over lines", "no trailers at all"]
    events = git(repo, "log", "--reverse",
                 "--format=%(trailers:key=Monte-Event,valueonly,separator=%x2C)|", SHORT)
    assert [e.strip() for e in events.split("|")[:-1]] == ["created", "started", ""]
    run = git(repo, "log", "-1", "--skip=1", "--format=%(trailers:key=Monte-Run,valueonly)", SHORT)
    assert run.strip() == "abc123"
    # --grep over trailers finds the record, as docs/design.md promises
    hit = git(repo, "log", "--format=%H", "--grep=^Monte-Step: 50$", SHORT).split()
    assert hit == [ids[1].decode()]
    # git's own trailer parser agrees with what the commit carries
    body = git(repo, "log", "-1", "--skip=1", "--format=%B", SHORT)
    parsed = subprocess.run(["git", "interpret-trailers", "--parse"], input=body,
                            capture_output=True, text=True, check=True).stdout
    assert parsed.splitlines() == ["Monte-Event: started", "Monte-Run: abc123", "Monte-Step: 50"]


def test_pinned_committer_makes_commit_ids_repeat(repo: Path, tmp_path: Path) -> None:
    other = tmp_path / "other"
    subprocess.run(["git", "init", "-q", str(other)], check=True)
    a = [Store(repo).append(REF, put({"x": str(i).encode()}, f"r{i}")) for i in range(3)]
    b = [Store(other).append(REF, put({"x": str(i).encode()}, f"r{i}")) for i in range(3)]
    assert a == b
    assert git(repo, "log", "-1", "--format=%an <%ae> %at", SHORT).strip() == \
        "Monte Test <test@monte.invalid> 1764400000"


def test_tip_tree_holds_the_whole_state(repo: Path) -> None:
    store = Store(repo)
    store.append(REF, put({"measurement.json": b'{"m": 1}\n', "meta.json": b'{"records": 1}\n'}))
    store.append(REF, put({"runs/ab/abcdef/row.json": b'{"run": "abcdef"}\n',
                           "runs/ab/index.json": b"{}\n"}))
    store.append(REF, put({"runs/cd/cdefgh/row.json": b'{"run": "cdefgh"}\n',
                           "runs/cd/cdefgh/tasks.jsonl": b"",
                           "meta.json": b'{"records": 3}\n'}))
    listed = git(repo, "ls-tree", "-r", "--name-only", SHORT).split()
    assert listed == ["measurement.json", "meta.json", "runs/ab/abcdef/row.json",
                      "runs/ab/index.json", "runs/cd/cdefgh/row.json", "runs/cd/cdefgh/tasks.jsonl"]
    snap = Store(repo).snapshot(REF)  # a fresh reader: nothing cached
    for path in listed:
        shown = subprocess.run(["git", "-C", str(repo), "show", f"{SHORT}:{path}"],
                               capture_output=True, check=True).stdout
        assert snap.read(path) == shown, path
    # the state is the last write of each path, not the first
    assert snap.read("meta.json") == b'{"records": 3}\n'
    assert snap.listdir("runs") == ["ab", "cd"]
    assert snap.listdir("runs/cd/cdefgh") == ["row.json", "tasks.jsonl"]
    assert snap.read("runs") is None and snap.read("nope.json") is None
    assert snap.read("meta.json/deeper") is None


def test_fsck_strict_is_clean_after_many_appends(repo: Path) -> None:
    store = Store(repo)
    # names chosen to exercise git's tree order (a folder sorts as if it ended in '/')
    tricky = ["runs", "runs.json", "runs-x", "a/b", "a.b", "a-b", "Z", "_", "ü.txt"]
    for i in range(60):
        name = tricky[i % len(tricky)]
        path = f"{name}/{i}" if name in ("runs", "a/b") else f"{name}.{i}" if i > 8 else name
        store.append(REF, put({path: f"payload {i}\n".encode(), "meta.json": str(i).encode()},
                              f"record {i}", {"Monte-Event": "x"}))
    fsck(repo)
    assert git(repo, "rev-list", "--count", SHORT).strip() == "60"
    graph = git(repo, "log", "--graph", "--oneline", SHORT).splitlines()
    assert len(graph) == 60 and all(line.startswith("* ") for line in graph)
    assert graph[0].endswith("record 59") and graph[-1].endswith("record 0")


def test_history_is_append_only_each_first_parent_is_the_previous_tip(repo: Path) -> None:
    store = Store(repo)
    tips: list[str] = []
    for i in range(6):
        tips.append(store.append(REF, put({"n": str(i).encode()})).decode())
    chain = first_parents(repo, SHORT)
    assert [c for c, _ in chain] == tips
    assert chain[0][1] == []
    for (_, parents), prev in zip(chain[1:], tips, strict=False):
        assert parents == [prev]
    assert [c.id.decode() for c in store.log(REF)] == tips[::-1]
    # every earlier state is still there to read
    for i, commit in enumerate(tips):
        assert git(repo, "show", f"{commit}:n") == str(i)


def test_extra_parents_make_a_merge_whose_first_parent_is_the_tip(repo: Path) -> None:
    store = Store(repo)
    side = store.append("refs/heads/monte/t/side", put({"side": b"s"}))
    tip = store.append(REF, put({"main": b"m"}))
    merge = store.append(REF, lambda snap: Change("merge side", {"side": b"s"}),
                         extra_parents=(side,))
    assert git(repo, "rev-parse", f"{merge.decode()}^1", f"{merge.decode()}^2").split() == \
        [tip.decode(), side.decode()]
    assert git(repo, "ls-tree", "--name-only", SHORT).split() == ["main", "side"]
    fsck(repo)


# --- refusals write nothing ------------------------------------------------------------------


def test_a_build_that_refuses_writes_nothing(repo: Path) -> None:
    store = Store(repo)
    store.append(REF, put({"a": b"1"}))
    before_refs, before_objects = refs(repo), count_objects(repo)

    seen: list[bytes | None] = []

    def refuse(snap: Snapshot) -> Change:
        seen.append(snap.commit_id)
        raise error("E_REFUSED", "a rule says no", "do something else")

    with pytest.raises(MonteError) as e:
        store.append(REF, refuse)
    assert e.value.code == "E_REFUSED"
    assert seen == [store.tip(REF)]  # it saw the tip it would have appended to
    assert refs(repo) == before_refs
    assert count_objects(repo) == before_objects  # not even a dangling commit
    assert git(repo, "rev-list", "--count", SHORT).strip() == "1"
    # a refusal on a ref that does not exist yet leaves it absent
    with pytest.raises(MonteError):
        store.append("refs/heads/monte/other/ledger", refuse)
    assert git(repo, "show-ref", "--verify", "-q", "refs/heads/monte/other/ledger",
               check=False) == ""
    assert store.tip("refs/heads/monte/other/ledger") is None


def test_delete_a_path_with_none(repo: Path) -> None:
    store = Store(repo)
    store.append(REF, put({"keep.txt": b"k", "dir/a.txt": b"a", "dir/b.txt": b"b",
                           "solo/only.txt": b"o"}))
    store.append(REF, put({"dir/a.txt": None, "solo/only.txt": None, "absent/x": None}))
    assert git(repo, "ls-tree", "-r", "--name-only", SHORT).split() == ["dir/b.txt", "keep.txt"]
    # an emptied folder disappears (git has no empty trees in a ref's state)
    assert "solo" not in git(repo, "ls-tree", "--name-only", SHORT).split()
    # the deleted file is still in history
    assert git(repo, "show", f"{SHORT}~1:dir/a.txt") == "a"
    snap = store.snapshot(REF)
    assert snap.read("dir/a.txt") is None and not snap.exists("solo")
    fsck(repo)


# --- create=True -------------------------------------------------------------------------------


def _creator(name: str) -> Callable[[Snapshot], Change]:
    def build(snap: Snapshot) -> Change:
        if not snap.empty:
            raise error("E_MEASUREMENT_EXISTS", "already created")
        return Change(f"created by {name}", {"creator": name.encode()}, {"Monte-Event": "created"})

    return build


def test_create_refuses_when_the_ref_exists(repo: Path) -> None:
    store = Store(repo)
    first = store.append(REF, _creator("a"), create=True)
    before = refs(repo)
    with pytest.raises(MonteError) as e:
        store.append(REF, _creator("b"), create=True)
    assert e.value.code == "E_MEASUREMENT_EXISTS"
    assert refs(repo) == before and store.tip(REF) == first


def test_create_refuses_an_existing_ref_even_if_build_does_not_check(repo: Path) -> None:
    store = Store(repo)
    store.append(REF, put({"a": b"1"}, "created"), create=True)
    before = refs(repo)
    with pytest.raises(MonteError) as e:
        store.append(REF, put({"b": b"2"}, "created again"), create=True)
    assert e.value.exit_code == 3  # a refusal, not a crash
    assert refs(repo) == before
    assert git(repo, "rev-list", "--count", SHORT).strip() == "1"


def test_two_racing_creators_exactly_one_wins(repo: Path) -> None:
    """A's build runs, then B creates the ref before A's add_if_new: A must lose, re-run its
    build on B's tip and refuse there."""
    a_store, b_store = Store(repo), Store(repo)  # two writers, two views of the repository
    seen: list[bytes | None] = []
    b_won: list[bytes] = []

    def a_build(snap: Snapshot) -> Change:
        seen.append(snap.commit_id)
        if not b_won:
            b_won.append(b_store.append(REF, _creator("b"), create=True))
        return _creator("a")(snap)

    with pytest.raises(MonteError) as e:
        a_store.append(REF, a_build, create=True)
    assert e.value.code == "E_MEASUREMENT_EXISTS"
    assert seen == [None, b_won[0]]  # re-ran on B's tip
    assert git(repo, "rev-list", "--count", SHORT).strip() == "1"
    assert git(repo, "show", f"{SHORT}:creator") == "b"


# --- compare-and-swap -------------------------------------------------------------------------


def test_a_lost_race_re_runs_build_on_the_new_tip_and_keeps_both_records(repo: Path) -> None:
    mine, theirs = Store(repo), Store(repo)
    mine.append(REF, counting("base"))
    calls: list[bytes | None] = []
    concurrent: list[bytes] = []

    def build(snap: Snapshot) -> Change:
        calls.append(snap.commit_id)
        if not concurrent:  # another writer lands between our read and our compare-and-swap
            concurrent.append(theirs.append(REF, counting("theirs")))
        return counting("mine")(snap)

    new = mine.append(REF, build)
    assert len(calls) == 2 and calls[1] == concurrent[0] != calls[0]
    assert git(repo, "log", "--reverse", "--format=%s", SHORT).splitlines() == \
        ["base is record 1", "theirs is record 2", "mine is record 3"]
    assert git(repo, "rev-parse", f"{new.decode()}^").strip() == concurrent[0].decode()
    assert git(repo, "show", f"{SHORT}:count") == "3"
    assert sorted(git(repo, "ls-tree", "--name-only", f"{SHORT}:by").split()) == \
        ["base", "mine", "theirs"]
    fsck(repo)


WRITER = textwrap.dedent("""
    import os, sys, time
    from monte.ledger.store import Change, Store
    root, ref, tag, k, go = sys.argv[1:6]
    store = Store(root)
    calls = 0

    def build_for(i):
        def build(snap):
            global calls
            calls += 1
            # the counter names its writer, so no two processes write the same object at
            # once (that race has its own test): this one is about the ref
            n = int((snap.read("count") or b"0").split()[0]) + 1
            return Change(summary=f"{tag} {i}",
                          writes={f"w/{tag}/{i:03d}": f"{tag}:{i}".encode(),
                                  "count": f"{n} {tag}".encode()},
                          trailers={"Monte-Event": "append", "Monte-Run": f"{tag}-{i:03d}"})
        return build

    while not os.path.exists(go):
        time.sleep(0.001)
    for i in range(int(k)):
        store.append(ref, build_for(i))
    print(calls)
""")


def test_concurrent_processes_lose_no_record(repo: Path, tmp_path: Path) -> None:
    n, k = 4, 25
    go = tmp_path / "go"
    procs = [subprocess.Popen([sys.executable, "-c", WRITER, str(repo), REF, f"p{j}", str(k),
                               str(go)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True) for j in range(n)]
    time.sleep(0.3)  # let them import and wait at the line
    go.touch()
    outs = [p.communicate(timeout=120) for p in procs]
    failures = [err for p, (_, err) in zip(procs, outs, strict=True) if p.returncode != 0]
    assert not failures, failures[0]
    assert git(repo, "rev-list", "--count", SHORT).strip() == str(n * k)
    # no lost update: every record saw its predecessor's counter
    assert git(repo, "show", f"{SHORT}:count").split()[0] == str(n * k)
    runs = git(repo, "log", "--format=%(trailers:key=Monte-Run,valueonly)", SHORT).split()
    assert sorted(runs) == sorted(f"p{j}-{i:03d}" for j in range(n) for i in range(k))
    files = git(repo, "ls-tree", "-r", "--name-only", f"{SHORT}:w").split()
    assert len(files) == n * k
    chain = first_parents(repo, SHORT)  # linear: nobody forked the ledger
    assert all(len(parents) == (0 if i == 0 else 1) for i, (_, parents) in enumerate(chain))
    calls = sum(int(out) for out, _ in outs)
    assert calls > n * k  # lost races happened, and each one re-ran build on the new tip
    fsck(repo)


def test_append_waits_out_a_ref_lock_held_by_another_process(repo: Path) -> None:
    """git itself (`git update-ref`, `git pack-refs`) and other monte writers hold
    `<ref>.lock` for a moment; an append must retry, not crash."""
    store = Store(repo)
    store.append(REF, put({"a": b"1"}))
    lock = repo / ".git" / (REF + ".lock")
    lock.write_text("")
    timer = threading.Timer(0.3, lock.unlink)
    timer.start()
    try:
        store.append(REF, put({"b": b"2"}))
    finally:
        timer.join()
    assert git(repo, "rev-list", "--count", SHORT).strip() == "2"


def test_append_waits_out_another_writer_writing_the_same_object(repo: Path) -> None:
    """Racing appends often write identical blobs (the same meta.json); the loser of dulwich's
    loose-object lock must wait for the object, not crash."""
    store = Store(repo)
    store.append(REF, put({"a": b"1"}))
    payload = b"the same bytes another writer is writing\n"
    sha = hashlib.sha1(b"blob %d\x00" % len(payload) + payload).hexdigest()
    lock = repo / ".git" / "objects" / sha[:2] / (sha[2:] + ".lock")
    lock.parent.mkdir(exist_ok=True)
    lock.write_text("")  # the other writer is half-way through writing that object
    timer = threading.Timer(0.3, lock.unlink)
    timer.start()
    try:
        store.append(REF, put({"b": payload}))
    finally:
        timer.join()
    assert git(repo, "show", f"{SHORT}:b") == payload.decode()
    fsck(repo)


# --- packing ------------------------------------------------------------------------------------


def _loose_blobs_in_sample_folder(repo: Path, n: int, salt: str = "") -> None:
    """Write ``n`` unreachable loose blobs whose ids start with 17, the folder the store samples
    (as git's gc.auto does) to decide that a repository has accumulated enough loose objects."""
    store = Store(repo).repo.object_store
    i = written = 0
    while written < n:
        data = f"filler {salt}{i}\n".encode()
        i += 1
        if hashlib.sha1(b"blob %d\x00" % len(data) + data).hexdigest().startswith("17"):
            store.add_object(Blob.from_string(data))
            written += 1


def _all_records_readable(repo: Path, expect: int) -> None:
    fresh = Store(repo)
    commits = list(fresh.log(REF))
    assert len(commits) == expect
    snap = fresh.snapshot(REF)
    for i in range(expect):
        assert snap.read(f"r/{i:03d}") == f"record {i}\n".encode()
    # and git reads the same from the packs
    assert git(repo, "show", f"{SHORT}:r/{expect - 1:03d}") == f"record {expect - 1}\n"


def test_enough_loose_objects_get_packed_after_an_append(repo: Path) -> None:
    store = Store(repo)
    for i in range(10):
        store.append(REF, put({f"r/{i:03d}": f"record {i}\n".encode()}, f"record {i}"))
    assert count_objects(repo)["packs"] == 0  # a handful of records is not worth a pack
    _loose_blobs_in_sample_folder(repo, 28)
    store.append(REF, put({"r/010": b"record 10\n"}, "record 10"))  # crosses the threshold
    counts = count_objects(repo)
    assert counts["packs"] >= 1 and counts["count"] == 0, counts
    _all_records_readable(repo, 11)
    fsck(repo)
    # appending on top of a packed history still works
    store.append(REF, put({"r/011": b"record 11\n"}, "record 11"))
    _all_records_readable(repo, 12)
    assert len(git(repo, "log", "--graph", "--oneline", SHORT).splitlines()) == 12


def test_pack_keeps_every_record_and_folds_many_packs(repo: Path) -> None:
    store = Store(repo)
    for i in range(56):
        store.append(REF, put({f"r/{i:03d}": f"record {i}\n".encode()}, f"record {i}"))
        store.pack()
        # a long-lived ledger stays a few packs, not one per pack() call
        assert count_objects(repo)["packs"] <= 51
    counts = count_objects(repo)
    assert counts["count"] == 0 and counts["in-pack"] > 0
    assert counts["packs"] < 56
    _all_records_readable(repo, 56)
    fsck(repo)


PACKER = textwrap.dedent("""
    import os, sys, time
    from monte.ledger.store import Change, Store
    root, ref, go = sys.argv[1:4]
    store = Store(root)
    while not os.path.exists(go):
        time.sleep(0.001)
    store.append(ref, lambda snap: Change(summary=go, writes={"who": f"{ref} {go}".encode()}))
""")


def test_two_writers_that_both_pack_both_succeed(repo: Path, tmp_path: Path) -> None:
    """Two experiments appended at once in one repository both cross the packing threshold.
    A few rounds, so that a scheduler that happens to serialise one round cannot hide a crash."""
    ledgers = ["refs/heads/monte/e1/ledger", "refs/heads/monte/e2/ledger"]
    for round_ in range(3):
        store = Store(repo).repo.object_store
        for i in range(1500):  # enough loose objects that both packers overlap
            store.add_object(Blob.from_string(f"old loose object {round_}.{i}\n".encode()))
        _loose_blobs_in_sample_folder(repo, 28, salt=f"{round_}.")
        go = tmp_path / f"go{round_}"
        procs = [subprocess.Popen([sys.executable, "-c", PACKER, str(repo), ref, str(go)],
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                 for ref in ledgers]
        time.sleep(0.3)
        go.touch()
        outs = [p.communicate(timeout=120) for p in procs]
        failures = [err for p, (_, err) in zip(procs, outs, strict=True) if p.returncode != 0]
        assert not failures, failures[0][-2000:]
        for ref in ledgers:
            assert git(repo, "show", f"{ref}:who") == f"{ref} {go}"
        # a packer that found the other one busy skipped; nothing is stuck: the next pack
        # takes every loose object, reachable or not
        Store(repo).pack()
        assert count_objects(repo)["count"] == 0
        fsck(repo)


# --- git maintenance beside an append -------------------------------------------------------------
# Each test lets the real git do, at the one moment that matters, what `git gc`, `pack-refs`,
# `repack` or `prune` running beside monte did in the stress runs (tests/reliability/
# test_git_maintenance.py): there they hit the window now and then; here, every time.


def _once_at(monkeypatch: pytest.MonkeyPatch, owner: object, name: str, when: Callable[..., bool],
             act: Callable[[], object]) -> list[int]:
    """Run ``act`` once, just before the first call of ``owner.name`` for which ``when`` holds."""
    real = getattr(owner, name)
    fired: list[int] = []

    def wrapped(*a: object, **k: object) -> object:
        if not fired and when(*a, **k):
            fired.append(1)
            act()
        return real(*a, **k)

    monkeypatch.setattr(owner, name, wrapped)
    return fired


def test_an_object_folder_git_removes_under_a_write_is_made_again(repo: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """`git prune-packed` (run by `repack -d` and `gc`) removes empty fan-out folders: one made
    for a new object could be gone before the object's lock was created in it (FileNotFoundError,
    1-16 appends in 300 under a repack loop)."""
    import os

    store = Store(repo)
    store.append(REF, put({"a": b"1"}))
    fired = _once_at(monkeypatch, os, "open", lambda path, *a, **k: os.fsdecode(path).endswith(".lock")
                     and "/objects/" in os.fsdecode(path), lambda: git(repo, "prune-packed"))
    store.append(REF, put({"b": b"a blob in a folder of its own\n"}))
    assert fired
    assert git(repo, "show", f"{SHORT}:b") == "a blob in a folder of its own\n"
    fsck(repo)


def test_a_ref_folder_git_pack_refs_removes_under_an_append_is_made_again(repo: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """`git pack-refs --all` (and `gc`) packs the ledger ref, deletes its loose file and the
    folders left empty: the folder dulwich had just made for the ref's lock was gone."""
    import os

    store = Store(repo)
    store.append(REF, put({"a": b"1"}))
    fired = _once_at(monkeypatch, os, "open", lambda path, *a, **k: os.fsdecode(path).endswith(REF + ".lock"),
                     lambda: git(repo, "pack-refs", "--all"))
    store.append(REF, put({"b": b"2"}))
    assert fired
    assert git(repo, "rev-list", "--count", SHORT).strip() == "2"
    fsck(repo)


def test_an_object_repack_moves_while_it_is_read_is_found(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """dulwich looks in its packs, then for the loose file: `git repack -d` packing the object and
    deleting the loose file between the two looks made a record read as missing (KeyError)."""
    from dulwich.object_store import DiskObjectStore

    Store(repo).append(REF, put({"a": b"the record\n"}))
    store = Store(repo)
    blob = git(repo, "rev-parse", f"{SHORT}:a").strip().encode()
    fired = _once_at(monkeypatch, DiskObjectStore, "_get_loose_object", lambda self, sha: sha == blob,
                     lambda: git(repo, "repack", "-dq"))
    assert store.snapshot(REF).read("a") == b"the record\n"
    loose = repo / ".git" / "objects" / blob.decode()[:2] / blob.decode()[2:]
    assert fired and not loose.exists()  # it was read from the new pack


def test_objects_pruned_before_the_ref_moves_are_written_again(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Until the ref moves, a record's new objects are unreachable, and `git prune --expire=now`
    deletes them: run beside monte, it left the ledger on a missing commit and every command
    failed E_INTERNAL KeyError. The writer still holds them and writes them again."""
    from dulwich.refs import DiskRefsContainer

    store = Store(repo)
    store.append(REF, put({"a": b"1"}))
    fired = _once_at(monkeypatch, DiskRefsContainer, "set_if_equals", lambda *a, **k: True,
                     lambda: git(repo, "prune", "--expire=now"))
    store.append(REF, put({"b": b"2", "c/d": b"a new tree too\n"}))
    assert fired
    fsck(repo)
    fresh = Store(repo).snapshot(REF)
    assert (fresh.read("b"), fresh.read("c/d")) == (b"2", b"a new tree too\n")


def test_a_ledger_on_a_missing_object_is_a_named_refusal(repo: Path, monte) -> None:
    """When the objects went after the writer's check (git documents `prune --expire=now` beside a
    writer as unsafe), monte says what happened: E_INTEGRITY naming the object, the likely cause
    and the fix, from a read, a verify and an append alike; never E_INTERNAL."""
    assert monte("env", "add", "--benchmark", "parity").code == 0
    assert monte("experiment", "init", "exp", "--eval", "parity").code == 0
    tree = git(repo, "rev-parse", "monte/exp/ledger^{tree}").strip()
    (repo / ".git" / "objects" / tree[:2] / tree[2:]).unlink()  # what a racing prune did
    for args in (("status", "--json"), ("ledger", "verify", "--json"), ("nominate", "exp/nosuchrun", "--json")):
        r = monte(*args)
        assert r.code == 5, (args, r.out)
        err = r.json()["error"]
        assert err["code"] == "E_INTEGRITY" and tree[:12] in err["message"], (args, err)
        assert "git prune --expire=now" in err["message"] and "git fetch" in err["fix"], err


def test_a_full_disk_leaves_no_object_lock_behind(repo: Path, tmp_path: Path,
                                                  capfd: pytest.CaptureFixture[str]) -> None:
    """`.git/objects` on a real, full file system: dulwich's loose write failed as it closed the
    file, left its 0-byte `<object>.lock` (`git fsck`: "bad sha1 file", on every fsck after) and
    printed a second error when the interpreter collected it. What monte created, it removes."""
    import errno
    import gc
    import shutil

    objects = repo / ".git" / "objects"
    shutil.copytree(objects, tmp_path / "saved")
    with tmpfs(objects, "1m"):
        shutil.copytree(tmp_path / "saved", objects, dirs_exist_ok=True)
        store = Store(repo)
        store.append(REF, put({"a": b"1"}))
        before = refs(repo)
        filler = fill(objects)
        capfd.readouterr()
        with pytest.raises(OSError) as e:
            store.append(REF, put({"b": b"a small record, as a finish is\n"}))
        assert e.value.errno == errno.ENOSPC
        gc.collect()
        assert not list(objects.rglob("*.lock"))
        assert "Exception ignored" not in capfd.readouterr().err
        assert refs(repo) == before
        filler.unlink()
        fsck(repo)
        store.append(REF, put({"b": b"a small record, as a finish is\n"}))
        fsck(repo)


def test_a_ref_lock_git_holds_through_a_slow_hook_is_never_broken(repo: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """`git pack-refs` holds the ledger's `.lock` (closed, as git does) while its
    reference-transaction hook runs, then deletes the loose ref it has packed. A hook slower than
    the 5 s after which monte breaks a lock nobody holds open (a loaded machine, a slow verify)
    had monte break git's lock and write its record, which git then deleted: the ledger moved
    back to the packed tip and the record was lost. A lock is not broken while git runs here.
    (Those 5 s are 0.5 s here, and the hook sleeps 1 s: the same race, in a tenth of the time.)"""
    from monte.ledger import store as store_module

    monkeypatch.setattr(store_module, "STALE_REF_LOCK_S", 0.5)
    store = Store(repo)
    store.append(REF, put({"a": b"1"}))
    # a slow hook of the user's own, in a repository without monte's (`monte init --no-hooks`;
    # monte's would refuse git's deletion of the loose ref once monte had moved it, and so hide it)
    hook = repo / ".git" / "hooks" / "reference-transaction"
    hook.write_text('#!/bin/sh\ninput=$(cat)\nif [ "$1" = prepared ] && printf "%s" "$input" | '
                    f'grep -q "{REF}"; then sleep 1; fi\nexit 0\n')
    hook.chmod(0o755)
    packer = subprocess.Popen(["git", "-C", str(repo), "pack-refs", "--all"])
    try:
        lock = repo / ".git" / (REF + ".lock")
        deadline = time.monotonic() + 30
        while not lock.exists():  # git holds the lock and sleeps in its hook
            assert time.monotonic() < deadline and packer.poll() is None
            time.sleep(0.01)
        store.append(REF, put({"b": b"2"}))
    finally:
        packer.wait(timeout=60)
    assert git(repo, "rev-list", "--count", SHORT).strip() == "2"
    assert git(repo, "show", f"{SHORT}:b") == "2"
    fsck(repo)
