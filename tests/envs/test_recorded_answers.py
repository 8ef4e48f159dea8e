"""What tasks.jsonl records of an answer is what the grade was computed from (issue 30.8).

Reproduced on the code before: the answer (and a server's extracted answer) was cut at 200
characters, unmarked, so re-grading the stored answer gave another score than the recorded one
(0.005 where monte had recorded 0.001953, through NeMo Gym's server). Shown here with the built-in
catalog's grader on a real frozen exam (the same ``ExamGrader.grade`` records NeMo Gym's replies;
its servers are not installed on this machine).
"""

from __future__ import annotations

import json
from pathlib import Path

from monte.envs import grading
from monte.envs.registry import get


def test_a_long_answer_is_recorded_whole_and_regrades_to_its_score(repo: Path, monte) -> None:
    assert monte("env", "add", "--server", "parity", "--dev", "parity", "--test", "parity").code == 0
    items = [json.loads(line) for line in (repo / ".monte" / "environments" / "parity" / "exams" / "parity" / "dev.jsonl").open()][:20]
    # answers whose grade depends on text past character 200: right words after a long preamble
    answers = [("let me think step by step about the parity of these bits. " * 5) + item["answer"]
               for item in items]
    assert all(len(a) > 250 for a in answers)
    tasks = grading.grade_tasks(None, "parity", "parity", items, answers, [str(k) for k in range(len(items))])
    bench = get("parity").benchmark
    for item, answer, task in zip(items, answers, tasks, strict=True):
        assert task["answer"] == answer  # whole, not its first 200 characters
        assert float(bench.grade(item, task["answer"])) == task["score"]  # re-graded: the recorded score


def test_a_freeze_prints_the_counts_it_froze_and_they_match_the_dry_run(repo: Path, monte) -> None:
    """Issue 30.8: the freeze printed no counts (a dry run's sizes were all a user saw)."""
    args = ("env", "add", "--server", "parity", "--dev", "parity", "--test", "parity")
    planned = monte(*args, "--dry-run", "--json").json()["plan"]["sizes"]
    r = monte(*args)
    assert r.code == 0, r.err
    frozen = repo / ".monte" / "environments" / "parity"
    counted = {"parity/dev": sum(1 for _ in (frozen / "exams" / "parity" / "dev.jsonl").open()),
               "parity/test": sum(1 for _ in (frozen / "exams" / "parity" / "test.jsonl").open()),
               "curriculum": sum(1 for _ in (frozen / "curriculum.jsonl").open())}
    assert planned == counted
    assert f"exam parity: dev ({counted['parity/dev']} tasks), test ({counted['parity/test']} tasks)" in r.out
    assert f"curriculum: {counted['curriculum']} rows" in r.out
