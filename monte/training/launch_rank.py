"""One rank of a multi-process chunk: ``python -m monte.training.launch_rank JOB`` under torchrun
or accelerate launch (see :mod:`monte.training.launch`).

It builds the chunk's TRL trainer exactly as a one-process chunk does and trains its share; the
trainer's main process saves the checkpoint. A rank writes nothing to the ledger: it leaves
``rank-R.pid`` when it starts, ``rank-R.done`` (rank 0: the checkpoint it saved) when it ends,
or ``rank-R.error`` (the exception) when it fails, in the launch folder; the ``monte train``
process that started the launch reads them.
"""

from __future__ import annotations

import json
import os
import sys
import traceback
from pathlib import Path


def main(argv: list[str]) -> int:
    job = json.loads(Path(argv[0]).read_text(encoding="utf-8"))
    folder = Path(job["dir"])
    rank = int(os.environ.get("RANK", "0"))
    (folder / f"rank-{rank}.pid").write_text(str(os.getpid()), encoding="utf-8")
    try:
        import torch

        torch.set_num_threads(max(int(os.environ.get("OMP_NUM_THREADS", "1") or 1), 1))
        from monte.training.plan import TrainPlan
        from monte.training.run import train_chunk
        from monte.workspace import open_workspace

        ws = open_workspace(Path(job["repo_root"]))
        plan = TrainPlan.model_validate(job["plan"])
        ckpt, step = train_chunk(ws, plan, Path(job["out"]), job["run"], None)
    except BaseException as e:
        (folder / f"rank-{rank}.error").write_text(json.dumps({
            "rank": rank, "error": f"{type(e).__name__}: {e}".splitlines()[0][:500],
            "traceback": traceback.format_exc()}), encoding="utf-8")
        raise
    (folder / f"rank-{rank}.done").write_text(json.dumps({"checkpoint": str(ckpt), "step": step}),
                                              encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
