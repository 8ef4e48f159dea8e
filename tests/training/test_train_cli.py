"""`monte train` end to end with real TRL chunks on a real tiny model: the refusals, the smoke
chunk, lineage as commits, continuation vs stage boundary, and a failure inside training."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from monte.hashing import sha256_file
from tests.support.helpers import git, run_events, snapshot_state
from tests.support.trainhelp import (
    SFT,
    curriculum,
    distill,
    exam_prompts,
    refused,
    train,
    trained,
    write_recipe,
    write_sft_rows,
)

LEGEND = "(=move=> is a stage boundary: weights-only warm start, ADR 0002)"


def _lineage(monte, *args: str) -> list[str]:
    r = monte("status", "--wide", *args)  # whole lines (the default folds at 120 columns)
    assert r.code == 0, r.out + r.err
    return [line for line in r.out.splitlines() if line.startswith("lineage:")]


def _adam_step(trainer_ckpt: Path) -> int:
    """The optimizer's own step count, as the trainer saved it."""
    import torch

    state = torch.load(trainer_ckpt / "optimizer.pt", weights_only=False)["state"]
    return int(next(iter(state.values()))["step"])


def _weights(folder: Path) -> dict[str, Any]:
    from safetensors.torch import load_file

    return load_file(str(folder / "model.safetensors"))


def _same_weights(a: Path, b: Path, atol: float = 1e-5) -> bool:
    import torch

    wa, wb = _weights(a), _weights(b)
    assert wa.keys() == wb.keys()
    return all(torch.allclose(wa[k], wb[k], atol=atol) for k in wa)


def _ck(repo: Path, run: str, step: int, exp: str = "exp") -> Path:
    return repo / ".monte" / "runs" / exp / run / "checkpoints" / f"step-{step}"


def _trainer_ck(repo: Path, run: str, step: int, exp: str = "exp") -> Path:
    return repo / ".monte" / "runs" / exp / run / "trainer" / f"checkpoint-{step}"


# --- baselines and smoke ---------------------------------------------------------------------------


def test_training_is_refused_until_both_baselines_exist(repo: Path, monte, trainable: str) -> None:
    args = ("train", "--recipe", "sft-t", "--source", "parity-sft", "--from-base", "--yes")
    err = refused(monte, repo, *args, code="E_NO_BASELINE", exit_code=3)
    assert "parity/dev@0" in err["message"] and "parity/test@0" in err["message"]
    assert "monte eval" in err["fix"] and "--split test" in err["fix"]
    assert monte("eval", "--yes").code == 0  # dev@0 alone is not enough
    err = refused(monte, repo, *args, code="E_NO_BASELINE", exit_code=3)
    assert "parity/test@0" in err["message"] and "parity/dev@0" not in err["message"]
    assert monte("eval", "--split", "test", "--yes").code == 0
    assert train(monte, *args[1:-1]).code == 0


def test_a_smoke_chunk_needs_no_baseline_and_never_enters_the_tree(repo: Path, monte, trainable: str) -> None:
    refs_before = set(git(repo, "for-each-ref", "--format=%(refname)").split())
    row = trained(monte, "--recipe", "sft-t", "--source", "parity-sft", "--smoke")
    assert row["smoke"] is True and row["checkpoints"] == []
    assert row["plan"]["steps"] == 3 and row["plan"]["parent"] is None
    new_refs = set(git(repo, "for-each-ref", "--format=%(refname)").split()) - refs_before
    assert not any("/lineage/" in ref for ref in new_refs), new_refs
    folder = repo / ".monte" / "runs" / "exp" / row["run"]
    assert not (folder / "checkpoints").exists()
    events = [json.loads(x) for x in monte("logs", row["run"]).out.splitlines()]
    assert max(e["step"] for e in events if e["event"] == "log") == 3  # it did train 3 steps
    assert events[-1]["event"] == "succeeded"
    # a smoke row is no baseline
    refused(monte, repo, "train", "--recipe", "sft-t", "--source", "parity-sft", "--from-base", "--yes",
            code="E_NO_BASELINE", exit_code=3)
    # ... and never a parent
    monte("eval", "--yes")
    monte("eval", "--split", "test", "--yes")
    for parent in (f"{row['run']}@3", row["run"]):
        err = refused(monte, repo, "train", "--recipe", "sft-t", "--source", "parity-sft",
                      "--parent", parent, "--yes", code="E_NOT_EVIDENCE", exit_code=3)
        assert "smoke" in err["message"] and "real training run" in err["fix"]


# --- what a real chunk must state ----------------------------------------------------------------


@pytest.mark.parametrize(("flags", "says"), [
    ((), "--from-base"),
    (("--from-base", "--parent", "abc@4"), "not both"),
    (("--smoke", "--from-base"), "smoke"),
    (("--smoke", "--parent", "abc@4"), "smoke"),
])
def test_starting_point_usage_errors_exit_2(repo: Path, monte, ready: str, flags: tuple[str, ...], says: str) -> None:
    err = refused(monte, repo, "train", "--recipe", "sft-t", "--source", "parity-sft", "--yes", *flags,
                  code="E_USAGE", exit_code=2)
    assert says in err["message"]
    assert "--from-base" in err["fix"] or "--smoke" in err["fix"]


def test_a_crossed_pairing_refuses_naming_the_right_kind(repo: Path, monte, ready: str) -> None:
    err = refused(monte, repo, "train", "--recipe", "sft-t", "--source", "parity", "--from-base", "--yes",
                  code="E_REFUSED", exit_code=3)
    assert "sft" in err["message"] and "'parity'" in err["message"]
    # the fix names the command that turns the curriculum into demonstrations, and how they are joined
    assert "`monte dataset add parity-sft --from-env parity --kind sft`" in err["fix"], err["fix"]
    assert "one space, then its answer" in err["fix"]
    for recipe in ("grpo-t", "distill-t"):
        err = refused(monte, repo, "train", "--recipe", recipe, "--source", "parity-sft", "--from-base", "--yes",
                      code="E_REFUSED", exit_code=3)
        assert "'parity-sft'" in err["message"] and "trainable Environment" in err["fix"]


def test_sources_that_cannot_be_trained_on(repo: Path, monte, ready: str, tmp_path: Path) -> None:
    raw = write_sft_rows(tmp_path / "raw.jsonl", curriculum(repo)[:8])
    assert monte("dataset", "add", "raw", "--from-file", str(raw)).code == 0  # no --kind sft
    err = refused(monte, repo, "train", "--recipe", "sft-t", "--source", "raw", "--from-base", "--yes",
                  code="E_REFUSED", exit_code=3)
    assert "--kind sft" in err["message"] and "--kind sft" in err["fix"]
    assert monte("env", "add", "--benchmark", "parity", "--as", "parity-bench").code == 0
    err = refused(monte, repo, "train", "--recipe", "grpo-t", "--source", "parity-bench", "--from-base",
                  "--yes", code="E_REFUSED", exit_code=3)
    assert "eval-only" in err["message"] and "--server" in err["fix"]
    err = refused(monte, repo, "train", "--recipe", "sft-t", "--source", "nosuch", "--from-base", "--yes",
                  code="E_NOT_FOUND", exit_code=4)
    assert "'nosuch'" in err["message"] and "monte dataset add" in err["fix"]


@pytest.mark.parametrize("source", ["lm-eval:gsm8k", "file:questions.jsonl"])
def test_an_exam_as_a_source_is_refused_naming_dataset_add(repo: Path, monte, ready: str, source: str) -> None:
    err = refused(monte, repo, "train", "--recipe", "sft-t", "--source", source, "--from-base", "--yes",
                  code="E_USAGE", exit_code=2)
    assert "exam" in err["message"] and "monte dataset add" in err["fix"]


def test_a_source_holding_sealed_test_items_is_a_leak(repo: Path, monte, ready: str, tmp_path: Path) -> None:
    test = exam_prompts(repo, "test")
    items = curriculum(repo)[:20] + [{"prompt": p, "answer": "even"} for p in test[:3]]
    leaky = write_sft_rows(tmp_path / "leaky.jsonl", items)
    assert monte("dataset", "add", "leaky", "--from-file", str(leaky), "--kind", "sft").code == 0
    err = refused(monte, repo, "train", "--recipe", "sft-t", "--source", "leaky", "--from-base", "--yes",
                  code="E_LEAK", exit_code=3)
    assert "3 of its row(s)" in err["message"] and "sealed test" in err["message"] and "line 21" in err["message"]
    assert "remove those rows" in err["fix"]
    err = refused(monte, repo, "train", "--recipe", "sft-t", "--source", "leaky", "--smoke", "--yes",
                  code="E_LEAK", exit_code=3)  # a smoke reads the same rows
    # dev items are not sealed: the plan reports them and goes ahead
    dev = exam_prompts(repo, "dev")
    near = write_sft_rows(tmp_path / "near.jsonl", curriculum(repo)[:20] + [{"prompt": p, "answer": "odd"}
                                                                             for p in dev[:2]])
    assert monte("dataset", "add", "near", "--from-file", str(near), "--kind", "sft").code == 0
    r = monte("train", "--recipe", "sft-t", "--source", "near", "--from-base", "--dry-run", "--json")
    assert r.code == 0 and r.json()["plan"]["leak"] == {"dev_overlap": 2}
    assert "2 item(s) also in a dev exam" in r.err


def test_a_same_recipe_continuation_keeps_its_parents_source(repo: Path, monte, sft_chunk: dict[str, Any],
                                                            tmp_path: Path) -> None:
    a = sft_chunk["run"]
    other = write_sft_rows(tmp_path / "other.jsonl", curriculum(repo)[1000:1256])
    assert monte("dataset", "add", "parity-sft2", "--from-file", str(other), "--kind", "sft").code == 0
    err = refused(monte, repo, "train", "--recipe", "sft-t", "--source", "parity-sft2", "--parent", f"{a}@4",
                  "--yes", code="E_REFUSED", exit_code=3)
    assert "parity-sft" in err["message"] and "--from-base" in err["fix"] and "stage boundary" in err["fix"]
    # the two ways the fix names are both open
    r = monte("train", "--recipe", "sft-t", "--source", "parity-sft2", "--from-base", "--dry-run", "--json")
    assert r.code == 0, r.out
    write_recipe(repo, "sft-slow", SFT.replace("3.0e-3", "1.0e-3"))
    r = monte("train", "--recipe", "sft-slow", "--source", "parity-sft2", "--parent", f"{a}@4", "--dry-run", "--json")
    assert r.code == 0 and r.json()["plan"]["boundary"] is True


def test_a_parent_must_exist(repo: Path, monte, ready: str) -> None:
    err = refused(monte, repo, "train", "--recipe", "sft-t", "--source", "parity-sft", "--parent", "nosuch@4",
                  "--yes", code="E_NOT_FOUND", exit_code=4)
    assert "nosuch" in err["message"]


# --- lineage as commits --------------------------------------------------------------------------


def test_checkpoints_are_lineage_commits_git_can_read(repo: Path, monte, sft_chunk: dict[str, Any],
                                                      base_model: Path) -> None:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    a_row = sft_chunk
    a, cohort = a_row["run"], a_row["cohort"]
    assert a_row["step"] == 4 and [c["step"] for c in a_row["checkpoints"]] == [4]
    b_row = trained(monte, "--recipe", "sft-t", "--source", "parity-sft", "--parent", f"{a}@4")
    b = b_row["run"]
    assert b_row["step"] == 8 and b_row["plan"]["parent"] == {"run": a, "step": 4}

    info = json.loads(git(repo, "show", f"monte/exp/lineage/{a}:checkpoint.json"))
    assert info["step"] == 4 and info["run"] == a and info["cohort"] == cohort
    assert info["weights"] == f"runs/exp/{a}/checkpoints/step-4"
    folder = _ck(repo, a, 4)
    on_disk = {p.name: sha256_file(p) for p in folder.iterdir()}
    assert info["files"] == on_disk  # every servable file, nothing else
    assert {"config.json", "model.safetensors", "tokenizer.json"} <= set(on_disk)
    assert not {"optimizer.pt", "scheduler.pt", "trainer_state.json"} & set(on_disk)
    assert info["trainer_step"] == 4 and info["stage_start"] == "base"  # a reference, never a folder
    assert json.loads(git(repo, "show", f"monte/exp/lineage/{b}:checkpoint.json"))["step"] == 8
    assert git(repo, "log", "-1", "--format=%(trailers:key=Monte-Step,valueonly)", f"monte/exp/lineage/{a}").strip() == "4"

    def parents(rev: str) -> list[str]:
        return git(repo, "rev-list", "--parents", "-n1", rev).split()[1:]

    base = git(repo, "rev-parse", f"refs/heads/monte/exp/base/{cohort}").strip()
    a_commit = git(repo, "rev-parse", f"monte/exp/lineage/{a}").strip()
    assert parents(a_commit) == [base] and parents(base) == []
    assert parents(f"monte/exp/lineage/{b}") == [a_commit]
    assert json.loads(git(repo, "show", f"{base}:base.json"))["cohort"] == cohort

    graph = git(repo, "log", "--graph", "--oneline", "--branches=monte/exp/lineage/*")
    assert f"checkpoint {a}@4" in graph and f"checkpoint {b}@8" in graph and f"base model of cohort {cohort}" in graph
    fsck = git(repo, "fsck", "--strict")  # raises on a non-zero exit
    assert "error" not in fsck and "warning" not in fsck

    model = AutoModelForCausalLM.from_pretrained(str(folder))
    assert model.config.model_type == "qwen2"
    assert AutoTokenizer.from_pretrained(str(folder)).encode("p 12345 =")


def test_a_continuation_equals_one_longer_chunk(repo: Path, monte, sft_chunk: dict[str, Any], base_model: Path) -> None:
    # e8: same base model, dataset and recipe; chunks of 8 instead of 4. Its exam is the dev split
    # alone: the test content with these base weights is sealed across the repository, and exp
    # holds its test@0
    assert monte("env", "add", "--benchmark", "parity", "--as", "parity-dev").code == 0
    r = monte("experiment", "init", "e8", "--eval", "parity-dev", "--model", str(base_model),
              "--steps-per-chunk", "8")
    assert r.code == 0, r.err
    assert monte("eval", "-e", "e8", "--yes").code == 0
    assert monte("eval", "-e", "e8", "--split", "test", "--yes").code == 4  # no test split here
    a = sft_chunk["run"]  # exp: sft-t from the base model, 4 steps
    plan = monte("train", "-e", "exp", "--recipe", "sft-t", "--source", "parity-sft", "--parent", f"{a}@4",
                 "--dry-run", "--json").json()["plan"]
    # the trainer is built on the stage's start (the KL reference) and resumes the parent's state
    assert plan["resume_from"] == str(_trainer_ck(repo, a, 4)) and plan["resume_step"] == 4
    assert plan["init_model"] == str(base_model.resolve()) and plan["boundary"] is False
    b_row = trained(monte, "-e", "exp", "--recipe", "sft-t", "--source", "parity-sft", "--parent", f"{a}@4")
    b = b_row["run"]
    assert b_row["step"] == 8 and b_row["plan"]["start_step"] == 4 and b_row["plan"]["steps"] == 4
    # the row records references, not this machine's folders: the stage's start by name, the
    # trainer state relative to the data root
    assert b_row["plan"]["init_model"] == "base" and b_row["plan"]["resume_from"] == f"runs/exp/{a}/trainer/checkpoint-4"
    one = trained(monte, "-e", "e8", "--recipe", "sft-t", "--source", "parity-sft", "--from-base")
    assert one["step"] == 8

    assert _same_weights(_ck(repo, b, 8), _ck(repo, one["run"], 8, exp="e8"))
    assert not _same_weights(_ck(repo, a, 4), _ck(repo, b, 8))  # and training did move the weights
    assert _adam_step(_trainer_ck(repo, b, 8)) == 8  # the optimizer state was carried over
    assert _lineage(monte, "exp") == ["lineage: base -sft:parity-sft-> 4 -sft:parity-sft-> 8"]
    assert LEGEND not in monte("status", "exp").out  # no boundary on this path


COSINE = SFT.replace("lr_scheduler_type: constant\n",
                     "lr_scheduler_type: cosine\nwarmup_steps: 2\nschedule_steps: 8\n")


def _lrs(repo: Path, run: str, exp: str = "exp") -> list[float]:
    return [e["learning_rate"] for e in run_events(repo, run, exp) if e["event"] == "log" and "learning_rate" in e]


def test_a_decaying_schedule_continues_across_chunks(repo: Path, monte, ready: str, base_model: Path) -> None:
    """Cosine with warm-up over an 8-step horizon: chunks 4 + 4 equal one chunk of 8, learning
    rates and weights; the horizon spent, a third chunk is refused; a boundary starts afresh."""
    import pytest as _pytest

    assert monte("env", "add", "--benchmark", "parity", "--as", "parity-dev").code == 0
    r = monte("experiment", "init", "e8", "--eval", "parity-dev", "--model", str(base_model),
              "--steps-per-chunk", "8")
    assert r.code == 0, r.err
    assert monte("eval", "-e", "e8", "--yes").code == 0
    write_recipe(repo, "cos", COSINE)
    a = trained(monte, "-e", "exp", "--recipe", "cos", "--source", "parity-sft", "--from-base")["run"]
    b = trained(monte, "-e", "exp", "--recipe", "cos", "--source", "parity-sft", "--parent", f"{a}@4")["run"]
    one = trained(monte, "-e", "e8", "--recipe", "cos", "--source", "parity-sft", "--from-base")["run"]
    lrs = _lrs(repo, one, "e8")
    assert len(lrs) == 8 and lrs[0] < lrs[1] and lrs[-1] < lrs[2] / 4  # warm-up, then the decay
    assert _lrs(repo, a) + _lrs(repo, b) == _pytest.approx(lrs, rel=1e-6)  # no jump at the chunk edge
    assert _same_weights(_ck(repo, b, 8), _ck(repo, one, 8, exp="e8"))
    assert _adam_step(_trainer_ck(repo, b, 8)) == 8
    # the horizon is spent: refused before anything is written
    err = refused(monte, repo, "train", "-e", "exp", "--recipe", "cos", "--source", "parity-sft", "--parent",
                  f"{b}@8", "--yes", code="E_REFUSED", exit_code=3)
    assert "schedule_steps: 8" in err["message"] and "stage boundary" in err["fix"]
    # another recipe is a stage boundary: its schedule starts from its own step 0
    write_recipe(repo, "cos2", COSINE + "# the next stage\n")
    c = trained(monte, "-e", "exp", "--recipe", "cos2", "--source", "parity-sft", "--parent", f"{b}@8")["run"]
    assert _lrs(repo, c) == _pytest.approx(_lrs(repo, a), rel=1e-6)


def test_a_stage_boundary_is_a_weights_only_warm_start(repo: Path, monte, sft_chunk: dict[str, Any]) -> None:
    a = sft_chunk["run"]
    plan = monte("train", "--recipe", "grpo-t", "--source", "parity", "--parent", f"{a}@4",
                 "--dry-run", "--json").json()["plan"]
    assert plan["boundary"] is True and plan["resume_from"] is None and plan["resume_step"] == 0
    assert plan["init_model"] == plan["stage_start"] == str(_ck(repo, a, 4))  # the KL anchor moves

    c_row = trained(monte, "--recipe", "grpo-t", "--source", "parity", "--parent", f"{a}@4")
    c = c_row["run"]
    assert c_row["plan"]["boundary"] is True and c_row["step"] == 8
    assert c_row["plan"]["start_step"] == 4 and c_row["plan"]["source_kind"] == "environment"
    assert c_row["plan"]["resume_from"] is None  # no trainer state restored
    state = json.loads((_trainer_ck(repo, c, 4) / "trainer_state.json").read_text())
    assert state["global_step"] == 4  # the trainer's counter restarted; the ledger's step is 8
    assert not _trainer_ck(repo, c, 8).exists()
    assert _adam_step(_trainer_ck(repo, c, 4)) == 4  # a fresh optimizer, not the parent's (4 + 4)
    info = json.loads(git(repo, "show", f"monte/exp/lineage/{c}:checkpoint.json"))
    assert info["boundary"] is True and info["step"] == 8 and info["trainer_step"] == 4
    assert info["stage_start"] == f"{a}@4"  # the KL anchor, by run and step
    a_commit = git(repo, "rev-parse", f"monte/exp/lineage/{a}").strip()
    assert git(repo, "rev-parse", f"monte/exp/lineage/{c}^").strip() == a_commit

    # the legend ends the line that crosses the boundary, as docs/commands.md prints it
    assert _lineage(monte) == [f"lineage: base -sft:parity-sft-> 4 =grpo:parity(+4)=> 8 {LEGEND}"]
    out = monte("status").out
    assert LEGEND in out and f"{c}@8  grpo:parity  from {a}@4  (stage boundary)" in out


def test_a_boundary_trains_like_a_fresh_trainer_on_the_parents_weights(repo: Path, monte, sft_chunk: dict[str, Any],
                                                                       tmp_path: Path, _template: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """Weights-only, shown by the numbers: a boundary from A equals a from-base chunk whose base
    model is a copy of A's servable folder (no optimizer, scheduler or data position carried)."""
    a = sft_chunk["run"]
    write_recipe(repo, "sft-b", SFT.replace("3.0e-3", "1.0e-3"))
    boundary = trained(monte, "--recipe", "sft-b", "--source", "parity-sft", "--parent", f"{a}@4")
    assert boundary["plan"]["boundary"] is True and boundary["step"] == 8
    copy = tmp_path / "a-weights"
    shutil.copytree(_ck(repo, a, 4), copy)
    # here a checkpoint is never a base model (E_REFUSED): train the fresh one in another repository
    assert monte("eval", "--model", str(copy), "--dry-run", "--json").json()["error"]["code"] == "E_REFUSED"
    other = tmp_path / "other"
    shutil.copytree(_template, other, symlinks=True)
    monkeypatch.chdir(other)
    assert monte("env", "add", "--server", "parity", "--dev", "parity", "--test", "parity").code == 0
    assert monte("dataset", "add", "parity-sft", "--from-file", str(tmp_path / "parity-sft.jsonl"),
                 "--kind", "sft").code == 0
    assert monte("experiment", "init", "exp", "--eval", "parity", "--model", str(copy),
                 "--steps-per-chunk", "4").code == 0
    write_recipe(other, "sft-b", SFT.replace("3.0e-3", "1.0e-3"))
    assert monte("eval", "--yes").code == 0  # a cohort of its own: its baselines
    assert monte("eval", "--split", "test", "--yes").code == 0
    fresh = trained(monte, "--recipe", "sft-b", "--source", "parity-sft", "--from-base")
    assert fresh["step"] == 4 and fresh["cohort"] != boundary["cohort"]
    assert _same_weights(_ck(repo, boundary["run"], 8), _ck(other, fresh["run"], 4))
    assert not _same_weights(_ck(repo, a, 4), _ck(repo, boundary["run"], 8))


# --- distillation, and failures inside a chunk --------------------------------------------------


def test_a_distillation_chunk_records_its_move(repo: Path, monte, ready: str, teacher: Path) -> None:
    row = trained(monte, "--recipe", "distill-t", "--source", "parity", "--from-base")
    assert row["step"] == 4 and row["plan"]["recipe"]["algorithm"] == "distillation"
    assert row["plan"]["settings"]["teacher"] == str(teacher)
    assert _lineage(monte) == ["lineage: base -distillation:parity-> 4"]
    assert f"{row['run']}@4  distillation:parity  from base" in monte("status").out


def _broken_teacher(tmp_path: Path, teacher: Path) -> Path:
    """A folder that looks like a model (config.json and all) but whose weights are garbage."""
    bad = tmp_path / "bad-teacher"
    shutil.copytree(teacher, bad)
    (bad / "model.safetensors").write_bytes(b"not a safetensors file")
    return bad


def test_a_failure_inside_training_reads_failed_with_its_reason(repo: Path, monte, ready: str, teacher: Path, tmp_path: Path) -> None:
    write_recipe(repo, "distill-bad", distill(_broken_teacher(tmp_path, teacher)))
    r = train(monte, "--recipe", "distill-bad", "--source", "parity", "--from-base")
    assert r.code == 1, r.out + r.err
    assert r.json()["error"]["code"] == "E_INTERNAL"
    runs = [x["run"] for x in monte("status", "--json").json()["rows"] if x["kind"] == "train"]
    assert len(runs) == 1
    row = monte("show", runs[0], "--json").json()
    assert row["status"] == "failed" and row["checkpoints"] == []
    assert row["error"].startswith("SafetensorError: "), row["error"]  # the reason, as raised
    assert "failed" in monte("status").out
    events = [json.loads(x) for x in monte("logs", row["run"]).out.splitlines()]
    kinds = [e["event"] for e in events]
    assert kinds[0] == "started" and "failed" in kinds and "error" in kinds
    assert "Traceback" in next(e for e in events if e["event"] == "error")["traceback"]
    assert "/lineage/" not in git(repo, "for-each-ref", "--format=%(refname)")
    assert _lineage(monte) == []
    # the failed run is no parent
    err = refused(monte, repo, "train", "--recipe", "distill-t", "--source", "parity", "--parent",
                  f"{row['run']}@4", "--yes", code="E_NOT_FOUND", exit_code=4)
    assert row["run"] in err["message"]


def test_a_missing_teacher_is_refused_naming_it(repo: Path, monte, ready: str, tmp_path: Path) -> None:
    missing = tmp_path / "no-such-teacher"
    write_recipe(repo, "distill-missing", distill(missing))
    r = train(monte, "--recipe", "distill-missing", "--source", "parity", "--from-base")
    assert r.code == 4, r.out + r.err
    err = r.json()["error"]
    assert err["code"] == "E_NOT_FOUND" and str(missing) in err["message"] and "teacher:" in err["fix"]
    assert "/lineage/" not in git(repo, "for-each-ref", "--format=%(refname)")


def test_a_missing_teacher_is_refused_before_anything_is_written(repo: Path, monte, ready: str, tmp_path: Path) -> None:
    write_recipe(repo, "distill-missing", distill(tmp_path / "no-such-teacher"))
    before = snapshot_state(repo)
    r = train(monte, "--recipe", "distill-missing", "--source", "parity", "--from-base")
    assert r.code == 4 and r.json()["error"]["code"] == "E_NOT_FOUND"
    assert snapshot_state(repo) == before


# --- refusals that need no model come before torch (issue 46.2) -----------------------------------

_PROBE = ("import json, sys\nfrom monte.cli.main import main\ntry:\n    main(sys.argv[1:])\nexcept SystemExit as e:\n"
          "    print(json.dumps({'exit': e.code, 'torch': 'torch' in sys.modules, 'trl': 'trl' in sys.modules}),"
          " file=sys.stderr)\n")


def _refusal_imports(repo: Path, *argv: str) -> dict[str, Any]:
    """A fresh interpreter's ``monte train ... --json``: its exit status, its error, and whether
    torch or TRL was imported by the time it refused (their import is seconds of a refusal)."""
    import subprocess
    import sys

    r = subprocess.run([sys.executable, "-c", _PROBE, "train", *argv, "--yes", "--json"], cwd=repo,
                       capture_output=True, text=True, timeout=300)
    probe = json.loads(r.stderr.strip().splitlines()[-1])
    return {**probe, "error": json.loads(r.stdout)["error"]["code"]}


def test_refusals_that_need_no_model_do_not_import_torch(repo: Path, trainable: str) -> None:
    """Reproduced: a missing --from-base, --smoke with --from-base and E_NO_BASELINE each waited
    for the torch/TRL import (8-16 s on a loaded machine) before refusing."""
    for argv, code in [(("--recipe", "sft-t", "--source", "parity-sft"), "E_USAGE"),
                       (("--recipe", "sft-t", "--source", "parity-sft", "--smoke", "--from-base"), "E_USAGE"),
                       (("--recipe", "sft-t", "--source", "parity-sft", "--from-base"), "E_NO_BASELINE")]:
        got = _refusal_imports(repo, *argv)
        assert got == {"exit": 2 if code == "E_USAGE" else 3, "torch": False, "trl": False, "error": code}, argv


def test_a_crossed_pairing_refuses_before_torch(repo: Path, ready: str) -> None:
    for recipe, source in (("sft-t", "parity"), ("grpo-t", "parity-sft")):
        got = _refusal_imports(repo, "--recipe", recipe, "--source", source, "--from-base")
        assert got == {"exit": 3, "torch": False, "trl": False, "error": "E_REFUSED"}, (recipe, source)
