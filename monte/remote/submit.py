"""``--remote``: move one Run onto a box and return, in a fixed order (docs/remote.md).

1. **The reproducibility gate**: a clean working tree, and origin contains ``HEAD`` (the box
   checks out exactly that commit, so the recorded ``git_sha`` is true). A refusal, never a
   warning.
2. **A box**: ``--provider ssh --host USER@HOST[:PORT]`` is any SSH host; otherwise one of
   monte's Lambda boxes that is active and warm is reused, else one is launched and armed.
3. **The run rows**: the laptop appends each run's ``started`` record (the touch is spent at
   submission, by the same rules as a local run) naming the box, and pushes them to the results
   bucket. The box's job adopts those rows (``--adopt``) and moves them on from there.
4. **The code**: a git bundle of ``HEAD`` (plus the vault ref) is copied over and cloned at the
   recorded commit, then the setup command runs (``uv sync`` when the box has uv).
5. **The credentials**: streamed over stdin into 0600 files under the box's ``/etc/monte``
   (``MONTE_BOX_ETC``), never argv.
6. **The tree**: seeded by the box's own ``monte sync`` (and ``env install`` of what the run
   reads), the one transfer path.
7. **The job**: detached in tmux (``monte-<run>``), with ``--push``; on a Lambda box the job's
   last act is to terminate the box through the API.

Every refusal the laptop can prove fires before anything is written. A failure after the rows
were started marks them ``failed`` with the reason (and pushes that), and a box launched for
this submission is terminated, so nothing is left running unseen.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

from monte.errors import MonteError, error
from monte.ledger.refs import VAULT_REF

SETUP_ENV = "MONTE_BOX_SETUP"  # the box's setup command, run in the checkout
PYTHON_ENV = "MONTE_BOX_PYTHON"  # the interpreter the job runs monte with
WORKDIR_ENV = "MONTE_BOX_WORKDIR"  # where checkouts live on the box (default ~/monte-work)
DATA_ROOT_ENV = "MONTE_BOX_DATA_ROOT"  # the box's data root (a warm box: the shared one)
ETC_ENV = "MONTE_BOX_ETC"
DEFAULT_SETUP = ("if command -v uv >/dev/null; then uv sync; else python3 -m venv .venv && "
                 ".venv/bin/pip install -q -e .; fi")
# Settings the job needs that are not secrets, passed through from the laptop when set.
PASS_THROUGH = ("STORAGE_EMULATOR_HOST", "GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT", "MONTE_GCS_RETRY_S",
                "MONTE_HUB_REPO", "HF_HUB_OFFLINE", "MONTE_LAMBDA_API")


def _git(repo: Path, *args: str) -> str:
    r = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True)
    if r.returncode != 0:
        raise error("E_REFUSED", f"git {' '.join(args)} failed: {r.stderr.strip()[:200]}",
                    "--remote needs a git checkout with an origin")
    return r.stdout


def gate(repo: Path) -> str:
    """The reproducibility gate; returns the commit the box will check out."""
    dirty = _git(repo, "status", "--porcelain", "--untracked-files=normal").splitlines()
    if dirty:
        raise error("E_REFUSED", f"the working tree is not clean ({len(dirty)} change(s), e.g. "
                    f"{dirty[0].strip()}): the box would run code the record does not name",
                    "commit (or stash) the changes and push them to origin, then submit again")
    head = _git(repo, "rev-parse", "HEAD").strip()
    if not _git(repo, "remote").split():
        raise error("E_REFUSED", "this repository has no remote: the box checks out a commit origin holds",
                    "add origin and push HEAD to it (git remote add origin URL && git push)")
    if not _git(repo, "for-each-ref", "--contains", head, "--format=%(refname)", "refs/remotes/origin").split():
        raise error("E_REFUSED", f"origin does not contain HEAD ({head[:12]}): an unpushed commit cannot be "
                    "reproduced from the record", "push it first (git push), then submit again")
    return head


def parse_host(host: str) -> tuple[str | None, str, int]:
    user, _, rest = host.rpartition("@")
    name, _, port = rest.partition(":")
    if not name or (port and not port.isdigit()):
        raise error("E_USAGE", f"cannot read --host {host!r}", "write --host [USER@]HOST[:PORT]")
    return user or None, name, int(port or 22)


class Box:
    def __init__(self, conn: Any, label: str, *, lambda_box: dict[str, Any] | None, launched: bool) -> None:
        self.conn = conn
        self.label = label
        self.lambda_box = lambda_box
        self.launched = launched


def _box(ws: Any, provider: str, host: str | None, ssh_key: str | None, *, warm: bool) -> Box:
    from monte.remote import ssh

    if provider == "ssh":
        if not host:
            raise error("E_USAGE", "--provider ssh needs --host USER@HOST[:PORT]", "name the machine to run on")
        user, name, port = parse_host(host)
        conn = ssh.connect(name, user=user, port=port, key_file=ssh_key or os.environ.get("MONTE_SSH_KEY_FILE"))
        return Box(conn, f"ssh:{name}:{port}", lambda_box=None, launched=False)
    if host:
        raise error("E_USAGE", "--host names an SSH box", "add --provider ssh, or drop --host to use Lambda")
    from monte.remote import boxes

    found = _reusable_lambda_box(ws, boxes)
    launched = False
    if found is None:
        if not warm:
            raise error("E_BOX", "no active monte box to reuse", "start one with `monte box up`")
        found = boxes.up(ws).get("box") if hasattr(boxes, "up") else None
        launched = True
    if not found:
        raise error("E_BOX", "could not find or launch a box", "see `monte box status`")
    key = ssh_key or os.environ.get(boxes.SSH_KEY_FILE_ENV)
    conn = ssh.connect(found["ip"], user=boxes.SSH_USER, key_file=key)
    return Box(conn, f"lambda:{found['name']}", lambda_box=found, launched=launched)


def _reusable_lambda_box(ws: Any, boxes: Any) -> dict[str, Any] | None:
    """An active, warm monte box of this data root's (its identity file), if any."""
    try:
        listed = boxes.status(ws).get("instances", [])
    except MonteError:
        return None
    for b in listed:
        if (b.get("owner") == "monte" and b.get("status") == "active" and b.get("cold") is False
                and not b.get("over_ttl") and b.get("ip")):
            return dict(b)
    return None


def _secrets(ws: Any, *, kind: str, plan: Any) -> tuple[dict[str, str], bytes | None]:
    """What the box needs to hold: (KEY=VALUE secrets, the GCS key file's bytes or None). Read
    before any box is found or launched: a missing one refuses with no box touched."""
    from monte.storage.keys import write_key

    out: dict[str, str] = {}
    bucket = plan.bucket or ""
    gcs = None
    vault = ws.config.get("vault") or os.environ.get("MONTE_VAULT") or ""
    if bucket.startswith("gs://") or str(vault).startswith("gs://"):
        key = write_key()
        if key is None:
            raise error("E_STORAGE", "the box pushes results with a write key, and none resolved here",
                        "set MONTE_GCS_BOX_KEY_FILE (or MONTE_GCS_BOX_KEY_OP)")
        gcs = json.dumps(key.info).encode()
    if kind == "train" and not plan.smoke:
        token = _hf_token()
        if not token:
            raise error("E_STORAGE", "a real --remote train uploads its checkpoint to the hub, and no Hugging "
                        "Face token is set here", "set HF_TOKEN (or `hf auth login`), then submit again")
        out["HF_TOKEN"] = token
    return out, gcs


def _hf_token() -> str | None:
    token = os.environ.get("HF_TOKEN") or os.environ.get("HUGGING_FACE_HUB_TOKEN")
    if token:
        return token
    try:
        from huggingface_hub import get_token

        return get_token()
    except Exception:  # noqa: BLE001 - no token is an answer, not an error
        return None


def submit(ws: Any, *, kind: str, plan: Any, provider: str, host: str | None,
           ssh_key: str | None, on_step: Any = None) -> dict[str, Any]:
    """Submit ``plan`` (already checked here) to a box; returns the runs, the box and the job."""
    from monte.remote import jobargs
    from monte.storage.locations import url_for

    # before anything is started: a flag the box could not take refuses here
    box_args = jobargs.eval_args(plan) if kind == "eval" else jobargs.train_args(plan, ws.repo_root)
    step = on_step or (lambda what: None)
    timings: dict[str, float] = {}
    t0 = time.perf_counter()
    commit = gate(ws.repo_root)
    if url_for(ws, "bucket") is None:
        raise error("E_STORAGE", "a remote run pushes its results to the results bucket, and none is configured",
                    "name it with `monte config set bucket gs://BUCKET/PREFIX`")
    secrets, gcs_key = _secrets(ws, kind=kind, plan=plan)  # before a box is launched: a missing secret costs no box
    timings["gate"] = time.perf_counter() - t0
    t = time.perf_counter()
    box = _box(ws, provider, host, ssh_key, warm=True)
    timings["box"] = time.perf_counter() - t
    if box.lambda_box is not None:  # the job's last act terminates the box through the API
        from monte.remote.lambda_api import resolve_key

        try:
            secrets["MONTE_LAMBDA_KEY"] = resolve_key().reveal()
        except BaseException:
            _release(box)
            raise
    from monte.ledger.experiment import Ledger

    environment = Ledger(ws.store, plan.experiment).measurement().environment
    rows = _start_rows(ws, kind=kind, plan=plan, box=box, commit=commit)
    runs = [r.run for r in rows]
    session = f"monte-{runs[0]}"
    try:
        t = time.perf_counter()
        _push_rows(ws, plan.experiment)
        timings["rows"] = time.perf_counter() - t
        env, workdir = _ship(ws, box, commit, step, timings)
        _credentials(box, secrets, gcs_key, env, step, timings)
        _seed(box, workdir, env, plan, kind, environment, step, timings)
        adopt = [f"--adopt={r.exam}={r.run}" if kind == "eval" else f"--adopt={r.run}" for r in rows]
        _job(box, workdir, env, kind, [*box_args, *adopt], runs, session, step, timings)
    except BaseException as e:
        reason = (f"{e.code}: {e.message}" if isinstance(e, MonteError)
                  else "interrupted" if isinstance(e, KeyboardInterrupt) else f"{type(e).__name__}: {e}")
        _fail_rows(ws, plan.experiment, rows, f"remote submission failed: {reason}")
        _release(box)
        if isinstance(e, MonteError):
            raise error("E_BOX", f"the submission to {box.label} failed: {e.message}",
                        e.fix or "fix what the box reported and submit again; the run reads failed") from None
        raise
    timings["total"] = time.perf_counter() - t0
    return {"experiment": plan.experiment, "runs": runs, "box": box.label, "session": session,
            "commit": commit, "workdir": workdir, "timings": {k: round(v, 3) for k, v in timings.items()}}


def _start_rows(ws: Any, *, kind: str, plan: Any, box: Box, commit: str) -> list[Any]:
    from monte.ledger.experiment import Ledger

    who = {"host": box.label, "pid": None, "proc_start": None}
    remote = {"box": box.label, "commit": commit}
    if kind == "eval":
        from monte.evals import start_row

        ledger = Ledger(ws.store, plan.experiment)
        return [start_row(ledger, plan, e, who=who, extra_plan={"remote": remote}, ws=ws) for e in plan.exams]
    from monte.training.plan import row_plan
    from monte.training.record import start_chunk

    return [start_chunk(ws, plan.experiment, cohort=plan.cohort, base_model=plan.base_model, smoke=plan.smoke,
                        plan={**row_plan(plan), "remote": remote}, who=who)]


def _push_rows(ws: Any, experiment: str) -> None:
    from monte.storage import results

    results.push(ws, experiment)


def _fail_rows(ws: Any, experiment: str, rows: list[Any], reason: str) -> None:
    from monte.ledger.experiment import Ledger
    from monte.manifest import now

    ledger = Ledger(ws.store, experiment)
    for r in rows:
        def make(snap: Any, seq: int, r: Any = r) -> Any:
            cur = ledger.row(r.run, snap) or r
            if cur.status not in ("started", "running"):
                raise error("E_CONFLICT", f"run {r.run} already finished", "")
            return cur.model_copy(update={"status": "failed", "error": reason[:500], "updated_at": now()})

        try:
            ledger.append_row(make, event="failed", summary=lambda row: f"{row.kind} {row.run} failed: {reason[:80]}")
        except MonteError:
            pass
    try:
        _push_rows(ws, experiment)
    except MonteError:
        pass  # the failure is recorded here; the next push carries it


def _release(box: Box) -> None:
    """Close the connection; terminate a box launched for this submission (no orphans)."""
    try:
        box.conn.close()
    except Exception:  # noqa: BLE001
        pass
    if box.launched and box.lambda_box is not None:
        from monte.remote import boxes

        try:
            boxes.down(None, box.lambda_box.get("id"))
        except MonteError:
            pass


def _env(ws: Any, workdir: str, etc: str) -> dict[str, str]:
    from monte.storage.locations import url_for

    env = {"PYTHONPATH": workdir, "MONTE_BUCKET": url_for(ws, "bucket") or "",
           "MONTE_DATA_ROOT": os.environ.get(DATA_ROOT_ENV) or f"{workdir}/.monte",
           "MONTE_GCS_BOX_KEY_FILE": f"{etc}/gcs-key.json", "MONTE_GCS_KEY_FILE": f"{etc}/gcs-key.json",
           "MONTE_SECRETS_FILE": f"{etc}/secrets"}
    vault = url_for(ws, "vault")
    if vault:
        env["MONTE_VAULT"] = vault
    for k in PASS_THROUGH:
        if os.environ.get(k):
            env[k] = os.environ[k]
    return env


def _ship(ws: Any, box: Box, commit: str, step: Any, timings: dict[str, float]) -> tuple[dict[str, str], str]:
    """The code: a bundle of HEAD and the vault ref, cloned at the commit, then set up."""
    from monte.remote import ssh

    conn = box.conn
    home = ssh.run(conn, "printf %s \"$HOME\"", timeout=30).strip()
    base = os.environ.get(WORKDIR_ENV) or f"{home}/monte-work"
    workdir = f"{base}/{commit[:12]}"
    etc = os.environ.get(ETC_ENV) or "/etc/monte"
    t = time.perf_counter()
    step("bundle")
    refs = ["HEAD"] + ([VAULT_REF] if ws.store.tip(VAULT_REF) else [])
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "code.bundle"
        _git(ws.repo_root, "bundle", "create", "-q", str(path), *refs)
        data = path.read_bytes()
    q = shlex.quote
    ssh.run(conn, f"mkdir -p {q(base)}", timeout=30)
    bundle = f"{base}/{commit[:12]}.bundle"
    ssh.put_bytes(conn, data, bundle, 0o600)
    ssh.run(conn, f"set -e; if [ ! -d {q(workdir)}/.git ]; then git clone -q --no-checkout {q(bundle)} {q(workdir)}; fi; "
                  f"cd {q(workdir)} && git fetch -q {q(bundle)} '+{VAULT_REF}:{VAULT_REF}' 2>/dev/null "
                  f"|| true; git fetch -q {q(bundle)} HEAD && git checkout -q --detach {commit} && "
                  f"test \"$(git rev-parse HEAD)\" = {commit}", timeout=300)
    timings["bundle"] = time.perf_counter() - t
    t = time.perf_counter()
    step("setup")
    setup = os.environ.get(SETUP_ENV) or DEFAULT_SETUP
    ssh.run(conn, f"cd {q(workdir)} && {setup}", timeout=3600)
    timings["setup"] = time.perf_counter() - t
    return _env(ws, workdir, etc), workdir


def _credentials(box: Box, secrets: dict[str, str], gcs_key: bytes | None, env: dict[str, str], step: Any,
                 timings: dict[str, float]) -> None:
    from monte.remote import ssh

    t = time.perf_counter()
    step("credentials")
    etc = shlex.quote(os.path.dirname(env["MONTE_SECRETS_FILE"]))
    # /etc/monte belongs to root: a login user with sudo gets it made theirs, mode 0700.
    ssh.run(box.conn, f"umask 077 && (mkdir -p {etc} 2>/dev/null && test -w {etc} || "
                      f"sudo -n install -d -m 700 -o \"$(id -un)\" {etc})", timeout=30)
    ssh.stream_secrets(box.conn, secrets, env["MONTE_SECRETS_FILE"])
    if gcs_key is not None:
        ssh.put_bytes(box.conn, gcs_key, env["MONTE_GCS_BOX_KEY_FILE"], 0o600)
    timings["credentials"] = time.perf_counter() - t


def _monte(env: dict[str, str], workdir: str) -> str:
    python = os.environ.get(PYTHON_ENV) or f"{workdir}/.venv/bin/python"
    return f"{shlex.quote(python)} -m monte"


def _sourced(env: dict[str, str], workdir: str, cmd: str) -> str:
    """``cmd`` in the checkout with the job's environment and the secrets file sourced."""
    q = shlex.quote
    exports = " ".join(f"{k}={q(v)}" for k, v in env.items())
    return (f"cd {q(workdir)} && export {exports} && if [ -f \"$MONTE_SECRETS_FILE\" ]; then set -a; "
            f". \"$MONTE_SECRETS_FILE\"; set +a; fi && {cmd}")


def _seed(box: Box, workdir: str, env: dict[str, str], plan: Any, kind: str, environment: str, step: Any,
          timings: dict[str, float]) -> None:
    """The tree, by the box's own ``monte sync``; then what the run reads, from the Vault (or
    re-made from the vault ref's recorded seeds)."""
    from monte.remote import ssh

    t = time.perf_counter()
    step("sync")
    m = _monte(env, workdir)
    exp = shlex.quote(plan.experiment)
    cmds = ["mkdir -p \"$MONTE_DATA_ROOT\"", f"{m} sync {exp}"]
    envs = {environment}
    if kind == "train":
        if plan.source.kind == "dataset":
            cmds.append(f"{m} dataset show {shlex.quote(plan.source.name)} >/dev/null")
        else:
            envs.add(plan.source.name)
    for name in sorted(envs):
        cmds.append(f"{m} env install {shlex.quote(name)} >/dev/null")
    ssh.run(box.conn, _sourced(env, workdir, " && ".join(cmds)), timeout=1800)
    timings["sync"] = time.perf_counter() - t


def _flag(args: list[str], name: str) -> str | None:
    return args[args.index(name) + 1] if name in args and args.index(name) + 1 < len(args) else None


def _job(box: Box, workdir: str, env: dict[str, str], kind: str, args: list[str], runs: list[str], session: str,
         step: Any, timings: dict[str, float]) -> None:
    from monte.remote import ssh

    t = time.perf_counter()
    step("job")
    q = shlex.quote
    m = _monte(env, workdir)
    etc = os.path.dirname(env["MONTE_SECRETS_FILE"])
    log = f"{workdir}/{session}.log"
    python = os.environ.get(PYTHON_ENV) or f"{workdir}/.venv/bin/python"
    job_args = [*args, "--push", "--yes"]
    if kind == "train":
        from monte.training.launch import launch_command

        argv = launch_command(python, job_args, box_gpus(box))
    else:
        argv = [python, "-m", "monte", kind, *job_args]
    # A job that dies (OOM-killed, a crash monte could not record) leaves its rows running: the
    # wrapper records them abandoned with the exit status and pushes that, so the laptop's next
    # sync reads it. `monte stop` refuses a row that already finished, so a clean end is untouched.
    exp = q(str(_flag(args, "--experiment")))
    reap = "; ".join(f"{m} stop {exp}/{q(r)} --reason \"the job on the box exited with status $rc\" >/dev/null 2>&1"
                     for r in runs)
    cmd = (f"{' '.join(q(a) for a in argv)} > {q(log)} 2>&1; rc=$?; "
           f"if [ $rc != 0 ]; then {reap}; {m} push {exp} >/dev/null 2>&1; fi; echo $rc > {q(log)}.exit")
    if box.lambda_box is not None:  # the box ends itself when the job ends (the watchdog's terminate)
        cmd += f"; /usr/bin/python3 {q(etc)}/watchdog.py done --etc {q(etc)} || true"
    ssh.tmux_start(box.conn, session, _sourced(env, workdir, cmd), env={"MONTE_JOB": session},
                   env_dir=f"{etc}/jobs")
    timings["job"] = time.perf_counter() - t


def gpus_of_type(instance_type: str) -> int:
    """GPUs of a Lambda instance type by its name (``gpu_8x_h100_sxm5`` -> 8; unknown -> 1)."""
    import re

    m = re.match(r"gpu_(\d+)x_", instance_type or "")
    return int(m.group(1)) if m else 1


def box_gpus(box: Box) -> int:
    """How many GPUs the box has: its Lambda type, else what ``nvidia-smi -L`` lists (0 -> 1)."""
    from monte.remote import ssh

    if box.lambda_box is not None and box.lambda_box.get("type"):
        return gpus_of_type(str(box.lambda_box["type"]))
    out = ssh.execute(box.conn, "nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true", timeout=30).stdout
    try:
        return max(1, int(out.strip() or "0"))
    except ValueError:
        return 1
