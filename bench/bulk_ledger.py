"""Build a benchmark ledger of 100,000 records in minutes, the ledger monte itself would write.

``bench/status_10k.py`` and ``bench/verify_10k.py`` append one record at a time through
``Ledger.append_row`` (25-50 ms each: 10,000 records take ~8 minutes, 100,000 over an hour). This
builder makes the same ledgers with the ledger records streamed through ONE ``git fast-import``:

- each record's files and trailers come from monte's own ``record_change`` (the pure function
  ``Ledger.append_row`` calls: the row, every derived index, the count, the trailers), with
  ``read`` backed by a dict of the tip's files kept in memory, and its message from
  ``format_message``; :class:`BulkLedger` has ``Ledger.append_row``'s signature (the record's
  number from ``meta.json`` through monte's ``_records``) and streams each record to fast-import
  as one commit (author and committer from the store's identity, ``encoding UTF-8``, as
  ``Store._commit`` writes them). Nothing of a record's shape is copied here: a change to
  ``record_change`` is followed by running it (``tests/bench/test_bulk_ledger.py`` checks that the
  trees equal those ``Ledger.append_row`` writes);
- the first record (the measurement), the cohort's base commit and every lineage commit (one per
  training run) are written by monte itself (``Ledger.create`` / ``api.experiment_init``,
  ``ensure_base``, ``record_checkpoint``), so they are exactly monte's; fast-import continues the
  ledger from the created commit (``from <sha>``) on a scratch ref outside ``refs/heads/monte/``;
- after the import the ledger ref moves from the created commit to the imported tip by
  compare-and-swap (dulwich's ``set_if_equals``, as ``Store.set_ref``), the scratch ref goes, and
  what ``Store.set_ref`` keeps for each record is written through monte's own
  :class:`~monte.ledger.tips.Tips`: one ``tips.log`` line ``<ref> <old> <new> <time>`` per record
  and one git reflog line (``monte: <summary>``) per record, with the record's commit time.
  (They are appended after the build, so the lineage refs' lines come first in ``tips.log``
  rather than interleaved; each ref's lines keep their order, which is all ``Tips`` reads.)
  Then monte's own ``Store.pack`` packs the loose lineage objects, as ``Store.append`` would.

Two mixes:

- ``--mix status``: ``status_10k``'s :class:`Synth` rows (same ``--seed`` -> the same rows; a
  lineage commit per training run), ``--records`` = rows (ledger commits = rows + 1);
- ``--mix honest``: ``verify_10k``'s shapes (``started`` then ``finished`` records with
  ``tasks.jsonl``, train rows started/checkpoint/finished, a real frozen environment), with run
  ids, scores and ``created_at`` from ``--seed`` (verify_10k's are random and the wall clock),
  so ``monte ledger verify`` passes; ``--records`` = ledger commits, the measurement included.

    .venv/bin/python bench/bulk_ledger.py --mix status --records 100000 --out /tmp/monte-scale/runs-100000
    .venv/bin/python bench/bulk_ledger.py --mix honest --records 10000 --out /tmp/monte-scale/honest-10000
    .venv/bin/python bench/bulk_ledger.py --quick --json-out /tmp/bulk.json   # both mixes, small, temporary
    .venv/bin/python bench/bulk_ledger.py ... --one-by-one   # the reference: Ledger.append_row on the real store

Measured (2 cores shared with other work, 2026-12-01, ``/tmp/monte-scale``, at 5bac839): status mix
1,000 rows 0.9 s, 10,000 rows 10.8 s (status_10k: ~8 min), 100,000 rows 352 s (5.9 min; of it 31 s
for the 9,091 lineage commits through ``record_checkpoint``, 22 s for ``Store.pack``); honest mix
10,000 records 8.2 s, and ``monte ledger verify`` passes on it (2.7 s). Under heavier load the same
builds took 20.6 s and 469 s. Per record the time goes to monte's own work (``record_change``
re-encoding the row's fan-out index, which grows with the ledger; the lineage commits' ref writes,
fsynced by dulwich), to Synth's paired deltas, and to fast-import deltifying and compressing.

Packs: fast-import stores each version of a file as a delta on the version before it (chains up to
50), where ``git pack-objects`` (``Store.pack``, ``git gc``) prefers newer, larger bases; reading a
tip's fan-out index then resolves a longer chain. ``--repack`` ends with ``git repack -a -d -f``
(deltas recomputed with git's default window and depth) for a layout closer to a long-lived repository:
9 min at 100,000 rows (810 MB of pack -> 360 MB), for a cold ``monte status`` within noise of the
fast-import pack's (3.7-5.2 s against 4.4-4.9 s, under load), so it is off by default.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, cast

if TYPE_CHECKING:
    from dulwich.objects import ObjectID

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[0]))
sys.path.insert(0, str(HERE))  # status_10k (its Synth, measurement)

EXPERIMENT = "exp"
SCRATCH_PREFIX = "refs/monte-bulk/"


# --- the tip in memory ------------------------------------------------------------------------------


class DictSnapshot:
    """What ``Ledger.append_row``'s ``build`` reads of the tip (``Snapshot``'s interface), from a dict
    of the tip's files (path -> bytes)."""

    def __init__(self, files: dict[str, bytes]) -> None:
        self.files = files
        self.commit_id = None  # not yet known: fast-import names it at the end

    @property
    def empty(self) -> bool:
        return False

    def read(self, path: str) -> bytes | None:
        return self.files.get("/".join(p for p in path.split("/") if p))

    def exists(self, path: str) -> bool:
        path = "/".join(p for p in path.split("/") if p)
        return path in self.files or any(k.startswith(path + "/") for k in self.files)

    def listdir(self, path: str = "") -> list[str]:
        path = "/".join(p for p in path.split("/") if p)
        prefix = path + "/" if path else ""
        return sorted({k[len(prefix):].split("/", 1)[0] for k in self.files if k.startswith(prefix)})


def tree_files(store: Any, commit_id: bytes) -> dict[str, bytes]:
    """Every file of a commit's tree, path -> bytes (the created ledger: a few files)."""
    from dulwich.objects import Blob, Commit, Tree

    objects = store.repo.object_store
    commit = objects[commit_id]
    assert isinstance(commit, Commit)
    out: dict[str, bytes] = {}
    todo: list[tuple[str, bytes]] = [("", commit.tree)]
    while todo:
        prefix, sha = todo.pop()
        tree = objects[sha]
        assert isinstance(tree, Tree)
        for entry in tree.iteritems():
            path = prefix + entry.path.decode()
            if entry.mode == 0o040000:
                todo.append((path + "/", entry.sha))
            else:
                blob = objects[entry.sha]
                assert isinstance(blob, Blob)
                out[path] = blob.data
    return out


# --- the bulk ledger -----------------------------------------------------------------------------------


class BulkLedger:
    """A ledger's ``append_row`` through one ``git fast-import``: each record made by monte's
    ``record_change`` on the tip in memory, streamed as one commit. :meth:`finish` ends the import
    and moves the ledger ref as ``Store.set_ref`` would."""

    def __init__(self, store: Any, ref: str, *, progress_every: int = 0) -> None:
        self.store = store
        self.progress_every = progress_every
        self.t0 = time.perf_counter()
        self.ref = ref
        created = store.tip(ref)
        if created is None:
            raise SystemExit(f"{ref} does not exist: create the ledger through monte first")
        self.created: bytes = created
        self.files = tree_files(store, created)
        self.scratch = SCRATCH_PREFIX + ref[len("refs/heads/"):]
        self.git_dir = store.repo.controldir()
        self.marks = os.path.join(self.git_dir, "monte-bulk-marks")
        self.log: list[tuple[int, str, bytes, int]] = []  # (mark, summary, who, when) per record
        self.proc = subprocess.Popen(
            ["git", "--git-dir", self.git_dir, "fast-import", "--quiet", "--done", f"--export-marks={self.marks}"],
            stdin=subprocess.PIPE, bufsize=1 << 20)
        assert self.proc.stdin is not None
        self.out: IO[bytes] = self.proc.stdin

    def append_row(self, make: Callable[[Any, int], Any], *, event: str, summary: Callable[[Any], str],
                   files: Callable[[Any], dict[str, bytes]] | None = None,
                   trailers: Callable[[Any], dict[str, str]] | None = None) -> Any:
        """``Ledger.append_row`` (same arguments, same result): the record is made by monte's
        ``next_record`` on the tip in memory (``record_change``'s default ``scan``, the fan-out
        indexes read through ``read``), and streamed to fast-import."""
        from monte.ledger.experiment import next_record
        from monte.ledger.store import Snapshot

        row, change = next_record(cast(Snapshot, DictSnapshot(self.files)), make, event=event, summary=summary,
                                  files=files, trailers=trailers)
        self._commit(change)
        return row

    def _commit(self, change: Any) -> None:
        from monte.ledger.store import format_message

        who, when, tz = self.store._identity()  # as Store._commit: the repository's user, the clock
        assert tz == 0
        mark = len(self.log) + 1
        message = format_message(change.summary, change.trailers).encode()
        w = self.out.write
        w(b"commit %s\nmark :%d\nauthor %s %d +0000\ncommitter %s %d +0000\nencoding UTF-8\ndata %d\n"
          % (self.scratch.encode(), mark, who, when, who, when, len(message)))
        w(message)
        if mark == 1:
            w(b"\nfrom %s\n" % self.created)
        else:
            w(b"\n")
        writes: Mapping[str, bytes | None] = change.writes
        for path, data in writes.items():
            key = "/".join(p for p in path.split("/") if p)
            if "\n" in key or key.startswith('"'):
                raise ValueError(f"a path fast-import would need quoted: {key!r}")
            if data is None:
                w(b"D %s\n" % key.encode())
                self.files.pop(key, None)
            else:
                w(b"M 100644 inline %s\ndata %d\n" % (key.encode(), len(data)))
                w(data)
                w(b"\n")
                self.files[key] = data
        w(b"\n")
        self.log.append((mark, change.summary, who, when))
        if self.progress_every and mark % self.progress_every == 0:
            print(f"  {mark} records streamed, {time.perf_counter() - self.t0:.0f} s", flush=True)

    def finish(self, *, pack: bool = True) -> dict[str, float]:
        """End the import; move the ledger ref onto the imported tip by compare-and-swap; write
        ``tips.log`` and the reflog per record, as ``Store.set_ref`` does; pack as ``Store.append``
        does. Returns the seconds each step took."""
        from dulwich.reflog import format_reflog_line

        from monte.ledger.tips import REFLOG_MESSAGE

        t0 = time.perf_counter()
        self.out.write(b"done\n")
        self.out.close()
        if self.proc.wait() != 0:
            raise SystemExit(f"git fast-import exited {self.proc.returncode}")
        t_import = time.perf_counter() - t0
        shas: dict[int, bytes] = {}
        with open(self.marks, "rb") as f:
            for line in f:
                name, sha = line.split()
                shas[int(name[1:])] = sha
        os.unlink(self.marks)
        if not self.log:
            return {"fast_import_wait_s": t_import}
        t1 = time.perf_counter()
        store, refs = self.store, self.store.repo.refs
        tip = shas[len(self.log)]
        newest = store.tips.newest(self.ref)
        if newest not in (None, self.created) or not refs.set_if_equals(self.ref.encode(), self.created, tip):
            raise SystemExit(f"{self.ref} moved during the import: nothing moved, the imported commits are "
                             f"dangling (scratch ref {self.scratch})")
        refs.remove_if_equals(self.scratch.encode(), tip)
        old = self.created
        for mark, summary, who, when in self.log:
            new = shas[mark]
            store.tips.record(self.ref, old, new, when=when)
            store.tips.reflog(self.ref, format_reflog_line(old, new, who, when, 0,
                                                           f"{REFLOG_MESSAGE}{summary}".encode()))
            old = new
        t_tips = time.perf_counter() - t1
        t2 = time.perf_counter()
        if pack:
            store.pack()
        return {"fast_import_wait_s": t_import, "ref_tips_reflog_s": t_tips, "pack_s": time.perf_counter() - t2}

    def abort(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


# --- the repositories ----------------------------------------------------------------------------------


def new_repo(path: Path) -> None:
    """``git init`` + ``monte init``, as status_10k and verify_10k make theirs."""
    from monte import api

    if path.exists() and any(path.iterdir()):
        raise SystemExit(f"{path} exists and is not empty: --out takes a new folder")
    path.mkdir(parents=True, exist_ok=True)
    subprocess.run(["git", "init", "-q", "-b", "main", str(path)], check=True)
    subprocess.run(["git", "-C", str(path), "config", "user.name", "bench"], check=True)
    subprocess.run(["git", "-C", str(path), "config", "user.email", "bench@localhost"], check=True)
    api.init(path)


class Timer:
    def __init__(self) -> None:
        self.lineage_s = 0.0
        self.lineage_commits = 0


def _ledger_on(store: Any, bulk: bool, progress_every: int = 0) -> tuple[Any, BulkLedger | None]:
    """What the records are appended through (its ``append_row``): monte's ``Ledger`` on the real
    store (one by one, the reference), or a :class:`BulkLedger`."""
    from monte.ledger.experiment import Ledger
    from monte.ledger.refs import ledger_ref

    if not bulk:
        return Ledger(store, EXPERIMENT), None
    b = BulkLedger(store, ledger_ref(EXPERIMENT), progress_every=progress_every)
    return b, b


def build_status(repo: Path, n: int, *, seed: int = 0, evals_per_train: int = 10, fork_every: int = 50,
                 bulk: bool = True, timer: Timer | None = None, progress_every: int = 0) -> BulkLedger | None:
    """status_10k's ledger (``build_ledger``: the same Synth calls in the same order, so the same
    rows for the same seed) in ``repo`` (a monte repository)."""
    import status_10k

    from monte.ledger.experiment import Ledger
    from monte.ledger.lineage import ensure_base, record_checkpoint
    from monte.ledger.records import RunRow
    from monte.ledger.store import Store

    timer = timer or Timer()
    store = Store(repo)
    Ledger(store, EXPERIMENT).create(status_10k.measurement())
    cohort, base_commit = ensure_base(store, EXPERIMENT, status_10k.BASE_MODEL,
                                      {"config.json": "0" * 64, "model.safetensors": "1" * 64})
    synth = status_10k.Synth(seed, evals_per_train, fork_every, cohort)
    ledger, b = _ledger_on(store, bulk, progress_every)
    rows = 0

    def append(row: dict[str, Any]) -> None:
        nonlocal rows
        r = RunRow.model_validate(row)
        ledger.append_row(lambda _snap, _seq: r.model_copy(), event="finished",
                          summary=lambda x: f"{x.kind} {x.run} {x.status}")
        rows += 1

    try:
        ck_commits: dict[str, ObjectID] = {}
        for row in synth.base_rows():
            append(row)
        while rows < n:
            if (rows - 2) % (evals_per_train + 1) == 0:
                row, info = synth.train_row()
                t0 = time.perf_counter()
                parent = info["parent"]
                commit = record_checkpoint(store, EXPERIMENT, info, ck_commits[parent["run"]] if parent else base_commit)
                timer.lineage_s += time.perf_counter() - t0
                timer.lineage_commits += 1
                ck_commits[row["run"]] = commit
                synth.checkpoint_done(row, commit.decode())
                append(row)
            else:
                append(synth.checkpoint_eval())
    except BaseException:
        if b is not None:
            b.abort()
        raise
    return b


def build_honest(repo: Path, n: int, *, seed: int = 0, bulk: bool = True, timer: Timer | None = None,
                 progress_every: int = 0) -> BulkLedger | None:
    """verify_10k's honest ledger (the same records in the same order) in ``repo`` (a monte
    repository), with run ids, scores and times from ``seed``."""
    from status_10k import run_id

    from monte import api
    from monte.ledger.experiment import Ledger
    from monte.ledger.lineage import ensure_base, record_checkpoint
    from monte.ledger.records import RunRow
    from monte.workspace import open_workspace

    timer = timer or Timer()
    ws = open_workspace(repo)
    api.env_add(server="parity", dev=("parity",), test=("parity",), ws=ws)
    api.experiment_init(name=EXPERIMENT, eval_env="parity", ws=ws)
    meas = Ledger(ws.store, EXPERIMENT).measurement()
    ids = {s: [json.loads(x)["id"] for x in open(ws.data_root / meas.exams["parity"].splits[s].path)]
           for s in ("dev", "test")}
    cohort, base_commit = ensure_base(ws.store, EXPERIMENT, "/models/base", {"config.json": "0" * 64})
    rng = random.Random(seed)  # scores, as verify_10k's Random(0)
    ids_rng = random.Random(f"run ids {seed}")
    clock = datetime(2026, 1, 5, 9, 0, tzinfo=UTC)
    ledger, b = _ledger_on(ws.store, bulk, progress_every)
    records = 1

    def now() -> str:
        nonlocal clock
        clock += timedelta(seconds=ids_rng.randint(5, 300))
        return clock.strftime("%Y-%m-%dT%H:%M:%SZ")

    def append(row: RunRow, event: str, files: dict[str, bytes] | None = None) -> RunRow:
        nonlocal records
        records += 1
        made: RunRow = ledger.append_row(lambda s, q: row.model_copy(), event=event,
                                         summary=lambda r: f"{r.kind} {r.run} {event}",
                                         files=(lambda r: files) if files else None)
        return made

    def evaluate(split: str, target: dict[str, Any], p: float) -> None:
        row = RunRow(run=run_id(ids_rng), experiment=EXPERIMENT, kind="eval", status="started", created_at=now(),
                     cohort=cohort, exam="parity", split=split, step=int(target.get("step", 0)),
                     role=("baseline" if target["kind"] == "base" else "claim") if split == "test" else None,
                     plan={"target": target, "benchmark": "parity"})
        row = append(row, "started")
        tasks = [{"id": i, "score": float(rng.random() < p), "answer": ""} for i in ids[split]]
        body = "".join(json.dumps(t, separators=(",", ":")) + "\n" for t in tasks).encode()
        done = row.model_copy(update={"status": "succeeded", "n": len(tasks),
                                      "score": sum(t["score"] for t in tasks) / len(tasks)})
        append(done, "finished", {"tasks.jsonl": body})

    try:
        evaluate("dev", {"kind": "base", "step": 0}, 0.1)
        evaluate("test", {"kind": "base", "step": 0}, 0.1)
        parent: dict[str, Any] | None = None
        parent_commit = base_commit
        while records < n:
            run = run_id(ids_rng)
            start = parent["step"] if parent else 0
            plan = {"recipe": {"name": "sft-tiny", "sha256": "0" * 64, "algorithm": "sft"}, "source": "d",
                    "parent": parent, "boundary": False, "start_step": start, "steps": 50}
            row = append(RunRow(run=run, experiment=EXPERIMENT, kind="train", status="started", created_at=now(),
                                cohort=cohort, step=start, plan=plan), "started")
            info = {"experiment": EXPERIMENT, "run": run, "step": start + 50, "cohort": cohort,
                    "recipe": plan["recipe"], "source": "d", "boundary": False, "parent": parent, "weights": "w",
                    "files": {}}
            t0 = time.perf_counter()
            commit = record_checkpoint(ws.store, EXPERIMENT, info, parent_commit)
            timer.lineage_s += time.perf_counter() - t0
            timer.lineage_commits += 1
            row = append(row.model_copy(update={"status": "running", "step": start + 50,
                                                "checkpoints": [{"step": start + 50, "commit": commit.decode()}]}),
                         "checkpoint")
            append(row.model_copy(update={"status": "succeeded"}), "finished")
            parent, parent_commit = {"run": run, "step": start + 50}, commit
            for _ in range(8):
                if records >= n:
                    break
                evaluate("dev", {"kind": "checkpoint", "run": run, "step": start + 50}, min(0.9, 0.1 + start / 20000))
    except BaseException:
        if b is not None:
            b.abort()
        raise
    return b


def build(repo: Path, *, mix: str, records: int, seed: int = 0, bulk: bool = True, pack: bool = True,
          repack: bool = False, evals_per_train: int = 10, fork_every: int = 50, init: bool = True,
          progress_every: int = 0) -> dict[str, Any]:
    """Build one ledger into ``repo`` (made with ``git init`` + ``monte init`` unless ``init`` is
    False: then it is a monte repository already). Returns the figures."""
    t_start = time.perf_counter()
    if init:
        new_repo(repo)
    t_init = time.perf_counter() - t_start
    timer = Timer()
    t0 = time.perf_counter()
    if mix == "status":
        b = build_status(repo, records, seed=seed, evals_per_train=evals_per_train, fork_every=fork_every,
                         bulk=bulk, timer=timer, progress_every=progress_every)
    elif mix == "honest":
        b = build_honest(repo, records, seed=seed, bulk=bulk, timer=timer, progress_every=progress_every)
    else:
        raise SystemExit(f"unknown mix {mix!r}: status or honest")
    t_records = time.perf_counter() - t0
    steps = b.finish(pack=pack) if b is not None else {}
    if repack:
        t1 = time.perf_counter()
        subprocess.run(["git", "-C", str(repo), "repack", "-a", "-d", "-f", "-q"], check=True)
        steps["repack_s"] = time.perf_counter() - t1
    commits = int(subprocess.run(["git", "-C", str(repo), "rev-list", "--count", f"refs/heads/monte/{EXPERIMENT}/ledger"],
                                 capture_output=True, text=True, check=True).stdout)
    total = time.perf_counter() - t_start
    return {"mix": mix, "records_arg": records, "seed": seed, "bulk": bulk, "repo": str(repo),
            "ledger_commits": commits, "lineage_commits": timer.lineage_commits,
            "init_s": t_init, "records_s": t_records, "lineage_commits_s": timer.lineage_s, **steps,
            "build_s": total - t_init, "total_s": total,
            "ms_per_record": (total - t_init) / max(commits - 1, 1) * 1e3}


def verify_cli(repo: Path) -> tuple[int, str]:
    exe = Path(sys.executable).parent / "monte"
    cmd = [str(exe)] if exe.exists() else [sys.executable, "-c", "from monte.cli.main import main; main()"]
    r = subprocess.run([*cmd, "ledger", "verify"], cwd=repo, capture_output=True, text=True)
    return r.returncode, (r.stdout + r.stderr)[-2000:]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--mix", choices=("status", "honest"), default="status")
    p.add_argument("--records", type=int, default=None,
                   help="status: rows (default 10000); honest: ledger commits, the measurement included")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--evals-per-train", type=int, default=10, help="status mix: dev evals per training run")
    p.add_argument("--fork-every", type=int, default=50, help="status mix: one training run in this many forks")
    p.add_argument("--out", default=None, help="a new folder for the repository (kept); default: temporary, removed")
    p.add_argument("--one-by-one", action="store_true", help="the reference: Ledger.append_row on the real store")
    p.add_argument("--repack", action="store_true", help="end with git repack -a -d -f (deltas recomputed)")
    p.add_argument("--verify", action="store_true", help="run `monte ledger verify` on the result (honest mix)")
    p.add_argument("--quick", action="store_true", help="smoke run: both mixes, 60 records each, temporary, verified")
    p.add_argument("--json-out", default=None)
    a = p.parse_args(argv)
    os.environ.setdefault("DVC_NO_ANALYTICS", "1")
    results: list[dict[str, Any]] = []
    runs = ([("status", 60), ("honest", 60)] if a.quick else [(a.mix, a.records or 10_000)])
    tmp = None if a.out and not a.quick else Path(tempfile.mkdtemp(prefix="monte-bench-bulk-"))
    try:
        for mix, n in runs:
            repo = tmp / mix if tmp is not None else Path(a.out).resolve()
            print(f"building a {mix} ledger of {n} records in {repo} ({'one by one' if a.one_by_one else 'bulk'}) ...",
                  flush=True)
            r = build(repo, mix=mix, records=n, seed=a.seed, bulk=not a.one_by_one, repack=a.repack,
                      evals_per_train=a.evals_per_train, fork_every=a.fork_every,
                      progress_every=0 if a.quick else max(n // 10, 1000))
            if a.verify or a.quick:
                t0 = time.perf_counter()
                code, out = verify_cli(repo)
                r["verify"] = {"exit": code, "s": time.perf_counter() - t0, "tail": out[-600:]}
                if mix == "honest" and code != 0:
                    print(out, file=sys.stderr)
                    raise SystemExit(f"monte ledger verify failed on the honest {repo}")
            results.append(r)
            print(f"  {r['ledger_commits']} ledger commits, {r['lineage_commits']} lineage commits: built in "
                  f"{r['build_s']:.1f} s ({r['ms_per_record']:.2f} ms per record; lineage {r['lineage_commits_s']:.1f} s,"
                  f" import wait {r.get('fast_import_wait_s', 0):.1f} s, tips {r.get('ref_tips_reflog_s', 0):.1f} s,"
                  f" pack {r.get('pack_s', 0):.1f} s) + init {r['init_s']:.1f} s"
                  + (f"; verify exit {r['verify']['exit']} in {r['verify']['s']:.1f} s" if "verify" in r else ""),
                  flush=True)
    finally:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)
    if a.json_out:
        Path(a.json_out).write_text(json.dumps({"benchmark": "bulk_ledger", "builds": results}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
