"""The grader's checks of a NeMo Gym exam, on its own side (no SSH, no server started, no model):
what ``hello`` says it grades, and the refusals of ``take`` and ``read`` that keep and spend
nothing (tests/grader/test_nemo_grader.py runs the whole of it through a real sshd and server)."""

from __future__ import annotations

import hashlib
import io
import json
import os
import tarfile
from pathlib import Path
from typing import Any

import pytest

from monte.grader import home as homes
from monte.grader import nemo, server

ROOT = Path(__file__).resolve().parents[2]
VENV = Path(os.environ.get("MONTE_TEST_NEMO_GYM") or ROOT / ".nemo-gym")
ROW = b'{"responses_create_params": {"input": [{"role": "user", "content": "A or B?"}]}, "expected_answer": "A"}\n'


def _ask(home: homes.Home, request: dict[str, Any], payload: bytes = b"") -> dict[str, Any]:
    out = io.BytesIO()
    server.serve(home, io.BytesIO(json.dumps({**request, "size": len(payload)}).encode() + b"\n" + payload), out)
    return dict(json.loads(out.getvalue()))


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> homes.Home:
    for k in ("MONTE_LOCAL", "MONTE_NEMO_GYM_PYTHON", "MONTE_GYM_SERVER_URL"):
        monkeypatch.delenv(k, raising=False)
    return homes.init(tmp_path / "grader")


@pytest.fixture
def with_gym(monkeypatch: pytest.MonkeyPatch) -> Any:
    """The grader pointed at the pinned NeMo Gym venv (its files read; no server is started)."""
    from monte.envs.nemo import stack, venv

    if not venv.is_built(VENV):
        pytest.skip("NeMo Gym's venv is not built here: `make nemo-gym`")
    monkeypatch.setenv("MONTE_NEMO_GYM_PYTHON", str(venv.python_of(VENV)))
    found = stack.find()
    assert found is not None
    return found


def _grader(found: Any, **change: Any) -> dict[str, Any]:
    from monte.envs.nemo.freeze import server_identity
    from monte.envs.nemo.stack import server_entry

    entry = server_entry(found.root, "mcqa")
    assert entry is not None
    return {"kind": "nemo-gym", "version": found.version, "benchmarks": {"mcqa": "mcqa"},
            "servers": {"mcqa": {**server_identity(found, entry), **change}}}


def test_hello_says_what_the_grader_grades(home: homes.Home, with_gym: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    grades = _ask(home, {"op": "hello"})["grades"]
    assert grades.pop("lm-eval", {}) == {}  # (where this python has lm_eval: tests/grader/test_server.py)
    assert grades == {"catalog": {}, "jsonl": {}, "nemo-gym": {"version": "0.4.0"}}
    monkeypatch.delenv("MONTE_NEMO_GYM_PYTHON")
    grades = _ask(home, {"op": "hello"})["grades"]
    assert grades.pop("lm-eval", {}) == {} and grades == {"catalog": {}, "jsonl": {}}


def test_a_nemo_exam_the_grader_cannot_grade_is_refused_and_nothing_kept(home: homes.Home, with_gym: Any,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    content = hashlib.sha256(ROW).hexdigest()
    req = {"op": "take", "content": content, "exam": "mcqa", "benchmark": "mcqa"}
    drifted = _ask(home, {**req, "grader": _grader(with_gym, code_sha256="0" * 64)}, ROW)
    assert drifted["error"]["code"] == "E_INTEGRITY" and "code_sha256" in drifted["error"]["message"]
    older = _ask(home, {**req, "grader": _grader(with_gym, version="0.3.0")}, ROW)
    assert older["error"]["code"] == "E_INTEGRITY"
    assert "NeMo Gym is 0.4.0, and exam mcqa was frozen with NeMo Gym 0.3.0" in older["error"]["message"]
    monkeypatch.delenv("MONTE_NEMO_GYM_PYTHON")
    none = _ask(home, {**req, "grader": _grader(with_gym)}, ROW)
    assert none["error"]["code"] == "E_ENV" and "--nemo-gym PATH" in none["error"]["fix"]
    assert list(home.sealed.iterdir()) == []
    # the catalog's check keeps nothing either, and a check sends no rows
    checked = _ask(home, {**req, "exam": "parity", "benchmark": "parity", "check": True})
    assert checked == {"ok": True, "content": content, "checked": True} and list(home.sealed.iterdir()) == []


def test_a_read_of_a_nemo_exam_the_grader_can_no_longer_grade_spends_nothing(
        home: homes.Home, with_gym: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    content = hashlib.sha256(ROW).hexdigest()
    took = _ask(home, {"op": "take", "content": content, "exam": "mcqa", "benchmark": "mcqa",
                       "grader": _grader(with_gym)}, ROW)
    assert took["ok"] and took["n"] == 1
    monkeypatch.delenv("MONTE_NEMO_GYM_PYTHON")  # its NeMo Gym gone since the take
    buf = io.BytesIO()
    files = {}
    with tarfile.open(fileobj=buf, mode="w:") as tar:
        for name, data in (("config.json", b"{}"), ("model.safetensors", b"weights")):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
            files[name] = hashlib.sha256(data).hexdigest()
    r = _ask(home, {"op": "read", "run": "r1", "content": content, "cohort": "c", "role": "baseline",
                    "settings": {"temperature": 0.0}, "files": files}, buf.getvalue())
    assert r["error"]["code"] == "E_ENV"
    assert homes.records(home) == {} and not home.weights("r1").exists()


def test_use_points_the_grader_at_its_own_nemo_gym_never_at_a_server_url(monkeypatch: pytest.MonkeyPatch,
                                                                         tmp_path: Path) -> None:
    monkeypatch.setenv("MONTE_GYM_SERVER_URL", "http://127.0.0.1:9")
    monkeypatch.setenv("MONTE_LOCAL", "/elsewhere")
    monkeypatch.delenv("MONTE_NEMO_GYM_PYTHON", raising=False)  # restored after, as the others
    python = tmp_path / "python"
    nemo.use(python)
    assert "MONTE_GYM_SERVER_URL" not in os.environ and "MONTE_LOCAL" not in os.environ
    assert os.environ["MONTE_NEMO_GYM_PYTHON"] == str(python)
    nemo.use(tmp_path)
    assert os.environ["MONTE_LOCAL"] == str(tmp_path) and "MONTE_NEMO_GYM_PYTHON" not in os.environ


def test_grader_init_names_its_nemo_gym_in_the_forced_command_or_refuses_before_the_home(
        tmp_path: Path, monte: Any) -> None:
    from monte.envs.nemo import venv

    nowhere = tmp_path / "not-gym"
    nowhere.mkdir()
    r = monte("grader", "init", str(tmp_path / "h1"), "--nemo-gym", str(nowhere), "--json")
    assert r.code == 4 and r.json()["error"]["code"] == "E_NOT_FOUND" and not (tmp_path / "h1").exists()
    assert "holds no NeMo Gym" in r.json()["error"]["message"]
    if not venv.is_built(VENV):
        pytest.skip("NeMo Gym's venv is not built here: `make nemo-gym`")
    python = venv.python_of(VENV)
    r = monte("grader", "init", str(tmp_path / "h2"), "--nemo-gym", str(python), "--json")
    assert r.code == 0, r.err
    assert r.json()["nemo_gym"] == "0.4.0" and r.json()["authorized_keys"].endswith(
        f' grader serve --home {tmp_path / "h2"} --nemo-gym {python}",restrict AGENT_PUBLIC_KEY')
