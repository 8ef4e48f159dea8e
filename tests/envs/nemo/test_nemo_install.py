"""``monte env install``: registering a NeMo Gym environment's benchmark configs into the checkout
``MONTE_LOCAL`` names (monte/envs/nemo/register.py), the refusal on a machine with no stack there,
and the note a mock-only (catalog) environment gets."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from monte.envs.nemo.server import LAUNCHER
from monte.envs.nemo.stack import Stack
from tests.envs.nemo.gymhelp import make_checkout


def test_install_registers_benchmark_configs_nemo_gym_reads(repo: Path, monte, checkout: Stack) -> None:
    assert monte("env", "add", "--server", "reasoning_gym", "--dev", "reasoning_gym", "--test", "reasoning_gym",
                 "--dev", "answer-judge", "--test", "mcqa", "--as", "rg").code == 0
    r = monte("env", "install", "rg", "--json")
    assert r.code == 0, r.out
    [res] = r.json()
    assert res["action"] == "verified"
    assert res["registered"] == ["monte_rg_answer_judge", "monte_rg_reasoning_gym"]  # the dev exams
    base = checkout.root / "benchmarks" / "monte" / "rg"
    env = repo / ".monte" / "environments" / "rg"
    for exam, folder in (("reasoning_gym", "reasoning_gym"), ("answer-judge", "answer_judge")):
        assert (base / folder / "data" / "dev.jsonl").read_bytes() == (env / "exams" / exam / "dev.jsonl").read_bytes()
        # NeMo Gym's own BenchmarkConfig reads what was written, and its prepare() proves the bytes
        out = subprocess.run([checkout.python or "", str(LAUNCHER), "check", "--root", str(checkout.root), "--config",
                              f"benchmarks/monte/rg/{folder}/config.yaml"], capture_output=True, text=True, cwd=checkout.root)
        got = json.loads(out.stdout.strip().splitlines()[-1])
        assert got["benchmark"] == f"monte_rg_{folder}" and got["jsonl_fpath"].endswith("data/dev.jsonl"), out.stderr
        prep = subprocess.run([checkout.python or "", "-c", "import importlib, sys; sys.path.insert(0, '.'); "
                               f"print(importlib.import_module('benchmarks.monte.rg.{folder}.prepare').prepare())"],
                              capture_output=True, text=True, cwd=checkout.root)
        assert prep.returncode == 0 and prep.stdout.strip().endswith(f"benchmarks/monte/rg/{folder}/data/dev.jsonl")
    assert not list(base.rglob("test.jsonl"))  # the sealed split stays in monte's data root
    assert "mcqa" not in {p.name for p in base.iterdir()}  # a test-only exam registers nothing
    assert (base / "curriculum" / "train.jsonl").read_bytes() == (env / "curriculum.jsonl").read_bytes()
    assert "_copy: reasoning_gym" in (base / "curriculum.yaml").read_text()
    out = subprocess.run([checkout.python or "", str(LAUNCHER), "check", "--any", "--root", str(checkout.root),
                          "--config", "benchmarks/monte/rg/curriculum.yaml"], capture_output=True, text=True,
                         cwd=checkout.root)
    assert {"name": "monte_rg_train", "type": "train", "jsonl_fpath": "benchmarks/monte/rg/curriculum/train.jsonl"} \
        in json.loads(out.stdout.strip().splitlines()[-1])["datasets"], out.stderr
    # install is idempotent
    before = {p: p.read_bytes() for p in base.rglob("*") if p.is_file()}
    assert monte("env", "install", "rg").code == 0
    assert {p: p.read_bytes() for p in base.rglob("*") if p.is_file()} == before


def test_a_tampered_registration_is_caught_by_its_prepare(repo: Path, monte, frozen, gym_python: str, tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    frozen("--benchmark", "mcqa")  # frozen with the venv's stack; installed into a checkout
    checkout = make_checkout(gym_python, tmp_path, monkeypatch)
    assert monte("env", "install", "mcqa").code == 0
    data = checkout.root / "benchmarks/monte/mcqa/mcqa/data/dev.jsonl"
    data.write_bytes(data.read_bytes()[:-10] + b"\n")
    prep = subprocess.run([checkout.python or "", "-c", "import sys; sys.path.insert(0, '.'); "
                           "import benchmarks.monte.mcqa.mcqa.prepare as p; p.prepare()"],
                          capture_output=True, text=True, cwd=checkout.root)
    assert prep.returncode != 0 and "monte env install mcqa" in prep.stderr
    assert monte("env", "install", "mcqa").code == 0  # installing again restores it
    assert subprocess.run([checkout.python or "", "-c", "import sys; sys.path.insert(0, '.'); "
                           "import benchmarks.monte.mcqa.mcqa.prepare as p; p.prepare()"], cwd=checkout.root).returncode == 0


@pytest.mark.parametrize("local", [None, "empty", "missing"])
def test_install_refuses_where_monte_local_has_no_stack(repo: Path, monte, gym: Stack, frozen, tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch, local: str | None) -> None:
    frozen("--benchmark", "mcqa")
    if local == "empty":
        (tmp_path / "empty").mkdir()
        monkeypatch.setenv("MONTE_LOCAL", str(tmp_path / "empty"))
    elif local == "missing":
        monkeypatch.setenv("MONTE_LOCAL", str(tmp_path / "nowhere"))
    r = monte("env", "install", "mcqa", "--json")
    assert r.code == 4, r.out
    err = r.json()["error"]
    assert err["code"] == "E_NOT_FOUND" and "MONTE_LOCAL" in err["message"] and "MONTE_LOCAL" in err["fix"]
    assert "no stack" in err["message"]


def test_a_mock_only_environment_installs_anywhere_with_a_note(repo: Path, monte, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MONTE_LOCAL", raising=False)
    assert monte("env", "add", "--benchmark", "word_sorting").code == 0
    r = monte("env", "install", "word_sorting", "--json")
    assert r.code == 0, r.out
    [res] = r.json()
    assert res["registered"] == [] and "declares no Gym benchmarks" in res["note"]
    human = monte("env", "install", "word_sorting")
    assert human.code == 0 and "note: declares no Gym benchmarks" in human.out
