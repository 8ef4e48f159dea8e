"""`monte eval --push`: the results bucket holds the run after each transition (the run starting,
its score landing as it finishes). The bucket here is a local folder, which needs no key; a
second, fresh repository syncs it and reads the same row."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from monte import api
from monte.storage import results
from monte.workspace import open_workspace
from tests.support.helpers import git, pushes_failing_on, run_events, snapshot_state


@pytest.fixture
def bucket(repo: Path, exp: str, tmp_path: Path) -> Path:
    """A local-folder results bucket, named in .monte.yaml as `monte config set bucket` does."""
    folder = tmp_path / "bucket"
    folder.mkdir()
    api.config_set(setting="bucket", url=str(folder))
    return folder


def test_eval_push_leaves_the_run_in_the_bucket_for_a_fresh_clone(repo: Path, monte, exp: str, bucket: Path,
                                                                 _template: Path, tmp_path: Path) -> None:
    r = monte("eval", "--push", "--yes", "--json")
    assert r.code == 0, r.out + r.err
    row = r.json()["runs"][0]
    run = row["run"]
    # the event file the bucket holds was pushed after the run's last event
    pushed = [json.loads(x) for x in (bucket / "runs" / "exp" / run / "events.jsonl").read_text().splitlines()]
    assert [e["event"] for e in pushed] == ["started", "succeeded"]
    assert not any(p.suffix == ".safetensors" for p in bucket.rglob("*"))
    # a second, fresh repository: nothing of the experiment until it syncs the bucket
    other = tmp_path / "other"
    shutil.copytree(_template, other, symlinks=True)
    ws2 = open_workspace(other)
    assert "monte/exp/ledger" not in git(other, "for-each-ref")
    out = api.sync(bucket=str(bucket), ws=ws2)
    assert [e.experiment for e in out.experiments] == ["exp"]
    rows = api.status(experiment="exp", ws=open_workspace(other))["rows"]
    mine = [x for x in rows if x["run"] == run]
    assert len(mine) == 1 and mine[0]["status"] == "succeeded" and mine[0]["score"] == row["score"]
    assert (other / ".monte" / "runs" / "exp" / run / "events.jsonl").is_file()


def test_the_plan_shows_the_push_and_a_dry_run_pushes_nothing(repo: Path, monte, exp: str, bucket: Path) -> None:
    before = snapshot_state(repo)
    r = monte("eval", "--push", "--dry-run")
    assert r.code == 0, r.out + r.err
    assert f"  push: results to {bucket} after each transition" in r.out.splitlines()
    r = monte("eval", "--push", "--dry-run", "--json")
    assert r.code == 0 and r.json()["plan"]["push"] is True and r.json()["plan"]["bucket"] == str(bucket)
    assert snapshot_state(repo) == before
    assert list(bucket.iterdir()) == []


def test_push_with_no_bucket_refuses_before_any_row(repo: Path, monte, exp: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MONTE_BUCKET", raising=False)
    refs = git(repo, "for-each-ref")
    before = snapshot_state(repo)
    r = monte("eval", "--push", "--yes", "--json")
    assert r.code == 7, r.out + r.err
    err = r.json()["error"]
    assert err["code"] == "E_STORAGE" and "no results bucket" in err["message"]
    assert "monte config set bucket" in err["fix"] and "MONTE_BUCKET" in err["fix"]
    assert git(repo, "for-each-ref") == refs
    assert snapshot_state(repo) == before


def test_a_smoke_eval_may_push(repo: Path, monte, exp: str, bucket: Path) -> None:
    r = monte("eval", "--smoke", "--push", "--yes", "--json")
    assert r.code == 0, r.out + r.err
    run = r.json()["runs"][0]["run"]
    assert (bucket / "runs" / "exp" / run / "events.jsonl").is_file()
    assert (bucket / "git" / "exp" / "refs" / "ledger").is_file()


def test_a_failed_push_mid_run_is_logged_and_the_run_goes_on(repo: Path, monte, exp: str, bucket: Path,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    calls = pushes_failing_on(monkeypatch, {1})  # the "started" push fails; the final one lands
    r = monte("eval", "--smoke", "--push", "--yes", "--json")
    assert r.code == 0, r.out + r.err
    run = r.json()["runs"][0]["run"]
    assert calls == [run, run]
    events = run_events(repo, run)
    failed = [e for e in events if e["event"] == "push-failed"]
    assert len(failed) == 1 and failed[0]["transition"] == "started" and failed[0]["code"] == "E_STORAGE"
    assert events[-1]["event"] == "succeeded"
    # the final push carried everything, the failure's record included
    pushed = (bucket / "runs" / "exp" / run / "events.jsonl").read_text()
    assert "push-failed" in pushed and '"succeeded"' in pushed


def test_a_failed_final_push_refuses_and_the_run_stays_recorded(repo: Path, monte, exp: str, bucket: Path,
                                                               tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # a real failure: after the run's first push lands, the bucket folder becomes a regular file
    # (the tests run as root, so permissions would not stop the write)
    real = results.push

    def push_then_break(ws: Any, experiment: str, **kw: Any) -> Any:
        out = real(ws, experiment, **kw)
        shutil.move(bucket, tmp_path / "bucket-moved")
        bucket.write_text("not a folder\n")
        monkeypatch.setattr(results, "push", real)
        return out

    monkeypatch.setattr(results, "push", push_then_break)
    r = monte("eval", "--smoke", "--push", "--yes", "--json")
    assert r.code == 7, r.out + r.err
    err = r.json()["error"]
    run = err["details"][0]["run"]
    assert err["code"] == "E_STORAGE"
    assert f"run {run} finished and is recorded locally" in err["message"]
    assert f"`monte push exp --run {run}` retries" in err["fix"]
    rows = {x["run"]: x for x in monte("status", "--json").json()["rows"]}
    assert rows[run]["status"] == "succeeded"
    assert [e["event"] for e in run_events(repo, run)][-2:] == ["succeeded", "push-failed"]
    # the retry the refusal names works once the bucket is back
    bucket.unlink()
    shutil.move(tmp_path / "bucket-moved", bucket)
    r = monte("push", "exp", "--run", run, "--json")
    assert r.code == 0, r.out + r.err
    assert '"succeeded"' in (bucket / "runs" / "exp" / run / "events.jsonl").read_text()
