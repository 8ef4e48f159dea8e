"""DPO on a frozen preference Dataset and RLOO on an environment's reward, end to end with real
TRL chunks on the tiny model: each move's plan, lineage label and checkpoint; a continuation
equal to one longer chunk; an SFT -> DPO stage boundary; crossed sources and leaks refused with
nothing written; TRL's diagnostics in the event file and in `monte logs`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.support.helpers import git, run_events
from tests.support.trainhelp import (
    exam_prompts,
    refused,
    trained,
)

LEGEND = "(=move=> is a stage boundary: weights-only warm start, ADR 0002)"


def _lineage(monte, *args: str) -> list[str]:
    r = monte("status", "--wide", *args)  # whole lines (the default folds at 120 columns)
    assert r.code == 0, r.out + r.err
    return [line for line in r.out.splitlines() if line.startswith("lineage:")]


def _ck(repo: Path, run: str, step: int, exp: str = "exp") -> Path:
    return repo / ".monte" / "runs" / exp / run / "checkpoints" / f"step-{step}"


def _trainer_ck(repo: Path, run: str, step: int, exp: str = "exp") -> Path:
    return repo / ".monte" / "runs" / exp / run / "trainer" / f"checkpoint-{step}"


def _identical(a: Path, b: Path) -> bool:
    """Bit for bit: every tensor equal, not merely close."""
    import torch
    from safetensors.torch import load_file

    wa, wb = load_file(str(a / "model.safetensors")), load_file(str(b / "model.safetensors"))
    assert wa.keys() == wb.keys()
    return all(torch.equal(wa[k], wb[k]) for k in wa)


def _logs(repo: Path, run: str, exp: str = "exp") -> list[dict[str, Any]]:
    return [e for e in run_events(repo, run, exp) if e["event"] == "log" and "loss" in e]


def _second_experiment(monte, base_model: Path, steps: int = 8) -> None:
    """``e8``: the same base model with chunks of 8, its exam the dev split alone (the test content
    with these base weights is sealed across the repository, and ``exp`` holds its test@0)."""
    assert monte("env", "add", "--benchmark", "parity", "--as", "parity-dev").code == 0
    r = monte("experiment", "init", "e8", "--eval", "parity-dev", "--model", str(base_model),
              "--steps-per-chunk", str(steps))
    assert r.code == 0, r.err
    assert monte("eval", "-e", "e8", "--yes").code == 0


# --- DPO -----------------------------------------------------------------------------------------------


def test_a_dpo_chunk_from_base_plans_records_and_logs_trls_diagnostics(repo: Path, monte, prefs: str) -> None:
    r = monte("train", "--recipe", "dpo-t", "--source", "parity-pref", "--from-base", "--dry-run")
    assert r.code == 0, r.out + r.err
    assert "plan: train dpo:parity-pref from base in exp" in r.out
    assert "reference model (beta 0.1): the stage's start, base" in r.out
    assert "source preference dataset parity-pref" in r.out
    row = trained(monte, "--recipe", "dpo-t", "--source", "parity-pref", "--from-base")
    run = row["run"]
    assert row["step"] == 4 and row["plan"]["recipe"]["algorithm"] == "dpo"
    assert row["plan"]["source_kind"] == "dataset" and row["plan"]["settings"]["beta"] == 0.1
    info = json.loads(git(repo, "show", f"monte/exp/lineage/{run}:checkpoint.json"))
    assert info["step"] == 4 and info["stage_start"] == "base" and info["source"] == "parity-pref"
    assert {"config.json", "model.safetensors", "tokenizer.json"} <= set(info["files"])
    assert _lineage(monte) == ["lineage: base -dpo:parity-pref-> 4"]
    assert f"{run}@4  dpo:parity-pref  from base" in monte("status").out
    # TRL's preference diagnostics, one record per step, in the event file and in `monte logs`
    logs = _logs(repo, run)
    assert [e["step"] for e in logs] == [1, 2, 3, 4]
    for key in ("rewards/margins", "rewards/accuracies", "rewards/chosen", "rewards/rejected", "logps/chosen"):
        assert all(isinstance(e[key], float) for e in logs), key
    assert any(e["rewards/margins"] != 0 for e in logs)  # the policy moved away from its reference
    shown = [json.loads(x) for x in monte("logs", run).out.splitlines()]
    assert [e["rewards/margins"] for e in shown if e["event"] == "log" and "loss" in e] == \
        [e["rewards/margins"] for e in logs]


def test_a_dpo_continuation_equals_one_longer_chunk_bit_for_bit(repo: Path, monte, dpo_chunk: dict[str, Any],
                                                                 base_model: Path) -> None:
    _second_experiment(monte, base_model)
    a = dpo_chunk["run"]  # exp: dpo-t from the base model, 4 steps
    plan = monte("train", "-e", "exp", "--recipe", "dpo-t", "--source", "parity-pref", "--parent", f"{a}@4",
                 "--dry-run", "--json").json()["plan"]
    # built on the stage's start (the reference model stays the base) and resuming the parent's state
    assert plan["resume_from"] == str(_trainer_ck(repo, a, 4)) and plan["resume_step"] == 4
    assert plan["init_model"] == plan["stage_start"] == str(base_model.resolve()) and plan["boundary"] is False
    b = trained(monte, "-e", "exp", "--recipe", "dpo-t", "--source", "parity-pref", "--parent", f"{a}@4")
    assert b["step"] == 8 and b["plan"]["init_model"] == "base"
    one = trained(monte, "-e", "e8", "--recipe", "dpo-t", "--source", "parity-pref", "--from-base")
    assert _identical(_ck(repo, b["run"], 8), _ck(repo, one["run"], 8, exp="e8"))
    assert not _identical(_ck(repo, a, 4), _ck(repo, b["run"], 8))
    # the reference's log-probabilities were the base's all along: the margins match step by step
    assert [e["rewards/margins"] for e in _logs(repo, a) + _logs(repo, b["run"])] == pytest.approx(
        [e["rewards/margins"] for e in _logs(repo, one["run"], "e8")], rel=1e-5, abs=1e-7)
    assert _lineage(monte, "exp") == ["lineage: base -dpo:parity-pref-> 4 -dpo:parity-pref-> 8"]


def test_sft_then_dpo_is_a_stage_boundary_with_the_sft_checkpoint_as_reference(
        repo: Path, monte, prefs_sft_chunk: dict[str, Any]) -> None:
    a = prefs_sft_chunk["run"]  # sft-t from the base model, 4 steps
    r = monte("train", "--recipe", "dpo-t", "--source", "parity-pref", "--parent", f"{a}@4", "--dry-run")
    assert "stage boundary: weights-only warm start" in r.out
    assert f"reference model (beta 0.1): the stage's start, {a}@4 (the parent checkpoint)" in r.out
    plan = monte("train", "--recipe", "dpo-t", "--source", "parity-pref", "--parent", f"{a}@4",
                 "--dry-run", "--json").json()["plan"]
    assert plan["boundary"] is True and plan["resume_from"] is None
    assert plan["init_model"] == plan["stage_start"] == str(_ck(repo, a, 4))
    c = trained(monte, "--recipe", "dpo-t", "--source", "parity-pref", "--parent", f"{a}@4")
    assert c["plan"]["boundary"] is True and c["step"] == 8 and c["plan"]["start_step"] == 4
    info = json.loads(git(repo, "show", f"monte/exp/lineage/{c['run']}:checkpoint.json"))
    assert info["boundary"] is True and info["stage_start"] == f"{a}@4" and info["trainer_step"] == 4
    assert git(repo, "rev-parse", f"monte/exp/lineage/{c['run']}^").strip() == \
        git(repo, "rev-parse", f"monte/exp/lineage/{a}").strip()
    # the reference is the SFT checkpoint: at the first step the policy equals it, so every
    # implicit reward is 0 (from the base model as reference they would not be)
    first = _logs(repo, c["run"])[0]
    assert first["rewards/chosen"] == pytest.approx(0, abs=1e-6) and first["rewards/margins"] == pytest.approx(0, abs=1e-6)
    assert _lineage(monte) == [f"lineage: base -sft:parity-sft-> 4 =dpo:parity-pref(+4)=> 8 {LEGEND}"]
    # and a dpo continuation of it keeps the SFT checkpoint as its reference
    d = trained(monte, "--recipe", "dpo-t", "--source", "parity-pref", "--parent", f"{c['run']}@8")
    assert d["plan"]["init_model"] == f"{a}@4" and d["step"] == 12


# --- RLOO ------------------------------------------------------------------------------------------------


def test_rloo_on_parity_plans_records_continues_bit_for_bit_and_logs_kl(repo: Path, monte, prefs: str,
                                                                         base_model: Path) -> None:
    _second_experiment(monte, base_model)
    r = monte("train", "-e", "exp", "--recipe", "rloo-t", "--source", "parity", "--from-base", "--dry-run")
    assert "plan: train rloo:parity from base in exp" in r.out, r.out + r.err
    assert "reference model (beta 0.05): the stage's start, base" in r.out
    a = trained(monte, "-e", "exp", "--recipe", "rloo-t", "--source", "parity", "--from-base")
    assert a["plan"]["recipe"]["algorithm"] == "rloo" and a["plan"]["source_kind"] == "environment"
    info = json.loads(git(repo, "show", f"monte/exp/lineage/{a['run']}:checkpoint.json"))
    assert info["step"] == 4 and info["source"] == "parity"
    logs = _logs(repo, a["run"])
    assert [e["step"] for e in logs] == [1, 2, 3, 4]
    for key in ("kl", "reward", "reward_std", "entropy", "rewards/grader_parity/mean"):
        assert all(isinstance(e[key], float) for e in logs), key
    b = trained(monte, "-e", "exp", "--recipe", "rloo-t", "--source", "parity", "--parent", f"{a['run']}@4")
    one = trained(monte, "-e", "e8", "--recipe", "rloo-t", "--source", "parity", "--from-base")
    assert _identical(_ck(repo, b["run"], 8), _ck(repo, one["run"], 8, exp="e8"))
    assert _lineage(monte, "exp") == ["lineage: base -rloo:parity-> 4 -rloo:parity-> 8"]
    shown = [json.loads(x) for x in monte("logs", b["run"]).out.splitlines()]
    assert [e["step"] for e in shown if e["event"] == "log" and "kl" in e] == [5, 6, 7, 8]


def test_sft_then_rloo_is_a_stage_boundary(repo: Path, monte, prefs_sft_chunk: dict[str, Any]) -> None:
    a = prefs_sft_chunk["run"]  # sft-t from the base model, 4 steps
    c = trained(monte, "--recipe", "rloo-t", "--source", "parity", "--parent", f"{a}@4")
    assert c["plan"]["boundary"] is True and c["step"] == 8
    assert json.loads(git(repo, "show", f"monte/exp/lineage/{c['run']}:checkpoint.json"))["stage_start"] == f"{a}@4"
    assert _lineage(monte) == [f"lineage: base -sft:parity-sft-> 4 =rloo:parity(+4)=> 8 {LEGEND}"]


# --- refusals ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("recipe", "source", "says", "fix"), [
    ("dpo-t", "parity", "a dpo recipe cannot train on environment 'parity'", "--kind preference"),
    ("dpo-t", "parity-sft", "a dpo recipe cannot train on sft dataset 'parity-sft'", "--kind preference"),
    ("sft-t", "parity-pref", "a sft recipe cannot train on preference dataset 'parity-pref'", "dpo recipe"),
    ("rloo-t", "parity-pref", "a rloo recipe cannot train on preference dataset 'parity-pref'",
     "trainable Environment"),
    ("grpo-t", "parity-pref", "a grpo recipe cannot train on preference dataset", "dpo recipe"),
])
def test_crossed_sources_are_refused_naming_the_fix(repo: Path, monte, prefs: str, recipe: str, source: str,
                                                    says: str, fix: str) -> None:
    err = refused(monte, repo, "train", "--recipe", recipe, "--source", source, "--from-base", "--yes",
                  code="E_REFUSED", exit_code=3)
    assert says in err["message"] and fix in err["fix"], err


def test_a_preference_set_holding_a_sealed_test_item_in_any_column_is_a_leak(repo: Path, monte, prefs: str,
                                                                              tmp_path: Path) -> None:
    sealed = exam_prompts(repo, "test")[0]
    rows = [json.loads(line) for line in (tmp_path / "parity-pref.jsonl").read_text().splitlines()[:16]]
    # an implicit-prompt pair: the sealed prompt sits inside the chosen and rejected texts
    leaky = [{"chosen": f"{r['prompt']}{r['chosen']}", "rejected": f"{r['prompt']}{r['rejected']}"} for r in rows]
    leaky.append({"chosen": f"{sealed} even", "rejected": f"{sealed} odd"})
    path = tmp_path / "leaky.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in leaky))
    assert monte("dataset", "add", "leaky", "--from-file", str(path), "--kind", "preference").code == 0
    err = refused(monte, repo, "train", "--recipe", "dpo-t", "--source", "leaky", "--from-base", "--yes",
                  code="E_LEAK", exit_code=3)
    assert "line 17" in err["message"] and "new name" in err["fix"]
