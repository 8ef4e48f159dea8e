"""Git maintenance beside monte: appenders while real ``git gc``, ``pack-refs``, ``repack`` and
``prune`` run in loops beside them. The helpers of ``tests/reliability/test_git_maintenance.py``
and of the long campaign's git maintenance part (``bench/fault_campaign.py``)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

from .concurrency import fsck, ledger_census, monte_cli

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
    for err in errors:
        codes[err["code"]] = codes.get(err["code"], 0) + 1
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
