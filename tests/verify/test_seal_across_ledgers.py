"""Issue 26, case 1: the repository-wide seal is a verify rule, wherever the records travel.

Two copies of one repository, taken before any test read, each start their own experiment on
the same base model and exam and each take ``test@0``; both push to one shared bare remote with
monte's hooks. Each ledger keeps ``two-touch`` on its own, so the remote used to accept both (two
test@0 in one cohort), and ``monte ledger verify --all`` passed there and in a fresh clone.

Now the test reads are counted per seal key across every ledger (rule ``seal``): the server's
``pre-receive`` refuses the second copy's push, naming both runs and where each came from;
a server that took it anyway (its own switch off) fails its verify, and so does a fresh clone.
Real copies, a real bare remote with monte's hooks, real evals of a tiny model.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.support.helpers import scrubbed
from tests.verify.forgehelp import g, git_run, rev
from tests.verify.recorded import recorded_engine


def _copy_with_read(template: Path, dest: Path, exp: str, models: dict[int, Path]) -> str:
    """A copy of ``template`` (no test read yet) that starts experiment ``exp`` (base: the recorded
    model of seed 0, answering as recorded) and takes test@0."""
    from monte import api
    from monte.workspace import open_workspace

    shutil.copytree(template, dest, symlinks=True)
    with pytest.MonkeyPatch.context() as mp, recorded_engine(mp, models):
        scrubbed(mp, dest.parent / "home")
        mp.chdir(dest)
        ws = open_workspace(dest)
        api.experiment_init(name=exp, eval_env="parity", model=str(models[0]), ws=ws)
        return str(api.evaluate(experiment=exp, split="test", ws=ws).runs[0]["run"])


@pytest.fixture(scope="module")
def _copies(_exp_template: Path, recorded_models: dict[int, Path],
            tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str, Path, str]:
    root = tmp_path_factory.mktemp("copies")
    a = _copy_with_read(_exp_template, root / "a" / "repo", "expa", recorded_models)
    b = _copy_with_read(_exp_template, root / "b" / "repo", "expb", recorded_models)
    return root / "a" / "repo", a, root / "b" / "repo", b


@pytest.fixture
def copies(_copies: tuple[Path, str, Path, str], tmp_path: Path) -> tuple[Path, str, Path, str]:
    a, ra, b, rb = _copies
    shutil.copytree(a, tmp_path / "a", symlinks=True)
    shutil.copytree(b, tmp_path / "b", symlinks=True)
    return tmp_path / "a", ra, tmp_path / "b", rb


def _server(tmp_path: Path) -> Path:
    from monte import api

    bare = tmp_path / "shared.git"
    g(tmp_path, "init", "-q", "--bare", str(bare))
    api.hooks_install(git_dir=bare)
    return bare


def _verify(where: Path, monte: Any, monkeypatch: pytest.MonkeyPatch) -> tuple[int, dict[str, Any]]:
    with monkeypatch.context() as mp:
        mp.chdir(where)
        r = monte("ledger", "verify", "--all", "--json")
    return r.code, r.json()


def _names_both(text: str, ra: str, rb: str) -> None:
    assert f"expa/{ra}" in text and f"expb/{rb}" in text, text
    assert "refs/heads/monte/expa/ledger" in text and "refs/heads/monte/expb/ledger" in text, text
    assert "two test@0 reads" in text, text


def test_the_shared_remote_refuses_the_second_copys_read(copies: tuple[Path, str, Path, str], tmp_path: Path,
                                                         monte, monkeypatch: pytest.MonkeyPatch) -> None:
    a, ra, b, rb = copies
    bare = _server(tmp_path)
    r = git_run(a, "push", str(bare), "refs/heads/monte/*")
    assert r.returncode == 0, r.stderr.decode()
    r = git_run(b, "push", str(bare), "refs/heads/monte/*")
    err = r.stderr.decode()
    assert r.returncode != 0 and "pre-receive hook declined" in err, err
    assert "[seal]" in err, err
    _names_both(err, ra, rb)
    assert rev(bare, "refs/heads/monte/expb/ledger") is None  # nothing of that push landed
    assert _verify(bare, monte, monkeypatch)[0] == 0


def test_verify_counts_the_seal_across_ledgers_on_the_server_and_in_a_fresh_clone(
        copies: tuple[Path, str, Path, str], tmp_path: Path, monte, monkeypatch: pytest.MonkeyPatch) -> None:
    a, ra, b, rb = copies
    bare = _server(tmp_path)
    assert git_run(a, "push", str(bare), "refs/heads/monte/*").returncode == 0
    g(bare, "config", "monte.hooks", "off")  # a server that took both anyway
    r = git_run(b, "push", "--no-verify", str(bare), "refs/heads/monte/*")
    assert r.returncode == 0, r.stderr.decode()
    code, out = _verify(bare, monte, monkeypatch)
    assert code == 5 and out["error"]["code"] == "E_VERIFY", out
    seal = [d for d in out["error"]["details"] if d["rule"] == "seal"]
    assert len(seal) == 1, out
    _names_both(seal[0]["message"], ra, rb)
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", "--mirror", str(bare), str(clone / ".git")], check=True)
    g(clone, "config", "--bool", "core.bare", "false")
    code, out = _verify(clone, monte, monkeypatch)
    assert code == 5 and any(d["rule"] == "seal" for d in out["error"]["details"]), out


def test_pre_push_counts_the_ledgers_this_copy_has_fetched(copies: tuple[Path, str, Path, str], tmp_path: Path,
                                                          monte, monkeypatch: pytest.MonkeyPatch) -> None:
    """The other copy's ledger fetched here (hooks stood aside): this copy's pre-push and its
    own verify count both reads, and the push to a plain remote (no hooks there) is refused."""
    a, ra, b, rb = copies
    plain = tmp_path / "plain.git"
    g(tmp_path, "init", "-q", "--bare", str(plain))
    g(b, "fetch", "-q", str(a), "refs/heads/monte/expa/*:refs/heads/monte/expa/*", env={"MONTE_HOOKS": "off"})
    code, out = _verify(b, monte, monkeypatch)
    assert code == 5 and any(d["rule"] == "seal" for d in out["error"]["details"]), out
    with monkeypatch.context() as mp:
        mp.chdir(b)
        assert monte("hooks", "install").code == 0
    r = git_run(b, "push", str(plain), "refs/heads/monte/expb/*")
    err = r.stderr.decode()
    assert r.returncode != 0 and "[seal]" in err, err
    _names_both(err, ra, rb)


def _listing(bucket: Path) -> dict[str, int]:
    return {str(p.relative_to(bucket)): p.stat().st_size for p in sorted(bucket.rglob("*")) if p.is_file()}


def test_push_and_sync_count_the_seal_across_the_buckets_experiments(
        copies: tuple[Path, str, Path, str], tmp_path: Path, monte, monkeypatch: pytest.MonkeyPatch) -> None:
    """One folder bucket: copy A pushes its experiment; copy B's push of its own is refused
    (E_SEALED) before anything is uploaded, and so is B's sync of A's experiment, before A's
    ledger is let in here."""
    from tests.support.helpers import snapshot_state

    a, ra, b, rb = copies
    bucket = tmp_path / "bucket"
    bucket.mkdir()
    with monkeypatch.context() as mp:
        mp.chdir(a)
        r = monte("push", "-e", "expa", "--bucket", str(bucket), "--json")
        assert r.code == 0, r.out
    listing = _listing(bucket)
    with monkeypatch.context() as mp:
        mp.chdir(b)
        refs = snapshot_state(b)["refs"]
        for args in (("push", "-e", "expb"), ("sync",)):
            r = monte(*args, "--bucket", str(bucket), "--json")
            assert r.code == 3, r.out
            err = r.json()["error"]
            assert err["code"] == "E_SEALED", err
            assert f"expa/{ra}" in err["message"] and f"expb/{rb}" in err["message"], err
            assert _listing(bucket) == listing
            assert snapshot_state(b)["refs"] == refs  # no ledger, lineage or mirror ref moved
