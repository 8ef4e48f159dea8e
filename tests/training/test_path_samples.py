"""Samples seen along a checkpoint's path when the batch size changes between stages (issue
46.14). Reproduced on the code before: a chunk's output said only its own samples and epochs
(TRL's counters, which restart at a stage boundary), so after a stage with another batch size
nothing said how many samples the weights had seen since the base; a step count does not.
Real chunks of the tiny model on CPU (4 steps each)."""

from __future__ import annotations

from pathlib import Path

from support.trainhelp import SFT, write_recipe


def test_a_chunk_after_a_batch_size_change_says_the_samples_along_its_path(repo: Path, monte, ready: str) -> None:
    write_recipe(repo, "wide", SFT.replace("per_device_train_batch_size: 16", "per_device_train_batch_size: 8")
                 + "# the next stage, at half the batch\n")
    r = monte("train", "--recipe", "sft-t", "--source", "parity-sft", "--from-base", "--yes", "--json")
    assert r.code == 0, r.out + r.err
    a = r.json()
    assert a["curve"]["path_samples"] == 16 * 4 and a["curve"]["path_batches"] == [16]
    r = monte("train", "--recipe", "sft-t", "--source", "parity-sft", "--parent", f"{a['run']['run']}@4", "--yes",
              "--json")
    assert r.code == 0, r.out + r.err
    b = r.json()["run"]["run"]
    r = monte("train", "--recipe", "wide", "--source", "parity-sft", "--parent", f"{b}@8", "--yes")
    assert r.code == 0, r.out + r.err
    assert "samples along its path from the base: 160 (3 chunks; batches 16, 16, 8, oldest first)" in r.out, r.out
