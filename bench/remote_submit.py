"""Benchmark: from ``monte train --remote`` to the job running on an already-warm SSH box.

Builds, in a temporary folder, a committed and pushed monte repository with a trainable
experiment on a tiny model, a local-folder results bucket and Vault, and a real OpenSSH server on
loopback (the box; the same one the tests start, ``tests/support/sshd.py``). The box is warm: one
submission has already run there, so the checkout folder exists, as on a box that ran a job
before. Then, N times (default 5), ``api.submit`` of a smoke train chunk, timing:

- the submission itself (the command returning), split by monte into: the reproducibility gate,
  connecting to the box, the run rows (started here and pushed), the code (bundle + clone +
  checkout), setup, the credentials, the tree (the box's own ``monte sync`` + fetching the
  source from the Vault), and starting the tmux job;
- *submit to running*: until the job's row reads ``running`` in the bucket, i.e. until the
  box's monte has adopted the run (measured by polling the box's ledger log);

and the ratio of each step to the whole. The box's setup command is ``true`` (nothing to install
on this machine; on a GPU box ``uv sync`` is the setup and usually dominates when the lock
changed). The baseline in the same run is a bare SSH round trip (``true`` over a fresh
connection), the floor any remote step pays.

    .venv/bin/python bench/remote_submit.py [--runs 5] [--json-out PATH]
    .venv/bin/python bench/remote_submit.py --quick      # 1 submission to a cold box: a smoke run

Needs ``/usr/sbin/sshd`` (openssh-server) and ``tmux``; without them it says so and exits 1
(``tests/test_bench.py`` skips it then, as ``tests/remote`` skips).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # monte and tests.support, as packages


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True).stdout


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=None, help="timed submissions (default 5)")
    ap.add_argument("--quick", action="store_true",
                    help="smoke run: 1 submission, to a cold box (no warm-up), 1 SSH round trip")
    ap.add_argument("--json-out")
    args = ap.parse_args()
    args.runs = args.runs or (1 if args.quick else 5)
    from tests.support.sshd import SSHD, SSHD_MISSING, Keys, Sshd

    if not Path(SSHD).exists():
        sys.exit(SSHD_MISSING)
    if shutil.which("tmux") is None:
        sys.exit("tmux is not installed (apt-get install tmux): the box runs its job in tmux")
    from monte import api
    from monte.models.tiny import init_model
    from tests.support.trainhelp import SFT, curriculum, write_recipe, write_sft_rows

    tmp = Path(tempfile.mkdtemp(prefix="monte-remote-bench-"))
    os.environ.update({"GIT_AUTHOR_NAME": "b", "GIT_AUTHOR_EMAIL": "b@b", "GIT_COMMITTER_NAME": "b",
                       "GIT_COMMITTER_EMAIL": "b@b", "XDG_CONFIG_HOME": str(tmp / "config"),
                       "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1"})
    server = Sshd(tmp / "sshd", Keys.make(tmp / "keys"))
    server.start()
    try:
        repo = tmp / "repo"
        repo.mkdir()
        git(repo, "init", "-q", "-b", "main")
        os.chdir(repo)
        api.init(repo)
        init_model(tmp / "model", seed=0)
        (tmp / "bucket").mkdir()
        (tmp / "vault").mkdir()
        api.config_set(setting="bucket", url=str(tmp / "bucket"))
        api.config_set(setting="vault", url=str(tmp / "vault"))
        api.env_add(server="parity", dev=("parity",), test=("parity",))
        rows = write_sft_rows(tmp / "sft.jsonl", curriculum(repo)[:64])
        api.dataset_add(name="parity-sft", from_file=rows, kind="sft")
        api.experiment_init(name="exp", eval_env="parity", model=str(tmp / "model"), steps_per_chunk=4)
        write_recipe(repo, "sft-t", SFT)
        subprocess.run(["git", "init", "-q", "--bare", str(tmp / "origin.git")], check=True)
        git(repo, "add", "-A")
        git(repo, "commit", "-q", "-m", "bench")
        git(repo, "remote", "add", "origin", str(tmp / "origin.git"))
        git(repo, "push", "-q", "origin", "HEAD:main")
        git(repo, "fetch", "-q", "origin")
        box = tmp / "box"
        os.environ.update({"MONTE_BOX_SETUP": "true", "MONTE_BOX_PYTHON": sys.executable,
                           "MONTE_BOX_WORKDIR": str(box / "work"), "MONTE_BOX_ETC": str(box / "etc"),
                           "MONTE_BOX_DATA_ROOT": str(box / "data"), "MONTE_SSH_KEY_FILE": server.key_file})
        host = f"{server.user}@{server.host}:{server.port}"

        from monte.remote import ssh

        def submit() -> tuple[dict, float]:
            plan = api.plan_train(recipe="sft-t", source="parity-sft", smoke=True, push=True)
            t = time.perf_counter()
            sub = api.submit(plan=plan, provider="ssh", host=host)
            returned = time.perf_counter() - t
            # running: the box's monte adopted the row (its ledger, on the box's data root)
            deadline = time.monotonic() + 300
            run = sub.runs[0]
            events = box / "data" / "runs" / "exp" / run / "events.jsonl"
            while time.monotonic() < deadline and not (events.exists() and '"running"' in events.read_text()):
                time.sleep(0.02)
            running = time.perf_counter() - t
            exit_file = Path(sub.workdir) / f"{sub.session}.log.exit"
            while time.monotonic() < deadline and not exit_file.exists():
                time.sleep(0.1)
            exit_file.unlink(missing_ok=True)
            return {**sub.to_dict(), "returned_s": returned}, running

        if not args.quick:
            submit()  # warm the box: the checkout folder exists from here on
        rtt = []
        for _ in range(1 if args.quick else 5):
            t = time.perf_counter()
            c = ssh.connect(server.host, user=server.user, port=server.port, key_file=server.key_file)
            ssh.run(c, "true", timeout=30)
            c.close()
            rtt.append(time.perf_counter() - t)
        results = []
        for _ in range(args.runs):
            sub, running = submit()
            results.append({"timings": sub["timings"], "returned_s": sub["returned_s"], "running_s": running})
        steps = ["gate", "box", "rows", "bundle", "setup", "credentials", "sync", "job"]
        med = {s: statistics.median(r["timings"].get(s, 0.0) for r in results) for s in steps}
        out = {
            "runs": args.runs,
            "box": "cold (--quick: no warm-up submission)" if args.quick else "warm",
            "ssh_round_trip_s": round(statistics.median(rtt), 3),
            "submit_returned_s": round(statistics.median(r["returned_s"] for r in results), 3),
            "submit_to_running_s": round(statistics.median(r["running_s"] for r in results), 3),
            "steps_median_s": {s: round(v, 3) for s, v in med.items()},
            "steps_share": {s: round(v / sum(med.values()), 3) for s, v in med.items()},
            "running_over_ssh_round_trip": round(statistics.median(r["running_s"] for r in results)
                                                 / statistics.median(rtt), 1),
        }
        print(json.dumps(out, indent=2))
        if args.json_out:
            Path(args.json_out).write_text(json.dumps(out, indent=2) + "\n")
    finally:
        server.stop()
        os.chdir("/")
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
