"""``monte env list`` (bare): the columns it prints of each environment on the data root, read
from each manifest as JSON. A manifest read here is one the pydantic model (:class:`monte.manifest.Manifest`)
would accept: every field it checks is checked alike, and one that is not plainly valid is
parsed by the model, which refuses it as it always did. No task count, no fingerprint: the
list prints neither (``monte env install`` shows the folders)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from monte.names import is_relpath
from monte.result_type import Result

#: what the bare list prints of each environment, in this order
COLUMNS = ("name", "kind", "exams", "benchmarks", "files")
#: :class:`monte.manifest.Manifest`'s fields, its file entries' and its floors' (a test compares them)
MANIFEST_FIELDS = frozenset({"schema_version", "kind", "name", "frozen_at", "files", "provenance", "env_kind",
                             "form", "exams", "curriculum", "grader", "floors", "dataset_kind", "columns", "rows"})
FILE_FIELDS = frozenset({"sha256", "size"})
FLOOR_FIELDS = frozenset({"score", "answer", "n", "candidates"})


@dataclass(frozen=True)
class EnvListed(Result):
    """One line of the bare ``monte env list`` (:data:`COLUMNS`): the environment's name, its kind
    (``env_kind``, empty for a dataset), exam -> its splits, the benchmarks graded, files frozen."""

    name: str
    kind: str
    exams: dict[str, list[str]]
    benchmarks: list[str]
    files: int


def _int(v: Any) -> bool:
    return type(v) is int


def _opt(v: Any, *kinds: type) -> bool:
    return v is None or type(v) in kinds


def _floor(f: Any) -> bool:
    return (type(f) is dict and f.keys() == FLOOR_FIELDS and type(f["score"]) in (int, float)
            and type(f["answer"]) is str and _int(f["n"]) and _int(f["candidates"]))


def _plainly_valid(m: Any) -> bool:
    """Whether ``m`` (a manifest's parsed JSON) passes every check the model makes: stricter
    where unsure (a value the model would coerce is not plainly valid: the model reads it)."""
    if type(m) is not dict or not m.keys() <= MANIFEST_FIELDS or not {"kind", "name", "files"} <= m.keys():
        return False
    files, exams, floors = m["files"], m.get("exams", {}), m.get("floors", {})
    if not (_int(m.get("schema_version", 1)) and m["kind"] in ("environment", "dataset")
            and type(m["name"]) is str and type(m.get("frozen_at", "")) is str
            and type(m.get("provenance", {})) is dict and m.get("env_kind") in (None, "eval-only", "trainable")
            and m.get("form") in (None, "benchmark", "server", "exams") and _opt(m.get("curriculum"), str)
            and _opt(m.get("grader"), dict) and m.get("dataset_kind") in (None, "sft", "preference") and _opt(m.get("rows"), int)
            and type(files) is dict and type(exams) is dict and type(floors) is dict):
        return False
    grader, provenance = m.get("grader") or {}, m.get("provenance", {})
    if not (type(grader.get("benchmarks", {})) is dict and all(type(v) is str for v in grader.get("benchmarks", {}).values())
            and _opt(provenance.get("benchmarks"), dict)):
        return False  # (the model's env_info reads both)
    columns = m.get("columns")
    if columns is not None and not (type(columns) is dict and all(type(v) is str for v in columns.values())):
        return False
    if not all(is_relpath(p) and p != "manifest.json" and type(e) is dict and e.keys() == FILE_FIELDS
               and type(e["sha256"]) is str and _int(e["size"]) for p, e in files.items()):
        return False
    used = [m["curriculum"]] if m.get("curriculum") is not None else []
    for splits in exams.values():
        if type(splits) is not dict or not splits or set(splits) - {"dev", "test"}:
            return False
        used += splits.values()
    if not all(type(p) is str and is_relpath(p) and p in files for p in used):
        return False
    return all(type(s) is dict and all(_floor(f) for f in s.values()) for s in floors.values())


def listed(folder: Path) -> EnvListed | None:
    """The columns of ``folder``'s environment (:data:`COLUMNS`), None without a manifest."""
    path = folder / "manifest.json"
    if not path.is_file():
        return None
    raw = path.read_bytes()
    try:
        m = json.loads(raw)
    except ValueError:
        m = None
    if not _plainly_valid(m):
        from monte.envs.manage import env_info
        from monte.manifest import parse_manifest

        info = env_info(parse_manifest(raw, str(path)), folder)
        return EnvListed(name=info.name, kind=info.kind, exams=info.exams, benchmarks=info.benchmarks,
                         files=info.files)
    benches = sorted(set(((m.get("grader") or {}).get("benchmarks") or {}).values())
                     | set((m.get("provenance", {}).get("benchmarks") or {}).keys()))
    return EnvListed(name=m["name"], kind=m.get("env_kind") or "",
                     exams={e: sorted(s) for e, s in m.get("exams", {}).items()}, benchmarks=benches,
                     files=len(m["files"]))


def local_envs(data_root: Path) -> list[EnvListed]:
    """Every environment on ``data_root``, by folder name."""
    root = data_root / "environments"
    return [row for folder in (sorted(root.iterdir()) if root.is_dir() else []) if (row := listed(folder)) is not None]
