"""Helpers for the training tests: small repo recipes, SFT rows, and refusal checks.

The recipes keep batches small so a 4-step chunk of a 3 M-parameter model takes about a second
on one CPU thread. Every learning-rate schedule is constant: a continuation is then exactly the
same arithmetic as one longer chunk: resuming restores optimizer, scheduler, RNG and data
position, and a decaying schedule would be rebuilt at each chunk edge (docs/recipes.md).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from .helpers import snapshot_state

SFT = """\
# small SFT for tests (TRL SFTTrainer)
algorithm: sft
learning_rate: 3.0e-3
lr_scheduler_type: constant
per_device_train_batch_size: 16
max_length: 32
"""

GRPO = """\
# small GRPO for tests: the environment's grader is the reward
algorithm: grpo
learning_rate: 1.0e-4
lr_scheduler_type: constant
per_device_train_batch_size: 8
num_generations: 4
max_completion_length: 4
"""


def distill(teacher: Path | str) -> str:
    return ("algorithm: distillation\n"
            f"teacher: {teacher}\n"
            "learning_rate: 1.0e-4\n"
            "lr_scheduler_type: constant\n"
            "per_device_train_batch_size: 8\n"
            "max_completion_length: 4\n")


def write_recipe(repo: Path, name: str, text: str) -> Path:
    path = repo / "recipes" / f"{name}.yaml"
    path.parent.mkdir(exist_ok=True)
    path.write_text(text)
    return path


def curriculum(repo: Path, env: str = "parity") -> list[dict[str, Any]]:
    with open(repo / ".monte" / "environments" / env / "curriculum.jsonl", encoding="utf-8") as f:
        return [json.loads(line) for line in f]


def exam_prompts(repo: Path, split: str, env: str = "parity") -> list[str]:
    path = repo / ".monte" / "environments" / env / "exams" / env / f"{split}.jsonl"
    with open(path, encoding="utf-8") as f:
        return [json.loads(line)["prompt"] for line in f if line.strip()]


def write_sft_rows(path: Path, items: list[dict[str, Any]]) -> Path:
    """``{"input": prompt, "output": " " + answer}`` rows (the answer follows the prompt's ``=``)."""
    path.write_text("".join(json.dumps({"input": it["prompt"], "output": " " + it["answer"]}) + "\n"
                            for it in items))
    return path


def train(monte: Any, *args: str) -> Any:
    """``monte train --yes --json ARGS``."""
    return monte("train", "--yes", "--json", *args)


def trained(monte: Any, *args: str) -> dict[str, Any]:
    """Run a chunk that must succeed; return its row."""
    r = train(monte, *args)
    assert r.code == 0, r.out + r.err
    row: dict[str, Any] = r.json()["run"]
    assert row["status"] == "succeeded"
    return row


def refused(monte: Any, repo: Path, *args: str, code: str, exit_code: int) -> dict[str, str]:
    """Run a command that must refuse with ``code``, changing no ref and no file; return the error.
    ``E_LEAK`` is the one refusal that records: one ``leak-refusal`` commit on the experiment's
    ledger, adding only its ``leaks/`` file (the count travels with the ledger)."""
    before = snapshot_state(repo)
    r = monte(*args, "--json")
    assert r.code == exit_code, r.out + r.err
    err: dict[str, str] = r.json()["error"]
    assert err["code"] == code, err
    after = snapshot_state(repo)
    if code == "E_LEAK":
        after["refs"] = leak_record_undone(repo, before["refs"], after["refs"])
    assert after == before
    return err


def leak_record_undone(repo: Path, before: str, after: str) -> str:
    """``after``'s refs with the one leak-refusal record a refusal appended taken back out, after
    checking that it is that record and nothing more."""
    from .helpers import git

    old = dict(line.split(" ") for line in before.splitlines())
    new = dict(line.split(" ") for line in after.splitlines())
    moved = [ref for ref in new if old.get(ref) != new[ref]]
    assert len(moved) == 1 and moved[0].endswith("/ledger") and set(old) == set(new), moved
    ref = moved[0]
    assert git(repo, "rev-parse", f"{new[ref]}^").strip() == old[ref]  # one commit on the old tip
    event = git(repo, "log", "-1", "--format=%(trailers:key=Monte-Event,valueonly)", new[ref]).strip()
    files = git(repo, "diff", "--name-only", old[ref], new[ref]).split()
    assert event == "leak-refusal" and len(files) == 1 and files[0].startswith("leaks/"), (event, files)
    return "".join(f"{r} {old[r]}\n" for r in new)


DPO = """\
# small DPO for tests (TRL DPOTrainer): the reference model is the stage's start
algorithm: dpo
learning_rate: 1.0e-3
lr_scheduler_type: constant
per_device_train_batch_size: 16
beta: 0.1
max_length: 32
"""

RLOO = """\
# small RLOO for tests: the environment's grader is the reward, as for GRPO
algorithm: rloo
learning_rate: 1.0e-4
lr_scheduler_type: constant
per_device_train_batch_size: 8
num_generations: 4
max_completion_length: 4
"""


def write_preference_rows(path: Path, items: list[dict[str, Any]]) -> Path:
    """``{"prompt", "chosen": " " + answer, "rejected": " " + the other answer}`` rows of parity items."""
    other = {"even": "odd", "odd": "even"}
    path.write_text("".join(json.dumps({"prompt": it["prompt"], "chosen": " " + it["answer"],
                                        "rejected": " " + other[it["answer"]]}) + "\n" for it in items))
    return path
