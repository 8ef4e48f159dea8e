"""The tiny models' answers, recorded, so the honest ledger is built and read without torch.

verify's tests read ledgers; the model behind an eval's answers matters to them only through the
records monte writes. So the honest ledger (tests/verify/conftest.py) is written by monte's own
writers, the whole eval path included (plan, started record, grading by the environment's grader,
samples, scores, paired deltas, finished record), with one part replaced at one narrow boundary:
the model. :func:`recorded_engine` puts a replay where ``monte.models.generate``'s ``load`` and
``generate`` and ``monte.models.fingerprint``'s ``fingerprint`` (one forward pass) stand,
answering each prompt as the model folder of that seed answered it (``recorded/answers.json``,
each folder's fingerprint too). :func:`model_folder` writes those folders, real models that
transformers loads: the tiny model's own config and tokenizer files (``recorded/model/``) with
safetensors weights of its tensors' names and shapes, drawn by numpy from the seed. A folder the
replay does not know (a real model a test made) goes to the real functions.

The answers are what those very folders answer, loaded by transformers: ``python -m
tests.verify.recorded`` records them again (torch), and ``test_recorded.py`` (slow, torch) checks
that the recording is what they answer today.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import struct
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

HERE = Path(__file__).resolve().parent / "recorded"
SEEDS = (0, 1, 2, 3)
SPLITS = ("dev", "test")


def _recording() -> dict[str, Any]:
    data: dict[str, Any] = json.loads((HERE / "answers.json").read_text())
    return data


def model_folder(dest: Path, seed: int, tensors: list[Any] | None = None) -> Path:
    """A model folder for ``seed``: the tiny model's config and tokenizer, and weights of its
    tensors' names and shapes drawn from numpy's generator seeded ``seed`` (float32)."""
    import numpy as np

    shutil.copytree(HERE / "model", dest)
    rng = np.random.default_rng(seed)
    header: dict[str, Any] = {}
    blobs: list[bytes] = []
    offset = 0
    for name, shape in tensors if tensors is not None else _recording()["tensors"]:
        w = rng.standard_normal(shape) * 0.02 + (1.0 if name.endswith("norm.weight") else 0.0)  # as initialised
        blob = w.astype("<f4").tobytes()
        header[name] = {"dtype": "F32", "shape": shape, "data_offsets": [offset, offset + len(blob)]}
        blobs.append(blob)
        offset += len(blob)
    head = json.dumps(header, separators=(",", ":")).encode()
    head += b" " * (-len(head) % 8)
    (dest / "model.safetensors").write_bytes(struct.pack("<Q", len(head)) + head + b"".join(blobs))
    return dest


def _weights_digest(folder: Path) -> str:
    return hashlib.sha256((folder / "model.safetensors").read_bytes()).hexdigest()


class RecordedModel:
    """What ``load`` returns for a recorded folder: the seed whose answers it replays."""

    def __init__(self, seed: int, answers: dict[str, str]) -> None:
        self.seed, self.answers = seed, answers


@contextmanager
def recorded_engine(mp: pytest.MonkeyPatch, folders: dict[int, Path]) -> Iterator[None]:
    """Within it, a model folder of ``folders`` (seed -> folder, from :func:`model_folder`; a
    private copy of one too, known by its weights) answers as recorded; any other as it does."""
    from monte.models import fingerprint as fp
    from monte.models import generate as gen
    from monte.training import record as record_mod

    real_load, real_generate, real_fingerprint = gen.load, gen.generate, fp.fingerprint
    recording = _recording()
    by_digest = {_weights_digest(f): seed for seed, f in folders.items()}

    def seed_of(folder: Path) -> int | None:
        return by_digest.get(_weights_digest(folder)) if (folder / "model.safetensors").is_file() else None

    def load(folder: Path) -> tuple[Any, Any]:
        seed = seed_of(Path(folder))
        if seed is None:
            return real_load(folder)
        answers = {k: v for split in SPLITS for k, v in recording["answers"][str(seed)][split].items()}
        return RecordedModel(seed, answers), None

    def generate(model: Any, tok: Any, prompts: Any, **kw: Any) -> list[str]:
        if not isinstance(model, RecordedModel):
            return real_generate(model, tok, prompts, **kw)
        if kw.get("max_new_tokens") == 1:  # the preflight's one token: its answer is never kept
            return ["" for _ in prompts]
        out = []
        for p in prompts:
            key = json.dumps(p, sort_keys=True)
            if key not in model.answers:
                raise AssertionError(f"seed {model.seed} has no recorded answer to {key[:80]}: record again "
                                     "(python -m tests.verify.recorded)")
            out.append(model.answers[key])
        if kw.get("on_batch"):
            kw["on_batch"](len(prompts), len(prompts))
        return out

    def fingerprint(folder: Path) -> dict[str, Any]:
        seed = seed_of(Path(folder))
        if seed is None:
            return real_fingerprint(folder)
        taken: dict[str, Any] = recording["fingerprints"][str(seed)]
        return taken

    mp.setattr(gen, "load", load)
    mp.setattr(gen, "generate", generate)
    mp.setattr(fp, "fingerprint", fingerprint)  # (lineage and the base record look it up on the module)
    mp.setattr(record_mod, "fingerprint", fingerprint)  # (a checkpoint's record imported it by name)
    yield


def record(work: Path) -> dict[str, Any]:
    """What the real tiny models (seeds 0..3, torch) answer to every dev and test prompt of the
    parity environment, with the settings and batch size an eval of experiment ``exp`` uses."""
    import subprocess

    import torch

    from monte import api
    from monte.envs import grading
    from monte.evals.run import _batch_size, _read_split
    from monte.models import generate as gen
    from monte.models.tiny import init_model
    from monte.workspace import open_workspace

    torch.set_num_threads(1)
    repo = work / "repo"
    repo.mkdir(parents=True)
    subprocess.run(["git", "init", "-q", "-b", "main", str(repo)], check=True)
    subprocess.run([sys.executable, "-c", "from monte.cli.main import main; main(['init'])"], cwd=repo, check=True,
                   capture_output=True)
    init_model(work / "tiny", seed=0)  # the names and shapes of its tensors
    raw = (work / "tiny" / "model.safetensors").read_bytes()
    header = json.loads(raw[8:8 + struct.unpack("<Q", raw[:8])[0]])
    tensors = [[n, v["shape"]] for n, v in sorted(header.items()) if n != "__metadata__"]
    models = {s: model_folder(work / f"seed{s}", s, tensors) for s in SEEDS}
    ws = open_workspace(repo)
    api.env_add(server="parity", dev=("parity",), test=("parity",), ws=ws)
    api.experiment_init(name="exp", eval_env="parity", model=str(models[0]), ws=ws)
    answers: dict[str, dict[str, dict[str, str]]] = {}
    for split in SPLITS:
        plan = api.plan_eval(split=split, ws=ws)
        (e,) = plan.exams
        prompts = [grading.prompt_of(it) for it in _read_split(ws, e)]
        for s, folder in models.items():
            model, tok = gen.load(folder)
            got = gen.generate(model, tok, prompts, max_new_tokens=plan.settings["max_new_tokens"],
                               batch_size=_batch_size(plan), temperature=plan.settings["temperature"],
                               top_p=plan.settings["top_p"], stop=plan.settings["stop"],
                               chat_template=plan.settings["chat_template"])
            answers.setdefault(str(s), {})[split] = {json.dumps(p, sort_keys=True): a
                                                    for p, a in zip(prompts, got, strict=True)}
    from monte.models.fingerprint import fingerprint

    return {"tensors": tensors, "answers": answers, "fingerprints": {str(s): fingerprint(f) for s, f in models.items()}}


if __name__ == "__main__":  # pragma: no cover - the recording, made again by hand
    import os
    import tempfile

    from tests.support.helpers import PINNED_ENV

    with tempfile.TemporaryDirectory() as d:
        os.environ.update({**PINNED_ENV, "HOME": d})  # git and monte kept out of the real home
        out = record(Path(d))
    (HERE / "answers.json").write_text(json.dumps(out, indent=1, sort_keys=True) + "\n")
    print(f"recorded {sum(len(v) for s in out['answers'].values() for v in s.values())} answers", file=sys.stderr)
