"""Tests of monte.envs.catalog, against the real reasoning-gym."""

from __future__ import annotations

import hashlib
import json
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from monte.envs.base import Benchmark
from monte.envs.catalog import (
    MAX_ANSWER_CHARS,
    ParityBenchmark,
    ReasoningGymBenchmark,
    builtin_benchmarks,
    extract_answer_text,
)

REPO = Path(__file__).resolve().parents[2]
NAMES = sorted(builtin_benchmarks())
# Benchmarks whose grader gives no partial credit to a plausible wrong answer.
ALL_OR_NOTHING = {"parity", "chain_sum", "basic_arithmetic", "letter_counting"}
REQUIRED = {"parity", "chain_sum", "basic_arithmetic", "word_sorting", "spell_backward"}


@pytest.fixture(scope="module")
def catalog() -> dict[str, Benchmark]:
    return builtin_benchmarks()


@pytest.fixture(scope="module")
def samples(catalog: dict[str, Benchmark]) -> dict[str, list[dict]]:
    return {name: bench.generate(seed=1234, n=150) for name, bench in catalog.items()}


def _digest(items: list[dict]) -> str:
    return hashlib.sha256(json.dumps(items, sort_keys=True).encode()).hexdigest()


def _wrong(name: str, answer: str) -> str:
    """A plausible but wrong answer to an item whose reference is ``answer``."""
    if name == "parity":
        return "even" if answer == "odd" else "odd"
    if name in ("chain_sum", "basic_arithmetic", "letter_counting"):
        return str(int(answer) + 1)  # str(x) is never a substring of str(x + 1)
    if name == "spell_backward":
        return answer[::-1]  # the word itself, forwards
    if name == "word_sorting":
        return ", ".join(reversed(answer.split(", ")))
    raise AssertionError(f"no wrong answer for {name}")


# --- the catalog ------------------------------------------------------------------------------


def test_catalog_has_the_required_benchmarks(catalog: dict[str, Benchmark]) -> None:
    assert REQUIRED <= set(catalog)
    assert not catalog["word_sorting"].trainable
    assert all(catalog[n].trainable for n in REQUIRED - {"word_sorting"})


@pytest.mark.parametrize("name", NAMES)
def test_benchmark_satisfies_the_protocol(catalog: dict[str, Benchmark], name: str) -> None:
    bench = catalog[name]
    assert isinstance(bench, Benchmark)
    assert bench.name == name
    assert bench.description and bench.version
    assert bench.sizes["dev"] > 0 and bench.sizes["test"] > 0
    assert ("curriculum" in bench.sizes) == bench.trainable


def test_parity_sizes(catalog: dict[str, Benchmark]) -> None:
    assert catalog["parity"].sizes == {"dev": 200, "test": 200, "curriculum": 5000}


def test_each_call_gives_fresh_instances() -> None:
    first, second = builtin_benchmarks(), builtin_benchmarks()
    assert all(first[n] is not second[n] for n in first)


# --- generation -------------------------------------------------------------------------------


@pytest.mark.parametrize("name", NAMES)
def test_items_have_the_item_shape(samples: dict[str, list[dict]], name: str) -> None:
    items = samples[name]
    assert len(items) == 150
    for i, item in enumerate(items):
        assert set(item) == {"id", "prompt", "answer", "metadata"}
        assert item["id"] == f"{name}-1234-{i}"
        assert isinstance(item["prompt"], str) and item["prompt"].strip()
        assert isinstance(item["answer"], str) and item["answer"].strip()
        assert isinstance(item["metadata"], dict)
        # What is frozen to disk reads back equal.
        assert json.loads(json.dumps(item)) == item
    assert len({item["id"] for item in items}) == len(items)


@pytest.mark.parametrize("name", NAMES)
def test_same_seed_same_items_other_seed_other_items(
    catalog: dict[str, Benchmark], samples: dict[str, list[dict]], name: str
) -> None:
    bench = catalog[name]
    again = bench.generate(seed=1234, n=150)
    assert json.dumps(again, sort_keys=True) == json.dumps(samples[name], sort_keys=True)
    # A fresh instance (no cached state) gives the same items too.
    fresh = builtin_benchmarks()[name].generate(seed=1234, n=150)
    assert _digest(fresh) == _digest(samples[name])
    other = bench.generate(seed=98765, n=150)
    assert [i["prompt"] for i in other] != [i["prompt"] for i in samples[name]]
    assert {i["id"] for i in other}.isdisjoint({i["id"] for i in samples[name]})


@pytest.mark.parametrize("name", NAMES)
def test_a_longer_call_extends_a_shorter_one(
    catalog: dict[str, Benchmark], samples: dict[str, list[dict]], name: str
) -> None:
    assert catalog[name].generate(seed=1234, n=40) == samples[name][:40]


@pytest.mark.parametrize("name", NAMES)
def test_zero_items_and_negative_n(catalog: dict[str, Benchmark], name: str) -> None:
    assert catalog[name].generate(seed=5, n=0) == []
    with pytest.raises(ValueError):
        catalog[name].generate(seed=5, n=-1)


def test_items_are_identical_in_another_process(samples: dict[str, list[dict]]) -> None:
    code = (
        "import hashlib, json\n"
        "from monte.envs.catalog import builtin_benchmarks\n"
        "out = {}\n"
        "for name, bench in builtin_benchmarks().items():\n"
        "    items = bench.generate(seed=1234, n=150)\n"
        "    blob = json.dumps(items, sort_keys=True).encode()\n"
        "    out[name] = hashlib.sha256(blob).hexdigest()\n"
        "print(json.dumps(out))\n"
    )
    # A different hash seed: nothing may hang on set or str-hash order.
    env = {"PYTHONHASHSEED": "4321", "PATH": ""}
    proc = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True, text=True, check=True
    )
    theirs = json.loads(proc.stdout)
    assert theirs == {name: _digest(items) for name, items in samples.items()}


@pytest.mark.parametrize("name", NAMES)
def test_ten_thousand_items_are_quick(catalog: dict[str, Benchmark], name: str) -> None:
    catalog[name].generate(seed=0, n=1)  # pay reasoning-gym's import outside the clock
    start = time.perf_counter()
    items = catalog[name].generate(seed=7, n=10_000)
    elapsed = time.perf_counter() - start
    assert len(items) == 10_000
    assert elapsed < 5.0, f"{name}: 10k items took {elapsed:.2f} s"  # ~0.6 s at worst here


# --- grading ----------------------------------------------------------------------------------


@pytest.mark.parametrize("name", NAMES)
def test_the_reference_answer_scores_one(
    catalog: dict[str, Benchmark], samples: dict[str, list[dict]], name: str
) -> None:
    bench = catalog[name]
    for item in samples[name]:
        ref = item["answer"]
        assert bench.grade(item, ref) == 1.0, item
        assert bench.grade(item, f"  {ref}\n") == 1.0
        assert bench.grade(item, f"<answer>{ref}</answer>") == 1.0
        assert bench.grade(item, f"Let me think.\n<answer> {ref} </answer>") == 1.0
        # Only the first line is graded: what a model rambles after it does not count.
        assert bench.grade(item, f"{ref}\nand then some more text") == 1.0


@pytest.mark.parametrize("name", NAMES)
def test_wrong_and_empty_answers(
    catalog: dict[str, Benchmark], samples: dict[str, list[dict]], name: str
) -> None:
    bench = catalog[name]
    for item in samples[name]:
        wrong = _wrong(name, item["answer"])
        if wrong == item["answer"]:
            continue  # a palindrome, or a one-word sort
        score = bench.grade(item, wrong)
        if name in ALL_OR_NOTHING:
            assert score == 0.0, (item, wrong)
        else:
            assert 0.0 <= score < 1.0, (item, wrong, score)
        assert bench.grade(item, "#") == 0.0
        assert bench.grade(item, "") == 0.0
        assert bench.grade(item, " \n\t\n") == 0.0
        assert bench.grade(item, "<answer></answer>") == 0.0


@pytest.mark.parametrize("name", NAMES)
def test_garbage_never_raises(
    catalog: dict[str, Benchmark], samples: dict[str, list[dict]], name: str
) -> None:
    bench = catalog[name]
    item = samples[name][0]
    garbage: list[object] = [
        None,
        123,
        b"odd",
        ["odd"],
        "\x00\x01\x02",
        "NaN",
        "inf",
        "-inf",
        "1e999999",
        "<answer>",
        "</answer>",
        "x" * 1_000_000,
        "9" * (MAX_ANSWER_CHARS + 1),
        "<answer>" * 200_000,  # would be quadratic for a naive tag search
        "<answer>" * 100_000 + "</answer>" + "<answer>" * 100_000,
    ]
    start = time.perf_counter()
    for raw in garbage:
        score = bench.grade(item, raw)  # type: ignore[arg-type]
        shown = raw[:40] if isinstance(raw, str) else raw
        if name in ALL_OR_NOTHING or not isinstance(raw, str):
            assert score == 0.0, (shown, score)
        else:  # spell_backward credits each letter in place, word_sorting each word
            assert 0.0 <= score < 1.0, (shown, score)
    assert time.perf_counter() - start < 5.0


@settings(max_examples=200, deadline=None)
@given(text=st.text(max_size=200))
def test_any_text_scores_in_the_unit_interval(
    catalog: dict[str, Benchmark], samples: dict[str, list[dict]], text: str
) -> None:
    for name, bench in catalog.items():
        score = bench.grade(samples[name][0], text)
        assert isinstance(score, float) and 0.0 <= score <= 1.0


def test_grading_a_malformed_item_raises(catalog: dict[str, Benchmark]) -> None:
    # A bad item is a bug upstream, not a wrong answer: it must not hide as a score of 0.
    with pytest.raises(KeyError):
        catalog["chain_sum"].grade({"id": "x", "prompt": "1 + 1 =", "answer": "2"}, "2")


# --- answer extraction ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "raw",
    [
        "<answer>odd</answer>",
        "<answer> odd </answer>",
        "<answer>\n12\n</answer>",
        "<answer>1</answer> and <answer>2</answer>",
        "think <answer>a, b, c</answer> done",
        "<answer>a<answer>b</answer>",
        "<answer>x</answer><answer>",
        "<answer></answer>",
        "<answer>  spaced  </answer>",
    ],
)
def test_tag_extraction_agrees_with_reasoning_gym(raw: str) -> None:
    from reasoning_gym.utils import extract_answer

    theirs = extract_answer(raw)
    assert theirs is not None
    assert extract_answer_text(raw) == theirs.strip().partition("\n")[0].strip()


@pytest.mark.parametrize(
    ("raw", "first_token", "expected"),
    [
        ("odd", True, "odd"),
        ("\n\n odd even\nmore", True, "odd"),
        ("\n\n odd even\nmore", False, "odd even"),
        ("a, b, c\r\nd", False, "a, b, c"),
        ("   ", True, ""),
        ("", False, ""),
        (None, True, ""),
        (7, False, ""),
        ("no tag </answer> here", True, "no"),
    ],
)
def test_extract_answer_text(raw: object, first_token: bool, expected: str) -> None:
    assert extract_answer_text(raw, first_token=first_token) == expected


# --- parity -----------------------------------------------------------------------------------


def test_parity_prompt_and_answer_form(samples: dict[str, list[dict]]) -> None:
    items = samples["parity"]
    for item in items:
        match = re.fullmatch(r"p (\d{5}) =", item["prompt"])
        assert match, item["prompt"]
        number = int(match.group(1))
        assert 10_000 <= number <= 99_999
        assert item["metadata"] == {"number": number}
        assert item["answer"] == ("odd" if number % 2 else "even")
    answers = [item["answer"] for item in items]
    assert 40 < answers.count("odd") < 110  # both classes, roughly balanced


def test_parity_items_are_distinct_and_the_space_is_bounded() -> None:
    bench = ParityBenchmark()
    items = bench.generate(seed=3, n=20_000)
    assert len({item["prompt"] for item in items}) == 20_000
    with pytest.raises(ValueError, match="90000"):
        bench.generate(seed=3, n=90_001)


def test_parity_grading_is_lenient_about_case_and_strict_about_content() -> None:
    bench = ParityBenchmark()
    item = bench.generate(seed=0, n=1)[0]
    ref = item["answer"]
    other = "even" if ref == "odd" else "odd"
    assert bench.grade(item, ref.upper()) == 1.0
    assert bench.grade(item, f"{ref} {other}") == 1.0  # only the first token counts
    assert bench.grade(item, f"{other} {ref}") == 0.0
    assert bench.grade(item, f"{ref}.") == 0.0
    assert bench.grade(item, f"p {item['metadata']['number']} = {ref}") == 0.0


# --- the reasoning-gym benchmarks ---------------------------------------------------------------


@pytest.mark.parametrize("name", ["chain_sum", "basic_arithmetic"])
def test_arithmetic_uses_the_short_form(samples: dict[str, list[dict]], name: str) -> None:
    for item in samples[name]:
        source = item["metadata"]["source_metadata"]
        assert item["prompt"] == f"{source['expression']} ="
        assert source["expression"] in item["metadata"]["question"]
        assert len(item["prompt"]) < 40
        assert re.fullmatch(r"-?\d+", item["answer"])


def test_chain_sum_config_gives_a_large_item_space(catalog: dict[str, Benchmark]) -> None:
    items = catalog["chain_sum"].generate(seed=0, n=2000)
    for item in items:
        source = item["metadata"]["source_metadata"]
        assert 2 <= source["num_terms"] <= 3 and 1 <= source["num_digits"] <= 2
        assert re.fullmatch(r"\d{1,2}( [+-] \d{1,2}){1,2} =", item["prompt"])
    # 1-digit items repeat (a space of 4,200), 2-digit ones hardly ever (~2.9 M).
    assert len({item["prompt"] for item in items}) > 1500


def test_spell_backward_short_form(samples: dict[str, list[dict]]) -> None:
    for item in samples["spell_backward"]:
        word = item["metadata"]["source_metadata"]["word"]
        assert item["prompt"] == f"reverse {word} ="
        assert item["answer"] == word[::-1]


@pytest.mark.parametrize("name", ["word_sorting", "letter_counting"])
def test_exams_ask_the_question_verbatim(samples: dict[str, list[dict]], name: str) -> None:
    for item in samples[name]:
        assert item["prompt"] == item["metadata"]["question"]


@pytest.mark.parametrize("name", sorted(REQUIRED - {"parity"}) + ["letter_counting"])
def test_items_keep_what_score_answer_needs(samples: dict[str, list[dict]], name: str) -> None:
    import reasoning_gym

    bench = builtin_benchmarks()[name]
    assert isinstance(bench, ReasoningGymBenchmark)
    dataset = reasoning_gym.create_dataset(bench.task, size=150, seed=1234, **bench.config)
    for i, item in enumerate(samples[name]):
        original = dataset[i]
        assert item["metadata"]["question"] == original["question"]
        assert item["answer"] == original["answer"]
        assert item["metadata"]["source_metadata"] == json.loads(json.dumps(original["metadata"]))
        assert item["metadata"]["source_metadata"]["source_dataset"] == bench.task


def test_the_scorer_is_created_once(catalog: dict[str, Benchmark]) -> None:
    bench = catalog["spell_backward"]
    assert isinstance(bench, ReasoningGymBenchmark)
    assert bench.scorer() is bench.scorer()


# --- start-up cost ----------------------------------------------------------------------------


def test_importing_the_catalog_imports_nothing_heavy() -> None:
    code = (
        "import json, sys\n"
        "import monte.envs.catalog as c\n"
        "c.builtin_benchmarks()\n"
        "heavy = ('reasoning_gym', 'torch', 'transformers')\n"
        "print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in heavy)))\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True
    )
    assert json.loads(proc.stdout) == []


def test_parity_never_imports_reasoning_gym() -> None:
    code = (
        "import sys\n"
        "from monte.envs.catalog import builtin_benchmarks\n"
        "b = builtin_benchmarks()['parity']\n"
        "items = b.generate(seed=1, n=100)\n"
        "assert all(b.grade(i, i['answer']) == 1.0 for i in items)\n"
        "assert b.grade(items[0], '<answer>' + items[0]['answer'] + '</answer>') == 1.0\n"
        "print('reasoning_gym' in sys.modules)\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True
    )
    assert proc.stdout.strip() == "False"
