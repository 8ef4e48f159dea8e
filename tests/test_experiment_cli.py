"""`monte experiment init`: the frozen measurement is the ledger's first record."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.support.helpers import git, snapshot_state


def test_init_freezes_measurement_as_first_record(repo: Path, monte) -> None:
    monte("env", "add", "--server", "parity", "--dev", "parity", "--test", "parity")
    r = monte("experiment", "init", "exp1", "--eval", "parity", "--json")
    assert r.code == 0, r.out
    m = json.loads(git(repo, "show", "monte/exp1/ledger:measurement.json"))
    assert m["experiment"] == "exp1" and m["environment"] == "parity"
    assert m["train"]["steps_per_chunk"] == 50
    dev = m["exams"]["parity"]["splits"]["dev"]
    assert dev["n"] == 200
    manifest = json.loads((repo / ".monte/environments/parity/manifest.json").read_text())
    assert dev["sha256"] == manifest["files"]["exams/parity/dev.jsonl"]["sha256"]
    assert m["environment_fingerprint"] == r.json()["measurement"]["environment_fingerprint"]
    assert git(repo, "rev-list", "--count", "monte/exp1/ledger").strip() == "1"
    assert git(repo, "log", "-1", "--format=%(trailers:key=Monte-Event,valueonly)", "monte/exp1/ledger").strip() == "created"
    assert "monte/exp1/ledger" in git(repo, "branch", "--list", "monte/*")
    git(repo, "fsck", "--strict")


def test_existing_name_refuses_with_measurement_exists(repo: Path, monte) -> None:
    monte("env", "add", "--benchmark", "parity")
    monte("env", "add", "--benchmark", "chain_sum")
    assert monte("experiment", "init", "exp1", "--eval", "parity").code == 0
    before = snapshot_state(repo)
    r = monte("experiment", "init", "exp1", "--eval", "chain_sum", "--json")
    assert r.code == 3 and r.json()["error"]["code"] == "E_MEASUREMENT_EXISTS"
    assert snapshot_state(repo) == before


def test_unknown_env_and_tampered_env_refuse(repo: Path, monte) -> None:
    before = snapshot_state(repo)
    assert monte("experiment", "init", "e", "--eval", "ghost", "--json").json()["error"]["code"] == "E_NOT_FOUND"
    assert snapshot_state(repo) == before
    monte("env", "add", "--benchmark", "parity")
    dev = repo / ".monte/environments/parity/exams/parity/dev.jsonl"
    dev.write_text(dev.read_text() + "\n")
    before = snapshot_state(repo)
    r = monte("experiment", "init", "e", "--eval", "parity", "--json")
    assert r.code == 5 and "dev.jsonl" in r.json()["error"]["message"]
    assert snapshot_state(repo) == before


def test_model_is_recorded_and_list_shows_it(repo: Path, monte, tmp_path: Path) -> None:
    monte("env", "add", "--benchmark", "parity")
    model = tmp_path / "tiny-model"
    model.mkdir()
    monte("experiment", "init", "e", "--eval", "parity", "--model", str(model))
    rows = monte("experiment", "list", "--json").json()
    # a folder outside the repository is recorded by a name (never by this machine's path), and
    # the name says where it is here in .monte.yaml (another machine: MONTE_MODEL_TINY_MODEL)
    assert rows == [{"name": "e", "environment": "parity", "exams": ["parity"], "model": "name:tiny-model",
                     "created_at": rows[0]["created_at"]}]
    assert f"tiny-model: {model}" in (repo / ".monte.yaml").read_text()
    r = monte("experiment", "init", "e2", "--eval", "parity", "--model", str(tmp_path / "missing/m"), "--json")
    assert r.code == 4


def test_dry_run_writes_nothing(repo: Path, monte) -> None:
    monte("env", "add", "--benchmark", "parity")
    before = snapshot_state(repo)
    r = monte("experiment", "init", "e", "--eval", "parity", "--dry-run", "--json")
    assert r.code == 0 and r.json()["dry_run"] is True
    assert snapshot_state(repo) == before


def test_two_racing_inits_one_wins(repo: Path, monte) -> None:
    import concurrent.futures

    from tests.support.helpers import monte_proc

    monte("env", "add", "--benchmark", "parity")
    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        procs = list(pool.map(lambda _: monte_proc("experiment", "init", "race", "--eval", "parity", "--json",
                                                   cwd=repo), range(4)))
    codes = sorted(p.returncode for p in procs)
    assert codes == [0, 3, 3, 3], [p.stdout + p.stderr for p in procs]
    assert git(repo, "rev-list", "--count", "monte/race/ledger").strip() == "1"


def test_init_json_is_the_document_the_pydantic_result_printed(repo: Path, monte) -> None:
    """api.experiment_init returns a Result; --json is still the document the pydantic result
    printed: ``dry_run`` and the measurement's own JSON, and ``commit`` and ``ref`` only once the
    ledger holds it."""
    from monte import experiments
    from monte.workspace import open_workspace

    monte("env", "add", "--benchmark", "parity")
    dry = monte("experiment", "init", "e", "--eval", "parity", "--dry-run", "--json")
    planned = experiments.create(name="e", eval_env="parity", model=None, steps_per_chunk=50, dry_run=True,
                                 ws=open_workspace(repo))
    want: dict[str, Any] = {"dry_run": True, "measurement": planned.measurement.model_dump(mode="json")}
    got = dry.json()
    assert "commit" not in got and "ref" not in got
    got["measurement"]["created_at"] = want["measurement"]["created_at"]  # the one field the clock writes
    assert got == want
    made = monte("experiment", "init", "e", "--eval", "parity", "--json").json()
    assert made["ref"] == "refs/heads/monte/e/ledger" and len(made["commit"]) == 40
    assert set(made) == {"dry_run", "measurement", "commit", "ref"} and made["dry_run"] is False
