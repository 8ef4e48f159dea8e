"""Secrets never leak: run the storage flows and the remote flow with recognisable fake
credentials, then look for them everywhere they must not be.

The credentials: the GCS service-account key (``FAKE_SECRET`` from ``tests/support/gcs_emulator.py`` is
its private key), and a fake ``HF_TOKEN`` and ``MONTE_LAMBDA_KEY`` in the environment of every
command. The flows, for real: ``env add`` and ``dataset add`` into a Vault on the GCS emulator,
``push``, ``sync`` into a second clone, ``env install`` / ``dataset show`` there (a fetch from the
Vault), ``env list --vault``, ``dataset list --vault``, the key ladders' refusals (a key file
that is not a key, with the secret inside it), and ``monte eval --remote --provider ssh``
through a real sshd on loopback (the job runs, pushes, and is synced back).

Where we look, for each marker: the argv of every process on the machine while the flows run
(``/proc/*/cmdline``, sampled every 20 ms), every ``--json`` output and error message, every
file under both clones (git objects unpacked with ``git cat-file --batch-all-objects --batch``,
the data roots with their run folders and ``events.jsonl``, ``.dvc``), every object in the
emulator's buckets, and on the box the checkout, the data root, the job's log and its environment
file. Zero occurrences. The key files monte writes on the box (``secrets``, ``gcs-key.json``)
and the job's environment file are mode 0600.
"""

from __future__ import annotations

import json
import os
import pwd
import shutil
import stat
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.gcs_emulator import FAKE_SECRET, Emulator, gcs_env
from tests.support.helpers import append_evals, push_to_new_origin
from tests.support.sshd import Sshd, module_sshd

HF_TOKEN = "hf_MONTEFAKETOKEN9d2e41"
LAMBDA_KEY = "secret_monte-fake-lambda_4b1f0c"
MARKERS = {"gcs key": FAKE_SECRET, "HF_TOKEN": HF_TOKEN, "MONTE_LAMBDA_KEY": LAMBDA_KEY}


class ArgvWatch:
    """Samples the argv of every process on the machine until stopped."""

    def __init__(self) -> None:
        self.seen: dict[int, bytes] = {}
        self.samples = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            for pid in os.listdir("/proc"):
                if pid.isdigit():
                    try:
                        with open(f"/proc/{pid}/cmdline", "rb") as f:
                            argv = f.read()
                    except OSError:
                        continue
                    key = hash((pid, argv))
                    self.seen.setdefault(key, argv)
            self.samples += 1
            self._stop.wait(0.02)

    def __enter__(self) -> ArgvWatch:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def leaks(self) -> list[str]:
        return [f"{what} in argv: {argv[:200]!r}" for argv in self.seen.values()
                for what, m in MARKERS.items() if m.encode() in argv]


class Outputs:
    """Every command's stdout and stderr, to be scanned."""

    def __init__(self, monte: Any) -> None:
        self.monte = monte
        self.text: list[str] = []
        self.commands = 0

    def __call__(self, *args: str) -> Any:
        r = self.monte(*args)
        self.text += [r.out, r.err]
        self.commands += 1
        return r

    def proc(self, cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
        p = subprocess.run([sys.executable, "-c", "from monte.cli.main import main; main()", *args], cwd=cwd,
                           capture_output=True, text=True, timeout=600)
        self.text += [p.stdout, p.stderr]
        self.commands += 1
        return p

    def leaks(self) -> list[str]:
        return [f"{what} in command output: ...{t[max(0, t.find(m) - 80):t.find(m) + 40]!r}"
                for t in self.text for what, m in MARKERS.items() if m in t]


def scan_tree(root: Path, skip: tuple[Path, ...] = ()) -> tuple[int, list[str]]:
    """Every file under ``root`` (symlinks not followed), plus the unpacked git objects of every
    repository found; returns (files scanned, leaks)."""
    leaks, files = [], 0
    for folder, dirs, names in os.walk(root):
        if any(Path(folder) == s or Path(folder).is_relative_to(s) for s in skip):
            dirs[:] = []
            continue
        if (Path(folder) / "HEAD").is_file() and (Path(folder) / "objects").is_dir():  # a git dir, bare or not:
            r = subprocess.run(["git", f"--git-dir={folder}", "cat-file", "--batch-all-objects", "--batch"],
                               capture_output=True)  # its objects unpacked (packs are compressed)
            files += 1
            leaks += [f"{what} in a git object of {folder}" for what, m in MARKERS.items() if m.encode() in r.stdout]
        for name in names:
            p = Path(folder) / name
            if p.is_symlink() or not p.is_file() or any(p == s for s in skip):
                continue
            files += 1
            data = p.read_bytes()
            leaks += [f"{what} in {p}" for what, m in MARKERS.items() if m.encode() in data]
    return files, leaks


@pytest.fixture
def secrets_env(emulator: Emulator, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> dict[str, str]:
    (tmp_path / "keys").mkdir()
    g = gcs_env(emulator, monkeypatch, tmp_path / "keys")  # the key file holds FAKE_SECRET
    monkeypatch.setenv("HF_TOKEN", HF_TOKEN)
    monkeypatch.setenv("MONTE_LAMBDA_KEY", LAMBDA_KEY)
    return g


def _clone(laptop: Path, dest: Path) -> Path:
    shutil.copytree(laptop, dest, symlinks=True, ignore=shutil.ignore_patterns(".monte"))
    (dest / ".monte").mkdir()
    return dest


def test_storage_flows_leak_no_secret(repo: Path, monte: Any, secrets_env: dict[str, str], emulator: Emulator,
                                      tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    run = Outputs(monte)
    url = secrets_env["url"]
    rows = tmp_path / "rows.jsonl"
    rows.write_text('{"input": "p 1 =", "output": "odd"}\n{"input": "p 2 =", "output": "even"}\n')
    with ArgvWatch() as watch:
        args: tuple[str, ...]
        for args in (("config", "set", "vault", f"{url}/vault"), ("config", "set", "bucket", f"{url}/results"),
                     ("env", "add", "--benchmark", "parity"),
                     ("dataset", "add", "rows", "--from-file", str(rows), "--kind", "sft"),
                     ("experiment", "init", "exp", "--eval", "parity"),
                     ("env", "list", "--vault"), ("dataset", "list", "--vault")):
            r = run(*args, "--json")
            assert r.code == 0, (args, r.out)
            if args[1] == "add":
                assert "pushed to the Vault" in r.json()["note"], r.out  # the key was used to write
        append_evals(repo, 3)
        assert run("push", "--json").code == 0
        box = _clone(repo, tmp_path / "box")
        for args in (("sync",), ("env", "install", "parity"), ("dataset", "show", "rows"), ("status",),
                     ("env", "list", "--vault"), ("push",)):
            p = run.proc(box, *args, "--json")
            assert p.returncode == 0, (args, p.stdout, p.stderr)
        # the ladders' refusals: a key file that is not a key (the secret inside it), through a
        # real process, with and without --json; and --key-file naming it
        broken = tmp_path / "keys" / "broken.json"
        broken.write_text(f"not json at all {FAKE_SECRET} {{")
        broken.chmod(0o600)
        monkeypatch.setenv("MONTE_GCS_BOX_KEY_FILE", str(broken))
        monkeypatch.setenv("MONTE_GCS_KEY_FILE", str(broken))
        for args in (("push", "--json"), ("sync", "--json"), ("push",), ("env", "list", "--vault", "--json"),
                     ("dataset", "add", "rows2", "--from-file", str(rows), "--json")):
            p = run.proc(repo, *args)
            assert p.returncode in (0, 7), (args, p.stdout, p.stderr)  # a read-only fallback may succeed
            assert "Traceback" not in p.stdout + p.stderr
        p = run.proc(repo, "push", "--key-file", str(broken), "--json")
        assert p.returncode == 7 and json.loads(p.stdout)["error"]["code"] == "E_STORAGE"
        # a control: the watch does see a secret in a process's argv
        subprocess.run([sys.executable, "-c", "import time; time.sleep(0.5)", "CANARY", FAKE_SECRET], check=True)
    canary = [x for x in watch.leaks() if "CANARY" in x]
    assert canary, "the argv watch missed the control process"
    leaks = [x for x in watch.leaks() if "CANARY" not in x] + run.leaks()
    files = 0
    for root in (repo, box, emulator.data_dir):
        n, found = scan_tree(root)
        files += n
        leaks += found
    assert watch.samples > 20 and len(watch.seen) > 20 and run.commands >= 20 and files > 50
    assert not leaks, leaks[:10]


# --- the remote flow: a real sshd on loopback ------------------------------------------------------


@pytest.fixture(scope="module")
def sshd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Sshd]:
    yield from module_sshd(tmp_path_factory)


def test_remote_eval_leaks_no_secret(repo: Path, monte: Any, base_model: Path, secrets_env: dict[str, str],
                                     emulator: Emulator, sshd: Sshd, monkeypatch: pytest.MonkeyPatch,
                                     tmp_path: Path) -> None:
    """The laptop set-up of tests/remote/test_remote_runs.py, with every marker in the environment."""
    if not shutil.which("tmux"):
        pytest.skip("tmux is not installed (apt-get install tmux)")
    run = Outputs(monte)
    assert run("env", "add", "--server", "parity", "--dev", "parity", "--test", "parity").code == 0
    assert run("experiment", "init", "exp", "--eval", "parity", "--model", str(base_model),
               "--steps-per-chunk", "4").code == 0
    assert run("config", "set", "bucket", secrets_env["url"] + "/results").code == 0
    origin = tmp_path / "origin.git"
    push_to_new_origin(repo, origin)
    box = tmp_path / "box"
    for k, v in sshd.box_env(box).items():
        monkeypatch.setenv(k, v)
    host = sshd.login
    with ArgvWatch() as watch:
        r = run("eval", "--remote", "--provider", "ssh", "--host", host, "--yes", "--json")
        assert r.code == 0, r.out
        sub = r.json()
        exit_file = Path(sub["workdir"]) / f"{sub['session']}.log.exit"
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline and not (exit_file.exists() and exit_file.read_text().strip()):
            time.sleep(0.05)
        log = Path(sub["workdir"]) / f"{sub['session']}.log"
        assert exit_file.read_text().strip() == "0", log.read_text() if log.exists() else "no log"
        for args in (("sync", "--json"), ("status", "--json"), ("show", sub["runs"][0], "--json"),
                     ("logs", sub["runs"][0], "--json"), ("ledger", "verify", "--json")):
            assert run(*args).code == 0, args
    # 0600: what monte wrote on the box that holds a credential, and the job's environment file
    etc = box / "etc"
    # the job's environment file: under the box's etc (today), or the login user's home (before)
    env_file = next((f for f in (etc / "jobs" / f"{sub['session']}.env",
                                 Path(pwd.getpwuid(os.getuid()).pw_dir) / ".monte" / "jobs" / f"{sub['session']}.env")
                     if f.exists()), etc / "jobs" / f"{sub['session']}.env")
    for f in (etc / "secrets", etc / "gcs-key.json", env_file):
        assert stat.S_IMODE(f.stat().st_mode) == 0o600, f
    assert FAKE_SECRET in (etc / "gcs-key.json").read_text()  # the key did travel, as a file
    leaks = watch.leaks() + run.leaks()
    files = 0
    for root in (repo, box, origin, emulator.data_dir):
        n, found = scan_tree(root, skip=(etc / "gcs-key.json",))
        files += n
        leaks += found
    n, found = scan_tree(env_file.parent)
    leaks += [x for x in found if sub["session"] in x]
    assert scan_tree(etc)[1], "the file scan missed the key file itself (a control)"
    assert log.exists() and files > 50 and watch.samples > 20
    assert not leaks, leaks[:10]


def test_write_secret_file_is_0600_from_the_first_byte(tmp_path: Path) -> None:
    """``monte.storage.keys.write_secret_file`` (a Lambda box's identity file): 0600 whatever the
    umask, and an existing file with a wider mode is narrowed before it is written."""
    from monte.storage.keys import write_secret_file

    old = os.umask(0)
    try:
        write_secret_file(tmp_path / "a" / "new.json", FAKE_SECRET.encode())
        wide = tmp_path / "wide.json"
        wide.write_text("old")
        wide.chmod(0o666)
        write_secret_file(wide, FAKE_SECRET.encode())
    finally:
        os.umask(old)
    for f in (tmp_path / "a" / "new.json", wide):
        assert stat.S_IMODE(f.stat().st_mode) == 0o600 and f.read_bytes() == FAKE_SECRET.encode()
