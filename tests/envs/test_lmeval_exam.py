"""lm-evaluation-harness tasks as exams: frozen whole, graded by lm-eval, paired by document.

Each of the three tasks (tests/envs/lmeval_tasks.py: GSM8K-shaped ``generate_until`` with regex
filters, ARC-shaped ``multiple_choice``, our own YAML with a ``!function`` metric) is frozen, then
evaluated through monte on the tiny model, and the same documents are evaluated by ``lm_eval``
itself (``simple_evaluate`` with its ``hf`` model on the same model folder): the per-document
scores, the generations and lm-eval's per-sample hashes are equal document by document, and the
task hash lm-eval computes equals the one monte recorded at the freeze.

Issue 44: against a *plain* ``lm_eval`` run (no ``samples=``: its sampler's draws over the whole
split) with few-shot from ``train`` (GSM8K's shape, 5-shot) and with an ARC-shaped task's own
validation and test; with ``--apply_chat_template`` on the tiny model's chat template; a
``!function`` module's imports frozen; ``--processes 2`` sharding; plans and rows stating the
task's requests; lm-eval's bars and warnings off the terminal.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.envs.lmeval_tasks import write_arc, write_gsm, write_own, write_shared
from tests.support.helpers import git, snapshot_state
from tests.support.kept import Kept

pytest.importorskip("lm_eval")


def _tasks(repo: Path, exp: str, run: str) -> list[dict[str, Any]]:
    ref = f"monte/{exp}/ledger:runs/{run[0]}/{run[1]}/{run}"
    return [json.loads(x) for x in git(repo, "show", f"{ref}/tasks.jsonl").splitlines()]


def _direct(model: Path, folder: Path, task: str, indices: list[int] | None, split: str | None = None,
            **rendering: Any) -> list[dict[str, Any]]:
    """lm-eval run directly: its own hf model on the same folder, the same documents."""
    from lm_eval import simple_evaluate
    from lm_eval.tasks import TaskManager

    tm = TaskManager(include_path=str(folder), include_defaults=False)
    spec: Any = task
    if split is not None:  # the dev half of a task with validation and test: lm-eval on its validation split
        from lm_eval.tasks._yaml_loader import load_yaml

        spec = load_yaml(folder / f"{task}.yaml")
        spec["test_split"] = split
    res = simple_evaluate(model="hf", model_args={"pretrained": str(model)}, tasks=[spec], task_manager=tm,
                          batch_size=32, device="cpu", log_samples=True, bootstrap_iters=0,
                          samples={task: indices} if indices is not None else None, **rendering)
    assert res is not None
    return list(res["samples"][task])


def _task_hash(samples: list[dict[str, Any]]) -> str:
    from lm_eval.utils import hash_string  # as lm-eval's EvaluationTracker computes it

    return hash_string("".join(s["doc_hash"] + s["prompt_hash"] + s["target_hash"] for s in samples))


def _freeze_and_eval(repo: Path, monte, model: Path, folder: Path, task: str,
                     *flags: str) -> tuple[dict[str, Any], list[dict[str, Any]], list[dict[str, Any]]]:
    r = monte("env", "add", "--dev", f"lm-eval:{task}", "--test", f"lm-eval:{task}", "--as", "lm",
              "--include-path", str(folder), "--json", *flags)
    assert r.code == 0, r.out + r.err
    env = repo / ".monte/environments/lm"
    manifest = json.loads((env / "manifest.json").read_text())
    spec = manifest["grader"]["tasks"][task]
    dev = [json.loads(x) for x in (env / f"exams/{task}/dev.jsonl").read_text().splitlines()]
    assert monte("experiment", "init", "e", "--eval", "lm", "--model", str(model)).code == 0
    r = monte("eval", "--yes", "--json")
    assert r.code == 0, r.out + r.err
    run = r.json()["runs"][0]
    tasks = _tasks(repo, "e", run["run"])
    assert [t["id"] for t in tasks] == [d["id"] for d in dev]
    return spec, dev, tasks


def _same_docs(spec: dict[str, Any], dev: list[dict[str, Any]], tasks: list[dict[str, Any]],
               direct: list[dict[str, Any]], hashes: tuple[str, ...] = ("doc_hash", "prompt_hash", "target_hash")
               ) -> None:
    """Each item's hashes, score and answer equal lm-eval's for its document (``direct`` may hold
    more documents: a plain run of the whole split)."""
    mine = [s for s in direct if s["filter"] == spec["filter"]]
    assert len(mine) >= len(dev) == len(tasks)
    by_source = {int(s["doc_id"]): s for s in mine}
    for item, t in zip(dev, tasks, strict=True):
        s = by_source[item["source"]["index"]]
        assert {h: s[h] for h in hashes} == {h: item["lm_eval"][h] for h in hashes}
        assert t["score"] == float(s[spec["metric"]]), (item["id"], t, s)
        if spec["output_type"] == "multiple_choice":  # the same pick; loglikelihoods equal to float noise
            lls = [float(r[0]) for r in s["filtered_resps"]]
            assert t["answer"] == item["choices"][lls.index(max(lls))]
        else:  # the same generation, filtered the same way
            assert t["answer"] == s["filtered_resps"][0][:200]


def test_gsm8k_shaped_generate_until_scores_equal_lm_eval_doc_by_doc(repo: Path, monte, base_model: Path,
                                                                     tmp_path: Path) -> None:
    folder = write_gsm(tmp_path / "tasks")
    spec, dev, tasks = _freeze_and_eval(repo, monte, base_model, folder, "gsm_local")
    # the closure: the YAML and its include: parent; the data rewritten to local JSON lines
    env = repo / ".monte/environments/lm"
    assert (env / "lmeval/gsm_local/task/_gsm_base.yaml").is_file()
    assert spec["data"] == {"dev": "lmeval/gsm_local/data/dev.jsonl", "test": "lmeval/gsm_local/data/test.jsonl",
                            "fewshot": "lmeval/gsm_local/data/fewshot.jsonl"}
    assert spec["num_fewshot"] == 2 and spec["fewshot_split"] == "train" and spec["split_seed"] is not None
    assert spec["filters"] == ["strict-match", "flexible-extract"] and spec["metric"] == "exact_match"
    assert spec["version"] == 3.0 and spec["generation_kwargs"]["until"] == ["Question:", "</s>", "<|im_end|>"]
    test = [json.loads(x) for x in (env / "exams/gsm_local/test.jsonl").read_text().splitlines()]
    assert not {d["source"]["index"] for d in dev} & {t["source"]["index"] for t in test}
    assert len(dev) + len(test) + sum(spec["dropped_for_disjointness"].values()) == 40
    # lm-eval itself, on the same model, the task as written (its whole split: the few-shot draws
    # of a document depend on every document rendered before it)
    direct = _direct(base_model, folder, "gsm_local", None)
    _same_docs(spec, dev, tasks, direct)
    ours = {d["source"]["index"] for d in dev}  # lm-eval's task hash over its samples of dev's documents
    assert _task_hash([s for s in direct if int(s["doc_id"]) in ours]) == spec["task_hash"]["dev"]


def test_arc_shaped_multiple_choice_scores_equal_lm_eval_doc_by_doc(repo: Path, monte, base_model: Path,
                                                                    tmp_path: Path) -> None:
    folder = write_arc(tmp_path / "tasks")
    spec, dev, tasks = _freeze_and_eval(repo, monte, base_model, folder, "arc_local")
    assert spec["output_type"] == "multiple_choice" and spec["metric"] == "acc"
    assert spec["source_splits"] == {"dev": "validation", "test": "test"} and spec["split_seed"] is None
    assert 0 < sum(t["score"] for t in tasks) < len(tasks)  # a real spread of right and wrong documents
    direct = _direct(base_model, folder, "arc_local", None, split="validation")
    _same_docs(spec, dev, tasks, direct)
    assert _task_hash(direct) == spec["task_hash"]["dev"]


def test_own_yaml_with_a_function_metric_scores_equal_lm_eval_doc_by_doc(repo: Path, monte, base_model: Path,
                                                                         tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    folder = write_own(tmp_path / "tasks")
    # as a user's python runs (this suite's sets PYTHONDONTWRITEBYTECODE): importing the frozen
    # !function module must leave no __pycache__ in the frozen folder (it was hashed with the task,
    # then rewritten wherever the files landed with other mtimes, and the next eval refused)
    monkeypatch.setattr(sys, "dont_write_bytecode", False)
    spec, dev, tasks = _freeze_and_eval(repo, monte, base_model, folder, "own_task")
    env = repo / ".monte/environments/lm"
    assert not [f for f in spec["files"] if "__pycache__" in f] and not list(env.rglob("__pycache__"))
    assert (env / "lmeval/own_task/task/utils.py").read_text() == (folder / "utils.py").read_text()
    assert spec["metric"] == "overlap"
    # the original module moves on: the frozen copy grades, proven by its hash
    (folder / "utils.py").write_text("def letters_in_common(doc, results):\n    return {'overlap': 1.0}\n")
    direct_folder = write_own(tmp_path / "again")
    direct = _direct(base_model, direct_folder, "own_task", None, split="validation")
    _same_docs(spec, dev, tasks, direct)
    assert _task_hash(direct) == spec["task_hash"]["dev"]


def _both_splits(repo: Path, monte, model: Path, folder: Path, task: str, *flags: str
                 ) -> tuple[dict[str, Any], dict[str, list[dict[str, Any]]], dict[str, list[dict[str, Any]]]]:
    """Freeze ``task``, evaluate dev and then test (the baseline's test read) on ``model``."""
    spec, dev, dev_tasks = _freeze_and_eval(repo, monte, model, folder, task, *flags)
    env = repo / ".monte/environments/lm"
    test = [json.loads(x) for x in (env / f"exams/{task}/test.jsonl").read_text().splitlines()]
    r = monte("eval", "--yes", "--json", "--split", "test")
    assert r.code == 0, r.out + r.err
    return spec, {"dev": dev, "test": test}, {"dev": dev_tasks, "test": _tasks(repo, "e", r.json()["runs"][0]["run"])}


def test_gsm8k_5_shot_from_train_equals_a_plain_lm_eval_run_of_the_whole_split(repo: Path, monte, base_model: Path,
                                                                               tmp_path: Path) -> None:
    # GSM8K's own shape: one eval split (test), five examples a prompt drawn from train by lm-eval's
    # default sampler, whose one random.Random advances over every document lm-eval renders
    folder = write_gsm(tmp_path / "tasks", n_test=60, n_train=20, shots=5)
    spec, items, tasks = _both_splits(repo, monte, base_model, folder, "gsm_local")
    assert spec["num_fewshot"] == 5 and spec["split_seed"] is not None
    # lm_eval itself on the task as written: the whole test split, no --samples restriction
    direct = _direct(base_model, folder, "gsm_local", None)
    assert len(direct) == 2 * 60  # every document, once per filter
    _same_docs(spec, items["dev"], tasks["dev"], direct)
    _same_docs(spec, items["test"], tasks["test"], direct)
    assert len(items["dev"]) + len(items["test"]) + sum(spec["dropped_for_disjointness"].values()) == 60


def test_arc_shaped_few_shot_with_its_own_validation_and_test_equals_lm_eval(repo: Path, monte, base_model: Path,
                                                                             tmp_path: Path) -> None:
    # a validation document that is a copy of a test one is dropped from dev; the documents after
    # it keep the examples lm-eval gives them in its run of the whole validation split
    folder = write_arc(tmp_path / "tasks", n=30, shots=3, shared=2)
    spec, items, tasks = _both_splits(repo, monte, base_model, folder, "arc_local")
    assert spec["dropped_for_disjointness"]["dev"] >= 2  # (and test drops its own repeats)
    assert not {1, 3} & {d["source"]["index"] for d in items["dev"]}
    _same_docs(spec, items["test"], tasks["test"], _direct(base_model, folder, "arc_local", None))  # `--tasks arc_local`
    _same_docs(spec, items["dev"], tasks["dev"], _direct(base_model, folder, "arc_local", None, split="validation"))


def test_a_function_modules_imports_are_frozen_and_graded_from_the_frozen_copy(
        repo: Path, monte, base_model: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib.metadata
    import stat
    import sys

    folder, lib = write_shared(tmp_path / "tasks")
    monkeypatch.syspath_prepend(str(lib))  # PYTHONPATH, in-process
    spec, dev, tasks = _freeze_and_eval(repo, monte, base_model, folder, "own_task")
    env = repo / ".monte/environments/lm"
    task_files = sorted(p.name for p in (env / "lmeval/own_task/task").iterdir())
    assert task_files == ["own_task.yaml", "utils.py"]  # make_data.py is not imported: not frozen
    frozen = env / "lmeval/own_task/modules/shared_overlap.py"
    assert frozen.read_text() == (lib / "shared_overlap.py").read_text()
    assert spec["modules"] == {"shared_overlap": "lmeval/own_task/modules/shared_overlap.py"}
    assert spec["distributions"] == {"PyYAML": importlib.metadata.version("PyYAML")}
    for p in [*(env / "lmeval/own_task/task").iterdir(), frozen]:
        assert not p.stat().st_mode & (stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH), p
    assert sum(t["score"] for t in tasks) < len(tasks)  # the module moved on would give every document 1.0
    # the module on the path moves on: the exam is graded by the frozen copy all the same
    (lib / "shared_overlap.py").write_text("def overlap(got, want):\n    return 1.0\n")
    sys.modules.pop("shared_overlap", None)
    r = monte("eval", "--yes", "--json")
    assert r.code == 0, r.out
    assert [t["score"] for t in _tasks(repo, "e", r.json()["runs"][0]["run"])] == [t["score"] for t in tasks]
    # ... and gone: still the frozen copy
    (lib / "shared_overlap.py").unlink()
    sys.modules.pop("shared_overlap", None)
    r = monte("eval", "--yes", "--json")
    assert r.code == 0, r.out
    assert [t["score"] for t in _tasks(repo, "e", r.json()["runs"][0]["run"])] == [t["score"] for t in tasks]
    # the frozen copy missing refuses by name, before the touch
    frozen.unlink()
    before = snapshot_state(repo)
    r = monte("eval", "--yes", "--json")
    err = r.json()["error"]
    assert err["code"] == "E_NOT_FOUND" and "shared_overlap.py" in err["message"], r.out
    assert snapshot_state(repo) == before


def test_processes_shard_an_lm_eval_exams_generation_with_the_same_results(repo: Path, monte, base_model: Path,
                                                                           tmp_path: Path) -> None:
    folder = write_gsm(tmp_path / "tasks", n_test=80)  # dev: 40 documents, two batches of the default 32
    spec, dev, one = _freeze_and_eval(repo, monte, base_model, folder, "gsm_local")
    before = {x["run"] for x in monte("status", "--json").json()["rows"]}
    r = monte("eval", "--yes", "--processes", "2")  # one sharded eval (each costs its processes' start-up)
    assert r.code == 0, r.out + r.err
    assert "generated in 2 processes" in r.out
    [run] = [x["run"] for x in monte("status", "--json").json()["rows"] if x["run"] not in before]
    row = monte("show", run, "--json").json()  # the row that eval recorded, as --json would have said it
    assert row["run"] == run and row["status"] == "succeeded" and row["plan"]["processes"] == 2
    assert _tasks(repo, "e", row["run"]) == one  # every document's score, metrics and answer
    shards = sorted((repo / ".monte").rglob(f"*{row['run']}*/shards/shard-*.json"))
    answered = [json.loads(p.read_text())["indices"] for p in shards if p.name != "job.json"]
    assert len(answered) == 2 and all(answered), shards  # two processes, each with its whole batches


def test_plans_and_rows_state_the_tasks_own_requests(repo: Path, monte, base_model: Path, tmp_path: Path) -> None:
    folder = write_arc(tmp_path / "tasks")
    assert monte("env", "add", "--dev", "lm-eval:arc_local", "--test", "lm-eval:arc_local", "--as", "lm",
                 "--include-path", str(folder)).code == 0
    assert monte("experiment", "init", "e", "--eval", "lm", "--model", str(base_model)).code == 0
    r = monte("eval", "--dry-run")
    assert r.code == 0, r.out + r.err
    assert "24 documents as lm-eval multiple_choice (loglikelihood of each choice: no generation)" in r.out, r.out
    assert "generations" not in r.out and "new tokens" not in r.out, r.out  # the experiment's defaults, unused
    before = snapshot_state(repo)
    r = monte("eval", "--yes", "--json", "--processes", "2")
    err = r.json()["error"]
    assert r.code == 2 and err["code"] == "E_USAGE" and "loglikelihoods" in err["message"], r.out
    assert err["fix"].startswith("drop --processes") and snapshot_state(repo) == before
    r = monte("eval", "--yes", "--json")
    assert r.code == 0, r.out
    assert r.json()["runs"][0]["plan"]["lm_eval"] == {"output_type": "multiple_choice", "request_type": "loglikelihood",
                                                      "generation_kwargs": None, "num_fewshot": 0}
    # a generate_until task: its own generation_kwargs, not the experiment's max_new_tokens and stop
    gsm = write_gsm(tmp_path / "more")
    assert monte("env", "add", "--dev", "lm-eval:gsm_local", "--test", "lm-eval:gsm_local", "--as", "g",
                 "--include-path", str(gsm)).code == 0
    assert monte("experiment", "init", "g", "--eval", "g", "--model", str(base_model)).code == 0
    r = monte("eval", "--dry-run", "--experiment", "g")
    assert "lm-eval generate_until requests, 2-shot, max 12 new tokens each, until ['Question:', '</s>', " \
           "'<|im_end|>'], greedy" in r.out, r.out
    r = monte("eval", "--yes", "--json", "--experiment", "g", "--smoke")
    req = r.json()["runs"][0]["plan"]["lm_eval"]
    assert req["request_type"] == "generate_until" and req["generation_kwargs"]["max_gen_toks"] == 12


def test_lm_evals_bars_and_warnings_go_to_the_logs_not_the_terminal(repo: Path, monte, base_model: Path,
                                                                    tmp_path: Path) -> None:
    folder = write_arc(tmp_path / "tasks", shots=2)  # lm-eval warns: few-shot from train, no fewshot_split
    warning = "num_fewshot > 0 but fewshot_split is None"
    r = monte("env", "add", "--dev", "lm-eval:arc_local", "--test", "lm-eval:arc_local", "--as", "lm",
              "--include-path", str(folder))
    assert r.code == 0, r.out + r.err
    assert warning not in r.err and "it/s]" not in r.err and "Building contexts" not in r.err, r.err
    assert warning in (repo / ".monte/logs/lm-eval-lm.log").read_text()
    assert monte("experiment", "init", "e", "--eval", "lm", "--model", str(base_model)).code == 0
    r = monte("eval", "--yes")
    assert r.code == 0, r.out + r.err
    assert warning not in r.err and "it/s]" not in r.err and "Running loglikelihood" not in r.err, r.err
    events = [json.loads(x) for p in (repo / ".monte/runs/e").rglob("events.jsonl") for x in p.read_text().splitlines()]
    said = [e for e in events if e["event"] == "lm-eval"]
    assert len(said) == 1 and any(warning in line for line in said[0]["said"]), events


def test_a_chat_template_renders_as_lm_evals_apply_chat_template(repo: Path, monte, base_model: Path,
                                                                 tmp_path: Path) -> None:
    # the tiny model's tokenizer carries a chat template (monte.models.tiny.CHAT_TEMPLATE, ChatML's shape)
    folder = write_gsm(tmp_path / "tasks")
    system = "Solve the problem. End with #### and the number."
    spec, items, tasks = _both_splits(repo, monte, base_model, folder, "gsm_local", "--apply-chat-template",
                                      "--system-instruction", system)
    assert spec["chat"] == {"apply_chat_template": True, "fewshot_as_multiturn": True, "system_instruction": system}
    # lm_eval --apply_chat_template --fewshot_as_multiturn --system_instruction ..., the whole split
    direct = _direct(base_model, folder, "gsm_local", None, apply_chat_template=True, fewshot_as_multiturn=True,
                     system_instruction=system)
    arguments = direct[0]["arguments"]
    prompt = arguments[0][0] if isinstance(arguments, list) else arguments["gen_args_0"]["arg_0"]
    assert prompt.startswith(f"<|im_start|>system\n{system}<|im_end|>\n<|im_start|>user\n"), prompt
    assert prompt.count("<|im_start|>assistant") == 3  # two shots as turns, and the turn to answer
    for split in ("dev", "test"):  # the same generations, so the same prompts, and the same scores
        _same_docs(spec, items[split], tasks[split], direct, hashes=("doc_hash", "target_hash"))
    # the rendering is the grader's: the same documents in plain text are another environment's exam
    r = monte("env", "add", "--dev", "lm-eval:gsm_local", "--test", "lm-eval:gsm_local", "--as", "plain",
              "--include-path", str(folder), "--json", "--system-instruction", system)
    assert r.code == 0, r.out
    plain = json.loads((repo / ".monte/environments/plain/manifest.json").read_text())["grader"]["tasks"]["gsm_local"]
    assert plain["chat"]["apply_chat_template"] is False and plain["chat"] != spec["chat"]
    r = monte("env", "add", "--dev", "lm-eval:gsm_local", "--test", "lm-eval:gsm_local", "--as", "bad",
              "--include-path", str(folder), "--json", "--fewshot-as-multiturn")
    assert r.code == 2 and "--apply-chat-template" in r.json()["error"]["fix"], r.out


def test_an_imported_distribution_is_recorded_by_version_and_proven_at_eval(
        repo: Path, monte, base_model: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # a real (if tiny) installed distribution: a package with its .dist-info on sys.path
    site = tmp_path / "site"
    (site / "probe_metric").mkdir(parents=True)
    (site / "probe_metric/__init__.py").write_text("def overlap(got, want):\n"
                                                   "    return sum(1 for c in set(want) if c in got) / len(set(want))\n")
    info = site / "probe_metric-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: probe-metric\nVersion: 1.0\n")
    (info / "top_level.txt").write_text("probe_metric\n")
    monkeypatch.syspath_prepend(str(site))
    folder = write_own(tmp_path / "tasks")
    (folder / "utils.py").write_text("from probe_metric import overlap\n\n\ndef letters_in_common(doc, results):\n"
                                     "    return {'overlap': overlap(results[0].strip(), doc['reversed'])}\n")
    spec, dev, tasks = _freeze_and_eval(repo, monte, base_model, folder, "own_task")
    assert spec["distributions"] == {"probe-metric": "1.0"} and spec["modules"] == {}  # recorded, not frozen
    env = repo / ".monte/environments/lm"
    assert not (env / "lmeval/own_task/modules").exists()
    # another version installed: the eval refuses before its touch, naming the pip line
    info.rename(site / "probe_metric-1.1.dist-info")
    (site / "probe_metric-1.1.dist-info/METADATA").write_text("Metadata-Version: 2.1\nName: probe-metric\n"
                                                              "Version: 1.1\n")
    before = snapshot_state(repo)
    r = monte("eval", "--yes", "--json")
    err = r.json()["error"]
    assert err["code"] == "E_INTEGRITY" and "probe-metric 1.1, not 1.0" in err["message"], r.out
    assert err["fix"] == "install it as frozen: pip install 'probe-metric==1.0'" and snapshot_state(repo) == before
    # ... and none installed
    import shutil

    shutil.rmtree(site / "probe_metric-1.1.dist-info")
    r = monte("eval", "--yes", "--json")
    err = r.json()["error"]
    assert err["code"] == "E_NOT_FOUND" and "probe-metric" in err["message"], r.out
    assert snapshot_state(repo) == before


def test_a_sampler_that_cannot_be_replayed_refuses_at_the_freeze(repo: Path, monte, tmp_path: Path) -> None:
    # a sampler of the task's own whose draws follow the clock, not lm-eval's seeded generator: no
    # part of the split can be rendered as lm-eval's run of the whole split renders it
    folder = write_gsm(tmp_path / "tasks")
    (folder / "sampling.py").write_text(
        "import time\n\nfrom lm_eval.api.samplers import ContextSampler\n\n\n"
        "class ClockSampler(ContextSampler):\n"
        "    def sample(self, n, eval_doc=None, df=None, **kwargs):\n"
        "        docs = self.fewshot_docs()\n"
        "        k = time.perf_counter_ns() // 1000\n"
        "        return [docs[(k + i) % len(docs)] for i in range(n)]\n")
    y = folder / "gsm_local.yaml"
    y.write_text(y.read_text() + "fewshot_config:\n  sampler: !function sampling.ClockSampler\n")
    before = snapshot_state(repo)
    r = monte("env", "add", "--dev", "lm-eval:gsm_local", "--test", "lm-eval:gsm_local", "--as", "x",
              "--include-path", str(folder), "--json")
    err = r.json()["error"]
    assert err["code"] == "E_REFUSED" and "ClockSampler" in err["message"] and "sampler" in err["fix"], r.out
    assert snapshot_state(repo) == before


def test_bad_tasks_refuse_and_write_nothing(repo: Path, monte, tmp_path: Path) -> None:
    def add(folder: Path, task: str) -> dict[str, Any]:
        before = snapshot_state(repo)
        r = monte("env", "add", "--dev", f"lm-eval:{task}", "--test", f"lm-eval:{task}", "--as", "x",
                  "--include-path", str(folder), "--json")
        assert r.code != 0, r.out
        assert snapshot_state(repo) == before
        return dict(r.json()["error"])

    own = write_own(tmp_path / "t1")
    assert add(own, "no_such_task")["code"] == "E_NOT_FOUND"
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "b.yaml").write_text("task: b\ndoc_to_text: [unclosed\n")
    err = add(broken, "b")
    assert err["code"] == "E_BAD_INPUT" and "does not parse" in err["message"]
    bad_fn = write_own(tmp_path / "t2")
    (bad_fn / "own_task.yaml").write_text((bad_fn / "own_task.yaml").read_text().replace(
        "utils.letters_in_common", "nomodule.letters_in_common"))
    err = add(bad_fn, "own_task")
    assert err["code"] == "E_BAD_INPUT" and "nomodule.letters_in_common" in err["message"]
    missing = write_own(tmp_path / "t3")
    (tmp_path / "t3/own-data/test.jsonl").unlink()
    err = add(missing, "own_task")
    assert err["code"] == "E_NOT_FOUND" and "test.jsonl" in err["message"]
    notjson = write_own(tmp_path / "t4")
    (tmp_path / "t4/own-data/test.jsonl").write_text('{"word": "a"}\nnot json\n')
    err = add(notjson, "own_task")
    assert err["code"] == "E_BAD_INPUT" and "not JSON" in err["message"]
    bleu = write_own(tmp_path / "t5")
    y = (bleu / "own_task.yaml").read_text().replace("process_results: !function utils.letters_in_common\n", "")
    (bleu / "own_task.yaml").write_text(y.replace("metric: overlap\n    aggregation: mean\n    higher_is_better: true",
                                                  "metric: bleu"))
    err = add(bleu, "own_task")
    assert err["code"] == "E_REFUSED" and "'bleu'" in err["message"] and "corpus" in err["message"]
    hub = tmp_path / "hub"
    hub.mkdir()
    (hub / "h.yaml").write_text("task: h\ndataset_path: someone/gsm8k\noutput_type: generate_until\n"
                                "test_split: test\ndoc_to_text: q\ndoc_to_target: a\n")
    err = add(hub, "h")
    assert err["code"] == "E_REFUSED" and "HF_TOKEN" in err["fix"]


def test_an_lm_eval_task_is_no_curriculum(repo: Path, monte, tmp_path: Path) -> None:
    own = write_own(tmp_path / "t")
    r = monte("env", "add", "--server", "lm-eval:own_task", "--dev", "lm-eval:own_task", "--test",
              "lm-eval:own_task", "--include-path", str(own), "--json")
    err = r.json()["error"]
    assert r.code == 2 and err["code"] == "E_USAGE" and "monte dataset add" in err["fix"]


def _own_experiment(repo: Path, monte, model: Path, tmp_path: Path, kept: Kept) -> Path:
    """Our own task frozen as ``own`` and experiment ``exp`` on ``model`` (the tiny base model):
    built once per worker (``kept``, the freeze imports lm-eval's task machinery), then copied."""
    def build() -> None:
        folder = write_own(tmp_path / "tasks")
        r = monte("env", "add", "--dev", "lm-eval:own_task", "--test", "lm-eval:own_task", "--as", "own",
                  "--include-path", str(folder), "--json")
        assert r.code == 0, r.out
        assert monte("experiment", "init", "exp", "--eval", "own", "--model", str(model)).code == 0

    kept.restore("lm-eval-own", repo, tmp_path, build)
    return repo / ".monte/environments/own"


def test_a_test_read_obeys_the_seal_and_dev_deltas_pair_by_doc_id(repo: Path, monte, tiny_models: dict[int, Path],
                                                                  tmp_path: Path, kept: Kept) -> None:
    from tests.support.helpers import checkpoint

    _own_experiment(repo, monte, tiny_models[0], tmp_path, kept)
    base = monte("eval", "--yes", "--json").json()["runs"][0]
    r = monte("eval", "--yes", "--json", "--split", "test")
    assert r.code == 0 and r.json()["runs"][0]["role"] == "baseline", r.out
    a = checkpoint(repo, tiny_models[1])
    r = monte("eval", "--yes", "--json", "--checkpoint", f"{a}@50")
    assert r.code == 0, r.out
    row = r.json()["runs"][0]
    delta = row["delta"]
    assert delta["paired"] and delta["baseline"] == base["run"] and delta["n"] == 10
    mine = {t["doc_id"]: t["score"] for t in _tasks(repo, "exp", row["run"])}
    theirs = {t["doc_id"]: t["score"] for t in _tasks(repo, "exp", base["run"])}
    assert set(mine) == set(theirs) == set(range(10))
    assert delta["delta"] == pytest.approx(sum(mine[d] - theirs[d] for d in mine) / 10)
    r = monte("eval", "--yes", "--json", "--split", "test")
    assert r.code == 0 and r.json()["runs"][0]["role"] == "claim", r.out
    before = snapshot_state(repo)
    r = monte("eval", "--yes", "--json", "--split", "test")  # a third read
    assert r.code == 3 and r.json()["error"]["code"] == "E_SEALED", r.out
    assert snapshot_state(repo) == before
    r = monte("ledger", "verify", "--json")
    assert r.code == 0, r.out


def test_drift_in_rendering_or_in_a_frozen_file_refuses_before_the_touch(repo: Path, monte, base_model: Path,
                                                                         tmp_path: Path, kept: Kept,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    env = _own_experiment(repo, monte, base_model, tmp_path, kept)
    for split in ("dev", "test"):  # a smoke run takes the first five documents (and grades none of test)
        r = monte("eval", "--smoke", "--yes", "--json", "--split", split)
        assert r.code == 0 and r.json()["runs"][0]["n"] == 5, r.out
    from lm_eval.api.task import ConfigurableTask

    # the one narrow mock: a later lm-eval whose template renders one more space (no such release here)
    rendered = ConfigurableTask.doc_to_text
    monkeypatch.setattr(ConfigurableTask, "doc_to_text", lambda self, doc, doc_to_text=None:
                        rendered(self, doc, doc_to_text) + " ")
    before = snapshot_state(repo)
    for split in ("dev", "test"):
        r = monte("eval", "--yes", "--json", "--split", split)
        err = r.json()["error"]
        assert err["code"] == "E_INTEGRITY" and "prompt_hash" in err["message"], r.out
        assert snapshot_state(repo) == before  # no touch spent, nothing recorded
    monkeypatch.setattr(ConfigurableTask, "doc_to_text", rendered)
    # the test documents gone with no grader pinned to hold them: a dev eval, which never opens
    # them, still refuses, naming them (only a grader's custody lets them be away)
    docs = env / "lmeval/own_task/data/test.jsonl"
    saved = docs.read_bytes()
    docs.unlink()
    before = snapshot_state(repo)
    r = monte("eval", "--yes", "--json")
    err = r.json()["error"]
    assert err["code"] == "E_NOT_FOUND" and "data/test.jsonl" in err["message"], r.out
    assert snapshot_state(repo) == before
    docs.write_bytes(saved)
    utils = env / "lmeval/own_task/task/utils.py"
    utils.chmod(0o644)
    utils.write_text(utils.read_text().replace("/ len(set(want))", "/ 1"))
    before = snapshot_state(repo)
    r = monte("eval", "--yes", "--json")
    err = r.json()["error"]
    assert err["code"] == "E_INTEGRITY" and "utils.py" in err["message"], r.out
    assert snapshot_state(repo) == before


def test_without_the_extra_the_refusal_names_the_pip_line(repo: Path, monte, tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    own = write_own(tmp_path / "t")
    # the light install, at its one boundary: `import lm_eval` fails as it does when it is not installed
    for name in [m for m in sys.modules if m == "lm_eval" or m.startswith("lm_eval.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "lm_eval", None)
    before = snapshot_state(repo)
    r = monte("env", "add", "--dev", "lm-eval:own_task", "--test", "lm-eval:own_task", "--as", "x",
              "--include-path", str(own), "--json")
    err = r.json()["error"]
    assert err["code"] == "E_NOT_FOUND" and "'lm_eval'" in err["message"], r.out
    assert err["fix"].startswith("install it: pip install") and "[lm-eval]" in err["fix"]
    assert snapshot_state(repo) == before


def test_read_only_commands_on_an_lm_eval_experiment_never_import_it(repo: Path, monte, base_model: Path,
                                                                     tmp_path: Path, kept: Kept) -> None:
    import subprocess
    import sys

    _own_experiment(repo, monte, base_model, tmp_path, kept)
    for argv in (["status"], ["env", "list"], ["experiment", "list"], ["ledger", "verify"]):
        code = ("import sys\nfrom monte.cli.main import main\ntry:\n"
                f"    main({argv!r})\nexcept SystemExit as e:\n    assert not e.code, e.code\n"
                "print('LM_EVAL=' + str('lm_eval' in sys.modules), file=sys.stderr)\n")
        r = subprocess.run([sys.executable, "-c", code], cwd=repo, capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
        assert "LM_EVAL=False" in r.stderr, (argv, r.stderr)
