"""`monte push` / `monte sync` against the real GCS emulator: two clones of one repository (a
laptop and a box) sharing one results bucket."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from monte.ledger.experiment import Ledger
from monte.ledger.store import Store
from monte.storage.keys import write_key
from monte.storage.object_stores import open_store
from tests.support.gcs_emulator import Outage
from tests.support.helpers import append_evals, git, monte_proc, new_machine, snapshot_state


def _runs(repo: Path, exp: str = "exp") -> set[str]:
    return {r.run for r in Ledger(Store(repo), exp).rows()}


@pytest.fixture
def laptop(repo: Path, gcs: dict[str, str], monte: Any) -> Path:
    assert monte("env", "add", "--benchmark", "parity").code == 0
    assert monte("experiment", "init", "exp", "--eval", "parity").code == 0
    assert monte("config", "set", "bucket", gcs["url"] + "/results").code == 0
    return repo


def _box(laptop: Path, tmp_path: Path) -> Path:
    """A second clone: the repository's files, no monte refs, its own data root."""
    box = new_machine(laptop, tmp_path / "box")
    assert not git(box, "for-each-ref", "refs/heads/monte/exp/")
    return box


def test_push_then_sync_into_another_clone(laptop: Path, monte: Any, monkeypatch: pytest.MonkeyPatch,
                                           tmp_path: Path) -> None:
    runs = append_evals(laptop, 3)
    r = monte("push", "--json")
    assert r.code == 0, r.out
    assert r.json()["packs"] == 1 and r.json()["files"] == 3
    again = monte("push", "--json").json()
    assert (again["packs"], again["refs"], again["files"], again["uploaded_bytes"]) == (0, 0, 0, 0)

    box = _box(laptop, tmp_path)
    monkeypatch.chdir(box)
    r = monte("sync", "--json")
    assert r.code == 0, r.out
    assert r.json()["experiments"][0]["ledger"] == "fast-forward"
    assert _runs(box) == set(runs)
    assert git(box, "rev-parse", "refs/remotes/results/monte/exp/ledger") == git(laptop, "rev-parse", "monte/exp/ledger")
    for rid in runs:
        assert (box / ".monte" / "runs" / "exp" / rid / "events.jsonl").is_file()
    git(box, "fsck", "--strict")
    assert monte("ledger", "verify", "--json").code == 0
    assert monte("status", "--json").code == 0


def test_two_clones_append_and_both_read_the_union(laptop: Path, monte: Any, monkeypatch: pytest.MonkeyPatch,
                                                   tmp_path: Path) -> None:
    first = append_evals(laptop, 2)
    assert monte("push").code == 0
    box = _box(laptop, tmp_path)
    monkeypatch.chdir(box)
    assert monte("sync").code == 0
    on_box = append_evals(box, 2)
    assert monte("push").code == 0
    monkeypatch.chdir(laptop)
    on_laptop = append_evals(laptop, 2)  # diverged: neither side has the other's new runs
    r = monte("push", "--json")
    assert r.code == 0, r.out
    assert r.json()["merged"] == ["ledger"]  # the bucket moved: merged, then pushed the union
    assert _runs(laptop) == set(first + on_box + on_laptop)
    monkeypatch.chdir(box)
    r = monte("sync", "--json")
    assert r.json()["experiments"][0]["ledger"] == "fast-forward"
    assert _runs(box) == set(first + on_box + on_laptop)
    rows = Ledger(Store(box), "exp").rows()
    assert len(rows) == len({r.run for r in rows}) == 6  # nothing lost, nothing duplicated
    for repo in (laptop, box):
        monkeypatch.chdir(repo)
        assert monte("ledger", "verify", "--json").code == 0, repo
        git(repo, "fsck", "--strict")


def test_racing_pushes_from_two_clones_lose_nothing(laptop: Path, monte: Any, monkeypatch: pytest.MonkeyPatch,
                                                    tmp_path: Path) -> None:
    assert monte("push").code == 0
    box = _box(laptop, tmp_path)
    monkeypatch.chdir(box)
    assert monte("sync").code == 0
    a = append_evals(laptop, 3)
    b = append_evals(box, 3)
    procs = [subprocess.Popen([sys.executable, "-c", "from monte.cli.main import main; main(['push', '--json'])"],
                              cwd=c, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for c in (laptop, box)]
    for p in procs:
        out, err = p.communicate(timeout=120)
        assert p.returncode == 0, out + err
    third = _box(laptop, tmp_path / "third")
    monkeypatch.chdir(third)
    assert monte("sync").code == 0
    assert _runs(third) == set(a + b)


def test_gcs_vanishing_mid_push_loses_and_duplicates_nothing(
        laptop: Path, monte: Any, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, emulator: Any) -> None:
    runs = append_evals(laptop, 40)
    outage = Outage(emulator.port)  # GCS vanishing from the network (see Outage for why not a kill)
    monkeypatch.setenv("STORAGE_EMULATOR_HOST", outage.host)
    # GCS stays gone until this push ends: a second of retries reaches the same E_STORAGE as five
    env = {**os.environ, "MONTE_GCS_RETRY_S": "1"}
    proc = subprocess.Popen([sys.executable, "-c", "from monte.cli.main import main; main(['push', '--json'])"],
                            cwd=laptop, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    time.sleep(0.6)
    outage.cut()
    try:
        out, _ = proc.communicate(timeout=120)
        assert proc.returncode in (0, 7), out  # done before the cut, or a clean E_STORAGE
        if proc.returncode == 7:
            assert '"E_STORAGE"' in out
    finally:
        outage.restore()
    r = monte("push", "--json")
    assert r.code == 0, r.out
    box = _box(laptop, tmp_path)
    monkeypatch.chdir(box)
    assert monte("sync").code == 0
    rows = Ledger(Store(box), "exp").rows()
    assert {r.run for r in rows} == set(runs) and len(rows) == 40
    assert monte("ledger", "verify", "--json").code == 0


def test_a_tampered_pack_is_refused_on_sync(laptop: Path, monte: Any, monkeypatch: pytest.MonkeyPatch,
                                            tmp_path: Path, gcs: dict[str, str]) -> None:
    append_evals(laptop, 2)
    assert monte("push").code == 0
    store = open_store(gcs["url"] + "/results", write_key())
    pack = next(iter(store.list("git/exp/packs/")))
    data = bytearray(store.get(pack) or b"")
    data[40] ^= 0xFF
    store.put(pack, bytes(data))
    box = _box(laptop, tmp_path)
    monkeypatch.chdir(box)
    before = snapshot_state(box)
    r = monte("sync", "--json")
    assert r.code == 5 and r.json()["error"]["code"] == "E_INTEGRITY", r.out
    assert snapshot_state(box)["refs"] == before["refs"]


def test_push_never_uploads_weights(laptop: Path, monte: Any, gcs: dict[str, str]) -> None:
    runs = append_evals(laptop, 1)
    folder = laptop / ".monte" / "runs" / "exp" / runs[0]
    ckpt = folder / "trainer" / "checkpoint-50"
    ckpt.mkdir(parents=True)
    (ckpt / "model.safetensors").write_bytes(b"\0" * 1000)
    (ckpt / "optimizer.pt").write_bytes(b"\0" * 1000)
    (ckpt / "trainer_state.json").write_text("{}")
    r = monte("push", "--json")
    assert r.code == 0, r.out
    names = open_store(gcs["url"] + "/results", write_key()).list("runs/")
    assert any(n.endswith("trainer_state.json") for n in names)
    assert not any(n.endswith((".safetensors", ".pt")) for n in names)
    (folder / "stray.safetensors").write_bytes(b"\0" * 10)  # a weight file outside the trainer's folders
    before = open_store(gcs["url"] + "/results", write_key()).list("")
    r = monte("push", "--json")
    assert r.code == 3 and r.json()["error"]["code"] == "E_REFUSED" and "stray.safetensors" in r.out
    assert open_store(gcs["url"] + "/results", write_key()).list("") == before


def test_no_key_no_bucket_and_a_missing_bucket_are_storage_errors(laptop: Path, monte: Any, gcs: dict[str, str],
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MONTE_GCS_BOX_KEY_FILE")
    monkeypatch.delenv("MONTE_GCS_KEY_FILE")
    r = monte("push", "--json")
    assert r.code == 7 and "MONTE_GCS_BOX_KEY_FILE" in r.json()["error"]["fix"]
    r = monte("sync", "--json")
    assert r.code == 7 and "MONTE_GCS_KEY_FILE" in r.json()["error"]["fix"]
    r = monte("push", "--bucket", "gs://no-such-results-bucket", "--key-file", gcs["key"], "--json")
    assert r.code == 7 and "does not exist" in r.json()["error"]["message"]
    (laptop / ".monte.yaml").write_text("version: 1\n")
    r = monte("push", "--json")
    assert r.code == 7 and "monte config set bucket" in r.json()["error"]["fix"]


def test_a_local_folder_bucket_works_with_no_key(repo: Path, monte: Any, monkeypatch: pytest.MonkeyPatch,
                                                 tmp_path: Path) -> None:
    assert monte("env", "add", "--benchmark", "parity").code == 0
    assert monte("experiment", "init", "exp", "--eval", "parity").code == 0
    (tmp_path / "bucket").mkdir()
    runs = append_evals(repo, 2)
    r = monte_proc("push", "--bucket", str(tmp_path / "bucket"), "--json", cwd=repo)
    assert r.returncode == 0, r.stdout + r.stderr
    box = _box(repo, tmp_path)
    r = monte_proc("sync", "--bucket", str(tmp_path / "bucket"), "--json", cwd=box)
    assert r.returncode == 0, r.stdout + r.stderr
    assert _runs(box) == set(runs)


def test_a_mirror_synced_into_another_repository_verifies(repo: Path, monte: Any, tmp_path: Path) -> None:
    """Issue 30.4: `monte sync` into a repository that never froze the environment. On the code
    before, the vault ref did not travel through the bucket: `monte ledger verify --all` there
    refused E_VERIFY "[frozen-hashes] no vault ref holds environment 'parity'" (forged, it said)."""
    assert monte("env", "add", "--benchmark", "parity").code == 0
    assert monte("experiment", "init", "exp", "--eval", "parity").code == 0
    bucket = tmp_path / "bucket"
    bucket.mkdir()
    runs = append_evals(repo, 2)
    r = monte_proc("push", "--bucket", str(bucket), "--json", cwd=repo)
    assert r.returncode == 0, r.stdout + r.stderr
    other = tmp_path / "other"  # another repository: its own git init and monte init, no vault ref
    subprocess.run(["git", "init", "-q", "-b", "main", str(other)], check=True)
    assert monte_proc("init", "--no-hooks", cwd=other).returncode == 0
    assert not git(other, "for-each-ref", "refs/heads/monte/")
    r = monte_proc("sync", "--bucket", str(bucket), "--json", cwd=other)
    assert r.returncode == 0, r.stdout + r.stderr
    assert _runs(other) == set(runs)
    assert git(other, "rev-parse", "refs/heads/monte/vault") == git(repo, "rev-parse", "refs/heads/monte/vault")
    r = monte_proc("ledger", "verify", "--all", "--json", cwd=other)
    assert r.returncode == 0, r.stdout + r.stderr
    # and a second push from the first repository, nothing new: the vault ref is not sent again
    r = monte_proc("push", "--bucket", str(bucket), "--json", cwd=repo)
    assert r.returncode == 0 and '"refs":0' in r.stdout.replace(" ", ""), r.stdout


def test_a_key_that_cannot_write_refuses_push_and_changes_nothing(laptop: Path, monte: Any, read_only_gcs: Any,
                                                                  monkeypatch: pytest.MonkeyPatch,
                                                                  gcs: dict[str, str]) -> None:
    append_evals(laptop, 1)
    monkeypatch.setenv("STORAGE_EMULATOR_HOST", read_only_gcs.host)  # this machine's key may only read
    before = snapshot_state(laptop)
    r = monte("push", "--json")
    err = r.json()["error"]
    assert r.code == 7 and err["code"] == "E_STORAGE" and "may not write" in err["message"], r.out
    assert "MONTE_GCS_BOX_KEY_FILE" in err["fix"]
    assert snapshot_state(laptop)["refs"] == before["refs"]
    monkeypatch.setenv("STORAGE_EMULATOR_HOST", gcs["host"])
    assert open_store(gcs["url"] + "/results", write_key()).list("") == {}
