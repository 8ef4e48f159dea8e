"""Three lm-evaluation-harness tasks over local files, shaped like the real ones (no hub).

- ``gsm_local``: GSM8K's YAML (``generate_until``, 5-shot from ``train``, its two regex filters and
  ``exact_match`` with GSM8K's options), split across an ``include:`` parent; one eval split, so
  monte splits it by seed.
- ``arc_local``: ARC-Easy's YAML (``multiple_choice`` over loglikelihoods, ``acc``/``acc_norm``),
  with ``train``/``validation``/``test``: dev is ``validation`` and test is ``test``.
- ``own_task``: a task of our own whose metric is a ``!function`` (``process_results`` in
  ``utils.py``, beside the YAML), with ``validation`` and ``test``; :func:`write_shared` makes its
  ``utils.py`` import the metric from a module in another folder (on ``PYTHONPATH``), with an
  unrelated script beside the YAML.

``write_gsm(shots=5)`` is GSM8K's own few-shot shape (5 examples a prompt drawn from ``train`` by
lm-eval's default sampler); ``write_arc(shots=N, shared=K)`` draws N examples from ``train`` and
makes K validation questions copies of test ones.

The documents are generated here (deterministic), one JSON object per line, like the hub's.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

GSM_BASE = """\
output_type: generate_until
training_split: train
fewshot_split: train
test_split: test
doc_to_text: "Question: {{{{question}}}}\\nAnswer:"
doc_to_target: "{{{{answer}}}}"
metric_list:
  - metric: exact_match
    aggregation: mean
    higher_is_better: true
    ignore_case: true
    ignore_punctuation: false
    regexes_to_ignore:
      - ","
      - "\\\\$"
      - "(?s).*#### "
      - "\\\\.$"
generation_kwargs:
  until:
    - "Question:"
    - "</s>"
    - "<|im_end|>"
  do_sample: false
  temperature: 0.0
  max_gen_toks: {max_gen_toks}
repeats: 1
num_fewshot: {shots}
filter_list:
  - name: "strict-match"
    filter:
      - function: "regex"
        regex_pattern: "#### (\\\\-?[0-9\\\\.\\\\,]+)"
      - function: "take_first"
  - name: "flexible-extract"
    filter:
      - function: "regex"
        group_select: -1
        regex_pattern: "(-?[$0-9.,]{{2,}})|(-?[0-9]+)"
      - function: "take_first"
metadata:
  version: 3.0
"""

GSM_TASK = """\
include: _gsm_base.yaml
task: gsm_local
dataset_path: json
dataset_kwargs:
  data_files:
    train: {train}
    test: {test}
"""

ARC_TASK = """\
task: arc_local
dataset_path: json
dataset_kwargs:
  data_files:
    train: {train}
    validation: {validation}
    test: {test}
output_type: multiple_choice
training_split: train
validation_split: validation
test_split: test
doc_to_text: "Question: {{{{question}}}}\\nAnswer:"
doc_to_target: "{{{{choices.label.index(answerKey)}}}}"
doc_to_choice: "{{{{choices.text}}}}"
should_decontaminate: true
doc_to_decontamination_query: "Question: {{{{question}}}}\\nAnswer:"
metric_list:
  - metric: acc
    aggregation: mean
    higher_is_better: true
  - metric: acc_norm
    aggregation: mean
    higher_is_better: true
num_fewshot: {shots}
metadata:
  version: 1.0
"""

OWN_TASK = """\
task: own_task
dataset_path: json
dataset_kwargs:
  data_files:
    validation: {validation}
    test: {test}
output_type: generate_until
validation_split: validation
test_split: test
doc_to_text: "{{{{word}}}} backwards is"
doc_to_target: "{{{{reversed}}}}"
process_results: !function utils.letters_in_common
generation_kwargs:
  until: ["\\n"]
  do_sample: false
  max_gen_toks: 8
metric_list:
  - metric: overlap
    aggregation: mean
    higher_is_better: true
metadata:
  version: 2.0
"""

OWN_UTILS = '''\
def letters_in_common(doc, results):
    """The share of the reference's letters that the answer holds (a graded, per-document score)."""
    got = results[0].strip()
    want = doc["reversed"]
    return {"overlap": sum(1 for c in set(want) if c in got) / len(set(want))}
'''

WORDS = ["apple", "river", "stone", "cloud", "maple", "tiger", "lemon", "piano", "ocean", "zebra", "candle",
         "garden", "silver", "forest", "pepper", "rocket", "window", "planet", "violin", "butter"]


def _write_jsonl(path: Path, rows: list[dict[str, object]]) -> str:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return str(path)


def gsm_docs(n: int, seed: int) -> list[dict[str, object]]:
    rng = random.Random(seed)
    out: list[dict[str, object]] = []
    for _ in range(n):
        a, b, c = rng.randint(2, 60), rng.randint(2, 40), rng.randint(1, 9)
        q = f"Tom has {a} apples and buys {b} bags of {c} apples each. How many apples does he have now?"
        total = a + b * c
        out.append({"question": q, "answer": f"He buys {b} * {c} = {b * c} apples.\n{a} + {b * c} = {total}\n#### {total}"})
    return out


def arc_docs(n: int, seed: int) -> list[dict[str, object]]:
    rng = random.Random(seed)
    out: list[dict[str, object]] = []
    for i in range(n):
        a, b = rng.randint(1, 50), rng.randint(1, 50)
        right = a + b
        wrong = rng.sample([x for x in range(2, 101) if x != right], 3)
        texts = [str(x) for x in [right, *wrong]]
        rng.shuffle(texts)
        labels = ["A", "B", "C", "D"]
        out.append({"id": f"Mercury_{seed}_{i}", "question": f"What is {a} plus {b}?",
                    "choices": {"text": texts, "label": labels}, "answerKey": labels[texts.index(str(right))]})
    return out


def own_docs(words: list[str]) -> list[dict[str, object]]:
    return [{"word": w, "reversed": w[::-1]} for w in words]


def write_gsm(root: Path, *, n_test: int = 40, n_train: int = 20, shots: int = 2, max_gen_toks: int = 12) -> Path:
    """The GSM8K-shaped task folder (``--include-path`` it); returns the folder."""
    folder = root / "gsm"
    data = root / "gsm-data"
    train = _write_jsonl(data / "train.jsonl", gsm_docs(n_train, 1))
    test = _write_jsonl(data / "test.jsonl", gsm_docs(n_test, 2))
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "_gsm_base.yaml").write_text(GSM_BASE.format(max_gen_toks=max_gen_toks, shots=shots))
    (folder / "gsm_local.yaml").write_text(GSM_TASK.format(train=json.dumps(train), test=json.dumps(test)))
    return folder


def write_arc(root: Path, *, n: int = 24, shots: int = 0, shared: int = 0) -> Path:
    """The ARC-shaped task folder; ``shots`` few-shot examples drawn from ``train`` by lm-eval's
    default sampler; ``shared`` validation documents that are copies of test ones (as ARC's own
    splits share some questions), placed early so every later document's draws depend on them."""
    folder = root / "arc"
    data = root / "arc-data"
    docs = {s: arc_docs(n, k) for k, s in enumerate(("train", "validation", "test"))}
    for i in range(shared):
        docs["validation"][1 + 2 * i] = dict(docs["test"][5 + i], id=f"copy_{i}")
    paths = {s: json.dumps(_write_jsonl(data / f"{s}.jsonl", rows)) for s, rows in docs.items()}
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "arc_local.yaml").write_text(ARC_TASK.format(shots=shots, **paths))
    return folder


def write_own(root: Path) -> Path:
    folder = root / "own"
    data = root / "own-data"
    validation = _write_jsonl(data / "validation.jsonl", own_docs(WORDS[:10]))
    test = _write_jsonl(data / "test.jsonl", own_docs(WORDS[10:]))
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "own_task.yaml").write_text(OWN_TASK.format(validation=json.dumps(validation), test=json.dumps(test)))
    (folder / "utils.py").write_text(OWN_UTILS)
    return folder


SHARED_UTILS = """\
import yaml  # an installed distribution: recorded by its version, not frozen

from shared_overlap import overlap  # a module on PYTHONPATH that no distribution owns: frozen


def letters_in_common(doc, results):
    return {"overlap": overlap(results[0].strip(), doc["reversed"])}
"""

SHARED_OVERLAP = '''\
def overlap(got, want):
    """The share of the reference's letters that the answer holds."""
    return sum(1 for c in set(want) if c in got) / len(set(want))
'''


def write_shared(root: Path) -> tuple[Path, Path]:
    """``own_task`` whose ``utils.py`` imports its metric from ``shared_overlap``, a module in
    another folder (put on ``sys.path``), with an unrelated script beside the YAML; returns
    (the task folder, the module's folder)."""
    folder = write_own(root)
    (folder / "utils.py").write_text(SHARED_UTILS)
    (folder / "make_data.py").write_text("raise SystemExit('a script that writes the data, never imported')\n")
    lib = root / "pylib"
    lib.mkdir(parents=True, exist_ok=True)
    (lib / "shared_overlap.py").write_text(SHARED_OVERLAP)
    return folder, lib
