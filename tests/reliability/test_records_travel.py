"""Records that travel: a ledger written at one path reads the same at another (issue 21).

The quickstart is built once (the session's, ``quickstart_built``; its folder is one more whose
path may not travel) and copied to the original folder. Each test copies that elsewhere on this machine
(``cp -a``, ``git clone``, or two clones that meet through ``monte push``/``monte sync``) and
moves the original away, then shows there: ``monte status`` equals the original's, ``monte eval``
of a checkpoint and of the base model runs against the copy's own folders (proven by hash: a
tampered copy is refused ``E_INTEGRITY``), and no blob or commit on the ledger, lineage and vault
refs, and no event file or manifest on the data root, holds an absolute path of either folder.

Reproduced on the code before: measurement.json, base.json and every row held the original's
absolute folders, so the copy evaluated the original's model while it existed (another cohort
when it had changed), failed when it was moved away, and two clones wrote rows that disagreed
about the same model.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.reliability.conftest import quickstart_copy
from tests.support.helpers import git, new_machine

EXP = "quickstart"
#: on one worker under `--dist loadgroup`, with the other module that copies the session's one
#: quickstart: the second copies it at once instead of waiting on the first's build
pytestmark = pytest.mark.xdist_group("quickstart")


@pytest.fixture(scope="module")
def built(quickstart_built: dict[str, Any], tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The quickstart at ``folder`` (committed, as a user keeps it), and its status where it was
    built (``built_at``, the session's one quickstart, copied here: no path of it may travel either)."""
    return quickstart_copy(quickstart_built, tmp_path_factory.mktemp("machine") / "original")


@pytest.fixture
def original(built: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """The built quickstart; a test moves its folder away with ``away()``, and it is put back after."""
    folder: Path = built["folder"]
    moved = folder.with_name("original-moved-away")

    def away() -> None:
        folder.rename(moved)

    yield {**built, "away": away}
    if moved.exists():
        moved.rename(folder)


def objects_holding(repo: Path, needles: list[str]) -> list[str]:
    """Every object (blob, tree, commit) reachable from the ledger, lineage, base and vault refs
    (and the bucket's mirrors) whose bytes hold one of ``needles``."""
    refs = git(repo, "for-each-ref", "--format=%(refname)", "refs/heads/monte/", "refs/remotes/").split()
    shas = [line.split()[0] for line in git(repo, "rev-list", "--objects", *refs).splitlines() if line.strip()]
    assert len(shas) > 50  # the quickstart's whole history
    out = subprocess.run(["git", "-C", str(repo), "cat-file", "--batch"], input="\n".join(shas).encode(),
                         capture_output=True, check=True).stdout
    found = []
    for needle in needles:
        at = out.find(needle.encode())
        if at >= 0:
            found.append(out[max(0, at - 200):at + 100].decode(errors="replace"))
    return found


def files_holding(data_root: Path, needles: list[str]) -> list[str]:
    """Event files and manifests on the data root (they travel to the bucket and other machines)."""
    found = []
    for p in [*data_root.rglob("events.jsonl"), *data_root.rglob("manifest.json")]:
        text = p.read_text(errors="replace")
        found += [f"{p}: {n}" for n in needles if n in text]
    return found


def _ok(r: Any) -> Any:
    assert r.code == 0, r.out + r.err
    return r.json()


def _evals_run_here(monte: Any, here: Path, data_root: Path, claim: str, cohort: str,
                    tiny_models: dict[int, Path]) -> None:
    """Dev evals of the claimed checkpoint and of the base model run against this copy's own
    folders; a tampered checkpoint or base model here is refused, so the hash was proven here."""
    row = _ok(monte("eval", "--checkpoint", claim, "--yes", "--json"))["runs"][0]
    assert row["status"] == "succeeded" and row["model"] == f"{EXP}/{claim}"
    assert row["plan"]["target"]["kind"] == "checkpoint" and len(row["plan"]["target"]["commit"]) == 40
    base = _ok(monte("eval", "--step", "0", "--yes", "--json"))["runs"][0]
    assert base["status"] == "succeeded" and base["cohort"] == cohort
    assert base["model"] == base["plan"]["base_model"] == "repo:base-model"
    run, step = claim.split("@")
    weights = data_root / "runs" / EXP / run / "checkpoints" / f"step-{step}" / "model.safetensors"
    good = weights.read_bytes()
    weights.write_bytes(good[:-1] + bytes([good[-1] ^ 1]))
    r = monte("eval", "--checkpoint", claim, "--dry-run", "--json")
    assert r.code == 5 and r.json()["error"]["code"] == "E_INTEGRITY", r.out
    weights.write_bytes(good)
    shutil.move(here / "base-model", here / "base-model.good")
    shutil.copytree(tiny_models[1], here / "base-model")  # other weights where the ledger recorded the base
    r = monte("eval", "--dry-run", "--json")
    assert r.code == 5 and r.json()["error"]["code"] == "E_INTEGRITY", r.out
    shutil.rmtree(here / "base-model")
    shutil.move(here / "base-model.good", here / "base-model")


def test_a_copy_at_another_path_reads_the_same(original: dict[str, Any], monte: Any, tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch, tiny_models: dict[int, Path]) -> None:
    src: Path = original["folder"]
    copy = tmp_path / "elsewhere" / "copy"
    copy.parent.mkdir()
    subprocess.run(["cp", "-a", str(src), str(copy)], check=True)
    original["away"]()
    monkeypatch.chdir(copy)
    assert _ok(monte("status", "--json")) == original["status"]
    cohort = original["status"]["cohorts"][0]["cohort"]
    _evals_run_here(monte, copy, copy / ".monte", original["claim"], cohort, tiny_models)
    needles = [str(original["built_at"]), str(src), str(copy)]
    assert objects_holding(copy, needles) == []
    assert files_holding(copy / ".monte", needles) == []
    r = monte("ledger", "verify", "--json")
    assert _ok(r)["warnings"] == []


def test_a_copy_never_reads_the_original_folder(original: dict[str, Any], monte: Any, tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch, tiny_models: dict[int, Path]) -> None:
    """The original still there, its base model since replaced: the copy evaluates its own."""
    src: Path = original["folder"]
    copy = tmp_path / "copy"
    subprocess.run(["cp", "-a", str(src), str(copy)], check=True)
    shutil.move(src / "base-model", src / "base-model.kept")
    try:
        shutil.copytree(tiny_models[2], src / "base-model")
        monkeypatch.chdir(copy)
        plan = _ok(monte("eval", "--dry-run", "--json"))["plan"]
        assert plan["cohort"] == original["status"]["cohorts"][0]["cohort"]
        assert plan["base_folder"] == str(copy / "base-model")
    finally:
        shutil.rmtree(src / "base-model", ignore_errors=True)
        shutil.move(src / "base-model.kept", src / "base-model")


def test_a_git_clone_with_its_data_root_elsewhere_reads_the_same(original: dict[str, Any], monte: Any,
                                                                 tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                 tiny_models: dict[int, Path]) -> None:
    src: Path = original["folder"]
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", str(src), str(clone)], check=True, capture_output=True)
    git(clone, "fetch", "-q", "origin", "+refs/heads/monte/*:refs/heads/monte/*")
    data = tmp_path / "disks" / "monte-data"  # the run folders and freezes, copied as rsync would
    shutil.copytree(src / ".monte", data, symlinks=True)
    original["away"]()
    monkeypatch.setenv("MONTE_DATA_ROOT", str(data))
    monkeypatch.chdir(clone)
    # the clone's own base model: built again from its seed (deterministic), not the original's
    assert monte("model", "init", "base-model", "--size", "tiny", "--seed", "0").code == 0
    assert _ok(monte("status", "--json")) == original["status"]
    cohort = original["status"]["cohorts"][0]["cohort"]
    _evals_run_here(monte, clone, data, original["claim"], cohort, tiny_models)
    needles = [str(original["built_at"]), str(src), str(clone), str(data)]
    assert objects_holding(clone, needles) == []
    assert files_holding(data, needles) == []


def test_a_plain_git_clone_of_the_quickstart_checks_out_and_reads_the_same_status(  # issue 30.3
        original: dict[str, Any], tmp_path: Path) -> None:
    """On the code before, `main` had no commit (everything only staged): `git clone` warned
    "remote HEAD refers to nonexistent ref", checked out nothing, and `monte status` there refused
    E_NOT_INITIALIZED. The quickstart commits `main`: the clone checks out, and its status, with no
    `monte init`, is the original's byte for byte (the ledgers come in from refs/remotes/origin)."""
    from tests.support.helpers import monte_proc

    src: Path = original["folder"]
    assert git(src, "status", "--porcelain", "--untracked-files=no") == ""  # nothing left only staged
    here = monte_proc("status", cwd=src)
    assert here.returncode == 0, here.stderr
    clone = tmp_path / "clone"
    r = subprocess.run(["git", "clone", str(src), str(clone)], capture_output=True, text=True)
    assert r.returncode == 0 and "nonexistent ref" not in r.stderr, r.stderr
    assert (clone / ".monte.yaml").is_file() and (clone / "recipes").is_dir()
    there = monte_proc("status", cwd=clone)
    assert there.returncode == 0, there.stderr
    assert there.stdout == here.stdout


def test_two_clones_at_different_paths_push_sync_and_agree(original: dict[str, Any], monte: Any, tmp_path: Path,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    src: Path = original["folder"]
    laptop = tmp_path / "laptop" / "work"
    laptop.parent.mkdir()
    subprocess.run(["cp", "-a", str(src), str(laptop)], check=True)
    box = new_machine(src, tmp_path / "box" / "checkout")
    original["away"]()
    bucket = tmp_path / "bucket"
    bucket.mkdir()
    monkeypatch.setenv("MONTE_BUCKET", str(bucket))
    monkeypatch.chdir(laptop)
    assert _ok(monte("push", "--json"))
    monkeypatch.chdir(box)
    assert _ok(monte("sync", "--json"))
    assert _ok(monte("status", "--json")) == original["status"]
    # the box's own folders: the frozen environment (as `dvc pull` brings it), the claimed
    # checkpoint's weights (weights never travel through the bucket), its own base model
    shutil.copytree(laptop / ".monte" / "environments" / "parity", box / ".monte" / "environments" / "parity")
    run, step = original["claim"].split("@")
    ck = Path("runs") / EXP / run / "checkpoints" / f"step-{step}"
    shutil.rmtree(box / ".monte" / ck, ignore_errors=True)
    shutil.copytree(laptop / ".monte" / ck, box / ".monte" / ck)
    shutil.rmtree(box / "base-model")  # the box builds its own from the seed
    assert monte("model", "init", "base-model", "--size", "tiny", "--seed", "0").code == 0
    on_box = _ok(monte("eval", "--step", "0", "--yes", "--json"))["runs"][0]
    assert _ok(monte("eval", "--checkpoint", original["claim"], "--yes", "--json"))["runs"][0]["status"] == "succeeded"
    assert _ok(monte("push", "--json"))
    monkeypatch.chdir(laptop)
    on_laptop = _ok(monte("eval", "--step", "0", "--yes", "--json"))["runs"][0]
    assert _ok(monte("push", "--json"))  # the bucket moved: the union is pushed
    monkeypatch.chdir(box)
    assert _ok(monte("sync", "--json"))
    rows = {r["run"]: r for r in _ok(monte("status", "--json"))["rows"]}
    assert {on_box["run"], on_laptop["run"]} <= set(rows)
    # two machines, two paths, one model: their rows say the same thing about it
    assert on_box["model"] == on_laptop["model"] == "repo:base-model"
    # ... and of the code: one commit (whether each work tree differed from it is its own: the box
    # rebuilt base-model's files in place)
    def _same(plan: dict[str, Any]) -> dict[str, Any]:
        return {k: v for k, v in plan.items() if k != "git_dirty"}

    assert _same(on_box["plan"]) == _same(on_laptop["plan"]) and on_box["cohort"] == on_laptop["cohort"]
    assert on_box["plan"]["git_sha"] == on_laptop["plan"]["git_sha"] is not None
    needles = [str(original["built_at"]), str(src), str(laptop), str(box)]
    for repo in (laptop, box):
        assert objects_holding(repo, needles) == []
        assert files_holding(repo / ".monte", needles) == []
    assert files_holding(bucket, needles) == []
