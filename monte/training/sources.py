"""What a Run trains on (``--source``): a frozen Dataset (sft) or a trainable Environment's
curriculum (grpo, distillation). One namespace for both; a name held by both refuses."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from monte.envs.grading import task_id
from monte.envs.items import LeakIndex, item_text, read_items
from monte.errors import error
from monte.ledger.records import Measurement
from monte.manifest import read_manifest, verify_folder
from monte.workspace import Workspace

NEEDS = {"sft": "dataset", "grpo": "environment", "distillation": "environment"}


class Source(BaseModel):
    name: str
    kind: str  # "dataset" | "environment"
    rows: str  # the rows file on the data root
    columns: dict[str, str] | None = None
    benchmark: str | None = None  # environments: the curriculum's benchmark (its grader)
    #: environments: the manifest's grader (a NeMo Gym curriculum is graded by its server)
    grader: dict[str, Any] | None = None
    fingerprint: str


def resolve(ws: Workspace, name: str) -> Source:
    if name.startswith(("lm-eval:", "file:")):  # exams (an lm-eval task, a JSONL of questions) are not curricula
        raise error("E_USAGE", f"--source {name} names an exam: exams are graded, not trained on",
                    "freeze the demonstrations to train on as a Dataset with `monte dataset add NAME --from-file "
                    "F --kind sft`, and pass --source NAME")
    ds = read_manifest(ws.dataset_dir(name))
    env = read_manifest(ws.env_dir(name))
    if ds is not None and env is not None and env.env_kind == "trainable":
        raise error("E_SOURCE_CONFLICT", f"both a dataset and a trainable environment are named {name!r}",
                    "the --source namespace is shared; re-freeze one of them under another name")
    if ds is not None:
        verify_folder(ws.dataset_dir(name), ds)
        if ds.dataset_kind != "sft" or not ds.columns:
            raise error("E_REFUSED", f"dataset {name!r} was frozen without --kind sft, so it declares no "
                        "columns and cannot be trained on",
                        "freeze it again under a new name with `monte dataset add NEW --from-file ... --kind sft`")
        return Source(name=name, kind="dataset", rows=str(ws.dataset_dir(name) / "rows.jsonl"),
                      columns=ds.columns, fingerprint=ds.fingerprint)
    if env is not None:
        if env.env_kind != "trainable" or not env.curriculum:
            raise error("E_REFUSED", f"environment {name!r} is eval-only: it has no curriculum to train on",
                        "freeze a trainable one with `monte env add --server B --dev B --test B`")
        verify_folder(ws.env_dir(name), env)
        return Source(name=name, kind="environment", rows=str(ws.env_dir(name) / env.curriculum),
                      benchmark=env.provenance.get("roles", {}).get("curriculum"), grader=env.grader,
                      fingerprint=env.fingerprint)
    raise error("E_NOT_FOUND", f"no dataset or trainable environment named {name!r} on this data root",
                f"freeze it (`monte dataset add` / `monte env add --server`), or bring it here with "
                f"`monte dataset show {name}` / `monte env install {name}`")


def check_pairing(algorithm: str, source: Source) -> None:
    need = NEEDS[algorithm]
    if source.kind != need:
        fix = (f"an sft recipe trains on demonstrations: write this environment's curriculum as demonstrations "
               f"with `monte dataset add {source.name}-sft --from-env {source.name} --kind sft` (input: the "
               f"prompt; output: one space, then its answer) and pass --source {source.name}-sft"
               if algorithm == "sft" else
               f"a {algorithm} recipe reads its reward or prompts from an environment: pass --source a "
               "trainable Environment (or use an sft recipe with this Dataset)")
        raise error("E_REFUSED", f"a {algorithm} recipe cannot train on {source.kind} {source.name!r}", fix)


def rows_of(source: Source) -> list[tuple[str, Any]]:
    """(label, row) of every row of the source, for the leak check: every column of it counts."""
    out = []
    with open(source.rows, encoding="utf-8") as f:
        for i, line in enumerate(f):
            if not line.strip():
                continue
            row = json.loads(line)
            label = task_id(row, "curriculum", i) if source.kind == "environment" else f"line {i + 1}"
            out.append((label, row))
    return out


def leak_check(ws: Workspace, meas: Measurement, source: Source) -> dict[str, Any]:
    """Refuse a source holding any item of a sealed (test) exam, after normalisation, in any
    column or message, whole or substantially (:class:`monte.envs.items.LeakIndex`); report how
    many rows hold a dev item."""
    sealed: dict[str, str] = {}
    dev: dict[str, str] = {}
    for name, exam in sorted(meas.exams.items()):
        for split, s in sorted(exam.splits.items()):
            target = sealed if split == "test" else dev
            for k, item in enumerate(read_items(str(ws.data_root / s.path))):
                target[task_id(item, f"{name}/{split}", k)] = item_text(item)
    sealed_index, dev_index = LeakIndex.build(sealed), LeakIndex.build(dev)
    leaks: list[tuple[str, str]] = []
    dev_overlap = 0
    for label, row in rows_of(source):
        hit = sealed_index.find(row)
        if hit:
            leaks.append((label, min(hit)))
        elif dev_index.find(row):
            dev_overlap += 1
    if leaks:
        where, sealed_item = leaks[0]
        raise error("E_LEAK", f"{source.kind} {source.name!r} holds {len(leaks)} item(s) of this experiment's "
                    f"sealed test exam (e.g. {where} holds {sealed_item}; compared after normalising case, spacing, "
                    "punctuation and invisible characters, in every column and message)",
                    "remove those items and freeze the rows again under a new name")
    return {"dev_overlap": dev_overlap}


def rows_path(source: Source) -> Path:
    return Path(source.rows)
