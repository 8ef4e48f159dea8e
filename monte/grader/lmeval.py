"""lm-evaluation-harness exams through the grader: custody of the frozen task, and its test read
graded there by lm-eval's own code.

An lm-eval exam's test split is more than its ``exams/<exam>/test.jsonl``: lm-eval builds the
requests from the frozen task folder (its YAML and ``include:`` parents, its ``!function``
modules, the modules they import, the documents of each split and the few-shot pool:
:mod:`monte.envs.lmeval.freeze`), and the test documents there carry the gold. So custody is
the whole folder:

- :func:`pack` (the agent's side): the exam's test split and every file of its frozen task, each
  read once and proven against the environment's manifest, in one tar;
- :func:`take` (the grader): that tar proven on arrival, every file against the sha256 the task
  records and the split against the content it names, kept under ``sealed/<content>.d/`` (the
  split itself beside it, as for every exam: ``sealed/<content>.jsonl``);
- :func:`grade` (the grader's worker): :class:`monte.envs.lmeval.evaluate.Prepared` on that copy
  (every file and every document's lm-eval hashes proven again), ``lm_eval.simple_evaluate`` with
  the model the grader loaded from the weights it hashed; per document, its id and score leave.

The grader's python needs lm_eval for this (monte's ``lm-eval`` extra): :func:`available` is
what its ``hello`` says, and a client refuses to hand over an lm-eval exam to a grader that
cannot grade it (:func:`cannot_grade`), before anything moves.
"""

from __future__ import annotations

import hashlib
import io
import os
import shutil
import tarfile
import tempfile
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any

from monte.envs.lmeval import KIND
from monte.errors import MonteError, error

if TYPE_CHECKING:  # (pydantic: `hello` answers before every read, and imports none of it)
    from monte.manifest import Manifest

#: what the grader's python runs to grade lm-eval exams (the fix a refusal names)
PIP = "python -m pip install 'monte[lm-eval]'"


def available() -> bool:
    """Whether this python can grade lm-eval exams (lm_eval importable, without importing it:
    ``hello`` answers before every read)."""
    import importlib.util

    try:
        return importlib.util.find_spec("lm_eval") is not None
    except (ImportError, ValueError):
        return False


def cannot_grade(where: str, what: str) -> MonteError:
    """The refusal when the grader's python has no lm_eval."""
    return error("E_NOT_FOUND", f"{where} cannot grade lm-eval exams: its python has no lm_eval (monte's 'lm-eval' "
                 f"extra); {what}", f"install it in the python the grader's forced command runs, as the grader's "
                 f"account: `{PIP}`; then run the command again")


def task_spec(grader: dict[str, Any] | None, exam: str) -> dict[str, Any]:
    spec = ((grader or {}).get("tasks") or {}).get(exam)
    if not isinstance(spec, dict) or not isinstance(spec.get("files"), dict):
        raise error("E_INTEGRITY", f"the lm-eval grader record names no frozen task for exam {exam!r}",
                    "re-freeze the environment (`monte env add`) and start a new experiment on it")
    return spec


# --- the agent's side ----------------------------------------------------------------------------


def pack(folder: Path, manifest: Manifest, exam: str, split: str, raw: bytes,
         given: dict[str, bytes] | None = None) -> bytes:
    """The tar :func:`take` receives: the exam's test split ``split`` (``raw``, already proven)
    and every file of its frozen task, each proven against the manifest as it is read (``given``:
    files read elsewhere, the Vault's plaintext of test documents no longer here).

    Deterministic (sorted names, no dates, owners or modes but tarfile's defaults), so the same
    frozen task packs to the same bytes: the tar is what the Vault keeps encrypted, and the
    grader signs its sha256 (``bundle``) when it takes it."""
    spec = task_spec(manifest.grader, exam)
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:", format=tarfile.PAX_FORMAT) as tar:
        for rel in [split, *sorted(spec["files"])]:
            data = raw if rel == split else (given or {})[rel] if rel in (given or {}) else (folder / rel).read_bytes()
            if hashlib.sha256(data).hexdigest() != manifest.files[rel].sha256:
                raise error("E_INTEGRITY", f"{folder / rel} does not match the hash frozen in its manifest; nothing "
                            "was sent", f"restore it with `monte env install {manifest.name}`; never edit a frozen task")
            info = tarfile.TarInfo(rel)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


# --- the grader ----------------------------------------------------------------------------------


def take(sealed: Path, req: dict[str, Any], payload: bytes) -> dict[str, Any]:
    """Keep an lm-eval exam: the tar :func:`pack` made, every file proven on arrival (the split
    against ``content``, the task's files against the sha256 its record names, nothing else in
    it); the task folder lands in ``sealed/<content>.d/``, the split in ``sealed/<content>.jsonl``.
    Returns what the grader's meta records (written last by the caller, under its lock)."""
    if not available():
        raise cannot_grade("this grader", "nothing was taken")
    return unpack(sealed, req, payload)


def unpack(sealed: Path, req: dict[str, Any], payload: bytes) -> dict[str, Any]:
    """:func:`take`'s proof and landing, without asking for lm_eval: also what ``monte grader
    restore`` runs on the Vault's decrypted copy (``req``: the meta the grader signed)."""
    content, exam, split = str(req.get("content", "")), str(req.get("exam", "")), str(req.get("split", ""))
    spec = task_spec(req.get("grader"), exam)
    want = {split, *spec["files"]}
    stage = Path(tempfile.mkdtemp(prefix=".take-", dir=sealed))  # 0700: mkdtemp's own mode
    try:
        got: dict[str, str] = {}
        with tarfile.open(fileobj=io.BytesIO(payload), mode="r:") as tar:
            for m in tar.getmembers():
                p = PurePosixPath(m.name)
                if not m.isfile() or p.is_absolute() or ".." in p.parts or not p.parts or m.name not in want:
                    raise error("E_BAD_INPUT", f"the lm-eval exam sent holds {m.name!r}, not a file of its frozen task",
                                "run `monte grader take ENV` with monte's own client")
                src = tar.extractfile(m)
                assert src is not None
                data = src.read()
                got[m.name] = hashlib.sha256(data).hexdigest()
                target = stage.joinpath(*p.parts)
                target.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
                target.write_bytes(data)
        expected = {**{k: str(v) for k, v in spec["files"].items()}, split: content}
        if got != expected:
            wrong = sorted(k for k in expected if got.get(k) != expected[k])
            raise error("E_INTEGRITY", f"the lm-eval exam sent does not hash to what its task records "
                        f"({', '.join(wrong[:3]) or 'extra files'})", "run `monte grader take ENV` again from a "
                        "repository whose frozen environment is intact (`monte env install ENV` restores it)")
        raw = (stage / split).read_bytes()
        (stage / split).unlink()
        folder = sealed / f"{content}.d"
        if folder.exists():  # the same content taken again: the same bytes, proven above
            shutil.rmtree(folder)
        os.replace(stage, folder)
        (sealed / f"{content}.jsonl").write_bytes(raw)
    finally:
        shutil.rmtree(stage, ignore_errors=True)
    return {"n": sum(1 for line in raw.splitlines() if line.strip())}


def grade(sealed: Path, meta: dict[str, Any], items: list[dict[str, Any]], model: Any, tok: Any, *,
          batch_size: int) -> list[dict[str, Any]]:
    """The test read of an lm-eval exam in custody: lm-eval's own ``simple_evaluate`` on the
    grader's copy of the frozen task (every file and every document's hashes proven first), the
    model the grader loaded answering its requests. One entry per document (its id and score;
    the caller keeps only those)."""
    if not available():
        raise cannot_grade("this grader", "the read failed before generating")
    from monte.envs.lmeval.evaluate import Prepared
    from monte.ledger.predicates import SEALED

    exam = str(meta["exam"])
    prepared = Prepared(task_spec(meta["grader"], exam), sealed / f"{meta['content']}.d", SEALED, items)
    return prepared.run(model, tok, batch_size=batch_size)


def is_lmeval(grader: dict[str, Any] | None) -> bool:
    return (grader or {}).get("kind") == KIND


__all__ = ["KIND", "available", "cannot_grade", "pack", "take", "unpack", "grade", "is_lmeval"]
