"""Each run records the commit of the code it ran at (``plan.git_sha``) and whether tracked files
differed from it (``plan.git_dirty``): a local run as well as a box's, so a result can be traced
to the code that made it (``monte show``, ``monte report``'s run table)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from monte.report import _provenance
from tests.support.helpers import git


def _eval(monte, *args: str) -> dict[str, Any]:
    r = monte("eval", "--yes", "--json", *args)
    assert r.code == 0, r.out + r.err
    row: dict[str, Any] = r.json()["runs"][0]
    return row


def _commit_all(repo: Path) -> str:
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "--allow-empty", "-m", "code")
    return git(repo, "rev-parse", "HEAD").strip()


def test_a_local_eval_records_the_commit_it_ran_at_and_whether_the_tree_was_dirty(repo: Path, monte, exp: str) -> None:
    head = _commit_all(repo)
    row = _eval(monte)
    assert (row["plan"]["git_sha"], row["plan"]["git_dirty"]) == (head, False)
    shown = monte("show", row["run"], "--json")
    assert shown.code == 0 and shown.json()["plan"]["git_sha"] == head
    assert _provenance(row)["git"] == head

    (repo / ".monte.yaml").write_text((repo / ".monte.yaml").read_text() + "# an edit not committed\n")
    (repo / "scratch.txt").write_text("untracked files are not the code that ran\n")
    row = _eval(monte, "--smoke")
    assert (row["plan"]["git_sha"], row["plan"]["git_dirty"]) == (head, True)
    assert _provenance(row)["git"] == f"{head} (dirty)"  # what the report's run table shows


def test_a_repository_with_no_commit_records_none(tmp_path: Path, monte, base_model: Path,
                                                   monkeypatch) -> None:
    repo = tmp_path / "fresh"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    monkeypatch.chdir(repo)
    assert monte("init").code == 0
    assert git(repo, "rev-parse", "--verify", "--quiet", "HEAD", check=False).strip() == ""
    assert monte("env", "add", "--server", "parity", "--dev", "parity", "--test", "parity").code == 0
    assert monte("experiment", "init", "exp", "--eval", "parity", "--model", str(base_model)).code == 0
    row = _eval(monte)
    assert (row["plan"]["git_sha"], row["plan"]["git_dirty"]) == (None, None)
    assert json.dumps(_provenance(row)["git"]) == "null"  # the page says "not recorded"
