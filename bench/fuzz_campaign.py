"""Campaign: hostile input against every place a user hands monte something, for a long time.

The targets and the properties are ``tests/reliability/fuzz_targets.py`` (recipe YAML, dataset
JSONL, manifests read back from the Vault, names, ``RUN/STEP`` references, ``.monte.yaml`` and
``monte config set`` URLs); the CI test runs each for a few dozen examples, this runs each for
thousands. Every example runs monte in-process against a sandbox repository and checks: an
``E_*`` refusal of the right family or a success, no traceback, one JSON document with
``--json``, nothing written outside the data root, nothing changed by a refusal or a dry run.

Engines: ``atheris`` (coverage-guided, libFuzzer; monte's own modules are instrumented) when it
is installed (``.venv/bin/pip install atheris``: a manylinux wheel, nothing to build on CPython
3.11), else ``hypothesis`` (random generation from the same draws, no shrinking). Each target
runs in a child process of its own with its own sandbox, so one target's state never reaches
another's; a failure does not stop the campaign: it is recorded (deduplicated by what broke, with
the input to reproduce it: ``fuzz_targets.Case.from_dict``) and the campaign goes on.

Found by this harness (and fixed; each has a regression in ``test_hostile_input.py``):

- a Vault ``.dir`` listing entry ``../../../../x`` was checked out outside the staging folder
  (into the repository) before any hash was proven, and ``env install`` succeeded: the listing
  is now proven (plain relative paths the manifest names, hex md5s) before DVC reads it;
- a manifest whose exams/curriculum name ``/etc/passwd`` or a file it does not list installed
  (then ``experiment init`` read it, or crashed); one that lists ``manifest.json`` or (a dataset)
  no ``rows.jsonl`` was fetched and recorded, then refused or crashed: a refusal that had moved
  the vault ref;
- a dangling symlink where a freeze lands: the freeze was recorded on the vault ref, then the
  rename failed (E_INTERNAL);
- E_INTERNAL on: a one-character run id, a step in unicode digits (``@²``), ``~nosuchuser``
  in a path or URL, a NUL in a URL, a non-ASCII Vault folder or one DVC refuses (``gs://[``:
  .monte.yaml was already rewritten), a ``.monte.yaml`` that is not UTF-8 or nests deeply, a
  deeply nested recipe or JSONL row, an experiment named ``vault`` (a ref that is a file);
- a YAML alias bomb in a recipe took 19 s at 7 levels (each level multiplies by 9);
- ``--json`` stdout that was not UTF-8 (an argv byte echoed back), and ``monte logs --json``,
  which did not exist.

    .venv/bin/python bench/fuzz_campaign.py                         # 3000 examples per target
    .venv/bin/python bench/fuzz_campaign.py --examples 300 --targets names,refs
    .venv/bin/python bench/fuzz_campaign.py --engine hypothesis --minutes 5 --json-out /tmp/fuzz.json
    .venv/bin/python bench/fuzz_campaign.py --quick      # config_set: 5 examples, a smoke run
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # monte and the tests' modules, as packages

# Modules instrumented for coverage under atheris: what parses and checks a user's input.
INSTRUMENT = [
    "monte.cli.main", "monte.cli.output", "monte.cli.config", "monte.cli.dataset", "monte.cli.env",
    "monte.cli.eval", "monte.cli.experiment", "monte.cli.ledger", "monte.cli.nominate", "monte.cli.results",
    "monte.cli.runs", "monte.cli.train", "monte.api", "monte.evals", "monte.runs", "monte.names",
    "monte.manifest", "monte.workspace", "monte.training.recipes", "monte.training.plan", "monte.training.run",
    "monte.training.sources", "monte.datasets.freeze", "monte.storage.vault_remote", "monte.storage.locations",
    "monte.storage.object_stores", "monte.ledger.vault_ref", "monte.ledger.experiment", "monte.ledger.rules",
    "monte.envs.freeze", "monte.envs.registry",
]


def _scrub_env(home: Path) -> None:
    """The environment the tests run in (tests/support/helpers.py): out of $HOME and any real data root."""
    from tests.support.helpers import PINNED_ENV

    os.environ.update(PINNED_ENV)
    os.environ.update({"HOME": str(home), "XDG_CONFIG_HOME": str(home / ".config"),
                       "XDG_CACHE_HOME": str(home / ".cache")})
    for k in ("MONTE_DATA_ROOT", "GIT_DIR", "GIT_WORK_TREE", "MONTE_HOOKS", "MONTE_VAULT", "MONTE_BUCKET",
              "MONTE_DEBUG", "STORAGE_EMULATOR_HOST"):
        os.environ.pop(k, None)


class Recorder:
    """Counts examples and distinct failures; rewrites its JSON file as it goes (libFuzzer ends
    the process with ``exit()``, so nothing may wait for the end)."""

    def __init__(self, target: str, engine: str, out: Path, sb: Any) -> None:
        self.target, self.engine, self.out, self.sb = target, engine, out, sb
        self.examples = 0
        self.failures: dict[str, dict[str, Any]] = {}
        self.t0 = time.monotonic()
        self.write()

    def record(self, case: Any, problems: list[str]) -> None:
        from tests.reliability.fuzz_targets import signature

        self.examples += 1
        if problems:
            sig = signature(problems)
            if sig not in self.failures:
                self.failures[sig] = {"problems": problems, "case": case.to_dict(), "count": 0,
                                      "first_at_example": self.examples}
                print(f"[{self.target}] NEW FAILURE after {self.examples} examples:\n" + "\n".join(problems)[:3000],
                      file=sys.stderr, flush=True)
            self.failures[sig]["count"] += 1
        if problems or self.examples % 10 == 0:
            self.write()

    def write(self) -> None:
        doc = {"target": self.target, "engine": self.engine, "examples": self.examples,
               "seconds": round(time.monotonic() - self.t0, 1), "failures": list(self.failures.values()),
               "outcomes": dict(self.sb.outcomes.get(self.target, {}))}
        tmp = self.out.with_suffix(".tmp")
        tmp.write_text(json.dumps(doc, indent=1, default=str))
        tmp.replace(self.out)


def child(target: str, engine: str, examples: int, seconds: float, out: Path, seed: int) -> None:
    """One target, one sandbox, one engine, until ``examples`` or ``seconds`` run out."""
    work = Path(tempfile.mkdtemp(prefix=f"monte-fuzz-{target}-"))
    _scrub_env(work / "home")
    (work / "home").mkdir()
    import torch

    torch.set_num_threads(1)
    if engine == "atheris":
        import atheris

        with atheris.instrument_imports(include=["monte"]):
            import importlib

            for m in INSTRUMENT:
                importlib.import_module(m)
    from tests.reliability import fuzz_targets as ft

    sb = ft.make_sandbox(work / "base", seed=seed % 4)
    rec = Recorder(target, engine, out, sb)
    deadline = time.monotonic() + seconds
    make = ft.TARGETS[target]

    if engine == "atheris":
        import atheris

        def one(data: bytes) -> None:
            if time.monotonic() > deadline:
                rec.write()
                os._exit(0)
            case = make(ft.BytesDraw(atheris.FuzzedDataProvider(data)), sb)
            rec.record(case, sb.execute(case))

        atheris.Setup([sys.argv[0], f"-runs={examples}", f"-seed={seed}", "-max_len=4096", "-timeout=300",
                       "-print_final_stats=1"], one)
        atheris.Fuzz()  # returns only through exit()
    else:
        from hypothesis import HealthCheck, Phase, given, settings
        from hypothesis import seed as hseed
        from hypothesis import strategies as st

        @hseed(seed)
        @settings(max_examples=examples, deadline=None, database=None, phases=[Phase.generate],
                  suppress_health_check=list(HealthCheck))
        @given(st.data())
        def run(data: Any) -> None:
            if time.monotonic() > deadline:
                return
            case = make(ft.HypothesisDraw(data), sb)
            rec.record(case, sb.execute(case))

        run()
    rec.write()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--engine", choices=["auto", "atheris", "hypothesis"], default="auto")
    ap.add_argument("--quick", action="store_true",
                    help="smoke run: the config_set target (accepts and refuses), 5 examples (engine as --engine)")
    ap.add_argument("--examples", type=int, default=None, help="examples per target (default 3000)")
    ap.add_argument("--minutes", type=float, default=None, help="at most this long per target (default 60)")
    ap.add_argument("--targets", default=None, help="comma-separated (default: all)")
    ap.add_argument("--seed", type=int, default=20261129)
    ap.add_argument("--json-out", type=Path)
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument("--out", type=Path, help=argparse.SUPPRESS)
    a = ap.parse_args()
    a.examples = a.examples or (5 if a.quick else 3000)
    a.minutes = a.minutes or (1.0 if a.quick else 60.0)
    a.targets = a.targets if a.targets is not None else ("config_set" if a.quick else "")
    if a.child:
        child(a.child, a.engine, a.examples, a.minutes * 60, a.out, a.seed)
        return

    from tests.reliability import fuzz_targets as ft

    engine = a.engine
    if engine == "auto":
        try:
            import atheris  # noqa: F401

            engine = "atheris"
        except ImportError:
            engine = "hypothesis"
            print("atheris is not installed: the hypothesis engine runs the same targets on random inputs",
                  flush=True)
    targets = [t for t in a.targets.split(",") if t] or list(ft.TARGETS)
    work = Path(tempfile.mkdtemp(prefix="monte-fuzz-campaign-"))
    results = []
    print(f"engine {engine}; {len(targets)} target(s); up to {a.examples} examples or {a.minutes:g} min each; "
          f"work in {work}", flush=True)
    for i, target in enumerate(targets):
        out = work / f"{target}.json"
        log = work / f"{target}.log"
        t0 = time.monotonic()
        with open(log, "w") as f:
            p = subprocess.run([sys.executable, __file__, "--child", target, "--engine", engine,
                                "--examples", str(a.examples), "--minutes", str(a.minutes), "--seed", str(a.seed + i),
                                "--out", str(out)], stdout=f, stderr=subprocess.STDOUT,
                               env={**os.environ, "OMP_NUM_THREADS": "1"})
        try:
            doc = json.loads(out.read_text())
        except (OSError, ValueError):
            doc = {"target": target, "engine": engine, "examples": 0, "failures": [], "outcomes": {}}
        doc["child_exit"] = p.returncode
        doc["wall_s"] = round(time.monotonic() - t0, 1)
        doc["log"] = str(log)
        results.append(doc)
        refusals = sum(n for k, n in doc["outcomes"].items() if not k.startswith("0"))
        print(f"{target:12s} {doc['examples']:6d} examples  {doc['wall_s']:7.1f} s  "
              f"{doc['examples'] / max(doc['wall_s'], 1e-9):5.1f}/s  accepted {doc['examples'] - refusals:5d}  "
              f"refused {refusals:5d}  distinct failures {len(doc['failures'])}  (child exit {p.returncode})",
              flush=True)
        for f_ in doc["failures"]:
            print(f"    x{f_['count']}: " + f_["problems"][0].splitlines()[0][:150], flush=True)
            print("      " + " | ".join(x.splitlines()[0][:120] for x in f_["problems"][1:]), flush=True)
    total = sum(r["examples"] for r in results)
    failures = sum(len(r["failures"]) for r in results)
    print(f"total: {total} examples, {failures} distinct failure(s)", flush=True)
    summary = {"when": datetime.now(UTC).isoformat(timespec="seconds"), "engine": engine,
               "machine": f"{platform.machine()} {os.cpu_count()} CPUs, Python {platform.python_version()}",
               "examples_per_target": a.examples, "minutes_per_target": a.minutes, "seed": a.seed,
               "total_examples": total, "distinct_failures": failures, "targets": results}
    if a.json_out:
        a.json_out.write_text(json.dumps(summary, indent=2, default=str))
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
