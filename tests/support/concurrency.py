"""Concurrent writers, for real: processes, not threads. The helpers of
``tests/reliability/test_concurrency.py`` and of its long campaign (``bench/concurrency_campaign.py``):
appenders, the race for the final claim, and two clones sharing one bucket."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .helpers import append_evals, git, new_machine

# --- appenders ----------------------------------------------------------------------------------

WRITER = textwrap.dedent("""
    import json, os, sys, time
    from monte.ledger.experiment import Ledger
    from monte.ledger.ids import new_run_id
    from monte.ledger.records import RunRow
    from monte.ledger.store import Store
    root, exp, runs, go, out = sys.argv[1:6]
    ledger = Ledger(Store(root), exp)
    made, builds = [], 0

    def started(snap, seq, rid):
        global builds
        builds += 1
        return RunRow(run=rid, experiment=exp, kind="eval", status="started", cohort="c", exam="parity",
                      split="dev", created_at="t")

    def finished(snap, seq, row):
        global builds
        builds += 1
        return row.model_copy(update={"status": "failed", "error": "x"})

    while not os.path.exists(go):
        time.sleep(0.001)
    t0 = time.perf_counter()
    for _ in range(int(runs)):
        rid = new_run_id()
        row = ledger.append_row(lambda snap, seq, rid=rid: started(snap, seq, rid), event="started",
                                summary=lambda r: f"eval {r.run} started")
        ledger.append_row(lambda snap, seq, row=row: finished(snap, seq, row), event="failed",
                          summary=lambda r: f"eval {r.run} failed")
        made.append(rid)
    with open(out, "w") as f:
        json.dump({"runs": made, "builds": builds, "seconds": time.perf_counter() - t0}, f)
""")


def fsck(repo: Path) -> str:
    """``git fsck --strict``: '' when whole, else what it said."""
    r = subprocess.run(["git", "-C", str(repo), "fsck", "--strict", "--no-dangling"], capture_output=True, text=True)
    problems = [ln for ln in r.stderr.splitlines() if not ln.startswith("notice:")]
    return "" if r.returncode == 0 and not problems else r.stdout + r.stderr


def monte_cli(repo: Path, *args: str, timeout: float = 600, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", "from monte.cli.main import main; main()", *args], cwd=repo,
                          capture_output=True, text=True, timeout=timeout, env={**os.environ, **(env or {})})


def run_appenders(repo: Path, exp: str, writers: int, runs_each: int, work: Path) -> dict[str, Any]:
    """``writers`` processes, released together, each appending ``runs_each`` runs (2 records
    each). Returns what they reported and what the repository holds."""
    work.mkdir(parents=True, exist_ok=True)
    go = work / "go"
    before = int(git(repo, "rev-list", "--count", f"monte/{exp}/ledger").strip())
    outs = [work / f"w{j}.json" for j in range(writers)]
    procs = [subprocess.Popen([sys.executable, "-c", WRITER, str(repo), exp, str(runs_each), str(go), str(o)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for o in outs]
    time.sleep(0.5 + 0.1 * writers)  # imported and waiting at the line
    t0 = time.perf_counter()
    go.touch()
    errors = []
    for p in procs:
        _, err = p.communicate(timeout=900)
        if p.returncode != 0:
            errors.append(err[-2000:])
    wall = time.perf_counter() - t0
    reports = [json.loads(o.read_text()) for o in outs if o.exists()]
    claimed = [r for rep in reports for r in rep["runs"]]
    return {"errors": errors, "wall_s": wall, "claimed": claimed, "before": before,
            "builds": sum(rep["builds"] for rep in reports), **ledger_census(repo, exp)}


def ledger_census(repo: Path, exp: str) -> dict[str, Any]:
    """What the ledger holds: commits, records per run (trailers), rows of the tip, linearity."""
    from monte.ledger.experiment import Ledger
    from monte.ledger.store import Store

    commits = int(git(repo, "rev-list", "--count", f"monte/{exp}/ledger").strip())
    trailers = git(repo, "log", "--format=%(trailers:key=Monte-Run,valueonly)", f"monte/{exp}/ledger").split()
    per_run: dict[str, int] = {}
    for t in trailers:
        per_run[t] = per_run.get(t, 0) + 1
    rows = Ledger(Store(repo), exp).rows()
    merges = int(git(repo, "rev-list", "--count", "--merges", f"monte/{exp}/ledger").strip())
    meta = json.loads(git(repo, "show", f"monte/{exp}/ledger:meta.json"))["records"]
    return {"commits": commits, "per_run": per_run, "rows": [r.run for r in rows], "merges": merges, "meta": meta}


def check_appenders(res: dict[str, Any], writers: int, runs_each: int) -> dict[str, int]:
    """The figures, and every property asserted: nothing lost, nothing duplicated."""
    assert not res["errors"], res["errors"][0]
    expected = writers * runs_each
    claimed = res["claimed"]
    appended = 2 * expected
    found = res["commits"] - res["before"]
    lost = [r for r in claimed if res["per_run"].get(r, 0) < 2]
    dup = [r for r, n in res["per_run"].items() if n > 2]
    figures = {"records_appended": appended, "records_found": found, "records_lost": appended - found,
               "runs_lost": len(lost), "runs_duplicated": len(dup), "rows": len(res["rows"]),
               "lost_races": res["builds"] - appended}
    assert len(claimed) == len(set(claimed)) == expected
    assert found == appended and not lost and not dup, figures
    assert set(claimed) <= set(res["rows"]) and len(res["rows"]) == len(set(res["rows"]))
    assert res["merges"] == 0 and res["meta"] == res["commits"], figures  # linear; meta counts every record
    return figures


# --- the final claim ----------------------------------------------------------------------------


def ready_for_claim(repo: Path, run: Callable[..., Any], base_model: Path, weights: Path) -> str:
    """Both baselines, a checkpoint (a tiny model of another seed) and its dev eval: the next
    ``monte eval --split test`` is the final claim. ``run(*args)`` runs monte, returns (code, out)."""
    from .helpers import checkpoint

    steps = [("env", "add", "--server", "parity", "--dev", "parity", "--test", "parity"),
             ("experiment", "init", "exp", "--eval", "parity", "--model", str(base_model)),
             ("eval", "--yes"), ("eval", "--split", "test", "--yes")]
    for args in steps:
        code, out = run(*args, "--json")
        assert code == 0, (args, out)
    ck = checkpoint(repo, weights)
    code, out = run("eval", "--checkpoint", f"{ck}@50", "--yes", "--json")
    assert code == 0, out
    return ck


def claim_race(repo: Path, racers: int) -> dict[str, Any]:
    """``racers`` processes run the final claim at once; returns exit codes, error codes, claims."""
    results: list[subprocess.CompletedProcess[str]] = []
    lock = threading.Lock()

    def one() -> None:
        p = monte_cli(repo, "eval", "--split", "test", "--yes", "--json", env={"OMP_NUM_THREADS": "1"})
        with lock:
            results.append(p)

    t0 = time.perf_counter()
    threads = [threading.Thread(target=one) for _ in range(racers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    codes = []
    for p in results:
        try:
            codes.append(json.loads(p.stdout)["error"]["code"] if p.returncode else "ok")
        except (ValueError, KeyError, TypeError):
            codes.append(f"unreadable: {p.stdout[-300:]} {p.stderr[-300:]}")
    status = json.loads(monte_cli(repo, "status", "--json").stdout)
    claims = [r for r in status["rows"] if r["role"] == "claim"]
    return {"exits": sorted(p.returncode for p in results), "codes": sorted(codes), "claims": len(claims),
            "winners": sum(1 for p in results if p.returncode == 0), "wall_s": time.perf_counter() - t0,
            "tracebacks": sum("Traceback" in p.stdout + p.stderr for p in results)}


def check_race(res: dict[str, Any], racers: int) -> None:
    assert res["winners"] == 1 and res["claims"] == 1, res
    assert res["exits"] == [0] + [3] * (racers - 1), res
    assert res["codes"] == ["E_SEALED"] * (racers - 1) + ["ok"], res
    assert res["tracebacks"] == 0, res


# --- one bucket, two clones ------------------------------------------------------------------------


clone = new_machine  # the campaign calls it tc.clone (bench/concurrency_campaign.py)


def runs_in(repo: Path, exp: str = "exp") -> list[str]:
    from monte.ledger.experiment import Ledger
    from monte.ledger.store import Store

    return [r.run for r in Ledger(Store(repo), exp).rows()]


def at_once(*jobs: tuple[Path, tuple[str, ...]]) -> list[subprocess.CompletedProcess[str]]:
    """Several monte commands in several clones, started together."""
    procs = [subprocess.Popen([sys.executable, "-c", "from monte.cli.main import main; main()", *args], cwd=cwd,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for cwd, args in jobs]
    out = []
    for p, (_, args) in zip(procs, jobs, strict=True):
        o, e = p.communicate(timeout=600)
        out.append(subprocess.CompletedProcess(list(args), p.returncode, o, e))
    return out


def bucket_rounds(laptop: Path, box: Path, rounds: int, per_round: int) -> dict[str, Any]:
    """Each round: both clones append, push at once, then sync at once. Returns the figures."""
    made: list[str] = []
    merged = 0
    for _ in range(rounds):
        made += append_evals(laptop, per_round) + append_evals(box, per_round)
        pushes = at_once((laptop, ("push", "--json")), (box, ("push", "--json")))
        for p in pushes:
            assert p.returncode == 0, p.stdout + p.stderr
            merged += bool(json.loads(p.stdout).get("merged"))
        syncs = at_once((laptop, ("sync", "--json")), (box, ("sync", "--json")))
        for p in syncs:
            assert p.returncode == 0, p.stdout + p.stderr
    # the last round's second sync may have missed the other side's last merge: settle once more
    for repo in (laptop, box):
        p = monte_cli(repo, "push", "--json")
        assert p.returncode == 0, p.stdout + p.stderr
    for repo in (laptop, box):
        p = monte_cli(repo, "sync", "--json")
        assert p.returncode == 0, p.stdout + p.stderr
    return {"appended_runs": len(made), "made": made, "push_merges": merged}


def check_union(made: list[str], *repos: Path) -> dict[str, int]:
    lost = 0
    for repo in repos:
        rows = runs_in(repo)
        assert len(rows) == len(set(rows)), f"{repo}: a run is duplicated"
        missing = set(made) - set(rows)
        lost += len(missing)
        assert not missing and set(rows) == set(made), f"{repo}: {len(missing)} run(s) lost"
        p = monte_cli(repo, "ledger", "verify", "--json")
        assert p.returncode == 0, p.stdout
        assert not fsck(repo), fsck(repo)
    return {"runs_lost": lost, "clones": len(repos)}
