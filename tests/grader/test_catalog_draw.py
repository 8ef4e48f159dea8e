"""Issue 41, a catalog exam's test split against a real grader (tests/grader/conftest.py): the
catalog's benchmarks generate items from (seed, n), so a split drawn from the catalog's public
seed can be drawn again by anyone, custody of its file or not. With a grader pinned, `monte env
add` has the grader draw it with a secret seed of its own: the agent can neither read it nor
draw it again, dev and the curriculum stay disjoint from it by content, and it grades a read."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from tests.support.grader import PYTHON, Setup

# the tests build on each other in order: under `-n 2 --dist loadgroup` the module runs whole on one worker
pytestmark = pytest.mark.xdist_group("test_catalog_draw")

ENV = "sealed-parity"
PUBLIC = ("import json\n"
          "from monte.envs.freeze import SEEDS, normalise\n"
          "from monte.envs.registry import get\n"
          "print(json.dumps([normalise(x['prompt']) for x in get('parity').benchmark.generate(SEEDS['test'], 200)]))\n")


def _keys(rows: list[dict[str, Any]]) -> set[str]:
    from monte.envs.freeze import normalise

    return {normalise(str(r["prompt"])) for r in rows}


def _rows(path: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in path.read_bytes().splitlines() if x.strip()]


def _sealed(s: Setup) -> tuple[str, Path]:
    """The content the agent's manifest records, and the grader's file of it (read here as root)."""
    m = json.loads((s.repo / ".monte" / "environments" / ENV / "manifest.json").read_text())
    content = str(m["files"]["exams/parity/test.jsonl"]["sha256"])
    return content, s.home / "sealed" / f"{content}.jsonl"


def test_a_catalog_exam_frozen_with_the_grader_pinned_cannot_be_drawn_again(grader_setup: Setup) -> None:
    s = grader_setup
    r = s.agent_monte("env", "add", "--server", "parity", "--dev", "parity", "--test", "parity", "--as", ENV,
                      "--json", check=True)
    folder = s.repo / ".monte" / "environments" / ENV
    content, sealed = _sealed(s)
    items = _rows(sealed)
    assert len(items) == 200 and not (folder / "exams" / "parity" / "test.jsonl").exists()
    # the catalog's public test seed, run as the agent: none of the sealed items (before: all 200)
    public = json.loads(s.agent.run(PYTHON, "-c", PUBLIC, check=True).stdout)
    assert len(public) == 200 and not _keys(items) & set(public)
    assert "drawn by the grader with its own secret seed" in json.loads(r.stdout)["note"]
    m = json.loads((folder / "manifest.json").read_text())
    assert m["provenance"]["seeds"]["test"] == "grader"  # the seed itself is nowhere on the agent's side
    for path in (sealed, s.home / "sealed" / f"{content}.seed"):
        denied = s.agent.run("cat", str(path))
        assert denied.returncode != 0 and "Permission denied" in denied.stderr
    # dev and the curriculum, drawn here from their public seeds, hold no sealed item by content
    for rel in ("exams/parity/dev.jsonl", "curriculum.jsonl"):
        assert not _keys(items) & _keys(_rows(folder / rel)), rel
    # no file of the agent's holds the split or one of its rows
    raw, lines = sealed.read_bytes(), set(sealed.read_bytes().splitlines())
    for p in s.agent.home.rglob("*"):
        if p.is_file() and not p.is_symlink():
            data = p.read_bytes()
            assert data != raw and not lines & set(data.splitlines()), p


def test_env_install_recreates_dev_and_curriculum_and_never_the_test_split(grader_setup: Setup) -> None:
    s = grader_setup
    folder = s.repo / ".monte" / "environments" / ENV
    before = {rel: (folder / rel).read_bytes() for rel in ("exams/parity/dev.jsonl", "curriculum.jsonl")}
    s.agent.run("rm", "-rf", str(folder), check=True)
    r = s.agent_monte("env", "install", ENV, "--json", check=True)
    (got,) = json.loads(r.stdout)
    assert got["action"] == "restored" and "stay in its custody: not generated here" in got["note"]
    assert {rel: (folder / rel).read_bytes() for rel in before} == before  # as frozen, proven by its hashes
    assert not (folder / "exams" / "parity" / "test.jsonl").exists()
    human = s.agent_monte("env", "install", ENV, check=True).stdout
    assert "drawn by the grader" in human


def test_a_test_read_of_the_drawn_split_is_graded_on_the_grader(grader_setup: Setup) -> None:
    s = grader_setup
    content, _ = _sealed(s)
    r = s.agent_monte("experiment", "init", "drawn", "--eval", ENV, "--model", "base-model", "--json", check=True)
    assert json.loads(r.stdout)["measurement"]["exams"]["parity"]["splits"]["test"] == {
        "path": f"environments/{ENV}/exams/parity/test.jsonl", "sha256": content, "n": 200}
    r = s.agent_monte("eval", "--split", "test", "--yes", "--json", check=True)
    row = json.loads(r.stdout)["runs"][0]
    statement = s.grader_reads()[row["run"]]["statement"]["statement"]
    assert statement["n"] == row["n"] == 200 and statement["score"] == row["score"]
    s.agent_monte("ledger", "verify", "--all", check=True)


def test_taking_a_split_the_public_seed_draws_says_so(grader_setup: Setup) -> None:
    """`parity` was frozen before the pin, from the catalog's public seed: it moves, and the
    answer says plainly that custody keeps its items from no one, and what to do instead."""
    s = grader_setup
    r = s.agent_monte("grader", "take", "parity", "--json", check=True)
    assert json.loads(r.stdout)["redrawable"] == ["parity"]
    human = s.agent_monte("grader", "take", "parity", check=True).stdout
    assert "can be drawn again from the catalog's public seed" in human and "monte env add" in human
    r = s.agent_monte("grader", "take", ENV, "--json", check=True)
    assert "redrawable" not in json.loads(r.stdout)  # drawn by the grader: nothing to warn of


def test_with_a_vault_the_drawn_split_is_kept_encrypted_and_the_grader_restores_it(grader_setup: Setup) -> None:
    """The grader encrypts what it drew to its own key: the Vault keeps a copy the agent's side
    never saw in plaintext, and the grader's account restores from it."""
    s = grader_setup
    vault = s.base / "vault"  # readable by the grader's account, written by the agent's
    vault.mkdir(mode=0o755)
    shutil.chown(vault, s.agent.name, s.agent.name)
    s.agent_monte("config", "set", "vault", str(vault), check=True)
    r = s.agent_monte("env", "add", "--dev", "parity", "--test", "parity", "--as", "sealed-vault", "--json",
                      check=True)
    assert "drawn by the grader" in json.loads(r.stdout)["note"]
    assert "(the Vault keeps them encrypted to its key)" in json.loads(r.stdout)["note"]
    m = json.loads((s.repo / ".monte" / "environments" / "sealed-vault" / "manifest.json").read_text())
    content = str(m["files"]["exams/parity/test.jsonl"]["sha256"])
    sealed = s.home / "sealed" / f"{content}.jsonl"
    raw = sealed.read_bytes()
    assert (vault / "monte" / "sealed" / f"{content}.age").is_file()
    for p in vault.rglob("*"):
        if p.is_file():
            assert p.read_bytes() != raw and not set(raw.splitlines()) & set(p.read_bytes().splitlines()), p
    sealed.unlink()  # the grader lost it: its account restores it from the Vault's copy
    r = s.grader.monte("grader", "restore", str(vault), "--home", str(s.home), "--json", check=True)
    assert content in [t["content"] for t in json.loads(r.stdout)["restored"]]
    assert sealed.read_bytes() == raw
