"""`monte ledger verify` on an honest 10,000-record ledger: the full walk, and incrementally
(`--from`) over the last 10 records, beside `git log --format=%B` over the same ref as the floor.

The ledger is written through monte's own store with the shapes `monte eval` and `monte train`
write (a `started` record, then `finished` with per-task results; train rows with a real lineage
commit per checkpoint), against a real frozen environment, so the verifier checks every rule on it
(the script asserts that it passes). Model work is skipped: scores are synthetic. The records are
``bench/bulk_ledger.py``'s honest mix, appended one by one through ``Ledger.append_row``.

    .venv/bin/python bench/verify_10k.py [--records 10000] [--json-out PATH] [--repo DIR]
    .venv/bin/python bench/verify_10k.py --quick     # 50 records, one round: a smoke run of seconds

``--repo DIR`` builds the ledger into DIR and keeps it; a later run with the same DIR measures
that ledger again without building it (~1 min for 10,000 records). Figures, each a median over
3 rounds: ``monte ledger verify --all`` and ``monte ledger verify exp --from <tip~10>`` as whole
processes (and the same two in-process), ``git log --format=%B`` over the ref (the floor), and a
``git push`` of the last 10 records to a bare remote with monte's hooks installed, with the
hooks and without (the remote's own switch, ``git config monte.hooks off``: a server ignores the
pusher's MONTE_HOOKS): their difference is what the server's hooks (pre-receive) cost; and the
same push with this repository's pre-push hook (into a remote whose hooks are off): what
pre-push costs. Both verify from the remote's tip, not the whole history (issue 29.4).
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

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--records", type=int, default=10_000)
    ap.add_argument("--quick", action="store_true", help="smoke run: 50 records, one round")
    ap.add_argument("--json-out")
    ap.add_argument("--repo", help="build the ledger into this folder and keep it; if it already holds one "
                                   "(a finished build), reuse it as is")
    a = ap.parse_args()
    n = 50 if a.quick else a.records

    meta_name = ".git/monte-bench-verify-10k.json"  # a finished build: its size and build time
    if a.repo and (Path(a.repo) / meta_name).is_file():
        root = Path(a.repo).resolve()
        meta = json.loads((root / meta_name).read_text())
        return measure(a, root, meta["records"], meta["build_s"], keep=True)
    root = Path(a.repo).resolve() if a.repo else Path(tempfile.mkdtemp(prefix="monte-bench-verify-"))
    import bulk_ledger  # the honest ledger's records, appended one by one through Ledger.append_row

    t0 = time.perf_counter()
    built = bulk_ledger.build(root, mix="honest", records=n, bulk=False)
    build_s = time.perf_counter() - t0
    records = int(built["ledger_commits"])
    if a.repo:
        (root / meta_name).write_text(json.dumps({"records": records, "build_s": build_s}))
    return measure(a, root, records, build_s, keep=bool(a.repo))


def measure(a: argparse.Namespace, root: Path, records: int, build_s: float, keep: bool) -> int:
    from monte.ledger.verify import Verifier
    from monte.workspace import open_workspace

    ws = open_workspace(root)
    ref = "refs/heads/monte/exp/ledger"
    tip = ws.store.tip(ref)
    assert tip is not None
    last10 = subprocess.run(["git", "-C", str(root), "rev-parse", f"{ref}~10"], capture_output=True, text=True,
                            check=True).stdout.strip()

    def full() -> float:
        t = time.perf_counter()
        v = Verifier(open_workspace(root).store)
        assert v.verify("exp") == [], "the honest ledger must pass"
        return time.perf_counter() - t

    def incremental() -> float:
        t = time.perf_counter()
        v = Verifier(open_workspace(root).store)
        assert v.verify("exp", since=last10.encode()) == []  # type: ignore[arg-type]
        return time.perf_counter() - t

    def floor() -> float:
        t = time.perf_counter()
        subprocess.run(["git", "-C", str(root), "log", "--format=%B", ref], capture_output=True, check=True)
        return time.perf_counter() - t

    monte = [sys.executable, "-m", "monte"]

    def cli(*args: str) -> float:
        """One whole `monte ledger verify` process, as a user (or CI) runs it."""
        t = time.perf_counter()
        p = subprocess.run([*monte, "ledger", "verify", *args, "--json"], cwd=root, capture_output=True, text=True)
        took = time.perf_counter() - t
        assert p.returncode == 0, f"`monte ledger verify {' '.join(args)}` exited {p.returncode}: {p.stdout[-2000:]}"
        return took

    # A push of the last 10 records to a bare remote with monte's hooks (`monte hooks install` in
    # it): the remote first holds every monte ref as it was 10 records ago (pushed with the
    # server's own switch off), then `git push` brings the new ledger tip and the lineage refs those
    # records made; pre-receive judges them (`monte ledger verify --updates`), and the
    # reference-transaction hook sees each ref's update. The hooks' cost: that push's wall time
    # minus the same push into a copy with MONTE_HOOKS=off. The local pre-push hook is skipped
    # (--no-verify): it is the pushing side's check, not the server's.
    scratch = Path(tempfile.mkdtemp(prefix="monte-bench-push-"))
    pristine = scratch / "pristine.git"
    subprocess.run(["git", "init", "-q", "--bare", str(pristine)], check=True)
    subprocess.run([*monte, "hooks", "install"], cwd=pristine, check=True, capture_output=True)
    from monte.ledger.experiment import Ledger
    from monte.ledger.refs import lineage_ref
    from monte.ledger.store import Snapshot

    then = [f"{last10}:{ref}", "refs/heads/monte/vault:refs/heads/monte/vault"]
    then += [f"{r}:{r}" for r in ws.store.refs_under("refs/heads/monte/exp/base/")]
    for row in Ledger(ws.store, "exp").rows(Snapshot(ws.store.repo, last10.encode())):  # type: ignore[arg-type]
        if row.checkpoints:
            then.append(f"{row.checkpoints[-1]['commit']}:{lineage_ref('exp', row.run)}")
    off = {**os.environ, "MONTE_HOOKS": "off"}
    switch = ["git", "config", "--file", str(pristine / "config")]
    subprocess.run([*switch, "monte.hooks", "off"], check=True)  # the seed goes in unjudged: the server's switch
    subprocess.run(["git", "-C", str(root), "push", "-q", "--no-verify", str(pristine), *then], env=off, check=True,
                   capture_output=True)
    subprocess.run([*switch, "--unset", "monte.hooks"], check=True)
    pushed = len(subprocess.run(["git", "-C", str(root), "rev-list", f"{last10}..{ref}"], capture_output=True,
                                text=True, check=True).stdout.split())

    def push(hooks: bool, pre_push: bool = False) -> float:
        """The push into a fresh copy of the remote: its hooks on, or off by its own switch (a
        server ignores the pusher's MONTE_HOOKS); ``pre_push``: this repository's pre-push hook
        runs too (against a remote whose hooks are off: the pushing side's cost alone)."""
        remote = scratch / "remote.git"
        shutil.rmtree(remote, ignore_errors=True)
        shutil.copytree(pristine, remote, symlinks=True)
        if not hooks:
            subprocess.run(["git", "config", "--file", str(remote / "config"), "monte.hooks", "off"], check=True)
        t = time.perf_counter()
        p = subprocess.run(["git", "-C", str(root), "push", "-q", *([] if pre_push else ["--no-verify"]), str(remote),
                            "refs/heads/monte/*:refs/heads/monte/*"], env=None if pre_push else off,
                           capture_output=True, text=True)
        took = time.perf_counter() - t
        assert p.returncode == 0, f"the push of the last {pushed} records was refused: {p.stderr[-2000:]}"
        return took

    rounds: dict[str, list[float]] = {k: [] for k in ("full", "incremental", "floor", "cli_full", "cli_incremental",
                                                      "push_hooks", "push_no_hooks", "push_pre_push")}
    for i in range(1 if a.quick else 3):
        rounds["floor"].append(floor())
        rounds["full"].append(full())
        rounds["incremental"].append(incremental())
        rounds["cli_full"].append(cli("--all"))
        rounds["cli_incremental"].append(cli("exp", "--from", last10))
        rounds["push_hooks"].append(push(True))
        rounds["push_no_hooks"].append(push(False))
        if i == 0:  # this repository's own hooks, for pre-push (installed after the other figures' first round)
            subprocess.run([*monte, "hooks", "install"], cwd=root, check=True, capture_output=True)
        rounds["push_pre_push"].append(push(False, pre_push=True))
    shutil.rmtree(scratch, ignore_errors=True)
    med = {k: statistics.median(v) for k, v in rounds.items()}
    hooks_s = med["push_hooks"] - med["push_no_hooks"]
    pre_push_s = med["push_pre_push"] - med["push_no_hooks"]
    report = {"records": records, "build_s": build_s, "full_s": med["full"], "incremental_last10_s": med["incremental"],
              "git_log_floor_s": med["floor"], "full_over_floor": med["full"] / med["floor"],
              "cli_full_s": med["cli_full"], "cli_incremental_last10_s": med["cli_incremental"],
              "push_records": pushed, "push_with_hooks_s": med["push_hooks"], "push_without_hooks_s": med["push_no_hooks"],
              "hooks_s": hooks_s, "push_with_pre_push_s": med["push_pre_push"], "pre_push_s": pre_push_s,
              "hooks_over_cli_full": hooks_s / med["cli_full"], "pre_push_over_cli_full": pre_push_s / med["cli_full"],
              "rounds": rounds}
    print(f"{records} records (built in {build_s:.0f}s), medians: `monte ledger verify --all` {med['cli_full']:.2f}s "
          f"(in-process {med['full']:.2f}s); `--from` the last 10 {med['cli_incremental'] * 1e3:.0f} ms "
          f"(in-process {med['incremental'] * 1e3:.0f} ms); git log floor {med['floor'] * 1e3:.0f} ms; "
          f"push of {pushed} records to a bare remote with monte's hooks {med['push_hooks'] * 1e3:.0f} ms, "
          f"without {med['push_no_hooks'] * 1e3:.0f} ms: the server's hooks {hooks_s * 1e3:.0f} ms; "
          f"with this repository's pre-push {med['push_pre_push'] * 1e3:.0f} ms: pre-push {pre_push_s * 1e3:.0f} ms")
    if a.json_out:
        Path(a.json_out).write_text(json.dumps(report, indent=2))
    if not keep:
        shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
