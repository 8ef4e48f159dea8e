"""What a grader signs for one test read, and how anyone checks it with the pinned public key.

The light half of :mod:`monte.grader`: no SSH session, no model, no dulwich, so ``monte ledger
verify`` (the hooks, CI) can check a row's signature with ``ssh-keygen -Y verify`` alone.

A statement is one JSON object, serialized one way (sorted keys, no spaces, a final newline),
signed under the namespace ``monte-grader`` (never a claim's or git's: a signature made for one
purpose is never accepted for another).
"""

from __future__ import annotations

import base64
import hashlib
import json
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from monte.errors import error

NAMESPACE = "monte-grader"
PRINCIPAL = "grader"
KIND = "monte-grader-read/v1"
#: the file beside a run's ``row.json`` that carries the grader's signed statement
ROW_FILE = "grader.json"
#: the ``.monte.yaml`` keys that connect a repository to its grader
URL_KEY = "grader"
PIN_KEY = "grader_key"


def canonical(obj: Any) -> bytes:
    """The one serialization of what is signed: a re-serialized edit never hides in whitespace."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=True).encode() + b"\n"


def outcomes(tasks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The per-item outcomes a grader hands back and signs the hash of: each item's id and score,
    in the split's order (never the item, its answer or its gold); for a sampled read also the
    item's seed and each of its K samples' index, seed and score (what pairs K > 1 reads and
    gives pass@k), never a sample's answer."""
    out = []
    for t in tasks:
        o: dict[str, Any] = {"id": str(t["id"]), "score": float(t["score"])}
        if "seed" in t:
            o["seed"] = int(t["seed"])
        if isinstance(t.get("samples"), list):
            o["samples"] = [{"sample": int(x["sample"]), "seed": int(x["seed"]), "score": float(x["score"])}
                            for x in t["samples"]]
        out.append(o)
    return out


def outcomes_sha256(tasks: list[dict[str, Any]]) -> str:
    return hashlib.sha256(canonical(outcomes(tasks))).hexdigest()


def weights_id(files: dict[str, str]) -> str:
    """One id for a set of weight files: the hash of their names and sha256s (what was loaded)."""
    return hashlib.sha256(canonical(dict(sorted(files.items())))).hexdigest()


def pinned_key(config: dict[str, Any]) -> str | None:
    """The grader public key ``.monte.yaml`` pins (``TYPE BASE64``), or None: no grader."""
    key = config.get(PIN_KEY)
    return " ".join(str(key).split()[:2]) if key else None


def fingerprint(public_key: str) -> str:
    """``SHA256:...`` of a public key line, as ``ssh-keygen -l`` prints it."""
    blob = base64.b64decode(public_key.split()[1])
    return "SHA256:" + base64.b64encode(hashlib.sha256(blob).digest()).decode().rstrip("=")


def check_signature(public_key: str, statement: dict[str, Any], signature: str, *,
                    namespace: str = NAMESPACE) -> bool:
    """Whether ``signature`` (ssh-keygen's armor) signs exactly ``statement`` with ``public_key``
    under ``namespace`` (a read's statement: :data:`NAMESPACE`)."""
    from monte.ledger.signing import ssh_keygen

    with tempfile.TemporaryDirectory(prefix="monte-grader-verify-") as tmp:
        allowed = Path(tmp) / "allowed_signers"
        allowed.write_text(f'{PRINCIPAL} namespaces="{namespace}" {public_key}\n')
        sig = Path(tmp) / "sig"
        sig.write_text(signature)
        r = subprocess.run([ssh_keygen(), "-Y", "verify", "-f", str(allowed), "-I", PRINCIPAL, "-n", namespace,
                            "-s", str(sig)], input=canonical(statement), capture_output=True)
        return r.returncode == 0


def parse_signed(raw: bytes | None) -> tuple[dict[str, Any], str] | None:
    """A row's ``grader.json`` as (statement, signature), or None when absent or malformed."""
    if raw is None:
        return None
    try:
        doc = json.loads(raw)
    except (ValueError, UnicodeDecodeError):
        return None
    if not isinstance(doc, dict) or not isinstance(doc.get("statement"), dict) or not isinstance(doc.get("signature"), str):
        return None
    return doc["statement"], doc["signature"]


def row_mismatch(statement: dict[str, Any], row: dict[str, Any], tasks: list[dict[str, Any]] | None) -> str | None:
    """What a recorded test-read row says that its signed statement does not, or None when they
    agree on everything the row records of the read (run, exam content, cohort, role, target,
    score, n, per-item outcomes, delta)."""
    plan = row.get("plan") or {}
    want = {"kind": KIND, "run": row.get("run"), "experiment": row.get("experiment"), "exam": row.get("exam"),
            "content": plan.get("split_sha256"), "cohort": row.get("cohort"), "role": row.get("role"),
            "n": row.get("n")}
    for k, v in want.items():
        if statement.get(k) != v:
            return f"{k}: the row records {v!r}, the grader signed {statement.get(k)!r}"
    k = (plan.get("settings") or {}).get("samples", 1)
    if int(statement.get("samples", 1)) != int(k):  # (a statement from before K > 1 reads says K = 1)
        return f"samples: the row draws K = {k} per item, the grader signed K = {statement.get('samples', 1)}"
    score = row.get("score")
    if not isinstance(score, (int, float)) or abs(float(score) - float(statement.get("score", -1))) > 1e-12:
        return f"score: the row records {score!r}, the grader signed {statement.get('score')!r}"
    if tasks is None or outcomes_sha256(tasks) != statement.get("outcomes_sha256"):
        return "the per-item outcomes (tasks.jsonl) are not the ones the grader signed"
    target = plan.get("target") or {}
    if (target.get("kind"), target.get("run"), target.get("step")) != tuple(
            (statement.get("target") or {}).get(k) for k in ("kind", "run", "step")):
        return f"target: the row scores {target.get('kind')} {target.get('run')}@{target.get('step')}, the grader " \
               f"signed {statement.get('target')!r}"
    signed = statement.get("delta")
    mine = row.get("delta")
    if (signed is None) != (mine is None) or (signed is not None and mine is not None
                                              and abs(float(signed["delta"]) - float(mine["delta"])) > 1e-12):
        return "delta: the row's paired delta is not the one the grader signed against its own test@0"
    return None


def seal_line(config: dict[str, Any]) -> str:
    """``monte status``'s one line: where the seal on the test split is held, and what would make
    it hold against an agent with a shell on this account."""
    key = pinned_key(config)
    if config.get(URL_KEY) and key:
        return f"seal: held by the grader {config[URL_KEY]} (key {fingerprint(key)})"
    # the local seal's reach, in one line: what it holds against, and what only a grader stops
    return ("seal: local (it binds monte's own reads: two test reads per content, each checked first, the "
            "record verified, the weights measured as proven; an agent with a shell on this account can still "
            "read the split's file; a grader on another account stops that: `monte grader init`, docs/grader.md)")


def require_pinned(config: dict[str, Any]) -> str:
    key = pinned_key(config)
    if key is None:
        raise error("E_NOT_FOUND", "no grader is pinned in .monte.yaml",
                    "connect one: `monte config set grader ssh://USER@HOST[:PORT] --key 'ssh-ed25519 AAAA...'`")
    return key


#: the git config key a repository (a bare server's, above all) pins its grader's public key under
GIT_CONFIG_PIN = (b"monte", b"graderKey")
#: the branches whose committed ``.monte.yaml`` pins the grader when nothing nearer does (a bare
#: repository's HEAD, a CI checkout of a ledger branch: the default branch's file, fetched beside it)
PIN_BRANCHES = (b"HEAD", b"refs/heads/main", b"refs/heads/master", b"refs/remotes/origin/HEAD",
                b"refs/remotes/origin/main", b"refs/remotes/origin/master")


def repository_pin(store: Any, config: dict[str, Any] | None = None) -> str | None:
    """The grader key a repository pins, for readers without a work tree's config (the hooks,
    CI on a ledger branch), first found wins: ``config`` (the work tree's ``.monte.yaml``, as a
    workspace read it), the repository's own ``git config monte.graderKey`` (a bare server's
    pin, set there, out of any pusher's reach), the work tree's ``.monte.yaml`` beside the git
    directory, then ``.monte.yaml`` as committed on HEAD or the default branch. None: no grader."""
    if config is not None and (key := pinned_key(config)) is not None:
        return key
    from ruamel.yaml import YAML  # the light install's YAML (PyYAML comes only with the extras)
    from ruamel.yaml.error import YAMLError

    repo = store.repo
    try:
        value = repo.get_config().get(*GIT_CONFIG_PIN)
    except KeyError:
        value = None
    if value:
        return " ".join(value.decode().split()[:2])
    common = Path(repo.commondir())
    texts: list[bytes] = []
    if common.name == ".git" and (common.parent / ".monte.yaml").is_file():
        texts.append((common.parent / ".monte.yaml").read_bytes())
    for ref in PIN_BRANCHES:
        try:
            commit = repo[repo.refs[ref]]
            tree = repo[commit.tree]
            if b".monte.yaml" in tree:
                texts.append(repo[tree[b".monte.yaml"][1]].data)
        except (KeyError, AttributeError, ValueError):
            continue
    for text in texts:
        try:
            doc = YAML(typ="safe").load(text.decode("utf-8"))
        except (YAMLError, UnicodeDecodeError, RecursionError):
            continue
        if isinstance(doc, dict) and (key := pinned_key(doc)) is not None:
            return key
    return None


def ledger_violations(store: Any, experiments: list[str], public_key: str, *,
                      only: dict[str, set[str]] | None = None) -> list[tuple[str, str, str]]:
    """In a grader-pinned repository: every finished test read of every ledger must carry the
    grader's statement, signed by ``public_key``, that says exactly what its row records; and
    the signed statements spend at most one test@0 and one claim per exam content and cohort.
    ``only`` (experiment -> runs; a push's new rows, as the hooks judge it): those rows' reads
    only. Returns (experiment, run, why) for each violation."""
    from monte.ledger.experiment import Ledger
    from monte.ledger.predicates import is_test_read
    from monte.ledger.refs import ledger_ref
    from monte.ledger.views import run_dir

    out: list[tuple[str, str, str]] = []
    spent: dict[tuple[str, str, str], str] = {}
    for exp in experiments:
        snap = store.snapshot(ledger_ref(exp))
        ledger = Ledger(store, exp)
        rows = ledger.rows(snap) if only is None else [
            r for r in (ledger.row(run, snap) for run in sorted(only.get(exp, ()))) if r is not None]
        for row in rows:
            if not is_test_read(row) or row.status != "succeeded":
                continue
            signed = parse_signed(snap.read(f"{run_dir(row.run)}/{ROW_FILE}"))
            if signed is None:
                out.append((exp, row.run, "a test read with no grader signature in a grader-pinned repository"))
                continue
            statement, signature = signed
            if not check_signature(public_key, statement, signature):
                out.append((exp, row.run, "the test read's grader signature does not verify with the pinned key"))
                continue
            raw = snap.read(f"{run_dir(row.run)}/tasks.jsonl")
            tasks = [json.loads(x) for x in raw.decode().splitlines() if x.strip()] if raw else None
            why = row_mismatch(statement, row.model_dump(mode="json"), tasks)
            if why is not None:
                out.append((exp, row.run, f"the row differs from the grader's signed statement: {why}"))
                continue
            key = (str(statement["content"]), str(statement["cohort"]), str(statement["role"]))
            if key in spent and spent[key] != row.run:
                out.append((exp, row.run, f"a second signed {key[2]} of cohort {key[1]} on this exam content "
                            f"(the first: run {spent[key]})"))
            spent.setdefault(key, row.run)
    return out
