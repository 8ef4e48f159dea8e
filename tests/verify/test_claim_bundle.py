"""A final claim exported as a signed bundle, checked with its files alone.

The honest ledger (tests/verify/conftest.py) gets its final claim through monte's own API; the
bundle is exported with a real ed25519 key made by ``ssh-keygen``, checked by ``monte claim verify``
and, for the signature, by ``ssh-keygen -Y verify`` alone. Every file of the bundle is then
mutated one byte at a time, a third test read is spliced into the bundled ledger with git
plumbing, and a stranger's key signs: each must be refused.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from monte import claim
from tests.verify.forgehelp import Honest, g, ledger_ref
from tests.verify.test_ci_workflows import light  # noqa: F401  (the light install fixture)
from tests.verify.test_forged_histories import _honest_claim

pytestmark = pytest.mark.skipif(shutil.which("ssh-keygen") is None, reason="needs OpenSSH's ssh-keygen")


def _key(tmp: Path, name: str) -> Path:
    key = tmp / name
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", name, "-f", str(key)], check=True)
    return key


def _allowed(tmp: Path, who: str, key: Path, name: str = "allowed_signers") -> Path:
    pub = " ".join((key.with_suffix(".pub") if key.with_suffix(".pub").exists() else Path(f"{key}.pub"))
                   .read_text().split()[:2])
    path = tmp / name
    path.write_text(f"{who} {pub}\n")
    return path


def _claim_run(h: Honest) -> str:
    from monte import api

    _honest_claim(h)
    rows = api.status(experiment="exp")["rows"]
    return next(r["run"] for r in rows if r["what"].endswith("/test") and r["role"] == "claim")


@pytest.fixture
def exported(honest: Honest, monte, tmp_path: Path):
    run = _claim_run(honest)
    key = _key(tmp_path, "signer")
    out = tmp_path / "claim"
    r = monte("claim", "export", f"exp/{run}", "--out", str(out), "--key", str(key), "--identity",
              "alice@example.org", "--json")
    assert r.code == 0, r.out + r.err
    return out, _allowed(tmp_path, "alice@example.org", key), run, r.json()


def test_the_genuine_bundle_verifies_with_monte_and_with_ssh_keygen_alone(exported, monte, tmp_path: Path) -> None:
    out, allowed, run, made = exported
    assert sorted(made["files"]) == sorted(claim.FILES)
    assert sum(made["files"].values()) < 5_000_000  # the goal for a claim without weights
    r = monte("claim", "verify", str(out), "--allowed-signers", str(allowed), "--json")
    assert r.code == 0, r.out + r.err
    v = r.json()
    assert v["signer"] == "alice@example.org" and v["test_reads"] == 2 and v["verdict"] in ("ok", "STRIKE")
    statement = json.loads((out / claim.STATEMENT).read_bytes())
    p = statement["predicate"]
    assert p["claim"]["run"] == run and p["test_reads"] == {**p["test_reads"], "seal": 2}
    assert statement["_type"] == "https://in-toto.io/Statement/v1" and statement["subject"]
    assert v["delta"] == p["delta"]["printed"]
    # the signature with no monte at all: ssh-keygen reads the bytes and the .sig beside them
    with (out / claim.STATEMENT).open("rb") as f:
        r2 = subprocess.run(["ssh-keygen", "-Y", "verify", "-f", str(allowed), "-I", "alice@example.org",
                             "-n", claim.NAMESPACE, "-s", str(out / claim.SIGNATURE)], stdin=f, capture_output=True)
    assert r2.returncode == 0, r2.stderr
    # the human form says what was checked
    r3 = monte("claim", "verify", str(out), "--allowed-signers", str(allowed))
    assert r3.code == 0 and r3.out.startswith("ok: exp final claim on "), r3.out


@pytest.mark.parametrize("name", claim.FILES)
def test_one_changed_byte_in_any_file_is_refused(exported, monte, name: str) -> None:
    out, allowed, _, _ = exported
    path = out / name
    data = bytearray(path.read_bytes())
    for at in sorted({0, len(data) // 2, len(data) - 1}):  # the first, a middle and the last byte
        mutated = bytearray(data)
        mutated[at] ^= 0x01
        path.write_bytes(bytes(mutated))
        r = monte("claim", "verify", str(out), "--allowed-signers", str(allowed), "--json")
        assert r.code == 5 and r.json()["error"]["code"] == "E_VERIFY", (name, at, r.out)
    path.write_bytes(bytes(data))
    assert monte("claim", "verify", str(out), "--allowed-signers", str(allowed)).code == 0


def test_a_stranger_s_signature_is_refused(exported, monte, tmp_path: Path) -> None:
    out, _, _, _ = exported
    other = _key(tmp_path, "stranger")
    wrong = _allowed(tmp_path, "alice@example.org", other, "wrong_signers")
    r = monte("claim", "verify", str(out), "--allowed-signers", str(wrong), "--json")
    assert r.code == 5 and r.json()["error"]["code"] == "E_VERIFY" and "signature" in r.json()["error"]["message"], r.out
    # re-signed by the stranger: every signature verifies for the stranger, who is not trusted
    statement = (out / claim.STATEMENT).read_bytes()
    (out / claim.SIGNATURE).write_bytes(claim.sign_bytes(other, statement))
    r = monte("claim", "verify", str(out), "--allowed-signers", str(_allowed(tmp_path, "alice@example.org",
                                                                         Path(f"{out}/../signer"))), "--json")
    assert r.code == 5 and r.json()["error"]["code"] == "E_VERIFY", r.out


def test_per_item_files_that_do_not_reproduce_the_delta_are_refused(exported, monte, tmp_path: Path) -> None:
    """A forger who edits a per-item file and re-signs with the trusted key (the signer lying):
    the recomputed delta no longer matches, or the bundled ledger does not hold that file."""
    out, allowed, _, _ = exported
    key = tmp_path / "signer"
    lines = (out / claim.CLAIM_TASKS).read_bytes().split(b"\n")
    first = json.loads(lines[0])
    first["score"] = 1.0 - float(first["score"])
    lines[0] = json.dumps(first, separators=(",", ":")).encode()
    (out / claim.CLAIM_TASKS).write_bytes(b"\n".join(lines))
    statement = json.loads((out / claim.STATEMENT).read_bytes())
    statement["predicate"]["claim"]["tasks"]["sha256"] = claim._sha256((out / claim.CLAIM_TASKS).read_bytes())
    _resign(out, statement, key)
    r = monte("claim", "verify", str(out), "--allowed-signers", str(allowed), "--json")
    assert r.code == 5 and r.json()["error"]["code"] == "E_VERIFY", r.out
    assert "per-item files give" in r.json()["error"]["message"] or "scores" in r.json()["error"]["message"], r.out


def _resign(out: Path, statement: dict, key: Path) -> None:
    payload = claim.canonical(statement)
    (out / claim.STATEMENT).write_bytes(payload)
    (out / claim.SIGNATURE).write_bytes(claim.sign_bytes(key, payload))
    pub = claim.public_key_line(key)
    env = {"payloadType": claim.PAYLOAD_TYPE, "payload": __import__("base64").b64encode(payload).decode(),
           "signatures": [{"keyid": claim.fingerprint(pub), "sig": __import__("base64").b64encode(
               claim.unarmor(claim.sign_bytes(key, claim.pae(claim.PAYLOAD_TYPE, payload)))).decode()}]}
    (out / claim.ENVELOPE).write_bytes(claim.canonical(env))


def test_a_third_test_read_spliced_into_the_bundled_ledger_is_refused(exported, monte, honest: Honest,
                                                                      tmp_path: Path) -> None:
    """The signer's own repository gains a third test read written with git plumbing (a copy of
    the claim row under a new run id), and a bundle is re-made and re-signed from it: the replay
    of the bundled ledger refuses (the verify rules), whoever signed."""
    from tests.verify.forgehelp import update_ref
    from tests.verify.test_forged_histories import _started, _target, _test_read

    out, allowed, run, _ = exported
    key = tmp_path / "signer"
    row = _test_read(honest, _target(honest, honest["other"], 50 if honest["other"] == honest["a"] else 100),
                     role="claim")
    forged = _started(honest, row, "eval parity/test started")
    assert update_ref(honest.path, ledger_ref(), forged.sha, hooks=False).returncode == 0
    (out / claim.BUNDLE).unlink()
    claim._bundle(honest.path / ".git", out / claim.BUNDLE)
    statement = json.loads((out / claim.STATEMENT).read_bytes())
    statement["predicate"]["ledger"]["bundle_sha256"] = claim._sha256((out / claim.BUNDLE).read_bytes())
    statement["predicate"]["ledger"]["commit"] = g(honest.path, "rev-parse", ledger_ref())
    _resign(out, statement, key)
    r = monte("claim", "verify", str(out), "--allowed-signers", str(allowed), "--json")
    assert r.code == 5 and r.json()["error"]["code"] == "E_VERIFY", r.out
    assert "bundled ledger" in r.json()["error"]["message"] or "seal" in r.json()["error"]["message"], r.out


def test_weights_are_checked_against_the_subjects(exported, monte, honest: Honest, tmp_path: Path) -> None:
    out, allowed, _, _ = exported
    statement = json.loads((out / claim.STATEMENT).read_bytes())
    ck = statement["predicate"]["checkpoint"]["ref"]
    dest = tmp_path / "promoted"
    r = monte("promote", ck, "--dest", str(dest), "--confirm", ck)
    assert r.code == 0, r.out + r.err
    r = monte("claim", "verify", str(out), "--allowed-signers", str(allowed), "--weights", str(dest), "--json")
    assert r.code == 0 and r.json()["weights"].startswith("checked"), r.out
    weight = next(dest / s["name"] for s in statement["subject"] if s["name"].endswith(".safetensors"))
    data = bytearray(weight.read_bytes())
    data[len(data) // 2] ^= 0x01
    weight.write_bytes(bytes(data))
    r = monte("claim", "verify", str(out), "--allowed-signers", str(allowed), "--weights", str(dest), "--json")
    assert r.code == 5 and r.json()["error"]["code"] == "E_INTEGRITY", r.out


def test_the_card_names_the_claim(honest: Honest, monte, tmp_path: Path) -> None:
    run = _claim_run(honest)
    from monte import api

    row = api.show(ref=f"exp/{run}")
    ck = row["model"].split("/", 1)[1]
    dest = tmp_path / "promoted"
    assert monte("promote", ck, "--dest", str(dest), "--confirm", ck).code == 0
    key = _key(tmp_path, "signer")
    r = monte("claim", "export", run, "--out", str(tmp_path / "c"), "--key", str(key), "--card", str(dest), "--json")
    assert r.code == 0, r.out + r.err
    card = (dest / "README.md").read_text()
    assert "## Claim" in card and r.json()["statement_sha256"] in card and "monte claim verify" in card


def test_only_a_final_claim_exports(honest: Honest, monte, tmp_path: Path) -> None:
    from monte import api

    key = _key(tmp_path, "signer")
    rows = api.status(experiment="exp")["rows"]
    baseline = next(r["run"] for r in rows if r["what"].endswith("/test") and r["role"] == "baseline")
    r = monte("claim", "export", baseline, "--out", str(tmp_path / "c"), "--key", str(key), "--json")
    assert r.code == 3 and r.json()["error"]["code"] == "E_REFUSED" and "not a final claim" in r.json()["error"]["message"], r.out
    assert not (tmp_path / "c").exists()


def test_verify_imports_nothing_heavy(exported, tmp_path: Path) -> None:
    """`claim verify` is for a reader with the light install: no torch, transformers, dvc..."""
    import sys

    out, allowed, _, _ = exported
    code = ("import sys; from monte.cli.main import main\n"
            "try:\n    main(['claim','verify',sys.argv[1],'--allowed-signers',sys.argv[2]])\n"
            "except SystemExit as e:\n    assert not e.code, e.code\n"
            "heavy = {'torch','transformers','trl','dvc','fabric','lm_eval'} & set(sys.modules)\n"
            "assert not heavy, heavy")
    r = subprocess.run([sys.executable, "-c", code, str(out), str(allowed)], capture_output=True, text=True,
                       cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr


def test_every_byte_of_a_signature_file_counts(tmp_path: Path) -> None:
    """ssh-keygen reads an armored signature leniently (a changed final newline still verifies):
    monte takes only the exact armor ssh-keygen writes, so no byte of a ``.sig`` goes unchecked."""
    key = _key(tmp_path, "signer")
    armored = claim.sign_bytes(key, b"a statement")
    blob = claim.unarmor(armored)
    assert claim.armor(blob) == armored
    for at in range(len(armored)):
        mutated = bytearray(armored)
        mutated[at] ^= 0x01
        try:
            assert claim.unarmor(bytes(mutated)) != blob, at
        except ValueError:
            pass


def test_verify_runs_in_the_light_install(exported, light, tmp_path: Path) -> None:  # noqa: F811
    """A reader with `pip install monte` only (a real virtualenv of the light install: no torch,
    no transformers, no DVC), outside any repository."""
    out, allowed, _, _ = exported
    probe = subprocess.run([str(light.python), "-c", "import importlib.util as u; print(u.find_spec('torch'))"],
                           capture_output=True, text=True)
    assert probe.stdout.strip() == "None", probe.stdout  # truly the light install
    r = subprocess.run([str(light.python), "-m", "monte", "claim", "verify", str(out), "--allowed-signers",
                        str(allowed)], capture_output=True, text=True, cwd=tmp_path)
    assert r.returncode == 0 and r.stdout.startswith("ok: "), r.stdout + r.stderr


# --- issue 43: every signed field derived again; shapes; the signer's key; relative paths ---------


def _set(obj: dict, path: str, value: object) -> None:
    *head, last = path.split(".")
    for k in head:
        obj = obj[k]
    if value is _DROP:
        del obj[last]
    else:
        obj[last] = value


_DROP = object()

#: case 6: a Statement re-signed by the signer's own key, each with one field the bundle does not derive
LIES = {
    "repository reads": ("predicate.test_reads.repository", 1),
    "repository cohorts": ("predicate.test_reads.repository_cohorts", 9),
    "temperature": ("predicate.measurement.content.eval.temperature", 0.7),
    "base model": ("predicate.base.model", "/elsewhere/another-base"),
    "base weights": ("predicate.base.weights", "0" * 64),
    "split hash": ("predicate.exam.test_split_sha256", "0" * 64),
    "settings": ("predicate.exam.settings_key", "0" * 16),
    "lineage": ("predicate.lineage", []),
    "cohort": ("predicate.cohort", "000000000000"),
    "recovered": ("predicate.claim.recovered", True),
    "baseline score": ("predicate.baseline.experiment", "another"),
    "ledger ref": ("predicate.ledger.ref", "refs/heads/monte/another/ledger"),
}


@pytest.mark.parametrize("name", list(LIES))
def test_a_resigned_statement_with_a_field_the_bundle_does_not_derive_is_refused(
        exported, monte, tmp_path: Path, name: str) -> None:
    out, allowed, _, _ = exported
    path, value = LIES[name]
    statement = json.loads((out / claim.STATEMENT).read_bytes())
    _set(statement, path, value)
    _resign(out, statement, tmp_path / "signer")
    r = monte("claim", "verify", str(out), "--allowed-signers", str(allowed), "--json")
    assert r.code == 5 and r.json()["error"]["code"] == "E_VERIFY", (name, r.out)
    assert path.split(".", 1)[1] in r.json()["error"]["message"], (name, r.out)


def test_another_monte_version_is_refused_with_the_version_that_signed_it(exported, monte, tmp_path: Path) -> None:
    out, allowed, _, _ = exported
    statement = json.loads((out / claim.STATEMENT).read_bytes())
    statement["predicate"]["monte_version"] = "9.9.9"
    _resign(out, statement, tmp_path / "signer")
    r = monte("claim", "verify", str(out), "--allowed-signers", str(allowed), "--json")
    assert r.code == 5 and "monte 9.9.9" in r.json()["error"]["message"], r.out
    assert "monte==9.9.9" in r.json()["error"]["fix"], r.out


#: case 8: validly signed, malformed: each was E_INTERNAL (exit 1) on main
SHAPES = {
    "no baseline": ("predicate.baseline", _DROP),
    "seal not a number": ("predicate.test_reads.seal", "x"),
    "subject a number": ("subject", 5),
    "bad lineage commit": ("predicate.checkpoint.lineage_commit", "not-a-commit"),
    "claim tasks null": ("predicate.claim.tasks", None),
    "ledger commit null": ("predicate.ledger.commit", None),
    "predicate a list": ("predicate", []),
}


@pytest.mark.parametrize("name", list(SHAPES))
def test_a_malformed_statement_is_refused_by_name(exported, monte, tmp_path: Path, name: str) -> None:
    out, allowed, _, _ = exported
    path, value = SHAPES[name]
    statement = json.loads((out / claim.STATEMENT).read_bytes())
    _set(statement, path, value)
    _resign(out, statement, tmp_path / "signer")
    r = monte("claim", "verify", str(out), "--allowed-signers", str(allowed), "--json")
    assert r.code != 1 and r.json()["error"]["code"] == "E_BAD_INPUT", (name, r.out)
    assert "malformed" in r.json()["error"]["message"], (name, r.out)


def test_verify_prints_the_repository_reads_and_the_key_and_takes_signer(exported, monte, tmp_path: Path) -> None:
    out, allowed, _, _ = exported
    fpr = subprocess.run(["ssh-keygen", "-l", "-f", str(tmp_path / "signer.pub")], capture_output=True,
                         text=True, check=True).stdout.split()[1]
    r = monte("claim", "verify", str(out), "--allowed-signers", str(allowed), "--json")
    v = r.json()
    assert r.code == 0 and v["fingerprint"] == fpr, r.out
    p = json.loads((out / claim.STATEMENT).read_bytes())["predicate"]
    assert v["repository_reads"] == p["test_reads"]["repository"] >= 2 and v["recovered"] == [], r.out
    human = monte("claim", "verify", str(out), "--allowed-signers", str(allowed))
    assert fpr in human.out and f"read {v['repository_reads']} time(s) in the repository" in human.out, human.out
    assert monte("claim", "verify", str(out), "--allowed-signers", str(allowed), "--signer", fpr).code == 0
    other = subprocess.run(["ssh-keygen", "-l", "-f", str(_key(tmp_path, "other")) + ".pub"], capture_output=True,
                           text=True, check=True).stdout.split()[1]
    r = monte("claim", "verify", str(out), "--allowed-signers", str(allowed), "--signer", other, "--json")
    assert r.code == 5 and other in r.json()["error"]["message"] and fpr in r.json()["error"]["message"], r.out


def test_relative_paths_verify(exported, monte, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Case 7: `monte claim verify claim --allowed-signers allowed_signers`, as docs/claims.md
    writes it, refused on main: git ran the bundle's relative path from another folder."""
    out, allowed, _, _ = exported
    monkeypatch.chdir(out.parent)
    r = monte("claim", "verify", out.name, "--allowed-signers", allowed.name, "--json")
    assert r.code == 0, r.out


@pytest.mark.parametrize("identity", ["alice@example.org\nbob ssh-ed25519 AAAA", "two words", "a,b", "tab\there"])
def test_an_identity_that_is_not_one_principal_is_refused(honest: Honest, monte, tmp_path: Path,
                                                          identity: str) -> None:
    """Case 9: a newline in --identity landed in the card's allowed_signers line."""
    run = _claim_run(honest)
    key = _key(tmp_path, "signer")
    r = monte("claim", "export", f"exp/{run}", "--out", str(tmp_path / "c"), "--key", str(key), "--identity",
              identity, "--json")
    assert r.code != 1 and r.json()["error"]["code"] == "E_BAD_INPUT" and "--identity" in r.json()["error"]["fix"], r.out
    assert not (tmp_path / "c").exists()
