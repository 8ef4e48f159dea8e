"""`monte eval --remote` / `monte train --remote` end to end, through a real sshd on loopback
(the box) and the real GCS emulator (the results bucket): the gate, the bundle, setup, the
secrets, the box's own sync, the tmux job with --push, then sync back and `monte status`.

The "box" is this machine reached over SSH, so its setup has nothing to install:
``MONTE_BOX_SETUP=true`` and the job runs monte with this interpreter (``MONTE_BOX_PYTHON``),
in the checkout the bundle made. Everything else is the real path a GPU box takes.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from monte.ledger.experiment import Ledger
from monte.ledger.store import Store
from tests.support.helpers import git, push_to_new_origin


@pytest.fixture
def laptop(repo: Path, monte: Any, base_model: Path, gcs: dict[str, str], monkeypatch: pytest.MonkeyPatch,
           tmp_path: Path, sshd: Any) -> dict[str, Any]:
    """A committed, pushed repository with one experiment on the tiny base model, a results
    bucket on the emulator, and the box settings pointing into this test's folder."""
    g = gcs
    assert monte("env", "add", "--server", "parity", "--dev", "parity", "--test", "parity").code == 0
    assert monte("experiment", "init", "exp", "--eval", "parity", "--model", str(base_model),
                 "--steps-per-chunk", "4").code == 0
    assert monte("config", "set", "bucket", g["url"] + "/results").code == 0
    push_to_new_origin(repo, tmp_path / "origin.git")
    box = tmp_path / "box"
    for k, v in sshd.box_env(box).items():
        monkeypatch.setenv(k, v)
    return {"repo": repo, "box": box, "host": sshd.login, "gcs": g}


def _wait_job(workdir: str, session: str, timeout: float = 240) -> str:
    exit_file = Path(workdir) / f"{session}.log.exit"
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if exit_file.exists() and exit_file.read_text().strip():
            return exit_file.read_text().strip()
        time.sleep(0.05)  # a short poll: the test waits on the job, not on its sleep
    log = Path(workdir) / f"{session}.log"
    raise AssertionError(f"the job did not finish: {log.read_text() if log.exists() else 'no log'}")


def test_remote_eval_runs_on_the_box_and_syncs_back(laptop: dict[str, Any], monte: Any) -> None:
    r = monte("eval", "--remote", "--provider", "ssh", "--host", laptop["host"], "--yes", "--json")
    assert r.code == 0, r.out
    sub = r.json()
    assert set(sub["timings"]) >= {"gate", "box", "bundle", "setup", "credentials", "sync", "job"}
    run = sub["runs"][0]
    # the laptop started the row (the touch is spent at submission) and names the box
    row = Ledger(Store(laptop["repo"]), "exp").row(run)
    assert row is not None and row.status == "started" and row.host.startswith("ssh:127.0.0.1")
    assert _wait_job(sub["workdir"], sub["session"]) == "0"
    # credentials landed as 0600 files, never in the job's argv
    etc = laptop["box"] / "etc"
    for f in ("secrets", "gcs-key.json"):
        assert stat.S_IMODE((etc / f).stat().st_mode) == 0o600
    assert json.loads((etc / "gcs-key.json").read_text())["type"] == "service_account"
    # the box checked out exactly the recorded commit
    assert git(Path(sub["workdir"]), "rev-parse", "HEAD").strip() == sub["commit"]
    r = monte("sync", "--json")
    assert r.code == 0, r.out
    status = monte("status", "--json").json()
    rows = {x["run"]: x for x in status["rows"]}
    assert rows[run]["status"] == "succeeded" and rows[run]["score"] is not None
    assert monte("ledger", "verify", "--json").code == 0


def test_remote_smoke_train_runs_on_the_box(laptop: dict[str, Any], monte: Any) -> None:
    """The box reads its training rows from the Vault (a folder here): the dataset frozen on the
    laptop is pushed there, and the box's `monte dataset show` fetches and proves it."""
    from tests.support.trainhelp import SFT, curriculum, write_recipe, write_sft_rows

    repo = laptop["repo"]
    (laptop["box"] / "vault").mkdir(parents=True)
    assert monte("config", "set", "vault", str(laptop["box"] / "vault")).code == 0
    rows = write_sft_rows(repo.parent / "sft.jsonl", curriculum(repo)[:64])
    r = monte("dataset", "add", "parity-sft", "--from-file", str(rows), "--kind", "sft", "--json")
    assert r.code == 0 and "pushed to the Vault" in r.json()["note"], r.out
    write_recipe(repo, "sft-t", SFT)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "a recipe and the Vault")
    git(repo, "push", "-q", "origin", "HEAD:main")
    git(repo, "fetch", "-q", "origin")
    r = monte("train", "--recipe", "sft-t", "--source", "parity-sft", "--smoke", "--remote",
              "--provider", "ssh", "--host", laptop["host"], "--yes", "--json")
    assert r.code == 0, r.out
    sub = r.json()
    assert _wait_job(sub["workdir"], sub["session"]) == "0", (Path(sub["workdir"]) / f"{sub['session']}.log").read_text()
    assert monte("sync").code == 0
    row = Ledger(Store(repo), "exp").row(sub["runs"][0])
    assert row is not None and row.status == "succeeded" and row.kind == "train" and row.smoke
    assert (laptop["box"] / "data" / "datasets" / "parity-sft" / "rows.jsonl").read_bytes() == rows.read_bytes()


def test_the_gate_refuses_a_dirty_tree_and_an_unpushed_commit(laptop: dict[str, Any], monte: Any) -> None:
    repo = laptop["repo"]
    before = git(repo, "for-each-ref", "refs/heads/monte/")
    (repo / "notes.txt").write_text("uncommitted\n")
    r = monte("eval", "--remote", "--provider", "ssh", "--host", laptop["host"], "--yes", "--json")
    assert r.code == 3 and "not clean" in r.json()["error"]["message"]
    git(repo, "add", "notes.txt")
    git(repo, "commit", "-q", "-m", "local only")
    r = monte("eval", "--remote", "--provider", "ssh", "--host", laptop["host"], "--yes", "--json")
    assert r.code == 3 and "origin does not contain HEAD" in r.json()["error"]["message"]
    assert git(repo, "for-each-ref", "refs/heads/monte/") == before


def test_remote_refuses_push_dry_run_and_a_path_recipe(laptop: dict[str, Any], monte: Any) -> None:
    host = ["--provider", "ssh", "--host", laptop["host"]]
    r = monte("eval", "--remote", "--push", *host, "--yes", "--json")
    assert r.code == 2 and "--push" in r.json()["error"]["message"]
    r = monte("eval", "--remote", "--dry-run", *host, "--json")
    assert r.code == 2
    r = monte("train", "--recipe", "./my.yaml", "--source", "parity", "--from-base", "--remote", *host,
              "--yes", "--json")
    assert r.code == 2 and "recipes/" in r.json()["error"]["fix"]


def test_a_connection_dropped_mid_setup_fails_the_row_with_the_reason(
        laptop: dict[str, Any], monte: Any, monkeypatch: pytest.MonkeyPatch, sshd: Any) -> None:
    import threading

    monkeypatch.setenv("MONTE_BOX_SETUP", "sleep 20")
    timer = threading.Timer(3.0, sshd.drop_connections)
    timer.start()
    try:
        r = monte("eval", "--remote", "--provider", "ssh", "--host", laptop["host"], "--yes", "--json")
    finally:
        timer.cancel()
    assert r.code == 8 and r.json()["error"]["code"] == "E_BOX", r.out
    rows = Ledger(Store(laptop["repo"]), "exp").rows()
    assert len(rows) == 1 and rows[0].status == "failed"
    assert "remote submission failed" in (rows[0].error or "")


def _descends(pid: int, ancestor: int) -> bool:
    for _ in range(64):
        if pid == ancestor:
            return True
        if pid <= 1:
            return False
        pid = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    return False


def test_secrets_never_reach_argv_or_the_record(laptop: dict[str, Any], monte: Any,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    from tests.support.gcs_emulator import FAKE_SECRET

    seen: list[str] = []
    stop = False

    def scan() -> None:
        while not stop:
            for pid in os.listdir("/proc"):
                if pid.isdigit():
                    try:  # this test's processes only (sshd and the box's job descend from it), not
                        # another xdist worker's
                        if _descends(int(pid), os.getpid()):
                            seen.append(Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace"))
                    except (OSError, ValueError, IndexError):
                        pass
            time.sleep(0.05)

    import threading

    t = threading.Thread(target=scan, daemon=True)
    t.start()
    try:
        r = monte("eval", "--remote", "--provider", "ssh", "--host", laptop["host"], "--yes", "--json")
        assert r.code == 0, r.out
        _wait_job(r.json()["workdir"], r.json()["session"])
    finally:
        stop = True
        t.join()
    assert seen and not any(FAKE_SECRET in c for c in seen)
    assert FAKE_SECRET not in r.out
    objects = subprocess.run(["git", "-C", str(laptop["repo"]), "cat-file", "--batch-all-objects", "--batch"],
                             capture_output=True).stdout
    assert FAKE_SECRET.encode() not in objects


def test_a_job_that_dies_on_the_box_reads_abandoned_after_the_next_sync(laptop: dict[str, Any], monte: Any) -> None:
    r = monte("eval", "--remote", "--provider", "ssh", "--host", laptop["host"], "--yes", "--json")
    assert r.code == 0, r.out
    sub = r.json()
    run = sub["runs"][0]
    events = laptop["box"] / "data" / "runs" / "exp" / run / "events.jsonl"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and not events.exists():  # the box's monte adopted the row
        time.sleep(0.02)
    assert events.exists(), "the job never adopted its row"
    # the job's monte process dies without a word (as the OOM killer would do it)
    killed = 0
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if f"--adopt=parity={run}".encode() in argv and argv[1:3] == [b"-m", b"monte"]:  # monte, not its shell
            os.kill(int(pid), 9)
            killed += 1
    assert killed == 1
    assert _wait_job(sub["workdir"], sub["session"]) == "137"
    assert monte("sync").code == 0
    row = Ledger(Store(laptop["repo"]), "exp").row(run)
    assert row is not None and row.status == "abandoned", row
    assert "exited with status 137" in (row.error or "")
    assert monte("ledger", "verify", "--json").code == 0
