"""A parity experiment built through the API, as the agent tests start from it: the trainable
parity environment (dev 200, test 200), an SFT dataset made from its curriculum, experiment
``exp`` on a tiny base model; nothing evaluated yet."""

from __future__ import annotations

import json
from pathlib import Path


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
