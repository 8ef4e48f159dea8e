"""Samples and epochs seen along a checkpoint's path when the batch size changes between stages
(issue 46.14). Reproduced on the code before: a chunk's output said only its own samples and
epochs (TRL's counters, which restart at a stage boundary), so after a stage with another batch
size nothing said how many samples the weights had seen since the base, nor how many epochs of
each source; a step count does not. Real chunks of the tiny model on CPU (4 steps each)."""

from __future__ import annotations

from pathlib import Path

from tests.support.trainhelp import SFT, curriculum, write_recipe


def test_a_chunk_after_a_batch_size_change_says_the_samples_along_its_path(repo: Path, monte, ready: str) -> None:
    write_recipe(repo, "wide", SFT.replace("per_device_train_batch_size: 16", "per_device_train_batch_size: 8")
                 + "# the next stage, at half the batch\n")
    r = monte("train", "--recipe", "sft-t", "--source", "parity-sft", "--from-base", "--yes", "--json")
    assert r.code == 0, r.out + r.err
    a = r.json()
    assert a["curve"]["path_samples"] == 16 * 4 and a["curve"]["path_batches"] == [16]
    assert a["curve"]["path_epochs"] == [{"source": "parity-sft", "kind": "dataset", "seen": 64, "rows": 256,
                                          "epochs": 0.25}]
    r = monte("train", "--recipe", "sft-t", "--source", "parity-sft", "--parent", f"{a['run']['run']}@4", "--yes",
              "--json")
    assert r.code == 0, r.out + r.err
    b = r.json()["run"]["run"]
    r = monte("train", "--recipe", "wide", "--source", "parity-sft", "--parent", f"{b}@8", "--yes")
    assert r.code == 0, r.out + r.err
    assert "samples along its path from the base: 160 (3 chunks; batches 16, 16, 8, oldest first)" in r.out, r.out
    # 160 of the dataset's 256 rows, summed across the batch change (TRL's own epoch, restarted at
    # the boundary, says 32 / 256 = 0.125)
    assert "epochs along its path: parity-sft 0.625 (160 samples / 256 rows)" in r.out, r.out


def test_a_grpo_stage_counts_prompts_of_its_curriculum(repo: Path, monte, ready: str) -> None:
    """A GRPO batch counts completions, num_generations (4) per prompt: its 4 steps of batch 8
    draw 8 prompts of the environment's curriculum, not 32; the SFT stage before it stays on its
    own dataset's count."""
    r = monte("train", "--recipe", "sft-t", "--source", "parity-sft", "--from-base", "--yes", "--json")
    assert r.code == 0, r.out + r.err
    a = r.json()["run"]["run"]
    r = monte("train", "--recipe", "grpo-t", "--source", "parity", "--parent", f"{a}@4", "--yes")
    assert r.code == 0, r.out + r.err
    items = len(curriculum(repo))
    assert "samples along its path from the base: 96 (2 chunks; batches 16, 8, oldest first)" in r.out, r.out
    assert (f"epochs along its path: parity-sft 0.25 (64 samples / 256 rows); parity {8 / items:.3g} "
            f"(8 prompts / {items} curriculum items)") in r.out, r.out


def test_a_source_whose_rows_are_not_samples_or_not_here_has_no_epoch_count() -> None:
    """A recipe that packs rows into sequences draws no whole rows, and a source frozen on another
    machine has no size here: each says null, never a made-up count; the others still count."""
    from monte.training.run import path_chunk, path_epochs

    sizes = {"demos": 100, "parity": 40}
    chunks = [path_chunk(16, 4, "sft", {"packing": True}, "demos", "dataset"),
              path_chunk(8, 5, "sft", {}, "elsewhere", "dataset"),
              path_chunk(8, 10, "rloo", {"num_generations": 4}, "parity", "environment")]
    assert path_epochs(chunks, lambda name, kind: sizes.get(name)) == [
        {"source": "demos", "kind": "dataset", "seen": None, "rows": 100, "epochs": None},
        {"source": "elsewhere", "kind": "dataset", "seen": 40, "rows": None, "epochs": None},
        {"source": "parity", "kind": "environment", "seen": 20, "rows": 40, "epochs": 0.5}]
