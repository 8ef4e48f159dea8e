"""What a Run trains on (``--source``): a frozen Dataset (sft: demonstrations; dpo: preference
pairs) or a trainable Environment's curriculum (grpo, rloo, distillation). One namespace for both;
a name held by both refuses."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from monte.envs.grading import task_id
from monte.envs.items import LeakIndex, exam_key, item_text, read_items
from monte.errors import error
from monte.frozen import without_custody
from monte.ledger.predicates import is_sealed
from monte.ledger.records import Measurement
from monte.ledger.seal import record_leak_refusal
from monte.manifest import now, read_manifest, verify_folder
from monte.workspace import Workspace

NEEDS = {"sft": "dataset", "dpo": "dataset", "grpo": "environment", "rloo": "environment",
         "distillation": "environment"}
#: the dataset kind (``monte dataset add --kind``) each dataset-trained algorithm takes
DATASET_KIND = {"sft": "sft", "dpo": "preference"}


class Source(BaseModel):
    name: str
    kind: str  # "dataset" | "environment"
    rows: str  # the rows file on the data root
    columns: dict[str, str] | None = None
    dataset_kind: str | None = None  # datasets: "sft" or "preference"
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
        if ds.dataset_kind not in ("sft", "preference") or not ds.columns:
            raise error("E_REFUSED", f"dataset {name!r} was frozen without --kind sft or --kind preference, so it declares no "
                        "columns and cannot be trained on",
                        "freeze it again under a new name with `monte dataset add NEW --from-file ... --kind sft` "
                        "(or --kind preference for a dpo recipe)")
        return Source(name=name, kind="dataset", rows=str(ws.dataset_dir(name) / "rows.jsonl"),
                      columns=ds.columns, dataset_kind=ds.dataset_kind, fingerprint=ds.fingerprint)
    if env is not None:
        if env.env_kind != "trainable" or not env.curriculum:
            raise error("E_REFUSED", f"environment {name!r} is eval-only: it has no curriculum to train on",
                        "freeze a trainable one with `monte env add --server B --dev B --test B`")
        # a test split in a grader's custody is not here to prove (and no curriculum row comes from it)
        verify_folder(ws.env_dir(name), without_custody(env, ws.env_dir(name), bool(ws.config.get("grader"))))
        return Source(name=name, kind="environment", rows=str(ws.env_dir(name) / env.curriculum),
                      benchmark=env.provenance.get("roles", {}).get("curriculum"), grader=env.grader,
                      fingerprint=env.fingerprint)
    raise error("E_NOT_FOUND", f"no dataset or trainable environment named {name!r} on this data root",
                f"freeze it (`monte dataset add` / `monte env add --server`), or bring it here with "
                f"`monte dataset show {name}` / `monte env install {name}`")


def check_pairing(algorithm: str, source: Source) -> None:
    """An algorithm trains on its kind of source: sft on demonstrations, dpo on preference pairs
    (Datasets of those kinds), grpo, rloo and distillation on a trainable Environment."""
    need, kind = NEEDS[algorithm], DATASET_KIND.get(algorithm)
    if source.kind == need and (kind is None or source.dataset_kind == kind):
        return
    what = f"{source.dataset_kind} dataset" if source.kind == "dataset" and source.dataset_kind else source.kind
    if algorithm == "sft" and source.kind == "environment":
        fix = (f"an sft recipe trains on demonstrations: write this environment's curriculum as demonstrations "
               f"with `monte dataset add {source.name}-sft --from-env {source.name} --kind sft` (input: the "
               f"prompt; output: one space, then its answer) and pass --source {source.name}-sft")
    elif algorithm == "sft":
        fix = ("an sft recipe trains on demonstrations: pass --source a Dataset frozen with --kind sft"
               + (" (a preference dataset trains a dpo recipe)" if source.dataset_kind == "preference" else ""))
    elif algorithm == "dpo":
        fix = ("a dpo recipe trains on preference pairs: pass --source a Dataset frozen with --kind preference "
               "(`monte dataset add NAME --from-file F --kind preference`)"
               + (" (this one trains an sft recipe)" if source.dataset_kind == "sft" else
                  " (an environment trains a grpo or rloo recipe)" if source.kind == "environment" else ""))
    else:
        fix = (f"a {algorithm} recipe reads its reward or prompts from an environment: pass --source a "
               "trainable Environment (or use an " + ("sft" if source.dataset_kind != "preference" else "dpo")
               + " recipe with this Dataset)")
    raise error("E_REFUSED", f"a {algorithm} recipe cannot train on {what} {source.name!r}", fix)


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


#: how many of a source's leaking rows a refusal names
NAMED_ROWS = 5


def leak_check(ws: Workspace, meas: Measurement, source: Source) -> dict[str, Any]:
    """Refuse a source holding any item of a sealed (test) exam, after normalisation, in any
    column or message, whole or substantially (:class:`monte.envs.items.LeakIndex`); report how
    many rows hold a dev item.

    The refusal is no membership oracle: it names the source's rows that leak and how many,
    never the sealed item a row matched (else "is this question in test?" could be asked one
    dataset at a time), and it is counted against the sealed content
    (``monte.ledger.seal.record_leak_refusal``), which ``monte status`` discloses beside its
    test reads: each refusal answered such a question."""
    sealed: dict[str, str] = {}
    exam_of: dict[str, str] = {}
    dev: dict[str, str] = {}
    on_grader: list[str] = []
    for name, exam in sorted(meas.exams.items()):
        for split, s in sorted(exam.splits.items()):
            if is_sealed(split) and ws.config.get("grader") and not (ws.data_root / s.path).is_file():
                on_grader.append(s.sha256)  # in the grader's custody: checked there (monte.grader)
                continue
            target = sealed if is_sealed(split) else dev
            for k, item in enumerate(read_items(str(ws.data_root / s.path))):
                label = task_id(item, f"{name}/{split}", k)
                target[label] = item_text(item)
                if is_sealed(split):
                    exam_of[label] = name
    sealed_index, dev_index = LeakIndex.build(sealed), LeakIndex.build(dev)
    leaks: list[tuple[str, set[str]]] = []
    dev_overlap = 0
    for label, row in rows_of(source):
        hit = sealed_index.find(row)
        if hit:
            leaks.append((label, hit))
        elif dev_index.find(row):
            dev_overlap += 1
    if leaks:
        for name in sorted({exam_of[h] for _, hit in leaks for h in hit}):
            s = meas.exams[name].splits["test"]
            record_leak_refusal(ws.store, split_sha256=s.sha256, experiment=meas.experiment, source=source.name,
                                content=exam_key(read_items(str(ws.data_root / s.path))), rows=len(leaks),
                                at=now())
        named = ", ".join(label for label, _ in leaks[:NAMED_ROWS]) + (", ..." if len(leaks) > NAMED_ROWS else "")
        raise error("E_LEAK", f"{source.kind} {source.name!r}: {len(leaks)} of its row(s) hold an item of this "
                    f"experiment's sealed test exam ({named}; compared after normalising case, spacing, "
                    "punctuation and invisible characters, in every column and message). Which sealed item is "
                    "never said, and this refusal is counted against the sealed content: `monte status` "
                    "discloses it beside the test reads",
                    "remove those rows and freeze the rest again under a new name")
    return {"dev_overlap": dev_overlap, **({"sealed_on_grader": on_grader} if on_grader else {})}


def rows_path(source: Source) -> Path:
    return Path(source.rows)


def row_count(ws: Workspace, name: str, kind: str) -> int | None:
    """How many rows source ``name`` trains on: a dataset's rows, an environment's curriculum
    items (every line of the file, as the trainer reads it). None where it is not frozen on this
    data root (a chunk recorded elsewhere), so no epoch count of it can be said here."""
    folder = ws.dataset_dir(name) if kind == "dataset" else ws.env_dir(name)
    manifest = read_manifest(folder)
    rows = ("rows.jsonl" if kind == "dataset" else manifest.curriculum) if manifest is not None else None
    if not rows:
        return None
    try:
        with open(folder / rows, encoding="utf-8") as f:
            return sum(1 for line in f if line.strip())
    except OSError:
        return None
