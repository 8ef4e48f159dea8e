"""The loop on a loaded machine (issue 46.15): `monte quickstart` run as a user runs it (no
`OMP_NUM_THREADS` from a Makefile), quiet and beside busy processes, in the same run.

Three timings of the same workload, each a fresh process in a fresh folder:

- quiet: nothing else started by this script (the machine's own load is reported);
- loaded: beside BUSY processes that each spin one core (`while True: pass`), started first;
- loaded, torch's defaults: the same, with `OMP_NUM_THREADS` = the cores and OpenMP's own wait
  policy (what monte did before it chose: one thread per core, idle threads spinning).

The goal: loaded within 3x of quiet. The workload is the whole quickstart; `--quick` times one
dev eval of the tiny model instead (seconds), the same path through the thread policy, its
experiment set up once (in one process) and copied, beside one busy process rather than two, and
stops a loaded run at 2x quiet rather than 5x (with no one-minute floor: a smoke run proves the
path, the cap's included, not the figure).

    .venv/bin/python bench/loaded_machine.py [--busy 2] [--json-out PATH]
    .venv/bin/python bench/loaded_machine.py --quick
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

PY = sys.executable
MONTE = [PY, "-c", "from monte.cli.main import main; main()"]


def _env(defaults: bool) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OMP_", "MKL_"))}
    if defaults:  # torch's own choice: a thread per core; "" leaves OpenMP's default wait (spinning)
        env["OMP_NUM_THREADS"] = str(len(os.sched_getaffinity(0)))
        env["OMP_WAIT_POLICY"] = ""
    return env


# The quick run's setup (not timed): its commands one after another in one interpreter, so
# their imports (torch's, for `model init`) are paid once.
SETUP = str(Path(__file__).resolve().parents[1] / "tests" / "support" / "batch.py")  # the commands in one interpreter


def _setup_eval(folder: Path) -> None:
    subprocess.run(["git", "init", "-q", "-b", "main", str(folder)], check=True)
    commands = (["init"], ["model", "init", "base-model"],
                ["env", "add", "--server", "parity", "--dev", "parity", "--test", "parity"],
                ["experiment", "init", "exp", "--eval", "parity", "--model", "base-model"])
    r = subprocess.run([PY, SETUP, json.dumps(commands)], cwd=folder, capture_output=True, text=True)
    if r.returncode:
        raise SystemExit(f"setup failed: {r.stdout[-1000:]}\n{r.stderr[-2000:]}")


def timed(template: Path | None, busy: int, defaults: bool, limit: float) -> dict[str, float | bool]:
    """One timing in a fresh folder: the quickstart, or (``template``: the quick run's experiment,
    set up once) one dev eval in a copy of it."""
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "loop"
        if template is not None:
            shutil.copytree(template, folder, symlinks=True)
            argv, cwd = [*MONTE, "eval", "--yes"], folder
        else:
            argv, cwd = [*MONTE, "quickstart", str(folder)], Path(tmp)
        spinners = [subprocess.Popen([PY, "-c", "while True: pass"]) for _ in range(busy)]
        try:
            t = time.perf_counter()
            try:
                r = subprocess.run(argv, cwd=cwd, env=_env(defaults), capture_output=True, text=True, timeout=limit)
            except subprocess.TimeoutExpired:
                return {"seconds": round(time.perf_counter() - t, 1), "timed_out": True}
            seconds = time.perf_counter() - t
            if r.returncode:
                raise SystemExit(f"{argv[3:]} exited {r.returncode}: {r.stderr[-2000:]}")
        finally:
            for p in spinners:
                p.kill()
                p.wait()
    return {"seconds": round(seconds, 1), "timed_out": False}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--busy", type=int, default=None, help="busy processes beside the loaded runs (default 2; --quick: 1)")
    ap.add_argument("--quick", action="store_true", help="one dev eval instead of the quickstart")
    ap.add_argument("--cap", type=float, default=None,
                    help="stop a loaded run past this many times quiet (default 5; --quick: 2)")
    ap.add_argument("--json-out", type=Path)
    a = ap.parse_args()
    # a smoke run proves the path, the cap's included: past 2x it reports "> 2x" and stops waiting
    a.cap = a.cap or (2.0 if a.quick else 5.0)
    a.busy = a.busy if a.busy is not None else (1 if a.quick else 2)
    with tempfile.TemporaryDirectory() as tmp:
        template = None
        if a.quick:  # the three timings start from the same experiment: it is set up once, untimed
            template = Path(tmp) / "template"
            _setup_eval(template)
        load_before = os.getloadavg()[0]
        quiet = timed(template, 0, False, 3600)
        # past it the figure is "more than CAP x"; a full run waits at least a minute
        limit = max(0.0 if a.quick else 60.0, a.cap * float(quiet["seconds"]))
        loaded = timed(template, a.busy, False, limit)
        old = timed(template, a.busy, True, limit)
    figures = {"quiet": quiet, f"beside {a.busy} busy": loaded, f"beside {a.busy} busy, torch's defaults": old}
    print(f"workload: {'one dev eval' if a.quick else 'monte quickstart'}; cores {len(os.sched_getaffinity(0))}; "
          f"load average before {load_before:.1f}, after {os.getloadavg()[0]:.1f}")
    for label, f in figures.items():
        ratio = float(f["seconds"]) / float(quiet["seconds"])
        f["x_quiet"] = round(ratio, 2)
        print(f"  {label:40} {f['seconds']:8.1f} s  {'>' if f['timed_out'] else ' '}{ratio:5.2f}x quiet")
    if a.json_out:
        a.json_out.write_text(json.dumps({"quick": a.quick, "busy": a.busy, "load_before": load_before,
                                          "figures": figures}, indent=1))


if __name__ == "__main__":
    main()
