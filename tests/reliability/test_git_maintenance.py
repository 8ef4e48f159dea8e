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
The helpers here are the campaign's too.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

from test_concurrency import fsck, ledger_census, monte_cli

#: what each maintenance loop runs, by name
MAINTENANCE = {
    "gc": ["gc", "-q", "--aggressive"],
    "pack-refs": ["pack-refs", "--all"],
    "repack": ["repack", "-adq"],
    "prune": ["prune", "--expire=now"],
}

LOOP = textwrap.dedent("""
    import json, os, subprocess, sys
    repo, stop, out, *cmd = sys.argv[1:]
    runs = failed = 0
    why = {}
    while not os.path.exists(stop):
        r = subprocess.run(["git", "-C", repo, *cmd], capture_output=True, text=True)
        runs += 1
        if r.returncode:  # git's own business (another gc running, a ref locked by monte): counted
            failed += 1
            lines = r.stderr.strip().splitlines() or ["exit %d" % r.returncode]
            line = " / ".join(x for x in lines if "monte" in x)[:400] or lines[-1][:200]
            why[line] = why.get(line, 0) + 1
    with open(out, "w") as f:
        json.dump({"runs": runs, "failed": failed, "why": why}, f)
""")

#: One appending process: ``runs`` eval runs, a ``started`` and a ``failed`` record each, through
#: the store's own API (as tests/reliability/test_concurrency.py's writers). Unlike those, it
#: goes on after a failed append and reports every failure: a MonteError by its code, anything
#: else as UNHANDLED (what the CLI would have printed as E_INTERNAL).
WRITER = textwrap.dedent("""
    import json, os, sys, time, traceback
    from monte.errors import MonteError
    from monte.ledger.experiment import Ledger
    from monte.ledger.ids import new_run_id
    from monte.ledger.records import RunRow
    from monte.ledger.store import Store
    root, exp, runs, go, out = sys.argv[1:6]
    ledger = Ledger(Store(root), exp)
    landed, errors = {}, []

    def started(rid):
        return RunRow(run=rid, experiment=exp, kind="eval", status="started", cohort="c", exam="parity",
                      split="dev", created_at="t")

    def append(rid, build, event):
        try:
            row = ledger.append_row(build, event=event, summary=lambda r: f"eval {r.run} {event}")
        except MonteError as e:
            errors.append({"code": e.code, "message": e.message[:300]})
            return None
        except Exception as e:
            errors.append({"code": "UNHANDLED", "message": f"{type(e).__name__}: {e}"[:300],
                           "where": traceback.format_exc()[-1500:]})
            return None
        landed[rid] = landed.get(rid, 0) + 1
        return row

    while not os.path.exists(go):
        time.sleep(0.001)
    for _ in range(int(runs)):
        rid = new_run_id()
        row = append(rid, lambda snap, seq, rid=rid: started(rid), "started")
        if row is not None:
            append(rid, lambda snap, seq, row=row: row.model_copy(update={"status": "failed", "error": "x"}),
                   "failed")
    with open(out, "w") as f:
        json.dump({"landed": landed, "errors": errors}, f)
""")


def beside(repo: Path, kinds: list[str], work: Path) -> tuple[list[subprocess.Popen[str]], Path]:
    """Start one loop per kind of maintenance on ``repo``; touch the returned path to stop them."""
    work.mkdir(parents=True, exist_ok=True)
    stop = work / "stop-maintenance"
    loops = [subprocess.Popen([sys.executable, "-c", LOOP, str(repo), str(stop), str(work / f"{k}.json"),
                               *MAINTENANCE[k]], text=True) for k in kinds]
    return loops, stop


def appenders_beside(repo: Path, exp: str, writers: int, runs_each: int, kinds: list[str],
                     work: Path) -> dict[str, Any]:
    """``writers`` processes, released together, each appending ``runs_each`` runs (2 records each)
    while the ``kinds`` of git maintenance loop beside them. Returns the figures."""
    work.mkdir(parents=True, exist_ok=True)
    go = work / "go"
    before = int(subprocess.run(["git", "-C", str(repo), "rev-list", "--count", f"monte/{exp}/ledger"],
                                capture_output=True, text=True, check=True).stdout)
    outs = [work / f"w{j}.json" for j in range(writers)]
    procs = [subprocess.Popen([sys.executable, "-c", WRITER, str(repo), exp, str(runs_each), str(go), str(o)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for o in outs]
    loops, stop = beside(repo, kinds, work)
    time.sleep(0.5 + 0.1 * writers)  # imported and waiting at the line; the loops already at work
    t0 = time.perf_counter()
    go.touch()
    crashed = []
    for p in procs:
        _, err = p.communicate(timeout=900)
        if p.returncode != 0:
            crashed.append(err[-2000:])
    wall = time.perf_counter() - t0
    stop.touch()
    for loop in loops:
        loop.wait(timeout=300)
    maintenance = {k: json.loads((work / f"{k}.json").read_text()) for k in kinds}
    reports = [json.loads(o.read_text()) for o in outs if o.exists()]
    landed: dict[str, int] = {}
    for rep in reports:
        landed.update(rep["landed"])
    errors = [e for rep in reports for e in rep["errors"]]
    try:
        census: dict[str, Any] = ledger_census(repo, exp)
        per_run = census["per_run"]
    except Exception as e:  # noqa: BLE001 - a ledger that cannot be read is a figure, too
        census, per_run = {"unreadable": f"{type(e).__name__}: {e}"[:300]}, {}
    appended = sum(landed.values())
    lost = sum(max(0, n - per_run.get(r, 0)) for r, n in landed.items())
    codes: dict[str, int] = {}
    for e in errors:
        codes[e["code"]] = codes.get(e["code"], 0) + 1
    return {"writers": writers, "records_tried": 2 * writers * runs_each, "records_appended": appended,
            "records_lost": lost, "records_found": census.get("commits", before) - before,
            "duplicated": sum(1 for r, n in per_run.items() if r in landed and n > landed[r]),
            "codes": codes, "unhandled": [e for e in errors if e["code"] == "UNHANDLED"][:5],
            "crashed": crashed, "wall_s": round(wall, 2), "maintenance": maintenance, "census": census}


def after_checks(repo: Path) -> dict[str, Any]:
    """verify, fsck and status after a run: each an exit status and, if refused, its code."""
    out: dict[str, Any] = {}
    for name, args in (("verify", ("ledger", "verify", "--all", "--json")), ("status", ("status", "--json"))):
        p = monte_cli(repo, *args)
        try:
            code = json.loads(p.stdout)["error"]["code"] if p.returncode else "ok"
        except (ValueError, KeyError, TypeError):
            code = f"unreadable: {p.stdout[-200:]} {p.stderr[-300:]}"
        out[name] = {"exit": p.returncode, "code": code}
    out["fsck"] = fsck(repo) or "ok"
    return out


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
    from helpers import append_evals

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
