"""Benchmark: a NeMo Gym exam's test read through the sealed grader against the same read run locally.

As ``bench/grader_overhead.py`` does for the catalog's ``parity``, with a NeMo Gym exam: the
``hashed`` resources server of tests/support/nemo_checkout.py (in a NeMo Gym checkout of links
into the pinned venv that ``make nemo-gym`` builds), whose reward is a function of every character
of the answer. Two fresh repositories freeze it (``--dev``/``--test``, 20 test rows, answered in
up to 512 tokens each: the NeMo Gym eval defaults) and make one experiment per round on its own
tiny base model (seeds 2, 3, ...: each round a new cohort's ``test@0``). In one, ``monte grader
take`` moved the test rows to a grader (``monte grader init --threads 1 --nemo-gym CHECKOUT``,
reached over a real ``sshd`` on loopback with the forced command; the same account here: what is
timed is the path). Each read starts the exam's server once: locally in the eval's process, on
the grader in the read's worker, after the grader proved the server is the frozen one.

Timed, per round, alternating: ``monte eval -e eN --split test --yes`` as a subprocess in each
repository. Both sides must record the same scores (the same answers, graded by the same server).

    .venv/bin/python bench/grader_nemo_overhead.py                 # 3 rounds
    .venv/bin/python bench/grader_nemo_overhead.py --quick         # 1 round
    .venv/bin/python bench/grader_nemo_overhead.py --nemo-gym-venv /path/.nemo-gym --json-out /tmp/g.json
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import sys
import tempfile
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # monte and tests.support (the loopback sshd, the NeMo Gym checkout)

from grader_overhead import _batch, _monte, time_reads  # noqa: E402 - its neighbour in bench/ (sys.path[0] when run as a script)

ITEMS = 20  # test rows (and as many dev rows): 40 in the server's example file (--quick: 4)


def _repo(path: Path, env: dict[str, str], rounds: int, then: tuple[list[str], ...] = ()) -> Path:
    """grader_overhead's repository on the NeMo Gym server's exam; its setup in one process (``_batch``)."""
    import subprocess

    from monte.models.tiny import init_model
    from tests.support.nemo_checkout import SERVER

    subprocess.run(["git", "init", "-q", "-b", "main", str(path)], check=True)
    for k in range(rounds):
        init_model(path / f"base{k}", seed=2 + k)
    _batch(path, env, ["init", "--no-hooks"],
           ["env", "add", "--dev", f"server:{SERVER}", "--test", f"server:{SERVER}", "--as", SERVER],
           *(["experiment", "init", f"e{k}", "--eval", SERVER, "--model", f"base{k}"] for k in range(rounds)), *then)
    return path


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rounds", type=int, default=None, help="timed rounds of each side (default 3)")
    p.add_argument("--quick", action="store_true", help="smoke run: 1 round")
    p.add_argument("--nemo-gym-venv", type=Path, default=ROOT / ".nemo-gym", help="the venv `make nemo-gym` built")
    p.add_argument("--tmpdir", default=None, help="where to make the temporary repositories")
    p.add_argument("--json-out", default=None, help="write the result as JSON to this path")
    args = p.parse_args(argv)
    rounds = args.rounds or (1 if args.quick else 3)
    items = 4 if args.quick else ITEMS

    from monte.envs.nemo import venv
    from tests.support.nemo_checkout import SERVER, checkout
    from tests.support.sshd import SSHD, Keys, Sshd

    if not os.path.exists(SSHD):
        raise SystemExit(f"{SSHD} is missing: apt-get install openssh-server")
    if not venv.is_built(args.nemo_gym_venv):
        raise SystemExit(f"no NeMo Gym venv at {args.nemo_gym_venv}: `make nemo-gym` builds it")
    tmp = Path(tempfile.mkdtemp(prefix="monte-grader-nemo-bench-", dir=args.tmpdir))
    server = None
    try:
        gym = checkout(tmp / "gym", args.nemo_gym_venv.absolute(), rows=2 * items)
        env = {**{k: v for k, v in os.environ.items() if not k.startswith("MONTE_")},
               "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1"), "XDG_CONFIG_HOME": str(tmp / "config"),
               "GIT_AUTHOR_NAME": "bench", "GIT_AUTHOR_EMAIL": "bench@localhost", "GIT_COMMITTER_NAME": "bench",
               "GIT_COMMITTER_EMAIL": "bench@localhost", "MONTE_LOCAL": str(gym)}
        home = tmp / "grader"
        info = json.loads(_monte(tmp, env, "grader", "init", str(home), "--threads", env["OMP_NUM_THREADS"],
                                 "--nemo-gym", str(gym), "--json").stdout)
        keys = Keys.make(tmp / "keys")
        server = Sshd(tmp / "sshd", keys)
        agent_pub = Path(f"{keys.client_key}.pub").read_text().strip()
        (server.folder / "authorized_keys").write_text(info["authorized_keys"].replace("AGENT_PUBLIC_KEY", agent_pub)
                                                       + "\n")
        server.start()
        env["MONTE_GRADER_KEY_FILE"] = str(keys.client_key)
        local = _repo(tmp / "local", env, rounds)
        graded = _repo(tmp / "graded", env, rounds, then=(
            ["config", "set", "grader", f"ssh://{server.user}@127.0.0.1:{server.port}", "--key", info["public_key"]],
            ["grader", "take", SERVER]))
        times, scores = time_reads(local, graded, env, rounds)
        med = {s: statistics.median(v) for s, v in times.items()}
        result: dict[str, Any] = {
            "benchmark": "grader_nemo_overhead", "when": datetime.now(UTC).isoformat(timespec="seconds"),
            "rounds": rounds, "items": items, "seconds": times,
            "best": {s: min(v) for s, v in times.items()}, "median": med,
            "ratio_median": med["grader"] / med["local"], "scores": scores,
            "machine": {"cpus": os.cpu_count(), "python": platform.python_version(), "platform": platform.platform()},
        }
        print(f"NeMo Gym test read of {items} items, {rounds} round(s): local {med['local']:.2f} s, through the "
              f"grader {med['grader']:.2f} s (median); ratio {result['ratio_median']:.2f}x (goal <= 1.5x); "
              f"scores {scores['grader']}")
        if args.json_out:
            Path(args.json_out).write_text(json.dumps(result, indent=2) + "\n")
    finally:
        if server is not None:
            server.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
