"""Every score says its grader's rule, and where the grader gives partial credit the exact-match
rate stands beside it (issue 49: an agent reverse-engineered reasoning-gym's partial credit,
0.5, 0.33, 0.67 for an answer inside a longer output; nothing said so)."""

from __future__ import annotations

from pathlib import Path

from monte.envs import grading
from monte.envs.catalog import RULES, builtin_benchmarks

DOCS = Path(__file__).resolve().parents[2] / "docs" / "environments.md"


def test_every_built_in_benchmark_has_its_rule_stated_in_the_docs() -> None:
    assert set(RULES) == set(builtin_benchmarks())
    text = DOCS.read_text()
    for name, rule in RULES.items():
        assert f"| `{name}` | {rule} |" in text, name


def test_chain_sum_gives_partial_credit_and_its_rule_says_so() -> None:
    """The rule stated is the rule applied: an answer inside a longer first token earns
    len(reference) / len(token)."""
    bench = builtin_benchmarks()["chain_sum"]
    item = bench.generate(seed=7, n=1)[0]
    ref = str(item["answer"])
    assert bench.grade(item, ref) == 1.0
    longer = f"x{ref}y"
    assert bench.grade(item, longer) == len(ref) / len(longer)
    assert "partial credit" in grading.rule(None, "chain_sum", "chain_sum")
    assert "no partial credit" in grading.rule(None, "parity", "parity")


def test_the_exact_match_rate_stands_beside_a_partial_score_only() -> None:
    partial = [{"score": 1.0}, {"score": 0.5}, {"score": 0.0}, {"score": 1.0}]
    assert grading.exact_rate(partial) == 0.5  # the score would read 0.625
    assert grading.exact_rate([{"score": 1.0}, {"score": 0.0}]) is None  # the score is already the rate
    assert grading.exact_rate([]) is None


def test_a_jsonl_exams_rule_is_its_frozen_grader() -> None:
    grader = {"kind": grading.JSONL, "graders": {"sums": {"kind": "numeric", "tolerance": 0.01}}}
    assert "within 0.01" in grading.rule(grader, "file", "sums")
