"""``bench/bulk_ledger.py`` builds the ledger monte writes, in bulk: it must not drift.

At ~150 records, with git's clock pinned (conftest) and the measurement's ``created_at`` fixed,
the bulk-built ledger (one ``git fast-import``) and the same rows appended one by one with
``Ledger.append_row`` have the same tree at every record (``git log --format=%T``), and so the
same commits, lineage refs, ``tips.log`` lines (but their wall-clock time) and reflog lines; and
``monte ledger verify`` (the CLI) passes on the bulk honest ledger. A change to
``record_change`` (a new derived index, say) that the builder did not follow fails here.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))

import bulk_ledger  # noqa: E402
import status_10k  # noqa: E402

N = 150
REF = "refs/heads/monte/exp/ledger"
VAULT = "refs/heads/monte/vault "  # the frozen environment's (honest mix): a freeze time of its own


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, check=True).stdout


def _copy(template: Path, dest: Path) -> Path:
    shutil.copytree(template, dest, symlinks=True)
    return dest


def _state(repo: Path) -> dict[str, Any]:
    """What the two builds must agree on."""
    git_dir = repo / ".git"
    tips = [" ".join(line.split()[:3]) for line in (git_dir / "monte" / "tips.log").read_text().splitlines()
            if not line.startswith(VAULT)]
    return {
        "trees": _git(repo, "log", "--format=%T", REF).split(),
        "commits": _git(repo, "log", "--format=%H", REF).split(),
        "monte_refs": [r for r in _git(repo, "for-each-ref", "--format=%(refname) %(objectname)",
                                       "refs/heads/monte/").splitlines() if not r.startswith(VAULT)],
        "ledger_tips_log": [t for t in tips if t.startswith(REF + " ")],
        "tips_log": sorted(tips),  # the lineage lines come first in bulk (see the builder)
        "ledger_reflog": (git_dir / "logs" / REF).read_text(),
        "other_refs": _git(repo, "for-each-ref", "--format=%(refname)", "refs/monte-bulk/"),
    }


@pytest.fixture
def fixed_clock(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The measurement's ``created_at`` fixed (git's clock is pinned by conftest)."""
    import monte.manifest

    made = status_10k.measurement

    def measurement() -> Any:
        return made().model_copy(update={"created_at": "2026-01-05T08:00:00+00:00"})

    monkeypatch.setattr(status_10k, "measurement", measurement)
    monkeypatch.setattr(monte.manifest, "now", lambda: "2026-01-05T08:00:00Z")
    yield


def test_status_mix_equals_status_10k_one_by_one(_template: Path, tmp_path: Path, fixed_clock: None) -> None:
    one = _copy(_template, tmp_path / "one")
    status_10k.build_ledger(one, N, 0, 10, 50, progress_every=0)
    bulk = _copy(_template, tmp_path / "bulk")
    r = bulk_ledger.build(bulk, mix="status", records=N, seed=0, init=False)
    assert r["ledger_commits"] == N + 1 and r["lineage_commits"] > 10
    a, b = _state(one), _state(bulk)
    assert len(a["trees"]) == N + 1
    assert b["trees"] == a["trees"]
    assert b == a


def test_honest_mix_equals_one_by_one_and_verifies(_template: Path, tmp_path: Path, fixed_clock: None) -> None:
    one = _copy(_template, tmp_path / "one")
    bulk_ledger.build(one, mix="honest", records=N, seed=3, bulk=False, init=False)
    bulk = _copy(_template, tmp_path / "bulk")
    r = bulk_ledger.build(bulk, mix="honest", records=N, seed=3, init=False)
    assert N <= r["ledger_commits"] <= N + 2  # a training run writes 3 records, as in verify_10k
    a, b = _state(one), _state(bulk)
    assert b["trees"] == a["trees"]
    assert b == a
    p = subprocess.run([str(Path(sys.executable).parent / "monte"), "ledger", "verify"], cwd=bulk,
                       capture_output=True, text=True)
    assert p.returncode == 0, p.stdout + p.stderr
