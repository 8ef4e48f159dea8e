"""The agent's side of a grader: one request per SSH session (Fabric, through
:mod:`monte.remote.ssh`), to the forced command ``monte grader serve`` of the grader's account.

- :func:`take`: an environment's test splits into custody, and the local copies removed;
- :func:`run_test_read`: ``monte eval --split test`` once the plan passed: the weights proven
  here against what the plan recorded and sent from memory (the bytes hashed are the bytes sent:
  a file swapped after the plan changes nothing), the local ``started`` record, the read on the
  grader, and its signed result recorded here only once its signature and fields check out;
- :func:`recover`: a read whose client died, fetched by run id and recorded.
"""

from __future__ import annotations

import dataclasses
import hashlib
import io
import json
import os
import tarfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from monte.errors import MonteError, error
from monte.ledger.grader_statement import (
    PIN_KEY,
    ROW_FILE,
    URL_KEY,
    canonical,
    check_signature,
    outcomes,
    pinned_key,
    require_pinned,
    row_mismatch,
)
from monte.workspace import Workspace

#: the command line the client asks for; the grader's forced command runs whatever it is told to
SERVE = "monte grader serve"
READ_TIMEOUT_S = 6 * 3600
#: how long the grader may take to write, hash and load a new base before it answers its fingerprint
LOAD_TIMEOUT_S = 3600
#: a take's check may start a NeMo Gym server on the grader (imports: 10-20 s, at most its ready timeout)
CHECK_TIMEOUT_S = 600


@dataclass(frozen=True)
class Grader:
    user: str
    host: str
    port: int
    key: str  # the pinned public key: every signed result must verify with it

    @property
    def label(self) -> str:
        return f"ssh://{self.user}@{self.host}:{self.port}"


def parse_url(url: str) -> tuple[str, str, int]:
    u = urlparse(url)
    if u.scheme != "ssh" or not u.hostname or not u.username or u.path not in ("", "/"):
        raise error("E_USAGE", f"{url!r} is not a grader address", "write ssh://USER@HOST[:PORT]")
    try:
        port = u.port or 22
    except ValueError:
        raise error("E_USAGE", f"{url!r} has no valid port", "write ssh://USER@HOST[:PORT]") from None
    return u.username, u.hostname, port


def configured(ws: Workspace) -> Grader | None:
    """The grader ``.monte.yaml`` names, or None (the seal is local)."""
    url = ws.config.get(URL_KEY)
    if not url:
        return None
    key = pinned_key(ws.config)
    if key is None:
        raise error("E_USAGE", ".monte.yaml names a grader but pins no key for it",
                    f"pin it: `monte config set grader {url} --key 'ssh-ed25519 AAAA...'` (what `monte grader "
                    "init` printed)")
    user, host, port = parse_url(str(url))
    return Grader(user, host, port, key)


def require(ws: Workspace) -> Grader:
    g = configured(ws)
    if g is None:
        raise error("E_NOT_FOUND", "no grader is configured in .monte.yaml",
                    "connect one: `monte config set grader ssh://USER@HOST[:PORT] --key 'ssh-ed25519 AAAA...'`")
    return g


def call(g: Grader, request: dict[str, Any], payload: bytes = b"", *, timeout: float = 120) -> dict[str, Any]:
    """One request, one answer; a refusal of the grader's is raised here with its own code."""
    from monte.remote import ssh

    conn = _connect(g)
    try:
        line = json.dumps({**request, "size": len(payload)}).encode() + b"\n"
        done = ssh.execute(conn, SERVE, timeout=timeout, stdin=line + payload)
    finally:
        conn.close()
    return _answer_of(g, done)


def held_call(g: Grader, request: dict[str, Any], payload: bytes, go: Any, *,
              timeout: float = READ_TIMEOUT_S) -> dict[str, Any]:
    """A read in two steps over one session: the grader writes and hashes the weights, loads them
    and answers the behavioural fingerprint of exactly that copy (``{"phase": "loaded", ...}``);
    ``go(first)`` checks it here and starts the local record; only then is the go sent, and the
    grader records its ``started`` and reads. ``go`` raising closes the session: the grader
    withdraws, nothing was spent there."""
    from monte.remote import ssh

    conn = _connect(g)
    try:
        conv = ssh.Conversation(conn, SERVE, timeout=timeout)
        try:
            conv.send(json.dumps({**request, "hold": True, "size": len(payload)}).encode() + b"\n" + payload)
            raw = conv.readline(timeout=LOAD_TIMEOUT_S)
            if raw is None:  # it exited without a word: what it printed says why
                done = conv.finish(timeout=10)
                first = _answer_of(g, done)
            else:
                first = _answer(g, [raw.decode("utf-8", "replace")], 0, "")
            go(first)
        except BaseException:
            conv.close()  # an end of input before the go: the grader withdraws
            raise
        conv.send(json.dumps({"go": True, "run": request.get("run")}).encode() + b"\n")
        done = conv.finish(timeout=timeout)
    finally:
        conn.close()
    return _answer_of(g, done)


def _connect(g: Grader) -> Any:
    from monte.remote import ssh

    key_file = os.environ.get("MONTE_GRADER_KEY_FILE") or os.environ.get("MONTE_SSH_KEY_FILE")
    return ssh.connect(g.host, user=g.user, port=g.port, key_file=key_file, connect_timeout=15)


def _answer_of(g: Grader, done: Any) -> dict[str, Any]:
    """The grader's answer: the last line a finished session (``ssh.Completed``) printed."""
    return _answer(g, done.stdout.strip().splitlines()[-1:], done.exited, done.stderr or done.stdout)


def _answer(g: Grader, last: list[str], exited: int, said: str) -> dict[str, Any]:
    try:
        answer = json.loads(last[-1])
    except (ValueError, IndexError):
        raise error("E_BOX", f"the grader at {g.label} gave no answer (exit {exited}): {said.strip()[-300:]}",
                    "check its authorized_keys line (`monte grader init` printed it) and that its monte runs") from None
    if not isinstance(answer, dict) or not answer.get("ok"):
        got = answer.get("error") if isinstance(answer, dict) else None
        e: dict[str, Any] = got if isinstance(got, dict) else {}
        raise error(e.get("code", "E_REFUSED"), f"the grader refused: {e.get('message')}", e.get("fix") or "")
    return dict(answer)


# --- custody -------------------------------------------------------------------------------------


def take(ws: Workspace, env: str, *, grader: Grader | None = None,
         hello_answer: dict[str, Any] | None = None) -> dict[str, Any]:
    """Hand every test split of environment ``env`` to the grader, then remove the local copies
    (the data root's file, and its objects in the repository's DVC cache and a folder Vault). An
    lm-eval exam goes with its whole frozen task (:mod:`monte.grader.lmeval`), and its test
    documents leave as its split does. ``grader``: one already proven to sign with the pinned key
    (else proven here first), ``hello_answer`` its ``hello``."""
    from monte.grader import lmeval
    from monte.manifest import read_manifest, sealed_files

    g = grader or require(ws)
    folder = ws.env_dir(env)
    m = read_manifest(folder)
    if m is None or m.kind != "environment":
        raise error("E_NOT_FOUND", f"no environment named {env!r} on this data root",
                    f"freeze it with `monte env add`, or restore it with `monte env install {env}`")
    taken, removed = [], []
    tests = {exam: splits["test"] for exam, splits in sorted(m.exams.items()) if "test" in splits}
    if not tests:
        raise error("E_NOT_FOUND", f"environment {env!r} has no test split", "an eval-only environment has dev only")
    from monte.grader import vault_copy

    # a split here to send and a Vault that cannot be written: refused before anything moves (its
    # plaintext copy there could not be replaced); with none here, the Vault's plaintext copy is sealed if it can be
    here = any((folder / rel).is_file() for rel in tests.values())
    writer = vault_copy.vault_writer(ws, required=here)
    if grader is None or hello_answer is None:  # a sealed split is sent only to the grader the repository pins
        hello_answer = proven_hello(g, what="nothing was sent")
    require_grades(g, hello_answer, m.grader, what="nothing was sent")
    sealed = sealed_files(m)
    needed = vault_copy.needed_elsewhere(writer) if writer is not None else set()

    def request(exam: str, content: str) -> dict[str, Any]:
        benchmark = (m.grader or {}).get("benchmarks", {}).get(exam, exam)
        return {"op": "take", "content": content, "exam": exam, "benchmark": benchmark, "grader": m.grader}

    # every split the grader could not grade (a NeMo Gym server it cannot start) refuses before one moves
    for exam, rel in tests.items():
        if (folder / rel).is_file():
            call(g, {**request(exam, m.files[rel].sha256), "check": True}, timeout=CHECK_TIMEOUT_S)
    # each sealed file from here, or the Vault's plaintext copy of one already taken from here
    # (by an older monte, which left an lm-eval exam's objects in a bucket): sealed now
    def local_or_vault(rel: str) -> bytes | None:
        if (folder / rel).is_file():
            return (folder / rel).read_bytes()
        return vault_copy.vault_plaintext(writer, "environment", env, rel, m.files[rel].sha256) if writer else None

    for exam, rel in tests.items():
        path = folder / rel
        if not path.is_file() and m.files[rel].sha256 in (hello_answer.get("sealed") or {}):
            # held there: no stray copy of the task's other sealed files stays here
            stray = {other: (folder / other).read_bytes() for other in sealed[exam][1:] if (folder / other).is_file()}
            for other, data in stray.items():
                removed += _remove_copies(ws, folder / other, data, keep=vault_copy.shared_md5s(m, stray) | needed)
        raw = local_or_vault(rel)
        others = {other: local_or_vault(other) for other in sealed[exam][1:]} if raw is not None else {}
        if path.is_file() and None in others.values():
            raise error("E_INTEGRITY", f"{folder} lacks test documents of exam {exam!r} its manifest lists; nothing "
                        "was sent", f"restore them with `monte env install {env}`, then run the command again")
        if raw is None or None in others.values():
            taken.append({"exam": exam, "content": m.files[rel].sha256, "already": True})
            continue
        found = {other: data for other, data in others.items() if data is not None}
        content = hashlib.sha256(raw).hexdigest()
        if content != m.files[rel].sha256:
            raise error("E_INTEGRITY", f"{path} does not match the hash frozen in its manifest",
                        f"restore it with `monte env install {env}`; never edit a frozen split")
        # an object stays where another file needs its bytes: one of this freeze, or of any folder the
        # Vault lists (a dataset frozen from the same file): DVC keeps one object per content
        keep = vault_copy.shared_md5s(m, {rel: raw, **found}) | needed
        if lmeval.is_lmeval(m.grader):  # the split and the whole frozen task, each file proven as it is read
            taken.append(_send_task(g, m, folder, exam, rel, raw, found, request(exam, content), writer=writer,
                                    keep=keep))
        else:
            taken.append(_send(g, raw, request(exam, content), writer=writer))
        removed += _remove_copies(ws, path, raw, keep=keep)
        for other, data in found.items():
            removed += _remove_copies(ws, folder / other, data, keep=keep)
    return {"environment": env, "grader": g.label, "taken": taken, "removed": removed,
            "redrawable": redrawable(m, tests)}


def redrawable(m: Any, tests: dict[str, str]) -> list[str]:
    """The exams whose test items anyone can draw again: a catalog environment frozen without a
    grader drew its test split from the catalog's public seed (``provenance.seeds.test``), so
    custody of the file keeps its items from no one (``monte env add`` with the grader pinned
    has the grader draw them with its own seed)."""
    from monte.manifest import drawn_by_grader

    if (m.provenance or {}).get("source") != "catalog" or drawn_by_grader(m):
        return []
    return sorted(tests)


def _send_task(g: Grader, m: Any, folder: Path, exam: str, rel: str, raw: bytes, docs: dict[str, bytes],
               request: dict[str, Any], *, writer: Any, keep: set[str]) -> dict[str, Any]:
    """An lm-eval exam into custody: its split and whole frozen task in one tar (``docs``: its
    test documents, read here or from the Vault), which a Vault keeps encrypted to the pinned key
    while the plaintext objects of the split and the test documents are deleted there."""
    from monte.grader import lmeval, vault_copy

    tar = lmeval.pack(folder, m, exam, rel, raw, given=docs)
    answer = call(g, {**request, "split": rel}, tar)
    out: dict[str, Any] = {"exam": exam, "content": request["content"], "n": int(answer.get("n", raw.count(b"\n")))}
    kept = vault_copy.keep(writer, g.key, tar, answer, plaintexts=[raw, *docs.values()], needed=keep)
    return {**out, "vault": kept} if kept else out


def _send(g: Grader, raw: bytes, request: dict[str, Any], *, writer: Any) -> dict[str, Any]:
    """One split into custody: the grader keeps it and signs what grades it; a Vault keeps it
    encrypted to the pinned key (its plaintext object there deleted)."""
    from monte.grader import vault_copy

    answer = call(g, request, raw)
    out: dict[str, Any] = {"exam": request["exam"], "content": request["content"],
                           "n": int(answer.get("n", raw.count(b"\n")))}
    kept = vault_copy.keep(writer, g.key, raw, answer)
    return {**out, "vault": kept} if kept else out


def _keep_drawn(writer: Any, key: str, exam: str, got: dict[str, Any]) -> dict[str, Any]:
    """A test split the grader drew: with a Vault, its copy the grader encrypted to its own key
    (the plaintext was never here) beside the record it signed."""
    import base64

    from monte.storage import sealed_copy

    out: dict[str, Any] = {"exam": exam, "content": got["content"], "n": int(got["n"]), "drawn": True}
    vault = got.get("vault")
    if writer is None or not isinstance(vault, dict):
        return out
    return {**out, "vault": sealed_copy.put_drawn(writer.store, base64.b64decode(str(vault["age"])), key,
                                                  dict(got["meta"]), str(got["signature"]), str(vault["md5"]))}


def require_grades(g: Grader, hello_answer: dict[str, Any], grader: dict[str, Any] | None, *, what: str) -> None:
    """Refuse to hand an exam to a grader that says it cannot grade its kind (its ``hello``; a
    grader from before the answer grades the catalog's and JSONL exams)."""
    from monte.grader import lmeval, nemo

    kind = (grader or {}).get("kind") or "catalog"
    if kind == nemo.KIND:  # a take's check proves the grader's NeMo Gym there, naming what differs
        return
    can = hello_answer.get("grades")
    if kind in (can if isinstance(can, (list, dict)) else ["catalog", "jsonl"]):
        return
    if kind == lmeval.KIND:
        raise lmeval.cannot_grade(f"the grader at {g.label}", what)
    raise error("E_USAGE", f"the grader at {g.label} cannot grade {kind!r} exams; {what}",
                "keep this environment's test split local (no grader pinned), or freeze it as a JSONL exam")


def _remove_copies(ws: Workspace, path: Path, raw: bytes, *, keep: set[str] | None = None) -> list[str]:
    """The data root's file and its objects in DVC's cache and a folder Vault, but for an object
    whose md5 is in ``keep`` (another file of the freeze has the same bytes: it needs them)."""
    md5 = hashlib.md5(raw).hexdigest()  # noqa: S324 - DVC 3's content address, not a security hash
    places = [path]
    if md5 not in (keep or set()):
        places.append(ws.repo_root / ".dvc" / "cache" / "files" / "md5" / md5[:2] / md5[2:])
    vault = ws.config.get("vault")
    if vault and "://" not in str(vault) and md5 not in (keep or set()):
        places.append(Path(str(vault)) / "files" / "md5" / md5[:2] / md5[2:])
    out = []
    for p in places:
        if p.is_file():
            p.unlink()
            out.append(str(p))
    return out


def leak_check(ws: Workspace, source: Any, contents: list[str]) -> None:
    """The leak check of a training source against sealed splits the grader holds: the rows go
    to the grader, a count and one example id come back; ``E_LEAK`` as the local check refuses."""
    g = require(ws)
    raw = Path(source.rows).read_bytes()
    found = call(g, {"op": "leaks", "contents": contents, "name": source.name, "kind": source.kind,
                     "columns": source.columns}, raw)
    if found["leaks"]:
        where, item = found["example"]
        raise error("E_LEAK", f"{source.kind} {source.name!r} holds {found['leaks']} item(s) of this experiment's "
                    f"sealed test exam, found by the grader (e.g. {where} holds {item}; compared after normalising "
                    "case, spacing, punctuation and invisible characters, in every column and message)",
                    "remove those items and freeze the rows again under a new name")


# --- test reads ----------------------------------------------------------------------------------


def _expected_files(ws: Workspace, plan: Any) -> tuple[dict[str, str], dict[str, str] | None]:
    """The sha256 of every file of the target, as the ledger recorded it (the base commit, or the
    checkpoint's lineage commit): what the grader must receive; and the checkpoint's hub copy
    (``repo``, ``revision``: the hub commit its lineage commit records), or None."""
    if plan.target.kind == "base":
        return dict(plan.base_files), None
    from dulwich.objects import ObjectID

    from monte.ledger.lineage import read_checkpoint

    ck = read_checkpoint(ws.store, ObjectID(str(plan.target.commit).encode()))
    hub = ck.get("hub") or {}
    pinned = {"repo": str(hub["repo"]), "revision": str(hub["revision"])} if hub.get("repo") and hub.get("revision") \
        else None
    return {k: str(v) for k, v in dict(ck["files"]).items()}, pinned


def pack_weights(folder: Path, expected: dict[str, str]) -> tuple[bytes, dict[str, str]]:
    """The target's files read once into a tar in memory, each hashed as read and proven against
    what the plan recorded: the bytes proven are the bytes sent."""
    buf = io.BytesIO()
    files: dict[str, str] = {}
    with tarfile.open(fileobj=buf, mode="w:") as tar:
        for name in sorted(expected):
            data = (folder / name).read_bytes()
            files[name] = hashlib.sha256(data).hexdigest()
            if files[name] != expected[name]:
                raise error("E_INTEGRITY", f"{folder / name} is not the file the plan proved (its sha256 "
                            "changed since); nothing was spent",
                            "put the recorded weights back, then run `monte eval --split test` again")
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue(), files


def run_test_read(ws: Workspace, plan: Any, *, on_transition: Any = None) -> Any:
    """``monte eval --split test`` with a grader: every exam read on the grader."""
    from monte.evals.run import EvalResult, start_row
    from monte.ledger.experiment import Ledger
    from monte.ledger.ids import new_run_id
    from monte.ledger.lineage import ensure_base
    from monte.models import locate
    from monte.runs.folders import log_event
    from monte.runs.lifecycle import transitions

    g = require(ws)
    ledger = Ledger(ws.store, plan.experiment)
    # --push: the results bucket opened now, before anything is spent; a push after each record
    transition, pusher = transitions(ws, plan.experiment, bool(getattr(plan, "push", False)), on_transition)
    folder = Path(plan.target.folder or plan.target.model)
    expected, hub = _expected_files(ws, plan)
    # a checkpoint pushed to the hub: the grader fetches that pinned revision itself and proves it
    # against the ledger's hashes; else the files read here once, proven, and sent over the session
    payload, files = (b"", expected) if hub else pack_weights(folder, expected)  # a refusal spends nothing
    said = proven_hello(g)  # reachable, and the pinned one
    # it grades this exam's kind (lm_eval installed; its NeMo Gym the one frozen), before any record
    grader = ledger.measurement().grader
    require_grades(g, said, grader, what="nothing was spent")
    from monte.grader import nemo

    nemo.require_version(said, grader, g.label)  # its NeMo Gym is the one frozen
    locate.remember(ws, plan.base_register, plan.base_folder)
    # a base no record knows by its weights: its fingerprint comes from the grader's copy (below)
    unchecked = plan.behaviour_unchecked
    if not unchecked:
        ensure_base(ws.store, plan.experiment, plan.base_model, plan.base_files, cohort=plan.cohort,
                    weights=plan.weights or None, folder=Path(plan.base_folder) if plan.base_folder else None)
    results = []
    for e in plan.exams:
        started: list[Any] = []

        def begin(run: str | None = None, e: Any = e, started: list[Any] = started) -> Any:
            row = start_row(ledger, plan, e, ws=ws, run=run)
            started.append(row)
            # the run's event file, as a local read keeps it (`monte logs`; --push carries it to the bucket)
            log_event(ws, plan.experiment, row.run, "started", exam=e.exam, split=e.split, target=plan.target.label,
                      grader=g.label)
            transition(row, "started")
            return row

        def request_for(run: str, role: str | None, e: Any = e) -> dict[str, Any]:
            return {"op": "read", "run": run, "experiment": plan.experiment, "exam": e.exam,
                    "content": e.sha256, "cohort": plan.cohort, "role": role,
                    "target": {"kind": plan.target.kind, "run": plan.target.run, "step": plan.target.step},
                    "settings": plan.settings, "batch_size": int(plan.execution.get("batch_size", 32)),
                    "files": files, **({"hub": hub} if hub else {})}

        try:
            if unchecked:  # the grader loads it, answers its fingerprint, and reads on our go
                run = new_run_id()

                def go(first: dict[str, Any], e: Any = e, run: str = run) -> None:
                    fp = first.get("fingerprint")
                    _check_behaviour(ws, plan, fp if isinstance(fp, dict) else None)
                    ensure_base(ws.store, plan.experiment, plan.base_model, plan.base_files, cohort=plan.cohort,
                                weights=plan.weights or None, folder=Path(plan.base_folder),
                                fingerprint=fp if isinstance(fp, dict) else None, behaviour=False)
                    row = begin(run)
                    if row.role != e.role:  # the tip moved since the plan: the grader would count another read
                        raise error("E_CONFLICT", f"run {run} is test read {row.role}, the plan said {e.role}",
                                    "run `monte eval --split test` again")

                answer = held_call(g, request_for(run, e.role), payload, go)
                unchecked = False
            else:
                row = begin()
                try:
                    answer = call(g, request_for(row.run, row.role), payload, timeout=READ_TIMEOUT_S)
                except MonteError as exc:
                    if not (hub and exc.code == "E_STORAGE"):
                        raise
                    # the grader could not fetch the hub revision (no token, no network there): nothing was
                    # spent on it; the weights go over the session instead, proven here as always
                    request = request_for(row.run, row.role)
                    request.pop("hub")
                    answer = call(g, request, pack_weights(folder, expected)[0], timeout=READ_TIMEOUT_S)
        except MonteError as exc:
            if not started:  # refused before the local record: nothing was spent, here or there
                raise
            row = started[0]
            if exc.code == "E_BOX":  # the read may be running on the grader: recover fetches it
                raise error("E_BOX", f"{exc.message}; run {row.run}'s read may still complete on the grader",
                            f"`monte recover {plan.experiment}` fetches its signed result") from None
            log_event(ws, plan.experiment, row.run, "failed", code=exc.code, message=exc.message)
            transition(_fail(ledger, row, exc.message), "finished")
            raise
        row = started[0]
        try:
            done = record(ws, g, ledger, row, answer)
        except MonteError as exc:
            failed = ledger.row(row.run)
            if failed is not None and failed.status == "failed":  # the grader's read failed: recorded so
                log_event(ws, plan.experiment, row.run, "failed", code=exc.code, message=exc.message)
                transition(failed, "finished")
            raise
        log_event(ws, plan.experiment, row.run, "succeeded", score=done.score, n=done.n)
        transition(done, "finished")
        results.append(done.model_dump(mode="json"))
    if pusher is not None:
        pusher.check()  # a finished read whose final push did not land: E_STORAGE naming `monte push`
    return EvalResult(experiment=plan.experiment, runs=results,
                      floors={f"{e.exam}/{e.split}": e.floor for e in plan.exams if e.floor is not None})


def _check_behaviour(ws: Workspace, plan: Any, fp: dict[str, Any] | None) -> None:
    """A new base's fingerprint, taken by the grader on the copy it loaded, checked as a local read
    checks its own (:func:`monte.ledger.lineage.compare_behaviour`): a model that behaves as a
    checkpoint is refused; one that behaves as a recorded base is refused too (a local read would
    count it as that base's cohort; the grader has already been told this cohort, so the read is
    asked for again with that base's folder). Nothing is spent either way."""
    from monte.ledger.lineage import compare_behaviour, known_bases

    if fp is None:  # the grader could not take it (no transformers model): known by its bytes alone
        return
    like = compare_behaviour(ws.store, fp, known_bases(ws.store), own={plan.legacy_cohort, plan.weights[:12]})
    if like is not None:
        base, d = like
        raise error("E_SEALED", f"this model behaves as the base model of cohort {base.cohort} in experiment "
                    f"{base.experiment} (behavioural distance {d:.4f}, taken by the grader on the copy it loaded): "
                    "its test reads are that cohort's; nothing was spent",
                    f"pass that base model as recorded (`--model {base.model}`), or a base that behaves as no "
                    "model recorded here")


def _fail(ledger: Any, row: Any, why: str) -> Any:
    from monte.evals.run import finish_row

    return finish_row(ledger, row, "failed", error_text=why)


def record(ws: Workspace, g: Grader, ledger: Any, row: Any, answer: dict[str, Any]) -> Any:
    """Record a grader's answer for ``row``: refused (nothing recorded) unless the statement is
    signed by the pinned key and says what the row records."""
    if answer.get("status") == "failed":
        _fail(ledger, row, f"the grader's read failed: {answer.get('error')}")
        raise error("E_REFUSED", f"run {row.run}'s read failed on the grader: {answer.get('error')}",
                    "fix the cause; the test read stays spent (as for a local read)")
    if answer.get("status") != "finished":
        raise error("E_REFUSED", f"run {row.run}'s read is still running on the grader",
                    f"wait, then `monte recover {row.experiment}`")
    statement, signature = answer["statement"], answer["signature"]
    if not check_signature(g.key, statement, signature):
        raise error("E_INTEGRITY", f"the grader's result for run {row.run} is not signed by the pinned key",
                    "check that .monte.yaml pins the key `monte grader init` printed")
    tasks = outcomes(answer["outcomes"])
    from monte.evals.run import finish_row

    blob = canonical({"statement": statement, "signature": signature})

    def check(done: Any, tasks_now: list[dict[str, Any]]) -> None:
        why = row_mismatch(statement, done.model_dump(mode="json"), tasks_now)
        if why is not None:
            raise error("E_INTEGRITY", f"the grader's signed result for run {row.run} differs from the row: {why}",
                        "nothing was recorded; find out who changed the weights or the ledger")

    return finish_row(ledger, row, "succeeded", tasks=tasks, n=len(tasks), files={ROW_FILE: blob}, check=check)


def recover(ws: Workspace, experiment: str) -> list[dict[str, Any]]:
    """Every test read of ``experiment`` started here and not finished: fetched from the grader
    by run id and recorded: its signed result, or ``failed`` with the grader's why (a read that
    failed there, a worker killed without a word, a read it never received). A read still running
    there is reported so and recorded later."""
    from monte.ledger.experiment import Ledger
    from monte.ledger.predicates import is_test_read

    g = configured(ws)
    if g is None:
        return []
    ledger = Ledger(ws.store, experiment)
    out = []
    for row in ledger.rows():  # as recorded: a dead client's row is what recover is for
        if not is_test_read(row) or row.status not in ("started", "running"):
            continue
        try:
            answer = call(g, {"op": "fetch", "run": row.run})
        except MonteError as exc:
            if exc.code != "E_NOT_FOUND":
                raise
            # the request never reached the grader (the connection failed first): nothing was read there
            why = "the grader never received this read"
            _fail(ledger, row, why)
            out.append({"run": row.run, "status": "failed", "score": None, "n": None, "error": why})
            continue
        if answer.get("status") == "running":
            out.append({"run": row.run, "status": "running", "score": None, "n": None})
            continue
        if answer.get("status") == "failed":  # recorded with the grader's why; the next read is recovered too
            why = f"the grader's read failed: {answer.get('error')}"
            _fail(ledger, row, why)
            out.append({"run": row.run, "status": "failed", "score": None, "n": None, "error": why})
            continue
        done = record(ws, g, ledger, row, answer)
        out.append({"run": done.run, "status": done.status, "score": done.score, "n": done.n})
    return out


def hello(g: Grader) -> dict[str, Any]:
    return call(g, {"op": "hello"})


def proven_hello(g: Grader, *, what: str = "nothing was spent") -> dict[str, Any]:
    """``hello``, refused unless the grader answers with the pinned key: nothing is sent to, or
    counted by, a grader that is not the one the repository pins."""
    answer = hello(g)
    if " ".join(str(answer.get("public_key", "")).split()[:2]) != g.key:
        raise error("E_INTEGRITY", f"the grader at {g.label} signs with another key than .monte.yaml pins; {what}",
                    "pin the key `monte grader init` printed (`monte config set grader URL --key ...`), or "
                    "point .monte.yaml at the grader that holds it")
    return answer


def freeze_experiment(ws: Workspace, create: Any, *, env: str, dry_run: bool) -> Any:
    """``monte experiment init`` with a grader: the test splits go into custody as part of the
    freeze. ``create(held=..., dry_run=...)`` freezes the measurement, ``held`` naming the sealed
    splits the grader holds (content -> n: proven there, not on this data root).

    Order, so nothing is left half-done: the grader must answer with the pinned key (else
    ``E_BOX``/``E_INTEGRITY``, nothing changed); the measurement is planned (every refusal of
    ``experiment init`` fires, nothing changed); the local test splits are handed over and their
    copies removed; then the measurement is written. A failure after the hand-over leaves the
    splits in custody (their safe place) and no experiment: the same command again completes it."""
    g = require(ws)
    try:
        answer = proven_hello(g, what="nothing was frozen")
        sealed = dict(answer.get("sealed") or {})
    except MonteError as exc:
        if exc.code != "E_BOX":
            raise
        raise error("E_BOX", f"{exc.message}; nothing was frozen (a grader-pinned repository freezes an experiment "
                    "only with its test splits handed to the grader)",
                    "start the grader's sshd and check its authorized_keys line, then run `monte experiment init` "
                    "again (or `monte config show` to see the address pinned)") from None
    plan = create(held=sealed, dry_run=True)
    if not any("test" in e.splits for e in plan.measurement.exams.values()):
        return plan if dry_run else create(held=sealed, dry_run=False)  # dev only: nothing to hand over
    # a grader that cannot grade the exam (an lm-eval exam, a grader without lm_eval) refuses now
    require_grades(g, answer, plan.measurement.grader, what="nothing was frozen and nothing moved")
    if dry_run:
        return plan
    got = take(ws, env, grader=g, hello_answer=answer)
    for t in got["taken"]:
        if not t.get("already"):
            sealed[t["content"]] = int(t["n"])
    made = create(held=sealed, dry_run=False)
    # a split the catalog's public seed draws again moved all the same: said, as `grader take` says it
    return dataclasses.replace(made, redrawable=tuple(got["redrawable"])) if got.get("redrawable") else made


def freeze_environment(ws: Workspace, add: Any, *, dry_run: bool) -> Any:
    """``monte env add`` with a grader pinned. ``add(hand_over=...)`` freezes the environment,
    calling ``hand_over(staged, manifest, writer)`` once the freeze is prepared in its staging
    folder and before anything is recorded or committed to DVC's cache.

    Order, so every refusal fires before anything moves: the grader must answer with the pinned
    key (else ``E_BOX``/``E_INTEGRITY``, nothing frozen); the freeze checks its name and the Vault
    and prepares; each test split goes to the grader, its encrypted copy to the Vault, and leaves
    the staging folder; then the freeze is recorded, tracked and pushed without it."""
    if dry_run:
        return add(hand_over=None)
    g = require(ws)
    try:
        answer = proven_hello(g, what="nothing was frozen")
    except MonteError as exc:
        if exc.code != "E_BOX":
            raise
        raise error("E_BOX", f"{exc.message}; nothing was frozen (a grader-pinned repository freezes a test split "
                    "only into the grader's custody)", "start the grader's sshd and check its authorized_keys line, "
                    "then run `monte env add` again (`monte config show` shows the address pinned)") from None

    def hand_over(staged: Path, m: Any, writer: Any) -> list[dict[str, Any]]:
        from monte.grader import lmeval, vault_copy
        from monte.manifest import sealed_files

        # a grader that cannot grade the exam (lm-eval without lm_eval, another NeMo Gym) refuses
        # before any split moves; a NeMo Gym exam's server is started there once to prove it
        require_grades(g, answer, m.grader, what="nothing was frozen and nothing moved")
        tests = {exam: splits["test"] for exam, splits in sorted(m.exams.items())
                 if "test" in splits and (staged / splits["test"]).is_file()}

        def request(exam: str, content: str) -> dict[str, Any]:
            benchmark = (m.grader or {}).get("benchmarks", {}).get(exam, exam)
            return {"op": "take", "content": content, "exam": exam, "benchmark": benchmark, "grader": m.grader}

        for exam, rel in tests.items():
            call(g, {**request(exam, m.files[rel].sha256), "check": True}, timeout=CHECK_TIMEOUT_S)
        sealed, taken = sealed_files(m), [_keep_drawn(writer, g.key, exam, got) for exam, got in sorted(drawn.items())]
        for exam, rel in tests.items():
            raw = (staged / rel).read_bytes()
            content = hashlib.sha256(raw).hexdigest()
            if lmeval.is_lmeval(m.grader):  # the split and the whole frozen task (its test documents with gold)
                docs = {other: (staged / other).read_bytes() for other in sealed[exam][1:]}
                taken.append(_send_task(g, m, staged, exam, rel, raw, docs, request(exam, content), writer=writer,
                                        keep=vault_copy.shared_md5s(m, {rel: raw, **docs})))
                for other in docs:
                    (staged / other).unlink(missing_ok=True)
            else:
                taken.append(_send(g, raw, request(exam, content), writer=writer))
            (staged / rel).unlink()  # before DVC's cache or the Vault ever sees the folder
        return taken

    drawn: dict[str, dict[str, Any]] = {}  # exam -> the grader's answer for a test split it drew

    def draw_test(plan: Any) -> dict[str, dict[str, Any]]:
        """A catalog exam's test split drawn on the grader with its own seed: never generated
        here, so the catalog's public seed cannot draw it again (:func:`monte.envs.freeze.prepare`)."""
        from monte.envs import freeze

        require_grades(g, answer, freeze.catalog_grader(plan.exams), what="nothing was frozen and nothing moved")
        try:
            got = call(g, {"op": "draw", "plan": plan.describe()})
        except MonteError as exc:
            if exc.code != "E_USAGE" or "no operation" not in exc.message:
                raise
            raise error("E_BOX", f"the grader at {g.label} cannot draw a test split (an older monte there); nothing "
                        "was frozen", "upgrade monte on the grader's account, then run `monte env add` again") from None
        benches = sorted(got.get("benchmarks") or {})
        if got.get("benchmarks") != freeze.versions(benches) or set(got.get("drawn") or {}) != {
                e for e, sp in plan.exams.items() if "test" in sp}:
            # another catalog there would draw dev and the curriculum otherwise: disjointness unproven
            raise error("E_INTEGRITY", f"the grader at {g.label} drew from another catalog than this one "
                        f"({got.get('benchmarks')}); nothing was frozen here",
                        "install the same monte (and reasoning-gym) on the grader's account, then run `monte env "
                        "add` again")
        drawn.update({str(e): dict(v) for e, v in got["drawn"].items()})
        return drawn

    return add(hand_over=hand_over, draw_test=draw_test)


__all__ = ["Grader", "PIN_KEY", "URL_KEY", "configured", "require", "require_pinned", "take", "run_test_read",
           "recover", "hello", "proven_hello", "freeze_experiment"]


def set_grader(ws: Workspace, url: str, key: str | None) -> dict[str, Any]:
    """``monte config set grader URL --key PUBKEY``: the address and the pinned public key, both in
    ``.monte.yaml`` (commit it: verify, the hooks and CI check every test read against the key)."""
    from ruamel.yaml import YAML

    from monte.workspace import CONFIG_FILE

    parse_url(url)
    if not key:
        raise error("E_USAGE", "a grader is pinned by its public key", "pass --key 'ssh-ed25519 AAAA...' (what "
                    "`monte grader init` printed)")
    text = Path(key).read_text() if Path(key).is_file() else key
    parts = text.split()
    if len(parts) < 2 or not parts[0].startswith(("ssh-", "ecdsa-", "sk-")):
        raise error("E_USAGE", "--key is not an SSH public key", "pass the line `monte grader init` printed "
                    "(ssh-ed25519 AAAA...), or the path of the grader's key.pub")
    pinned = f"{parts[0]} {parts[1]}"
    path = ws.repo_root / CONFIG_FILE
    yaml = YAML()
    yaml.width = 4096  # the key on one line: the fast reader of .monte.yaml (monte.workspace) reads it
    data = (yaml.load(path.read_text(encoding="utf-8")) if path.exists() else None) or {}
    data[URL_KEY], data[PIN_KEY] = url, pinned
    buf = io.StringIO()
    yaml.dump(data, buf)
    tmp = path.with_suffix(".yaml.tmp")
    tmp.write_text(buf.getvalue(), encoding="utf-8")
    os.replace(tmp, path)
    ws.config[URL_KEY], ws.config[PIN_KEY] = url, pinned
    from monte.ledger.grader_statement import fingerprint

    return {"setting": "grader", "url": url, "file": str(path), "note": f"pinned grader key {fingerprint(pinned)}",
            "dvc_config": None}
