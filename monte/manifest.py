"""Freeze manifests: what a frozen Environment or Dataset holds, by hash.

A manifest lists every file of the frozen folder with its sha256 and size. It is written to the
folder on the data root (``manifest.json``) and committed to the vault ref
(``environments/<name>/manifest.json`` or ``datasets/<name>/manifest.json``).
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from monte.errors import MonteError, error
from monte.hashing import sha256_bytes, sha256_files
from monte.names import is_relpath

MANIFEST = "manifest.json"


def now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def check_relpath(path: str) -> str:
    """A path inside a frozen folder: relative, POSIX, no ``..``, nothing odd."""
    if not is_relpath(path):
        raise error(
            "E_UNSAFE_PATH",
            f"the manifest lists {path!r}, which escapes its folder",
            "a manifest may list only relative paths inside its folder; re-freeze it",
        )
    return path


class FileEntry(BaseModel):
    model_config = ConfigDict(extra="forbid", defer_build=True)
    sha256: str
    size: int


class Floor(BaseModel):
    """An exam split's constant-answer floor (``monte.envs.floor``): the best mean score of one
    constant output, graded by the exam's grader, over the split's ``n`` items."""

    model_config = ConfigDict(extra="forbid", defer_build=True)
    score: float
    answer: str  # the constant output that scores it
    n: int
    candidates: int  # how many constant outputs were graded


class Manifest(BaseModel):
    model_config = ConfigDict(extra="forbid", defer_build=True)
    schema_version: int = 1
    kind: Literal["environment", "dataset"]
    name: str
    frozen_at: str = Field(default_factory=now)
    files: dict[str, FileEntry]
    provenance: dict[str, Any] = Field(default_factory=dict)
    # environments
    env_kind: Literal["eval-only", "trainable"] | None = None
    form: Literal["benchmark", "server", "exams"] | None = None
    exams: dict[str, dict[str, str]] = Field(default_factory=dict)  # exam -> split -> file
    curriculum: str | None = None
    grader: dict[str, Any] | None = None
    #: exam -> split -> its constant-answer floor (derived from the files and the grader at
    #: freeze time, so not part of the fingerprint; absent in manifests frozen before floors were recorded)
    floors: dict[str, dict[str, Floor]] = Field(default_factory=dict)
    # datasets
    dataset_kind: Literal["sft", "preference"] | None = None
    columns: dict[str, str] | None = None
    rows: int | None = None

    @field_validator("files")
    @classmethod
    def _safe_paths(cls, files: dict[str, FileEntry]) -> dict[str, FileEntry]:
        for path in files:
            check_relpath(path)
            if path == MANIFEST:  # monte writes it after the freeze: listed, it could never prove
                raise error("E_BAD_INPUT", f"the manifest lists {MANIFEST} among its own files",
                            "re-freeze it, or restore the file from the vault ref")
        return files

    @model_validator(mode="after")
    def _used_files_are_listed(self) -> Manifest:
        """The exams' splits and the curriculum are read from the folder: each must be one of the
        files the manifest proves (else a manifest could point them at ``/etc/passwd``)."""
        used = [f for splits in self.exams.values() for f in splits.values()]
        used += [self.curriculum] if self.curriculum is not None else []
        for path in used:
            check_relpath(path)
            if path not in self.files:
                raise error("E_BAD_INPUT", f"the manifest of {self.kind} {self.name!r} reads {path!r}, which "
                            "its files do not list", "re-freeze it, or restore the file from the vault ref")
        for exam, splits in self.exams.items():
            if not splits or set(splits) - {"dev", "test"}:
                raise error("E_BAD_INPUT", f"the manifest of {self.kind} {self.name!r} gives exam {exam!r} the "
                            f"splits {sorted(splits)}; an exam has dev and optionally test",
                            "re-freeze it, or restore the file from the vault ref")
        return self

    @property
    def fingerprint(self) -> str:
        """Identity of what was frozen: the files' hashes and how they are used and graded."""
        core = {
            "kind": self.kind,
            "files": {k: v.sha256 for k, v in sorted(self.files.items())},
            "exams": self.exams,
            "curriculum": self.curriculum,
            "grader": self.grader,
            "columns": self.columns,
        }
        return sha256_bytes(json.dumps(core, sort_keys=True).encode())

    def dumps(self) -> bytes:
        data = self.model_dump(mode="json")
        if not data["floors"]:  # a manifest without floors reads byte for byte as before them
            del data["floors"]
        return (json.dumps(data, indent=2, sort_keys=True) + "\n").encode()


#: the sealed split's name (``monte.ledger.predicates.SEALED``, a layer above this one) and the
#: grader kind whose record names a task's documents (``monte.envs.lmeval.KIND``)
SEALED = "test"
LMEVAL = "lm-eval"


#: the provenance's test seed of a catalog split the grader drew with its own secret seed
GRADER_SEED = "grader"


def drawn_by_grader(manifest: Manifest) -> bool:
    """Whether the environment's test splits were drawn on the grader with its own secret seed
    (``monte env add`` with a grader pinned, :mod:`monte.envs.freeze`): no copy was ever made
    outside the grader's home, so their absence from any folder is the point."""
    prov = manifest.provenance
    return prov.get("source") == "catalog" and (prov.get("seeds") or {}).get("test") == GRADER_SEED


def sealed_files(manifest: Manifest) -> dict[str, list[str]]:
    """exam -> the environment's files that hold its sealed test documents: the exam's test split
    and, for an lm-eval exam, the frozen task's test documents with their gold (its grader
    record's ``tasks.<exam>.data.test``, :mod:`monte.envs.lmeval.freeze`). What a grader takes
    into custody, and what then leaves the data root (:mod:`monte.grader`)."""
    out: dict[str, list[str]] = {}
    grader = manifest.grader or {}
    for exam, splits in sorted(manifest.exams.items()):
        if SEALED in splits:
            spec = (grader.get("tasks") or {}).get(exam) if grader.get("kind") == LMEVAL else None
            docs = (spec.get("data") or {}).get(SEALED) if isinstance(spec, dict) else None
            out[exam] = [splits[SEALED], *([str(docs)] if docs else [])]
    return out


def parse_manifest(raw: bytes, where: str) -> Manifest:
    from pydantic import ValidationError

    try:
        return Manifest.model_validate_json(raw)
    except MonteError as e:  # raised inside a validator (check_relpath): say which manifest
        raise error(e.code, f"{where}: {e.message}", e.fix) from None
    except ValidationError as e:
        for err in e.errors():
            if "escapes its folder" in str(err.get("msg", "")):
                raise error(
                    "E_UNSAFE_PATH", f"{where}: {err['msg'].removeprefix('Value error, ')}",
                    "a manifest may list only relative paths inside its folder; re-freeze it",
                ) from None
        raise error("E_BAD_INPUT", f"{where} is not a valid manifest: {e.errors()[0]['msg']}",
                    "re-freeze it, or restore the file from the vault ref") from None


def read_manifest(folder: Path) -> Manifest | None:
    path = folder / MANIFEST
    if not path.is_file():
        return None
    return parse_manifest(path.read_bytes(), str(path))


def restore_command(manifest: Manifest) -> str:
    """The command that brings a frozen folder back from the Vault: an environment is installed
    (its grader too); a dataset's rows are fetched by showing it."""
    if manifest.kind == "environment":
        return f"monte env install {manifest.name}"
    return f"monte dataset show {manifest.name}"


def verify_folder(folder: Path, manifest: Manifest) -> None:
    """Prove every file of ``manifest`` against the bytes in ``folder``; refuse naming the file."""
    root = folder.resolve()
    paths: list[Path] = []
    for rel in manifest.files:
        p = folder / check_relpath(rel)
        if p.is_symlink() or not p.resolve().is_relative_to(root):
            raise error("E_UNSAFE_PATH", f"{p} points outside {folder}",
                        "a frozen folder may hold only regular files; re-install it")
        if not p.is_file():
            raise error("E_INTEGRITY", f"{manifest.kind} {manifest.name!r}: {rel} is missing from {folder}",
                        f"run `monte env install {manifest.name}` to restore the frozen copy (it keeps the "
                        "folder as it is aside)" if manifest.kind == "environment" else
                        f"move {folder} aside, then restore it with `{restore_command(manifest)}`")
        paths.append(p)
    digests = sha256_files(paths)
    for rel, p in zip(manifest.files, paths, strict=True):
        if digests[str(p)] != manifest.files[rel].sha256:
            raise error(
                "E_INTEGRITY",
                f"{manifest.kind} {manifest.name!r}: {rel} does not match its frozen sha256 "
                f"(expected {manifest.files[rel].sha256[:12]}…, found {digests[str(p)][:12]}…)",
                f"the file was changed after the freeze; run `monte env install {manifest.name}` to restore the "
                "frozen copy (it keeps the edited folder aside)" if manifest.kind == "environment" else
                f"the file was changed after the freeze; move {folder} aside and run "
                f"`{restore_command(manifest)}` to restore the frozen copy",
            )
