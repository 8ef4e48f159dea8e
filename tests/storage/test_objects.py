"""monte/storage/objects.py: create-only writes and compare-and-swap on both backends, against
the real GCS emulator and a real folder."""

from __future__ import annotations

import json
import threading
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from monte.errors import MonteError
from monte.storage.keys import write_key
from monte.storage.object_stores import GcsStore, LocalStore, open_store


def test_the_emulator_ignores_if_generation_match(gcs: dict[str, str]) -> None:
    """Why monte has a fallback: the emulator overwrites an object that a create-only write
    (ifGenerationMatch=0) must not touch. Real GCS answers 412 here."""
    name = "probe-object"
    url = f"{gcs['host']}/upload/storage/v1/b/{gcs['bucket']}/o?uploadType=media&name={name}&ifGenerationMatch=0"
    for body in (b"first", b"second"):
        req = urllib.request.Request(url, data=body, method="POST", headers={"Content-Type": "text/plain"})
        with urllib.request.urlopen(req, timeout=10) as r:
            assert r.status == 200  # the second should have been 412 Precondition Failed
    got = urllib.request.urlopen(f"{gcs['host']}/download/storage/v1/b/{gcs['bucket']}/o/{name}?alt=media").read()
    assert got == b"second"


def _stores(tmp_path: Path, gcs: dict[str, str]) -> list[Any]:
    local = tmp_path / "folder-bucket"
    local.mkdir()
    return [LocalStore(local), open_store(gcs["url"] + "/pre/fix", write_key())]


def test_create_only_and_swap(tmp_path: Path, gcs: dict[str, str]) -> None:
    for store in _stores(tmp_path, gcs):
        assert store.create("claims/a.json", b"one")
        assert not store.create("claims/a.json", b"two")
        assert store.get("claims/a.json") == b"one"
        got = store.get_with_generation("claims/a.json")
        assert got is not None
        data, gen = got
        assert store.swap("claims/a.json", b"three", gen)
        assert not store.swap("claims/a.json", b"four", gen)  # stale generation
        assert store.get("claims/a.json") == b"three"
        assert not store.swap("claims/a.json", b"five", None)  # None: only if absent
        assert store.swap("claims/b.json", b"new", None)
        listing = store.list("claims/")
        assert sorted(listing) == ["claims/a.json", "claims/b.json"]
        assert listing["claims/b.json"].md5 == "22af645d1859cb5ca6da0c484f1f37ea"  # md5(b"new")
        assert store.get("claims/missing") is None


@pytest.mark.parametrize("backend", ["local", "gcs"])
def test_racing_creators_exactly_one_wins(tmp_path: Path, gcs: dict[str, str], backend: str) -> None:
    url = str(tmp_path / "race") if backend == "local" else gcs["url"]
    if backend == "local":
        (tmp_path / "race").mkdir()
    wins: list[int] = []
    errors: list[BaseException] = []

    def claim(i: int) -> None:
        try:
            store = open_store(url, write_key())  # each thread its own client, as separate machines
            if store.create("monte/claims/environments/shared.json", json.dumps({"who": i}).encode()):
                wins.append(i)
        except BaseException as e:  # noqa: BLE001
            errors.append(e)

    threads = [threading.Thread(target=claim, args=(i,)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert len(wins) == 1
    body = open_store(url, write_key()).get("monte/claims/environments/shared.json")
    assert json.loads(body or b"{}") == {"who": wins[0]}


def test_missing_bucket_and_folder_are_clear_storage_errors(tmp_path: Path, gcs: dict[str, str]) -> None:
    with pytest.raises(MonteError) as e:
        open_store("gs://no-such-bucket-here", write_key()).check()
    assert e.value.code == "E_STORAGE" and "does not exist" in e.value.message
    with pytest.raises(MonteError) as e:
        LocalStore(tmp_path / "nope").check()
    assert e.value.code == "E_STORAGE" and "mkdir" in e.value.fix


def test_a_read_only_key_fails_the_write_probe(gcs: dict[str, str], read_only_gcs: Any,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STORAGE_EMULATOR_HOST", read_only_gcs.host)
    store = open_store(gcs["url"], write_key())
    assert isinstance(store, GcsStore)
    assert store.can_write() is False
    assert store.get("anything") is None  # reads still work


def test_a_claim_left_by_a_writer_that_died_just_before_goes_stale_for_the_next(
        gcs: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> None:
    """The emulator ignores preconditions, so a create goes through a claim lock. A writer killed
    while it held one (the results push under `tests/storage/test_results.py`'s killed emulator)
    left a claim a moment older than the next writer's: measured against the next writer's own
    claim only, it stayed fresh for as long as that writer waited, which refused after two minutes
    (E_STORAGE "could not take the lock"). The waiting writer now reads the store's clock."""
    import hashlib
    import time

    from monte.storage import object_stores

    monkeypatch.setattr(object_stores, "_CLAIM_STALE_S", 3.0)  # a minute in the product; seconds here
    store = open_store(gcs["url"] + "/dead", write_key())
    name = "monte/claims/environments/after-a-death.json"
    folder = f"monte/.locks/{hashlib.sha256(name.encode()).hexdigest()[:32]}/"
    store.put(folder + "0" * 32, b"")  # the dead writer's claim, just before ours
    t0 = time.monotonic()
    assert store.create(name, b"mine")
    assert time.monotonic() - t0 < 30, "the dead writer's claim never went stale"
    assert store.get(name) == b"mine"
    assert list(store.list("monte/.locks/clock/")) == []  # the clock's probes are removed
