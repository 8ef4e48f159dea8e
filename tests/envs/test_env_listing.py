"""Bare ``monte env list`` reads each manifest as JSON (issue 35: no pydantic on a read-only
path): what it prints of a manifest equals what the model's ``env_info`` gives in those columns,
and a manifest the model refuses is refused with the same code and message."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from monte.envs.listing import (
    COLUMNS,
    FILE_FIELDS,
    FLOOR_FIELDS,
    MANIFEST_FIELDS,
    EnvListed,
    listed,
)
from monte.envs.manage import env_info
from monte.errors import MonteError
from monte.manifest import FileEntry, Floor, Manifest, read_manifest

SHA = "0" * 64
GOOD: dict[str, Any] = {
    "kind": "environment", "name": "parity", "env_kind": "trainable", "form": "server",
    "curriculum": "curriculum.jsonl",
    "exams": {"parity": {"dev": "exams/parity/dev.jsonl", "test": "exams/parity/test.jsonl"},
              "b": {"dev": "exams/b/dev.jsonl"}},
    "files": {p: {"sha256": SHA, "size": 3} for p in ("curriculum.jsonl", "exams/parity/dev.jsonl",
                                                       "exams/parity/test.jsonl", "exams/b/dev.jsonl")},
    "floors": {"parity": {"dev": {"answer": "odd", "candidates": 2, "n": 200, "score": 0.505}}},
    "grader": {"benchmarks": {"parity": "parity", "b": "bb"}, "kind": "catalog"},
    "provenance": {"benchmarks": {"parity": {"provider": "monte"}, "zz": {}}},
    "frozen_at": "2026-12-03T17:01:48Z", "schema_version": 1,
}


def _set(path: str, value: Any) -> dict[str, Any]:
    m = copy.deepcopy(GOOD)
    *parents, last = path.split("/")
    here = m
    for p in parents:
        here = here[p]
    if value is KeyError:
        del here[last]
    else:
        here[last] = value
    return m


VARIANTS = {
    "good": GOOD,
    "eval-only, no curriculum, no floors": {**_set("curriculum", None), "env_kind": "eval-only", "floors": {}},
    "minimal": {"kind": "environment", "name": "x", "files": {}},
    "an extra field": {**GOOD, "extra": 1},
    "an unsafe path": _set("files", {**GOOD["files"], "../x": {"sha256": SHA, "size": 1}}),
    "the manifest listed": _set("files", {**GOOD["files"], "manifest.json": {"sha256": SHA, "size": 1}}),
    "a split unlisted": _set("exams/b/dev", "nowhere.jsonl"),
    "a train split": _set("exams/b", {"train": "exams/b/dev.jsonl"}),
    "no split": _set("exams/b", {}),
    "a curriculum unlisted": _set("curriculum", "other.jsonl"),
    "a file entry's extra field": _set("files/curriculum.jsonl", {"sha256": SHA, "size": 3, "x": 1}),
    "a size as text": _set("files/curriculum.jsonl", {"sha256": SHA, "size": "3"}),
    "a size as float": _set("files/curriculum.jsonl", {"sha256": SHA, "size": 3.0}),
    "a floor's extra field": _set("floors/parity/dev", {"answer": "o", "candidates": 2, "n": 2, "score": 0.5, "x": 0}),
    "a floor score as int": _set("floors/parity/dev", {"answer": "o", "candidates": 2, "n": 2, "score": 1}),
    "another kind": {**GOOD, "kind": "bogus"},
    "a name as number": {**GOOD, "name": 3},
    "no name": _set("name", KeyError),
    "an env kind unknown": {**GOOD, "env_kind": "x"},
    "a grader without benchmarks": _set("grader", {"kind": "catalog"}),
    "no grader": _set("grader", None),
    "a list of provenance benchmarks": _set("provenance/benchmarks", []),
    "columns": {**GOOD, "columns": {"a": "b"}},
    "a dataset": {"kind": "dataset", "name": "d", "files": {}, "dataset_kind": "sft", "rows": 3},
}


def _outcome(fn: Any) -> Any:
    try:
        return fn()
    except MonteError as e:
        return ("refused", e.code, e.message)
    except Exception as e:  # noqa: BLE001 - the model's own crash: the same crash here
        return ("crashed", type(e).__name__)


@pytest.mark.parametrize("name", list(VARIANTS))
def test_the_list_prints_what_the_model_gives(tmp_path: Path, name: str) -> None:
    folder = tmp_path / "environments" / "e"
    folder.mkdir(parents=True)
    (folder / "manifest.json").write_text(json.dumps(VARIANTS[name], indent=2))

    def model() -> EnvListed:
        m = read_manifest(folder)
        assert m is not None
        info = env_info(m, folder).to_dict()
        return EnvListed(**{k: info[k] for k in COLUMNS})

    assert _outcome(lambda: listed(folder)) == _outcome(model)


def test_broken_json_is_refused_as_the_model_refuses_it(tmp_path: Path) -> None:
    (tmp_path / "manifest.json").write_text('{"kind": ')
    assert _outcome(lambda: listed(tmp_path)) == _outcome(lambda: read_manifest(tmp_path))
    assert listed(tmp_path / "nothing") is None


def test_the_fields_checked_are_the_models() -> None:
    assert set(Manifest.model_fields) == MANIFEST_FIELDS
    assert set(FileEntry.model_fields) == FILE_FIELDS
    assert set(Floor.model_fields) == FLOOR_FIELDS


def test_the_listed_shape_is_the_columns_printed() -> None:
    assert tuple(EnvListed.__annotations__) == COLUMNS  # the typed result and the printed columns, one order
