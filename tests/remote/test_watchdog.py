"""The box watchdog: its rules on a fake clock, its systemd units, the tick script run for real
against a fake Lambda API on loopback, and arming a "box" (the local sshd) over SSH."""

from __future__ import annotations

import ast
import configparser
import contextlib
import json
import os
import shutil
import stat
import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from monte.errors import MonteError
from monte.remote import watchdog
from monte.remote.watchdog import decide
from tests.support.fake_lambda import KEY, FakeLambda

T0 = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
MIN = timedelta(minutes=1)
HOUR = timedelta(hours=1)


# --- the rules, on a fake clock ---------------------------------------------------------------


def test_idle_fires_at_45_minutes_not_at_44() -> None:
    assert decide(T0 + 44 * MIN, T0, None, False) is None
    assert decide(T0 + 44 * MIN + timedelta(seconds=59), T0, None, False) is None
    assert decide(T0 + 45 * MIN, T0, None, False) == "idle"


def test_activity_resets_the_idle_clock() -> None:
    active = T0 + 2 * HOUR
    assert decide(active + 44 * MIN, T0, active, False) is None
    assert decide(active + 45 * MIN, T0, active, False) == "idle"


def test_no_activity_yet_counts_from_launch() -> None:
    assert decide(T0 + 30 * MIN, T0, None, False) is None
    # an activity time from before the launch (a clock skew) cannot extend the box's life
    assert decide(T0 + 45 * MIN, T0, T0 - HOUR, False) == "idle"


def test_keep_alive_disables_idle_only() -> None:
    assert decide(T0 + 5 * HOUR, T0, None, True) is None
    assert decide(T0 + 12 * HOUR, T0, None, True) == "ttl"


def test_ttl_fires_at_12_hours_even_with_keep_alive_and_activity() -> None:
    now = T0 + 12 * HOUR
    assert decide(now - timedelta(seconds=1), T0, now - timedelta(seconds=1), True) is None
    assert decide(now, T0, now, True) == "ttl"
    assert decide(now, T0, now, False) == "ttl"


def test_thresholds_are_the_seeds() -> None:
    assert watchdog.IDLE == timedelta(minutes=45)
    assert watchdog.TTL == timedelta(hours=12)


def test_decide_thresholds_can_be_overridden() -> None:
    assert decide(T0 + 10 * MIN, T0, None, False, idle=10 * MIN) == "idle"
    assert decide(T0 + 2 * HOUR, T0, None, True, ttl=2 * HOUR) == "ttl"


# --- the systemd units ------------------------------------------------------------------------


def _ini(text: str) -> configparser.ConfigParser:
    p = configparser.ConfigParser(strict=True, interpolation=None)
    p.optionxform = str  # type: ignore[assignment,method-assign]  # systemd keys are case-sensitive
    p.read_string(text)
    return p


def test_service_unit_runs_one_tick_of_the_shipped_script() -> None:
    unit = _ini(watchdog.service_unit("/etc/monte"))
    assert unit.sections() == ["Unit", "Service"]
    assert unit["Service"]["Type"] == "oneshot"
    assert unit["Service"]["ExecStart"] == (
        "/usr/bin/python3 /etc/monte/watchdog.py tick --etc /etc/monte")
    other = _ini(watchdog.service_unit("/srv/monte/", python="/opt/py/bin/python3"))
    assert other["Service"]["ExecStart"] == (
        "/opt/py/bin/python3 /srv/monte/watchdog.py tick --etc /srv/monte")


def test_timer_unit_ticks_every_minute() -> None:
    unit = _ini(watchdog.timer_unit())
    assert unit.sections() == ["Unit", "Timer", "Install"]
    assert unit["Timer"]["OnBootSec"] == "1min"
    assert unit["Timer"]["OnUnitActiveSec"] == "1min"
    assert unit["Timer"]["Unit"] == "monte-watchdog.service"
    assert unit["Install"]["WantedBy"] == "timers.target"


def test_units_pass_systemd_analyze_verify(tmp_path: Path) -> None:
    analyze = shutil.which("systemd-analyze")
    if analyze is None:
        pytest.skip("systemd-analyze is not installed; the units were checked as INI only")
    python = watchdog.PYTHON if os.path.exists(watchdog.PYTHON) else sys.executable
    (tmp_path / watchdog.SERVICE).write_text(watchdog.service_unit(python=python))
    (tmp_path / watchdog.TIMER).write_text(watchdog.timer_unit())
    r = subprocess.run([analyze, "verify", "--man=no", str(tmp_path / watchdog.SERVICE),
                        str(tmp_path / watchdog.TIMER)], capture_output=True, text=True,
                       cwd=tmp_path, timeout=60)
    assert r.returncode == 0, r.stderr
    assert "monte-watchdog" not in r.stderr, r.stderr  # no warning about our units either


# --- the tick script, run for real against a fake Lambda API ----------------------------------


INSTANCE = "i-0123abcd"
TERMINATE = "/api/v1/instance-operations/terminate"


@pytest.fixture
def fake_lambda() -> Iterator[FakeLambda]:
    """The fake Lambda API (tests/support/fake_lambda.py), holding the box's instance."""
    f = FakeLambda().start()
    f.add_instance("monte-box", iid=INSTANCE)
    yield f
    f.stop()


@pytest.fixture
def box_etc(tmp_path: Path, fake_lambda: FakeLambda) -> Path:
    """An armed box's /etc/monte, in a temporary folder: box.json, secrets, the script."""
    etc = tmp_path / "etc-monte"
    etc.mkdir()
    (etc / "watchdog.py").write_text(watchdog.script_text())
    (etc / "secrets").write_text(f"OTHER=x\nMONTE_LAMBDA_KEY={KEY}\n")
    (etc / "secrets").chmod(0o600)
    _box(etc, launched=datetime.now(UTC) - HOUR, api_base=fake_lambda.url)
    return etc


def _box(etc: Path, *, launched: datetime, api_base: str) -> None:
    record = watchdog.box_record({"id": INSTANCE, "launched_at": launched,
                                  "api_base": api_base})
    (etc / "box.json").write_text(json.dumps(record))


def _tick(etc: Path, tmux_dir: Path) -> subprocess.CompletedProcess[str]:
    # -I: no site-packages, no monte, no cwd on the path, as on a box monte is not installed on
    return subprocess.run([sys.executable, "-I", str(etc / "watchdog.py"), "tick", "--etc",
                           str(etc), "--tmux-dir", str(tmux_dir)],
                          capture_output=True, text=True, timeout=60, env={"PATH": os.defpath})


def _state(etc: Path) -> dict[str, Any]:
    return dict(json.loads((etc / "watchdog.json").read_text()))


def test_idle_box_is_terminated_once_through_the_api(box_etc: Path, fake_lambda: FakeLambda,
                                                     tmp_path: Path) -> None:
    (box_etc / "watchdog.json").write_text(json.dumps(
        {"last_active": (datetime.now(UTC) - 50 * MIN).isoformat()}))
    r = _tick(box_etc, tmp_path / "no-tmux")
    assert r.returncode == 0, r.stderr
    assert fake_lambda.log == [("POST", TERMINATE, {"instance_ids": [INSTANCE]})]
    assert fake_lambda.auth_headers == [f"Bearer {KEY}"]
    state = _state(box_etc)
    assert state["decision"] == "idle"
    assert state["terminate_requested"]["reason"] == "idle"
    assert KEY not in r.stdout + r.stderr + (box_etc / "watchdog.json").read_text()


def test_recently_active_box_is_left_alone(box_etc: Path, fake_lambda: FakeLambda,
                                           tmp_path: Path) -> None:
    (box_etc / "watchdog.json").write_text(json.dumps(
        {"last_active": (datetime.now(UTC) - 10 * MIN).isoformat()}))
    r = _tick(box_etc, tmp_path / "no-tmux")
    assert r.returncode == 0, r.stderr
    assert fake_lambda.auth_headers == []  # no request at all
    assert _state(box_etc)["decision"] is None


def test_keep_alive_box_is_not_terminated_when_idle(box_etc: Path, fake_lambda: FakeLambda,
                                                    tmp_path: Path) -> None:
    (box_etc / "keep-alive").touch()
    r = _tick(box_etc, tmp_path / "no-tmux")  # launched an hour ago, never active
    assert r.returncode == 0, r.stderr
    assert fake_lambda.auth_headers == []  # no request at all
    assert _state(box_etc)["keep_alive"] is True


def test_ttl_terminates_even_with_keep_alive(box_etc: Path, fake_lambda: FakeLambda,
                                             tmp_path: Path) -> None:
    _box(box_etc, launched=datetime.now(UTC) - 12 * HOUR - MIN, api_base=fake_lambda.url)
    (box_etc / "keep-alive").touch()
    (box_etc / "watchdog.json").write_text(json.dumps({"last_active": datetime.now(UTC).isoformat()}))
    r = _tick(box_etc, tmp_path / "no-tmux")
    assert r.returncode == 0, r.stderr
    assert fake_lambda.log == [("POST", TERMINATE, {"instance_ids": [INSTANCE]})]
    assert len(fake_lambda.auth_headers) == 1
    assert _state(box_etc)["decision"] == "ttl"


@contextlib.contextmanager
def _tmux_sessions(tmp_path: Path, *names: str) -> Iterator[Path]:
    """A private tmux server running ``sleep 120`` in each named session; yields its
    TMUX_TMPDIR, and kills the server after."""
    tmux = shutil.which("tmux")
    if tmux is None:
        pytest.skip("tmux is not installed")
    tmux_dir = tmp_path / "tmux"
    tmux_dir.mkdir()
    env = {"PATH": os.defpath, "TMUX_TMPDIR": str(tmux_dir), "HOME": str(tmp_path)}
    for name in names:
        subprocess.run([tmux, "new-session", "-d", "-s", name, "sleep 120"], env=env, check=True, timeout=30)
    try:
        yield tmux_dir
    finally:
        subprocess.run([tmux, "kill-server"], env=env, timeout=30)


@pytest.fixture
def tmux_job(tmp_path: Path) -> Iterator[Path]:
    """A live ``monte-*`` tmux session (and a session of another name) on a private tmux server;
    yields its TMUX_TMPDIR."""
    with _tmux_sessions(tmp_path, "monte-job-1", "interactive") as tmux_dir:
        yield tmux_dir


def test_a_monte_tmux_session_is_activity(box_etc: Path, fake_lambda: FakeLambda,
                                          tmux_job: Path, tmp_path: Path) -> None:
    # launched an hour ago and never active before: idle, but for the job that is running now
    r = _tick(box_etc, tmux_job)
    assert r.returncode == 0, r.stderr
    assert fake_lambda.auth_headers == []  # no request at all
    state = _state(box_etc)
    assert state["jobs"] == ["monte-job-1"]  # the other session is not a job
    assert datetime.fromisoformat(state["last_active"]) > datetime.now(UTC) - MIN
    assert watchdog.activity_probe(str(tmux_job)) is True
    assert watchdog.activity_probe(str(tmp_path / "no-tmux")) is False


def test_a_non_monte_tmux_session_is_not_activity(tmp_path: Path) -> None:
    with _tmux_sessions(tmp_path, "my-shell") as tmux_dir:
        assert watchdog.activity_probe(str(tmux_dir)) is False


def test_failed_terminate_is_recorded_and_the_tick_fails(box_etc: Path, fake_lambda: FakeLambda,
                                                         tmp_path: Path) -> None:
    fake_lambda.fail_500[TERMINATE] = 1  # this tick's call only
    r = _tick(box_etc, tmp_path / "no-tmux")
    assert r.returncode == 1
    assert "HTTP 500" in r.stderr
    assert len(fake_lambda.auth_headers) == 1
    state = _state(box_etc)
    assert state["decision"] == "idle" and "HTTP 500" in state["error"]
    assert "terminate_requested" not in state
    assert KEY not in r.stdout + r.stderr + json.dumps(state)
    # the next tick tries again, and Lambda answers it
    assert _tick(box_etc, tmp_path / "no-tmux").returncode == 0
    assert len(fake_lambda.auth_headers) == 2
    assert "error" not in _state(box_etc)


def test_missing_key_fails_the_tick_without_a_call(box_etc: Path, fake_lambda: FakeLambda,
                                                   tmp_path: Path) -> None:
    (box_etc / "secrets").write_text("OTHER=x\n")
    r = _tick(box_etc, tmp_path / "no-tmux")
    assert r.returncode == 1
    assert "MONTE_LAMBDA_KEY" in r.stderr
    assert fake_lambda.auth_headers == []  # no request at all


def test_key_from_arms_own_file_survives_a_job_replacing_secrets(
        box_etc: Path, fake_lambda: FakeLambda, tmp_path: Path) -> None:
    (box_etc / "watchdog-secrets").write_text(f"MONTE_LAMBDA_KEY={KEY}\n")
    (box_etc / "secrets").write_text("HF_TOKEN=hf_x\n")  # a job's own set, without the key
    assert _tick(box_etc, tmp_path / "no-tmux").returncode == 0
    assert fake_lambda.auth_headers == [f"Bearer {KEY}"]


def _done(etc: Path, tmux_dir: Path, job: str | None) -> subprocess.CompletedProcess[str]:
    env = {"PATH": os.defpath, **({"MONTE_JOB": job} if job else {})}
    return subprocess.run([sys.executable, "-I", str(etc / "watchdog.py"), "done", "--etc",
                           str(etc), "--tmux-dir", str(tmux_dir)],
                          capture_output=True, text=True, timeout=60, env=env)


def test_job_done_terminates_the_box(box_etc: Path, fake_lambda: FakeLambda,
                                     tmp_path: Path) -> None:
    _box(box_etc, launched=datetime.now(UTC), api_base=fake_lambda.url)  # young, not idle
    r = _done(box_etc, tmp_path / "no-tmux", "monte-job-1")
    assert r.returncode == 0, r.stderr
    assert fake_lambda.log == [("POST", TERMINATE, {"instance_ids": [INSTANCE]})]
    assert len(fake_lambda.auth_headers) == 1
    assert _state(box_etc)["terminate_requested"]["reason"] == "done"


def test_job_done_counts_neither_itself_nor_other_sessions(
        box_etc: Path, fake_lambda: FakeLambda, tmux_job: Path) -> None:
    # the caller is monte-job-1 itself, still alive while it runs `done`; "interactive" is no job
    assert _done(box_etc, tmux_job, "monte-job-1").returncode == 0
    assert len(fake_lambda.auth_headers) == 1


def test_job_done_leaves_a_box_with_another_job(box_etc: Path, fake_lambda: FakeLambda,
                                                tmux_job: Path) -> None:
    r = _done(box_etc, tmux_job, "monte-job-2")  # monte-job-1 is still running
    assert r.returncode == 0, r.stderr
    assert fake_lambda.auth_headers == []  # no request at all
    assert _state(box_etc)["job_done"]["other_jobs"] == ["monte-job-1"]


def test_job_done_leaves_a_kept_alive_box(box_etc: Path, fake_lambda: FakeLambda,
                                          tmp_path: Path) -> None:
    (box_etc / "keep-alive").touch()
    assert _done(box_etc, tmp_path / "no-tmux", "monte-job-1").returncode == 0
    assert fake_lambda.auth_headers == []  # no request at all


def test_unarmed_box_fails_the_tick(tmp_path: Path) -> None:
    etc = tmp_path / "etc"
    etc.mkdir()
    (etc / "watchdog.py").write_text(watchdog.script_text())
    r = _tick(etc, tmp_path / "no-tmux")
    assert r.returncode == 1
    assert "box.json is missing" in r.stderr


def test_script_imports_only_the_standard_library() -> None:
    tree = ast.parse(watchdog.script_text())
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            assert node.level == 0
            names.add((node.module or "").split(".")[0])
    assert names - {"__future__"} <= sys.stdlib_module_names, names - sys.stdlib_module_names


def test_module_entry_point_runs_the_same_tick(box_etc: Path, fake_lambda: FakeLambda,
                                               tmp_path: Path) -> None:
    r = subprocess.run([sys.executable, "-m", "monte.remote.watchdog", "tick", "--etc",
                        str(box_etc), "--tmux-dir", str(tmp_path / "no-tmux")],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["decision"] == "idle"
    assert len(fake_lambda.auth_headers) == 1


def test_secrets_written_by_monte_read_back_exactly(tmp_path: Path) -> None:
    from monte.remote import ssh, watchdog_script

    values = {"A": "plain", "B": "with space", "C": "it's \"quoted\" $HOME `x`", "D": ""}
    path = tmp_path / "secrets"
    path.write_text(ssh.secrets_text(values))
    assert watchdog_script.read_secrets(str(path)) == values


def test_box_record_normalises() -> None:
    rec = watchdog.box_record({"id": "i-1", "launched_at": "2026-01-01T12:00:00Z", "name": "b"})
    assert rec == {"instance_id": "i-1", "launched_at": "2026-01-01T12:00:00+00:00",
                   "api_base": watchdog.DEFAULT_API_BASE, "name": "b"}
    with pytest.raises(MonteError):
        watchdog.box_record({"id": "i-1"})


# --- arming a box over SSH (the local sshd plays the box) -------------------------------------


def test_arm_writes_everything_the_watchdog_needs(conn: Any, tmp_path: Path) -> None:
    etc = tmp_path / "etc-monte"
    python = watchdog.PYTHON if os.path.exists(watchdog.PYTHON) else sys.executable
    launched = datetime.now(UTC).replace(microsecond=0)
    record = watchdog.arm(conn, {"id": "i-armed", "launched_at": launched,
                                 "api_base": "http://127.0.0.1:9/api/v1"},
                          KEY, keep_alive=True, etc=str(etc), systemd=False, python=python)

    assert record["instance_id"] == "i-armed"
    assert json.loads((etc / "box.json").read_text()) == record
    assert datetime.fromisoformat(record["launched_at"]) == launched
    for name in ("secrets", "watchdog-secrets"):
        assert stat.S_IMODE((etc / name).stat().st_mode) == 0o600
        assert (etc / name).read_text() == f"MONTE_LAMBDA_KEY={KEY}\n"
    assert stat.S_IMODE(etc.stat().st_mode) == 0o700
    assert (etc / "watchdog.py").read_text() == watchdog.script_text()
    assert os.access(etc / "watchdog.py", os.X_OK)
    assert (etc / watchdog.SERVICE).read_text() == watchdog.service_unit(str(etc), python=python)
    assert (etc / watchdog.TIMER).read_text() == watchdog.timer_unit()
    assert (etc / "keep-alive").exists()
    # arm ran one tick on the "box": the script works there, and decided to leave it up
    assert _state(etc)["decision"] is None
    assert not list(etc.glob("*monte-tmp*"))


def test_arm_without_keep_alive_leaves_no_flag(conn: Any, tmp_path: Path) -> None:
    etc = tmp_path / "etc-monte"
    watchdog.arm(conn, {"instance_id": "i-2", "launched_at": datetime.now(UTC)}, KEY,
                 keep_alive=False, etc=str(etc), systemd=False, python=sys.executable)
    assert not (etc / "keep-alive").exists()
    watchdog.keep_alive_on(conn, str(etc))
    assert (etc / "keep-alive").exists()
