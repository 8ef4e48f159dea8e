"""Issue 42, case 2: a model is how it behaves.

On the code before this file, a trained checkpoint with 1 % Gaussian noise, or with its MLP units
and attention heads permuted (the same function), passed as ``--model`` was a new cohort whose
test@0 read the trained model's score: the weights sketch keys values by position, and every
value moved. Every base and checkpoint commit records a behavioural fingerprint now
(``monte.models.fingerprint``), and a candidate base that behaves as a recorded checkpoint is
refused (``E_SEALED``, naming it and the distance); one that behaves as a recorded base is its
cohort. The variants are the benchmark's own (``bench/fingerprint_corpus.py``).
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.support.helpers import checkpoint, snapshot_state

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
import fingerprint_corpus as corpus  # noqa: E402 - the benchmark's variants: one definition of each


def _plan(monte, *args: str) -> Any:
    return monte("eval", "--dry-run", "--json", *args)


@pytest.fixture
def trained(tmp_path: Path, base_model: Path) -> Path:
    """The tiny base after 20 real AdamW steps on parity: it behaves otherwise than its base."""
    return corpus.train(base_model, tmp_path / "trained", corpus._parity, 20)


@pytest.mark.parametrize("variant", ["noise 1%", "permuted units and heads", "fp16 round trip"])
def test_a_checkpoint_that_behaves_the_same_with_other_bytes_is_refused_as_a_base(
        repo: Path, monte, exp: str, base_model: Path, trained: Path, tmp_path: Path, variant: str) -> None:
    run = checkpoint(repo, trained)  # the base and the checkpoint are recorded, each with its fingerprint
    folder = repo / ".monte" / "runs" / "exp" / run / "checkpoints" / "step-50"
    copy = tmp_path / "copy"
    shutil.copytree(folder, copy)
    corpus.VARIANTS[variant](copy, base_model)
    before = snapshot_state(repo)
    for split in ("test", "dev"):
        r = _plan(monte, "--split", split, "--model", str(copy))
        assert r.code == 3, r.out
        err = r.json()["error"]
        assert err["code"] in ("E_SEALED", "E_REFUSED") and f"exp/{run}@50" in err["message"], err
        if variant != "fp16 round trip":  # (a retyped copy is caught by its bytes first: the sketch)
            assert err["code"] == "E_SEALED" and "behaves as checkpoint" in err["message"], err
            assert "behavioural distance" in err["message"] and "monte eval --checkpoint" in err["fix"]
    assert snapshot_state(repo) == before


def test_a_base_that_behaves_as_a_recorded_base_is_its_cohort(repo: Path, monte, exp: str, base_model: Path,
                                                             tmp_path: Path, tiny_models) -> None:
    assert monte("eval", "--yes", "--json", "--split", "test").code == 0  # test@0: the base is recorded
    cohort = _plan(monte).json()["plan"]["cohort"]
    for variant in ("noise 1%", "permuted units and heads"):
        copy = tmp_path / variant.replace(" ", "-")
        shutil.copytree(base_model, copy)
        corpus.VARIANTS[variant](copy, base_model)
        assert _plan(monte, "--model", str(copy)).json()["plan"]["cohort"] == cohort, variant
        r = monte("eval", "--yes", "--json", "--split", "test", "--model", str(copy), "--dry-run")
        assert r.code == 3 and r.json()["error"]["code"] == "E_SEALED", r.out
    # another seed behaves otherwise: its own cohort, its own two reads
    assert _plan(monte, "--model", str(tiny_models[2])).json()["plan"]["cohort"] != cohort


def test_only_models_of_one_tokenizer_compare() -> None:
    from monte.models import fingerprint as fp

    a = {"v": fp.FINGERPRINT_VERSION, "tokenizer": "t1", "vocab": 4, "probes": 1, "scores": fp._pack([1, -1, 0.5, -0.5])}
    assert fp.distance(a, dict(a)) == 0.0
    assert fp.distance(a, {**a, "tokenizer": "t2"}) is None  # another tokenizer: another base
    assert fp.distance(a, {**a, "vocab": 5}) is None
    far = {**a, "scores": fp._pack([-1, 1, -0.5, 0.5])}
    assert fp.distance(a, far) == pytest.approx(2.0, abs=1e-3)  # opposite scores: as far as they go


def test_verify_and_the_hooks_refuse_a_base_commit_that_behaves_as_a_checkpoint(
        repo: Path, monte, exp: str, base_model: Path, trained: Path, tmp_path: Path) -> None:
    """The fingerprint was the CLI's check only: a base commit written without it (by hand, or by a
    monte that skipped ``identify_base``) for a noised copy of a checkpoint passed ``verify --all``
    and the hooks, a fresh seal for a trained model. Verify now compares the fingerprints both
    commits record (no torch, nothing recomputed): rule ``behaviour``."""
    from monte.ledger.lineage import ensure_base, servable_files, weights_identity
    from monte.ledger.refs import ZERO, base_ref
    from monte.ledger.verify import verify_updates
    from monte.workspace import open_workspace

    for split in ("dev", "test"):  # the baselines, then a chunk: an honest ledger
        assert monte("eval", "--yes", "--json", "--split", split).code == 0
    run = checkpoint(repo, trained)
    ok = monte("ledger", "verify", "--all", "--json")
    assert ok.code == 0, ok.out  # an honest base and its checkpoint: no finding
    copy = tmp_path / "copy"
    shutil.copytree(repo / ".monte" / "runs" / "exp" / run / "checkpoints" / "step-50", copy)
    corpus.VARIANTS["noise 1%"](copy, base_model)
    ws = open_workspace(repo)
    weights = weights_identity(copy)
    cohort, tip = ensure_base(ws.store, "exp", str(copy), servable_files(copy), cohort=weights[:12],
                              weights=weights, folder=copy)  # the check skipped: a forged new cohort
    r = monte("ledger", "verify", "--all", "--json")
    assert r.code != 0, r.out
    err = r.json()["error"]
    assert err["code"] == "E_VERIFY" and "[behaviour]" in err["message"], err
    assert f"behaves as checkpoint exp/{run}@50" in err["message"] and "behavioural distance" in err["message"]
    found = verify_updates(ws.store, [(base_ref("exp", cohort), ZERO, tip)])  # what pre-receive/pre-push judge
    assert [v.rule for _, v in found] == ["behaviour"], found
