"""Shared fixtures: real temporary git repositories, kept out of $HOME and any real data root.

A monte repository is built once per session (``git init`` + ``monte init``, which runs DVC's
own init) and copied for each test, as DVC's test suite does with its ``make_tmp_dir``.
Git's environment is scrubbed and the author, committer and time are pinned.

The GCS emulator (``tests/support/gcs_emulator.py``) is started once per test worker, for every test
that asks for ``emulator``, ``gcs`` or ``read_only_gcs``; each ``gcs`` is a fresh bucket.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from tests.support.gcs_emulator import Emulator, ReadOnlyProxy, gcs_env
from tests.support.helpers import PINNED_ENV, git, monte_proc, run_dvc, scrubbed, snapshot_state  # noqa: F401  (re-exported)
from tests.support.kept import Kept

if TYPE_CHECKING:
    from monte.ledger.store import Store

# --- the `slow` marker: `pytest -m "not slow"` is the inner loop, `make test` runs everything ---
#
# Applied here, never by hand, so a new test lands on the right side by what it uses: a real model
# (torch), the GCS emulator, a real sshd, NeMo Gym's servers, DVC's own CLI (each call starts a
# ~1 s interpreter: ask for the ``dvc_cli`` fixture to run it), a subprocess benchmark, the README
# loop, or a validation of the statistics by enumeration, simulation or mutants. A
# fixture parametrized by the name of one of those fixtures (``params=["folder", "gcs"]``, then
# ``request.getfixturevalue("gcs")``) counts as using it. Everything else (the ledger, its rules,
# verify, the hooks, the CLI's refusals on a real git repository) is the fast side;
# tests/test_suite_sides.py checks where a few land.
SLOW_FIXTURES = frozenset({
    "tiny_models", "base_model", "emulator", "gcs", "read_only_gcs",  # torch; the GCS emulator
    "sshd", "fresh_sshd", "conn", "ssh_keys",  # a real OpenSSH server on loopback
    "gym_python", "gym", "checkout", "server_procs",  # NeMo Gym's venv and servers
    "trainable", "ready", "teacher", "exp",  # experiments whose baselines a real model scored
    "light_wheel", "light_install",  # a wheel of this tree in a fresh virtualenv
    "dvc_cli",  # DVC's own command line
    "grader_setup", "nemo_grader",  # a real grader: Unix users, sshd, a tiny model (tests/grader)
})
SLOW_PATHS = (
    "training/", "remote/", "envs/nemo/", "reliability/",  # real models, servers, fault campaigns
    "models/test_tiny_model.py", "envs/test_lmeval_exam.py", "envs/test_lmeval_content.py",
    "evals/test_samples_eval.py", "verify/test_recorded.py",
    "test_bench.py", "cli/test_readme_loop.py",
    # real Unix users and sshd; the lm-eval one imports lm_eval as it is collected
    "grader/test_real_grader.py", "grader/test_lmeval_grader.py", "grader/test_nemo_grader.py",
    "grader/test_vault_copy.py", "grader/test_hub_weights.py", "grader/test_grader_behaviour.py",
    "grader/test_catalog_draw.py", "grader/test_grader_read_ends.py",
    # the statistics' validations, seconds of numpy each (`pytest tests/stats` runs them with the
    # rest when monte/stats changes): exact enumeration on fine grids, simulations, mutation checks
    "stats/test_exact.py", "stats/test_samples_sizes.py", "stats/test_cutoff_table.py",
    "stats/test_mutations.py", "stats/test_sample_mutations.py",
    "test_suite_sides.py",  # a collection of the whole suite
)
SLOW_MODULES = ("torch", "transformers", "trl", "lm_eval", "accelerate")


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    """Under ``-m "not slow"`` a file the paths above make slow is not even imported (torch,
    transformers and NeMo Gym's clients cost seconds to import, per worker)."""
    root, path = Path(__file__).parent, collection_path.resolve()
    if config.getoption("markexpr", "").strip() != "not slow" or not path.is_relative_to(root):
        return None
    return True if path.is_file() and path.relative_to(root).as_posix().startswith(SLOW_PATHS) else None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    _group(config, items)
    root = Path(__file__).parent
    for item in items:
        rel = Path(str(item.fspath)).resolve().relative_to(root).as_posix()
        module = getattr(item, "module", None)
        imports = {getattr(v, "__name__", "").split(".")[0] for v in vars(module).values()} if module else set()
        callspec = getattr(item, "callspec", None)
        params = {v for v in callspec.params.values() if isinstance(v, str)} if callspec else set()
        if ((set(getattr(item, "fixturenames", ())) | params) & SLOW_FIXTURES or rel.startswith(SLOW_PATHS)
                or imports & set(SLOW_MODULES)):
            item.add_marker(pytest.mark.slow)


def _group(config: pytest.Config, items: list[pytest.Item]) -> None:
    """``--dist loadgroup`` on pytest 9.2: pytest-xdist (3.8) marks a grouped test by suffixing
    ``item._nodeid``, which pytest 9.2 no longer reads (its node id is ``_id``), so each group's
    tests were spread over the workers; the order-dependent real-grader modules then failed. The
    same suffix, set where pytest 9.2 reads it (a no-op where xdist's own suffix took)."""
    if not getattr(config.option, "loadgroup", False):
        return
    for item in items:
        names = sorted({str(m.args[0] if m.args else m.kwargs.get("name", "default"))
                        for m in item.iter_markers("xdist_group")})
        if names and "@" not in item.nodeid and hasattr(item, "_id"):
            from _pytest.nodeid import coerce_node_id

            item._id = coerce_node_id(f"{item.nodeid}@{'_'.join(names)}")


@pytest.fixture
def dvc_cli() -> Callable[..., str]:
    """DVC's own command line, as a user runs it: ``dvc_cli(cwd, *args, check=True)``."""
    return run_dvc


@pytest.fixture(autouse=True)
def _isolated(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """Keep every test out of $HOME, the real data root and the developer's git config."""
    scrubbed(monkeypatch, tmp_path_factory.mktemp("home"))


@pytest.fixture(scope="session")
def _template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("template") / "repo"
    root.mkdir()
    env = {**os.environ, **PINNED_ENV, "HOME": str(root.parent)}
    subprocess.run(["git", "init", "-q", "-b", "main", str(root)], check=True, env=env)
    subprocess.run([sys.executable, "-c", "from monte.cli.main import main; main(['init'])"],
                   cwd=root, check=True, env=env, capture_output=True)
    return root


@pytest.fixture
def repo(_template: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh monte repository (git + .monte.yaml + data root + .dvc/), as the cwd."""
    dest = tmp_path / "repo"
    shutil.copytree(_template, dest, symlinks=True)
    monkeypatch.chdir(dest)
    return dest


@pytest.fixture(scope="session")
def kept(tmp_path_factory: pytest.TempPathFactory) -> Kept:
    """The states many tests start from, kept once built (``tests/support/kept.py``)."""
    return Kept(tmp_path_factory.mktemp("kept"))


@dataclass
class Result:
    code: int
    out: str
    err: str

    def json(self) -> Any:
        return json.loads(self.out)


@pytest.fixture
def monte(capsys: pytest.CaptureFixture[str]):
    """Run the CLI in-process: ``monte("env", "list", "--json")`` -> Result(code, out, err)."""
    from monte.cli.main import main

    def run(*args: str) -> Result:
        capsys.readouterr()
        code = 0
        try:
            main(list(args))
        except SystemExit as e:
            code = int(e.code or 0)
        out, err = capsys.readouterr()
        return Result(code, out, err)

    return run


@pytest.fixture
def unchanged(repo: Path) -> Iterator[None]:
    """Assert the test body left refs and the data root exactly as they were."""
    before = snapshot_state(repo)
    yield
    assert snapshot_state(repo) == before


# --- an experiment's ledger, and experiments made through the CLI ----------------------------------


@pytest.fixture
def store(repo: Path, request: pytest.FixtureRequest) -> Store:
    """A store of ``repo`` holding one ledger, of the test module's ``MEASUREMENT`` (made with
    ``tests.support.ledger.measurement``)."""
    from tests.support.ledger import ledger_store

    return ledger_store(repo, request.module.MEASUREMENT)


def _experiment(monte: Any, *env: str, model: Path | None = None) -> str:
    """``monte env add ENV...``, then experiment ``exp`` evaluated on parity (from ``model``)."""
    assert monte("env", "add", *env).code == 0
    r = monte("experiment", "init", "exp", "--eval", "parity", *(("--model", str(model)) if model else ()))
    assert r.code == 0, r.err
    return "exp"


@pytest.fixture
def exp(repo: Path, monte: Any, base_model: Path, tmp_path: Path, kept: Kept) -> str:
    """An experiment on the trainable parity environment (dev 200, test 200), base model seed 0.
    Built once per worker (``kept``)."""
    def build() -> None:
        _experiment(monte, "--server", "parity", "--dev", "parity", "--test", "parity", model=base_model)

    kept.restore("exp", repo, tmp_path, build)
    return "exp"


@pytest.fixture
def benchmark_exp(repo: Path, monte: Any) -> str:
    """An experiment on the parity benchmark, with no base model (no torch)."""
    return _experiment(monte, "--benchmark", "parity")


@pytest.fixture(scope="session")
def tiny_models(tmp_path_factory: pytest.TempPathFactory) -> dict[int, Path]:
    """Real tiny models (no download), seeds 0..3: one tokenizer, different weights. Torch runs
    on one thread: two threads on a busy 2-core machine are many times slower."""
    import torch

    from monte.models.tiny import init_model

    torch.set_num_threads(1)
    root = tmp_path_factory.mktemp("models")
    out = {}
    for seed in (0, 1, 2, 3):
        init_model(root / f"seed{seed}", seed=seed)
        out[seed] = root / f"seed{seed}"
    return out


@pytest.fixture
def base_model(tiny_models: dict[int, Path]) -> Path:
    return tiny_models[0]


# --- the GCS emulator ----------------------------------------------------------------------------


@pytest.fixture(scope="session")
def emulator(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Emulator]:
    """A real ``gcp-storage-emulator`` on loopback, its data on disk (it can be killed and restarted)."""
    emu = Emulator(tmp_path_factory.mktemp("gcs-emulator"))
    yield emu
    emu.kill()


@pytest.fixture
def read_only_gcs(emulator: Emulator) -> Iterator[ReadOnlyProxy]:
    """The emulator behind a proxy that answers every write 403: a key that cannot write."""
    proxy = ReadOnlyProxy(emulator.host)
    yield proxy
    proxy.close()


@pytest.fixture
def gcs(emulator: Emulator, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> dict[str, str]:
    """Point monte at the emulator with a fresh bucket and one key on both ladders."""
    return gcs_env(emulator, monkeypatch, tmp_path)


# --- the light install (`pip install monte`) of this checkout, built once per test worker --------


@dataclass
class LightInstall:
    wheel: Path  # the wheel bench/light_install.py builds from this tree
    python: Path  # a fresh virtualenv with that wheel and its core dependencies (no torch, TRL, DVC)

    @property
    def spec(self) -> str:
        """The wheel as a pip requirement (what a workflow's install line names)."""
        return f"monte @ {self.wheel.as_uri()}"


def _light_bench() -> Any:

    spec = importlib.util.spec_from_file_location("light_install", Path(__file__).resolve().parents[1] / "bench"
                                                  / "light_install.py")
    assert spec and spec.loader
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    return bench


@pytest.fixture(scope="session")
def light_wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    built: Path = _light_bench().build_wheel(tmp_path_factory.mktemp("light-wheel"))
    return built


@pytest.fixture(scope="session")
def light_install(tmp_path_factory: pytest.TempPathFactory, light_wheel: Path) -> LightInstall:
    """The light install in a fresh virtualenv; skips (saying why) where the package index that
    its core dependencies come from cannot be reached."""
    venv = tmp_path_factory.mktemp("light") / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    r = subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "-q", str(light_wheel)],
                       capture_output=True, text=True)
    if r.returncode != 0:
        pytest.skip(f"the light install needs the package index, which is not reachable: {r.stderr[-300:]}")
    return LightInstall(light_wheel, venv / "bin" / "python")
