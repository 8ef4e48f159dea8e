"""`monte.ledger.objcache` and the fast state read of `Ledger.rows`: the cache of raw objects can
only make a read faster, never different. A forged or torn entry is never used (its bytes do not
hash to its id) and `objcache.check` names it for `monte ledger verify`."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from monte.ledger import objcache
from monte.ledger.experiment import Ledger, experiment_names
from monte.ledger.ids import new_run_id
from monte.ledger.records import RunRow, row_from_index
from monte.ledger.store import Store
from tests.ledger.test_experiment_ledger import EXP, MEASUREMENT, append, row


def _ledger(repo: Path, n: int) -> Ledger:
    led = Ledger(Store(repo), EXP)
    led.create(MEASUREMENT)
    for i in range(n):
        append(led, row(new_run_id(), score=i / max(n, 1), plan={"target": {"kind": "base"}}, extra_field=i))
    return led


def _slow_rows(led: Ledger) -> list[dict[str, object]]:
    """The rows as the plain path reads them: every ``row.json`` through pydantic."""
    snap = led.snapshot()
    out = [RunRow.model_validate_json(snap.read(f"runs/{a}/{b}/{r}/row.json") or b"")
           for a in snap.listdir("runs") for b in snap.listdir(f"runs/{a}")
           for r in snap.listdir(f"runs/{a}/{b}") if r != "index.json"]
    return [r.model_dump(mode="json") for r in sorted(out, key=lambda r: r.seq)]


@pytest.fixture
def big(repo: Path, monkeypatch: pytest.MonkeyPatch) -> Ledger:
    monkeypatch.setattr(objcache, "MIN_OBJECTS", 8)  # a cache file for a ledger of a few runs
    return _ledger(repo, 40)


def test_row_from_index_is_model_construct() -> None:
    data: dict[str, Any] = {"run": "abc", "experiment": "e", "kind": "eval", "status": "started", "plan": {"a": 1}, "later": 3}
    fast, slow = row_from_index(dict(data)), RunRow.model_construct(**data)
    assert fast == slow and fast.model_dump() == slow.model_dump()
    assert fast.__pydantic_fields_set__ == slow.__pydantic_fields_set__
    assert fast.model_copy(update={"status": "running"}).status == "running"
    assert row_from_index({"run": "x", "experiment": "e", "kind": "eval", "status": "started"}).plan == {}


def test_rows_read_through_the_cache_equal_the_rows_read_without(big: Ledger, repo: Path) -> None:
    want = _slow_rows(big)
    path = objcache.cache_path(repo / ".git", EXP)
    assert [r.model_dump(mode="json") for r in big.rows()] == want  # cold: reads git, writes the file
    assert path.is_file()
    assert [r.model_dump(mode="json") for r in big.rows()] == want  # warm: from the file
    append(big, row(new_run_id()))  # a new record: its objects are not in the file yet
    assert [r.model_dump(mode="json") for r in big.rows()] == _slow_rows(big)
    assert objcache.check(repo / ".git") == []


def test_a_forged_cache_entry_is_never_used_and_verify_names_it(big: Ledger, repo: Path) -> None:
    want = _slow_rows(big)
    big.rows()
    path = objcache.cache_path(repo / ".git", EXP)
    data = path.read_bytes()
    at = data.index(b'"score":')  # a score inside a cached index blob, changed in place
    forged = data[:at] + b'"score":9' + data[at + 9:]
    assert forged != data and len(forged) == len(data)
    path.write_bytes(forged)
    assert any("not their id" in line for line in objcache.check(repo / ".git"))
    assert [r.model_dump(mode="json") for r in big.rows()] == want  # read from git instead
    assert objcache.check(repo / ".git") == []  # and the file rewritten honest


def test_a_torn_or_foreign_cache_file_is_ignored(big: Ledger, repo: Path) -> None:
    want = _slow_rows(big)
    big.rows()
    path = objcache.cache_path(repo / ".git", EXP)
    path.write_bytes(path.read_bytes()[:-100])
    assert [r.model_dump(mode="json") for r in big.rows()] == want
    path.write_bytes(b"something else")
    assert [r.model_dump(mode="json") for r in big.rows()] == want
    assert objcache.check(repo / ".git") in ([], [f"{path.name}: not a monte object cache"])


def test_small_ledger_writes_no_cache(repo: Path) -> None:
    led = _ledger(repo, 3)
    assert len(led.rows()) == 3
    assert not objcache.cache_path(repo / ".git", EXP).exists()


def test_experiment_names_loose_and_packed(repo: Path) -> None:
    _ledger(repo, 1)
    Ledger(Store(repo), "other").create(MEASUREMENT.model_copy(update={"experiment": "other"}))
    assert experiment_names(Store(repo)) == [EXP, "other"]
    subprocess.run(["git", "-C", str(repo), "pack-refs", "--all"], check=True)
    assert experiment_names(Store(repo)) == [EXP, "other"]
    subprocess.run(["git", "-C", str(repo), "update-ref", "refs/heads/monte/x/lineage/abc",
                    f"refs/heads/monte/{EXP}/ledger"], check=True, env={**os.environ, "MONTE_HOOKS": "off"})
    assert experiment_names(Store(repo)) == [EXP, "other"]


def test_verify_fails_on_a_forged_cache(big: Ledger, repo: Path) -> None:
    from monte import api
    from monte.errors import MonteError
    from monte.workspace import open_workspace

    big.rows()
    path = objcache.cache_path(repo / ".git", EXP)
    data = path.read_bytes()
    at = data.index(b'"score":')
    path.write_bytes(data[:at] + b'"score":9' + data[at + 9:])
    with pytest.raises(MonteError) as e:
        api.ledger_verify(experiment=EXP, ws=open_workspace(repo, require_data_root=False))
    assert e.value.code == "E_VERIFY" and "[cache]" in str(e.value)


def test_a_writer_killed_mid_write_leaves_nothing_for_long(big: Ledger, repo: Path) -> None:
    path = objcache.cache_path(repo / ".git", EXP)
    big.rows()
    left = path.with_name(f".{path.name}.999999.1.tmp")
    left.write_bytes(b"half a file")
    os.utime(left, (1, 1))  # long ago
    path.unlink()
    big.rows()  # cold again: writes the file, and sweeps what a dead writer left
    assert path.is_file() and not left.exists()
