"""A claim bundle's size and `monte claim verify`'s time, beside `monte ledger verify --all` on
the repository it came from (the baseline, measured in the same run) and `python -c pass`.

The repository is either one you name (``--repo DIR``: any repository with a final claim, e.g. the
one `monte quickstart demo` leaves) or one built here with monte's own calls and real tiny models:
the parity environment, test@0 and dev@0 on the base, one checkpoint (a differently seeded tiny
model recorded as a chunk), its dev eval, the nomination and the final claim.

    .venv/bin/python bench/claim_verify.py --repo demo            # the quickstart's claim
    .venv/bin/python bench/claim_verify.py --quick --json-out F   # a repository built here, one round
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # monte and tests.support, as packages


def _cli(*args: str) -> list[str]:
    return [sys.executable, "-c", "import sys; from monte.cli.main import main; main(sys.argv[1:])", *args]


def _timed(cmd: list[str], cwd: Path, rounds: int) -> float:
    times = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        r = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True)
        times.append(time.perf_counter() - t0)
        if r.returncode != 0:
            raise SystemExit(f"{' '.join(cmd[3:])} failed:\n{r.stdout}{r.stderr}")
    return statistics.median(times)


def build(repo: Path) -> None:
    """A small honest repository with a final claim, through monte's own calls."""
    import torch

    from monte import api
    from monte.models.tiny import init_model
    from monte.workspace import open_workspace
    from tests.support.helpers import checkpoint

    torch.set_num_threads(1)
    models = repo.parent / "models"
    for seed in (0, 1):
        init_model(models / f"seed{seed}", seed=seed)
    repo.mkdir(parents=True)
    for cmd in (["git", "init", "-q", "-b", "main"], ["git", "config", "user.name", "bench"],
                ["git", "config", "user.email", "bench@localhost"]):
        subprocess.run(cmd, cwd=repo, check=True)
    os.chdir(repo)
    api.init(repo)
    ws = open_workspace(repo)
    api.env_add(server="parity", dev=("parity",), test=("parity",), ws=ws)
    api.experiment_init(name="exp", eval_env="parity", model=str(models / "seed0"), ws=ws)
    api.evaluate(split="dev")
    api.evaluate(split="test")
    run = checkpoint(repo, models / "seed1")
    api.evaluate(checkpoint=f"{run}@50")
    api.nominate(ref=f"{run}@50")
    api.evaluate(split="test")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--repo", help="a repository holding a final claim (default: one built here)")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--quick", action="store_true", help="smoke run: a repository built here, one round")
    ap.add_argument("--json-out")
    a = ap.parse_args()
    rounds = 1 if a.quick else a.rounds
    tmp = Path(tempfile.mkdtemp(prefix="monte-bench-claim-"))
    if a.repo:
        repo = Path(a.repo).resolve()
    else:
        repo = tmp / "repo"
        build(repo)
    os.chdir(repo)
    from monte import api

    rows = [r for r in api.status()["rows"] if r["what"].endswith("/test") and r.get("role") == "claim"]
    if not rows:
        raise SystemExit(f"{repo} holds no final claim")
    key = tmp / "key"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True)
    allowed = tmp / "allowed_signers"
    allowed.write_text("bench " + " ".join(Path(f"{key}.pub").read_text().split()[:2]) + "\n")
    out = tmp / "claim"
    t0 = time.perf_counter()
    r = subprocess.run(_cli("claim", "export", rows[-1]["run"], "--out", str(out), "--key", str(key), "--json"), cwd=repo, capture_output=True, text=True)
    export_s = time.perf_counter() - t0
    if r.returncode != 0:
        raise SystemExit(r.stdout + r.stderr)
    files = json.loads(r.stdout)["files"]
    verify_s = _timed(_cli("claim", "verify", str(out), "--allowed-signers", str(allowed)), tmp, rounds)
    ledger_s = _timed(_cli("ledger", "verify", "--all"), repo, rounds)
    empty_s = _timed([sys.executable, "-c", "pass"], tmp, rounds)
    figures = {"repo": str(repo), "bundle_bytes": sum(files.values()), "files": files, "export_s": export_s,
               "claim_verify_s": verify_s, "ledger_verify_all_s": ledger_s, "python_pass_s": empty_s,
               "verify_over_ledger_verify": verify_s / ledger_s, "rounds": rounds,
               "goals": {"bundle_under_5mb": sum(files.values()) < 5_000_000, "verify_under_2s": verify_s < 2.0}}
    print(f"bundle {sum(files.values()) / 1e6:.3f} MB ({', '.join(f'{k} {v}' for k, v in files.items())})")
    print(f"export {export_s:.2f} s; claim verify {verify_s:.2f} s = {verify_s / ledger_s:.2f}x `ledger verify --all` "
          f"({ledger_s:.2f} s) = {verify_s / empty_s:.1f}x `python -c pass` ({empty_s:.3f} s)")
    if a.json_out:
        Path(a.json_out).write_text(json.dumps(figures, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
