"""monte's built-in catalog of environment benchmarks.

Each benchmark generates items deterministically from ``(seed, n)`` and grades a model's raw answer
text. ``parity`` is monte's own generator; the others wrap reasoning-gym tasks. reasoning-gym is
imported only when one of those generates or grades (its import alone costs over a second).

Two properties every benchmark here keeps, and the tests check:

- item ``i`` of ``generate(seed, n)`` does not depend on ``n`` (a longer call extends a shorter one);
- reasoning-gym builds item ``i`` from ``Random(seed + i)``, so seed ``S`` item ``i + 1`` equals seed
  ``S + 1`` item ``i``: splits must be made disjoint by content (docs/design.md), not by seed alone.
"""

from __future__ import annotations

import json
import math
import random
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from monte.envs.base import Benchmark, Item

#: Default split sizes of a trainable benchmark and of an eval-only exam.
TRAIN_SIZES: dict[str, int] = {"dev": 200, "test": 200, "curriculum": 5000}
EXAM_SIZES: dict[str, int] = {"dev": 200, "test": 200}

#: Extracted answers longer than this score 0 without being scored (no reference is near it).
MAX_ANSWER_CHARS = 10_000

# The pattern of reasoning_gym.utils.extract_answer, copied so that grading parity (and reading a
# tag at all) needs no reasoning-gym import; a test checks the two agree.
_TAG_RE = re.compile(r"<answer>\s?(.*?)\s?</answer>", flags=re.DOTALL)
_CLOSE_TAG = "</answer>"


def extract_answer_text(raw: object, *, first_token: bool = False) -> str:
    """The part of a model's raw output that is graded.

    The content of the last ``<answer>...</answer>`` tag when there is one, else the whole text;
    then stripped, its first line, and with ``first_token`` only the first whitespace-separated
    token of that line (a tiny model answers bare, e.g. ``odd``, and may ramble after it).
    Anything that is not a string gives ``""``.
    """
    if not isinstance(raw, str):
        return ""
    text = raw
    # Search only up to the last closing tag: openings after it can never match, and letting the
    # lazy pattern scan from each of them to the end would be quadratic on adversarial text.
    end = text.rfind(_CLOSE_TAG)
    if end >= 0:
        matches = _TAG_RE.findall(text, 0, end + len(_CLOSE_TAG))
        if matches:
            text = matches[-1]
    line = text.strip().partition("\n")[0].strip()
    if first_token:
        tokens = line.split(maxsplit=1)
        line = tokens[0] if tokens else ""
    return line


def _item_id(name: str, seed: int, i: int) -> str:
    return f"{name}-{seed}-{i}"


def _check_n(n: int) -> None:
    if n < 0:
        raise ValueError(f"n must be >= 0, got {n}")


@dataclass
class ParityBenchmark:
    """Parity of a uniformly random 5-digit number: ``p 48213 =`` → ``odd``.

    The answer hangs on one fixed-position character, which a ~1M-parameter model learns and
    generalises to held-out numbers in minutes on a CPU; it is the quickstart's task.
    """

    name: str = "parity"
    description: str = "Parity of a random 5-digit number: 'p 48213 =' -> 'odd' (90,000 items)."
    trainable: bool = True
    sizes: dict[str, int] = field(default_factory=lambda: dict(TRAIN_SIZES))
    version: str = "1"
    low: int = 10_000
    high: int = 99_999

    def generate(self, seed: int, n: int) -> list[Item]:
        """``n`` distinct numbers drawn from ``Random(seed)``, in draw order."""
        _check_n(n)
        space = self.high - self.low + 1
        if n > space:
            raise ValueError(f"{self.name} has only {space} distinct items; asked for {n}")
        # Draw and skip repeats (rather than random.sample) so that item i is independent of n.
        rng = random.Random(seed)
        seen: set[int] = set()
        numbers: list[int] = []
        while len(numbers) < n:
            x = rng.randint(self.low, self.high)
            if x not in seen:
                seen.add(x)
                numbers.append(x)
        return [
            {
                "id": _item_id(self.name, seed, i),
                "prompt": f"p {x} =",
                "answer": "odd" if x % 2 else "even",
                "metadata": {"number": x},
            }
            for i, x in enumerate(numbers)
        ]

    def grade(self, item: Item, answer: str) -> float:
        """1.0 when the first token of the answer is the reference (case-insensitive), else 0.0."""
        reference = str(item["answer"]).strip().lower()
        got = extract_answer_text(answer, first_token=True)
        if not got or len(got) > MAX_ANSWER_CHARS:
            return 0.0
        return 1.0 if got.lower() == reference else 0.0


#: Builds an item's prompt from a reasoning-gym entry (``question``, ``answer``, ``metadata``).
PromptBuilder = Callable[[dict[str, Any]], str]


def expression_prompt(entry: dict[str, Any]) -> str:
    """The short arithmetic form, e.g. ``12 + 7 - 3 =``, from ``metadata["expression"]``."""
    return f"{entry['metadata']['expression']} ="


def reverse_prompt(entry: dict[str, Any]) -> str:
    """The short spell-backward form, e.g. ``reverse ammonia =``, from ``metadata["word"]``."""
    return f"reverse {entry['metadata']['word']} ="


@dataclass
class ReasoningGymBenchmark:
    """A reasoning-gym task with a fixed configuration, graded by the task's own ``score_answer``.

    An item keeps the original ``question`` and reasoning-gym ``metadata`` under its own
    ``metadata`` (as ``question`` and ``source_metadata``), which is all ``score_answer`` needs.
    """

    name: str
    description: str
    trainable: bool
    task: str
    #: Keyword arguments of the task's reasoning-gym config (besides ``seed`` and ``size``).
    config: dict[str, Any] = field(default_factory=dict)
    #: ``None``: the prompt is reasoning-gym's question verbatim.
    prompt: PromptBuilder | None = None
    #: Grade only the first token of the answer's first line (bare one-token answers).
    first_token: bool = False
    sizes: dict[str, int] = field(default_factory=lambda: dict(TRAIN_SIZES))
    version: str = "1"
    _scorer: Any = field(default=None, init=False, repr=False, compare=False)

    def _dataset(self, seed: int, size: int) -> Any:
        import reasoning_gym  # lazy: over a second of import time

        return reasoning_gym.create_dataset(self.task, size=size, seed=seed, **self.config)

    def scorer(self) -> Any:
        """The reasoning-gym dataset whose ``score_answer`` grades, created once per instance.

        ``score_answer`` reads only its arguments (never the dataset's seed or size), so one
        dataset of this configuration grades items of every seed.
        """
        if self._scorer is None:
            self._scorer = self._dataset(seed=0, size=1)
        return self._scorer

    def generate(self, seed: int, n: int) -> list[Item]:
        """Items ``0 .. n-1`` of the reasoning-gym dataset with this ``seed``."""
        _check_n(n)
        if n == 0:
            return []  # reasoning-gym configs refuse size 0
        dataset = self._dataset(seed=seed, size=n)
        items: list[Item] = []
        for i in range(n):
            entry = dataset[i]
            question = str(entry["question"])
            # Round-trip through JSON so the in-memory item equals what is frozen to disk
            # (reasoning-gym puts tuples in "difficulty"); unserialisable metadata fails here.
            source_metadata = json.loads(json.dumps(entry["metadata"]))
            items.append(
                {
                    "id": _item_id(self.name, seed, i),
                    "prompt": self.prompt(entry) if self.prompt is not None else question,
                    "answer": str(entry["answer"]),
                    "metadata": {"question": question, "source_metadata": source_metadata},
                }
            )
        return items

    def grade(self, item: Item, answer: str) -> float:
        """The task's ``score_answer`` on the extracted answer, clamped to [0, 1]; garbage is 0.0.

        A malformed *item* (one this benchmark did not generate) raises ``KeyError``.
        """
        metadata = item["metadata"]
        entry = {
            "question": metadata["question"],
            "answer": item["answer"],
            "metadata": metadata["source_metadata"],
        }
        scorer = self.scorer()
        got = extract_answer_text(answer, first_token=self.first_token)
        if not got or len(got) > MAX_ANSWER_CHARS:
            return 0.0
        try:
            score = float(scorer.score_answer(got, entry))
        except Exception:  # a task's scorer choking on odd text is a wrong answer, not a crash
            return 0.0
        if math.isnan(score):
            return 0.0
        return min(1.0, max(0.0, score))


def builtin_benchmarks() -> dict[str, Benchmark]:
    """monte's built-in benchmarks, keyed by name (fresh instances on every call)."""
    benchmarks: list[Benchmark] = [
        ParityBenchmark(),
        ReasoningGymBenchmark(
            name="chain_sum",
            description=(
                "reasoning-gym chain_sum: 2-3 terms of 1-2 digits, + and -, short form "
                "'12 + 7 - 3 =' -> '16'."
            ),
            trainable=True,
            task="chain_sum",
            config={"min_terms": 2, "max_terms": 3, "min_digits": 1, "max_digits": 2},
            prompt=expression_prompt,
            first_token=True,
        ),
        ReasoningGymBenchmark(
            name="basic_arithmetic",
            description=(
                "reasoning-gym basic_arithmetic: 2-3 terms of 1-2 digits, + - * / (exact "
                "division), parentheses and negatives, short form '( 56 + -33 ) - 84 =' -> '-61'."
            ),
            trainable=True,
            task="basic_arithmetic",
            config={"min_terms": 2, "max_terms": 3, "min_digits": 1, "max_digits": 2},
            prompt=expression_prompt,
            first_token=True,
        ),
        ReasoningGymBenchmark(
            name="spell_backward",
            description=(
                "reasoning-gym spell_backward: a 3-10 letter word, short form 'reverse ammonia =' "
                "-> 'ainomma'."
            ),
            trainable=True,
            task="spell_backward",
            prompt=reverse_prompt,
            first_token=True,
        ),
        ReasoningGymBenchmark(
            name="word_sorting",
            description=(
                "reasoning-gym word_sorting: sort 3-10 words ascending or descending by "
                "code point, answer comma-separated; question verbatim. Eval only."
            ),
            trainable=False,
            task="word_sorting",
            sizes=dict(EXAM_SIZES),
        ),
        ReasoningGymBenchmark(
            name="letter_counting",
            description=(
                "reasoning-gym letter_counting: how often a letter occurs in a 5-15 word span; "
                "question verbatim. Eval only."
            ),
            trainable=False,
            task="letter_counting",
            sizes=dict(EXAM_SIZES),
        ),
    ]
    return {b.name: b for b in benchmarks}


#: each built-in benchmark's grading rule, in words (docs/environments.md states the same). The
#: graded text is :func:`extract_answer_text`'s: the last ``<answer>`` tag's content, else the
#: whole output; its first line; for a short-form task its first token.
_INSIDE = ("when the reference appears inside a longer graded text, len(reference) / len(text) "
           "(partial credit)")
RULES = {
    "parity": "1 when the first token of the output is the reference (odd or even, any case), else 0; "
              "no partial credit",
    "chain_sum": "reasoning-gym's score_answer on the first token: 1 when it equals the reference as a decimal "
                 f"number (sign, leading zeros, trailing decimals and commas tolerated); {_INSIDE}; else 0",
    "basic_arithmetic": "reasoning-gym's default score_answer on the first token: 1 for exactly the reference; "
                        f"{_INSIDE}; else 0",
    "spell_backward": "reasoning-gym's score_answer on the first token, case-insensitive: 1 for the reversed "
                      "word; else the share of its letters matched position by position (partial credit)",
    "word_sorting": "reasoning-gym's score_answer on the first line, split on commas: 1 for the sorted list; "
                    "else the share of words in their right position, at least 0.2 when the words are right "
                    "but out of order (partial credit)",
    "letter_counting": "reasoning-gym's default score_answer on the first line: 1 for exactly the count; "
                       f"{_INSIDE}; else 0",
}
