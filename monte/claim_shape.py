"""The shape of a claim's in-toto Statement, as ``monte claim export`` writes it: each field verify
reads, with its type. A Statement signed by a trusted key may still be malformed (a missing
``baseline``, ``test_reads.seal = "x"``, ``predicate = []``); :func:`monte.claim.verify` checks it
against these models first and refuses by name, before any field is used. What each field *says*
is then derived again from the bundle (:func:`monte.claim.derive`)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictFloat, StrictInt, StrictStr

_HEX40 = r"^[0-9a-f]{40}$"
_HEX64 = r"^[0-9a-f]{64}$"


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)


class Digest(_Model):
    sha256: str = Field(pattern=_HEX64)


class Subject(_Model):
    name: StrictStr = Field(min_length=1)
    digest: Digest


class Exam(_Model):
    name: StrictStr | None
    test_split_sha256: StrictStr
    settings_key: StrictStr


class Measurement(_Model):
    sha256: str = Field(pattern=_HEX64)
    content: dict[str, Any]


class Base(_Model):
    model: StrictStr | None
    weights: StrictStr


class Checkpoint(_Model):
    ref: StrictStr
    lineage_commit: str = Field(pattern=_HEX40)


class Tasks(_Model):
    path: StrictStr
    sha256: str = Field(pattern=_HEX64)


class Read(_Model):
    run: StrictStr
    experiment: StrictStr
    score: StrictFloat | StrictInt | None
    n: StrictInt | None
    role: StrictStr | None
    recovered: StrictBool
    tasks: Tasks


class Delta(_Model):
    delta: StrictFloat | StrictInt
    lower: StrictFloat | StrictInt
    upper: StrictFloat | StrictInt
    n: StrictInt
    fixed: StrictInt
    broken: StrictInt
    method: StrictStr | None
    paired: StrictBool | None
    printed: StrictStr


class TestReads(_Model):
    seal: StrictInt
    runs: list[StrictStr]
    repository: StrictInt
    repository_cohorts: StrictInt


class Ledger(_Model):
    ref: StrictStr
    commit: str = Field(pattern=_HEX40)
    bundle: StrictStr
    bundle_sha256: str = Field(pattern=_HEX64)


class Predicate(_Model):
    monte_version: StrictStr
    experiment: StrictStr
    exam: Exam
    measurement: Measurement
    cohort: StrictStr
    base: Base
    checkpoint: Checkpoint
    baseline: Read
    claim: Read
    delta: Delta
    verdict: StrictStr
    test_reads: TestReads
    lineage: list[dict[str, Any]]
    ledger: Ledger


class Statement(_Model):
    model_config = ConfigDict(extra="forbid", strict=True, populate_by_name=True)

    type_: StrictStr = Field(alias="_type")
    subject: list[Subject] = Field(min_length=1)
    predicateType: StrictStr  # noqa: N815 - in-toto's name
    predicate: Predicate
