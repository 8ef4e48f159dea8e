"""The precomputed cutoffs (`monte.stats._cutoffs`) are the calibration's own output: every n up
to 256 and a seeded sample above recomputed on every run, and the generator writes the file's
text (tests/stats/test_mutations.py runs each mutant's own calibration, not the table)."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from monte.stats import _cutoffs, paired


def test_the_table_covers_one_to_1024() -> None:
    assert len(_cutoffs.CUTOFFS) == 1024
    assert all(isinstance(k, int) and isinstance(d, int) for k, d in _cutoffs.CUTOFFS)


def test_every_tabled_cutoff_up_to_256_is_the_computed_one() -> None:
    assert [_cutoffs.CUTOFFS[n - 1] for n in range(1, 257)] == [paired._computed_cutoff(n) for n in range(1, 257)]


@pytest.mark.parametrize("n", sorted({300, 500, 1000, 1024, *random.Random(19).sample(range(257, 1024), 6)}))
def test_a_tabled_cutoff_is_the_computed_one(n: int) -> None:
    assert _cutoffs.CUTOFFS[n - 1] == paired._computed_cutoff(n)
    assert paired._cutoff(n) == paired._computed_cutoff(n)


def test_beyond_the_table_it_is_computed() -> None:
    paired._cutoff.cache_clear()
    assert paired._cutoff(1025) == paired._computed_cutoff(1025)


def test_the_generator_writes_the_file() -> None:
    text = Path(_cutoffs.__file__).read_text()
    made = paired.cutoff_table_source(40)
    head, _, items = made.partition("CUTOFFS:")
    assert text.startswith(head + "CUTOFFS:")
    flat = "".join(text.partition("CUTOFFS:")[2].split())
    assert flat.startswith("".join(items.split())[:-2])  # the first 40 entries, then the rest
