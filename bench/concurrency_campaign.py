"""Campaign: concurrent writers on one ledger, races for the final claim, two clones on one bucket.

The long version of ``tests/reliability/test_concurrency.py`` (whose helpers, ``tests/support/concurrency.py``, this runs):

1. **Appenders**: per trial, a fresh repository and W processes (default 8) released together,
   each appending R eval runs (a ``started`` and a ``failed`` record each: 2R records, default
   100) through ``Ledger(Store(repo), exp).append_row``. Counted: records appended, records the
   ledger holds (``git rev-list --count``), records lost, runs lost or duplicated, lost
   compare-and-swap races (builds re-run on a new tip); ``monte ledger verify`` and
   ``git fsck --strict`` after each trial.
2. **The final claim**: per trial, K processes (default 4) run ``monte eval --split test`` on a
   ready experiment (both baselines, a checkpoint and its dev eval; prepared once, copied per
   trial). Counted: winners per race (must be 1), the losers' codes (must be ``E_SEALED``).
3. **One bucket, two clones** (the GCS emulator): per trial, a laptop and a box append, push at
   the same moment, then sync at the same moment, for several rounds; a third clone syncs at the
   end. Counted: runs appended, runs lost (must be 0), pushes that had to merge.

    .venv/bin/python bench/concurrency_campaign.py                     # 5 + 10 + 3 trials
    .venv/bin/python bench/concurrency_campaign.py --quick             # 1 + 1 + 1, tiny: a smoke run
    .venv/bin/python bench/concurrency_campaign.py --json-out /tmp/concurrency.json
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # monte and tests.support, as packages

from tests.support import concurrency as tc  # noqa: E402


def _scrub_env(home: Path) -> None:
    from tests.support.helpers import PINNED_ENV

    home.mkdir(parents=True, exist_ok=True)
    os.environ.update(PINNED_ENV)
    os.environ.update({"HOME": str(home), "XDG_CONFIG_HOME": str(home / ".config"),
                       "XDG_CACHE_HOME": str(home / ".cache"), "OMP_NUM_THREADS": "1"})
    for k in ("MONTE_DATA_ROOT", "GIT_DIR", "GIT_WORK_TREE", "MONTE_HOOKS", "MONTE_VAULT", "MONTE_BUCKET",
              "MONTE_DEBUG", "MONTE_GCS_KEY_FILE", "MONTE_GCS_BOX_KEY_FILE", "MONTE_GCS_KEY_OP",
              "MONTE_GCS_BOX_KEY_OP"):
        os.environ.pop(k, None)


def _ok(repo: Path, *args: str) -> tuple[int, str]:
    p = tc.monte_cli(repo, *args)
    if p.returncode != 0:
        raise RuntimeError(f"monte {' '.join(args)} in {repo} failed: {p.stdout[-800:]} {p.stderr[-800:]}")
    return p.returncode, p.stdout


def _in_process(*args: str) -> tuple[int, str]:
    """monte in this process, in the cwd (as the tests' ``monte`` fixture runs it): for setup only,
    where one interpreter (one torch import) for all the commands saves seconds a command."""
    from monte.cli.main import main

    out = io.StringIO()
    code = 0
    with contextlib.redirect_stdout(out):
        try:
            main(list(args))
        except SystemExit as e:
            code = int(e.code or 0)
    return code, out.getvalue()


def clone(laptop: Path, dest: Path) -> Path:
    """Another machine (the tests' ``tc.clone``). It makes one by deleting the copy's monte refs
    with plain git, which monte's git hooks (installed by ``monte init``) refuse by design; a real
    second machine never had those refs. So the hooks are off for that scaffolding only."""
    os.environ["MONTE_HOOKS"] = "off"
    try:
        return tc.clone(laptop, dest)
    finally:
        del os.environ["MONTE_HOOKS"]


def _setup(repo: Path, *args: str) -> None:
    """A setup command in this process, in ``repo``: a fresh interpreter a command costs ~1 s
    under load, and none of these is what a trial measures."""
    cwd = os.getcwd()
    os.chdir(repo)
    try:
        code, out = _in_process(*args)
    finally:
        os.chdir(cwd)
    if code:
        raise RuntimeError(f"monte {' '.join(args)} in {repo} failed ({code}): {out[-800:]}")


def new_repo(where: Path, *, experiment: bool = True) -> Path:
    repo = where / "repo"
    repo.mkdir(parents=True)
    subprocess.run(["git", "init", "-q", "-b", "main", str(repo)], check=True)
    _setup(repo, "init")
    if experiment:
        _setup(repo, "env", "add", "--benchmark", "parity")
        _setup(repo, "experiment", "init", "exp", "--eval", "parity")
    return repo


def appenders(work: Path, trials: int, writers: int, runs_each: int) -> dict[str, Any]:
    rows = []
    for t in range(trials):
        repo = new_repo(work / f"append-{t}")
        res = tc.run_appenders(repo, "exp", writers, runs_each, work / f"append-{t}" / "w")
        try:
            figures: dict[str, Any] = tc.check_appenders(res, writers, runs_each)
            ok = True
        except AssertionError as e:
            figures = {"error": str(e)[:500], "records_appended": 2 * writers * runs_each,
                       "records_found": res["commits"] - res["before"],
                       "records_lost": 2 * writers * runs_each - (res["commits"] - res["before"])}
            ok = False
        verify = tc.monte_cli(repo, "ledger", "verify", "--json").returncode == 0
        fsck = tc.fsck(repo)
        figures.update(trial=t, ok=ok and verify and not fsck, verify=verify, fsck=fsck or "ok",
                       wall_s=round(res["wall_s"], 2),
                       records_per_s=round(2 * writers * runs_each / res["wall_s"], 1))
        rows.append(figures)
        print(f"  appenders trial {t}: {figures.get('records_found')}/{figures['records_appended']} records, "
              f"lost {figures['records_lost']}, lost races {figures.get('lost_races')}, "
              f"{figures['wall_s']} s, verify {'ok' if verify else 'FAILED'}, fsck {fsck or 'ok'}", flush=True)
        shutil.rmtree(work / f"append-{t}", ignore_errors=True)
    return {"trials": trials, "writers": writers, "records_each": 2 * runs_each,
            "records_appended": sum(r["records_appended"] for r in rows),
            "records_lost": sum(r["records_lost"] for r in rows),
            "runs_duplicated": sum(r.get("runs_duplicated", 0) for r in rows),
            "lost_races": sum(r.get("lost_races", 0) for r in rows),
            "all_ok": all(r["ok"] for r in rows), "per_trial": rows}


def races(work: Path, trials: int, racers: int) -> dict[str, Any]:
    from monte.models.tiny import init_model

    models = work / "models"
    init_model(models / "seed0", seed=0)
    init_model(models / "seed1", seed=1)
    ready = new_repo(work / "race-ready", experiment=False)
    cwd = os.getcwd()
    os.chdir(ready)
    try:
        ck = tc.ready_for_claim(ready, _in_process, models / "seed0", models / "seed1")
    finally:
        os.chdir(cwd)
    rows = []
    for t in range(trials):
        repo = work / f"race-{t}" / "repo"
        shutil.copytree(ready, repo, symlinks=True)
        res = tc.claim_race(repo, racers)
        try:
            tc.check_race(res, racers)
            ok = True
        except AssertionError:
            ok = False
        verify = tc.monte_cli(repo, "ledger", "verify", "--json").returncode == 0
        rows.append({"trial": t, "ok": ok and verify, "winners": res["winners"], "claims": res["claims"],
                     "codes": res["codes"], "exits": res["exits"], "wall_s": round(res["wall_s"], 1),
                     "verify": verify})
        print(f"  race trial {t}: winners {res['winners']}, claims {res['claims']}, codes {res['codes']}, "
              f"{res['wall_s']:.1f} s, verify {'ok' if verify else 'FAILED'}", flush=True)
        shutil.rmtree(work / f"race-{t}", ignore_errors=True)
    return {"trials": trials, "racers": racers, "checkpoint": ck,
            "winners_per_race": [r["winners"] for r in rows],
            "loser_codes": sorted({c for r in rows for c in r["codes"] if c != "ok"}),
            "all_ok": all(r["ok"] for r in rows), "per_trial": rows}


def buckets(work: Path, trials: int, rounds: int, per_round: int) -> dict[str, Any]:
    from tests.support.gcs_emulator import Emulator, write_fake_key

    emu = Emulator(work / "gcs-emulator")
    key = write_fake_key(work / "gcs-key.json")
    os.environ.update({"STORAGE_EMULATOR_HOST": emu.host, "GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT": "false",
                       "MONTE_GCS_RETRY_S": "5", "MONTE_GCS_BOX_KEY_FILE": str(key), "MONTE_GCS_KEY_FILE": str(key)})
    rows = []
    try:
        for t in range(trials):
            where = work / f"bucket-{t}"
            laptop = new_repo(where)
            _setup(laptop, "config", "set", "bucket", f"gs://{emu.create_bucket()}/results")
            _ok(laptop, "push")
            box = clone(laptop, where / "box")
            _ok(box, "sync")
            t0 = time.perf_counter()
            res = tc.bucket_rounds(laptop, box, rounds, per_round)
            third = clone(laptop, where / "third")
            _ok(third, "sync")
            try:
                figures: dict[str, Any] = tc.check_union(res["made"], laptop, box, third)
                ok = True
            except AssertionError as e:
                figures = {"error": str(e)[:500], "runs_lost": -1}
                ok = False
            rows.append({"trial": t, "ok": ok, "rounds": rounds, "runs_appended": res["appended_runs"],
                         "push_merges": res["push_merges"], "wall_s": round(time.perf_counter() - t0, 1), **figures})
            print(f"  bucket trial {t}: {res['appended_runs']} runs over {rounds} rounds, "
                  f"lost {figures['runs_lost']}, pushes that merged {res['push_merges']}, "
                  f"{rows[-1]['wall_s']} s", flush=True)
            shutil.rmtree(where, ignore_errors=True)
    finally:
        emu.kill()
    return {"trials": trials, "rounds": rounds, "runs_per_clone_per_round": per_round,
            "runs_appended": sum(r["runs_appended"] for r in rows),
            "runs_lost": sum(max(r["runs_lost"], 0) for r in rows), "push_merges": sum(r["push_merges"] for r in rows),
            "all_ok": all(r["ok"] for r in rows), "per_trial": rows}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    # (default, --quick) of each size; a size given on the command line wins over both
    sizes = {"append_trials": (5, 1), "writers": (8, 4), "records": (100, 10), "race_trials": (10, 1),
             "racers": (4, 2), "bucket_trials": (3, 1), "rounds": (5, 1), "per_round": (5, 2)}
    ap.add_argument("--quick", action="store_true",
                    help="smoke run: 1 trial of 4 x 10 records, 1 race of 2, 1 bucket round of 2 runs a clone")
    ap.add_argument("--append-trials", type=int)
    ap.add_argument("--writers", type=int)
    ap.add_argument("--records", type=int, help="records per writer (even: 2 per run)")
    ap.add_argument("--race-trials", type=int)
    ap.add_argument("--racers", type=int)
    ap.add_argument("--bucket-trials", type=int)
    ap.add_argument("--rounds", type=int)
    ap.add_argument("--per-round", type=int)
    ap.add_argument("--json-out", type=Path)
    a = ap.parse_args()
    for name, (full, quick) in sizes.items():
        if getattr(a, name) is None:
            setattr(a, name, quick if a.quick else full)
    work = Path(tempfile.mkdtemp(prefix="monte-concurrency-"))
    _scrub_env(work / "home")
    t0 = time.perf_counter()
    print(f"appenders: {a.append_trials} trial(s) of {a.writers} x {a.records} records", flush=True)
    app = appenders(work, a.append_trials, a.writers, a.records // 2)
    print(f"final claim: {a.race_trials} race(s) of {a.racers} processes", flush=True)
    race = races(work, a.race_trials, a.racers)
    print(f"one bucket: {a.bucket_trials} trial(s) of 2 clones x {a.rounds} rounds x {a.per_round} runs", flush=True)
    bucket = buckets(work, a.bucket_trials, a.rounds, a.per_round)
    summary = {"when": datetime.now(UTC).isoformat(timespec="seconds"),
               "machine": f"{platform.machine()} {os.cpu_count()} CPUs, Python {platform.python_version()}",
               "wall_s": round(time.perf_counter() - t0, 1), "appenders": app, "final_claim": race, "bucket": bucket}
    print()
    print("| part | trials | appended | lost | other |")
    print("|---|---|---|---|---|")
    rps = [r["records_per_s"] for r in app["per_trial"]]
    print(f"| appenders ({a.writers} processes) | {app['trials']} | {app['records_appended']} records | "
          f"{app['records_lost']} | {app['lost_races']} lost CAS races re-applied; "
          f"median {statistics.median(rps) if rps else 0:.0f} records/s |")
    print(f"| final claim ({a.racers} processes) | {race['trials']} | - | - | winners per race "
          f"{race['winners_per_race']}; losers {race['loser_codes']} |")
    print(f"| one bucket, 2 clones | {bucket['trials']} | {bucket['runs_appended']} runs | {bucket['runs_lost']} | "
          f"{bucket['push_merges']} pushes merged a moved bucket |")
    ok = app["all_ok"] and race["all_ok"] and bucket["all_ok"]
    print(f"\nall properties held: {ok}  ({summary['wall_s']} s)")
    if a.json_out:
        a.json_out.write_text(json.dumps(summary, indent=2))
    shutil.rmtree(work, ignore_errors=True)
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
