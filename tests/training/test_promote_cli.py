"""`monte promote RUN@STEP --dest D --confirm RUN@STEP`: a sha256-verified export of a succeeded
training checkpoint's servable folder. Every refusal leaves the ledger, the data root and --dest
as they were."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from monte.hashing import sha256_file
from tests.support.helpers import git, snapshot_state
from tests.support.trainhelp import refused, trained


@pytest.fixture
def run(ready: str, monte) -> str:
    """One real 4-step SFT chunk from the base model: checkpoint RUN@4."""
    return str(trained(monte, "--recipe", "sft-t", "--source", "parity-sft", "--from-base")["run"])


def _folder(repo: Path, run: str) -> Path:
    return repo / ".monte" / "runs" / "exp" / run / "checkpoints" / "step-4"


def _lineage_files(repo: Path, run: str) -> dict[str, str]:
    files: dict[str, str] = json.loads(git(repo, "show", f"monte/exp/lineage/{run}:checkpoint.json"))["files"]
    return files


def _promote(monte, ref: str, dest: Path, confirm: str | None = None, *extra: str):
    return monte("promote", ref, "--dest", str(dest), "--confirm", confirm or ref, *extra)


def test_promote_exports_exactly_the_servable_files_verified(repo: Path, monte, run: str, tmp_path: Path) -> None:
    ref = f"{run}@4"
    files = _lineage_files(repo, run)
    (_folder(repo, run) / "notes.txt").write_text("not part of the model\n")  # a stray file stays behind
    before = snapshot_state(repo)
    dest = tmp_path / "exports" / "parity-model"  # its parent need not exist
    r = _promote(monte, ref, dest, None, "--json")
    assert r.code == 0, r.out + r.err
    out = r.json()
    assert out["checkpoint"] == ref and out["dest"] == str(dest)
    assert sorted(p.name for p in dest.iterdir()) == sorted([*files, "README.md"])  # + its model card
    model = [p for p in dest.iterdir() if p.name != "README.md"]
    # config.json loses training's `use_cache: false` (the base's config has none; the card says so)
    assert {p.name: sha256_file(p) for p in model if p.name != "config.json"} == \
        {n: d for n, d in files.items() if n != "config.json"} and files == out["sha256"]
    assert json.loads((_folder(repo, run) / "config.json").read_text()).get("use_cache") is False  # training's
    assert json.loads((dest / "config.json").read_text()).get("use_cache") is not False  # as the base has it
    assert "`use_cache: false`" in (dest / "README.md").read_text()
    # issue 30.11: the count and the size are of what is in the folder, the model card included
    exported = list(dest.iterdir())
    assert out["files"] == len(exported) == len(files) + 1 and out["bytes"] == sum(p.stat().st_size for p in exported)
    card = (dest / "README.md").read_text()
    assert "\nlicense: " in card.split("---", 2)[1], card[:400]
    assert not {"optimizer.pt", "trainer_state.json", "notes.txt"} & {p.name for p in dest.iterdir()}
    assert [p.name for p in dest.parent.iterdir()] == ["parity-model"]  # no staging folder left
    assert snapshot_state(repo) == before  # an export writes nothing to the record
    from transformers import AutoModelForCausalLM

    assert AutoModelForCausalLM.from_pretrained(str(dest)).config.model_type == "qwen2"
    # the human form reports the count and the size; an existing empty folder is a fine --dest
    empty = tmp_path / "empty"
    empty.mkdir()
    r = _promote(monte, ref, empty)
    assert r.code == 0, r.out + r.err
    # issue 46.13: beside the content bytes, what the folder takes on disk (as `du` counts it)
    disk = sum(p.stat().st_blocks * 512 for p in empty.iterdir())
    assert out["disk"] == sum(p.stat().st_blocks * 512 for p in exported)
    assert r.out.strip() == (f"promoted {ref} to {empty}: {len(files) + 1} files (the model card included), "
                             f"{out['bytes']:,} bytes ({disk / 2**20:.1f} MiB on disk), every sha256 verified")


def test_confirm_must_name_the_checkpoint_in_full(repo: Path, monte, run: str, tmp_path: Path) -> None:
    dest = tmp_path / "out"
    for wrong in (f"{run}@8", run, f"{run[:6]}@4"):
        err = refused(monte, repo, "promote", f"{run}@4", "--dest", str(dest), "--confirm", wrong,
                      code="E_USAGE", exit_code=2)
        assert f"--confirm {run}@4" in err["fix"]
        assert not dest.exists()
    assert monte("promote", f"{run}@4", "--dest", str(dest)).code == 2  # --confirm is required
    assert not dest.exists()


def test_only_a_real_training_checkpoint_is_promoted(repo: Path, monte, run: str, tmp_path: Path) -> None:
    dest = tmp_path / "out"
    evals = [x["run"] for x in monte("status", "--json").json()["rows"] if x["kind"] == "eval"]
    err = refused(monte, repo, "promote", f"{evals[0]}@0", "--dest", str(dest), "--confirm", f"{evals[0]}@0",
                  code="E_REFUSED", exit_code=3)
    assert "eval" in err["message"] and "training run" in err["fix"]
    smoke = trained(monte, "--recipe", "sft-t", "--source", "parity-sft", "--smoke")["run"]
    err = refused(monte, repo, "promote", f"{smoke}@3", "--dest", str(dest), "--confirm", f"{smoke}@3",
                  code="E_NOT_EVIDENCE", exit_code=3)
    assert "smoke" in err["message"]
    err = refused(monte, repo, "promote", f"{run}@8", "--dest", str(dest), "--confirm", f"{run}@8",
                  code="E_NOT_FOUND", exit_code=4)
    assert f"{run}@4" in err["message"]  # says which checkpoints the run has
    refused(monte, repo, "promote", "nosuch@4", "--dest", str(dest), "--confirm", "nosuch@4",
            code="E_NOT_FOUND", exit_code=4)
    assert not dest.exists()


def test_a_non_empty_dest_is_refused(repo: Path, monte, run: str, tmp_path: Path) -> None:
    dest = tmp_path / "taken"
    dest.mkdir()
    (dest / "keep.txt").write_text("mine\n")
    err = refused(monte, repo, "promote", f"{run}@4", "--dest", str(dest), "--confirm", f"{run}@4",
                  code="E_REFUSED", exit_code=3)
    assert str(dest) in err["message"] and "new folder" in err["fix"]
    assert [p.name for p in dest.iterdir()] == ["keep.txt"] and (dest / "keep.txt").read_text() == "mine\n"
    afile = tmp_path / "a-file"
    afile.write_text("x")
    err = refused(monte, repo, "promote", f"{run}@4", "--dest", str(afile), "--confirm", f"{run}@4",
                  code="E_USAGE", exit_code=2)  # click's own check: --dest is a folder
    assert "is a file" in err["message"] and afile.read_text() == "x"


def test_a_usage_error_points_at_the_commands_help(repo: Path, monte, tmp_path: Path) -> None:
    afile = tmp_path / ("a-file-with-a-long-name-" * 3)
    afile.write_text("x")
    r = monte("promote", "abcdefghijkl@4", "--dest", str(afile), "--confirm", "abcdefghijkl@4", "--json")
    assert r.code == 2
    assert r.json()["error"]["fix"] == "see `monte promote --help`"


@pytest.mark.parametrize("damage", ["modify", "delete"])
def test_a_tampered_checkpoint_is_an_integrity_error(repo: Path, monte, run: str, tmp_path: Path, damage: str) -> None:
    weights = _folder(repo, run) / "model.safetensors"
    if damage == "modify":
        data = bytearray(weights.read_bytes())
        data[-1] ^= 0xFF  # one bit of one weight: same size, another sha256
        weights.write_bytes(bytes(data))
    else:
        weights.unlink()
    dest = tmp_path / "out"
    # a changed file is tampering; a missing one is weights not on this data root (a synced copy
    # never holds them), said as such
    code, exit_code = ("E_INTEGRITY", 5) if damage == "modify" else ("E_NOT_FOUND", 4)
    err = refused(monte, repo, "promote", f"{run}@4", "--dest", str(dest), "--confirm", f"{run}@4",
                  code=code, exit_code=exit_code)
    assert "model.safetensors" in err["message"] and f"{run}@4" in err["message"]
    assert err["fix"]
    assert not dest.exists() and list(tmp_path.glob(".out.promote-*")) == []


def test_a_promoted_folder_carries_its_story(repo: Path, monte, run: str, tmp_path: Path) -> None:
    """The model card (README.md) says where the weights come from; the folder is a plain
    publishable model: it loads, anyone can read it, and no config carries a local-only flag."""
    import os
    import stat

    from huggingface_hub import ModelCard
    from transformers import AutoModelForCausalLM, AutoTokenizer

    ref = f"{run}@4"
    assert monte("eval", "--checkpoint", ref, "--yes").code == 0  # a dev eval of the checkpoint
    status = monte("status", "--json").json()
    dest = tmp_path / "model"
    r = _promote(monte, ref, dest, None, "--json")
    assert r.code == 0, r.out + r.err

    assert AutoModelForCausalLM.from_pretrained(str(dest)).config.model_type == "qwen2"
    AutoTokenizer.from_pretrained(str(dest))
    umask = os.umask(0)
    os.umask(umask)
    for p in dest.iterdir():  # like any file this user makes: the weights are not 0600
        assert stat.S_IMODE(p.stat().st_mode) == 0o666 & ~umask, p.name
        assert stat.S_IMODE(p.stat().st_mode) & stat.S_IROTH, p.name
    for name in ("config.json", "tokenizer_config.json"):
        assert not {"local_files_only", "is_local"} & set(json.loads((dest / name).read_text())), name

    card = ModelCard.load(dest / "README.md")
    assert card.data.library_name == "transformers" and "monte" in card.data.tags
    text = card.text
    ledger_tip = git(repo, "rev-parse", "monte/exp/ledger").strip()
    assert f"`{ledger_tip}`" in text  # the ledger commit
    assert "lineage: base -sft:parity-sft-> 4" in text
    assert _lineage_commit(repo, run) in text
    rows = {x["run"]: x for x in status["rows"]}
    test0 = next(x for x in rows.values() if x["what"] == "parity/test" and x["target"] == "base")
    dev = next(x for x in rows.values() if x["what"] == "parity/dev" and x["target"] == ref)
    assert f"`{test0['run']}`" in text and "baseline (test@0)" in text  # the test read used, its verdict
    assert f"`{dev['run']}`" in text
    meas = json.loads(git(repo, "show", "monte/exp/ledger:measurement.json"))
    for split in ("dev", "test"):
        assert meas["exams"]["parity"]["splits"][split]["sha256"] in text  # the exam hashes
    assert meas["environment_fingerprint"] in text and "grader" in text
    assert "monte train -e exp --recipe sft-t --source parity-sft --from-base" in text  # how to reproduce
    for name, digest in _lineage_files(repo, run).items():
        assert f"| `{name}` | `{digest}` |" in text
    # the eval results, as the hub reads them (model-index)
    results = card.data.eval_results
    assert results and any(e.dataset_split == "dev" and e.metric_value == dev["score"] for e in results)


def _lineage_commit(repo: Path, run: str) -> str:
    return git(repo, "rev-parse", f"monte/exp/lineage/{run}").strip()
