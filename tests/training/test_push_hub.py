"""`monte train --push` and `monte promote --from-hub`: a real chunk's results go to the results
bucket after each transition, its checkpoint to a hub branch of its own before the lineage commit
records that revision, and a promote from the hub proves every byte against the lineage commit.

The Hugging Face Hub cannot be reached from here, so ``monte.storage.hub.HfApi`` (monte's one
seam to the hub) is replaced by :class:`FakeHub`, which records every call and serves back the
files uploaded to it. Everything else is real: TRL trains the tiny model, git holds the record,
and the results bucket is a local folder (no key needed).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from monte.hashing import sha256_file
from monte.storage import hub
from tests.support.helpers import git, pushes_failing_on, run_events, snapshot_state
from tests.support.trainhelp import refused, train, trained

TOKEN = "hf_TESTTOKENthatmustneverbeprinted"
CHUNK = ("--recipe", "sft-t", "--source", "parity-sft", "--from-base")


class _Commit:
    def __init__(self, oid: str) -> None:
        self.oid = oid


class FakeHub:
    """Stands in for ``huggingface_hub.HfApi``: records calls, keeps uploaded bytes per commit."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self.commits: dict[tuple[str, str], dict[str, bytes]] = {}  # (repo, oid) -> files
        self.fail_upload: Exception | None = None
        self.fail_create: Exception | None = None

    def create_repo(self, repo_id: str, **kw: Any) -> str:
        self.calls.append(("create_repo", {"repo_id": repo_id, **kw}))
        if self.fail_create is not None:
            raise self.fail_create
        return f"https://huggingface.co/{repo_id}"

    def create_branch(self, repo_id: str, **kw: Any) -> None:
        self.calls.append(("create_branch", {"repo_id": repo_id, **kw}))

    def upload_folder(self, **kw: Any) -> _Commit:
        self.calls.append(("upload_folder", kw))
        if self.fail_upload is not None:
            raise self.fail_upload
        folder = Path(kw["folder_path"])
        files = {p.name: p.read_bytes() for p in folder.iterdir() if p.is_file()}
        oid = f"{len(self.commits) + 1:040x}"
        self.commits[(kw["repo_id"], oid)] = files
        return _Commit(oid)

    def hf_hub_download(self, repo_id: str, filename: str, **kw: Any) -> str:
        self.calls.append(("hf_hub_download", {"repo_id": repo_id, "filename": filename, **kw}))
        data = self.commits[(repo_id, kw["revision"])][filename]
        path = Path(kw["local_dir"]) / filename
        path.write_bytes(data)
        return str(path)

    def named(self, name: str) -> list[dict[str, Any]]:
        return [kw for n, kw in self.calls if n == name]


@pytest.fixture
def fake_hub(monkeypatch: pytest.MonkeyPatch) -> FakeHub:
    fake = FakeHub()
    monkeypatch.setattr(hub, "HfApi", lambda: fake)
    return fake


@pytest.fixture
def pushing(ready: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fake_hub: FakeHub) -> Path:
    """``ready`` plus a local-folder results bucket (MONTE_BUCKET), the hub repo (MONTE_HUB_REPO)
    and a token in HF_TOKEN (that only huggingface_hub itself would read)."""
    folder = tmp_path / "bucket"
    folder.mkdir()
    monkeypatch.setenv("MONTE_BUCKET", str(folder))
    monkeypatch.setenv("MONTE_HUB_REPO", "acme/parity-ckpts")
    monkeypatch.setenv("HF_TOKEN", TOKEN)
    return folder


def _checkpoint_json(repo: Path, run: str) -> dict[str, Any]:
    info: dict[str, Any] = json.loads(git(repo, "show", f"monte/exp/lineage/{run}:checkpoint.json"))
    return info


def _no_token(*texts: str) -> None:
    for t in texts:
        assert TOKEN not in t


def test_a_real_push_chunk_records_its_hub_revision_in_the_lineage(repo: Path, monte, pushing: Path,
                                                                  fake_hub: FakeHub) -> None:
    r = train(monte, *CHUNK, "--push")
    assert r.code == 0, r.out + r.err
    run = r.json()["run"]["run"]
    info = _checkpoint_json(repo, run)
    branch = f"exp--{run}--step4"
    oid = "1".zfill(40)
    ledger_commit = info["hub"]["ledger_commit"]
    assert info["hub"] == {"repo": "acme/parity-ckpts", "branch": branch, "revision": oid,
                           "ledger_commit": ledger_commit}
    # the ledger commit the card names is a record of this experiment's ledger, as git sees it
    assert git(repo, "cat-file", "-t", ledger_commit).strip() == "commit"
    git(repo, "merge-base", "--is-ancestor", ledger_commit, "monte/exp/ledger")
    # the hub saw: the repo (private), the branch, one upload to that branch
    assert {"repo_id": "acme/parity-ckpts", "exist_ok": True, "private": True} in fake_hub.named("create_repo")
    assert fake_hub.named("create_branch") == [{"repo_id": "acme/parity-ckpts", "branch": branch, "exist_ok": True}]
    (upload,) = fake_hub.named("upload_folder")
    assert upload["repo_id"] == "acme/parity-ckpts" and upload["revision"] == branch
    uploaded = fake_hub.commits[("acme/parity-ckpts", oid)]
    assert sorted(uploaded) == sorted([*info["files"], "README.md"])
    card = uploaded["README.md"].decode()
    assert ledger_commit in card and "lineage: base -sft:parity-sft-> 4" in card
    # the same model card promote writes: metadata the hub reads, the reads, the hashes, the command
    from huggingface_hub import ModelCard

    meta = ModelCard(card).data.to_dict()
    assert meta["library_name"] == "transformers" and "monte" in meta["tags"]
    assert "baseline (test@0)" in card and "monte train -e exp --recipe sft-t --source parity-sft --from-base" in card
    meas = json.loads(git(repo, "show", "monte/exp/ledger:measurement.json"))
    assert meas["exams"]["parity"]["splits"]["test"]["sha256"] in card
    from monte.hashing import sha256_bytes

    assert {n: sha256_bytes(b) for n, b in uploaded.items() if n != "README.md"} == info["files"]
    # the transitions, in order; each one pushed, none failed
    events = [e["event"] for e in run_events(repo, run) if e["event"] != "log"]
    assert events == ["started", "weights-uploaded", "checkpoint", "succeeded"]
    # the bucket holds the run's record and logs, and never a weight
    assert (pushing / "git" / "exp" / "refs" / "lineage" / run).read_text().strip() == \
        git(repo, "rev-parse", f"monte/exp/lineage/{run}").strip()
    assert '"succeeded"' in (pushing / "runs" / "exp" / run / "events.jsonl").read_text()
    assert not [p for p in pushing.rglob("*") if p.suffix in (".safetensors", ".bin", ".pt")]
    _no_token(r.out, r.err, (repo / ".monte" / "runs" / "exp" / run / "events.jsonl").read_text(),
              git(repo, "log", "--all", "-p"))


def test_plan_shows_the_push_and_refuses_without_a_hub_repo(repo: Path, monte, pushing: Path,
                                                           fake_hub: FakeHub, monkeypatch: pytest.MonkeyPatch) -> None:
    r = monte("train", *CHUNK, "--push", "--dry-run")
    assert r.code == 0, r.out + r.err
    assert (f"  push: results to {pushing} after each transition; weights to the hub repo acme/parity-ckpts, "
            "one branch per checkpoint") in r.out.splitlines()
    monkeypatch.delenv("MONTE_HUB_REPO")
    err = refused(monte, repo, "train", *CHUNK, "--push", "--yes", code="E_STORAGE", exit_code=7)
    assert "MONTE_HUB_REPO" in err["fix"]
    assert fake_hub.calls == [] and list(pushing.iterdir()) == []


def test_push_with_no_bucket_refuses_before_any_row(repo: Path, monte, pushing: Path, fake_hub: FakeHub,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MONTE_BUCKET")
    refs = git(repo, "for-each-ref")
    err = refused(monte, repo, "train", *CHUNK, "--push", "--yes", code="E_STORAGE", exit_code=7)
    assert "no results bucket" in err["message"]
    assert git(repo, "for-each-ref") == refs
    assert fake_hub.calls == []


def test_a_smoke_push_needs_no_hub(repo: Path, monte, pushing: Path, fake_hub: FakeHub,
                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MONTE_HUB_REPO")
    row = trained(monte, "--recipe", "sft-t", "--source", "parity-sft", "--smoke", "--push")
    assert fake_hub.calls == []
    assert '"succeeded"' in (pushing / "runs" / "exp" / row["run"] / "events.jsonl").read_text()


def test_promote_from_the_hub_proves_every_byte(repo: Path, monte, pushing: Path, fake_hub: FakeHub,
                                                tmp_path: Path) -> None:
    run = trained(monte, *CHUNK, "--push")["run"]
    ref = f"{run}@4"
    files = _checkpoint_json(repo, run)["files"]
    # the laptop: the run folder's weights are not here
    shutil.rmtree(repo / ".monte" / "runs" / "exp" / run / "checkpoints")
    err = refused(monte, repo, "promote", ref, "--dest", str(tmp_path / "x"), "--confirm", ref,
                  code="E_NOT_FOUND", exit_code=4)
    assert "--from-hub" in err["fix"] and "acme/parity-ckpts" in err["fix"]
    before = snapshot_state(repo)
    dest = tmp_path / "exports" / "model"
    r = monte("promote", ref, "--dest", str(dest), "--confirm", ref, "--from-hub", "--json")
    assert r.code == 0, r.out + r.err
    assert (dest / "README.md").is_file()  # promote writes the card as it stands now
    # every byte as the lineage commit records it, but config.json: training's `use_cache: false` is
    # set back as the base model has it (the card says so), as a promote from the run folder does
    got = {p.name: sha256_file(p) for p in dest.iterdir() if p.name != "README.md"}
    assert set(got) == set(files) and files == r.json()["sha256"]
    assert {n: d for n, d in got.items() if n != "config.json"} == {n: d for n, d in files.items() if n != "config.json"}
    assert json.loads((dest / "config.json").read_text()).get("use_cache") is not False
    assert "`use_cache: false`" in (dest / "README.md").read_text()
    assert r.json()["hub"] == {"repo": "acme/parity-ckpts", "revision": "1".zfill(40)}
    assert sorted(p.name for p in dest.parent.iterdir()) == ["model"]  # no staging left
    assert snapshot_state(repo) == before
    downloads = fake_hub.named("hf_hub_download")
    assert {d["filename"] for d in downloads} == set(files)
    assert {d["revision"] for d in downloads} == {"1".zfill(40)}
    # one byte changed in the hub copy: nothing lands
    stored = fake_hub.commits[("acme/parity-ckpts", "1".zfill(40))]
    name = "config.json"
    stored[name] = stored[name][:-2] + bytes([stored[name][-2] ^ 1]) + stored[name][-1:]
    dest2 = tmp_path / "exports2" / "model"
    err = refused(monte, repo, "promote", ref, "--dest", str(dest2), "--confirm", ref, "--from-hub",
                  code="E_INTEGRITY", exit_code=5)
    assert name in err["message"] and "lineage commit" in err["message"]
    assert not dest2.exists() and not dest2.parent.exists()


def test_promote_from_the_hub_refuses_a_checkpoint_with_no_hub_copy(repo: Path, monte, pushing: Path,
                                                                   tmp_path: Path) -> None:
    run = trained(monte, *CHUNK)["run"]
    err = refused(monte, repo, "promote", f"{run}@4", "--dest", str(tmp_path / "x"), "--confirm", f"{run}@4",
                  "--from-hub", code="E_NOT_FOUND", exit_code=4)
    assert "--push" in err["message"]


def test_a_failed_push_mid_run_keeps_the_run_going(repo: Path, monte, pushing: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    calls = pushes_failing_on(monkeypatch, {2, 3})  # after the upload and after the checkpoint
    r = train(monte, *CHUNK, "--push")
    assert r.code == 0, r.out + r.err
    run = r.json()["run"]["run"]
    assert len(calls) == 4
    failed = [e for e in run_events(repo, run) if e["event"] == "push-failed"]
    assert [e["transition"] for e in failed] == ["weights-uploaded", "checkpoint"]
    assert all(e["code"] == "E_STORAGE" for e in failed)
    # the final push carried what the failed ones missed
    assert (pushing / "git" / "exp" / "refs" / "lineage" / run).is_file()
    assert "push-failed" in (pushing / "runs" / "exp" / run / "events.jsonl").read_text()


def test_a_failed_final_push_is_e_storage_and_the_run_is_recorded(repo: Path, monte, pushing: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    pushes_failing_on(monkeypatch, {4})
    r = train(monte, *CHUNK, "--push")
    assert r.code == 7, r.out + r.err
    err = r.json()["error"]
    run = err["details"][0]["run"]
    assert err["code"] == "E_STORAGE" and "finished and is recorded locally" in err["message"]
    assert f"`monte push exp --run {run}` retries" in err["fix"]
    rows = {x["run"]: x for x in monte("status", "--json").json()["rows"]}
    assert rows[run]["status"] == "succeeded"
    assert _checkpoint_json(repo, run)["hub"]["repo"] == "acme/parity-ckpts"


def _forbidden() -> Exception:
    from types import SimpleNamespace

    from huggingface_hub.errors import HfHubHTTPError

    response = SimpleNamespace(status_code=403, headers={}, request=None)  # what the error reads of one
    return HfHubHTTPError(f"403 Forbidden (token {TOKEN})", response=response)  # type: ignore[arg-type]


def test_a_token_that_cannot_write_refuses_before_any_compute(repo: Path, monte, pushing: Path,
                                                              fake_hub: FakeHub) -> None:
    fake_hub.fail_create = _forbidden()
    err = refused(monte, repo, "train", *CHUNK, "--push", "--yes", code="E_STORAGE", exit_code=7)
    assert "acme/parity-ckpts" in err["message"] and "HF_TOKEN" in err["fix"]
    _no_token(json.dumps(err))
    assert fake_hub.named("upload_folder") == []


def test_a_hub_failure_keeps_the_local_checkpoint(repo: Path, monte, pushing: Path, fake_hub: FakeHub) -> None:
    fake_hub.fail_upload = _forbidden()
    r = train(monte, *CHUNK, "--push")
    assert r.code == 7, r.out + r.err
    err = r.json()["error"]
    assert err["code"] == "E_STORAGE" and "did not reach the hub" in err["message"]
    assert "HF_TOKEN" in err["fix"] and "kept on this data root" in err["fix"]
    _no_token(r.out, r.err)
    run = next(x["run"] for x in monte("status", "--json").json()["rows"] if x["kind"] == "train")
    info = _checkpoint_json(repo, run)
    assert "hub" not in info
    folder = repo / ".monte" / info["weights"]
    assert {p.name: sha256_file(p) for p in folder.iterdir()} == info["files"]
    events = run_events(repo, run)
    assert "weights-upload-failed" in [e["event"] for e in events]
    _no_token((repo / ".monte" / "runs" / "exp" / run / "events.jsonl").read_text())
