"""Crash campaign: SIGKILL monte commands at random moments, many times, and count what breaks.

The long version of ``tests/reliability/test_crash.py`` (the harness and every check are in
``tests/support/crashhelp.py``). For each command (``eval`` on dev, ``eval-test``: the test@0
read, ``train``: a 4-step SFT chunk, ``env-add``, ``dataset-add``: half of them with a local
Vault, ``push``: 30 new runs to a local-folder results bucket) it

1. builds a template repository once (tiny model, trainable ``parity`` environment, SFT dataset,
   experiment with 4-step chunks, baselines, one trained chunk, a first push), timing each
   command kind once: that is the kill window;
2. runs ``--trials`` trials per command, each in a fresh copy: the command starts as a real
   subprocess in its own session and its process group is SIGKILLed after a delay drawn
   uniformly from ``[0, typical duration]`` (RNG seeded from ``--seed`` and the command name);
3. then runs every crash point of the command once (unless ``--no-points``): kills at named
   functions, the windows of microseconds a uniform kill seldom hits;
4. prints per command: trials, where the kills landed (``before`` the command's first durable
   effect / ``mid`` / ``after`` its last), failures found (by the check that failed), records
   lost (must be 0), and the exit codes of the next command.

    .venv/bin/python bench/crash_campaign.py --trials 50 --json-out /tmp/crash.json
    .venv/bin/python bench/crash_campaign.py --trials 5 --commands env-add,push --seed 7 --jobs 2
    .venv/bin/python bench/crash_campaign.py --quick     # the template (fresh half), one env-add trial, seed 1

Exit status: 0 when no trial failed, 1 otherwise.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import shutil
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # monte and tests.support, as packages

from tests.support import crashhelp as ch  # noqa: E402


def _one(trial: ch.Trial, tpl_root: str, work: str, keep_failed: bool) -> ch.Trial:
    tpl = ch.Template.load(Path(tpl_root))
    folder = Path(work) / f"{trial.command}-{'p' if trial.crash_point else 'r'}{trial.index}"
    try:
        ch.run_trial(trial, tpl, folder)
    except Exception as e:  # noqa: BLE001 - a harness error is reported as the trial's failure
        trial.failures.append(ch.Failure("harness", f"{type(e).__name__}: {e}"))
    if not (keep_failed and trial.failures):
        shutil.rmtree(folder, ignore_errors=True)
    return trial


def _line(t: ch.Trial) -> str:
    how = f"point {t.label!r}" if t.crash_point else f"delay {t.delay:.3f}s"
    status = "ok" if not t.failures else "FAIL " + "; ".join(f"[{f.check}] {f.detail[:300]}" for f in t.failures)
    return (f"{t.command:11s} #{t.index:<3d} {how:48s} killed={str(t.killed):5s} at {t.elapsed:7.3f}s "
            f"moment={t.moment or '-':6s} next={t.next_code}{' ' + t.next_error if t.next_error else ''} "
            f"vault={t.vault} ({t.seconds:.1f}s) {status}")


def _table(summary: dict[str, Any], title: str) -> list[str]:
    out = [title, f"  {'command':11s} {'trials':>6s} {'killed':>6s} {'before':>6s} {'mid':>5s} {'after':>5s} "
           f"{'failed':>6s} {'lost':>5s} {'secs':>7s}  failures by check / next command exit"]
    for cmd, s in summary.items():
        m = s["moments"]
        fails = ", ".join(f"{k}: {v}" for k, v in sorted(s["failures"].items())) or "none"
        nxt = ", ".join(f"{k}: {v}" for k, v in sorted(s["next_codes"].items()))
        out.append(f"  {cmd:11s} {s['trials']:6d} {s['killed']:6d} {m.get('before', 0):6d} {m.get('mid', 0):5d} "
                   f"{m.get('after', 0):5d} {s['failed_trials']:6d} {s['records_lost']:5d} {s['seconds']:7.1f}  "
                   f"{fails} / next: {nxt}")
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true",
                    help="smoke run: the template, then one env-add trial, no crash points, seed 1")
    ap.add_argument("--trials", type=int, default=None, help="random-moment trials per command (default 50)")
    ap.add_argument("--commands", default=None,
                    help=f"comma-separated, of {', '.join(ch.COMMANDS)} (default: all)")
    ap.add_argument("--seed", type=int, default=None, help="the RNG seed (default: drawn, and printed)")
    ap.add_argument("--jobs", type=int, default=1, help="trials run at once (each in its own folder)")
    ap.add_argument("--no-points", action="store_true", help="skip the crash-point trials")
    ap.add_argument("--work", type=Path, default=None, help="where trials run (default: a temporary folder)")
    ap.add_argument("--model", type=Path, default=None, help="an existing model folder (default: monte model init)")
    ap.add_argument("--keep-failed", action="store_true", help="keep the folders of failed trials")
    ap.add_argument("--json-out", type=Path, default=None, help="write every trial and the summary here")
    args = ap.parse_args(argv)
    if args.quick:
        args.no_points = True
        args.seed = 1 if args.seed is None else args.seed
    if args.trials is None:
        args.trials = 1 if args.quick else 50
    args.commands = args.commands or ("env-add" if args.quick else ",".join(ch.COMMANDS))
    commands = [c.strip() for c in args.commands.split(",") if c.strip()]
    bad = [c for c in commands if c not in ch.COMMANDS]
    if bad:
        ap.error(f"unknown command(s) {bad}; pick from {', '.join(ch.COMMANDS)}")
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(1, 2**31)
    print(f"crash campaign: seed {seed}, {args.trials} random trial(s) per command, commands {', '.join(commands)}, "
          f"jobs {args.jobs}, crash points {'off' if args.no_points else 'on'}", flush=True)
    t0 = time.monotonic()
    own_work = args.work is None
    work = args.work or Path(tempfile.mkdtemp(prefix="monte-crash-"))
    work.mkdir(parents=True, exist_ok=True)
    # env-add and dataset-add start from `fresh`: a campaign of only those (the quick run's) skips
    # building `ready` (a test read, a trained chunk, two pushes), which none of its trials copies
    fresh_only = set(commands) <= {"env-add", "dataset-add"}
    tpl = ch.build_template(work / "template", args.model, log=lambda m: print(m, flush=True), fresh_only=fresh_only)
    build_s = time.monotonic() - t0
    print(f"template built in {build_s:.1f}s; typical durations (the kill windows): "
          + ", ".join(f"{k} {v:.2f}s" for k, v in tpl.typical.items() if k in commands), flush=True)

    planned: list[ch.Trial] = []
    per_cmd = {c: ch.plan_trials(c, args.trials, seed, tpl.typical[c]) for c in commands}
    for i in range(args.trials):  # interleaved, so a slow command does not run all at the end
        planned += [per_cmd[c][i] for c in commands]
    if not args.no_points:
        planned += ch.point_trials(commands, seed)
    done: list[ch.Trial] = []
    trials_dir = work / "trials"
    with ProcessPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        futures = [pool.submit(_one, t, str(tpl.root), str(trials_dir), args.keep_failed) for t in planned]
        for n, fut in enumerate(as_completed(futures), 1):
            t = fut.result()
            done.append(t)
            print(f"[{n}/{len(planned)} {time.monotonic() - t0:7.1f}s] {_line(t)}", flush=True)
    wall = time.monotonic() - t0
    order = {c: i for i, c in enumerate(commands)}
    done.sort(key=lambda t: (t.crash_point is not None, order[t.command], t.index))
    random_trials = [t for t in done if not t.crash_point]
    point_trials = [t for t in done if t.crash_point]
    summary = ch.summarize(random_trials)
    points = ch.summarize(point_trials)
    lines = _table(summary, f"random-moment kills (seed {seed}, uniform over each command's typical duration):")
    if point_trials:
        lines += _table(points, "crash points (one trial each):")
        lines += [f"    {t.command:11s} {t.label:48s} moment={t.moment or '-':6s} next={t.next_code}"
                  f"{' ' + t.next_error if t.next_error else ''} {'ok' if not t.failures else 'FAIL'}"
                  for t in point_trials]
    failed = [t for t in done if t.failures]
    lost = sum(t.lost for t in done)
    lines.append(f"total: {len(done)} trials ({len(random_trials)} random, {len(point_trials)} crash points), "
                 f"{len(failed)} failed, {lost} record(s) lost; wall {wall:.0f}s (template {build_s:.0f}s); "
                 f"command line: {' '.join([Path(sys.executable).name, *sys.argv])}")
    for t in failed:
        lines.append("FAILED " + _line(t))
    print("\n".join(lines), flush=True)
    if args.json_out:
        args.json_out.write_text(json.dumps({
            "seed": seed, "trials_per_command": args.trials, "commands": commands, "jobs": args.jobs,
            "typical_s": tpl.typical, "wall_s": round(wall, 1), "template_s": round(build_s, 1),
            "argv": sys.argv, "machine": {"cpus": os.cpu_count(), "platform": platform.platform(),
                                          "loadavg": os.getloadavg()},
            "summary": summary, "crash_points": points, "records_lost": lost, "failed_trials": len(failed),
            "trials": [t.to_dict() for t in done]}, indent=1))
    if own_work and not (args.keep_failed and failed):
        shutil.rmtree(work, ignore_errors=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
