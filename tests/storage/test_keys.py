"""The GCS key ladders (read and write), their refusals, and the 0600 secret-file writer.

Key files are real files under tmp_path. 1Password cannot exist here (no account, no desktop
app, no network), so the `op` CLI is faked at this one boundary: a small executable script put
first on PATH, which prints a document for the names it knows and fails like `op` otherwise.
"""

from __future__ import annotations

import json
import os
import stat
import traceback
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from monte.errors import MonteError, StorageError
from monte.storage import keys
from monte.storage.keys import (
    READ_LADDER,
    WRITE_LADDER,
    Key,
    read_key,
    require,
    write_key,
    write_secret_file,
)

SECRET = "SECRET-XYZ-123"
GCS_VARS = ("MONTE_GCS_KEY_FILE", "MONTE_GCS_KEY_OP", "MONTE_GCS_BOX_KEY_FILE", "MONTE_GCS_BOX_KEY_OP")


@pytest.fixture(autouse=True)
def _no_gcs_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """No key variable leaks in from the developer's shell; each test sets only what it means."""
    for var in GCS_VARS:
        monkeypatch.delenv(var, raising=False)


def key_json(marker: str, **extra: object) -> str:
    return json.dumps({"type": "service_account", "client_email": f"{marker}@proj.invalid",
                       "private_key": SECRET, **extra})


def key_file(tmp_path: Path, marker: str) -> Path:
    p = tmp_path / f"{marker}.json"
    p.write_text(key_json(marker))
    return p


def marker(key: Key | None) -> str:
    assert key is not None
    return str(key.info["client_email"]).split("@")[0]


FakeOp = Callable[..., Path]


@pytest.fixture
def fake_op(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> FakeOp:
    """Install a fake `op` first on PATH. ``fake_op(docs={name: text}, stderr=..., sleep=...)``
    returns the file where the fake logs each argv it was called with (one JSON list a line)."""

    def install(docs: dict[str, str] | None = None, *, fail_stderr: str = "",
                sleep: float = 0) -> Path:
        bindir = tmp_path / "fakebin"
        store = tmp_path / "fake-op-store"
        bindir.mkdir(exist_ok=True)
        store.mkdir(exist_ok=True)
        for name, text in (docs or {}).items():
            (store / name).write_text(text)
        log = tmp_path / "op-argv.log"
        if fail_stderr:
            (store / "_stderr").write_text(fail_stderr)
        script = bindir / "op"
        script.write_text(f"""#!/usr/bin/env python3
import json, os, sys, time
store, argv = {str(store)!r}, sys.argv[1:]
with open({str(log)!r}, "a") as f:
    f.write(json.dumps(argv) + "\\n")
if os.path.exists(os.path.join(store, "_stderr")):
    sys.stderr.write(open(os.path.join(store, "_stderr")).read())
    sys.exit(6)
if len(argv) == 3 and argv[:2] == ["document", "get"] and os.path.isfile(os.path.join(store, argv[2])):
    sys.stdout.write(open(os.path.join(store, argv[2])).read())
    sys.stdout.flush()
    time.sleep({sleep!r})
    sys.exit(0)
sys.stderr.write('[ERROR] 2025/01/01 00:00:00 "%s" isn\\'t a document in any vault.\\n' % argv[-1])
sys.exit(1)
""")
        script.chmod(0o755)
        monkeypatch.setenv("PATH", f"{bindir}{os.pathsep}{os.environ.get('PATH', '')}")
        return log

    return install


def assert_refusal(exc: pytest.ExceptionInfo[MonteError], *needles: str) -> None:
    """E_STORAGE, exit 7, mentions every needle, and the secret nowhere (traceback included)."""
    e = exc.value
    assert isinstance(e, StorageError)
    assert e.code == "E_STORAGE"
    assert int(e.exit_code) == 7 and e.to_dict()["exit_code"] == 7
    for needle in needles:
        assert needle in str(e), (needle, str(e))
    assert_no_secret(e)


def assert_no_secret(e: BaseException) -> None:
    text = str(e) + repr(e) + json.dumps(getattr(e, "to_dict", dict)())
    text += "".join(traceback.format_exception(e))
    assert SECRET not in text
    assert e.__cause__ is None and e.__context__ is None  # nothing chained could hold the content


# --- ladder order --------------------------------------------------------------------------------

# Each rung as (name in the ladder, how to set it to yield the key marked `m`).
Rung = Callable[[pytest.MonkeyPatch, Path, str], None]


def _file_rung(var: str) -> Rung:
    def set_(mp: pytest.MonkeyPatch, tmp: Path, m: str) -> None:
        mp.setenv(var, str(key_file(tmp, m)))
    return set_


def _op_rung(var: str) -> Rung:
    def set_(mp: pytest.MonkeyPatch, tmp: Path, m: str) -> None:
        mp.setenv(var, f"doc-{m}")
    return set_


ENV_RUNGS: dict[str, Rung] = {
    "MONTE_GCS_BOX_KEY_FILE": _file_rung("MONTE_GCS_BOX_KEY_FILE"),
    "MONTE_GCS_BOX_KEY_OP": _op_rung("MONTE_GCS_BOX_KEY_OP"),
    "MONTE_GCS_KEY_FILE": _file_rung("MONTE_GCS_KEY_FILE"),
    "MONTE_GCS_KEY_OP": _op_rung("MONTE_GCS_KEY_OP"),
}


def test_ladders_are_named_in_contract_order() -> None:
    assert READ_LADDER == ("--key-file", "MONTE_GCS_KEY_FILE", "MONTE_GCS_KEY_OP")
    assert WRITE_LADDER == ("--key-file", "MONTE_GCS_BOX_KEY_FILE", "MONTE_GCS_BOX_KEY_OP",
                            "MONTE_GCS_KEY_FILE", "MONTE_GCS_KEY_OP")


LADDER_CASES = [(kind, i) for kind, ladder in (("read", READ_LADDER), ("write", WRITE_LADDER))
                for i in range(len(ladder))]


@pytest.mark.parametrize(("kind", "winner"), LADDER_CASES,
                         ids=[f"{kind}-{i}" for kind, i in LADDER_CASES])
def test_each_rung_beats_every_later_one(kind: str, winner: int, tmp_path: Path,
                                         monkeypatch: pytest.MonkeyPatch, fake_op: FakeOp) -> None:
    ladder, resolve = (READ_LADDER, read_key) if kind == "read" else (WRITE_LADDER, write_key)
    fake_op({f"doc-{name}": key_json(name) for name in ladder})
    for name in ladder[winner + 1:]:
        if name != "--key-file":
            ENV_RUNGS[name](monkeypatch, tmp_path, name)
    arg = None
    winning = ladder[winner]
    if winning == "--key-file":
        arg = key_file(tmp_path, winning)
    else:
        ENV_RUNGS[winning](monkeypatch, tmp_path, winning)
    key = resolve(arg)
    assert marker(key) == winning
    assert key is not None
    assert key.writable_ladder is (winning in ("--key-file", "MONTE_GCS_BOX_KEY_FILE",
                                               "MONTE_GCS_BOX_KEY_OP"))


def test_key_file_argument_beats_every_variable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                fake_op: FakeOp) -> None:
    fake_op({"doc-x": key_json("op")})
    for var in GCS_VARS:
        monkeypatch.setenv(var, "doc-x" if var.endswith("_OP") else str(key_file(tmp_path, var)))
    arg = key_file(tmp_path, "arg")
    for resolve in (read_key, write_key):
        key = resolve(arg)
        assert marker(key) == "arg" and key is not None
        assert key.source == "--key-file" and key.writable_ladder  # never the value: it may be the key
        assert marker(resolve(str(arg))) == "arg"  # a str is as good as a Path


def test_write_ladder_falls_back_to_the_read_ladder(tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    path = key_file(tmp_path, "ro")
    monkeypatch.setenv("MONTE_GCS_KEY_FILE", str(path))
    key = write_key()
    assert marker(key) == "ro" and key is not None
    assert key.source == "MONTE_GCS_KEY_FILE"
    assert key.writable_ladder is False


def test_read_ladder_ignores_the_box_variables(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                               fake_op: FakeOp) -> None:
    fake_op({"box": key_json("box")})
    monkeypatch.setenv("MONTE_GCS_BOX_KEY_FILE", str(key_file(tmp_path, "box")))
    monkeypatch.setenv("MONTE_GCS_BOX_KEY_OP", "box")
    assert read_key() is None
    assert marker(write_key()) == "box"


def test_empty_variables_and_argument_count_as_unset(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                     fake_op: FakeOp) -> None:
    fake_op({"gcs-ro": key_json("op")})
    monkeypatch.setenv("MONTE_GCS_BOX_KEY_FILE", "")
    monkeypatch.setenv("MONTE_GCS_BOX_KEY_OP", "")
    monkeypatch.setenv("MONTE_GCS_KEY_FILE", "")
    monkeypatch.setenv("MONTE_GCS_KEY_OP", "gcs-ro")
    assert marker(read_key("")) == "op"
    assert marker(write_key("")) == "op"


def test_no_rung_set_is_none_and_require_lists_the_ladder() -> None:
    assert read_key() is None and write_key() is None
    for write, ladder in ((False, READ_LADDER), (True, WRITE_LADDER)):
        with pytest.raises(MonteError) as exc:
            require(None, "monte sync", write=write)
        assert_refusal(exc, "no GCS key resolved for monte sync")
        fix = exc.value.fix
        positions = [fix.index(name) for name in ladder]
        assert positions == sorted(positions), fix
    with pytest.raises(MonteError) as exc:
        require(None, "x", write=False)
    assert "BOX" not in exc.value.fix


def test_require_passes_a_key_through(tmp_path: Path) -> None:
    key = read_key(key_file(tmp_path, "k"))
    assert require(key, "monte push", write=True) is key


def test_key_types_google_auth_loads_are_accepted(tmp_path: Path) -> None:
    for kind in ("service_account", "authorized_user", "external_account"):
        p = tmp_path / f"{kind}.json"
        p.write_text(json.dumps({"type": kind}))
        key = read_key(p)
        assert key is not None and key.info == {"type": kind}


def test_a_tilde_path_is_expanded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home = Path(os.environ["HOME"])
    (home / "k.json").write_text(key_json("home"))
    monkeypatch.setenv("MONTE_GCS_KEY_FILE", "~/k.json")
    key = read_key()
    assert marker(key) == "home" and key is not None
    assert key.source == "MONTE_GCS_KEY_FILE"


# --- the key never shows -------------------------------------------------------------------------


def test_key_str_and_repr_hide_the_content(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                           fake_op: FakeOp) -> None:
    fake_op({"gcs-ro": key_json("op")})
    monkeypatch.setenv("MONTE_GCS_KEY_OP", "gcs-ro")
    key = read_key()
    assert key is not None and key.info["private_key"] == SECRET
    for text in (str(key), repr(key), f"{key}", f"{key!r}"):
        assert SECRET not in text and "private_key" not in text
    assert str(key) == "the 1Password document MONTE_GCS_KEY_OP names"
    assert repr(key) == "Key(source='the 1Password document MONTE_GCS_KEY_OP names', writable_ladder=False)"


def test_op_gets_the_name_in_argv_and_nothing_is_written(tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch,
                                                         fake_op: FakeOp) -> None:
    log = fake_op({"gcs-box": key_json("box")})
    monkeypatch.setenv("MONTE_GCS_BOX_KEY_OP", "gcs-box")
    home = Path(os.environ["HOME"])

    def files() -> set[Path]:
        return {p for root in (tmp_path, home) for p in root.rglob("*")} - {log}

    before = files()
    key = write_key()
    assert marker(key) == "box" and key is not None and key.writable_ladder
    assert key.source == "the 1Password document MONTE_GCS_BOX_KEY_OP names"
    assert [json.loads(line) for line in log.read_text().splitlines()] == [["document", "get", "gcs-box"]]
    assert files() == before  # the document went nowhere but memory


# --- a set but broken rung is refused, never skipped ---------------------------------------------


@pytest.mark.parametrize("var", ["MONTE_GCS_KEY_FILE", "MONTE_GCS_BOX_KEY_FILE"])
def test_missing_key_file_is_refused_not_skipped(var: str, tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch,
                                                 fake_op: FakeOp) -> None:
    fake_op({"later": key_json("later")})
    missing = tmp_path / "nope.json"
    monkeypatch.setenv(var, str(missing))
    monkeypatch.setenv("MONTE_GCS_KEY_OP", "later")  # a good later rung must not rescue it
    with pytest.raises(MonteError) as exc:
        write_key()
    assert_refusal(exc, var, "does not exist")
    assert var in exc.value.fix
    assert str(missing) not in str(exc.value)  # the value is never printed: it could be the key


def test_missing_key_file_argument_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MONTE_GCS_KEY_FILE", str(key_file(tmp_path, "env")))
    missing = tmp_path / "nope.json"
    with pytest.raises(MonteError) as exc:
        read_key(missing)
    assert_refusal(exc, "--key-file", "does not exist")
    assert str(missing) not in str(exc.value)


def test_a_directory_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MONTE_GCS_KEY_FILE", str(tmp_path))
    with pytest.raises(MonteError) as exc:
        read_key()
    assert_refusal(exc, "MONTE_GCS_KEY_FILE", "directory")
    assert str(tmp_path) not in str(exc.value)


def test_a_path_through_a_file_is_refused(tmp_path: Path) -> None:
    p = key_file(tmp_path, "plain") / "key.json"  # "Not a directory": unreadable, even for root
    with pytest.raises(MonteError) as exc:
        read_key(p)
    assert_refusal(exc, "--key-file", "cannot be read")


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads a 0000 file anyway")
def test_an_unreadable_file_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    p = key_file(tmp_path, "locked")
    p.chmod(0)
    monkeypatch.setenv("MONTE_GCS_BOX_KEY_FILE", str(p))
    try:
        with pytest.raises(MonteError) as exc:
            write_key()
    finally:
        p.chmod(0o600)
    assert_refusal(exc, "MONTE_GCS_BOX_KEY_FILE", "cannot be read")


@pytest.mark.parametrize("content", [
    '{"type": "service_account", "private_key": "SECRET-XYZ-123",',  # cut short
    '{"private_key": "SECRET-XYZ-123"}',  # no "type"
    '{"type": "SECRET-XYZ-123"}',  # a type google-auth does not know
    '{"type": ["service_account"], "private_key": "SECRET-XYZ-123"}',
    '["SECRET-XYZ-123"]',  # not an object
    "private_key = SECRET-XYZ-123\n",  # not JSON at all
    "",
], ids=["truncated", "no-type", "unknown-type", "list-type", "array", "not-json", "empty"])
def test_not_a_json_key_is_refused_without_quoting_it(content: str, tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    p = tmp_path / "bad.json"
    p.write_text(content)
    monkeypatch.setenv("MONTE_GCS_KEY_FILE", str(p))
    with pytest.raises(MonteError) as exc:
        read_key()
    assert_refusal(exc, "MONTE_GCS_KEY_FILE", "is not a JSON key file")
    assert str(p) not in str(exc.value)


def test_binary_garbage_is_refused(tmp_path: Path) -> None:
    p = tmp_path / "bad.json"
    p.write_bytes(b"\xff\xfe\x00" + SECRET.encode() + b"\xc3")
    with pytest.raises(MonteError) as exc:
        read_key(p)
    assert_refusal(exc, "--key-file", "is not a JSON key file")


@pytest.mark.parametrize(("var", "alt"), [("MONTE_GCS_KEY_OP", "MONTE_GCS_KEY_FILE"),
                                          ("MONTE_GCS_BOX_KEY_OP", "MONTE_GCS_BOX_KEY_FILE")])
def test_op_variable_without_op_on_path(var: str, alt: str, tmp_path: Path,
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    monkeypatch.setenv(var, "gcs")
    with pytest.raises(MonteError) as exc:
        write_key()
    assert_refusal(exc, var, "`op` is not on PATH")
    assert "1Password CLI" in exc.value.fix and alt in exc.value.fix


def test_op_failing_is_refused_with_its_first_stderr_line(tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch,
                                                          fake_op: FakeOp) -> None:
    fake_op({})
    monkeypatch.setenv("MONTE_GCS_KEY_OP", "gcs-missing")
    with pytest.raises(MonteError) as exc:
        read_key()
    assert_refusal(exc, "MONTE_GCS_KEY_OP", "isn't a document in any vault")
    assert "gcs-missing" not in str(exc.value)  # op echoes the name it was given: cut out


def test_op_stderr_is_cut_to_its_first_line_and_200_chars(tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch,
                                                          fake_op: FakeOp) -> None:
    fake_op({}, fail_stderr="\n" + "A" * 500 + "\nsecond line\n")
    monkeypatch.setenv("MONTE_GCS_BOX_KEY_OP", "gcs")
    with pytest.raises(MonteError) as exc:
        write_key()
    assert_refusal(exc, "MONTE_GCS_BOX_KEY_OP", "exit status 6", "A" * 200)
    assert "A" * 201 not in str(exc.value) and "second line" not in str(exc.value)


def test_op_printing_something_that_is_not_a_key(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                 fake_op: FakeOp) -> None:
    fake_op({"notes": f"my notes: {SECRET}\n"})
    monkeypatch.setenv("MONTE_GCS_KEY_OP", "notes")
    with pytest.raises(MonteError) as exc:
        read_key()
    assert_refusal(exc, "the 1Password document MONTE_GCS_KEY_OP names", "is not a JSON key file")


def test_op_hanging_is_refused_without_its_partial_output(tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch,
                                                          fake_op: FakeOp) -> None:
    fake_op({"slow": key_json("slow")}, sleep=30)
    monkeypatch.setattr(keys, "OP_TIMEOUT_S", 1.0)
    monkeypatch.setenv("MONTE_GCS_KEY_OP", "slow")
    with pytest.raises(MonteError) as exc:
        read_key()
    assert_refusal(exc, "MONTE_GCS_KEY_OP", "did not answer within 1 s")


# --- write_secret_file ---------------------------------------------------------------------------


@pytest.fixture
def open_umask() -> Iterator[None]:
    """The most permissive umask, so only monte's own mode bits can keep the file private."""
    old = os.umask(0)
    yield
    os.umask(old)


@pytest.mark.usefixtures("open_umask")
def test_write_secret_file_creates_0600_and_parents(tmp_path: Path) -> None:
    p = tmp_path / "a" / "b" / "key.json"
    write_secret_file(p, key_json("w").encode())
    assert stat.S_IMODE(p.stat().st_mode) == 0o600
    assert json.loads(p.read_bytes())["private_key"] == SECRET


@pytest.mark.usefixtures("open_umask")
def test_write_secret_file_tightens_an_existing_0644_file(tmp_path: Path) -> None:
    p = tmp_path / "key.json"
    p.write_text("x" * 1000)
    p.chmod(0o644)
    write_secret_file(p, b"short")
    assert stat.S_IMODE(p.stat().st_mode) == 0o600
    assert p.read_bytes() == b"short"  # truncated, not overwritten in place


PASTED = "{\n  \"type\": \"service_account\",\n  \"private_key\": \"-----BEGIN PRIVATE KEY-----\\n" + SECRET + "\"\n}\n"


@pytest.mark.parametrize("var", [*GCS_VARS, "--key-file"])
def test_a_key_pasted_where_its_path_or_name_belongs_is_refused_unquoted(
        var: str, monkeypatch: pytest.MonkeyPatch, fake_op: FakeOp) -> None:
    """``MONTE_GCS_KEY_FILE="$(cat key.json)"``: the value is the key. It is refused naming the
    variable only, and never reaches op's argv."""
    log = fake_op({})
    arg = None
    if var == "--key-file":
        arg = PASTED
    else:
        monkeypatch.setenv(var, PASTED)
    with pytest.raises(MonteError) as exc:
        write_key(arg)
    assert_refusal(exc, var, "looks like a key itself")
    assert "private_key" not in str(exc.value) and "BEGIN" not in str(exc.value)
    assert not log.exists()  # op never ran
