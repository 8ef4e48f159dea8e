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
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypedDict, cast

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
from monte.ledger.predicates import is_admissible, is_test_read

if TYPE_CHECKING:
    from monte.ledger.verify.report import VerifiedLedgers

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


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


# --- export --------------------------------------------------------------------------------------


class ExportedJson(TypedDict):
    """:class:`Exported` as ``monte claim export --json`` prints it."""

    out: str
    statement_sha256: str
    signer: str
    files: dict[str, int]
    card: str | None


@dataclass
class Exported:
    out: Path
    statement_sha256: str
    signer: str  # the allowed_signers line a reader adds for this key
    files: dict[str, int]  # name -> bytes
    card: Path | None

    def to_dict(self) -> ExportedJson:
        return {"out": str(self.out), "statement_sha256": self.statement_sha256, "signer": self.signer,
                "files": self.files, "card": str(self.card) if self.card else None}


def export(ws: Any, ref: str, out: Path, key: Path, *, experiment: str | None = None,
           identity: str | None = None, card: Path | None = None) -> Exported:
    """Write the signed claim bundle of the final claim ``ref`` (``EXP/RUN`` or ``RUN``) to ``out``.

    ``card``: a promoted folder of the claimed checkpoint; its files are proven against the
    subjects and its model card (``README.md``) gains a section naming the Statement's digest and
    how to verify it."""
    from monte.ledger.rules import checkpoints, read_role
    from monte.ledger.seal import Seal, settings_key
    from monte.ledger.views import run_dir
    from monte.runs import find_run
    from monte.runs.lifecycle import read_rows
    from monte.training import card as cards

    if not key.is_file():
        raise error("E_NOT_FOUND", f"no SSH private key at {key}", "pass --key PATH (ssh-keygen -t ed25519 -f PATH)")
    signer_key = public_key_line(key)
    ledger, row = find_run(ws, ref, experiment)
    exp = ledger.experiment
    what = f"{row.kind} {row.split or ''} {row.status}".replace("  ", " ")
    if not (is_test_read(row) and is_admissible(row) and read_role(row) == "claim"):
        raise error("E_REFUSED", f"run {exp}/{row.run} is not a final claim ({what.strip()}"
                    + (f", role {read_role(row)}" if row.split == "test" else "") + ")",
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
    subjects = [{"name": n, "digest": {"sha256": d}} for n, d in sorted(info["files"].items())]
    if card is not None:
        _prove_folder(card, info["files"])
    meas_raw = snap.read("measurement.json") or b""
    meas = json.loads(meas_raw) if meas_raw else {}
    seal = Seal(ws.store, hash_legacy=False)
    seal.know(exp, rows)
    weights = seal.weights_of(exp, row.cohort or "")
    key_ = _seal_key(row, weights)
    reads = [r for r in seal.touches(key_)]
    split_sha = str(row.plan.get("split_sha256") or "")
    disclosure = seal.disclosure(split_sha)
    hops = cards.hops_for(rows, cks, ck)
    ledger_info: dict[str, Any] = {"ref": ledger.ref, "commit": tip.decode(), "bundle": BUNDLE}
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
        "ledger": ledger_info,
    }
    statement = {"_type": STATEMENT_TYPE, "subject": subjects, "predicateType": PREDICATE_TYPE,
                 "predicate": predicate}
    out.mkdir(parents=True, exist_ok=True)
    if any((out / f).exists() for f in FILES):
        raise error("E_REFUSED", f"{out} already holds a claim bundle", "pass --out a new or empty folder")
    (out / "tasks").mkdir(exist_ok=True)
    (out / BASELINE_TASKS).write_bytes(base_tasks)
    (out / CLAIM_TASKS).write_bytes(claim_tasks)
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
    who = identity or _identity(ws)
    if card is not None:
        _write_card(card, digest, out.name, who)
    return Exported(out, digest, f"{who} {signer_key}", {f: (out / f).stat().st_size for f in FILES}, card)


def _seal_key(row: Any, weights: str) -> Any:
    from monte.ledger.seal import SealKey, by_content, settings_key

    # a claim counted under the older rule lists the reads of its own settings, as it was counted
    return SealKey(str(row.plan.get("split_sha256") or ""), settings_key(row.plan.get("settings") or {}), weights,
                   legacy_cohort=row.cohort or "", by_settings=not by_content(row))


def _read(r: Any, tasks: bytes, path: str) -> dict[str, Any]:
    return {"run": r.run, "experiment": r.experiment, "score": r.score, "n": r.n, "role": r.role,
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
    refs = subprocess.run(["git", "--git-dir", str(git_dir), "for-each-ref", "--format=%(refname)", _MONTE_REFS],
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


class VerifiedJson(TypedDict):
    """:class:`Verified` as ``monte claim verify --json`` prints it."""

    statement_sha256: str
    signer: str
    experiment: str
    checkpoint: str
    delta: str
    verdict: str
    test_reads: int
    records: int
    weights: str


@dataclass
class Verified:
    statement_sha256: str
    signer: str
    experiment: str
    checkpoint: str
    delta: str
    verdict: str
    test_reads: int
    records: int
    weights: str  # "checked (N files)" or "not given"

    def to_dict(self) -> VerifiedJson:
        return cast(VerifiedJson, asdict(self))  # the fields in their order, as VerifiedJson spells them


def _fail(what: str, fix: str = "the bundle was changed after it was signed, or was never a monte claim: "
          "get it again from its signer", code: str = "E_VERIFY") -> MonteError:
    return error(code, what, fix)  # type: ignore[arg-type]


def verify(folder: Path, allowed: Path, *, verify_ledgers: Callable[[Any], VerifiedLedgers],
           weights: Path | None = None) -> Verified:
    """Check a claim bundle with nothing but its files (see the module's docstring).
    ``verify_ledgers``: `monte ledger verify --all` of a workspace (``api.ledger_verify``), run on
    the bundled ledger."""
    if not folder.is_dir():
        raise error("E_NOT_FOUND", f"no claim bundle at {folder}", "pass the folder `monte claim export` wrote")
    if not allowed.is_file():
        raise error("E_NOT_FOUND", f"no allowed_signers file at {allowed}",
                    "write one: `PRINCIPAL ssh-ed25519 AAAA...`, the signer's public key from a source you trust")
    missing = [f for f in FILES if not (folder / f).is_file()]
    if missing:
        raise _fail(f"the bundle lacks {', '.join(missing)}")
    payload = (folder / STATEMENT).read_bytes()
    sig = (folder / SIGNATURE).read_bytes()
    try:
        unarmor(sig)
    except ValueError:
        raise _fail(f"{SIGNATURE} is not an SSH signature as ssh-keygen writes it") from None
    signers = signers_of(allowed, sig, payload)
    if not signers:
        raise _fail(f"{STATEMENT}'s signature is not by a key in {allowed} (or the file changed after signing)",
                    "check allowed_signers holds the signer's key; otherwise the bundle was changed: get it again")
    signer = signers[0]
    try:
        statement = json.loads(payload)
        envelope = json.loads((folder / ENVELOPE).read_bytes())
    except (ValueError, UnicodeDecodeError) as e:
        raise _fail(f"a JSON file of the bundle does not parse ({e})") from None
    if canonical(statement) != payload:
        raise _fail(f"{STATEMENT} is not in monte's canonical form")
    _check_envelope(envelope, (folder / ENVELOPE).read_bytes(), payload, allowed, signer)
    if statement.get("_type") != STATEMENT_TYPE or statement.get("predicateType") != PREDICATE_TYPE:
        raise _fail("the Statement is not a monte claim (its _type or predicateType)")
    p: dict[str, Any] = statement["predicate"]
    files = {BASELINE_TASKS: p["baseline"]["tasks"]["sha256"], CLAIM_TASKS: p["claim"]["tasks"]["sha256"],
             BUNDLE: p["ledger"]["bundle_sha256"]}
    for name, digest in files.items():
        if _sha256((folder / name).read_bytes()) != digest:
            raise _fail(f"{name} is not the file the Statement signs (sha256 differs)")
    checked = "not given"
    if weights is not None:
        checked = _check_weights(weights, statement["subject"])
    base = _tasks(folder / BASELINE_TASKS)
    mine = _tasks(folder / CLAIM_TASKS)
    printed = _recompute(base, mine, p, _samples(folder / BASELINE_TASKS), _samples(folder / CLAIM_TASKS))
    records = _replay(folder / BUNDLE, p, statement["subject"], (folder / BASELINE_TASKS).read_bytes(),
                      (folder / CLAIM_TASKS).read_bytes(), verify_ledgers)
    return Verified(_sha256(payload), signer, p["experiment"], p["checkpoint"]["ref"], printed, str(p["verdict"]),
                    int(p["test_reads"]["seal"]), records, checked)


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


def _check_weights(folder: Path, subjects: Sequence[dict[str, Any]]) -> str:
    from monte.hashing import sha256_file

    for s in subjects:
        p = folder / str(s["name"])
        if not p.is_file():
            raise _fail(f"the weights folder {folder} lacks {s['name']}", "pass --weights the claimed model's folder",
                        code="E_INTEGRITY")
        if sha256_file(p) != s["digest"]["sha256"]:
            raise _fail(f"{p} is not the claimed file (sha256 differs)", "these are not the weights the claim signs",
                        code="E_INTEGRITY")
    return f"checked ({len(subjects)} files)"


def _tasks(path: Path) -> dict[str, float]:
    from monte import jsonl

    try:
        return {str(t["id"]): float(t["score"]) for t in jsonl.load_lines(path.read_bytes())}
    except (ValueError, KeyError, TypeError, UnicodeDecodeError):
        raise _fail(f"{path.name} is not a per-item results file") from None


def _samples(path: Path) -> dict[str, list[float]] | None:
    """K > 1 (issue 33): each item's sample scores, as the per-item file holds them."""
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


def _replay(bundle: Path, p: dict[str, Any], subjects: Sequence[dict[str, Any]], base_tasks: bytes,
            claim_tasks: bytes, verify_ledgers: Callable[[Any], VerifiedLedgers]) -> int:
    """The bundled ledger, fetched into an empty bare repository and verified there."""
    from monte.ledger.experiment import Ledger
    from monte.ledger.lineage import read_checkpoint
    from monte.ledger.rules import read_role
    from monte.ledger.seal import Seal
    from monte.ledger.views import run_dir
    from monte.workspace import open_git

    with tempfile.TemporaryDirectory(prefix="monte-claim-") as tmp:
        repo = Path(tmp) / "ledger.git"
        env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
        for cmd in (["git", "init", "-q", "--bare", str(repo)],
                    ["git", "-C", str(repo), "bundle", "verify", "-q", str(bundle)],
                    ["git", "-C", str(repo), "fetch", "-q", str(bundle), "refs/heads/monte/*:refs/heads/monte/*"]):
            r = subprocess.run(cmd, capture_output=True, text=True, env=env)
            if r.returncode != 0:
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
        rows = {r.run: r for r in ledger.rows(snap)}
        claim, base = rows.get(p["claim"]["run"]), rows.get(p["baseline"]["run"])
        if claim is None or base is None:
            raise _fail("the bundled ledger lacks the claim or its baseline")
        if snap.read(f"{run_dir(claim.run)}/tasks.jsonl") != claim_tasks or \
                snap.read(f"{run_dir(base.run)}/tasks.jsonl") != base_tasks:
            raise _fail("the per-item files are not the ones the bundled ledger records")
        if read_role(claim) != "claim" or read_role(base) != "baseline" or claim.status != "succeeded":
            raise _fail("the bundled ledger does not record the claim as a succeeded final claim on test@0")
        if (claim.delta or {}).get("baseline") != base.run or claim.cohort != p["cohort"] or claim.score != \
                p["claim"]["score"]:
            raise _fail("the bundled claim row is not the one the Statement describes")
        seal = Seal(ws.store, hash_legacy=False)
        reads = seal.touches(_seal_key(claim, seal.weights_of(exp, claim.cohort or "")))
        runs = [r.run for r in reads]
        if sorted(runs) != sorted([base.run, claim.run]) or len(runs) != int(p["test_reads"]["seal"]):
            raise _fail(f"the seal holds {len(runs)} test read(s) of this exam content in this cohort "
                        f"({', '.join(f'{r.experiment}/{r.run}' for r in reads)}), not test@0 and the claim alone")
        if base.seq >= claim.seq:
            raise _fail("the claim is not the second test read: test@0 must come first")
        ck = p["checkpoint"]
        info = read_checkpoint(ws.store, str(ck["lineage_commit"]).encode())  # type: ignore[arg-type]
        if {s["name"]: s["digest"]["sha256"] for s in subjects} != info.get("files"):
            raise _fail("the Statement's subjects are not the files the checkpoint's lineage commit records")
        return int(result["records"])
