"""Forging ledger records by hand, with nothing but git plumbing.

A forger does what a person with shell access could do: read a blob (``git cat-file``), edit
it, write it back (``git hash-object -w``), rebuild the trees (``git read-tree`` /
``git update-index --index-info`` / ``git write-tree`` with a private ``GIT_INDEX_FILE``),
commit (``git commit-tree``) and move the ref (``git update-ref``). Nothing here calls monte's
writers. Forgeries keep the *derived* files (the fan-out ``index.json``, ``meta.json``)
consistent with the forged row, so the verifier has to catch them by the rule they break and
not merely because an index went stale.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.support.helpers import checkpoint  # noqa: F401  (re-exported)

ZERO = "0" * 40


def ledger_ref(exp: str = "exp") -> str:
    return f"refs/heads/monte/{exp}/ledger"


def lineage_ref(run: str, exp: str = "exp") -> str:
    return f"refs/heads/monte/{exp}/lineage/{run}"


def run_dir(run: str) -> str:
    return f"runs/{run[0]}/{run[1]}/{run}"


def index_path(run: str) -> str:
    return f"runs/{run[0]}/{run[1]}/index.json"


def short(sha: str) -> str:
    return sha[:12]


def git_run(repo: Path, *args: str, input: bytes | None = None,
            env: dict[str, str] | None = None) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(["git", "-C", str(repo), *args], input=input, capture_output=True,
                          env={**os.environ, **(env or {})})


def g(repo: Path, *args: str, input: bytes | None = None, env: dict[str, str] | None = None) -> str:
    """git, which must succeed; stdout stripped."""
    r = git_run(repo, *args, input=input, env=env)
    if r.returncode != 0:
        raise AssertionError(f"git {' '.join(args)} failed ({r.returncode}): {r.stderr.decode()}")
    return r.stdout.decode().strip()


def rev(repo: Path, name: str) -> str | None:
    r = git_run(repo, "rev-parse", "-q", "--verify", name + "^{commit}")
    return r.stdout.decode().strip() if r.returncode == 0 else None


def cat(repo: Path, revision: str, path: str) -> bytes | None:
    r = git_run(repo, "cat-file", "blob", f"{revision}:{path}")
    return r.stdout if r.returncode == 0 else None


def dumps(obj: Any) -> bytes:
    """monte's canonical JSON (sorted, indented, trailing newline)."""
    return (json.dumps(obj, indent=2, sort_keys=True, ensure_ascii=False) + "\n").encode()


def compact(obj: Any) -> bytes:
    return (json.dumps(obj, sort_keys=True, ensure_ascii=False, separators=(",", ":")) + "\n").encode()


def hash_blob(repo: Path, data: bytes) -> str:
    return g(repo, "hash-object", "-w", "--stdin", input=data)


def write_tree(repo: Path, base: str | None, changes: dict[str, bytes | None]) -> str:
    """A tree: ``base`` (a tree or commit, or None for empty) with files set (bytes) or removed
    (None), via a throwaway index file."""
    with tempfile.TemporaryDirectory() as d:
        env = {"GIT_INDEX_FILE": str(Path(d) / "index")}
        if base is not None:
            g(repo, "read-tree", base, env=env)
        else:
            g(repo, "read-tree", "--empty", env=env)
        lines = []
        for path, data in changes.items():
            if data is None:
                lines.append(f"0 {ZERO}\t{path}")
            else:
                lines.append(f"100644 {hash_blob(repo, data)}\t{path}")
        if lines:
            g(repo, "update-index", "--index-info", input=("\n".join(lines) + "\n").encode(), env=env)
        return g(repo, "write-tree", env=env)


def commit_tree(repo: Path, tree: str, parents: list[str], message: str) -> str:
    args = ["commit-tree", tree]
    for p in parents:
        args += ["-p", p]
    return g(repo, *args, input=message.encode())


def message(summary: str, event: str = "finished", **trailers: str) -> str:
    lines = [f"Monte-Event: {event}"] + [f"Monte-{k.capitalize()}: {v}" for k, v in trailers.items()]
    return summary + "\n\n" + "\n".join(lines) + "\n"


def update_ref(repo: Path, ref: str, new: str, old: str | None = None, *,
               hooks: bool = True) -> subprocess.CompletedProcess[bytes]:
    """``git update-ref``; with ``hooks=False`` monte's hooks stand aside (MONTE_HOOKS=off)."""
    args = ["update-ref", ref, new] + ([old] if old is not None else [])
    return git_run(repo, *args, env=None if hooks else {"MONTE_HOOKS": "off"})


@contextmanager
def another_machine(repo: Path) -> Iterator[None]:
    """Record as another clone of ``repo`` would: without this clone's memory of its refs' tips
    (``.git/monte/``, git's reflogs of ``refs/heads/monte/``), which is put back afterwards. Two
    machines simulated in one repository by swinging the ledger ref back and forth look, to
    that memory, exactly like a rewind."""
    git_dir = repo / ".git"
    parts = ("monte", "logs/refs/heads/monte")
    with tempfile.TemporaryDirectory() as d:
        for rel in parts:
            if (git_dir / rel).exists():
                shutil.move(git_dir / rel, Path(d) / rel.replace("/", "_"))
        try:
            yield
        finally:
            for rel in parts:
                shutil.rmtree(git_dir / rel, ignore_errors=True)
                if (Path(d) / rel.replace("/", "_")).exists():
                    shutil.move(Path(d) / rel.replace("/", "_"), git_dir / rel)


# --- the honest side: recording checkpoints as `monte train` does ----------------------------------


@dataclass
class Honest:
    """The honest ledger's run ids, by name."""

    path: Path
    ids: dict[str, str] = field(default_factory=dict)

    def __getitem__(self, name: str) -> str:
        return self.ids[name]


# --- the ledger as a forger sees it ---------------------------------------------------------------


def rows(repo: Path, revision: str) -> dict[str, dict[str, Any]]:
    """Every row at ``revision``, from the row files (not the indexes)."""
    out = {}
    names = g(repo, "ls-tree", "-r", "--name-only", revision, "runs").splitlines()
    for name in names:
        if name.endswith("/row.json"):
            row = json.loads(cat(repo, revision, name) or b"")
            out[row["run"]] = row
    return out


def records(repo: Path, revision: str) -> int:
    raw = cat(repo, revision, "meta.json")
    return int(json.loads(raw)["records"]) if raw else 0


def index_for(repo: Path, revision: str, run: str, row: dict[str, Any] | None) -> bytes:
    """The fan-out index of ``run``'s folder with ``run``'s entry set to ``row`` (or dropped),
    exactly as monte derives it (each row as pydantic dumps it)."""
    from monte.ledger.records import RunRow

    raw = cat(repo, revision, index_path(run))
    index = json.loads(raw) if raw else {}
    if row is None:
        index.pop(run, None)
    else:
        index[run] = RunRow.model_validate(row).model_dump(mode="json")
    return compact(index)


def cohort_index_for(repo: Path, revision: str, row: dict[str, Any]) -> tuple[str, bytes] | None:
    """The cohort index (``cohorts/<cohort>/index.json``) with ``row`` folded in, as monte derives
    it, where the ledger keeps one for the row's cohort and the row changes it (else None)."""
    from monte.ledger import cohorts
    from monte.ledger.records import RunRow

    path = cohorts.index_path(str(row.get("cohort") or ""))
    raw = cat(repo, revision, path) if path else None
    if path is None or raw is None:
        return None
    old = json.loads(raw)
    new = cohorts.fold(old, RunRow.model_validate(row))
    return (path, compact(new)) if new != old else None


def row_changes(repo: Path, revision: str, row: dict[str, Any], *, bump: bool = True,
                files: dict[str, bytes] | None = None) -> dict[str, bytes | None]:
    """The writes of a one-row record on top of ``revision``: row.json, its index, its cohort's
    index (where it changes), meta.json."""
    run = row["run"]
    changes: dict[str, bytes | None] = {
        f"{run_dir(run)}/row.json": dumps(row),
        index_path(run): index_for(repo, revision, run, row),
    }
    cohort = cohort_index_for(repo, revision, row)
    if cohort is not None:
        changes[cohort[0]] = cohort[1]
    if bump:
        changes["meta.json"] = dumps({"records": records(repo, revision) + 1})
    for name, data in (files or {}).items():
        changes[f"{run_dir(run)}/{name}"] = data
    return changes


@dataclass
class Forged:
    sha: str
    parent: str

    @property
    def short(self) -> str:
        return short(self.sha)


def forge(repo: Path, changes: dict[str, bytes | None], summary: str, *, event: str = "finished",
          exp: str = "exp", parent: str | None = None, parents: list[str] | None = None,
          **trailers: str) -> Forged:
    """One hand-made record on top of the ledger tip (or ``parent``); the ref is NOT moved."""
    base = parent or rev(repo, ledger_ref(exp))
    assert base is not None
    tree = write_tree(repo, base, changes)
    sha = commit_tree(repo, tree, parents if parents is not None else [base],
                      message(summary, event, **trailers))
    return Forged(sha, base)


def forge_row(repo: Path, row: dict[str, Any], summary: str, *, event: str = "finished", exp: str = "exp",
              files: dict[str, bytes] | None = None, parent: str | None = None, **trailers: str) -> Forged:
    base = parent or rev(repo, ledger_ref(exp))
    assert base is not None
    trailers.setdefault("run", row["run"])
    return forge(repo, row_changes(repo, base, row, files=files), summary, event=event, exp=exp,
                 parent=base, **trailers)  # type: ignore[arg-type]  # **trailers are str: they fill no other parameter


def new_id() -> str:
    from monte.ledger.ids import new_run_id

    return new_run_id()


def started_eval(template: dict[str, Any], *, run: str, seq: int, split: str, target: dict[str, Any],
                 role: str | None, step: int = 0) -> dict[str, Any]:
    """A fresh ``started`` eval row shaped like ``template`` (a real row of the same ledger)."""
    row = dict(template)
    row.update(run=run, seq=seq, status="started", split=split, step=step, role=role, score=None, n=None,
               delta=None, error=None, checkpoints=[])
    row["plan"] = {**template["plan"], "target": target}
    return row


def hooked_python_env() -> dict[str, str]:
    """The hooks find monte through MONTE_PYTHON (written by install); nothing else is needed."""
    return {"MONTE_PYTHON": sys.executable}
