"""A parity experiment built through the API, as the agent tests start from it: the trainable
parity environment (dev 200, test 200), an SFT dataset made from its curriculum, experiment
``exp`` on a tiny base model; nothing evaluated yet. :func:`parity_chunk` goes on to both
baselines and one chunk, kept for the tests that start there."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.support.kept import Kept


def parity_experiment(repo: Path, model: Path) -> None:
    from monte import api
    from monte.workspace import open_workspace

    ws = open_workspace(repo)
    api.env_add(server="parity", dev=("parity",), test=("parity",), ws=ws)
    rows = repo.parent / "parity-sft.jsonl"
    with open(ws.env_dir("parity") / "curriculum.jsonl") as src, open(rows, "w") as out:
        for line in src:
            item = json.loads(line)
            out.write(json.dumps({"input": item["prompt"], "output": " " + item["answer"]}) + "\n")
    api.dataset_add(name="parity-sft", from_file=rows, kind="sft", ws=ws)
    api.experiment_init(name="exp", eval_env="parity", model=str(model), ws=ws)


def parity_chunk(repo: Path, tmp_path: Path, kept: Kept, monte: Any, model: Path) -> dict[str, Any]:
    """:func:`parity_experiment`, both baselines of the base (``dev0``, ``test0``) and one
    ``sft-tiny`` chunk from base (``train``, 50 steps), all through the CLI; ``train_out`` is the
    chunk's human output from its run line on. Built once per worker (``kept``): the chunk is
    most of a test's time on CPU, and several tests only start from it."""
    def build() -> None:
        parity_experiment(repo, model)
        dev0 = monte("eval", "--yes", "--json")
        test0 = monte("eval", "--split", "test", "--yes", "--json")
        assert dev0.code == 0 and test0.code == 0, dev0.out + test0.out
        chunk = monte("train", "--recipe", "sft-tiny", "--source", "parity-sft", "--from-base", "--yes")
        assert chunk.code == 0, chunk.err
        lines = chunk.out.splitlines()  # the plan, then the run's line, then its curve
        at = next(i for i, line in enumerate(lines) if "checkpoints:" in line)
        state = {"dev0": dev0.json()["runs"][0]["run"], "test0": test0.json()["runs"][0]["run"],
                 "train": lines[at].split()[0], "train_out": lines[at:]}
        (tmp_path / CHUNK_STATE).write_text(json.dumps(state))

    kept.restore("parity-chunk", repo, tmp_path, build)
    state: dict[str, Any] = json.loads((tmp_path / CHUNK_STATE).read_text())
    return state


CHUNK_STATE = "parity-chunk.json"
