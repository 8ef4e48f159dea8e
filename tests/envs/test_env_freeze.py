"""`monte env add / list / install`: the three forms, disjoint splits, integrity, refusals."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from monte.envs.freeze import normalise
from tests.support.helpers import git, snapshot_state


def _items(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_benchmark_form_is_eval_only_with_one_dev_exam(repo: Path, monte) -> None:
    r = monte("env", "add", "--benchmark", "chain_sum", "--json")
    assert r.code == 0, r.out
    env = r.json()["environment"]
    assert env["kind"] == "eval-only"
    assert env["exams"] == {"chain_sum": ["dev"]}
    folder = repo / ".monte" / "environments" / "chain_sum"
    assert len(_items(folder / "exams/chain_sum/dev.jsonl")) == 200
    assert not (folder / "curriculum.jsonl").exists()
    # the manifest is a commit on the vault ref, readable with plain git
    shown = json.loads(git(repo, "show", "monte/vault:environments/chain_sum/manifest.json"))
    assert shown == json.loads((folder / "manifest.json").read_text())
    trailers = git(repo, "log", "-1", "--format=%(trailers:key=Monte-Event,valueonly)", "monte/vault")
    assert trailers.strip() == "freeze"


def test_server_form_is_trainable_and_splits_are_disjoint_by_content(repo: Path, monte) -> None:
    r = monte("env", "add", "--server", "parity", "--dev", "parity", "--test", "parity", "--json")
    assert r.code == 0, r.out
    env = r.json()["environment"]
    assert env["kind"] == "trainable"
    folder = repo / ".monte/environments/parity"
    dev = {normalise(i["prompt"]) for i in _items(folder / "exams/parity/dev.jsonl")}
    test = {normalise(i["prompt"]) for i in _items(folder / "exams/parity/test.jsonl")}
    cur = {normalise(i["prompt"]) for i in _items(folder / "curriculum.jsonl")}
    assert len(dev) == 200 and len(test) == 200 and len(cur) == 5000
    assert not dev & test and not dev & cur and not test & cur
    manifest = json.loads((folder / "manifest.json").read_text())
    assert set(manifest["provenance"]["dropped_for_disjointness"]) == {"parity/dev", "parity/test", "curriculum"}


def test_freeze_is_reproducible_across_repositories(repo: Path, monte, tmp_path: Path) -> None:
    a = monte("env", "add", "--dev", "chain_sum", "--test", "chain_sum", "--as", "cs", "--json").json()
    other = tmp_path / "other"
    shutil.copytree(repo, other)
    shutil.rmtree(other / ".monte/environments")
    # another machine: no Vault ref and no memory of one (monte's hooks, copied along, stand aside)
    subprocess.run(["git", "-C", str(other), "update-ref", "-d", "refs/heads/monte/vault"], check=True,
                   env={**os.environ, "MONTE_HOOKS": "off"})
    shutil.rmtree(other / ".git" / "monte", ignore_errors=True)
    r = subprocess.run([sys.executable, "-c", "from monte.cli.main import main; main()", "env", "add",
                        "--dev", "chain_sum", "--test", "chain_sum", "--as", "cs", "--json"],
                       cwd=other, capture_output=True, text=True)
    b = json.loads(r.stdout)
    assert a["environment"]["fingerprint"] == b["environment"]["fingerprint"]


def test_exams_form_needs_as(repo: Path, monte, unchanged) -> None:
    r = monte("env", "add", "--dev", "word_sorting", "--test", "word_sorting", "--json")
    assert r.code == 2
    assert "--as" in r.json()["error"]["message"]


@pytest.mark.parametrize(
    "argv",
    [
        ["--benchmark", "parity", "--dev", "parity"],
        ["--benchmark", "parity", "--server", "parity"],
        ["--server", "parity", "--dev", "parity"],  # a frozen env cannot gain a test exam later
        ["--server", "parity", "--test", "parity"],
        ["--dev", "parity", "--as", "x"],
        ["--test", "parity", "--as", "x"],
        [],
    ],
)
def test_other_flag_mixes_are_usage_errors(repo: Path, monte, unchanged, argv: list[str]) -> None:
    r = monte("env", "add", *argv, "--json")
    assert r.code == 2, r.out
    assert r.json()["error"]["code"] == "E_USAGE"


def test_unknown_benchmark_refuses_and_writes_nothing(repo: Path, monte, unchanged) -> None:
    r = monte("env", "add", "--benchmark", "no_such_bench", "--json")
    assert r.code == 4
    assert r.json()["error"]["code"] == "E_NOT_FOUND"
    assert "--available" in r.json()["error"]["fix"]


def test_eval_only_benchmark_cannot_be_a_server(repo: Path, monte, unchanged) -> None:
    r = monte("env", "add", "--server", "word_sorting", "--dev", "word_sorting", "--test", "word_sorting", "--json")
    assert r.code == 2


def test_readding_a_name_refuses_and_changes_nothing(repo: Path, monte) -> None:
    assert monte("env", "add", "--benchmark", "parity").code == 0
    before = snapshot_state(repo)
    r = monte("env", "add", "--server", "parity", "--dev", "parity", "--test", "parity", "--json")
    assert r.code == 3
    assert r.json()["error"]["code"] == "E_NAME_TAKEN"
    assert "--as" in r.json()["error"]["fix"]
    assert snapshot_state(repo) == before


def test_name_held_only_on_the_data_root_refuses(repo: Path, monte) -> None:
    (repo / ".monte/environments/parity").mkdir(parents=True)
    r = monte("env", "add", "--benchmark", "parity", "--json")
    assert r.code == 3 and r.json()["error"]["code"] == "E_NAME_TAKEN"
    assert git(repo, "for-each-ref", "refs/heads/monte/") == ""


def test_dry_run_plans_and_writes_nothing(repo: Path, monte, unchanged) -> None:
    r = monte("env", "add", "--server", "parity", "--dev", "parity", "--test", "parity", "--dry-run", "--json")
    assert r.code == 0
    plan = r.json()["plan"]
    assert plan["kind"] == "trainable" and plan["sizes"]["curriculum"] == 5000


def test_list_is_local_and_list_flags_exclusive(repo: Path, monte) -> None:
    monte("env", "add", "--benchmark", "parity")
    monte("env", "add", "--dev", "chain_sum", "--test", "chain_sum", "--as", "cs")
    rows = monte("env", "list", "--json").json()
    assert [(r["name"], r["kind"]) for r in rows] == [("cs", "eval-only"), ("parity", "eval-only")]
    r = monte("env", "list", "--available", "--vault", "--json")
    assert r.code == 2
    names = {r["benchmark"] for r in monte("env", "list", "--available", "--json").json()}
    assert {"parity", "chain_sum", "basic_arithmetic", "word_sorting", "spell_backward"} <= names


def test_install_verifies_and_names_the_tampered_file(repo: Path, monte) -> None:
    monte("env", "add", "--dev", "chain_sum", "--test", "chain_sum", "--as", "cs")
    assert monte("env", "install", "cs", "--json").json()[0]["action"] == "verified"
    target = repo / ".monte/environments/cs/exams/chain_sum/test.jsonl"
    frozen = target.read_text()
    target.write_text(frozen.replace('"answer"', '"answer" ', 1))
    # install restores the frozen copy, names the edited file, and keeps the edit aside (issue 46.4)
    r = monte("env", "install", "cs", "--json")
    assert r.code == 0, r.out
    row = r.json()[0]
    assert row["action"] == "restored" and "exams/chain_sum/test.jsonl" in row["changed"]
    assert target.read_text() == frozen
    assert (Path(row["set_aside"]) / "exams/chain_sum/test.jsonl").read_text() != frozen
    assert monte("env", "install", "--all", "--json").json()[0]["action"] == "verified"


def test_install_restores_a_missing_catalog_env_and_proves_every_hash(repo: Path, monte) -> None:
    monte("env", "add", "--server", "parity", "--dev", "parity", "--test", "parity")
    folder = repo / ".monte/environments/parity"
    before = {p.name: p.read_bytes() for p in folder.rglob("*.jsonl")}
    shutil.rmtree(folder)
    r = monte("env", "install", "parity", "--json")
    assert r.code == 0, r.out
    assert r.json()[0]["action"] == "restored"
    assert {p.name: p.read_bytes() for p in folder.rglob("*.jsonl")} == before


def test_install_of_unknown_env_is_not_found(repo: Path, monte, unchanged) -> None:
    r = monte("env", "install", "ghost", "--json")
    assert r.code == 4
    r = monte("env", "install", "--json")
    assert r.code == 2


def test_manifest_that_escapes_its_folder_is_refused(repo: Path, monte) -> None:
    monte("env", "add", "--benchmark", "parity")
    mpath = repo / ".monte/environments/parity/manifest.json"
    m = json.loads(mpath.read_text())
    m["files"]["../../../etc/passwd"] = {"sha256": "0" * 64, "size": 1}
    mpath.write_text(json.dumps(m))
    before = snapshot_state(repo)
    r = monte("env", "install", "parity", "--json")
    assert r.code == 6
    assert r.json()["error"]["code"] == "E_UNSAFE_PATH"
    assert snapshot_state(repo) == before


def test_symlink_in_a_frozen_folder_is_refused(repo: Path, monte, tmp_path: Path) -> None:
    monte("env", "add", "--benchmark", "parity")
    dev = repo / ".monte/environments/parity/exams/parity/dev.jsonl"
    outside = tmp_path / "outside.jsonl"
    outside.write_bytes(dev.read_bytes())
    dev.unlink()
    dev.symlink_to(outside)
    r = monte("env", "install", "parity", "--json")
    assert r.code == 6 and r.json()["error"]["code"] == "E_UNSAFE_PATH"


def test_entry_point_provider_plugs_in(repo: Path, tmp_path: Path) -> None:
    """A user package adds a benchmark through the `monte.environments` entry point group."""
    site = tmp_path / "site"
    (site / "echo_env").mkdir(parents=True)
    (site / "echo_env" / "__init__.py").write_text(textwrap.dedent('''
        class Echo:
            name = "echo"
            description = "say the word back"
            trainable = True
            sizes = {"dev": 5, "test": 5, "curriculum": 10}
            version = "1"
            def generate(self, seed, n):
                return [{"id": f"echo-{seed}-{i}", "prompt": f"say w{seed + i} =", "answer": f"w{seed + i}",
                         "metadata": {}} for i in range(n)]
            def grade(self, item, answer):
                return float(answer.strip() == item["answer"])

        class Provider:
            def benchmarks(self):
                return {"echo": Echo()}

        provider = Provider()
    '''))
    dist = site / "echo_env-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: echo-env\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text("[monte.environments]\necho = echo_env:provider\n")
    env = {"PYTHONPATH": str(site)}
    from tests.support.helpers import monte_proc

    avail = json.loads(monte_proc("env", "list", "--available", "--json", cwd=repo, env=env).stdout)
    assert {"benchmark": "echo", "provider": "echo"}.items() <= next(
        a for a in avail if a["benchmark"] == "echo").items()
    r = monte_proc("env", "add", "--server", "echo", "--dev", "echo", "--test", "echo", "--json", cwd=repo, env=env)
    assert r.returncode == 0, r.stdout + r.stderr
    assert json.loads(r.stdout)["environment"]["kind"] == "trainable"
    assert len(_items(repo / ".monte/environments/echo/curriculum.jsonl")) == 10


def test_without_a_grader_a_catalog_freeze_draws_the_same_bytes_from_the_public_seeds(tmp_path: Path) -> None:
    """The grader draws a catalog test split with its own seed only where one is pinned; without
    one, a freeze draws every split from the public seeds as it always did (the hashes a freeze
    made before the grader could draw)."""
    from monte.envs import freeze

    plan = freeze.plan_freeze(name=None, benchmark=None, server="parity", dev=("parity",), test=("parity",))
    m = freeze.prepare(plan, tmp_path)
    assert m.provenance["seeds"] == {"test": 3_000_000, "dev": 2_000_000, "curriculum": 1_000_000}
    assert {k: v.sha256[:16] for k, v in m.files.items()} == {
        "curriculum.jsonl": "088bb3d70869b154", "exams/parity/dev.jsonl": "3cacada060695445",
        "exams/parity/test.jsonl": "952f7761f8469ff4"}
    # a grader pinned draws nothing for an eval-only environment: it has no test split to seal
    only_dev = freeze.plan_freeze(name=None, benchmark="parity", server=None, dev=(), test=())
    assert freeze.prepare(only_dev, tmp_path / "a").provenance == freeze.prepare(
        only_dev, tmp_path / "b", sealed=lambda _: pytest.fail("nothing to draw")).provenance
