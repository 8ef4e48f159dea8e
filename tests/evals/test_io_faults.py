"""Faults outside the process never spend a test read that produced no score, and never make
monte write a ledger that fails its own verify. Each case was reproduced on the code before
this file: a read-only or full data root, a repository whose disk fills during the run, and a
`monte stop` from another host while the run goes on.

The file systems are real: small tmpfs mounts made by the test (skipped, with the reason, where
the machine forbids mounting). The one stand-in is the generation step in the subprocess cases,
wrapped to fill the disk or to wait at the right moment; the model itself still runs.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.helpers import fill, git, monte_proc, snapshot_state
from tests.support.helpers import tmpfs as mounted


@pytest.fixture
def tmpfs() -> Iterator[Any]:
    with contextlib.ExitStack() as stack:
        yield lambda path, size="4m": stack.enter_context(mounted(path, size))


def _remount(path: Path, mode: str) -> None:
    subprocess.run(["mount", "-o", f"remount,{mode}", str(path)], check=True, capture_output=True)


def _data_root_on(tmp: Path, repo: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for p in (repo / ".monte").iterdir():
        (shutil.copytree if p.is_dir() else shutil.copy2)(p, tmp / p.name)
    monkeypatch.setenv("MONTE_DATA_ROOT", str(tmp))
    return tmp


def _test_eval(monte):
    return monte("eval", "--split", "test", "--yes", "--json")


def test_a_read_only_data_root_spends_no_touch(repo: Path, monte, exp: str, tmpfs,
                                               tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # (16m: an eval copies the model it proves, 4 MB here, onto the data root before its read)
    root = _data_root_on(tmpfs(tmp_path / "ro-root", "16m"), repo, monkeypatch)
    _remount(root, "ro")
    before = snapshot_state(repo, root)
    r = _test_eval(monte)
    assert r.code == 7, r.out
    err = json.loads(r.out)["error"]
    assert err["code"] == "E_STORAGE" and "read-only" in err["message"] and "no test read was spent" in err["message"]
    assert snapshot_state(repo, root) == before
    _remount(root, "rw")
    r = _test_eval(monte)  # the touch is still there
    assert r.code == 0 and r.json()["runs"][0]["role"] == "baseline", r.out


def test_a_full_data_root_spends_no_touch(repo: Path, monte, exp: str, tmpfs, tmp_path: Path,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    root = _data_root_on(tmpfs(tmp_path / "full-root", "16m"), repo, monkeypatch)  # (the model's copy fits)
    filler = fill(root)
    before = snapshot_state(repo, root)
    r = _test_eval(monte)
    assert r.code == 7 and "the disk is full" in json.loads(r.out)["error"]["message"], r.out
    assert snapshot_state(repo, root) == before
    filler.unlink()
    assert _test_eval(monte).json()["runs"][0]["role"] == "baseline"


# the subprocess cases: generation is wrapped, at that one boundary, to act at the right moment
_WRAP = """
import os, sys, time
from pathlib import Path
import monte.models.generate as g
orig = g.generate
def generate(*a, **k):
    out = orig(*a, **k)
    if len(a[2]) <= 1:  # the preflight's one prompt, before `started`: the hook acts in the run itself
        return out
    hook = os.environ["MONTE_TEST_HOOK"]
    if hook == "fill":
        with open(os.environ["MONTE_TEST_FILL"], "wb") as f:
            try:
                while True:
                    f.write(bytes(1 << 16)); f.flush()
            except OSError:
                pass
    elif hook == "ro":
        import subprocess
        subprocess.run(["mount", "-o", "remount,ro", os.environ["MONTE_TEST_RO"]], check=True)
    elif hook == "wait":
        Path(os.environ["MONTE_TEST_READY"]).write_text("generated")
        while not Path(os.environ["MONTE_TEST_GO"]).exists():
            time.sleep(0.05)
    return out
g.generate = generate
from monte.cli.main import main
main(sys.argv[1:])
"""


def _wrapped(repo: Path, args: list[str], env: dict[str, str]) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-c", _WRAP, *args], cwd=repo, text=True, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env={**os.environ, **env})


def test_a_disk_that_fills_during_the_claim_keeps_the_score_and_recover_records_it(
        repo: Path, monte, exp: str, tmpfs, tmp_path: Path) -> None:
    objects = repo / ".git" / "objects"
    saved = tmp_path / "objects-copy"
    shutil.copytree(objects, saved)
    tmpfs(objects, "16m")
    shutil.copytree(saved, objects, dirs_exist_ok=True)
    filler = objects / "filler"
    p = _wrapped(repo, ["eval", "--split", "test", "--yes", "--json"],
                 {"MONTE_TEST_HOOK": "fill", "MONTE_TEST_FILL": str(filler)})
    out, err = p.communicate(timeout=300)
    assert p.returncode == 7, out + err
    e = json.loads(out)["error"]
    assert e["code"] == "E_STORAGE" and "kept in its run folder" in e["message"] and "monte recover" in e["fix"]
    assert not list(objects.rglob("*.lock"))  # a 0-byte object lock was left ("bad sha1 file")
    pending = list((repo / ".monte" / "runs" / "exp").glob("*/finish.json"))
    assert len(pending) == 1 and len(json.loads(pending[0].read_text())["tasks"]) == 200
    filler.unlink()
    r = monte("recover", "--json")
    assert r.code == 0, r.out
    (rec,) = r.json()
    assert rec["status"] == "succeeded" and rec["n"] == 200 and rec["score"] is not None
    row = monte("show", rec["run"], "--json").json()
    assert row["status"] == "succeeded" and row["role"] == "baseline" and row["score"] == rec["score"]
    assert not pending[0].exists()
    assert monte("ledger", "verify", "--all", "--json").code == 0
    fsck = subprocess.run(["git", "fsck", "--strict"], cwd=repo, capture_output=True, text=True)
    assert fsck.returncode == 0 and "error" not in fsck.stderr and "bad sha1" not in fsck.stderr, fsck.stderr
    r = _test_eval(monte)  # exactly one touch was spent: test@0 is taken
    assert r.code == 3 and json.loads(r.out)["error"]["code"] == "E_SEALED"


@pytest.mark.parametrize("how", ["full", "read-only"])
def test_a_data_root_that_fails_during_the_claim_still_records_the_score(
        repo: Path, monte, exp: str, tmpfs, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, how: str) -> None:
    """The data root filled up (or turned read-only) after the probe, while the answers were
    generated: the result could not be kept in the run folder, and the run was recorded failed,
    its test read spent without a score (found by bench/fault_campaign.py). The ledger, on
    another disk, can still take the score, and it is what counts."""
    root = _data_root_on(tmpfs(tmp_path / "data-root", "16m"), repo, monkeypatch)
    hook = {"MONTE_TEST_HOOK": "fill", "MONTE_TEST_FILL": str(root / "filler")} if how == "full" else \
        {"MONTE_TEST_HOOK": "ro", "MONTE_TEST_RO": str(root)}
    p = _wrapped(repo, ["eval", "--split", "test", "--yes", "--json"], hook)
    out, err = p.communicate(timeout=300)
    assert p.returncode == 0, out + err
    (run,) = json.loads(out)["runs"]
    assert run["status"] == "succeeded" and run["score"] is not None and run["n"] == 200
    row = monte("show", run["run"], "--json").json()
    assert row["status"] == "succeeded" and row["score"] == run["score"] and row["role"] == "baseline"
    assert monte("ledger", "verify", "--all", "--json").code == 0
    assert _test_eval(monte).json()["error"]["code"] == "E_SEALED"  # one touch, and it has its score


def test_a_stop_from_another_host_stands_and_verify_passes(repo: Path, monte, exp: str, tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    ready, go = tmp_path / "ready", tmp_path / "go"
    p = _wrapped(repo, ["eval", "--yes", "--json"],
                 {"MONTE_TEST_HOOK": "wait", "MONTE_TEST_READY": str(ready), "MONTE_TEST_GO": str(go)})
    try:
        deadline = time.monotonic() + 240
        while not ready.exists():
            assert p.poll() is None and time.monotonic() < deadline, p.communicate()
            time.sleep(0.1)
        run = git(repo, "log", "-1", "--format=%(trailers:key=Monte-Run,valueonly)", "refs/heads/monte/exp/ledger").strip()
        import socket

        monkeypatch.setattr(socket, "gethostname", lambda: "otherhost")  # `monte stop` on a second host
        r = monte("stop", run, "--json")
        assert r.code == 0 and r.json()["signalled"] is False, r.out
        go.write_text("go")
        out, err = p.communicate(timeout=120)
    finally:
        if p.poll() is None:
            p.kill()
    assert p.returncode == 3, out + err
    assert json.loads(out)["error"]["code"] == "E_CONFLICT"
    monkeypatch.undo()
    row = json.loads(git(repo, "show", f"refs/heads/monte/exp/ledger:runs/{run[0]}/{run[1]}/{run}/row.json"))
    assert row["status"] == "abandoned"
    assert (repo / ".monte" / "runs" / "exp" / run / "finish.json").exists()  # the late result is kept
    r = monte_proc("ledger", "verify", "--all", "--json", cwd=repo)
    assert r.returncode == 0, r.stdout
