"""Clear codes and words where the repository's own files are in a shape monte cannot use
(issue 29.1, 29.3, 29.6). Each was reproduced on the code before this file:

- ``.git/monte`` made a file: ``status`` crashed (E_INTERNAL, a NotADirectoryError from the
  derived cache) and every append silently stopped remembering tips;
- ``tips.log`` made a folder: ``monte ledger verify`` crashed (E_INTERNAL, IsADirectoryError);
- a shallow clone (``git clone --depth 1``) was reported as objects deleted by ``git prune``;
- ``monte plot --out /proc/x.png``: E_INTERNAL (FileNotFoundError from a temporary file);
- ``monte recover --json nosuchexp`` printed ``[]`` and exited 0.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from tests.support.helpers import git, monte_proc, snapshot_state


def _memory_broken(repo: Path, how: str) -> Path:
    folder = repo / ".git" / "monte"
    if how == "monte-a-file":
        shutil.rmtree(folder, ignore_errors=True)
        folder.write_text("")
        return folder
    log = folder / "tips.log"
    log.unlink(missing_ok=True)
    log.mkdir(parents=True)
    return log


def test_git_monte_made_a_file_refuses_appends_and_status_still_reads(repo: Path, monte, exp: str) -> None:
    assert monte("eval", "--yes").code == 0  # a ledger with a run: status derives and caches its facts
    broken = _memory_broken(repo, "monte-a-file")
    r = monte("status", "--json")
    assert r.code == 0, r.out
    before = snapshot_state(repo)
    r = monte("eval", "--yes", "--json")
    err = r.json()["error"]
    assert r.code == 7 and err["code"] == "E_STORAGE", r.out
    assert str(broken) in err["message"] and "is a file, not a folder" in err["message"] and "mv " in err["fix"]
    assert snapshot_state(repo) == before  # no record that would not be remembered


def test_tips_log_made_a_folder_refuses_verify_and_appends_by_name(repo: Path, monte, exp: str) -> None:
    broken = _memory_broken(repo, "log-a-folder")
    for args in (("ledger", "verify", "--json"), ("eval", "--yes", "--json")):
        r = monte(*args)
        err = r.json()["error"]
        assert r.code == 7 and err["code"] == "E_STORAGE", r.out
        assert str(broken) in err["message"] and "not a regular file" in err["message"]


def test_a_shallow_clone_is_named_as_one(repo: Path, monte, exp: str, tmp_path: Path) -> None:
    assert monte("eval", "--yes").code == 0
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "x")
    clone = tmp_path / "shallow"
    subprocess.run(["git", "clone", "-q", "--depth", "1", "--no-single-branch", repo.as_uri(), str(clone)],
                   check=True, capture_output=True)
    for args in (("status", "--json"), ("ledger", "verify", "--json")):
        r = monte_proc(*args, cwd=clone)
        assert r.returncode == 5 and '"E_INTEGRITY"' in r.stdout, r.stdout + r.stderr
        assert "shallow clone" in r.stdout and "git fetch --unshallow" in r.stdout
        assert "git prune" not in r.stdout


def test_plot_into_proc_is_a_storage_refusal(repo: Path, monte, exp: str) -> None:
    r = monte("plot", "--out", "/proc/x.png", "--json")
    err = r.json()["error"]
    assert r.code == 7 and err["code"] == "E_STORAGE" and "/proc/x.png" in err["message"], r.out


def test_recover_of_an_unknown_experiment_is_not_found(repo: Path, monte, exp: str) -> None:
    r = monte("recover", "--json", "nosuchexp")
    assert r.code == 4 and r.json()["error"]["code"] == "E_NOT_FOUND", r.out
    assert monte("recover", "--json", "exp").code == 0
