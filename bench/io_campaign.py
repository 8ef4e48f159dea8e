"""I/O-failure campaign: the k-th file write, open-for-write, rename, fsync and ref update of an
operation fails, for every k until the operation completes (SQLite's I/O-error tests, for monte).

The operations: a **final claim** (``monte eval --split test`` of the nominated checkpoint), a
**promote** (``monte promote RUN@STEP --dest DIR --confirm``) and a **train chunk** (``monte train``
of a real 4-step SFT chunk from the base, in a second experiment of the same repository: its
checkpoint saved, hashed and recorded). Each runs as a real subprocess
(``python -c BOOT``) in a fresh copy of a prepared repository; BOOT wraps, in that process only,
the system-call wrappers monte and dulwich write through: ``os.open`` and ``open``/``io.open``/
``os.fdopen`` for writing (kind ``open``), ``os.write`` and the ``write`` of a file opened for
writing (``write``), ``os.replace``/``os.rename`` (``rename``), ``os.fsync``/``os.fdatasync``
(``fsync``), and dulwich's ``DiskRefsContainer.set_if_equals``/``add_if_new`` (``ref``). Only
calls on files under the trial's folder are counted (not the terminal, not the model cache). A
first run with nothing injected counts the calls of each kind (N); then for k = 1..N the k-th
call of that kind raises ``OSError`` (ENOSPC for odd k, EIO for even k). The counts show the
injection reaches every call: a trial whose k-th call never came would report it.

The one stand-in: generation answers a constant string (the campaign is about the record's I/O;
the model is still loaded, and its files are real). After each trial: ``monte recover`` (twice:
once more after a failure, as a user would), ``monte ledger verify --all``, ``git fsck --strict``;
checked: no ``E_INTERNAL`` and no traceback, no record lost (the ledger's tip before is an
ancestor of its tip after), no touch spent without a score (a claim row that ends failed or
abandoned while no score was kept for recover), verify and fsck clean.

    .venv/bin/python bench/io_campaign.py --json-out /tmp/io.json           # every k, every operation
    .venv/bin/python bench/io_campaign.py --ops claim --kinds rename,ref
    .venv/bin/python bench/io_campaign.py --quick --json-out /tmp/q.json     # a smoke run: k = 1 of rename, ref

Exit status: 0 when no trial broke a check, 1 otherwise.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # monte and tests.support, as packages

from tests.support.helpers import PINNED_ENV, home_env  # noqa: E402

KINDS = ("open", "write", "rename", "fsync", "ref")
OPS = ("claim", "promote", "train")

BOOT = r"""
import builtins, errno, io, json, os, sys
kind, k = os.environ.get("MONTE_IO_KIND", ""), int(os.environ.get("MONTE_IO_K", "0"))
root = os.path.realpath(os.environ["MONTE_IO_ROOT"])
counts = dict.fromkeys(("open", "write", "rename", "fsync", "ref"), 0)
fired = []
fds = {}
real = {n: getattr(os, n) for n in ("open", "write", "replace", "rename", "fsync", "fdatasync", "fdopen")}
real_open = builtins.open

def ours(path):
    try:
        return os.path.realpath(os.fsdecode(path)).startswith(root + os.sep)
    except (TypeError, ValueError):
        return False

trace = []  # with nothing injected: every counted call, in order ("kind path")
def hit(what, where):
    counts[what] += 1
    if not kind:
        trace.append(f"{what} {where}")
    if what == kind and counts[what] == k and not fired:
        fired.append(f"{what} #{k} {where}")
        code = errno.ENOSPC if k % 2 else errno.EIO
        raise OSError(code, os.strerror(code) + " (injected)", where)

WRITING = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_APPEND
def _open(path, flags, *a, **kw):
    if flags & WRITING and ours(path):
        hit("open", os.fsdecode(path))
    fd = real["open"](path, flags, *a, **kw)
    if flags & WRITING and ours(path):
        fds[fd] = os.fsdecode(path)
    return fd
def _write(fd, data):
    if fd in fds:
        hit("write", fds[fd])
    return real["write"](fd, data)
def _rename(name):
    def f(src, dst, *a, **kw):
        if ours(src) or ours(dst):
            hit("rename", os.fsdecode(dst))
        return real[name](src, dst, *a, **kw)
    return f
def _sync(name):
    def f(fd):
        if fd in fds or (hasattr(fd, "fileno") and fd.fileno() in fds):
            hit("fsync", fds.get(fd if isinstance(fd, int) else fd.fileno(), "?"))
        return real[name](fd)
    return f

class Writing:
    # a file opened for writing under the trial: each write() is counted
    def __init__(self, f, where):
        self._f, self._where = f, where
    def write(self, data):
        hit("write", self._where)
        return self._f.write(data)
    def writelines(self, lines):
        for line in lines:
            self.write(line)
    def __enter__(self):
        return self
    def __exit__(self, *exc):
        return self._f.__exit__(*exc)
    def __iter__(self):
        return iter(self._f)
    def __getattr__(self, name):
        return getattr(self._f, name)

def _fopen(file, mode="r", *a, **kw):
    w = isinstance(mode, str) and any(c in mode for c in "wax+")
    where = os.fsdecode(file) if isinstance(file, (str, bytes, os.PathLike)) else None
    if w and where and ours(where):
        hit("open", where)
    f = real_open(file, mode, *a, **kw)
    if w and where and ours(where):
        fds[f.fileno()] = where
        return Writing(f, where)
    return f
def _fdopen(fd, mode="r", *a, **kw):
    f = real["fdopen"](fd, mode, *a, **kw)
    if fd in fds and any(c in mode for c in "wax+"):
        return Writing(f, fds[fd])
    return f

def report():
    out = os.environ.get("MONTE_IO_COUNT")
    if out:
        with real_open(out, "w") as f:
            json.dump({"counts": counts, "fired": fired, "trace": trace}, f)

import atexit
atexit.register(report)
from monte.cli.main import main
import monte.models.generate as g
g.generate = lambda model, tok, prompts, **kw: ["0" for _ in prompts]
from dulwich.refs import DiskRefsContainer
for name in ("set_if_equals", "add_if_new"):
    orig = getattr(DiskRefsContainer, name)
    def wrapped(self, *a, _orig=orig, **kw):
        hit("ref", a[0].decode(errors="replace") if a and isinstance(a[0], bytes) else "?")
        return _orig(self, *a, **kw)
    setattr(DiskRefsContainer, name, wrapped)
os.open, os.write, os.replace, os.rename = _open, _write, _rename("replace"), _rename("rename")
os.fsync, os.fdatasync, os.fdopen = _sync("fsync"), _sync("fdatasync"), _fdopen
builtins.open = io.open = _fopen
try:
    main(sys.argv[1:])
finally:
    report()
"""


def env_for(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GIT_", "MONTE_"))}
    env.update(PINNED_ENV)
    env.update(home_env(home))
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    return env


# A trial's operation runs in a child forked from one warm process (the zygote), which has only
# imported what an eval or a chunk imports (torch, transformers, monte) and never run a command:
# each child is a fresh monte process minus the seconds of imports, with its own environment,
# folder and standard streams, and BOOT's wrappers installed in it alone. ``--no-fork`` runs each
# trial as a plain ``python -c BOOT`` instead (the same trials, slower).
ZYGOTE = r"""
import json, os, sys, traceback
import torch, transformers  # noqa: F401  (what the operations import, paid once)
import monte.cli.main, monte.evals.run, monte.training.run  # noqa: F401
boot = sys.stdin.readline()
boot = json.loads(boot)
for line in sys.stdin:
    job = json.loads(line)
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            os.chdir(job["cwd"])
            os.environ.update(job["env"])
            for fd, name in ((1, "out"), (2, "err")):
                os.dup2(os.open(job[name], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644), fd)
            sys.argv = ["-c", *job["args"]]
            try:
                exec(compile(boot, "<boot>", "exec"), {"__name__": "__main__"})
                code = 0
            except SystemExit as e:
                code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
            except BaseException:
                traceback.print_exc()
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    print(json.dumps({"exit": os.waitstatus_to_exitcode(status)}), flush=True)
"""


class Zygote:
    """The warm process that forks each trial's operation (see ZYGOTE)."""

    def __init__(self, env: dict[str, str]) -> None:
        self.proc = subprocess.Popen([sys.executable, "-c", ZYGOTE], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     text=True, env=env)
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(BOOT) + "\n")
        self.proc.stdin.flush()

    def run(self, repo: Path, args: list[str], extra: dict[str, str]) -> subprocess.CompletedProcess[str]:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        out, err = repo.parent / "op.out", repo.parent / "op.err"
        self.proc.stdin.write(json.dumps({"cwd": str(repo), "env": extra, "args": args, "out": str(out),
                                          "err": str(err)}) + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError("the zygote died")
        code = json.loads(line)["exit"]
        return subprocess.CompletedProcess(args, code, out.read_text(errors="replace"), err.read_text(errors="replace"))

    def close(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        self.proc.wait(timeout=60)


ZYGOTES: list[Zygote] = []


def monte(repo: Path, *args: str, env: dict[str, str], boot: bool = False,
          extra: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    if boot and ZYGOTES:
        return ZYGOTES[0].run(repo, list(args), extra or {})
    code = BOOT if boot else "from monte.cli.main import main; main()"
    return subprocess.run([sys.executable, "-c", code, *args], cwd=repo, capture_output=True, text=True,
                          env={**env, **(extra or {})}, timeout=600)


TEMPLATE = r"""
import os, sys
import monte.models.generate as g
g.generate = lambda model, tok, prompts, **kw: ["0" for _ in prompts]
from monte.cli.main import main
sys.path[:0] = [os.environ["MONTE_IO_ROOT"]]
from tests.support.helpers import checkpoint
models, repo, train = sys.argv[1], sys.argv[2], sys.argv[3] == "train"
def run(*args):
    try:
        main(list(args))
    except SystemExit as e:
        assert not e.code, (args, e.code)
for args in (("init",), ("env", "add", "--server", "parity", "--dev", "parity", "--test", "parity"),
             ("experiment", "init", "exp", "--eval", "parity", "--model", models + "/base"),
             ("eval", "--yes"), ("eval", "--split", "test", "--yes")):
    run(*args)
ck = checkpoint(__import__("pathlib").Path(repo), __import__("pathlib").Path(models + "/ck"), steps=50)
run("eval", "--checkpoint", ck + "@50", "--yes")
run("nominate", ck + "@50")
import json
with open(os.path.join(repo, ".monte", "environments", "parity", "curriculum.jsonl")) as src, \
        open(os.path.join(repo, "demos.jsonl"), "w") as out:
    for row in map(json.loads, src):
        out.write(json.dumps({"input": row["prompt"], "output": " " + row["answer"]}) + "\n")
if not train:  # no train operation in this campaign: its experiment would serve no trial
    print(ck)
    sys.exit(0)
# the train operation's own experiment: 4-step chunks on the same base and exam (it reads no test)
run("dataset", "add", "parity-sft", "--from-file", os.path.join(repo, "demos.jsonl"), "--kind", "sft")
# (its own base: the seal spans the repository, and a chunk trains from a base with both baselines)
run("experiment", "init", "trn", "--eval", "parity", "--model", models + "/base2", "--steps-per-chunk", "4")
run("eval", "-e", "trn", "--yes")
run("eval", "-e", "trn", "--split", "test", "--yes")
print(ck)
"""


def build_template(tmp: Path, env: dict[str, str], train: bool = True) -> dict[str, Any]:
    """A repository whose final claim is ready: both baselines, a checkpoint (a differently seeded
    tiny model recorded as a chunk, tests/support/helpers.checkpoint) with its dev eval, nominated,
    and (``train``: the campaign has a train operation) the train operation's own experiment. One
    process builds it, generation answering the campaign's constant."""
    from monte.models.tiny import init_model

    models = tmp / "models"
    init_model(models / "base", seed=0)
    init_model(models / "ck", seed=1)
    if train:
        init_model(models / "base2", seed=2)
    repo = tmp / "template" / "repo"
    repo.mkdir(parents=True)
    subprocess.run(["git", "init", "-q", "-b", "main", str(repo)], check=True, env=env)
    r = subprocess.run([sys.executable, "-c", TEMPLATE, str(models), str(repo), "train" if train else "-"],
                       cwd=repo, capture_output=True,
                       text=True, env={**env, "MONTE_IO_ROOT": str(ROOT)}, timeout=900)
    assert r.returncode == 0, (r.stdout[-2000:], r.stderr[-2000:])
    return {"repo": repo, "run": r.stdout.strip().splitlines()[-1]}


def op_args(op: str, run: str, trial: Path) -> list[str]:
    if op == "claim":
        return ["eval", "-e", "exp", "--split", "test", "--yes", "--json"]
    if op == "train":
        return ["train", "-e", "trn", "--recipe", "sft-tiny", "--source", "parity-sft", "--from-base", "--yes",
                "--json"]
    return ["promote", f"{run}@50", "-e", "exp", "--dest", str(trial / "promoted"), "--confirm", f"{run}@50",
            "--json"]


def git_out(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True).stdout.strip()


def trial(template: dict[str, Any], op: str, kind: str, k: int, tmp: Path, env: dict[str, str],
          keep: bool = False) -> dict[str, Any]:
    folder = Path(tempfile.mkdtemp(prefix=f"{op}-{kind}-{k}-", dir=tmp))
    repo = folder / "repo"
    shutil.copytree(template["repo"], repo, symlinks=True)
    exp = "trn" if op == "train" else "exp"
    ledger = f"refs/heads/monte/{exp}/ledger"
    tip_before = git_out(repo, "rev-parse", ledger)
    count = folder / "count.json"
    r = monte(repo, *op_args(op, template["run"], folder), env=env, boot=True,
              extra={"MONTE_IO_ROOT": str(folder), "MONTE_IO_KIND": kind, "MONTE_IO_K": str(k),
                     "MONTE_IO_COUNT": str(count)})
    seen = json.loads(count.read_text()) if count.is_file() else {"counts": {}, "fired": []}
    out = {"op": op, "kind": kind, "k": k, "exit": r.returncode, "fired": seen["fired"], "counts": seen["counts"],
           "problems": []}
    if not kind:
        out["trace"] = seen.get("trace", [])
    problems: list[str] = out["problems"]
    try:
        code = json.loads(r.stdout)["error"]["code"] if r.returncode else None
    except (ValueError, KeyError, TypeError):
        code = "unparsed"
    out["code"] = code
    out["stderr_tail"] = r.stderr[-1000:]
    if code in ("E_INTERNAL", "unparsed") or "Traceback" in r.stderr:
        problems.append(f"{code}: {(r.stdout + r.stderr)[-400:]}")
    for _ in range(2):
        rec = monte(repo, "recover", exp, "--json", env=env)
        if rec.returncode != 0:
            problems.append(f"recover exit {rec.returncode}: {rec.stdout[-300:]}")
    v = monte(repo, "ledger", "verify", "--all", "--json", env=env)
    if v.returncode != 0:
        problems.append(f"verify exit {v.returncode}: {v.stdout[-300:]}")
    fsck = subprocess.run(["git", "fsck", "--strict"], cwd=repo, capture_output=True, text=True)
    if fsck.returncode != 0 or "error" in fsck.stderr:
        problems.append(f"fsck: {fsck.stderr[-300:]}")
    tip_after = git_out(repo, "rev-parse", ledger)
    lost = subprocess.run(["git", "-C", str(repo), "merge-base", "--is-ancestor", tip_before, tip_after]).returncode
    if lost:
        problems.append("a record was lost: the ledger's tip before is not an ancestor of its tip after")
    s = monte(repo, "status", "-e", "exp", "--json", env=env)
    rows = json.loads(s.stdout).get("rows", []) if s.returncode == 0 else []
    claims = [x for x in rows if str(x.get("what", "")).endswith("/test") and x.get("role") == "claim"]
    spent = [x for x in claims if x.get("status") not in ("succeeded", "started", "running")]
    out["claim"] = claims[0]["status"] if claims else None
    if op == "claim" and spent:
        problems.append(f"a touch spent without a score: the claim reads {spent[0].get('status')}")
    if op == "train":  # the chunk's own experiment: no row left running after recover
        t = monte(repo, "status", "-e", "trn", "--json", env=env)
        trows = json.loads(t.stdout).get("rows", []) if t.returncode == 0 else []
        out["train"] = trows[-1]["status"] if trows else None
        if t.returncode != 0:
            problems.append(f"status -e trn exit {t.returncode}: {t.stdout[-300:]}")
        stuck = [x for x in trows if x.get("status") in ("started", "running")]
        if stuck:
            problems.append(f"a chunk left {stuck[0].get('status')} after recover: {stuck[0].get('run')}")
    if keep:
        kept = Path(tempfile.gettempdir()) / "monte-io-kept" / folder.name
        shutil.copytree(folder, kept, symlinks=True, dirs_exist_ok=True)
        out["kept"] = str(kept)
        print(f"kept {kept}: {r.stdout[-1500:]}\n{r.stderr[-1500:]}", flush=True)
    shutil.rmtree(folder, ignore_errors=True)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ops", default=",".join(OPS))
    ap.add_argument("--kinds", default=",".join(KINDS))
    ap.add_argument("--quick", action="store_true", help="the claim only, k = 1 of rename and ref")
    ap.add_argument("--json-out", type=Path)
    ap.add_argument("--k", type=int, help="only the k-th call of each kind (to look again at one trial)")
    ap.add_argument("--keep", action="store_true", help="keep each trial's folder (printed) for a look")
    ap.add_argument("--no-fork", action="store_true", help="each operation a fresh `python -c` (slower)")
    ap.add_argument("--trace-out", type=Path, help="write each operation's counted calls, in order "
                    "(`kind path`, k-th of its kind), as JSON: which file the k-th call of a trial is")
    a = ap.parse_args()
    ops = ["claim"] if a.quick else a.ops.split(",")
    kinds = ["rename", "ref"] if a.quick else a.kinds.split(",")
    t0 = time.time()
    with tempfile.TemporaryDirectory(prefix="monte-io-") as td:
        tmp = Path(td)
        env = env_for(tmp / "home")
        template = build_template(tmp, env, train="train" in ops)
        if not a.no_fork:
            ZYGOTES.append(Zygote(env))
        results: list[dict[str, Any]] = []
        points: dict[str, dict[str, int]] = {}
        traces: dict[str, list[str]] = {}
        for op in ops:
            base = trial(template, op, "", 0, tmp, env)  # nothing injected: count the calls
            points[op] = base["counts"]
            traces[op] = base.get("trace", [])
            if base["exit"]:  # nothing injected, and it fails: the campaign measures nothing
                base["problems"].append(f"with nothing injected it exits {base['exit']} {base.get('code')}")
            if base["problems"]:
                results.append(base)
            for kind in kinds:
                n = base["counts"].get(kind, 0)
                for k in ([a.k] if a.k else range(1, (min(n, 1) if a.quick else n) + 1)):
                    t1 = time.time()
                    res = trial(template, op, kind, k, tmp, env, keep=a.keep)
                    res["seconds"] = round(time.time() - t1, 1)
                    if not res["fired"]:
                        res["problems"].append(f"the injection did not reach {kind} call #{k} (of {n} counted)")
                    results.append(res)
                    print(f"{op} {kind} #{k}/{n}: exit {res['exit']} {res['code'] or ''} claim={res['claim']} "
                          f"{'; '.join(res['problems']) or 'ok'} ({res['seconds']} s)", flush=True)
        for z in ZYGOTES:
            z.close()
    failed = [r for r in results if r["problems"]]
    outcomes: dict[str, dict[str, int]] = {}
    completed_after: dict[str, list[str]] = {}
    for r in results:
        key = f"{r['op']}/{r['kind'] or 'none'}"
        outcomes.setdefault(key, {})
        label = "completed" if r["exit"] == 0 else r["code"] or f"exit {r['exit']}"
        outcomes[key][label] = outcomes[key].get(label, 0) + 1
        if r["exit"] == 0 and r["fired"]:  # the call that failed and the operation did without
            completed_after.setdefault(key, []).append(r["fired"][0].replace(str(tmp) + os.sep, ""))
    summary = {"bench": "io_campaign", "quick": a.quick, "python": platform.python_version(),
               "injection_points": points, "trials": len(results), "failed_trials": len(failed),
               "outcomes": outcomes, "completed_after": completed_after, "failures": failed[:20],
               "forked": not a.no_fork,
               "seconds": round(time.time() - t0, 1)}
    print(json.dumps({k: v for k, v in summary.items() if k not in ("failures", "completed_after")}, indent=2))
    for f in failed[:10]:
        print("FAILED", f["op"], f["kind"], f["k"], f["problems"])
    if a.json_out:
        a.json_out.write_text(json.dumps(summary, indent=2))
    if a.trace_out:
        a.trace_out.write_text(json.dumps({op: [line.replace(str(tmp) + os.sep, "") for line in t]
                                           for op, t in traces.items()}, indent=1))
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
