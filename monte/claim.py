"""A final claim anyone can check: an exported, signed bundle that verifies without the repository.

``monte claim export`` writes one folder:

- ``statement.json``: an in-toto Statement (v1). Its subjects are the claimed checkpoint's servable
  files by sha256 (as its lineage commit records them); its predicate carries the experiment's
  ``measurement.json`` (content and hash), the exam and its test split's hash, the cohort and the
  base weights identity, the test@0 and claim reads (score, n, the hash of each per-item file),
  the paired delta as it was recorded and printed, the verdict, the test reads of that seal in the
  cohort and across the repository, the lineage path with each hop's move, the ledger tip and the
  monte version;
- ``statement.json.sig``: an SSH signature (``ssh-keygen -Y sign``, namespace :data:`NAMESPACE`) of
  the exact bytes of ``statement.json``, so ``ssh-keygen -Y verify`` checks it with no monte at all;
- ``envelope.json``: the same Statement in a DSSE envelope, its signature an SSH signature of the
  DSSE pre-authentication encoding (PAE) of the payload;
- ``tasks/baseline.jsonl`` and ``tasks/claim.jsonl``: the per-item results of test@0 and of the
  claim, byte for byte as the ledger holds them, so anyone can recompute the delta;
- ``ledger.bundle``: a git bundle of every monte ref of the repository (ledgers, lineage and base
  refs, the vault ref) at the moment of export: what the claim rests on, replayed by verify.

``monte claim verify`` needs the light install, ``git`` and ``ssh-keygen``; no repository, no
network. It checks the signatures against an ``allowed_signers`` file, every digest, recomputes the
paired delta and verdict from the per-item files to the printed digits, replays the bundled ledger
with the rules ``monte ledger verify`` applies, and confirms the seal: exactly two test reads of
that exam content in that cohort, test@0 first and the claim second.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import subprocess
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from monte import __version__
from monte.claim_signature import NAMESPACE as NAMESPACE
from monte.claim_signature import allowed_keys, armor, b64decode_exact, signers_of
from monte.claim_signature import canonical as canonical
from monte.claim_signature import fingerprint as fingerprint
from monte.claim_signature import pae as pae
from monte.claim_signature import public_key_line as public_key_line
from monte.claim_signature import sign_bytes as sign_bytes
from monte.claim_signature import unarmor as unarmor
from monte.errors import MonteError, error
from monte.ledger.predicates import is_admissible, is_sealed, is_test_read
from monte.result_type import Result

if TYPE_CHECKING:
    from monte.ledger.verify.report import LedgerVerified

STATEMENT_TYPE = "https://in-toto.io/Statement/v1"
PREDICATE_TYPE = "https://monte.dev/claim/v1"
PAYLOAD_TYPE = "application/vnd.in-toto+json"
STATEMENT = "statement.json"
SIGNATURE = STATEMENT + ".sig"
ENVELOPE = "envelope.json"
BUNDLE = "ledger.bundle"
BASELINE_TASKS = "tasks/baseline.jsonl"
CLAIM_TASKS = "tasks/claim.jsonl"
FILES = (STATEMENT, SIGNATURE, ENVELOPE, BUNDLE, BASELINE_TASKS, CLAIM_TASKS)
_MONTE_REFS = "refs/heads/monte/"
#: the results bucket's mirrors of other experiments (``monte sync``): the seal and the disclosure count them
MIRRORS = "refs/remotes/results/monte/"


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


# --- export --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ClaimExported(Result):
    """``monte claim export``: the bundle's folder, its Statement's sha256, the ``allowed_signers``
    line a reader adds for the key, each file's size, and the model card that names it (or None)."""

    out: str
    statement_sha256: str
    signer: str
    files: dict[str, int]  # name -> bytes
    card: str | None


def export(ws: Any, ref: str, out: Path, key: Path, *, experiment: str | None = None,
           identity: str | None = None, card: Path | None = None) -> ClaimExported:
    """Write the signed claim bundle of the final claim ``ref`` (``EXP/RUN`` or ``RUN``) to ``out``.

    ``card``: a promoted folder of the claimed checkpoint; its files are proven against the
    subjects and its model card (``README.md``) gains a section naming the Statement's digest and
    how to verify it."""
    from monte.ledger.rules import checkpoints, read_role
    from monte.ledger.views import run_dir
    from monte.runs import find_run
    from monte.runs.lifecycle import read_rows

    if not key.is_file():
        raise error("E_NOT_FOUND", f"no SSH private key at {key}", "pass --key PATH (ssh-keygen -t ed25519 -f PATH)")
    who = identity or _identity(ws)
    if not who or any(c.isspace() or ord(c) < 32 or ord(c) == 127 for c in who) or "," in who:
        raise error("E_BAD_INPUT", f"--identity {who!r} is not one allowed_signers principal (no spaces, commas or "
                    "control characters: it becomes one line of the card's allowed_signers)",
                    "pass --identity NAME@HOST, one word")
    signer_key = public_key_line(key)
    ledger, row = find_run(ws, ref, experiment)
    exp = ledger.experiment
    what = f"{row.kind} {row.split or ''} {row.status}".replace("  ", " ")
    if not (is_test_read(row) and is_admissible(row) and read_role(row) == "claim"):
        raise error("E_REFUSED", f"run {exp}/{row.run} is not a final claim ({what.strip()}"
                    + (f", role {read_role(row)}" if is_sealed(row.split) else "") + ")",
                    "export the experiment's final claim: `monte status` lists it as `succeeded claim`")
    delta = row.delta or {}
    if not delta.get("paired") or not delta.get("baseline"):
        raise error("E_UNPAIRABLE", f"the final claim {row.run} has no paired delta against test@0",
                    "a claim bundle carries both per-item files; run where the claim's tasks.jsonl is readable")
    snap = ledger.snapshot()
    tip = snap.commit_id
    claim_tasks = snap.read(f"{run_dir(row.run)}/tasks.jsonl")
    base_tasks = snap.read(f"{run_dir(str(delta['baseline']))}/tasks.jsonl")
    if claim_tasks is None or base_tasks is None or tip is None:
        raise error("E_UNPAIRABLE", f"the per-item files of {row.run} or of its baseline are not in the ledger",
                    "run `monte ledger verify`; export from a repository that holds them")
    rows = read_rows(ledger, snap)
    by_run = {r.run: r for r in rows}
    baseline = by_run.get(str(delta["baseline"]))
    if baseline is None:
        raise error("E_INTEGRITY", f"the claim's baseline {delta['baseline']} is not in the ledger",
                    "run `monte ledger verify`")
    target = row.plan.get("target") or {}
    cks = checkpoints(rows)
    ck = next((c for c in cks if c.run == target.get("run") and c.step == int(target.get("step", -1))), None)
    if ck is None:
        raise error("E_INTEGRITY", f"the claim's checkpoint {target.get('run')}@{target.get('step')} is not in the "
                    "ledger", "run `monte ledger verify`")
    from monte.ledger.lineage import checkpoint_info

    info = checkpoint_info(ws.store, ws.data_root, ck, local=False)
    configs = _own_configs(info, ws.data_root)
    if card is not None:
        _prove_card(card, info, configs)
    subjects, predicate = derive(ws.store, exp, row, rows, snap, info["files"])
    ledger_info = predicate["ledger"]
    statement = {"_type": STATEMENT_TYPE, "subject": subjects, "predicateType": PREDICATE_TYPE,
                 "predicate": predicate}
    out.mkdir(parents=True, exist_ok=True)
    if any((out / f).exists() for f in FILES):
        raise error("E_REFUSED", f"{out} already holds a claim bundle", "pass --out a new or empty folder")
    (out / "tasks").mkdir(exist_ok=True)
    (out / BASELINE_TASKS).write_bytes(base_tasks)
    (out / CLAIM_TASKS).write_bytes(claim_tasks)
    for name, data in configs.items():  # the checkpoint's own configs, for a promoted folder's
        (out / CONFIGS_DIR).mkdir(exist_ok=True)
        (out / CONFIGS_DIR / name).write_bytes(data)
    _bundle(ws.store.repo.commondir(), out / BUNDLE)
    ledger_info["bundle_sha256"] = _sha256((out / BUNDLE).read_bytes())
    payload = canonical(statement)
    (out / STATEMENT).write_bytes(payload)
    (out / SIGNATURE).write_bytes(sign_bytes(key, payload))
    envelope = {"payloadType": PAYLOAD_TYPE, "payload": base64.b64encode(payload).decode(),
                "signatures": [{"keyid": fingerprint(signer_key),
                                "sig": base64.b64encode(unarmor(sign_bytes(key, pae(PAYLOAD_TYPE, payload))))
                                .decode()}]}
    (out / ENVELOPE).write_bytes(canonical(envelope))
    digest = _sha256(payload)
    if card is not None:
        _write_card(card, digest, out.name, who)
    return ClaimExported(str(out), digest, f"{who} {signer_key}", {f: (out / f).stat().st_size for f in FILES},
                         str(card) if card else None)


def derive(store: Any, exp: str, row: Any, rows: Sequence[Any], snap: Any,
           files: dict[str, str]) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The Statement's subjects and predicate for the final claim ``row`` of ``exp``, from the
    repository alone (``files``: the checkpoint's lineage commit's). Export signs what this
    returns; verify derives it again from the bundled ledger and refuses a Statement that
    differs in any field (``ledger.bundle_sha256`` aside: the bundle's own digest, checked
    against its bytes)."""
    from monte.ledger.rules import checkpoints
    from monte.ledger.seal import Seal, settings_key
    from monte.ledger.views import run_dir
    from monte.training import card as cards

    delta = row.delta or {}
    by_run = {r.run: r for r in rows}
    baseline = by_run.get(str(delta.get("baseline")))
    claim_tasks = snap.read(f"{run_dir(row.run)}/tasks.jsonl")
    base_tasks = snap.read(f"{run_dir(str(delta.get('baseline')))}/tasks.jsonl")
    if baseline is None or claim_tasks is None or base_tasks is None or snap.commit_id is None:
        raise error("E_INTEGRITY", f"the claim {row.run}'s baseline or a per-item file is not in the ledger",
                    "run `monte ledger verify`")
    target = row.plan.get("target") or {}
    cks = checkpoints(rows)
    ck = next((c for c in cks if c.run == target.get("run") and c.step == int(target.get("step", -1))), None)
    if ck is None:
        raise error("E_INTEGRITY", f"the claim's checkpoint {target.get('run')}@{target.get('step')} is not in the "
                    "ledger", "run `monte ledger verify`")
    meas_raw = snap.read("measurement.json") or b""
    meas = json.loads(meas_raw) if meas_raw else {}
    seal = Seal(store, hash_legacy=False)
    seal.know(exp, rows)
    weights = seal.weights_of(exp, row.cohort or "")
    reads = list(seal.touches(_seal_key(row, weights)))
    split_sha = str(row.plan.get("split_sha256") or "")
    disclosure = seal.disclosure(split_sha)
    hops = cards.hops_for(rows, cks, ck)
    subjects = [{"name": n, "digest": {"sha256": d}} for n, d in sorted(files.items())]
    predicate: dict[str, Any] = {
        "monte_version": __version__,
        "experiment": exp,
        "exam": {"name": row.exam, "test_split_sha256": split_sha,
                 "settings_key": settings_key(row.plan.get("settings") or {})},
        "measurement": {"sha256": _sha256(meas_raw), "content": meas},
        "cohort": row.cohort,
        "base": {"model": row.plan.get("base_model") or meas.get("model"), "weights": weights},
        "checkpoint": {"ref": ck.ref, "lineage_commit": ck.commit},
        "baseline": _read(baseline, base_tasks, BASELINE_TASKS),
        "claim": _read(row, claim_tasks, CLAIM_TASKS),
        "delta": _printed(delta),
        "verdict": delta.get("verdict"),
        "test_reads": {"seal": len(reads), "runs": [f"{r.experiment}/{r.run}" for r in reads],
                       "repository": disclosure["reads"], "repository_cohorts": disclosure["cohorts"]},
        "lineage": [{k: h.get(k) for k in ("run", "algorithm", "recipe", "recipe_sha256", "source", "start", "end",
                                            "boundary")} for h in hops],
        "ledger": {"ref": f"{_MONTE_REFS}{exp}/ledger", "commit": snap.commit_id.decode(), "bundle": BUNDLE},
    }
    return subjects, json.loads(canonical(predicate))  # as it reads back from the signed bytes


#: the checkpoint's own config files, beside a bundle exported with ``--card`` (``monte promote``
#: rewrites them: a promoted folder is matched to the claim by what its configs compute)
CONFIGS_DIR = "configs"
#: the config files a promoted folder may hold rewritten, and the keys that change no computation
PROMOTED_CONFIGS = ("config.json", "tokenizer_config.json")


def _computes(data: bytes, name: str) -> Any:
    """What a config file computes: its JSON less the fields that say where the folder came from
    (``monte.models.identity.CONFIG_METADATA``, ``use_cache`` among them) and the local-only flags
    ``monte promote`` drops (``monte.models.publish.LOCAL_ONLY``). None: not a JSON object."""
    from monte.models.identity import CONFIG_METADATA
    from monte.models.publish import LOCAL_ONLY

    try:
        obj = json.loads(data)
    except (ValueError, UnicodeDecodeError, RecursionError):
        return None
    if not isinstance(obj, dict):
        return None
    drop = set(LOCAL_ONLY) | (set(CONFIG_METADATA) if name == "config.json" else set())
    return {k: v for k, v in obj.items() if k not in drop}


def _matches(path: Path, name: str, digest: str, original: bytes | None) -> bool:
    """``path`` is the claimed file: its bytes, or (a config ``monte promote`` rewrote) the same
    computation as the checkpoint's own file ``original`` (whose sha256 is ``digest``)."""
    from monte.hashing import sha256_file

    if sha256_file(path) == digest:
        return True
    if name not in PROMOTED_CONFIGS or original is None or _sha256(original) != digest:
        return False
    mine = _computes(read_bounded(path, 64 << 20), name)
    return mine is not None and mine == _computes(original, name)


def _own_configs(info: dict[str, Any], data_root: Path) -> dict[str, bytes]:
    """The checkpoint's own config files (:data:`PROMOTED_CONFIGS`), from this data root where
    they are still the bytes its lineage commit records: the bundle carries them, so a folder
    ``monte promote`` wrote is matched by what its configs compute (:func:`_matches`)."""
    folder = Path(data_root) / str(info.get("weights") or "")
    out: dict[str, bytes] = {}
    for name in PROMOTED_CONFIGS:
        digest = info["files"].get(name)
        try:
            data = read_bounded(folder / name, 64 << 20) if digest else None
        except MonteError:
            continue
        if data is not None and _sha256(data) == digest:
            out[name] = data
    return out


def _prove_card(card: Path, info: dict[str, Any], configs: dict[str, bytes]) -> None:
    """Each file of the promoted folder ``card`` is the checkpoint's (:func:`_matches`)."""
    for name, digest in sorted(info["files"].items()):
        p = card / name
        if not p.is_file() or not _matches(p, name, digest, configs.get(name)):
            raise error("E_INTEGRITY", f"{p} is missing or is not the claimed checkpoint's file",
                        "pass the folder `monte promote` wrote for this checkpoint, on the machine that holds the "
                        "checkpoint's own files (a promoted config is compared with them)")


def read_bounded(path: Path, cap: int) -> bytes:
    from monte.hashing import read_bounded as read

    return read(path, cap, "a file of the claim")


def _seal_key(row: Any, weights: str) -> Any:
    from monte.ledger.seal import SealKey, by_content, settings_key

    # a claim counted under the older rule lists the reads of its own settings, as it was counted
    return SealKey(str(row.plan.get("split_sha256") or ""), settings_key(row.plan.get("settings") or {}), weights,
                   legacy_cohort=row.cohort or "", by_settings=not by_content(row))


def _read(r: Any, tasks: bytes, path: str) -> dict[str, Any]:
    """A test read as the Statement names it; ``recovered``: recorded by `monte recover` from a
    kept result, not by the process that generated it."""
    return {"run": r.run, "experiment": r.experiment, "score": r.score, "n": r.n, "role": r.role,
            "recovered": bool((r.model_extra or {}).get("recovered")),
            "tasks": {"path": path, "sha256": _sha256(tasks)}}


def _printed(delta: dict[str, Any]) -> dict[str, Any]:
    from monte.stats.paired import format_bound

    d = {k: delta.get(k) for k in ("delta", "lower", "upper", "n", "fixed", "broken", "method", "paired")}
    d["printed"] = (f"{format_bound(float(delta['delta']))} [{format_bound(float(delta['lower']))}, "
                    f"{format_bound(float(delta['upper']))}]")
    return d


def _identity(ws: Any) -> str:
    r = subprocess.run(["git", "-C", str(ws.repo_root), "config", "user.email"], capture_output=True, text=True)
    return r.stdout.strip() or "monte"


def _bundle(git_dir: str | os.PathLike[str], dest: Path) -> None:
    """Every monte ref of the repository as one git bundle (git's own format: `git fetch` reads it)."""
    refs = subprocess.run(["git", "--git-dir", str(git_dir), "for-each-ref", "--format=%(refname)", _MONTE_REFS, MIRRORS],
                          capture_output=True, text=True, check=True).stdout.split()
    if not refs:
        raise error("E_NOT_FOUND", "this repository holds no monte refs to bundle", "export from the claim's repository")
    r = subprocess.run(["git", "--git-dir", str(git_dir), "bundle", "create", "-q", str(dest), "--stdin"],
                       input="\n".join(refs) + "\n", capture_output=True, text=True)
    if r.returncode != 0:
        raise error("E_STORAGE", f"git bundle failed: {r.stderr.strip()[-300:]}", "check the disk and the repository")


def _prove_folder(folder: Path, files: dict[str, str]) -> None:
    from monte.hashing import sha256_file

    for name, digest in sorted(files.items()):
        p = folder / name
        if not p.is_file() or sha256_file(p) != digest:
            raise error("E_INTEGRITY", f"{p} is missing or is not the claimed checkpoint's file",
                        "pass the folder `monte promote` wrote for this checkpoint")


CARD_HEADING = "## Claim"


def _write_card(folder: Path, digest: str, bundle: str, who: str) -> None:
    readme = folder / "README.md"
    text = readme.read_text(encoding="utf-8") if readme.exists() else ""
    if CARD_HEADING + "\n" in text:
        text = text[:text.index(CARD_HEADING + "\n")].rstrip() + "\n"
    text += (f"\n{CARD_HEADING}\n\nThese weights carry a signed final claim: the in-toto Statement with sha256 "
             f"`{digest}` (signed by {who}), exported as the folder `{bundle}`. To check it with no repository:\n\n"
             "```bash\n"
             "pip install monte\n"
             f"echo '{who} <public key>' > allowed_signers   # the signer's key, from a source you trust\n"
             f"monte claim verify {bundle} --allowed-signers allowed_signers --weights .\n"
             "```\n\n"
             f"The signature alone: `ssh-keygen -Y verify -f allowed_signers -I {who} -n {NAMESPACE} "
             f"-s {bundle}/{SIGNATURE} < {bundle}/{STATEMENT}`.\n")
    readme.write_text(text, encoding="utf-8")


# --- verify --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ClaimVerified(Result):
    """``monte claim verify``: what the bundle proved with its files alone (a failure is a refusal)."""

    statement_sha256: str
    signer: str
    fingerprint: str  # the signing key's, as `ssh-keygen -l` prints it
    experiment: str
    checkpoint: str
    delta: str
    verdict: str
    test_reads: int  # of this exam content in this cohort
    repository_reads: int  # of this test split, every cohort of the repository
    repository_cohorts: int
    recovered: list[str]  # "baseline"/"claim": a read `monte recover` recorded
    records: int
    weights: str  # "checked (N files)" or "not given"


def _fail(what: str, fix: str = "the bundle was changed after it was signed, or was never a monte claim: "
          "get it again from its signer", code: str = "E_VERIFY") -> MonteError:
    return error(code, what, fix)  # type: ignore[arg-type]


#: the most a bundle's small files may hold (the Statement, its signature, the envelope, a
#: per-item file, a config); the ledger bundle is hashed, never read whole
_SMALL = 64 << 20


def _small(path: Path) -> bytes:
    try:
        return read_bounded(path, _SMALL)
    except MonteError as e:
        raise _fail(f"{path.name}: {e.message}") from None


def verify(folder: Path, allowed: Path, *, verify_ledgers: Callable[[Any], LedgerVerified],
           weights: Path | None = None, signer: str | None = None,
           grader_key: str | None = None) -> ClaimVerified:
    """Check a claim bundle with nothing but its files (see the module's docstring).
    ``verify_ledgers``: `monte ledger verify --all` of a workspace (``api.ledger_verify``), run on
    the bundled ledger. ``signer``: the fingerprint (``SHA256:...``) of the one key accepted.
    ``grader_key``: the team's published grader public key; test@0 and the claim must each carry
    its signature over exactly what their rows record (docs/grader.md)."""
    folder, allowed = folder.absolute(), allowed.absolute()  # git and ssh-keygen run elsewhere
    weights = weights.absolute() if weights is not None else None
    if not folder.is_dir():
        raise error("E_NOT_FOUND", f"no claim bundle at {folder}", "pass the folder `monte claim export` wrote")
    if not allowed.is_file():
        raise error("E_NOT_FOUND", f"no allowed_signers file at {allowed}",
                    "write one: `PRINCIPAL ssh-ed25519 AAAA...`, the signer's public key from a source you trust")
    missing = [f for f in FILES if not (folder / f).is_file()]
    if missing:
        raise _fail(f"the bundle lacks {', '.join(missing)}")
    payload = _small(folder / STATEMENT)
    sig = _small(folder / SIGNATURE)
    try:
        key_fpr = signed_by(unarmor(sig))
    except ValueError:
        raise _fail(f"{SIGNATURE} is not an SSH signature as ssh-keygen writes it") from None
    if signer is not None and key_fpr != signer:
        raise _fail(f"{STATEMENT} is signed by the key {key_fpr}, not {signer}",
                    "drop --signer, or get the claim signed by that key")
    signers = signers_of(allowed, sig, payload)
    if not signers:
        raise _fail(f"{STATEMENT}'s signature is not by a key in {allowed} (or the file changed after signing)",
                    "check allowed_signers holds the signer's key; otherwise the bundle was changed: get it again")
    principal = signers[0]
    raw_envelope = _small(folder / ENVELOPE)
    try:
        statement = json.loads(payload)
        envelope = json.loads(raw_envelope)
    except (ValueError, UnicodeDecodeError, RecursionError) as e:
        raise _fail(f"a JSON file of the bundle does not parse ({type(e).__name__})") from None
    if canonical(statement) != payload:
        raise _fail(f"{STATEMENT} is not in monte's canonical form")
    _check_envelope(envelope, raw_envelope, payload, allowed, principal)
    if not isinstance(statement, dict) or statement.get("_type") != STATEMENT_TYPE or \
            statement.get("predicateType") != PREDICATE_TYPE:
        raise _fail("the Statement is not a monte claim (its _type or predicateType)")
    _shape(statement)
    p: dict[str, Any] = statement["predicate"]
    if p["monte_version"] != __version__:
        raise _fail(f"the claim was exported by monte {p['monte_version']}; this is monte {__version__}, which "
                    "derives every field again with its own code", f"verify with `pip install "
                    f"'monte=={p['monte_version']}'`, the version that signed it")
    files = {BASELINE_TASKS: p["baseline"]["tasks"]["sha256"], CLAIM_TASKS: p["claim"]["tasks"]["sha256"]}
    for name, digest in files.items():
        if _sha256(_small(folder / name)) != digest:
            raise _fail(f"{name} is not the file the Statement signs (sha256 differs)")
    from monte.hashing import sha256_file

    if not (folder / BUNDLE).is_file() or sha256_file(folder / BUNDLE) != p["ledger"]["bundle_sha256"]:
        raise _fail(f"{BUNDLE} is not the file the Statement signs (sha256 differs)")
    checked = "not given"
    if weights is not None:
        checked = _check_weights(weights, statement["subject"], folder)
    base = _tasks(folder / BASELINE_TASKS)
    mine = _tasks(folder / CLAIM_TASKS)
    printed = _recompute(base, mine, p, _samples(folder / BASELINE_TASKS), _samples(folder / CLAIM_TASKS))
    records = _replay(folder / BUNDLE, statement, _small(folder / BASELINE_TASKS), _small(folder / CLAIM_TASKS),
                      verify_ledgers, grader_key)
    return ClaimVerified(_sha256(payload), principal, key_fpr, p["experiment"], p["checkpoint"]["ref"], printed,
                         str(p["verdict"]), int(p["test_reads"]["seal"]), int(p["test_reads"]["repository"]),
                         int(p["test_reads"]["repository_cohorts"]),
                         [side for side in ("baseline", "claim") if p[side]["recovered"]], records, checked)


def signed_by(blob: bytes) -> str:
    """The fingerprint of the public key inside an SSHSIG blob (``SHA256:...``)."""
    import struct

    if blob[:6] != b"SSHSIG" or len(blob) < 14:
        raise ValueError("not an SSHSIG blob")
    (n,) = struct.unpack(">I", blob[10:14])
    key = blob[14:14 + n]
    if len(key) != n:
        raise ValueError("a truncated SSHSIG blob")
    return "SHA256:" + base64.b64encode(hashlib.sha256(key).digest()).decode().rstrip("=")


def _shape(statement: dict[str, Any]) -> None:
    """Every field verify reads has the type export writes: a malformed (but validly signed)
    Statement is refused by name, ``E_BAD_INPUT``, before any field is used."""
    from pydantic import ValidationError

    from monte.claim_shape import Statement

    try:
        Statement.model_validate(statement)
    except ValidationError as e:
        first = e.errors()[0]
        where = ".".join(str(x) for x in first["loc"]) or "the Statement"
        raise _fail(f"the Statement is malformed: {where}: {first['msg']} ({e.error_count()} problem(s))",
                    "the signer's monte wrote no such Statement: get the claim again from its signer",
                    code="E_BAD_INPUT") from None


def _check_grader(snap: Any, key: str, reads: dict[str, tuple[Any, bytes]]) -> None:
    """Each test read carries the grader's statement, signed by ``key``, saying what its row records."""
    from monte import jsonl
    from monte.ledger.grader_statement import ROW_FILE, check_signature, parse_signed, row_mismatch
    from monte.ledger.views import run_dir

    for run, (row, tasks) in reads.items():
        signed = parse_signed(snap.read(f"{run_dir(run)}/{ROW_FILE}"))
        if signed is None or not check_signature(key, *signed):
            raise _fail(f"test read {run} carries no signature of the grader key given",
                        "check --grader-key is the team's published grader key; otherwise the claim was not "
                        "read by that grader")
        why = row_mismatch(signed[0], row.model_dump(mode="json"), jsonl.load_lines(tasks))
        if why is not None:
            raise _fail(f"test read {run} differs from the grader's signed statement: {why}")


def _check_envelope(envelope: Any, raw: bytes, payload: bytes, allowed: Path, signer: str) -> None:
    if not isinstance(envelope, dict) or canonical(envelope) != raw:
        raise _fail(f"{ENVELOPE} is not in monte's canonical form")
    if envelope.get("payloadType") != PAYLOAD_TYPE:
        raise _fail(f"{ENVELOPE}'s payloadType is not {PAYLOAD_TYPE}")
    try:
        body = b64decode_exact(str(envelope.get("payload", "")))
        sigs = envelope["signatures"]
        if len(sigs) != 1:
            raise ValueError("one signature")
        dsse_sig = armor(b64decode_exact(str(sigs[0]["sig"])))
        keyid = str(sigs[0]["keyid"])
    except (ValueError, KeyError, IndexError, TypeError):
        raise _fail(f"{ENVELOPE} is not a DSSE envelope") from None
    if body != payload:
        raise _fail(f"{ENVELOPE}'s payload is not {STATEMENT}")
    if signer not in signers_of(allowed, dsse_sig, pae(PAYLOAD_TYPE, payload)):
        raise _fail(f"{ENVELOPE}'s DSSE signature does not verify for {signer}")
    if keyid not in {fingerprint(k) for k in allowed_keys(allowed, signer)}:
        raise _fail(f"{ENVELOPE}'s keyid {keyid} is not the fingerprint of {signer}'s key")


def _check_weights(folder: Path, subjects: Sequence[dict[str, Any]], bundle: Path) -> str:
    """Each subject is in ``folder``, byte for byte, or (a config ``monte promote`` rewrote)
    computing the same as the checkpoint's own file the bundle carries (``configs/``: exported
    with ``--card``), itself proven against the subject's digest."""
    for s in subjects:
        name = str(s["name"])
        p = folder / name
        if not p.is_file():
            raise _fail(f"the weights folder {folder} lacks {name}", "pass --weights the claimed model's folder",
                        code="E_INTEGRITY")
        kept = bundle / CONFIGS_DIR / name
        original = _small(kept) if name in PROMOTED_CONFIGS and kept.is_file() else None
        if not _matches(p, name, s["digest"]["sha256"], original):
            raise _fail(f"{p} is not the claimed file (sha256 differs"
                        + (", and it does not compute as the checkpoint's own" if original is not None else "") + ")",
                        "these are not the weights the claim signs", code="E_INTEGRITY")
    return f"checked ({len(subjects)} files)"


def _tasks(path: Path) -> dict[str, float]:
    from monte import jsonl

    try:
        return {str(t["id"]): float(t["score"]) for t in jsonl.load_lines(path.read_bytes())}
    except (ValueError, KeyError, TypeError, UnicodeDecodeError):
        raise _fail(f"{path.name} is not a per-item results file") from None


def _samples(path: Path) -> dict[str, list[float]] | None:
    """K > 1 (K samples per item, docs/statistics.md): each item's sample scores, as the per-item file holds them."""
    from monte import jsonl
    from monte.stats.samples import samples_of

    try:
        return samples_of(jsonl.load_lines(path.read_bytes()))
    except (ValueError, KeyError, TypeError, UnicodeDecodeError):
        raise _fail(f"{path.name} is not a per-item results file") from None


def _recompute(base: dict[str, float], mine: dict[str, float], p: dict[str, Any],
               base_samples: dict[str, list[float]] | None = None,
               mine_samples: dict[str, list[float]] | None = None) -> str:
    from monte.stats.paired import paired_delta, verdict
    from monte.stats.samples import sampled_delta

    if set(base) != set(mine) or not base:
        raise _fail("the two per-item files do not hold the same items: nothing to pair")
    ids = sorted(base)
    if base_samples is not None and mine_samples is not None:  # K > 1: as the eval judged it
        d = sampled_delta([base_samples[i] for i in ids], [mine_samples[i] for i in ids]).d
    else:
        d = paired_delta([base[i] for i in ids], [mine[i] for i in ids])
    rec = p["delta"]
    got = _printed({"delta": d.delta, "lower": d.lower, "upper": d.upper})["printed"]
    if got != rec["printed"] or d.n != rec["n"] or d.fixed != rec["fixed"] or d.broken != rec["broken"]:
        raise _fail(f"the per-item files give {got} (n {d.n}, fixed {d.fixed}, broken {d.broken}), the Statement "
                    f"prints {rec['printed']} (n {rec['n']}, fixed {rec['fixed']}, broken {rec['broken']})")
    if verdict(d) != p["verdict"]:
        raise _fail(f"the per-item files give the verdict {verdict(d)}, the Statement says {p['verdict']}")
    for side, scores in (("baseline", base), ("claim", mine)):
        score = sum(scores.values()) / len(scores)
        if p[side]["score"] is None or abs(score - float(p[side]["score"])) > 1e-9 or p[side]["n"] != len(scores):
            raise _fail(f"the {side}'s per-item file scores {score:.4f} on {len(scores)} items, the Statement says "
                        f"{p[side]['score']} on {p[side]['n']}")
    return str(got)


def _replay(bundle: Path, statement: dict[str, Any], base_tasks: bytes, claim_tasks: bytes,
            verify_ledgers: Callable[[Any], LedgerVerified], grader_key: str | None = None) -> int:
    """The bundled ledger, fetched into an empty bare repository and verified there; then every
    field of the Statement derived again from it (:func:`derive`) and compared; with ``grader_key``, each test read's grader signature (:func:`_check_grader`)."""
    from monte.ledger.experiment import Ledger
    from monte.ledger.lineage import read_checkpoint
    from monte.ledger.rules import read_role
    from monte.runs.lifecycle import read_rows
    from monte.workspace import open_git

    p: dict[str, Any] = statement["predicate"]
    with tempfile.TemporaryDirectory(prefix="monte-claim-") as tmp:
        repo = Path(tmp) / "ledger.git"
        env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
        for cmd in (["git", "init", "-q", "--bare", str(repo)],
                    ["git", "-C", str(repo), "bundle", "verify", "-q", str(bundle)],
                    ["git", "-C", str(repo), "fetch", "-q", str(bundle), "refs/heads/monte/*:refs/heads/monte/*",
                     f"+{MIRRORS}*:{MIRRORS}*"]):
            r = subprocess.run(cmd, capture_output=True, text=True, env=env)
            if r.returncode != 0 and not (cmd[3:4] == ["fetch"] and "couldn't find remote ref" in r.stderr):
                raise _fail(f"{BUNDLE} is not a readable git bundle: {r.stderr.strip()[-300:]}")
        ws = open_git(repo)
        try:
            result = verify_ledgers(ws)
        except MonteError as e:
            raise _fail(f"the bundled ledger does not keep monte's rules: {e.message}") from None
        exp = str(p["experiment"])
        ledger = Ledger(ws.store, exp)
        tip = ws.store.tip(ledger.ref)
        if tip is None or tip.decode() != p["ledger"]["commit"]:
            raise _fail(f"the bundle's ledger tip is not the commit the Statement names ({p['ledger']['commit'][:12]})")
        snap = ledger.snapshot()
        rows = read_rows(ledger, snap)
        by_run = {r.run: r for r in rows}
        claim, base = by_run.get(p["claim"]["run"]), by_run.get(p["baseline"]["run"])
        if claim is None or base is None:
            raise _fail("the bundled ledger lacks the claim or its baseline")
        if grader_key is not None:
            _check_grader(snap, grader_key, {base.run: (base, base_tasks), claim.run: (claim, claim_tasks)})
        if read_role(claim) != "claim" or read_role(base) != "baseline" or claim.status != "succeeded":
            raise _fail("the bundled ledger does not record the claim as a succeeded final claim on test@0")
        if base.seq >= claim.seq:
            raise _fail("the claim is not the second test read: test@0 must come first")
        try:
            info = read_checkpoint(ws.store, str(p["checkpoint"]["lineage_commit"]).encode())  # type: ignore[arg-type]
            subjects, derived = derive(ws.store, exp, claim, rows, snap, dict(info.get("files") or {}))
        except MonteError as e:
            raise _fail(f"the bundled ledger does not hold what the Statement names: {e.message}") from None
        derived["ledger"]["bundle_sha256"] = p["ledger"]["bundle_sha256"]  # its own bytes' digest, checked
        differs = _differences(p, derived) + (["subject"] if statement["subject"] != subjects else [])
        if differs:
            raise _fail(f"the Statement says what the bundled ledger does not: {', '.join(differs[:8])} "
                        "differ from what the ledger derives (the signer signed another claim)")
        if snap.read(f"{_run_dir(claim.run)}/tasks.jsonl") != claim_tasks or \
                snap.read(f"{_run_dir(base.run)}/tasks.jsonl") != base_tasks:
            raise _fail("the per-item files are not the ones the bundled ledger records")
        if p["test_reads"]["seal"] != 2 or sorted(x.split("/")[-1] for x in p["test_reads"]["runs"]) != \
                sorted([base.run, claim.run]):
            raise _fail(f"the seal holds {p['test_reads']['seal']} test read(s) of this exam content in this cohort "
                        f"({', '.join(p['test_reads']['runs'])}), not test@0 and the claim alone")
        return result.records


def _run_dir(run: str) -> str:
    from monte.ledger.views import run_dir

    return run_dir(run)


def _differences(signed: Any, derived: Any, at: str = "") -> list[str]:
    """The dotted paths where ``signed`` and ``derived`` differ (a whole subtree named once)."""
    if isinstance(signed, dict) and isinstance(derived, dict):
        out: list[str] = []
        for k in sorted(set(signed) | set(derived)):
            path = f"{at}.{k}" if at else str(k)
            if k not in signed or k not in derived:
                out.append(path)
            else:
                out += _differences(signed[k], derived[k], path)
        return out
    return [] if canonical(signed) == canonical(derived) else [at or "predicate"]
