"""Where CI installs monte from (issue 30.2).

Reproduced on the code before: both workflows ran ``pip install "monte==0.1.0"``, a release no
package index holds (CI red on the first push, and whoever registers the name runs code in every
CI that kept the default); re-running ``monte init`` with ``MONTE_CI_INSTALL`` kept the old file;
the hooks hard-coded the installing interpreter and offered ``pip install -e <that folder>``.

Now the pin is where this monte came from, read from its distribution's own record (PEP 610's
``direct_url.json``, as pip wrote it in a fresh virtualenv here), a pin no runner can install is
not written (and ``monte init`` says what to set), ``--ci-install``/``MONTE_CI_INSTALL`` rewrite
the workflow, and the workflow's install line, run as written (offline: ``--no-deps --no-index``),
installs the wheel built from this tree.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from monte import ci
from tests.support.helpers import git, monte_proc

ROOT = Path(__file__).resolve().parents[2]
PIN = "monte @ git+https://github.com/example/monte@0123456789abcdef0123456789abcdef01234567"


@pytest.fixture(scope="module")
def wheel(light_wheel: Path) -> Path:
    return light_wheel


def _venv(at: Path) -> Path:
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(at)], check=True)
    return at / "bin" / "python"


def _pip(python: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """This interpreter's pip, installing into ``python``'s environment, offline."""
    return subprocess.run([sys.executable, "-m", "pip", "--python", str(python), *args], capture_output=True, text=True)


def _resolve_in(python: Path) -> tuple[str | None, str]:
    """``monte.ci.resolve()`` as that installation sees itself (ci imports nothing but the stdlib)."""
    r = subprocess.run([str(python), "-P", "-c", "import json; from monte import ci; p = ci.resolve(); "
                        "print(json.dumps([p.spec, p.source]))"], capture_output=True, text=True,
                       env={k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "MONTE_CI_INSTALL")})
    assert r.returncode == 0, r.stderr
    spec, source = json.loads(r.stdout)
    return spec, source


def _install_line(workflow: str) -> str:
    found = re.findall(r"^\s+run: (python -m pip install .+)$", workflow, re.M)
    assert len(found) == 1, workflow
    return found[0]


def test_the_pin_comes_from_the_distributions_own_record(wheel: Path, tmp_path: Path) -> None:
    python = _venv(tmp_path / "venv")
    r = _pip(python, "install", "-q", "--no-deps", "--no-index", str(wheel))
    assert r.returncode == 0, r.stderr
    site = next((tmp_path / "venv" / "lib").glob("python*/site-packages"))
    record = next(site.glob("monte-*.dist-info")) / "direct_url.json"
    # installed from a local wheel: pip's record names that file, which no runner can reach
    assert json.loads(record.read_text())["url"] == wheel.as_uri()
    spec, why = _resolve_in(python)
    assert spec is None and str(wheel) in why and "no CI runner can reach" in why
    # what pip records for `pip install 'monte @ git+https://...@COMMIT'` (a VCS install, which
    # cannot run offline here): the pin is that URL at that commit
    record.write_text(json.dumps({"url": "https://github.com/example/monte.git",
                                  "vcs_info": {"vcs": "git", "commit_id": "0123456789abcdef0123456789abcdef01234567",
                                               "requested_revision": "main"}}))
    assert _resolve_in(python)[0] == "monte @ git+https://github.com/example/monte.git@0123456789abcdef0123456789abcdef01234567"
    # installed by name from an index (pip writes no record): that release, which the index holds
    record.unlink()
    assert _resolve_in(python)[0] == "monte==0.1.0"


def test_a_checkout_whose_commit_a_remote_holds_is_pinned_at_that_commit(tmp_path: Path, wheel: Path) -> None:
    """An editable install from a git checkout (`make install`): pinned to the remote's URL at
    HEAD once a remote-tracking ref holds HEAD; not before (an unpushed commit cannot install)."""
    src = tmp_path / "monte-src"
    shutil.copytree(ROOT / "monte", src / "monte", ignore=shutil.ignore_patterns("__pycache__"))
    git(tmp_path, "init", "-q", "-b", "main", str(src))
    git(src, "add", "monte")
    git(src, "commit", "-q", "-m", "monte")
    head = git(src, "rev-parse", "HEAD").strip()
    assert ci._pushed_commit(src) is None
    git(src, "remote", "add", "origin", "https://github.com/example/monte.git")
    assert ci._pushed_commit(src) is None  # the remote does not hold it yet
    git(src, "update-ref", "refs/remotes/origin/main", head)  # what `git push origin main` leaves
    assert ci._pushed_commit(src) == ("https://github.com/example/monte.git", head)


def test_init_writes_no_pin_that_cannot_install_and_says_what_to_set(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MONTE_CI_INSTALL", raising=False)
    if ci.resolve().spec is not None:
        pytest.skip(f"this monte has an installable pin ({ci.resolve().spec}): the refusal needs a local install")
    repo = tmp_path / "repo"
    git(tmp_path, "init", "-q", "-b", "main", str(repo))
    r = monte_proc("init", "--no-hooks", cwd=repo)
    assert r.returncode == 0, r.stderr
    assert not (repo / ci.DEFAULT_WORKFLOW).exists()
    assert "no CI workflow written" in r.stdout and "--ci-install" in r.stdout and "MONTE_CI_INSTALL" in r.stdout
    assert '"monte==' not in r.stdout
    # --ci-install writes it, keeps the pin in .monte.yaml, and records carry the same pin
    r = monte_proc("init", "--no-hooks", "--ci-install", PIN, cwd=repo)
    assert r.returncode == 0, r.stderr
    text = (repo / ci.DEFAULT_WORKFLOW).read_text()
    assert _install_line(text) == f'python -m pip install "{PIN}"'
    assert ci.configured(repo) == PIN
    # MONTE_CI_INSTALL on a second `monte init` rewrites monte's own file (the file says so)
    r = monte_proc("init", "--no-hooks", cwd=repo, env={"MONTE_CI_INSTALL": "monte==0.1.0"})
    assert r.returncode == 0, r.stderr
    assert _install_line((repo / ci.DEFAULT_WORKFLOW).read_text()) == 'python -m pip install "monte==0.1.0"'
    # a pin of something that is not monte is refused, and nothing changes
    before = (repo / ".monte.yaml").read_text()
    r = monte_proc("init", "--ci-install", "numpy==2.0", "--json", cwd=repo)
    assert r.returncode == 2 and json.loads(r.stdout)["error"]["code"] == "E_USAGE", r.stdout
    assert (repo / ".monte.yaml").read_text() == before


def test_the_workflows_install_line_installs_the_wheel_built_from_this_tree(wheel: Path, tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    git(tmp_path, "init", "-q", "-b", "main", str(repo))
    pin = f"monte @ {wheel.as_uri()}"
    assert monte_proc("init", "--no-hooks", "--ci-install", pin, cwd=repo).returncode == 0
    for text in ((repo / ci.DEFAULT_WORKFLOW).read_text(), (ci.ledger_workflow(pin) or b"").decode()):
        line = _install_line(text)
        python = _venv(tmp_path / f"venv{len(list(tmp_path.glob('venv*')))}")
        # the line as written, in a fresh virtualenv, offline (--no-deps --no-index: no index here)
        args = [a for a in __import__("shlex").split(line)][4:]
        assert args == [pin]
        r = _pip(python, "install", "-q", "--no-deps", "--no-index", *args)
        assert r.returncode == 0, r.stderr
        r = subprocess.run([str(python), "-P", "-c", "import monte; print(monte.__version__)"], capture_output=True,
                           text=True, env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"})
        assert r.returncode == 0 and r.stdout.strip() == "0.1.0", r.stderr


def test_the_hooks_run_the_python_recorded_at_install_and_offer_the_pin(repo: Path, tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """A hook runs the python that installed it, never one found when it runs ($MONTE_PYTHON, a
    `monte` on PATH: whoever runs git chooses those, issue 43 case 5). That python gone, the
    hook refuses, offering the pin (never `pip install -e <the installer's folder>`) and
    `monte hooks install` to record another."""
    from monte import githooks

    real = sys.executable
    monkeypatch.setenv("MONTE_CI_INSTALL", PIN)
    gone = tmp_path / "gone" / "bin" / "python"  # the installing interpreter, since removed
    monkeypatch.setattr(sys, "executable", str(gone))
    text = githooks.script("pre-push", spec=ci.install_spec(repo))
    monkeypatch.setattr(sys, "executable", real)
    assert "pip install -e" not in text
    assert f"\npy={gone}\n" in text
    hook = repo / ".git" / "hooks" / "pre-push"
    hook.write_text(text)
    hook.chmod(0o755)
    line = f"refs/heads/monte/exp/ledger {'1' * 40} refs/heads/monte/exp/ledger {'0' * 40}\n"
    # a `monte` on PATH and MONTE_PYTHON naming a python that has it: neither is taken
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "monte").write_text(f"#!{real}\nimport sys\nfrom monte.cli.main import main\nsys.exit(main())\n")
    (bin_dir / "monte").chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_dir}:/usr/bin:/bin", "MONTE_PYTHON": real}
    r = subprocess.run([str(hook), "origin", "url"], input=line, capture_output=True, text=True, cwd=repo, env=env)
    assert r.returncode != 0 and "cannot import monte" in r.stderr and PIN in r.stderr, r.stderr
    assert "monte hooks install" in r.stderr, r.stderr
    # installed by a python that has monte: that python verifies
    hook.write_text(githooks.script("pre-push", spec=ci.install_spec(repo)))
    r = subprocess.run([str(hook), "origin", "url"], input=line, capture_output=True, text=True, cwd=repo, env=env)
    assert "cannot import monte" not in r.stderr, r.stderr
    assert r.returncode != 0 and "1111111" in r.stderr, r.stderr  # verify ran, and refused a commit it lacks
