"""Hostile input, over everything a user hands monte (``fuzz_targets.py`` says what and which
properties): a short hypothesis run per target, the inputs that broke monte before it was fixed,
path traversal and symlinks by hand, and a few commands through a real process with argv bytes
that are not UTF-8. The long campaign is ``bench/fuzz_campaign.py``.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from monte.errors import CODES
from tests.reliability.fuzz_targets import TARGETS, YAML_NASTY, Case, HypothesisDraw, Sandbox, _md5

EXAMPLES = int(os.environ.get("MONTE_FUZZ_EXAMPLES", "30"))


@pytest.fixture
def sandbox(repo: Path, base_model: Path) -> Sandbox:
    return Sandbox.build(repo, base_model)


def _ok(sb: Sandbox, case: Case) -> None:
    problems = sb.execute(case)
    assert not problems, "\n".join(problems) + "\nreproduce with Case.from_dict(" + json.dumps(case.to_dict()) + ")"


@pytest.mark.parametrize("target", sorted(TARGETS))
def test_hostile_input_is_refused_cleanly(target: str, sandbox: Sandbox) -> None:
    @settings(max_examples=EXAMPLES, deadline=None, database=None, derandomize=True,  # CI is reproducible; bench/fuzz_campaign.py explores
              suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow,
                                     HealthCheck.data_too_large, HealthCheck.filter_too_much])
    @given(st.data())
    def run(data: st.DataObject) -> None:
        _ok(sandbox, TARGETS[target](HypothesisDraw(data), sandbox))

    run()
    outcomes = sandbox.outcomes[target]
    assert sum(outcomes.values()) >= EXAMPLES
    assert not any(k.startswith("1") for k in outcomes), outcomes


# --- the inputs that broke monte, kept as regressions ------------------------------------------


def test_run_references_that_crashed(sandbox: Sandbox) -> None:
    """A one-character run id (IndexError in the tree's fan-out), a step in unicode digits
    (``'²'.isdigit()`` but ``int('²')`` fails), an empty experiment: all refusals now."""
    for ref in ("a", "exp/a", "/a", f"exp/{sandbox.run}@²", f"{sandbox.run}/٣", f"/{sandbox.run}", "é",
                f"exp/{sandbox.run}@٣"):
        for cmd in (["show", ref], ["logs", ref], ["stop", ref],
                    ["promote", ref, "--dest", str(sandbox.inputs / "dest"), "--confirm", ref],
                    ["eval", "--checkpoint", ref, "-e", "exp", "--dry-run"], ["nominate", ref, "-e", "exp"]):
            _ok(sandbox, Case("refs", [*cmd, "--json"], readonly=True, allowed=("inputs/",)))
    r = Case("refs", ["show", f"exp/{sandbox.run}@50", "--json"], readonly=True)
    _ok(sandbox, r)


def test_urls_that_crashed(sandbox: Sandbox) -> None:
    """``~nosuchuser`` (RuntimeError), a NUL byte, a non-ASCII Vault folder (DVC's config writer
    is ASCII-only: it failed half-way, after .monte.yaml was already rewritten)."""
    before = (sandbox.repo / ".monte.yaml").read_bytes(), (sandbox.repo / ".dvc/config").read_bytes()
    for setting, url in (("bucket", "a\x00b"), ("vault", "/tmp/josé"),
                         ("vault", "\u202e/"), ("bucket", "gs://b\nvault: /x"), ("bucket", "\udcff"),
                         ("vault", "gs://[")):  # DVC's ConfigError, after .monte.yaml was rewritten
        case = Case("config_set", ["config", "set", setting, url, "--json"])
        _ok(sandbox, case)
        assert ((sandbox.repo / ".monte.yaml").read_bytes(), (sandbox.repo / ".dvc/config").read_bytes()) == before
    for setting, url in (("bucket", "/tmp/josé"), ("vault", "~nosuchuser-monte/x")):  # as typed, like a shell
        _ok(sandbox, Case("config_set", ["config", "set", setting, url, "--json"],
                          allowed=("repo/.monte.yaml", "repo/.dvc/config"),
                          restore=("repo/.monte.yaml", "repo/.dvc/config")))


@pytest.mark.parametrize("text", [b"\xca\xfe: 1\n", b"{a: " * 600 + b"1" + b"}" * 600, YAML_NASTY[0]],
                         ids=["not-utf8", "deep", "alias-bomb"])
def test_config_files_that_crashed(sandbox: Sandbox, text: bytes) -> None:
    for argv in (["config", "--json"], ["status", "--json"], ["config", "set", "bucket", "gs://b", "--json"]):
        writes = "set" in argv
        _ok(sandbox, Case("config_file", argv, files={"repo/.monte.yaml": text}, readonly=not writes,
                          allowed=("repo/.monte.yaml",) if writes else (),
                          restore=("repo/.monte.yaml", "repo/.dvc/config")))


def test_recipes_that_crashed_or_hung(sandbox: Sandbox) -> None:
    """A YAML alias bomb took 19 s at 7 levels (every level x9: copied before validation); deep
    nesting raised RecursionError."""
    for text in (YAML_NASTY[0], YAML_NASTY[0].replace(b"h: [", b"h0: &h [").replace(b"algorithm", b"i: [*h, *h]\nalgorithm"),
                 b"[" * 600 + b"]" * 600, b"algorithm: sft\nx: " + b"[" * 600 + b"]" * 600 + b"\n"):
        t = time.monotonic()
        _ok(sandbox, Case("recipe", ["train", "--recipe", str(sandbox.inputs / "r.yaml"), "--source", "rows",
                                     "--smoke", "-e", "exp", "--dry-run", "--json"],
                          files={"inputs/r.yaml": text}, readonly=True))
        assert time.monotonic() - t < 10


def test_deeply_nested_jsonl_is_bad_input(sandbox: Sandbox) -> None:
    case = Case("dataset", ["dataset", "add", "deep", "--from-file", str(sandbox.inputs / "rows.jsonl"), "--json"],
                files={"inputs/rows.jsonl": b"[" * 5000 + b"]" * 5000 + b"\n"})
    _ok(sandbox, case)
    assert '"E_BAD_INPUT"' in sandbox.last.out


def test_an_experiment_named_vault_is_refused(sandbox: Sandbox) -> None:
    """refs/heads/monte/vault is a ref: monte/vault/ledger cannot exist (NotADirectoryError)."""
    for name in ("vault", "Vault"):
        _ok(sandbox, Case("names", ["experiment", "init", name, "--eval", "parity", "--json"]))


# --- path traversal: names, the Vault's listing, a manifest's exams, symlinks --------------------


def _vault_env(sb: Sandbox, name: str, content: dict[str, bytes], listing: list[dict[str, str]],
               exams: dict[str, dict[str, str]] | None = None, kind: str = "environment") -> dict[str, bytes]:
    """The objects a local-folder Vault holds for environment (or dataset) ``name``: the
    manifest (over ``content``), its claim, the DVC ``.dir`` listing (``listing``, hostile or
    not), the bytes."""
    from monte.manifest import FileEntry, Manifest

    m = Manifest.model_construct(
        schema_version=1, kind=kind, name=name, frozen_at="2026-01-01T00:00:00Z",
        files={p: FileEntry(sha256=hashlib.sha256(b).hexdigest(), size=len(b)) for p, b in content.items()},
        provenance={"source": "catalog"}, env_kind="eval-only" if kind == "environment" else None,
        form="benchmark" if kind == "environment" else None, exams=exams or {},
        curriculum=None, grader=None, dataset_kind=None, columns=None, rows=None)
    files = {}
    for b in content.values():
        files[f"vault/files/md5/{_md5(b)[:2]}/{_md5(b)[2:]}"] = b
    raw = json.dumps(listing).encode()
    d = _md5(raw)
    files[f"vault/files/md5/{d[:2]}/{d[2:]}.dir"] = raw
    doc = {"manifest": json.loads(json.dumps(m.model_dump(mode="json"))),
           "dvc": {"md5": d + ".dir", "nfiles": len(listing), "size": 1, "path": f"{kind}s/{name}"}}
    files[f"vault/monte/manifests/{kind}s/{name}.json"] = json.dumps(doc).encode()
    files[f"vault/monte/claims/{kind}s/{name}.json"] = json.dumps({"fingerprint": m.fingerprint}).encode()
    return files


@pytest.mark.parametrize("relpath", ["../../../../escaped", "../../../../../sentinel/keep.txt", "/tmp/escaped-abs",
                                     "a/../../../../../escaped"])
def test_a_vault_listing_that_escapes_is_refused_before_a_byte_lands(sandbox: Sandbox, relpath: str) -> None:
    """The bug: DVC checks a fetched folder out by its ``.dir`` listing, and a listing entry
    ``../../../../x`` was written outside the staging folder (into the repository) before any
    hash was proven, and the install then succeeded."""
    good = {"a.txt": b"pwned\n"}
    listing = [{"md5": _md5(b"pwned\n"), "relpath": "a.txt"}, {"md5": _md5(b"pwned\n"), "relpath": relpath}]
    case = Case("manifest", ["env", "install", "evil", "--json"], env={"MONTE_VAULT": str(sandbox.vault)},
                files=_vault_env(sandbox, "evil", good, listing))
    _ok(sandbox, case)
    out = json.loads(sandbox.last.out)
    assert out["error"]["code"] == "E_UNSAFE_PATH", out
    assert not (sandbox.data_root / "environments" / "evil").exists()


def test_a_vault_listing_with_a_path_for_an_md5_is_refused(sandbox: Sandbox) -> None:
    listing = [{"md5": "ab/../../../../../../escaped", "relpath": "a.txt"}]
    case = Case("manifest", ["env", "install", "evil2", "--json"], env={"MONTE_VAULT": str(sandbox.vault)},
                files=_vault_env(sandbox, "evil2", {"a.txt": b"x"}, listing))
    _ok(sandbox, case)
    assert json.loads(sandbox.last.out)["error"]["code"] == "E_INTEGRITY"


def test_a_clean_vault_fetch_still_works(sandbox: Sandbox) -> None:
    good = {"exams/parity/dev.jsonl": b'{"id": "1", "prompt": "p 1 =", "answer": "odd"}\n'}
    listing = [{"md5": _md5(b), "relpath": p} for p, b in good.items()]
    case = Case("manifest", ["env", "install", "fine", "--json"], env={"MONTE_VAULT": str(sandbox.vault)},
                files=_vault_env(sandbox, "fine", good, listing, exams={"parity": {"dev": "exams/parity/dev.jsonl"}}))
    _ok(sandbox, case)
    assert (sandbox.data_root / "environments" / "fine" / "exams/parity/dev.jsonl").read_bytes() == next(iter(good.values()))


@pytest.mark.parametrize("exams,curriculum", [({"parity": {"dev": "/etc/passwd"}}, None),
                                              ({"parity": {"dev": "../../../../etc/passwd"}}, None),
                                              ({"parity": {"dev": "not-listed.jsonl"}}, None),
                                              ({}, "/etc/passwd")])
def test_a_manifest_whose_exams_read_outside_its_files_is_refused(sandbox: Sandbox, exams: dict[str, dict[str, str]],
                                                                   curriculum: str | None) -> None:
    """Before: such a manifest installed (its files proved fine) and then `experiment init`
    hashed /etc/passwd as a split, or crashed (KeyError) on a split its files did not list."""
    good = {"a.txt": b"x\n"}
    files = _vault_env(sandbox, "peek", good, [{"md5": _md5(b"x\n"), "relpath": "a.txt"}], exams=exams)
    if curriculum:
        key = "vault/monte/manifests/environments/peek.json"
        doc = json.loads(files[key])
        doc["manifest"]["curriculum"] = curriculum
        files[key] = json.dumps(doc).encode()
    case = Case("manifest", ["env", "install", "peek", "--json"], env={"MONTE_VAULT": str(sandbox.vault)}, files=files)
    _ok(sandbox, case)
    assert json.loads(sandbox.last.out)["error"]["code"] in ("E_UNSAFE_PATH", "E_BAD_INPUT")


def test_names_that_traverse_are_refused_everywhere(sandbox: Sandbox) -> None:
    # "ok\n": the name pattern ended in "$", which matches before a trailing newline (found by
    # the campaign: `experiment init 'exp\n'` reached git as a ref name, E_INTERNAL)
    for name in ("../x", "../../sentinel", "/tmp/x", "..", ".", "a/b", "a\\b", "~", "-x", "x" * 65, "a.lock", "é",
                 "ok\n", "ok\r", "ok\n/../x"):
        for cmd in (["experiment", "init", name, "--eval", "parity"], ["env", "add", "--benchmark", "parity", "--as", name],
                    ["dataset", "add", name, "--from-file", str(sandbox.inputs / "good.jsonl")],
                    ["env", "install", name], ["dataset", "show", name], ["show", f"{name}/{sandbox.run}"],
                    ["experiment", "init", "ok1", "--eval", name]):
            _ok(sandbox, Case("names", [*cmd, "--json"]))
            assert sandbox.last.code != 0, (cmd, sandbox.last.out)


def test_symlinks_inside_a_frozen_folder_are_refused(sandbox: Sandbox) -> None:
    """A frozen file swapped for a symlink to a file outside, or a frozen folder swapped for a
    symlink to a folder outside: every reader refuses (E_UNSAFE_PATH), nothing is written."""
    env = sandbox.data_root / "environments" / "parity"
    dev = env / "exams" / "parity" / "dev.jsonl"
    outside = sandbox.sentinel / "dev.jsonl"
    outside.write_bytes(dev.read_bytes())  # the same bytes: only the link itself is wrong
    dev.unlink()
    dev.symlink_to(outside)
    for argv in (["env", "install", "parity"], ["experiment", "init", "e1", "--eval", "parity"]):
        case = Case("symlink", [*argv, "--json"])
        _ok(sandbox, case)
        assert json.loads(sandbox.last.out)["error"]["code"] == "E_UNSAFE_PATH", (argv, sandbox.last.out)
    # an eval reads the split by its proven sha256 (the same bytes here): it may, but writes nothing
    _ok(sandbox, Case("symlink", ["eval", "-e", "exp", "--dry-run", "--json"], readonly=True))
    dev.unlink()
    (sandbox.sentinel / "exams").mkdir()
    (sandbox.sentinel / "exams" / "dev.jsonl").write_bytes(outside.read_bytes())
    folder = env / "exams" / "parity"
    for p in folder.iterdir():
        (sandbox.sentinel / "exams" / p.name).write_bytes(p.read_bytes()) if p.is_file() else None
        p.unlink()
    folder.rmdir()
    folder.symlink_to(sandbox.sentinel / "exams", target_is_directory=True)
    case = Case("symlink", ["env", "install", "parity", "--json"])
    _ok(sandbox, case)
    assert json.loads(sandbox.last.out)["error"]["code"] == "E_UNSAFE_PATH"


# --- a real process: argv bytes that are not UTF-8, --json on every command -----------------------


def _proc(repo: Path, *args: bytes | str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([sys.executable, "-c", "from monte.cli.main import main; main()", *args],
                          cwd=repo, capture_output=True, timeout=120)


def test_argv_bytes_that_are_not_utf8_through_a_real_process(sandbox: Sandbox) -> None:
    run = sandbox.run.encode()
    for args in ([b"show", b"\xff", b"--json"], [b"show", b"exp/" + run + b"@\xff", b"--json"],
                 [b"dataset", b"add", b"d\xff", b"--from-file", b"/tmp/\xff.jsonl", b"--json"],
                 [b"dataset", b"add", b"dx", b"--from-file", b"/tmp/\xff.jsonl", b"--json"],
                 [b"config", b"set", b"bucket", b"/tmp/\xff", b"--json"],
                 [b"env", b"add", b"--benchmark", b"parity", b"--as", b"\xc3\x28", b"--json"],
                 [b"train", b"--recipe", b"/tmp/\xff.yaml", b"--source", b"rows", b"--smoke", b"-e", b"exp",
                  b"--dry-run", b"--json"]):
        before = sandbox.state()
        p = _proc(sandbox.repo, *args)
        out = p.stdout.decode("utf-8")  # stdout itself is always UTF-8
        assert b"Traceback" not in p.stdout + p.stderr, p.stderr[-2000:]
        doc = json.loads(out)
        code = doc["error"]["code"]
        assert code in CODES and code != "E_INTERNAL" and p.returncode == int(CODES[code].exit_code), (args, out)
        assert sandbox.state() == before, args


def test_every_command_answers_json_with_one_document(sandbox: Sandbox) -> None:
    """``monte CMD --help`` aside, every command given ``--json`` (and nothing else it needs)
    prints one JSON document on stdout: a result or an error."""
    from monte.cli.main import COMMANDS

    for cmd in COMMANDS:
        if cmd in ("quickstart", "model", "init", "box", "hooks"):  # they build or reach out: not here
            continue
        _ok(sandbox, Case("json", [cmd, "--json"], readonly=cmd not in ("push", "sync", "config", "env", "dataset",
                                                                        "experiment", "ledger", "eval", "train"),
                          allowed=("repo/report.html",) if cmd == "report" else ()))  # its page, by default here


def test_a_dangling_symlink_where_a_freeze_lands_is_refused_before_the_record(sandbox: Sandbox) -> None:
    """Before: `dataset add` / `env add` saw no folder (``exists()`` follows the link), recorded
    the freeze on the vault ref, then failed to rename onto the link (E_INTERNAL): a refusal
    that had moved the vault ref, with the name taken and no folder."""
    for kind, argv in (("datasets", ["dataset", "add", "dangle", "--from-file", str(sandbox.inputs / "good.jsonl")]),
                       ("environments", ["env", "add", "--benchmark", "parity", "--as", "dangle"])):
        link = sandbox.data_root / kind / "dangle"
        link.symlink_to(sandbox.root / "nowhere" / kind)
        _ok(sandbox, Case("symlink", [*argv, "--json"]))
        assert json.loads(sandbox.last.out)["error"]["code"] == "E_NAME_TAKEN"
        assert not (sandbox.root / "nowhere").exists()
        link.unlink()


def test_logs_answers_json_with_one_document(sandbox: Sandbox) -> None:
    """Before: `monte logs RUN --json` was a usage error (no --json), though every command takes it."""
    (sandbox.data_root / "runs" / "exp" / sandbox.run).mkdir(parents=True, exist_ok=True)
    events = sandbox.data_root / "runs" / "exp" / sandbox.run / "events.jsonl"
    with open(events, "a") as f:
        f.write('{"event": "started"}\n{"event": "torn')
    _ok(sandbox, Case("json", ["logs", sandbox.run, "--json"], readonly=True))
    doc = json.loads(sandbox.last.out)
    assert doc["run"] == sandbox.run and doc["events"][-2:] == [{"event": "started"}, {"unparsed": '{"event": "torn'}]
    _ok(sandbox, Case("json", ["logs", sandbox.run, "--follow", "--json"], readonly=True))
    assert json.loads(sandbox.last.out)["error"]["code"] == "E_USAGE"


def test_a_dataset_manifest_without_rows_is_refused_before_the_fetch(sandbox: Sandbox) -> None:
    """Found by the campaign: the Vault's dataset manifest listed no rows.jsonl; the fetch
    installed and recorded it, then `dataset show` crashed (KeyError) on the missing rows."""
    good = {"deep/er/file": b"x\n"}
    case = Case("manifest", ["dataset", "show", "norows", "--json"], env={"MONTE_VAULT": str(sandbox.vault)},
                files=_vault_env(sandbox, "norows", good, [{"md5": _md5(b"x\n"), "relpath": "deep/er/file"}],
                                 kind="dataset"))
    _ok(sandbox, case)
    assert json.loads(sandbox.last.out)["error"]["code"] == "E_INTEGRITY"
    # and one on this data root (written by hand) makes `dataset list` refuse, not crash
    folder = sandbox.data_root / "datasets" / "handmade"
    folder.mkdir(parents=True)
    (folder / "manifest.json").write_text(json.dumps({"kind": "dataset", "name": "handmade", "files": {}}))
    _ok(sandbox, Case("names", ["dataset", "list", "--json"], readonly=True))
    assert json.loads(sandbox.last.out)["error"]["code"] == "E_INTEGRITY"


def test_paths_too_long_for_the_file_system_are_usage_errors(sandbox: Sandbox) -> None:
    """Found by the campaign: ``Path.is_file()`` and friends raise ENAMETOOLONG (not False) on a
    name over 255 bytes: E_INTERNAL from `dataset add --from-file`, `train --recipe`,
    `eval --model`, `experiment init --model`, and a Vault folder in .monte.yaml."""
    long = str(sandbox.inputs / ("y" * 300))
    for argv in (["dataset", "add", "lx", "--from-file", long + ".jsonl"],
                 ["train", "--recipe", long + ".yaml", "--source", "rows", "--smoke", "-e", "exp", "--dry-run"],
                 ["eval", "-e", "exp", "--model", long, "--dry-run"],
                 ["experiment", "init", "lx", "--eval", "parity", "--model", long + "/m", "--dry-run"]):
        _ok(sandbox, Case("names", [*argv, "--json"], readonly=True))
        assert json.loads(sandbox.last.out)["error"]["code"] in ("E_USAGE", "E_NOT_FOUND"), (argv, sandbox.last.out)
    _ok(sandbox, Case("config_file", ["dataset", "list", "--vault", "--json"], readonly=True,
                      files={"repo/.monte.yaml": f'vault: "{long}"\n'.encode()}, restore=("repo/.monte.yaml",)))
    assert json.loads(sandbox.last.out)["error"]["code"] == "E_STORAGE"
