"""Benchmark: ``monte status`` over an experiment of 10,000 runs.

In a fresh temporary monte repository (``git init`` + ``monte init``) this script builds one
experiment whose ledger holds N Run rows (default 10,000), appended one record each with
``Ledger.append_row`` (one git commit per row, as monte writes them), in a realistic mix:

- the cohort's base evals first: dev (the baseline every delta pairs against) and test@0;
- then about one training run per ``--evals-per-train`` evals (default 10): a ``train`` row with
  one checkpoint (``plan``: recipe {name, algorithm}, source, parent {run, step} or None,
  start_step, boundary; ``checkpoints``: [{step, commit}]) and its lineage ref
  (``refs/heads/monte/<exp>/lineage/<run>``, a real ``checkpoint.json`` commit), continuing the
  newest checkpoint of its branch, forking from an earlier checkpoint every ``--fork-every``
  training runs (default 50), a stage boundary (sft -> grpo) now and then;
- dev evals of recent checkpoints with paired deltas (Bonett-Price, from
  ``monte.stats.paired.paired_delta`` over 200 synthetic pass/fail tasks), a few failed, smoke
  and still-running rows (the running ones on another host, so no liveness probe reaches them).

Training rows are written as RunRow dicts rather than through ``monte.training.record``, which
needs a real weights folder per checkpoint; the rows and lineage commits have the same shape.

Then, in the same run and alternating so that noise hits all alike, it measures:

- ``monte status --json`` as a subprocess (the console script in this interpreter's folder, the
  real user experience, interpreter start and imports included), median of 5;
- ``api.status()`` in process (imports already done), median of 5;
- the floor: ``git log --format=%B refs/heads/monte/<exp>/ledger``, median of 5;

and the ratios. The target is ``monte status`` under 0.5 s. To explain a miss it also reports
where ``api.status`` spends its time (a cProfile of one call: the top functions, and the calls
of the function that does the work, read from the call graph), the interpreter start
(``python -c pass``), the import of the monte modules a real ``monte status`` loads, and the
largest cumulative entries of ``python -X importtime``.

    .venv/bin/python bench/status_10k.py                  # N=10,000 (a few minutes to build)
    .venv/bin/python bench/status_10k.py --quick          # N=50, one round: a smoke run of seconds
    .venv/bin/python bench/status_10k.py --json-out /tmp/status.json
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import io
import json
import os
import platform
import pstats
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from dulwich.objects import ObjectID

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

EXPERIMENT = "exp"
EXAM = "parity"
BASE_MODEL = "/data/models/tiny-seed0"
_ALPHABET = "0123456789abcdefghjkmnpqrstvwxyz"


def run_id(rng: random.Random) -> str:
    n = rng.getrandbits(60)
    return "".join(_ALPHABET[(n >> (5 * i)) & 31] for i in range(11, -1, -1))


def measurement() -> Any:
    from monte.ledger.records import ExamFreeze, Measurement, SplitFreeze

    return Measurement(
        experiment=EXPERIMENT, created_at=datetime.now(UTC).isoformat(timespec="seconds"),
        environment="parity", environment_fingerprint="sha256:" + "ab" * 32,
        grader={"benchmarks": {EXAM: EXAM}},
        exams={EXAM: ExamFreeze(benchmark=EXAM, splits={
            "dev": SplitFreeze(path="environments/parity/parity/dev.jsonl", sha256="cd" * 32, n=200),
            "test": SplitFreeze(path="environments/parity/parity/test.jsonl", sha256="ef" * 32, n=200),
        })},
        model=BASE_MODEL,
    )


class Synth:
    """Makes the rows, in record order."""

    def __init__(self, seed: int, evals_per_train: int, fork_every: int, cohort: str, n_tasks: int = 200) -> None:
        from monte.ledger.records import EvalSettings

        self.cohort = cohort
        self.rng = random.Random(seed)
        self.evals_per_train = evals_per_train
        self.fork_every = fork_every
        self.n_tasks = n_tasks
        self.settings = EvalSettings().model_dump()
        self.t = datetime(2026, 1, 5, 9, 0, tzinfo=UTC)
        self.base_dev = [float(self.rng.random() < 0.5) for _ in range(n_tasks)]
        self.baseline_run = ""
        self.checkpoints: list[dict[str, Any]] = []  # {run, step, commit, recipe, algorithm}
        self.tip: dict[str, Any] | None = None  # the newest checkpoint of the current branch
        self.trains = 0
        self.counts: dict[str, int] = {}

    def _now(self) -> str:
        self.t += timedelta(seconds=self.rng.randint(20, 400))
        return self.t.isoformat(timespec="seconds").replace("+00:00", "Z")

    def _who(self, live: bool = False) -> dict[str, Any]:
        return {"host": "box-2" if live else self.rng.choice(["box-1", "laptop"]),
                "pid": self.rng.randint(1000, 99999), "proc_start": str(self.rng.randint(10**6, 10**8))}

    def _count(self, key: str) -> None:
        self.counts[key] = self.counts.get(key, 0) + 1

    def eval_row(self, *, split: str, target: dict[str, Any], role: str | None = None) -> dict[str, Any]:
        from monte.stats.paired import paired_delta, verdict

        rid = run_id(self.rng)
        at = self._now()
        x = self.rng.random()
        status, smoke = "succeeded", False
        if target["kind"] == "checkpoint":
            if x < 0.02:
                status = "failed"
            elif x < 0.05:
                smoke = True
            elif x < 0.055:
                status = "running"
        row: dict[str, Any] = {
            "run": rid, "experiment": EXPERIMENT, "kind": "eval", "status": status, "created_at": at,
            "updated_at": at, "cohort": self.cohort, "model": target["model"], "exam": EXAM, "split": split,
            "step": target["step"], "smoke": smoke, "role": role,
            "plan": {"target": target, "benchmark": EXAM, "split_sha256": ("cd" if split == "dev" else "ef") * 32,
                     "settings": self.settings, "base_model": BASE_MODEL},
            **self._who(live=status == "running"),
        }
        if status == "failed":
            row["error"] = "RuntimeError: CUDA out of memory"
        elif status == "succeeded":
            n = 5 if smoke else self.n_tasks
            if target["kind"] == "base":
                scores = self.base_dev[:n]
            else:  # a checkpoint improves slowly with its step, with noise
                p = min(0.95, 0.5 + target["step"] / 40000 + self.rng.uniform(-0.05, 0.05))
                scores = [float(self.rng.random() < p) for _ in range(n)]
            row["n"] = n
            if not smoke:
                row["score"] = sum(scores) / n
                if target["kind"] == "checkpoint" and split == "dev":
                    d = paired_delta(self.base_dev, scores)
                    row["delta"] = {"baseline": self.baseline_run, "delta": d.delta, "lower": d.lower,
                                    "upper": d.upper, "n": d.n, "fixed": d.fixed, "broken": d.broken,
                                    "paired": d.paired, "method": d.method, "verdict": verdict(d)}
        self._count(f"eval {split} {target['kind']} {status}{' smoke' if smoke else ''}")
        return row

    def base_rows(self) -> list[dict[str, Any]]:
        target = {"kind": "base", "run": None, "step": 0, "model": BASE_MODEL, "recipe": None}
        dev = self.eval_row(split="dev", target=target)
        self.baseline_run = dev["run"]
        test = self.eval_row(split="test", target=target, role="baseline")
        return [dev, test]

    def train_row(self) -> tuple[dict[str, Any], dict[str, Any]]:
        """The row and its checkpoint.json (the lineage commit is written by the caller)."""
        self.trains += 1
        parent = self.tip
        if self.checkpoints and self.trains % self.fork_every == 0:  # fork from an earlier checkpoint
            parent = self.rng.choice(self.checkpoints[: max(1, len(self.checkpoints) - 3)])
        boundary = parent is not None and self.rng.random() < 0.05
        algorithm = ("grpo" if boundary else (parent or {}).get("algorithm", "sft"))
        recipe = f"{algorithm}-tiny"
        source = "parity" if algorithm == "grpo" else "parity-sft"
        start = parent["step"] if parent else 0
        step = start + 50
        rid = run_id(self.rng)
        at = self._now()
        plan = {"recipe": {"name": recipe, "sha256": f"{self.rng.getrandbits(256):064x}", "algorithm": algorithm},
                "source": source, "parent": {"run": parent["run"], "step": parent["step"]} if parent else None,
                "boundary": boundary, "start_step": start, "steps": 50, "base_model": BASE_MODEL}
        row = {"run": rid, "experiment": EXPERIMENT, "kind": "train", "status": "succeeded", "created_at": at,
               "updated_at": self._now(), "cohort": self.cohort, "model": BASE_MODEL, "step": step, "plan": plan,
               "checkpoints": [], **self._who()}
        info = {"experiment": EXPERIMENT, "run": rid, "step": step, "cohort": self.cohort, "recipe": plan["recipe"],
                "source": source, "boundary": boundary, "parent": plan["parent"],
                "weights": f"runs/{EXPERIMENT}/{rid}/checkpoints/step-{step}",
                "files": {"config.json": f"{self.rng.getrandbits(256):064x}",
                          "model.safetensors": f"{self.rng.getrandbits(256):064x}"}}
        self._count("train" + (" fork" if parent is not self.tip else "") + (" boundary" if boundary else ""))
        return row, info

    def checkpoint_done(self, row: dict[str, Any], commit: str) -> None:
        row["checkpoints"] = [{"step": row["step"], "commit": commit}]
        ck = {"run": row["run"], "step": row["step"], "commit": commit,
              "algorithm": row["plan"]["recipe"]["algorithm"], "recipe": row["plan"]["recipe"]["name"]}
        self.checkpoints.append(ck)
        self.tip = ck

    def checkpoint_eval(self) -> dict[str, Any]:
        ck = self.tip if self.rng.random() < 0.7 else self.rng.choice(self.checkpoints[-20:])
        assert ck is not None
        target = {"kind": "checkpoint", "run": ck["run"], "step": ck["step"],
                  "model": f"/repo/.monte/runs/{EXPERIMENT}/{ck['run']}/checkpoints/step-{ck['step']}",
                  "recipe": ck["recipe"]}
        return self.eval_row(split="dev", target=target)


def build_ledger(repo: Path, n: int, seed: int, evals_per_train: int, fork_every: int,
                 progress_every: int) -> dict[str, Any]:
    from monte.ledger.experiment import Ledger
    from monte.ledger.lineage import ensure_base, record_checkpoint
    from monte.ledger.records import RunRow
    from monte.ledger.store import Store

    store = Store(repo)
    ledger = Ledger(store, EXPERIMENT)
    ledger.create(measurement())
    # the cohort's base commit (a cohort id hashes the base model's servable files)
    cohort, base_commit = ensure_base(store, EXPERIMENT, BASE_MODEL, {"config.json": "0" * 64,
                                                                       "model.safetensors": "1" * 64})
    synth = Synth(seed, evals_per_train, fork_every, cohort)
    times: list[float] = []
    t_start = time.perf_counter()

    def append(row: dict[str, Any]) -> None:
        r = RunRow.model_validate(row)
        t0 = time.perf_counter()
        ledger.append_row(lambda _snap, _seq: r.model_copy(), event="finished",
                          summary=lambda x: f"{x.kind} {x.run} {x.status}")
        times.append(time.perf_counter() - t0)
        if progress_every and len(times) % progress_every == 0:
            el = time.perf_counter() - t_start
            print(f"  {len(times)}/{n} rows, {el:.0f} s, {statistics.fmean(times[-progress_every:]) * 1e3:.1f} ms/row"
                  " (last window)", flush=True)

    ck_commits: dict[str, ObjectID] = {}
    for row in synth.base_rows():
        append(row)
    lineage_s = 0.0
    while len(times) < n:
        if (len(times) - 2) % (evals_per_train + 1) == 0:
            row, info = synth.train_row()
            t0 = time.perf_counter()
            parent = info["parent"]
            parent_commit = ck_commits[parent["run"]] if parent else base_commit
            commit = record_checkpoint(store, EXPERIMENT, info, parent_commit)
            lineage_s += time.perf_counter() - t0
            ck_commits[row["run"]] = commit
            synth.checkpoint_done(row, commit.decode())
            append(row)
        else:
            append(synth.checkpoint_eval())
    total = time.perf_counter() - t_start
    return {"rows": len(times), "build_s": total, "append_s": sum(times), "lineage_commits_s": lineage_s,
            "append_ms_mean": statistics.fmean(times) * 1e3,
            "append_ms_first_1000_mean": statistics.fmean(times[:1000]) * 1e3,
            "append_ms_last_1000_mean": statistics.fmean(times[-1000:]) * 1e3,
            "train_runs": synth.trains, "checkpoints": len(synth.checkpoints), "mix": dict(sorted(synth.counts.items()))}


def monte_bin() -> list[str]:
    exe = Path(sys.executable).parent / "monte"
    if exe.exists():
        return [str(exe)]
    return [sys.executable, "-c", "from monte.cli.main import main; main()"]


def time_cmd(cmd: list[str], cwd: Path) -> tuple[float, bytes]:
    t0 = time.perf_counter()
    out = subprocess.run(cmd, cwd=cwd, check=True, capture_output=True)
    return time.perf_counter() - t0, out.stdout


def _fn(key: tuple[str, int, str]) -> str:
    file, line, fn = key
    return f"{Path(file).name}:{line}({fn})" if line else fn


def profile_status(repo: Path, top: int = 25) -> dict[str, Any]:
    """One ``api.status`` call under cProfile: the top functions by own time, and where the call
    spends its time, read from the profile's call graph rather than re-enacted step by step (a
    copy of the status code's steps went stale each time that code moved): below ``api.status``,
    down through the calls that take (nearly) all of their caller's time, the first function that
    splits its time, and each call it makes; then the CLI's JSON output (``print_json`` to a pipe,
    as ``monte status --json`` writes it)."""
    from monte import api
    from monte.cli.output import print_json
    from monte.workspace import open_workspace

    prof = cProfile.Profile()
    prof.enable()
    doc = api.status(ws=open_workspace(repo, require_data_root=False))
    prof.disable()
    buf = io.StringIO()
    stats = pstats.Stats(prof, stream=buf).sort_stats("cumulative")
    stats.print_stats(top)
    table = stats.stats  # type: ignore[attr-defined]
    rows = []
    callees: dict[Any, list[tuple[float, Any]]] = {}
    for key, (_cc, nc, tt, ct, callers) in table.items():
        rows.append({"function": _fn(key), "calls": nc, "tottime_s": tt, "cumtime_s": ct})
        for caller, (_c, _n, _t, from_caller) in callers.items():
            callees.setdefault(caller, []).append((from_caller, key))
    rows.sort(key=lambda r: -r["tottime_s"])

    node = next(k for k in table if k[2] == "status" and Path(k[0]).as_posix().endswith("monte/api/__init__.py"))
    total = table[node][3]
    path = [_fn(node)]
    kids = sorted(callees.get(node, []), key=lambda c: -c[0])
    seen = {node}
    while kids and kids[0][0] >= 0.9 * table[node][3] and kids[0][1] not in seen:
        node = kids[0][1]
        seen.add(node)
        path.append(_fn(node))
        kids = sorted(callees.get(node, []), key=lambda c: -c[0])
    steps = {_fn(k): t for t, k in kids[:8]}
    steps["the rest (own time, smaller calls)"] = table[node][3] - sum(steps.values())
    t0 = time.perf_counter()
    with contextlib.redirect_stdout(io.StringIO()) as out:
        print_json(doc)
    return {"cprofile_text": buf.getvalue(), "cprofile_top_tottime": rows[:top],
            "breakdown": {"under_cprofile_s": total, "through": path, "steps_s": steps,
                          "cli_print_json_s": time.perf_counter() - t0,
                          "json_bytes": len(out.getvalue().encode()), "lineage_paths": len(doc["lineage"]),
                          "checkpoints": len(doc["checkpoints"]), "cycles": len(doc["cycles"])}}


def status_imports(repo: Path) -> str:
    """``import ...`` of the monte modules a real ``monte status --json`` loads (read from that
    run, not kept by hand)."""
    probe = ("import atexit, sys\n"
             "atexit.register(lambda: print('MODULES', *sorted(m for m in sys.modules if m.startswith('monte')),"
             " file=sys.stderr))\n"
             "from monte.cli.main import main\n"
             "main(['status', '--json'])\n")
    r = subprocess.run([sys.executable, "-c", probe], cwd=repo, capture_output=True, text=True)
    line = next((x for x in r.stderr.splitlines() if x.startswith("MODULES ")), None)
    if line is None:
        raise SystemExit(f"could not list what monte status imports:\n{r.stdout[-1000:]}\n{r.stderr[-2000:]}")
    return "import " + ", ".join(line.split()[1:])


def import_times(repo: Path, repeats: int) -> dict[str, Any]:
    py = sys.executable
    imports = status_imports(repo)
    bare, imp = [], []
    for _ in range(repeats):
        bare.append(time_cmd([py, "-c", "pass"], repo)[0])
        imp.append(time_cmd([py, "-c", imports], repo)[0])
    r = subprocess.run([py, "-X", "importtime", "-c", imports], cwd=repo, capture_output=True, text=True,
                       check=True)
    entries: list[dict[str, Any]] = []
    for line in r.stderr.splitlines():
        if not line.startswith("import time:") or "cumulative" in line:
            continue
        # "import time:       412 |       1093 |   monte.api" (nesting: two spaces a level)
        self_us, cum_us, name = line.split(":", 1)[1].split("|")
        depth = (len(name) - len(name.lstrip()) - 1) // 2
        entries.append({"module": name.strip(), "self_us": int(self_us), "cumulative_us": int(cum_us),
                        "depth": depth})
    top_level = sorted((e for e in entries if e["depth"] <= 1), key=lambda e: -e["cumulative_us"])[:15]
    return {"status_imports": imports,
            "python_c_pass_s_median": statistics.median(bare), "status_imports_s_median": statistics.median(imp),
            "imports_minus_start_s": statistics.median(imp) - statistics.median(bare),
            "importtime_top": top_level,
            "importtime_total_us": sum(e["self_us"] for e in entries)}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--n", type=int, default=None, help="rows (default 10000)")
    p.add_argument("--quick", action="store_true", help="smoke run: N=50, one round")
    p.add_argument("--repeats", type=int, default=None, help="repeats of each timing, medians (default 5)")
    p.add_argument("--evals-per-train", type=int, default=10, help="dev evals per training run")
    p.add_argument("--fork-every", type=int, default=50, help="one training run in this many forks off an earlier checkpoint")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--tmpdir", default=None, help="where to make the temporary repository")
    p.add_argument("--keep", action="store_true", help="keep the repository and print its path")
    p.add_argument("--repo", default=None, help="measure an existing repository (kept from --keep) instead of building one")
    p.add_argument("--no-profile", action="store_true", help="skip the cProfile and import-time diagnosis")
    p.add_argument("--json-out", default=None, help="write the result as JSON to this path")
    args = p.parse_args(argv)
    n = args.n or (50 if args.quick else 10_000)
    args.repeats = args.repeats or (1 if args.quick else 5)
    os.environ.setdefault("DVC_NO_ANALYTICS", "1")

    from monte import api
    from monte.ledger.refs import ledger_ref
    from monte.workspace import open_workspace

    result: dict[str, Any] = {
        "benchmark": "status_10k",
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(), "platform": platform.platform()},
        "n": n, "evals_per_train": args.evals_per_train, "fork_every": args.fork_every,
    }
    here = Path(__file__).resolve().parents[1]
    head = subprocess.run(["git", "-C", str(here), "rev-parse", "HEAD"], capture_output=True, text=True)
    dirty = subprocess.run(["git", "-C", str(here), "status", "--porcelain", "monte/"], capture_output=True, text=True)
    result["code"] = {"head": head.stdout.strip(), "monte_dirty": bool(dirty.stdout.strip())}
    tmp = None
    if args.repo:
        repo = Path(args.repo).resolve()
    else:
        tmp = Path(tempfile.mkdtemp(prefix="monte-bench-status-", dir=args.tmpdir))
        repo = tmp / "repo"
    try:
        if not args.repo:
            subprocess.run(["git", "init", "-q", "-b", "main", str(repo)], check=True)
            subprocess.run(["git", "-C", str(repo), "config", "user.name", "bench"], check=True)
            subprocess.run(["git", "-C", str(repo), "config", "user.email", "bench@localhost"], check=True)
            api.init(repo)
            print(f"building a ledger of {n} runs in {repo} ...", flush=True)
            result["build"] = build_ledger(repo, n, args.seed, args.evals_per_train, args.fork_every,
                                           progress_every=max(n // 10, 1))
            b = result["build"]
            print(f"  built in {b['build_s']:.0f} s ({b['append_ms_mean']:.1f} ms per append_row;"
                  f" lineage commits {b['lineage_commits_s']:.1f} s)", flush=True)
        ref = ledger_ref(EXPERIMENT)
        refs = subprocess.run(["git", "-C", str(repo), "for-each-ref", "refs/heads/monte/"], capture_output=True,
                              text=True, check=True).stdout.count("\n")
        commits = int(subprocess.run(["git", "-C", str(repo), "rev-list", "--count", ref], capture_output=True,
                                     text=True, check=True).stdout)
        result["repo"] = {"refs_under_monte": refs, "ledger_commits": commits}

        # Check once, untimed: the subprocess prints every row.
        cmd = [*monte_bin(), "status", "--json"]
        check = subprocess.run(cmd, cwd=repo, capture_output=True)
        if check.returncode != 0:
            raise SystemExit(f"{' '.join(cmd)} exited {check.returncode}:\n"
                             f"{check.stdout.decode(errors='replace')[-2000:]}\n"
                             f"{check.stderr.decode(errors='replace')[-3000:]}")
        out = check.stdout
        doc = json.loads(out)
        result["status_stderr"] = {"bytes": len(check.stderr), "head": check.stderr.decode(errors="replace")[:400]}
        result["status_doc"] = {"rows": len(doc["rows"]), "deltas": len(doc["deltas"]), "lineage_lines": len(doc["lineage"]),
                                "cycles": len(doc["cycles"]), "checkpoints": len(doc["checkpoints"]),
                                "json_bytes": len(out)}
        ws = open_workspace(repo, require_data_root=False)
        t0 = time.perf_counter()
        api.status(ws=ws)  # warm (the modules imported), untimed
        first_call = time.perf_counter() - t0
        repeats = args.repeats
        if first_call > 30:  # keep a pathological case from running for an hour
            repeats = min(repeats, 3)
        result["repeats"] = repeats

        print(f"measuring ({repeats} rounds; one in-process call took {first_call:.2f} s) ...", flush=True)
        sub, inproc, floor = [], [], []
        log_bytes = 0
        for _ in range(repeats):
            sub.append(time_cmd(cmd, repo)[0])
            t0 = time.perf_counter()
            api.status(ws=open_workspace(repo, require_data_root=False))
            inproc.append(time.perf_counter() - t0)
            dt, log = time_cmd(["git", "-C", str(repo), "log", "--format=%B", ref], repo)
            floor.append(dt)
            log_bytes = len(log)
        med = {k: statistics.median(v) for k, v in (("sub", sub), ("inproc", inproc), ("floor", floor))}
        result["timings"] = {
            "monte_status_json_subprocess_s": {"all": sub, "median": med["sub"], "best": min(sub)},
            "api_status_in_process_s": {"all": inproc, "median": med["inproc"], "best": min(inproc)},
            "git_log_format_B_s": {"all": floor, "median": med["floor"], "best": min(floor), "stdout_bytes": log_bytes},
            "ratio_subprocess_over_git_log": med["sub"] / med["floor"],
            "ratio_in_process_over_git_log": med["inproc"] / med["floor"],
            "ratio_subprocess_over_in_process": med["sub"] / med["inproc"],
            "target_s": 0.5,
            "meets_target": med["sub"] < 0.5,
        }
        if not args.no_profile:
            print("diagnosing ...", flush=True)
            result.update(profile_status(repo))
            result["imports"] = import_times(repo, repeats)
    finally:
        if tmp is not None:
            if args.keep:
                print(f"kept {repo}")
            else:
                shutil.rmtree(tmp, ignore_errors=True)

    print_summary(result)
    if args.json_out:
        Path(args.json_out).write_text(json.dumps(result, indent=2) + "\n")
        print(f"wrote {args.json_out}")
    return 0


def print_summary(r: dict[str, Any]) -> None:
    t = r["timings"]
    print()
    print(f"status_10k: {r['status_doc']['rows']} rows, {r['repo']['ledger_commits']} ledger commits,"
          f" {r['repo']['refs_under_monte']} refs under refs/heads/monte/, {r['machine']['cpus']} cpus,"
          f" Python {r['machine']['python']}, {r['repeats']} rounds")
    if "build" in r:
        b = r["build"]
        print(f"  build: {b['build_s']:.0f} s, {b['append_ms_mean']:.1f} ms per append_row"
              f" (first 1000 {b['append_ms_first_1000_mean']:.1f}, last 1000 {b['append_ms_last_1000_mean']:.1f});"
              f" {b['train_runs']} training runs / checkpoints")
        print(f"  mix: {', '.join(f'{k} {v}' for k, v in b['mix'].items())}")
    d = r["status_doc"]
    print(f"  status document: {d['json_bytes']:,} bytes; {d['deltas']} deltas, {d['lineage_lines']} lineage lines,"
          f" {d['cycles']} cycles, {d['checkpoints']} checkpoints")
    s, i, g = t["monte_status_json_subprocess_s"], t["api_status_in_process_s"], t["git_log_format_B_s"]
    print(f"  monte status --json (subprocess)  median {s['median']:.3f} s  best {s['best']:.3f} s"
          f"  -> {'meets' if t['meets_target'] else 'MISSES'} the 0.5 s target")
    print(f"  api.status() in process           median {i['median']:.3f} s  best {i['best']:.3f} s")
    print(f"  floor: git log --format=%B        median {g['median']:.3f} s  best {g['best']:.3f} s"
          f"  ({g['stdout_bytes']:,} bytes)")
    print(f"  ratios: subprocess/floor {t['ratio_subprocess_over_git_log']:.1f}x,"
          f" in-process/floor {t['ratio_in_process_over_git_log']:.1f}x,"
          f" subprocess/in-process {t['ratio_subprocess_over_in_process']:.2f}x")
    if "breakdown" in r:
        bd = r["breakdown"]
        print(f"  where one api.status call spends its time (under cProfile, {bd['under_cprofile_s'] * 1e3:.1f} ms):"
              f" {' -> '.join(bd['through'])}, then")
        for k, v in bd["steps_s"].items():
            print(f"    {v * 1e3:9.1f} ms  {k}")
        print(f"    {bd['cli_print_json_s'] * 1e3:9.1f} ms  and after it, the CLI's print_json ({bd['json_bytes']:,} bytes)")
        print(f"    ({bd['checkpoints']} checkpoints, {bd['lineage_paths']} lineage paths, {bd['cycles']} cycles)")
        print("  cProfile of one api.status call, top by own time:")
        for e in r["cprofile_top_tottime"][:10]:
            print(f"    {e['tottime_s'] * 1e3:9.1f} ms own  {e['cumtime_s'] * 1e3:9.1f} ms cum  {e['calls']:>10} calls  {e['function']}")
        im = r["imports"]
        print(f"  interpreter start (python -c pass) {im['python_c_pass_s_median']:.3f} s;"
              f" + what monte status imports {im['status_imports_s_median']:.3f} s"
              f" (imports {im['imports_minus_start_s']:.3f} s)")
        print("  -X importtime, largest cumulative (top level):")
        for e in im["importtime_top"][:8]:
            print(f"    {e['cumulative_us'] / 1e3:8.1f} ms  {e['module']}")


if __name__ == "__main__":
    sys.exit(main())
