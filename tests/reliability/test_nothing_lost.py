"""Nothing lost, no E_INTERNAL: failures found by hand, each kept as a regression.

A. a model answer holding a character ``str.splitlines`` splits on (U+2028, U+2029, U+0085,
   \\x1c-\\x1e, \\x0b, \\x0c) or a lone surrogate broke ``tasks.jsonl`` for good: verify crashed
   and pairing was silently lost. Real evals, real ledger, real ``monte ledger verify``; only the
   model's output is replaced (``monte.models.generate.generate``, the one boundary).
B. ``.monte/datasets`` on another file system: the freeze was recorded, then the rename failed
   (EXDEV) and the rows were gone. A real second file system (/dev/shm, a tmpfs).
C. a SIGKILLed ``monte promote`` left its staging folders beside the destination for good.
D. a key pasted into a variable that holds a path was echoed in the refusal.
E. E_INTERNAL where a refusal belongs: an over-long integer or an escaped lone surrogate in a
   dataset line; a promote --dest through a symlink or under /proc; a full or read-only disk
   (real tmpfs mounts, as root; skipped with the reason where mounting is not allowed).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from monte.envs.grading import ANSWER_KEEP
from tests.support import crashhelp as ch
from tests.support.helpers import checkpoint, fill, git, snapshot_state, tmpfs

#: drawn examples beyond the four explicit ones (which hold every separator, each kind of lone
#: surrogate, NUL and RTL marks, and an answer past ANSWER_KEEP); set it higher for a longer fuzz
EXAMPLES = int(os.environ.get("MONTE_FUZZ_EXAMPLES", "2"))

#: every character str.splitlines() splits on, a lone surrogate of each kind, NUL, RTL marks
SEPARATORS = ["\n", "\r", "\r\n", "\x0b", "\x0c", "\x1c", "\x1d", "\x1e", "\x85", "\u2028", "\u2029"]
AWKWARD = [*SEPARATORS, "\ud800", "\udbff", "\udc00", "\udfff", "\udcff", "\x00", "\u200f", "\u202e",
           "\u200e", "\ufeff", "\U0001f600", "\\", '"', "\\u2028"]


# --- A. a model answer holding a line separator or a lone surrogate ---------------------------


def _model_says(monkeypatch: pytest.MonkeyPatch, answers: list[str]) -> None:
    """The model's decoded text, and nothing else, is replaced: the one boundary a test cannot
    steer (what a real model decodes). Loading, grading, recording and reading are monte's own."""
    from monte.models import generate as gen

    def generate(model: Any, tok: Any, prompts: list[str], **_: Any) -> list[str]:
        return [answers[i % len(answers)] for i in range(len(prompts))]

    monkeypatch.setattr(gen, "generate", generate)


def _tasks(repo: Path, exp: str, run: str) -> list[dict[str, Any]] | None:
    from monte.ledger.experiment import Ledger
    from monte.runs.lifecycle import read_tasks
    from monte.workspace import open_workspace

    ws = open_workspace(repo)
    return read_tasks(Ledger(ws.store, exp).snapshot(), run)


def _eval(monte: Any, *args: str) -> dict[str, Any]:
    r = monte("eval", *args, "--yes", "--json")
    assert r.code == 0, r.out + r.err
    doc: dict[str, Any] = r.json()
    return doc


def test_any_answer_round_trips_through_a_finish_and_verify(repo: Path, exp: str, monte: Any,
                                                            tiny_models: dict[int, Path], tmp_path: Path,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """Each example: a fresh experiment on a fresh base model (its own cohort, so the seal of
    the earlier examples does not count); its baselines (dev@0, test@0) and a checkpoint's dev
    eval all answer with the drawn text (lone surrogates, every separator, NUL, RTL marks, an
    answer twice ANSWER_KEEP long, kept as its head, length and hash: before, whole, and 200
    megabyte answers made a blob dulwich refused to read); each finishes, reads back exactly, the
    checkpoint pairs, and `monte ledger verify` passes."""
    from monte.models.tiny import init_model

    counter = [0]
    answer = st.lists(st.one_of(st.sampled_from(AWKWARD), st.text(max_size=8)), max_size=12).map("".join)

    @settings(max_examples=EXAMPLES, deadline=None, database=None, derandomize=True,
              suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow,
                                     HealthCheck.data_too_large])
    @given(st.lists(answer, min_size=1, max_size=6))
    @example(["odd\u2028even", "even\u2029", "\x85odd", "\x1c\x1d\x1e\x0b\x0c"])
    @example(["\ud800 odd", "even \udfff", "\udc80\udcff"])
    @example(["\x00odd\x00", "\u202eeven\u200f", ""])
    @example(["odd " + "\u2028" * (2 * ANSWER_KEEP)])  # past what tasks.jsonl keeps whole
    def run(answers: list[str]) -> None:
        counter[0] += 1
        name = f"h{counter[0]}"
        base = tmp_path / f"base-{name}"
        init_model(base, seed=100 + counter[0])
        r = monte("experiment", "init", name, "--eval", "parity", "--model", str(base))
        assert r.code == 0, r.err
        _model_says(monkeypatch, answers)
        baseline = _eval(monte, "-e", name)["runs"][0]
        sealed = _eval(monte, "-e", name, "--split", "test")["runs"][0]
        ck = checkpoint(repo, tiny_models[1], experiment=name)
        moved = _eval(monte, "-e", name, "--checkpoint", f"{name}/{ck}@50")["runs"][0]
        # each answer whole, or (past ANSWER_KEEP characters) its head with its length and hash
        said = [answers[i % len(answers)] for i in range(200)]
        expected = [a[:ANSWER_KEEP] for a in said]
        for row in (baseline, sealed, moved):
            assert row["status"] == "succeeded"
            tasks = _tasks(repo, name, row["run"])
            assert tasks is not None and [t["answer"] for t in tasks] == expected
            for t, a in zip(tasks, said, strict=True):
                long = len(a) > ANSWER_KEEP
                assert t.get("answer_chars") == (len(a) if long else None)
                assert t.get("answer_sha256") == (
                    hashlib.sha256(a.encode("utf-8", "surrogatepass")).hexdigest() if long else None)
        assert moved["delta"]["paired"] is True and moved["delta"]["baseline"] == baseline["run"]
        v = monte("ledger", "verify", name, "--json")
        assert v.code == 0, v.out + v.err

    run()
    assert counter[0] >= EXAMPLES  # the explicit examples and the drawn ones all ran


def test_read_tasks_reads_a_raw_line_separator_written_before(repo: Path, exp: str, monte: Any,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """A ledger written before the fix holds U+2028 raw in tasks.jsonl (``ensure_ascii=False``, no
    escaping): it still reads, pairs and verifies, because reading splits on \\n only."""
    from monte import jsonl

    def as_before(objs: list[dict[str, Any]]) -> bytes:  # the encoder the finish used before the fix
        return b"".join(json.dumps(t, sort_keys=True, ensure_ascii=False, separators=(",", ":")).encode()
                        + b"\n" for t in objs)

    monkeypatch.setattr(jsonl, "dump_lines", as_before)
    _model_says(monkeypatch, ["odd\u2028even", "\u2029even", "odd\x85"])
    run = _eval(monte, "-e", exp)["runs"][0]["run"]
    from monte.ledger.experiment import Ledger
    from monte.workspace import open_workspace

    raw = Ledger(open_workspace(repo).store, exp).snapshot().read(f"runs/{run[0]}/{run[1]}/{run}/tasks.jsonl")
    assert raw is not None and "\u2028".encode() in raw  # raw, as an older monte wrote it
    tasks = _tasks(repo, exp, run)
    assert tasks is not None and len(tasks) == 200
    assert tasks[0]["answer"] == "odd\u2028even" and tasks[2]["answer"] == "odd\x85"
    v = monte("ledger", "verify", exp, "--json")
    assert v.code == 0, v.out + v.err


# --- B. a data root folder on another file system -------------------------------------------


@pytest.fixture
def other_fs(tmp_path: Path) -> Iterator[Path]:
    """A folder on a second file system (/dev/shm, a tmpfs), removed afterwards."""
    shm = Path("/dev/shm")
    if not shm.is_dir() or os.stat(shm).st_dev == os.stat(tmp_path).st_dev:
        pytest.skip("/dev/shm is not a second file system beside the test's tmp dir here, so a "
                    "cross-device rename cannot be provoked")
    d = Path(tempfile.mkdtemp(prefix="monte-xdev-", dir=shm))
    yield d
    shutil.rmtree(d, ignore_errors=True)


def _link_away(repo: Path, folder: str, other: Path) -> Path:
    target = other / folder
    target.mkdir()
    link = repo / ".monte" / folder
    if link.exists():
        shutil.rmtree(link)
    link.symlink_to(target)
    return target


def _rows(path: Path, n: int = 2) -> Path:
    path.write_text("".join(json.dumps({"input": f"{i} 1", "output": "even" if i % 2 else "odd"}) + "\n"
                            for i in range(n)))
    return path


def _staging_left(*folders: Path) -> list[str]:
    out = []
    for f in folders:
        for p in f.rglob("*") if f.is_dir() else []:
            if "freeze-" in p.name or "staging" in p.name or "promote" in p.name or ".hub-" in p.name:
                out.append(str(p))
    return out


def test_a_dataset_freeze_onto_another_file_system(repo: Path, monte: Any, other_fs: Path, tmp_path: Path) -> None:
    away = _link_away(repo, "datasets", other_fs)
    rows = _rows(tmp_path / "rows.jsonl")
    r = monte("dataset", "add", "pairs", "--from-file", str(rows), "--kind", "sft", "--json")
    assert r.code == 0, r.out + r.err
    assert (away / "pairs" / "rows.jsonl").read_bytes() == rows.read_bytes()
    s = monte("dataset", "show", "pairs", "--json")
    assert s.code == 0 and s.json()["verified"] and s.json()["rows"] == 2
    assert not _staging_left(repo / ".monte" / "tmp", away)
    again = monte("dataset", "add", "pairs", "--from-file", str(rows), "--json")
    assert again.code == 3 and again.json()["error"]["code"] == "E_NAME_TAKEN"
    assert monte("ledger", "verify", "--all", "--json").code == 0


def test_an_environment_freeze_onto_another_file_system(repo: Path, monte: Any, other_fs: Path) -> None:
    away = _link_away(repo, "environments", other_fs)
    r = monte("env", "add", "--benchmark", "parity", "--json")
    assert r.code == 0, r.out + r.err
    assert (away / "parity" / "manifest.json").is_file()
    i = monte("env", "install", "parity", "--json")
    assert i.code == 0 and i.json()[0]["action"] == "verified", i.out
    assert not _staging_left(repo / ".monte" / "tmp", away)


def test_a_freeze_killed_after_its_record_is_placed_across_file_systems(repo: Path, monte: Any, other_fs: Path,
                                                                        tmp_path: Path) -> None:
    """Killed between the vault record and the move into place (a real SIGKILL at that point):
    the next `dataset show` puts the staged rows in place on the other file system."""
    away = _link_away(repo, "datasets", other_fs)
    rows = _rows(tmp_path / "rows.jsonl")
    env = ch.base_env(tmp_path / "home")
    k = ch.start_and_kill(repo, env, ["dataset", "add", "pairs", "--from-file", str(rows), "--json"], None,
                          tmp_path / "logs", crash_point="monte.staging:move_into_place:before:1")
    assert k.killed, k.err
    assert not (away / "pairs").exists()
    s = monte("dataset", "show", "pairs", "--json")
    assert s.code == 0, s.out + s.err
    assert (away / "pairs" / "rows.jsonl").read_bytes() == rows.read_bytes()
    assert not _staging_left(repo / ".monte" / "tmp", away)


def test_move_into_place_copies_across_file_systems(tmp_path: Path, other_fs: Path) -> None:
    from monte import staging

    staged = staging.staging_dir(tmp_path / "data")
    (staged / "sub").mkdir()
    (staged / "sub" / "a.bin").write_bytes(os.urandom(1000))
    (staged / "manifest.json").write_text("{}")
    files = {p.relative_to(staged): p.read_bytes() for p in staged.rglob("*") if p.is_file()}
    dest = other_fs / "datasets" / "x"
    staging.move_into_place(staged, dest)
    assert {p.relative_to(dest): p.read_bytes() for p in dest.rglob("*") if p.is_file()} == files
    assert not staged.exists()
    assert sorted(p.name for p in dest.parent.iterdir()) == ["x"]


# --- C. a killed promote ------------------------------------------------------------------------


@pytest.fixture
def promotable(repo: Path, exp: str, tiny_models: dict[int, Path]) -> str:
    run = checkpoint(repo, tiny_models[1])
    return f"{run}@50"


def _kill_promote(repo: Path, ref: str, dest: Path, tmp_path: Path, point: str = "shutil:copy2:after:1") -> None:
    env = ch.base_env(tmp_path / "home")
    k = ch.start_and_kill(repo, env, ["promote", ref, "--dest", str(dest), "--confirm", ref, "--json"], None,
                          tmp_path / f"logs-{uuid.uuid4().hex[:6]}", crash_point=point)
    assert k.killed, (k.out, k.err)


def test_a_killed_promote_is_swept_by_the_next(repo: Path, monte: Any, promotable: str, tmp_path: Path) -> None:
    exports = repo / "exports"  # inside the repository: what the kill leaves must not show in git
    dest = exports / "model"
    _kill_promote(repo, promotable, dest, tmp_path)
    left = [p for p in exports.iterdir() if p.name != "model"]
    assert left, "the kill was meant to land mid-copy, with a staging folder in place"
    assert not dest.exists()
    assert git(repo, "status", "--porcelain", "--untracked-files=all", "exports") == ""
    r = monte("promote", promotable, "--dest", str(dest), "--confirm", promotable, "--json")
    assert r.code == 0, r.out + r.err
    assert [p.name for p in exports.iterdir()] == ["model"]


def test_the_next_promote_into_the_parent_sweeps_another_names_leftovers(repo: Path, monte: Any, promotable: str,
                                                                         tmp_path: Path) -> None:
    exports = tmp_path / "exports"
    _kill_promote(repo, promotable, exports / "first", tmp_path)
    assert list(exports.iterdir())
    r = monte("promote", promotable, "--dest", str(exports / "second"), "--confirm", promotable, "--json")
    assert r.code == 0, r.out + r.err
    assert [p.name for p in exports.iterdir()] == ["second"]


def test_a_live_promotes_staging_is_left_alone(repo: Path, monte: Any, promotable: str, tmp_path: Path) -> None:
    """A staging folder whose owner is alive (another promote, still copying) is not swept."""
    exports = tmp_path / "exports"
    exports.mkdir()
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        import socket

        live = exports / f".monte-promote-{socket.gethostname()}-{sleeper.pid}-abcd1234"
        live.mkdir()
        r = monte("promote", promotable, "--dest", str(exports / "m"), "--confirm", promotable, "--json")
        assert r.code == 0, r.out + r.err
        assert live.is_dir()
    finally:
        sleeper.kill()
        sleeper.wait()


# --- D. a key pasted where its path belongs -------------------------------------------------------

MARKER_KEY = json.dumps({
    "type": "service_account",
    "project_id": "marker-project-7f3a",
    "private_key_id": "marker-key-id-0c1e55",
    "private_key": "-----BEGIN PRIVATE KEY-----\nMIIEvQMARKERMARKERline1xyz\nMARKERline2abcdefgh\n"
                   "-----END PRIVATE KEY-----\n",
    "client_email": "marker-sa@marker-project-7f3a.iam.gserviceaccount.com",
}, indent=2)
#: what must never show: every line of the key as pasted, and every line of its private key
SECRET_LINES = sorted({ln.strip() for text in (MARKER_KEY, json.loads(MARKER_KEY)["private_key"])
                       for ln in text.splitlines() if len(ln.strip()) > 3})


def _no_secret(text: str) -> None:
    for line in SECRET_LINES:
        assert line not in text, f"the secret's line {line!r} was printed"
    assert "MARKER" not in text and "marker-" not in text


@pytest.mark.parametrize("var", ["MONTE_GCS_KEY_FILE", "MONTE_GCS_BOX_KEY_FILE", "MONTE_GCS_KEY_OP",
                                 "MONTE_GCS_BOX_KEY_OP", "--key-file"])
def test_a_key_pasted_into_a_variable_is_never_printed(repo: Path, exp: str, var: str, tmp_path: Path) -> None:
    env = ch.base_env(tmp_path / "home")
    fakebin = tmp_path / "bin"  # an `op` that echoes its argv in its error, as the real one does
    fakebin.mkdir()
    (fakebin / "op").write_text("#!/bin/sh\necho \"[ERROR] \\\"$3\\\" isn't a document in any vault\" >&2\nexit 1\n")
    (fakebin / "op").chmod(0o755)
    env["PATH"] = f"{fakebin}{os.pathsep}{env['PATH']}"
    args: list[str] = []
    if var == "--key-file":
        args = ["--key-file", MARKER_KEY]
    else:
        env[var] = MARKER_KEY
    for cmd in (["push", "--bucket", "gs://marker-free-bucket", *args], ["sync", "--bucket", "gs://b", *args]):
        if var.startswith("MONTE_GCS_BOX") and cmd[0] == "sync":
            continue  # the read ladder does not look at the BOX variables
        for as_json in (True, False):
            p = subprocess.run(ch.argv(*cmd, *(["--json"] if as_json else [])), cwd=repo, env=env,
                               capture_output=True, text=True, timeout=120)
            assert p.returncode == 7, (cmd, p.stdout, p.stderr)
            _no_secret(p.stdout + p.stderr)
            assert "Traceback" not in p.stdout + p.stderr
            if as_json:
                err = json.loads(p.stdout)["error"]
                assert err["code"] == "E_STORAGE" and var in err["message"], err


def test_a_key_in_the_ssh_key_variable_is_never_printed(tmp_path: Path) -> None:
    from monte.errors import MonteError
    from monte.remote import ssh

    with pytest.raises(MonteError) as e:
        ssh.connect("127.0.0.1", user="u", port=1, key_file=MARKER_KEY, connect_timeout=1)
    _no_secret(str(e.value) + json.dumps(e.value.to_dict()))


# --- E. E_INTERNAL where a refusal belongs ------------------------------------------------------


def test_an_integer_past_pythons_digit_limit_is_bad_input(repo: Path, monte: Any, tmp_path: Path) -> None:
    before = snapshot_state(repo)
    f = tmp_path / "big.jsonl"
    f.write_text('{"input": "a", "output": "b"}\n{"input": "a", "output": "b", "n": ' + "9" * 5000 + "}\n")
    r = monte("dataset", "add", "big", "--from-file", str(f), "--json")
    assert r.code == 6, r.out + r.err
    err = r.json()["error"]
    assert err["code"] == "E_BAD_INPUT" and "line 2" in err["message"] and err["fix"]
    assert snapshot_state(repo) == before


@pytest.mark.parametrize("row", [r'{"input": "a\ud800", "output": "b"}', r'{"input": "a", "output": "\udfff"}',
                                 r'{"messages": [{"role": "user", "content": "x\udc00"}]}',
                                 r'{"input": "a", "output": "b", "\ud834": 1}'])
def test_an_escaped_lone_surrogate_is_refused_at_freeze(repo: Path, monte: Any, tmp_path: Path, row: str) -> None:
    before = snapshot_state(repo)
    f = tmp_path / "surrogate.jsonl"
    f.write_text('{"input": "ok \\ud83d\\ude00", "output": "fine"}\n' + row + "\n")  # a pair is fine
    r = monte("dataset", "add", "sur", "--from-file", str(f), "--json")
    assert r.code == 6, r.out + r.err
    err = r.json()["error"]
    assert err["code"] == "E_BAD_INPUT" and "line 2" in err["message"] and "surrogate" in err["message"]
    assert snapshot_state(repo) == before


def test_an_escaped_surrogate_pair_is_accepted(repo: Path, monte: Any, tmp_path: Path) -> None:
    f = tmp_path / "emoji.jsonl"
    f.write_text('{"input": "ok \\ud83d\\ude00", "output": "fine"}\n')
    r = monte("dataset", "add", "emoji", "--from-file", str(f), "--kind", "sft", "--json")
    assert r.code == 0, r.out + r.err


def _dests(tmp_path: Path) -> dict[str, Path]:
    empty = tmp_path / "empty-target"
    empty.mkdir()
    (tmp_path / "to-empty").symlink_to(empty)
    (tmp_path / "dangling").symlink_to(tmp_path / "nowhere")
    return {"symlink to an empty folder": tmp_path / "to-empty", "dangling symlink": tmp_path / "dangling",
            "under /proc": Path("/proc/monte-export"), "under /proc/self/cwd": Path("/proc/self/cwd/exported"),
            "under /sys": Path("/sys/monte-export")}


def test_promote_refuses_a_dest_it_cannot_make_a_folder_at(repo: Path, monte: Any, promotable: str,
                                                           tmp_path: Path) -> None:
    for what, dest in _dests(tmp_path).items():
        before = snapshot_state(repo)
        listing = sorted(p.name for p in tmp_path.iterdir())
        r = monte("promote", promotable, "--dest", str(dest), "--confirm", promotable, "--json")
        assert r.code in (2, 3), (what, r.out, r.err)
        err = r.json()["error"]
        assert err["code"] in ("E_REFUSED", "E_USAGE") and err["fix"], (what, err)
        assert snapshot_state(repo) == before, what
        assert sorted(p.name for p in tmp_path.iterdir()) == listing, what
        assert not list((tmp_path / "empty-target").iterdir()), what
        assert not (repo / "exported").exists(), what


def _read_only(at: Path) -> None:
    subprocess.run(["mount", "-o", "remount,ro", str(at)], check=True, capture_output=True)


def _storage_refusal(r: Any, *words: str) -> dict[str, str]:
    assert r.code == 7, r.out + r.err
    err: dict[str, str] = r.json()["error"]
    assert err["code"] == "E_STORAGE" and err["fix"], err
    for w in words:
        assert w in err["message"], (w, err)
    return err


def _with_copy_of(folder: Path) -> Callable[[], None]:
    """Mount a tmpfs over ``folder`` holding a copy of what was there; returns the undo."""
    saved = folder.parent / f".saved-{folder.name}"
    shutil.copytree(folder, saved, symlinks=True)
    stack = contextlib.ExitStack()
    stack.enter_context(tmpfs(folder, "64m"))
    shutil.copytree(saved, folder, symlinks=True, dirs_exist_ok=True)
    return stack.close


def test_a_read_only_data_root_is_e_storage(repo: Path, monte: Any, tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path / "ro-data"
    with tmpfs(root, "4m"):
        shutil.copytree(repo / ".monte", root, dirs_exist_ok=True)
        _read_only(root)
        monkeypatch.setenv("MONTE_DATA_ROOT", str(root))
        refs = git(repo, "for-each-ref")
        r = monte("dataset", "add", "rows", "--from-file", str(_rows(tmp_path / "rows.jsonl")), "--json")
        _storage_refusal(r, str(root), "read-only")
        assert git(repo, "for-each-ref") == refs


def test_a_full_data_root_is_e_storage_and_burns_no_name(repo: Path, monte: Any, tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path / "full-data"
    rows = _rows(tmp_path / "rows.jsonl", 3000)
    with tmpfs(root, "1m"):
        shutil.copytree(repo / ".monte", root, dirs_exist_ok=True)
        fill(root)
        monkeypatch.setenv("MONTE_DATA_ROOT", str(root))
        refs = git(repo, "for-each-ref")
        r = monte("dataset", "add", "rows", "--from-file", str(rows), "--json")
        _storage_refusal(r, str(root), "full")
        assert git(repo, "for-each-ref") == refs
        (root / "filler").unlink()  # room again: the name was never taken
        r = monte("dataset", "add", "rows", "--from-file", str(rows), "--json")
        assert r.code == 0, r.out + r.err


def test_a_dataset_dir_on_a_full_file_system_burns_no_name(repo: Path, monte: Any, tmp_path: Path) -> None:
    """The rows go to another, full file system: refused before anything is recorded."""
    away = tmp_path / "away"
    rows = _rows(tmp_path / "rows.jsonl", 3000)
    with tmpfs(away, "1m"):
        (repo / ".monte" / "datasets").mkdir(exist_ok=True)
        shutil.rmtree(repo / ".monte" / "datasets")
        (repo / ".monte" / "datasets").symlink_to(away)
        fill(away)
        refs = git(repo, "for-each-ref")
        r = monte("dataset", "add", "rows", "--from-file", str(rows), "--json")
        _storage_refusal(r, "full")
        assert git(repo, "for-each-ref") == refs
        assert not [p for p in away.iterdir() if p.name != "filler"]
        (away / "filler").unlink()
        r = monte("dataset", "add", "rows", "--from-file", str(rows), "--json")
        assert r.code == 0, r.out + r.err


@pytest.mark.parametrize("part", ["objects", "refs"])
def test_read_only_git_objects_or_refs_is_e_storage(repo: Path, monte: Any, tmp_path: Path, part: str) -> None:
    undo = _with_copy_of(repo / ".git" / part)
    try:
        _read_only(repo / ".git" / part)
        refs = git(repo, "for-each-ref")
        r = monte("dataset", "add", "rows", "--from-file", str(_rows(tmp_path / "rows.jsonl")), "--json")
        _storage_refusal(r, "read-only", str(repo / ".git" / part))
        assert git(repo, "for-each-ref") == refs
        assert not (repo / ".monte" / "datasets" / "rows").exists()
    finally:
        undo()
