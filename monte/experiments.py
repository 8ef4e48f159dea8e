"""Experiments: freezing the measurement (``experiment init``) and listing them.

The ledger that holds them is :mod:`monte.ledger.experiment`; the environment whose exams
measure them is proven here, against its folder and the vault ref, before anything is written.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from monte.errors import error
from monte.ledger.records import Measurement
from monte.models import locate
from monte.names import check_name
from monte.result_type import Result
from monte.workspace import Workspace, open_workspace


@dataclass(frozen=True)
class ExperimentMade(Result):
    """``monte experiment init``: the measurement frozen (a pydantic model: it is what the ledger
    holds) and, once the ledger holds it, its ref and commit (None in a dry run, whose document has
    neither key)."""

    dry_run: bool
    measurement: Measurement  # what the ledger holds: pydantic
    commit: str | None = None
    ref: str | None = None
    #: with a grader: the exams whose test split it took that the catalog's public seed draws again
    redrawable: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"dry_run": self.dry_run, "measurement": self.measurement.model_dump(mode="json")}
        if not self.dry_run:
            out |= {"commit": self.commit, "ref": self.ref}
        if self.redrawable:  # named where there is one, as `monte grader take --json` does
            out["redrawable"] = list(self.redrawable)
        return out


@dataclass(frozen=True)
class ExperimentListed(Result):
    """One line of ``monte experiment list``: its name, environment, exams, model and creation."""

    name: str
    environment: str
    exams: list[str]
    model: str | None
    created_at: str


#: temperatures in (0, MIN_TEMPERATURE) are refused: they sample the greedy answer
MIN_TEMPERATURE = 0.05


def check_sampling(samples: int, temperature: float | None, top_p: float | None,
                   pass_at: Sequence[int]) -> dict[str, object]:
    """The eval settings ``--samples``, ``--temperature``, ``--top-p`` freeze (K samples per item, docs/statistics.md), or a
    refusal (``E_USAGE``, exit 2) that names the fix; nothing is written before this passes.
    K > 1 needs a temperature above 0 (greedy samples are K copies of one answer); a temperature in
    (0, :data:`MIN_TEMPERATURE`) is refused (it samples the greedy answer, a second read of the same content)."""
    if isinstance(samples, bool) or not isinstance(samples, int) or samples < 1:
        raise error("E_USAGE", f"--samples {samples!r}: K is the number of answers sampled per item, at least 1",
                    "pass --samples 1 (one answer per item, the default) or more, e.g. --samples 8")
    if temperature is not None and not (math.isfinite(temperature) and temperature >= 0):
        raise error("E_USAGE", f"--temperature {temperature!r} is not a temperature (a finite number >= 0)",
                    "pass --temperature 0 (greedy) or a positive one, e.g. --temperature 0.7")
    if temperature is not None and 0 < temperature < MIN_TEMPERATURE:
        # such a decoder samples the greedy answer: a "new" setting that measures nothing new
        raise error("E_USAGE", f"--temperature {temperature:g} is near-greedy: below {MIN_TEMPERATURE:g} a sampler "
                    "picks the greedy answer, so it measures what --temperature 0 measures (and the test budget "
                    "is per exam content and base weights, whatever the temperature)",
                    f"pass --temperature 0 (greedy) or one of at least {MIN_TEMPERATURE:g}, e.g. --temperature 0.7")
    if samples > 1 and not temperature:
        raise error("E_USAGE", f"--samples {samples} with a greedy decoder (temperature 0) would give {samples} "
                    "copies of one answer per item", f"pass --temperature T > 0 with --samples {samples} "
                    "(e.g. --temperature 0.7), or drop --samples")
    if top_p is not None:
        if not (math.isfinite(top_p) and 0 < top_p <= 1):
            raise error("E_USAGE", f"--top-p {top_p!r} is not a nucleus mass in (0, 1]",
                        "pass --top-p between 0 (exclusive) and 1, e.g. --top-p 0.95")
        if not temperature and top_p != 1:
            raise error("E_USAGE", f"--top-p {top_p} has no effect on a greedy decoder (temperature 0)",
                        "pass --temperature T > 0 with --top-p, or drop --top-p")
    bad = [k for k in pass_at if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= samples]
    if bad:
        raise error("E_USAGE", f"--pass-at {','.join(map(str, bad))}: pass@k is estimated from K = {samples} "
                    "samples, so each k lies in 1..K", f"pass --pass-at with k between 1 and {samples} "
                    f"(e.g. --pass-at 1,{samples}), or more --samples")
    out: dict[str, object] = {"samples": samples}
    if temperature is not None:
        out["temperature"] = float(temperature)
    if top_p is not None:
        out["top_p"] = float(top_p)
    return out


def create(
    *, name: str, eval_env: str, model: str | None, steps_per_chunk: int, dry_run: bool,
    ws: Workspace | None, samples: int = 1, temperature: float | None = None, top_p: float | None = None,
    pass_at: Sequence[int] = (),
    held: Mapping[str, int] | None = None,
) -> ExperimentMade:
    """See :func:`monte.api.experiment_init`. ``ws`` is resolved here, after the names are
    checked, so a bad one is refused the same inside a repository or outside one. ``held``
    (content sha256 -> n): the test splits a grader holds in custody (:mod:`monte.grader`): such
    a split, absent from this data root, is proven by the grader's word, not by local bytes."""
    from monte.envs.grading import LMEVAL, eval_defaults
    from monte.ledger.experiment import Ledger
    from monte.ledger.records import EvalSettings, ExamFreeze, SplitFreeze, TrainSettings
    from monte.ledger.vault_ref import Vault
    from monte.manifest import now, read_manifest, sealed_files, verify_folder

    check_name(name, "experiment name")
    sampling = check_sampling(samples, temperature, top_p, pass_at)
    if name.lower() == "vault":  # refs/heads/monte/vault is the freeze manifests' ref, not a folder
        raise error("E_INVALID_NAME", "the experiment name 'vault' is reserved: refs/heads/monte/vault holds "
                    "the freeze manifests", "choose another experiment name")
    check_name(eval_env, "environment name")
    ws = ws or open_workspace()
    ledger = Ledger(ws.store, name)
    if ledger.exists():
        raise error("E_MEASUREMENT_EXISTS", f"experiment {name!r} already exists; its measurement is frozen",
                    "choose another experiment name; a changed measurement is a new experiment")
    folder = ws.env_dir(eval_env)
    m = read_manifest(folder)
    if m is None or m.kind != "environment":
        raise error("E_NOT_FOUND", f"no environment named {eval_env!r} on this data root",
                    f"freeze it with `monte env add`, or restore it with `monte env install {eval_env}`")
    recorded = Vault(ws.store).get("environment", eval_env)
    if recorded is not None and recorded.fingerprint != m.fingerprint:
        raise error("E_INTEGRITY", f"environment {eval_env!r}: the manifest here differs from the vault ref's",
                    f"move {folder} aside and run `monte env install {eval_env}`")
    held = held or {}
    # in the grader's custody (and nowhere on this data root): proven there, counted there. An
    # lm-eval exam's test documents go with its test split: each item records lm-eval's doc_hash
    # of its document, so the content the grader holds commits to them too
    away: set[str] = set()
    for files in sealed_files(m).values():
        if m.files[files[0]].sha256 in held and not (folder / files[0]).exists():
            away |= {rel for rel in files if not (folder / rel).exists()}
    verify_folder(folder, m.model_copy(update={"files": {k: v for k, v in m.files.items() if k not in away}}))
    if samples > 1 and (m.grader or {}).get("kind") == LMEVAL:
        raise error("E_USAGE", f"environment {eval_env!r} is graded by lm-eval, which builds its own requests: "
                    "monte cannot sample K answers per item for it", "drop --samples (K = 1) for an lm-eval exam")
    # the default base model, as every machine names it: repo:/data:/hf:/name: (monte.models.locate)
    where = locate.locate(ws, model, fetch=False) if model is not None else None
    exams = {
        exam: ExamFreeze(
            benchmark=(m.grader or {}).get("benchmarks", {}).get(exam, exam),
            splits={s: SplitFreeze(path=f"environments/{eval_env}/{rel}", sha256=m.files[rel].sha256,
                                   n=held[m.files[rel].sha256] if rel in away else _count_lines(folder / rel))
                    for s, rel in splits.items()},
        )
        for exam, splits in m.exams.items()
    }
    measurement = Measurement(
        experiment=name, created_at=now(), environment=eval_env,
        environment_fingerprint=m.fingerprint, grader=m.grader or {}, exams=exams,
        model=where.ref if where is not None else None,
        train=TrainSettings(steps_per_chunk=steps_per_chunk),
        eval=EvalSettings(**{**eval_defaults(m.grader), **sampling}),  # a NeMo Gym server grades whole chat answers
        pass_at=sorted(set(pass_at)),
    )
    if dry_run:
        return ExperimentMade(dry_run=True, measurement=measurement)
    if where is not None:
        locate.remember(ws, where.register, where.folder)
    commit = ledger.create(measurement)
    return ExperimentMade(dry_run=False, measurement=measurement, commit=commit.decode(), ref=ledger.ref)


def _count_lines(path: Path) -> int:
    with open(path, "rb") as f:
        return sum(1 for _ in f)


def summaries(ws: Workspace) -> list[ExperimentListed]:
    """See :func:`monte.api.experiment_list`."""
    from monte.ledger.experiment import Ledger, experiment_names

    out = []
    for n in experiment_names(ws.store):
        meas = Ledger(ws.store, n).measurement()
        out.append(ExperimentListed(name=n, environment=meas.environment, exams=sorted(meas.exams),
                                    model=meas.model, created_at=meas.created_at))
    return out
