"""`monte push` / `monte sync` refuse a union that breaks the test seal: two clones of one
repository (a laptop and a box) each made the final claim on top of the same test@0 and share
one results bucket, a local folder or the GCS emulator.

Each machine's claim was checked on its own tip; the merge is where the two reads first meet.
Push and sync refuse it ``E_SEALED`` (exit 3), naming both runs and both hosts, before anything
is uploaded (the bucket's listing is unchanged) and before any ref here moves (the ledger, the
lineage and the mirror refs) or any run file lands. An honest divergence still merges.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from monte.ledger.experiment import Ledger
from monte.ledger.ids import new_run_id
from monte.ledger.records import RunRow
from monte.ledger.store import Store
from monte.storage.keys import write_key
from monte.storage.object_stores import open_store
from tests.support.helpers import git, snapshot_state

EXP = "exp"


@pytest.fixture(params=["folder", "gcs"])
def bucket(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "gcs":
        return str(request.getfixturevalue("gcs")["url"]) + "/results"
    (tmp_path / "bucket").mkdir()
    return str(tmp_path / "bucket")


def _listing(url: str) -> dict[str, str]:
    """Every object in the bucket, with its generation (a rewrite changes it)."""
    store = open_store(url, write_key() if url.startswith("gs://") else None)
    return {name: st.generation for name, st in store.list("").items()}


def _machine(repo: Path, dest: Path) -> Path:
    """Another machine's clone: the repository's files, no monte refs but the Vault's, its own
    data root and none of the experiment's objects."""
    shutil.copytree(repo, dest, symlinks=True, ignore=shutil.ignore_patterns(".monte"))
    (dest / ".monte").mkdir()

    def by_hand(*args: str) -> None:  # monte's hooks refuse a deleted monte ref: stand them aside
        subprocess.run(["git", "-C", str(dest), *args], check=True, env={**os.environ, "MONTE_HOOKS": "off"})

    for ref in git(dest, "for-each-ref", "--format=%(refname)", "refs/heads/monte/", "refs/remotes/").split():
        if "/vault" not in ref:
            by_hand("update-ref", "-d", ref)
    shutil.rmtree(dest / ".git" / "monte", ignore_errors=True)
    by_hand("reflog", "expire", "--expire=now", "--all")
    by_hand("gc", "-q", "--prune=now")
    assert not git(dest, "for-each-ref", f"refs/heads/monte/{EXP}/")
    return dest


def _eval(repo: Path, host: str, split: str = "test", role: str | None = None) -> str:
    """One eval run started on ``host`` (a touch is spent when the eval starts), through the
    ledger's own API, with an event file on the data root for push to send."""
    rid = new_run_id()
    target = {"kind": "base"} if role == "baseline" else {"kind": "checkpoint", "run": "tr0", "step": 50}
    Ledger(Store(repo), EXP).append_row(
        lambda snap, seq: RunRow(run=rid, experiment=EXP, kind="eval", status="started", cohort="c", exam="parity",
                                 split=split, role=role, host=host, created_at="t", plan={"target": target}),
        event="started", summary=lambda r: f"eval {r.run} started")
    folder = repo / ".monte" / "runs" / EXP / rid
    folder.mkdir(parents=True)
    (folder / "events.jsonl").write_text(f'{{"event": "started", "run": "{rid}"}}\n')
    return rid


def _runs(repo: Path) -> set[str]:
    return {r.run for r in Ledger(Store(repo), EXP).rows()}


@pytest.fixture
def two_machines(repo: Path, bucket: str, monte: Any, monkeypatch: pytest.MonkeyPatch,
                 tmp_path: Path) -> tuple[Path, Path, str]:
    """The laptop took test@0 and pushed; the box synced it: both start from the same tip."""
    assert monte("env", "add", "--benchmark", "parity").code == 0
    assert monte("experiment", "init", EXP, "--eval", "parity").code == 0
    _eval(repo, "laptop", role="baseline")
    assert monte("push", "--bucket", bucket).code == 0
    box = _machine(repo, tmp_path / "box")
    monkeypatch.chdir(box)
    r = monte("sync", "--bucket", bucket, "--json")
    assert r.code == 0, r.out
    monkeypatch.chdir(repo)
    return repo, box, bucket


def _claims(laptop: Path, box: Path, bucket: str, monte: Callable[..., Any], chdir: Callable[[Path], None]) -> tuple[str, str]:
    """Each machine makes its final claim; the laptop pushes first."""
    mine, yours = _eval(laptop, "laptop", role="claim"), _eval(box, "box", role="claim")
    chdir(laptop)
    r = monte("push", "--bucket", bucket, "--json")
    assert r.code == 0 and r.json()["merged"] == [], r.out
    chdir(box)
    return mine, yours


def _sealed(r: Any, *runs: str) -> None:
    assert r.code == 3, r.out
    err = r.json()["error"]
    assert err["code"] == "E_SEALED" and err["exit_code"] == 3
    for name in (*runs, "host laptop", "host box", "two final claims"):
        assert name in err["message"], err["message"]
    assert "decide which claim stands" in err["fix"] and "docs/reliability.md" in err["fix"]


def test_push_refuses_to_merge_a_second_machines_claim(two_machines: tuple[Path, Path, str], monte: Any,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    laptop, box, bucket = two_machines
    mine, yours = _claims(laptop, box, bucket, monte, monkeypatch.chdir)
    listing, state = _listing(bucket), snapshot_state(box)
    r = monte("push", "--bucket", bucket, "--json")
    _sealed(r, mine, yours)
    assert _listing(bucket) == listing  # no pack, no ref, no run file uploaded
    assert snapshot_state(box) == state  # the ledger, lineage and mirror refs; the data root
    assert mine not in _runs(box) and yours in _runs(box)
    git(box, "fsck", "--strict")
    r = monte("status", "--json")
    assert r.code == 0, r.out
    # refused again, the same way, on a second try: nothing was half-done
    assert monte("push", "--bucket", bucket, "--json").code == 3 and _listing(bucket) == listing
    # the laptop's record stands in the bucket, as it stands on the laptop
    monkeypatch.chdir(laptop)
    r = monte("sync", "--bucket", bucket, "--json")
    assert r.code == 0 and r.json()["experiments"][0]["ledger"] == "up-to-date", r.out
    assert yours not in _runs(laptop)


def test_sync_refuses_to_merge_the_other_machines_claim(two_machines: tuple[Path, Path, str], monte: Any,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    laptop, box, bucket = two_machines
    mine, yours = _claims(laptop, box, bucket, monte, monkeypatch.chdir)
    listing, state = _listing(bucket), snapshot_state(box)
    r = monte("sync", "--bucket", bucket, "--json")
    _sealed(r, mine, yours)
    assert snapshot_state(box) == state  # the ledger and mirror refs, and nothing under the data root
    assert not (box / ".monte" / "runs" / EXP / mine).exists()
    assert _listing(bucket) == listing
    assert mine not in _runs(box)
    assert monte("sync", EXP, "--bucket", bucket, "--json").code == 3  # by name too


def test_a_claim_on_one_machine_and_dev_evals_on_both_still_merge(two_machines: tuple[Path, Path, str],
                                                                  monte: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    laptop, box, bucket = two_machines
    claim = _eval(laptop, "laptop", role="claim")
    dev_laptop = _eval(laptop, "laptop", split="dev")
    assert monte("push", "--bucket", bucket).code == 0
    monkeypatch.chdir(box)
    dev_box = _eval(box, "box", split="dev")
    r = monte("push", "--bucket", bucket, "--json")
    assert r.code == 0 and r.json()["merged"] == ["ledger"], r.out
    assert {claim, dev_laptop, dev_box} <= _runs(box)
    monkeypatch.chdir(laptop)
    r = monte("sync", "--bucket", bucket, "--json")
    assert r.code == 0 and r.json()["experiments"][0]["ledger"] == "fast-forward", r.out
    assert _runs(laptop) == _runs(box)
    assert (laptop / ".monte" / "runs" / EXP / dev_box / "events.jsonl").is_file()


def test_two_machines_pushing_their_claims_at_once_one_wins(two_machines: tuple[Path, Path, str],
                                                           monte: Any) -> None:
    """A race: both pushes read the bucket before either moved it. One moves the ledger; the other
    loses the compare-and-swap, reads the winner's ledger, and refuses the union (its pack may
    have gone up before it lost the race: an unreferenced pack, named by its bytes)."""
    laptop, box, bucket = two_machines
    claims = {laptop: _eval(laptop, "laptop", role="claim"), box: _eval(box, "box", role="claim")}
    tips = {c: git(c, "rev-parse", f"refs/heads/monte/{EXP}/ledger").strip() for c in claims}
    procs = {c: subprocess.Popen([sys.executable, "-c", "from monte.cli.main import main; "
                                  f"main(['push', '--bucket', {bucket!r}, '--json'])"],
                                 cwd=c, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for c in claims}
    done = {c: (p.wait(timeout=300), p.communicate()[0]) for c, p in procs.items()}
    codes = sorted(code for code, _ in done.values())
    assert codes == [0, 3], done
    loser = next(c for c, (code, _) in done.items() if code == 3)
    winner = next(c for c in claims if c != loser)
    assert json.loads(done[loser][1])["error"]["code"] == "E_SEALED"
    assert git(loser, "rev-parse", f"refs/heads/monte/{EXP}/ledger").strip() == tips[loser]
    store = open_store(bucket, write_key() if bucket.startswith("gs://") else None)
    raw = store.get(f"git/{EXP}/refs/ledger")
    assert raw is not None and raw.strip().decode() == tips[winner]
