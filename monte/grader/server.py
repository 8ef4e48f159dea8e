"""``monte grader serve``: the only program the agent's key can start on the grader's account.

OpenSSH runs it as the forced command of that key (``command="... monte grader serve --home
DIR",restrict``): whatever command line the client asks for is ignored, there is no shell, no
pty, no forwarding. It speaks one request per SSH session over stdin/stdout:

- the request: one JSON line ``{"op": ..., ...}``, then exactly ``size`` raw bytes when the
  operation carries a payload (a sealed split for ``take``, a tar of the weights for ``read``);
- the answer: one JSON line, ``{"ok": true, ...}`` or ``{"error": {"code", "message", "fix"}}``.

Operations: ``hello`` (the grader's public key, and the content hash and item count of each
sealed split it holds), ``take`` (a sealed split into custody), ``draw`` (a catalog exam's test
split drawn here with a secret seed: its hash, size and count come back, never an item),
``leaks`` (a count, never a text), ``read`` (one test read), ``fetch`` (a read's signed result by
run id). Nothing else is answered: no file is ever read back by name, no item ever leaves.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import signal
import subprocess
import sys
import tarfile
from pathlib import Path, PurePosixPath
from typing import IO, Any

from monte.errors import MonteError, error
from monte.grader import home as homes
from monte.grader import nemo
from monte.grader.home import Home
from monte.ledger.grader_statement import weights_id

MAX_HEADER = 1 << 20
#: the graders a grader can run without the environment's folder (in-process graders)
GRADABLE = (None, "catalog", "jsonl")


def grades() -> dict[str, Any]:
    """The exam kinds this grader can grade, each with what a client checks (what ``hello`` says,
    so a client refuses to hand over an exam it cannot): the in-process graders, lm-eval's where
    its python has lm_eval, NeMo Gym's (with its version) where it has a stack to run servers."""
    from monte.grader import lmeval

    return {**{k: {} for k in GRADABLE if k}, **({lmeval.KIND: {}} if lmeval.available() else {}), **nemo.grades()}


def serve(home: Home, stdin: IO[bytes], stdout: IO[bytes], *, threads: int | None = None) -> int:
    """Answer one request; returns the exit status. ``threads``: the CPU threads a read's worker
    generates with (sshd passes no environment, so torch would take every core)."""
    signal.signal(signal.SIGHUP, signal.SIG_IGN)  # a client that vanishes never stops a read midway
    signal.signal(signal.SIGPIPE, signal.SIG_IGN)  # a closed stdout is an OSError, handled
    try:
        line = stdin.readline(MAX_HEADER)
        try:
            req = json.loads(line)
        except ValueError:
            raise error("E_BAD_INPUT", "the grader takes one JSON line per request",
                        "use monte's own client (`monte eval --split test`, `monte grader take`)") from None
        if not isinstance(req, dict):
            raise error("E_BAD_INPUT", "a request is a JSON object", "use monte's own client")
        size = int(req.get("size") or 0)
        payload = _read_exactly(stdin, size) if size else b""
        op = req.get("op")
        if op == "hello":
            answer: dict[str, Any] = {"public_key": home.public_key(), "version": 1, "sealed": held(home),
                                      "grades": grades()}
        elif op == "take":
            answer = take(home, req, payload)
        elif op == "draw":
            answer = draw(home, req)
        elif op == "read":
            answer = read(home, req, payload, threads=threads, talk=(stdin, stdout))
        elif op == "leaks":
            answer = leaks(home, req, payload)
        elif op == "fetch":
            answer = fetch(home, str(req.get("run", "")))
        else:
            raise error("E_USAGE", f"the grader answers no operation {op!r}",
                        "the grader answers hello, take, draw, leaks, read and fetch only")
        out = {"ok": True, **answer}
        status = 0
    except MonteError as e:
        out = {"error": {"code": e.code, "message": e.message, "fix": e.fix}}
        status = 1
    try:
        stdout.write(json.dumps(out).encode() + b"\n")
        stdout.flush()
    except OSError:  # the client is gone; what was read is in the grader's ledger for `fetch`
        pass
    return status


def _read_exactly(stdin: IO[bytes], size: int) -> bytes:
    buf = bytearray()
    while len(buf) < size:
        chunk = stdin.read(min(1 << 20, size - len(buf)))
        if not chunk:
            raise error("E_BAD_INPUT", f"the request announced {size} bytes and sent {len(buf)}",
                        "run the command again (the connection dropped mid-request); nothing was spent")
        buf += chunk
    return bytes(buf)


def _run_id(run: str) -> str:
    from monte.names import check_name

    return check_name(run, "run id")


# --- take ----------------------------------------------------------------------------------------


def held(home: Home) -> dict[str, int]:
    """The sealed splits in custody: content sha256 -> item count (what the agent's manifest and
    measurement record anyway; never an item)."""
    out = {}
    for meta in sorted(home.sealed.glob("*.json")):
        doc = json.loads(meta.read_text())
        out[str(doc["content"])] = int(doc["n"])
    return out


def take(home: Home, req: dict[str, Any], payload: bytes) -> dict[str, Any]:
    """Keep a sealed split: its bytes must hash to the content the request names (an lm-eval
    exam: its split and its frozen task folder, :func:`monte.grader.lmeval.take`). ``check``: only
    whether this grader can grade it (a NeMo Gym exam's server started once), nothing kept."""
    from monte.grader import lmeval

    content = str(req.get("content", ""))
    grader = req.get("grader")
    kind = grader.get("kind") if isinstance(grader, dict) else None
    if kind == nemo.KIND:  # graded by a resources server this grader starts from its own NeMo Gym
        assert isinstance(grader, dict)
        nemo.check(grader, str(req.get("exam", "")), start=bool(req.get("check")),
                   log=home.root / "logs" / f"take-{_run_id(content[:16] or 'none')}.log")
    elif kind == lmeval.KIND:
        if not lmeval.available():
            raise lmeval.cannot_grade("this grader", "nothing was kept")
    elif kind not in GRADABLE:
        raise error("E_USAGE", f"this grader cannot grade {kind!r} exams yet (the catalog's, JSONL, lm-eval and "
                    "NeMo Gym exams only)", "keep this environment's test split local, or freeze it as a JSONL exam")
    if req.get("check"):
        return {"content": content, "checked": True}
    if kind != lmeval.KIND and hashlib.sha256(payload).hexdigest() != content:
        raise error("E_INTEGRITY", "the split sent does not hash to the content it names",
                    "run `monte grader take ENV` again from a repository whose frozen split is intact")
    meta = {"content": content, "exam": req.get("exam"), "benchmark": req.get("benchmark"), "grader": grader,
            "n": payload.count(b"\n") if payload.endswith(b"\n") else payload.count(b"\n") + 1}
    old = os.umask(0o077)
    try:
        with homes.locked(home):
            if kind == lmeval.KIND:  # the whole frozen task, proven on arrival
                meta["n"] = lmeval.take(home.sealed, req, payload)["n"]
                # the tar signed by its hash: the Vault keeps it encrypted, and `restore` rebuilds
                # the task folder only from the bytes signed here (the split's name says where it sits)
                meta["split"], meta["bundle"] = str(req.get("split", "")), hashlib.sha256(payload).hexdigest()
            else:
                (home.sealed / f"{content}.jsonl").write_bytes(payload)
            (home.sealed / f"{content}.json").write_text(json.dumps(meta, sort_keys=True) + "\n")
    finally:
        os.umask(old)
    # what grades it, signed: the Vault's encrypted copy carries it, and `monte grader restore`
    # trusts no record the grader did not sign (monte.storage.sealed_copy)
    return {"content": content, "n": meta["n"], "meta": meta, "signature": sign_meta(home, meta)}


def draw(home: Home, req: dict[str, Any]) -> dict[str, Any]:
    """A catalog environment's test splits drawn here (``monte env add`` with a grader pinned)
    from a seed of 63 random bits that never leaves this home: the catalog's public seed does
    not give them, and the content hash the agent's manifest records cannot be matched by trying
    seeds. The plan is made again from this grader's catalog (its sizes, never the client's), and
    dev and the curriculum are drawn here from their public seeds as the freeze draws them, so
    the splits stay disjoint by content and no prompt the client chose steers the draw. What goes
    back depends on the test items only through their hash, size, count, dropped count and floor."""
    from monte.envs import freeze
    from monte.envs.floor import constant_floor
    from monte.envs.registry import get

    plan = freeze.replan(req.get("plan"))
    grader = freeze.catalog_grader(plan.exams)
    benches = sorted({b for sp in plan.exams.values() for b in sp.values()} | (
        {plan.curriculum} if plan.curriculum else set()))
    seed = int.from_bytes(os.urandom(8), "big") >> 1
    out: dict[str, Any] = {}
    old = os.umask(0o077)
    try:
        with homes.locked(home):
            for exam, (items, dropped) in freeze.draw_sealed(plan, seed).items():
                raw = freeze.split_bytes(items)
                content = hashlib.sha256(raw).hexdigest()
                bench = plan.exams[exam]["test"]
                meta = {"content": content, "exam": exam, "benchmark": bench, "grader": grader, "n": len(items)}
                floor = constant_floor(get(bench).benchmark, items)
                (home.sealed / f"{content}.jsonl").write_bytes(raw)
                # the seed stays here, beside the split it drew (no answer, no log, no Vault record names it)
                (home.sealed / f"{content}.seed").write_text(f"{seed}\n")
                (home.sealed / f"{content}.json").write_text(json.dumps(meta, sort_keys=True) + "\n")
                out[exam] = {"content": content, "size": len(raw), "n": len(items), "dropped": dropped,
                             "floor": floor.model_dump(mode="json") if floor is not None else None,
                             "meta": meta, "signature": sign_meta(home, meta), **_encrypted(home, raw)}
    finally:
        os.umask(old)
    return {"drawn": out, "benchmarks": freeze.versions(benches)}


def _encrypted(home: Home, raw: bytes) -> dict[str, Any]:
    """A drawn split encrypted to this home's own key, for the Vault's copy (the client keeps it
    without ever holding the plaintext; only this key opens it: ``monte grader restore``); none
    where this python lacks age (``pyrage``, the ``storage`` extra)."""
    import base64
    import importlib.util

    from monte.storage.sealed_copy import encrypt

    if importlib.util.find_spec("pyrage") is None:
        return {}
    md5 = hashlib.md5(raw).hexdigest()  # noqa: S324 - DVC 3's content address, not a security hash
    return {"vault": {"age": base64.b64encode(encrypt(raw, home.public_key())).decode(), "md5": md5}}


def sign_meta(home: Home, meta: dict[str, Any]) -> str:
    from monte.ledger.grader_statement import canonical
    from monte.ledger.signing import ssh_sign
    from monte.storage.sealed_copy import NAMESPACE

    return ssh_sign(home.key, canonical(meta), NAMESPACE).decode()


# --- the leak check against what is in custody --------------------------------------------------


def leaks(home: Home, req: dict[str, Any], payload: bytes) -> dict[str, Any]:
    """How many of the training rows sent hold an item of the sealed splits named (after
    normalisation, as :func:`monte.training.sources.leak_check` finds them), and one example:
    the row's label and the sealed item's id (never its text)."""
    import tempfile

    from monte.envs.grading import task_id
    from monte.envs.items import LeakIndex, item_text
    from monte.training.sources import Source, rows_of

    sealed: dict[str, str] = {}
    of: dict[str, str] = {}  # sealed item id -> the content it is an item of
    contents = [str(c) for c in req.get("contents") or []]
    for content in contents:
        meta = homes.sealed_meta(home, content)
        if meta is None:
            raise error("E_NOT_FOUND", "the grader holds no sealed split with this content",
                        "hand it over first: `monte grader take ENV`")
        items = [json.loads(x) for x in (home.sealed / f"{content}.jsonl").read_bytes().splitlines() if x.strip()]
        for k, item in enumerate(items):
            sealed[task_id(item, f"{meta['exam']}/test", k)] = item_text(item)
            of[task_id(item, f"{meta['exam']}/test", k)] = content
    index = LeakIndex.build(sealed)
    with tempfile.NamedTemporaryFile(dir=home.root, suffix=".jsonl") as f:
        f.write(payload)
        f.flush()
        source = Source(name=str(req.get("name", "")), kind=str(req.get("kind", "dataset")), rows=f.name,
                        columns=req.get("columns"), fingerprint="")
        found = [(label, min(hit)) for label, row in rows_of(source) if (hit := index.find(row))]
    named = found[0][1] if found else None
    # every answer is counted where the agent cannot edit it: an answer says which of the rows sent
    # hold a sealed item, so many answers can find the split's items; the count goes into every read's
    # signed statement (:func:`monte.grader.home.leak_checks`), where a reviewer sees a probed split
    with homes.locked(home), open(home.root / homes.LEAK_LOG, "a", encoding="utf-8") as log:
        log.write(json.dumps({"at": _now(), "contents": contents, "source": hashlib.sha256(payload).hexdigest(),
                              "leaks": len(found), "named": named, "named_content": of.get(named or "")},
                             sort_keys=True) + "\n")
    return {"leaks": len(found), "example": list(found[0]) if found else None}


# --- read ----------------------------------------------------------------------------------------


def _unpack(tar_bytes: bytes, dest: Path) -> dict[str, str]:
    """Write the weights sent to ``dest`` (regular files only, no path leaves it) and return the
    sha256 of every file as written: what is loaded is exactly what was hashed."""
    files: dict[str, str] = {}
    dest.mkdir(parents=True, mode=0o700)
    with tarfile.open(fileobj=io.BytesIO(tar_bytes), mode="r:") as tar:
        for m in tar.getmembers():
            p = PurePosixPath(m.name)
            if not m.isfile() or p.is_absolute() or ".." in p.parts or not p.parts:
                raise error("E_BAD_INPUT", f"the weights sent hold {m.name!r}, not a plain file inside the folder",
                            "send a model folder of plain files (monte's client does)")
            src = tar.extractfile(m)
            assert src is not None
            target = dest.joinpath(*p.parts)
            target.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            h = hashlib.sha256()
            with open(target, "wb") as out:
                while chunk := src.read(1 << 20):
                    h.update(chunk)
                    out.write(chunk)
            files[str(p)] = h.hexdigest()
    return files


def _from_hub(home: Home, run: str, hub: Any, names: dict[str, str], dest: Path) -> dict[str, str]:
    """A checkpoint's weights fetched by the grader itself from the hub commit its lineage records
    (``hub``: ``repo``, ``revision``, a commit id: pinned, never a branch), then written to
    ``dest`` and hashed as written, as :func:`_unpack` does with the bytes sent: what is loaded is
    exactly what was hashed, and the caller proves it against the ledger's hashes."""
    import re
    import shutil

    from monte.storage import hub as hubs

    repo, revision = (str(hub.get("repo", "")), str(hub.get("revision", ""))) if isinstance(hub, dict) else ("", "")
    if not re.fullmatch(r"[0-9a-f]{40}", revision) or not repo:
        raise error("E_BAD_INPUT", "a read from the hub names a repo and a pinned commit (40 hex), not a branch; "
                    "nothing was spent", "send the revision the checkpoint's lineage commit records (monte's client "
                    "does)")
    for name in names:
        p = PurePosixPath(name)
        if p.is_absolute() or ".." in p.parts or not p.parts:
            raise error("E_BAD_INPUT", f"the read names {name!r}, not a file inside the model folder",
                        "send a model folder of plain files (monte's client does)")
    fetched = home.root / "weights" / f"{run}.hub"
    dest.mkdir(parents=True, mode=0o700)
    try:
        got = hubs.download_checkpoint(repo, revision, sorted(names), fetched)
        files: dict[str, str] = {}
        for name in sorted(names):
            target = dest.joinpath(*PurePosixPath(name).parts)
            target.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            h = hashlib.sha256()
            with open(got[name], "rb") as src, open(target, "wb") as out:
                while chunk := src.read(1 << 20):
                    h.update(chunk)
                    out.write(chunk)
            files[name] = h.hexdigest()
    finally:
        shutil.rmtree(fetched, ignore_errors=True)
    return files


def check_budget(recs: dict[str, dict[str, Any]], *, run: str, content: str, cohort: str, role: str,
                 wid: str) -> int:
    """The grader's own rule, from its own ledger: two reads per exam content per base weights,
    the base first (``test@0``), then one claim. Returns which read this is (1 or 2)."""
    if run in recs:
        raise error("E_CONFLICT", f"the grader already holds a read {run}", "fetch it: `monte recover EXP`")
    same = [r["started"] for r in recs.values() if r["started"]["content"] == content]
    if role == "baseline":
        if any(s["cohort"] == cohort for s in same):
            raise error("E_SEALED", f"the grader has already read cohort {cohort}'s test@0 on this exam",
                        "the base's test@0 is read once; train and claim once (`monte status` shows the reads)")
        if any(s["weights_id"] == wid for s in same):
            raise error("E_SEALED", "the grader has already read these exact weights on this exam (as a base or "
                        "a claim): they are no new base", "claim on a checkpoint of the base's cohort instead")
        return 1
    if role == "claim":
        if not any(s["cohort"] == cohort and s["role"] == "baseline" for s in same):
            raise error("E_NO_BASELINE", f"the grader holds no test@0 of cohort {cohort} on this exam",
                        "read the base first: `monte eval --split test` (it runs on the grader)")
        if any(s["cohort"] == cohort and s["role"] == "claim" for s in same):
            raise error("E_SEALED", f"the grader has already read cohort {cohort}'s final claim on this exam: "
                        "the sealed split is read twice per cohort", "start a new cohort from another base model")
        return 2
    raise error("E_USAGE", f"a grader read is a baseline or a claim, not {role!r}", "use monte's own client")


def read(home: Home, req: dict[str, Any], payload: bytes, *, threads: int | None = None,
         talk: tuple[IO[bytes], IO[bytes]] | None = None) -> dict[str, Any]:
    """One test read: the weights written and hashed here, the budget checked on the grader's own
    ledger, ``started`` recorded, then generation and grading in a process of its own session
    (it completes if this one, or the client, dies); the answer is its signed result."""
    import shutil

    run = _run_id(str(req.get("run", "")))
    content, cohort, role = str(req.get("content", "")), str(req.get("cohort", "")), str(req.get("role", ""))
    meta = homes.sealed_meta(home, content)
    if meta is None:
        raise error("E_NOT_FOUND", "the grader holds no sealed split with this content",
                    "hand it over first: `monte grader take ENV`")
    settings = dict(req.get("settings") or {})
    try:  # K seeded samples per item at temperature > 0, as a local read draws them (docs/statistics.md)
        k, temperature = int(settings.get("samples", 1)), float(settings.get("temperature", 0.0))
    except (TypeError, ValueError):
        k, temperature = 0, -1.0
    if k < 1 or temperature < 0:
        raise error("E_BAD_INPUT", "the read's settings name no valid samples per item (K >= 1) and temperature "
                    "(>= 0); nothing was spent", "send the settings the experiment froze (monte's client does)")
    dest = home.weights(run)
    if dest.exists():
        raise error("E_CONFLICT", f"the grader already holds weights for run {run}", "fetch it: `monte recover EXP`")
    hold = bool(req.get("hold"))
    worker: subprocess.Popen[bytes] | None = None
    # the read's liveness, locked before its `started` record and inherited by its worker: a worker
    # that dies without a word (SIGKILL: out of memory, a reboot) leaves it free, and `fetch` records why
    lock = homes.lock_run(home, run)
    old = os.umask(0o077)
    try:
        hub = req.get("hub")
        files = _from_hub(home, run, hub, dict(req.get("files") or {}), dest) if hub and not payload else \
            _unpack(payload, dest)
        if files != dict(req.get("files") or {}):
            shutil.rmtree(dest, ignore_errors=True)
            raise error("E_INTEGRITY", "the weights the grader received are not the files the read names (a file "
                        "changed while it was sent?); nothing was spent",
                        "run `monte eval --split test` again with the weights left alone")
        if "config.json" not in files or not any(n.endswith((".safetensors", ".bin")) for n in files):
            shutil.rmtree(dest, ignore_errors=True)
            raise error("E_BAD_INPUT", "the weights sent are no model folder (a config.json and a weights file); "
                        "nothing was spent", "send the model folder the plan names (monte's client does)")
        wid = weights_id(files)
        if (meta.get("grader") or {}).get("kind") == nemo.KIND:  # its server as frozen, before the touch is spent
            nemo.check(meta["grader"], str(meta.get("exam")))
        started = {"run": run, "experiment": req.get("experiment"), "exam": req.get("exam"), "content": content,
                   "cohort": cohort, "role": role, "target": req.get("target"),
                   "settings": settings, "batch_size": int(req.get("batch_size") or 32),
                   "weights": files, "weights_id": wid,
                   **({"hub": hub} if hub and not payload else {})}
        if hold and talk is not None:  # a new base: loaded, and its fingerprint answered, before anything is spent
            check_budget(homes.records(home), run=run, content=content, cohort=cohort, role=role, wid=wid)
            worker = _worker(home, run, threads, hold=True, lock=lock)
            _hold(home, run, worker, talk)
        with homes.locked(home):
            which = check_budget(homes.records(home), run=run, content=content, cohort=cohort, role=role, wid=wid)
            if worker is not None and worker.poll() is not None:  # it died holding the loaded copy: nothing read
                raise error("E_REFUSED", f"the grader's worker for read {run} ended before the read started "
                            f"(exit {worker.returncode}); the grader recorded nothing",
                            f"the grader's logs/{run}.log (in its home) says why it ended; fix that, then run "
                            "`monte eval --split test` again")
            started = {**started, "read": which, "started_at": _now()}
            homes.append(home, run, {"started": started}, f"read {which} started: {run}")
    except BaseException:
        if worker is not None and worker.poll() is None:  # withdrawn before its start: it reads nothing
            worker.kill()
            worker.wait()
        if not any(r == run for r in homes.records(home)):
            shutil.rmtree(dest, ignore_errors=True)
        os.close(lock)
        raise
    finally:
        os.umask(old)
    try:
        if worker is None:
            worker = _worker(home, run, threads, hold=False, lock=lock)
        else:
            _go(worker)
    finally:
        os.close(lock)  # the worker holds it now: the lock is free once it exits, however it ends
    # a worker that ended without a result (killed, or it could not write one) is recorded failed here
    settle(home, run, exit=worker.wait())
    return fetch(home, run)


def _worker(home: Home, run: str, threads: int | None, *, hold: bool, lock: int) -> subprocess.Popen[bytes]:
    """The read's worker, in a session of its own (it completes if this process, or the client,
    dies). ``hold``: it loads the weights, writes their fingerprint on its stdout, and reads only
    once the ``started`` record is in (:func:`_go`); else it reads at once (``started`` is in).
    ``lock``: the read's liveness lock (:func:`monte.grader.home.lock_run`), inherited: held until
    the worker exits."""
    log = home.root / "logs"
    log.mkdir(exist_ok=True, mode=0o700)
    with open(log / f"{run}.log", "ab") as err:
        env = {**os.environ, **({"OMP_NUM_THREADS": str(threads)} if threads else {})}
        return subprocess.Popen([sys.executable, "-m", "monte.grader.work", str(home.root), run,
                                 *(["--hold"] if hold else [])], env=env, pass_fds=(lock,),
                                stdin=subprocess.PIPE if hold else subprocess.DEVNULL,
                                stdout=subprocess.PIPE if hold else err, stderr=err, start_new_session=True)


def _hold(home: Home, run: str, worker: subprocess.Popen[bytes], talk: tuple[IO[bytes], IO[bytes]]) -> None:
    """The held read's first step: the worker's fingerprint of the copy it loaded, answered to the
    client; then the client's go (anything else, or an end of input, withdraws: nothing spent)."""
    stdin, stdout = talk
    assert worker.stdout is not None
    line = worker.stdout.readline(MAX_HEADER)
    try:
        said = json.loads(line) if line.strip() else {}
    except ValueError:
        said = {}
    if not isinstance(said, dict) or "fingerprint" not in said:
        raise error("E_BAD_INPUT", "the grader could not load the weights sent "
                    f"({said.get('error') if isinstance(said, dict) and said.get('error') else 'see its log'}); "
                    "nothing was spent", "send a model folder transformers loads (`monte model init DIR` makes one)")
    stdout.write(json.dumps({"ok": True, "phase": "loaded", "fingerprint": said["fingerprint"]}).encode() + b"\n")
    stdout.flush()
    reply = stdin.readline(MAX_HEADER)
    try:
        go = json.loads(reply) if reply.strip() else {}
    except ValueError:
        go = {}
    if not (isinstance(go, dict) and go.get("go") is True and go.get("run") == run):
        raise error("E_REFUSED", f"the client withdrew read {run} before it started; nothing was spent", "")


def _go(worker: subprocess.Popen[bytes]) -> None:
    """The ``started`` record is in: the held worker reads. It decides by that record, not by this
    message: were this process killed before writing it, the worker's input ends, it finds the
    record, and reads all the same."""
    assert worker.stdin is not None
    try:
        worker.stdin.write(b"go\n")
        worker.stdin.close()
    except OSError:  # it died after answering its fingerprint: its log says why
        pass


def fetch(home: Home, run: str) -> dict[str, Any]:
    """A read's state by run id: ``running``, ``failed`` (why), or ``finished`` with its signed
    statement and per-item outcomes. A read whose worker ended without a result is recorded
    ``failed`` first (:func:`settle`): it is never ``running`` forever."""
    run = _run_id(run)
    rec = homes.records(home).get(run)
    if rec is None:
        raise error("E_NOT_FOUND", f"the grader holds no read {run}", "list the runs with `monte status`")
    if "statement" not in rec and "failed" not in rec:
        settle(home, run)
        rec = homes.records(home)[run]
    if "statement" in rec:
        return {"status": "finished", "statement": rec["statement"]["statement"],
                "signature": rec["statement"]["signature"], "outcomes": rec["outcomes"]["outcomes"]}
    if "failed" in rec:
        return {"status": "failed", "error": rec["failed"]["error"]}
    return {"status": "running"}


def settle(home: Home, run: str, *, exit: int | None = None) -> None:
    """Record read ``run`` failed when its worker ended without writing a result (its liveness lock
    is free: :func:`monte.grader.home.worker_ended`), with why, and remove its weights copy. The
    test read stays spent, as every failed read's does. ``exit``: the worker's exit status, when
    this process waited for it (else unknown: the server that started it is gone too)."""
    import shutil

    with homes.worker_ended(home, run) as ended:
        if not ended:
            return
        with homes.locked(home):  # the record read again under the writers' lock: one finish, never two
            rec = homes.records(home).get(run)
            if rec is None or "statement" in rec or "failed" in rec:
                return
            homes.append(home, run, {"failed": {"error": _ended_why(run, exit), "exit": exit}},
                         f"read failed: {run} (its worker ended without a result)")
        shutil.rmtree(home.weights(run), ignore_errors=True)
        shutil.rmtree(home.root / "weights" / f"{run}.hub", ignore_errors=True)


def _ended_why(run: str, exit: int | None) -> str:
    if exit is None:
        how = "its exit status is unknown: the grader's server that started it is gone too"
    elif exit < 0:
        try:
            name = signal.Signals(-exit).name
        except ValueError:
            name = f"signal {-exit}"
        how = f"killed by {name}" + (": out of memory, or killed by hand" if exit == -signal.SIGKILL else "")
    else:
        how = f"exit status {exit}"
    return (f"the read's worker on the grader ended without a result ({how}); the test read stays spent; the "
            f"grader's logs/{run}.log (in its home) says what it did last")


def _now() -> str:
    from monte.manifest import now

    return now()
