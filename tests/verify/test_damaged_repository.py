"""Issue 43, case 8: a damaged repository or an input that never ends is a named refusal.

On main each of these ended in ``E_INTERNAL`` (exit 1, "monte hit an unexpected error"): a loose
object whose file holds another object (dulwich's ``ChecksumMismatch``, in status, verify and
eval), a malformed ``.git/info/grafts``, ``.git/monte/seal`` made a file, and ``env add --dev
file:/dev/zero`` read without end (a FIFO hung). Each now refuses with its code, names what is
wrong and how to fix it, and writes nothing.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from tests.support.helpers import snapshot_state
from tests.verify.forgehelp import Honest, ledger_ref, rev


def _refused(r, code: str, *words: str) -> dict:
    assert r.code not in (0, 1), r.out
    err = r.json()["error"]
    assert err["code"] == code and "unexpected" not in err["message"], err
    for w in words:
        assert w in err["message"] + err["fix"], err
    return err


def test_a_substituted_loose_object_is_named(honest: Honest, monte) -> None:
    tip = rev(honest.path, ledger_ref())
    assert tip is not None
    parent = rev(honest.path, f"{tip}~1")
    assert parent is not None
    objects = honest.path / ".git" / "objects"
    mine, theirs = objects / tip[:2] / tip[2:], objects / parent[:2] / parent[2:]
    if not (mine.is_file() and theirs.is_file()):
        pytest.skip("the template's objects are packed")
    os.chmod(mine, 0o644)
    shutil.copyfile(theirs, mine)  # the tip's name, the parent's bytes
    before = snapshot_state(honest.path)
    for args in (("status",), ("ledger", "verify"), ("eval", "--split", "test", "--dry-run")):
        _refused(monte(*args, "--json"), "E_INTEGRITY", tip, "git fsck")
    assert snapshot_state(honest.path) == before


def test_malformed_grafts_are_named(honest: Honest, monte) -> None:
    (honest.path / ".git" / "info").mkdir(exist_ok=True)
    (honest.path / ".git" / "info" / "grafts").write_text("not a graft line\n")
    for args in (("status",), ("ledger", "verify")):
        _refused(monte(*args, "--json"), "E_INTEGRITY", "grafts")


def test_the_seal_folder_made_a_file_refuses_before_the_read(honest: Honest, monte) -> None:
    sel = honest["selected"]
    assert monte("nominate", f"{sel}@{50 if sel == honest['a'] else 100}").code == 0
    seal = honest.path / ".git" / "monte" / "seal"
    shutil.rmtree(seal, ignore_errors=True)
    seal.write_text("not a folder\n")
    before = snapshot_state(honest.path)
    _refused(monte("eval", "--split", "test", "--yes", "--json"), "E_STORAGE", str(seal), "move")
    assert snapshot_state(honest.path) == before


@pytest.mark.parametrize("what", ["device", "fifo", "oversized"])
def test_an_exam_file_that_never_ends_is_refused(honest: Honest, monte, tmp_path: Path, what: str) -> None:
    from monte.envs.jsonl_exam import MAX_EXAM_BYTES

    test = tmp_path / "test.jsonl"
    test.write_text('{"id": 1, "prompt": "p 1 =", "answer": "odd"}\n')
    if what == "device":
        dev = Path("/dev/zero")
    elif what == "fifo":
        dev = tmp_path / "fifo"
        os.mkfifo(dev)
    else:
        dev = tmp_path / "big.jsonl"
        with open(dev, "wb") as f:
            f.truncate(MAX_EXAM_BYTES + 1)  # sparse: no disk spent
    before = snapshot_state(honest.path)
    r = monte("env", "add", "--dev", f"file:{dev}", "--test", f"file:{test}", "--grader", "exact", "--as", "z",
              "--json")
    err = _refused(r, "E_BAD_INPUT", str(dev))
    if what == "oversized":
        assert str(MAX_EXAM_BYTES) in err["message"], err
    assert snapshot_state(honest.path) == before
