"""`monte box up / status / down` through the CLI, against the fake Lambda on loopback.

The watchdog is armed over SSH on a real box, which cannot exist here: the seam
``monte.remote.boxes._arm_watchdog`` is replaced by a recorder. Everything else (the CLI, the api,
the client, the identity file on a real data root) is the real code.
"""

from __future__ import annotations

import json
import stat
import subprocess
import sys
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from monte.errors import error
from monte.remote import boxes
from tests.support.fake_lambda import KEY, FakeLambda, shrink_waits

Run = Callable[..., Any]


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeLambda]:
    f = FakeLambda().start()
    monkeypatch.setenv("MONTE_LAMBDA_API", f.url)
    monkeypatch.setenv("MONTE_LAMBDA_KEY", KEY)
    monkeypatch.setenv("MONTE_LAMBDA_FILESYSTEM", "monte-data")
    for var in ("MONTE_LAMBDA_KEY_OP", "MONTE_LAMBDA_SSH_KEY", "MONTE_BOX_WAIT_S"):
        monkeypatch.delenv(var, raising=False)
    shrink_waits(monkeypatch)
    yield f
    f.stop()


@pytest.fixture
def armed(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """The watchdog seam, replaced by a recorder of what `up` asked it to arm."""
    calls: list[dict[str, Any]] = []

    def record(box: dict[str, Any], key: str, keep_alive: bool) -> None:
        calls.append({"box": box, "key_ok": key == KEY, "keep_alive": keep_alive})

    monkeypatch.setattr(boxes, "_arm_watchdog", record)
    return calls


@pytest.fixture
def box(repo: Path, fake: FakeLambda, armed: list[dict[str, Any]], monte: Run) -> Run:
    """``box("up", "--json")``: runs ``monte box ...`` and checks the key is in no output."""

    def run(*args: str) -> Any:
        r = monte("box", *args)
        assert KEY not in r.out and KEY not in r.err
        return r

    return run


def identity_files(repo: Path) -> list[Path]:
    return sorted((repo / ".monte" / "boxes").glob("*.json"))


# --- up ------------------------------------------------------------------------------------------


def test_up_launches_in_the_home_region_waits_writes_identity_and_arms(
        box: Run, fake: FakeLambda, armed: list[dict[str, Any]], repo: Path) -> None:
    fake.boot_polls = 3
    r = box("up", "--json")
    assert r.code == 0, r.err
    doc = r.json()
    b = doc["box"]
    assert b["name"].startswith("monte-") and len(b["name"]) == len("monte-") + 8
    assert (b["region"], b["type"], b["cold"], b["file_systems"]) == \
        ("us-east-1", "gpu_1x_h100_pcie", False, ["monte-data"])
    # it waited: booting was seen, and it came back only once the instance was active with an ip
    assert "booting" in r.err and "active" in r.err
    [inst] = fake.live()
    assert inst["id"] == b["id"] and inst["status"] == "active" and inst["ip"] == b["ip"]
    assert inst["file_system_names"] == ["monte-data"] and inst["ssh_key_names"] == ["laptop"]
    # the identity file: 0600, the fields, no key
    [path] = identity_files(repo)
    assert path.name == f"{b['id']}.json" and doc["identity_file"] == str(path)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    ident = json.loads(path.read_text())
    for k in ("id", "name", "ip", "type", "region", "launched_at", "cold", "keep_alive"):
        assert ident[k] == b[k]
    assert (ident["ttl_hours"], ident["idle_minutes"]) == (12, 45)
    assert datetime.fromisoformat(ident["launched_at"]).tzinfo is not None
    assert KEY not in path.read_text()
    # armed once, after the file was written, with the key and keep-alive off
    assert armed == [{"box": {**ident, "api_base": fake.url}, "key_ok": True, "keep_alive": False}]
    assert doc["watchdog"] == {"armed": True, "idle_minutes": 45, "ttl_hours": 12,
                               "keep_alive": False}


def test_keep_alive_is_passed_to_the_watchdog_and_recorded(box: Run, armed: list[dict[str, Any]],
                                                           repo: Path) -> None:
    r = box("up", "--keep-alive")
    assert r.code == 0, r.err
    assert "idle check off" in r.out and "12 h" in r.out
    assert [c["keep_alive"] for c in armed] == [True]
    assert json.loads(identity_files(repo)[0].read_text())["keep_alive"] is True


def test_no_capacity_at_home_launches_elsewhere_cold_and_says_so(box: Run, fake: FakeLambda) -> None:
    fake.capacity["gpu_1x_h100_pcie"] = ["us-west-1"]
    r = box("up", "--json")
    assert r.code == 0, r.err
    b = r.json()["box"]
    assert (b["region"], b["cold"], b["file_systems"]) == ("us-west-1", True, [])
    notes = " ".join(r.json()["notes"])
    assert "no capacity" in notes and "us-east-1" in notes and "cannot serve a real run" in notes
    assert [i["region"]["name"] for i in fake.live()] == ["us-west-1"]


def test_a_stale_capacity_listing_moves_on_to_the_next_region(box: Run, fake: FakeLambda) -> None:
    fake.stale = {"us-east-1"}  # listed with capacity, refused at launch
    r = box("up", "--json")
    assert r.code == 0, r.err
    assert r.json()["box"]["region"] == "us-west-1"
    assert [b["region_name"] for b in fake.calls("POST", "/api/v1/instance-operations/launch")] == \
        ["us-east-1", "us-west-1"]
    assert len(fake.live()) == 1


def test_no_capacity_anywhere_refuses_and_launches_nothing(box: Run, fake: FakeLambda) -> None:
    fake.capacity["gpu_1x_h100_pcie"] = []
    r = box("up", "--json")
    assert r.code == 8 and r.json()["error"]["code"] == "E_BOX"
    assert "gpu_1x_a10" in r.json()["error"]["fix"]  # what has capacity now
    assert fake.calls("POST", "/api/v1/instance-operations/launch") == [] and fake.live() == []


def test_cold_attaches_no_file_system_and_says_it_cannot_serve_a_real_run(
        box: Run, fake: FakeLambda, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MONTE_LAMBDA_FILESYSTEM")  # a cold box does not need it
    r = box("up", "--cold")
    assert r.code == 0, r.err
    assert "cold" in r.out and "cannot serve a real run" in r.out
    [inst] = fake.live()
    assert inst["file_system_names"] == []
    assert fake.calls("POST", "/api/v1/instance-operations/launch")[0]["file_system_names"] == []


def test_region_flag_is_tried_first(box: Run, fake: FakeLambda) -> None:
    r = box("up", "--region", "us-west-1", "--type", "gpu_1x_h100_pcie", "--json")
    assert r.code == 0, r.err
    assert r.json()["box"]["region"] == "us-west-1" and r.json()["box"]["cold"] is True


def test_warm_without_a_file_system_named_refuses_before_launching(
        box: Run, fake: FakeLambda, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MONTE_LAMBDA_FILESYSTEM")
    r = box("up", "--json")
    assert r.code == 8
    err = r.json()["error"]
    assert "MONTE_LAMBDA_FILESYSTEM" in err["message"] and "--cold" in err["fix"]
    monkeypatch.setenv("MONTE_LAMBDA_FILESYSTEM", "nope")
    r = box("up", "--json")
    assert r.code == 8 and "monte-data" in r.json()["error"]["fix"]
    assert fake.live() == []


def test_ssh_key_choice(box: Run, fake: FakeLambda, monkeypatch: pytest.MonkeyPatch) -> None:
    fake.ssh_keys.append({"id": "k2", "name": "desktop", "public_key": "ssh-ed25519 BBBB"})
    r = box("up", "--json")
    assert r.code == 8 and "laptop" in r.json()["error"]["message"]
    assert "--ssh-key" in r.json()["error"]["fix"] and fake.live() == []
    r = box("up", "--ssh-key", "nope", "--json")
    assert r.code == 8 and "desktop" in r.json()["error"]["fix"]
    monkeypatch.setenv("MONTE_LAMBDA_SSH_KEY", "desktop")
    r = box("up", "--json")
    assert r.code == 0, r.err
    assert r.json()["box"]["ssh_key"] == "desktop"
    assert fake.live()[0]["ssh_key_names"] == ["desktop"]


def test_unknown_type_is_a_usage_error(box: Run, fake: FakeLambda) -> None:
    r = box("up", "--type", "gpu_9x_imaginary", "--json")
    assert r.code == 2 and r.json()["error"]["code"] == "E_USAGE"
    assert "gpu_1x_h100_pcie" in r.json()["error"]["fix"] and fake.live() == []


def test_never_active_is_terminated_and_refused(box: Run, fake: FakeLambda,
                                                armed: list[dict[str, Any]],
                                                monkeypatch: pytest.MonkeyPatch, repo: Path) -> None:
    fake.never_active = True
    monkeypatch.setenv("MONTE_BOX_WAIT_S", "0.2")
    r = box("up", "--json")
    assert r.code == 8
    err = r.json()["error"]
    assert err["code"] == "E_BOX" and "not active after 0.2 s" in err["message"]
    assert "terminated" in err["message"] and "nothing is left running" in err["message"]
    assert fake.live() == [] and len(fake.instances) == 1  # it existed, and it is gone
    assert identity_files(repo) == [] and armed == []


def test_a_watchdog_that_cannot_be_armed_terminates_the_box(
        box: Run, fake: FakeLambda, monkeypatch: pytest.MonkeyPatch, repo: Path) -> None:
    def broken(box: dict[str, Any], key: str, keep_alive: bool) -> None:
        raise error("E_BOX", "ssh to the box failed: connection refused", "check the SSH key")

    monkeypatch.setattr(boxes, "_arm_watchdog", broken)
    r = box("up", "--json")
    assert r.code == 8
    err = r.json()["error"]
    assert "ssh to the box failed" in err["message"] and "terminated" in err["message"]
    assert fake.live() == [] and identity_files(repo) == []


def test_interrupted_while_starting_terminates_the_box(box: Run, fake: FakeLambda,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    def interrupted(box: dict[str, Any], key: str, keep_alive: bool) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(boxes, "_arm_watchdog", interrupted)
    r = box("up", "--json")
    assert r.code == 8 and "interrupted" in r.json()["error"]["message"]
    assert fake.live() == []


def test_an_interrupted_launch_finds_its_instance_by_name_and_terminates_it(
        box: Run, fake: FakeLambda, monkeypatch: pytest.MonkeyPatch) -> None:
    from monte.remote.lambda_api import LambdaClient

    real = LambdaClient.launch

    def launch_then_ctrl_c(self: LambdaClient, **kw: Any) -> str:
        real(self, **kw)  # Lambda made it; the answer never reaches the user's terminal
        raise KeyboardInterrupt

    monkeypatch.setattr(LambdaClient, "launch", launch_then_ctrl_c)
    r = box("up", "--json")
    assert r.code == 8
    msg = r.json()["error"]["message"]
    assert "interrupted while launching monte-" in msg and "terminated monte-" in msg
    assert fake.live() == [] and len(fake.instances) == 1


def test_the_real_seam_forgets_the_address_waits_for_sshd_and_arms(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The seam's wiring, with SSH and the watchdog's own arm replaced (their tests run them
    against a real sshd): forget the reused address, retry until sshd answers, arm, close."""
    from monte.remote import ssh, watchdog

    events: list[Any] = []
    refusals = [error("E_BOX", "refused"), error("E_BOX", "refused")]

    class Conn:
        def close(self) -> None:
            events.append("close")

    def connect(host: str, *, user: str | None, key_file: str | None, **kw: Any) -> Conn:
        if refusals:
            raise refusals.pop()
        events.append(("connect", host, user, key_file))
        return Conn()

    def arm(conn: Conn, box: dict[str, Any], key: str, keep_alive: bool) -> dict[str, Any]:
        events.append(("arm", type(conn).__name__, box["id"], key, keep_alive))
        return {"instance_id": box["id"]}

    monkeypatch.setattr(ssh, "forget_host", lambda host, *a, **k: events.append(("forget", host)))
    monkeypatch.setattr(ssh, "connect", connect)
    monkeypatch.setattr(watchdog, "arm", arm)
    monkeypatch.setattr(boxes, "SSH_RETRY_S", 0.001)
    monkeypatch.setenv("MONTE_SSH_KEY_FILE", "/keys/lambda")
    assert boxes._arm_watchdog({"id": "i1", "ip": "192.0.2.7"}, "k", True) == {"instance_id": "i1"}
    assert events == [("forget", "192.0.2.7"), ("connect", "192.0.2.7", "ubuntu", "/keys/lambda"),
                      ("arm", "Conn", "i1", "k", True), "close"]
    # sshd that never answers: refused once the bounded wait is over
    monkeypatch.setattr(boxes, "SSH_READY_S", 0.01)
    refusals.extend([error("E_BOX", "refused")] * 1000)
    with pytest.raises(Exception) as e:
        boxes._arm_watchdog({"id": "i1", "ip": "192.0.2.7"}, "k", False)
    assert getattr(e.value, "code", None) == "E_BOX"
    # and a monte without a watchdog refuses rather than leave a box unarmed
    monkeypatch.delattr(watchdog, "arm")
    with pytest.raises(Exception) as e:
        boxes._arm_watchdog({"id": "i1", "ip": "192.0.2.7"}, "k", False)
    assert getattr(e.value, "code", None) == "E_BOX" and "watchdog" in str(e.value)


def test_429_twice_then_up_succeeds(box: Run, fake: FakeLambda) -> None:
    fake.rate_limit_next = 2
    r = box("up", "--json")
    assert r.code == 0, r.err
    assert len(fake.live()) == 1


def test_a_500_while_waiting_is_retried(box: Run, fake: FakeLambda) -> None:
    fake.fail_500["/api/v1/instances/"] = 1
    r = box("up", "--json")
    assert r.code == 0, r.err


def test_a_lost_launch_answer_adopts_the_instance_and_down_terminates_it(
        box: Run, fake: FakeLambda, armed: list[dict[str, Any]], repo: Path) -> None:
    fake.drop_launch_response = True
    r = box("up", "--json")
    assert r.code == 0, r.err
    [inst] = fake.live()  # exactly one: adopted, not launched again
    assert r.json()["box"]["id"] == inst["id"] and r.json()["box"]["name"] == inst["name"]
    assert len(fake.calls("POST", "/api/v1/instance-operations/launch")) == 1
    assert [c["box"]["id"] for c in armed] == [inst["id"]]
    r = box("down", "--json")
    assert r.code == 0, r.err
    assert r.json()["terminated"]["id"] == inst["id"]
    assert fake.live() == [] and identity_files(repo) == []


# --- status --------------------------------------------------------------------------------------


def seed_old_box(fake: FakeLambda, repo: Path, hours: float) -> tuple[str, str]:
    name = "monte-0d0d0d0d"
    iid = fake.add_instance(name, file_systems=["monte-data"])
    launched = (datetime.now(UTC) - timedelta(hours=hours)).isoformat(timespec="seconds")
    boxes_dir = repo / ".monte" / "boxes"
    boxes_dir.mkdir(parents=True, exist_ok=True)
    (boxes_dir / f"{iid}.json").write_text(json.dumps({
        "id": iid, "name": name, "ip": "198.51.100.99", "type": "gpu_1x_h100_pcie",
        "region": "us-east-1", "launched_at": launched, "cold": False, "keep_alive": False,
        "ttl_hours": 12, "idle_minutes": 45}))
    return iid, name


def test_status_shows_own_with_age_and_over_ttl_and_others_as_foreign(
        box: Run, fake: FakeLambda, repo: Path) -> None:
    old_id, _ = seed_old_box(fake, repo, hours=13)
    foreign = fake.add_instance("someones-notebook", region="us-west-1")
    new = box("up", "--json").json()["box"]
    gone = repo / ".monte" / "boxes" / "0123abcd.json"  # a box terminated behind monte's back
    gone.write_text("{}")
    r = box("status", "--json")
    assert r.code == 0, r.err
    rows = {i["id"]: i for i in r.json()["instances"]}
    assert set(rows) == {old_id, foreign, new["id"]}
    assert rows[old_id]["owner"] == "monte" and rows[old_id]["over_ttl"] is True
    assert 12.9 < rows[old_id]["age_hours"] < 13.1
    assert rows[new["id"]]["owner"] == "monte" and rows[new["id"]]["over_ttl"] is False
    assert rows[new["id"]]["age_hours"] < 0.1
    assert rows[foreign]["owner"] == "foreign" and rows[foreign]["over_ttl"] is None
    assert rows[foreign]["age_hours"] is None
    assert r.json()["stale_identity_files"] == [str(gone)]
    human = box("status")
    assert human.code == 0
    lines = human.out.splitlines()
    assert lines[0].split("\t")[:3] == ["name", "id", "owner"]
    assert any("foreign" in ln and "someones-notebook" in ln for ln in lines)
    assert any("OVER TTL" in ln and "monte-0d0d0d0d" in ln for ln in lines)


def test_status_outside_a_repository_still_lists_the_account(
        fake: FakeLambda, monte: Run, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    iid = fake.add_instance("monte-abcdef01")
    r = monte("box", "status", "--json")
    assert r.code == 0, r.err
    [row] = r.json()["instances"]
    assert row["id"] == iid and row["owner"] == "monte" and row["age_hours"] is None


def test_no_key_refuses_with_e_box_naming_both_variables(
        box: Run, fake: FakeLambda, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MONTE_LAMBDA_KEY")
    for args in (("up",), ("status",), ("down",)):
        r = box(*args, "--json")
        assert r.code == 8, args
        err = r.json()["error"]
        assert err["code"] == "E_BOX"
        assert "MONTE_LAMBDA_KEY" in err["message"] and "MONTE_LAMBDA_KEY_OP" in err["message"]
    r = box("status")
    assert r.code == 8 and r.err.startswith("E_BOX: ") and "MONTE_LAMBDA_KEY_OP" in r.err
    assert fake.log == []


def test_an_invalid_key_is_e_box_with_lambdas_message(box: Run, fake: FakeLambda) -> None:
    fake.key = "the-real-one"  # so ours is refused
    r = box("status", "--json")
    assert r.code == 8
    err = r.json()["error"]
    assert err["code"] == "E_BOX" and "API key was invalid, expired, or deleted." in err["message"]
    assert "global/invalid-api-key" in err["message"] and "MONTE_LAMBDA_KEY" in err["fix"]
    r = box("up")
    assert r.code == 8 and "API key was invalid" in r.err and fake.live() == []


# --- down ----------------------------------------------------------------------------------------


def test_down_terminates_one_box_and_removes_its_identity_file(box: Run, fake: FakeLambda,
                                                               repo: Path) -> None:
    b = box("up", "--json").json()["box"]
    r = box("down", b["name"])
    assert r.code == 0, r.err
    assert f"box {b['name']} ({b['id']}) is terminating" in r.out
    assert fake.live() == [] and identity_files(repo) == []
    assert fake.calls("POST", "/api/v1/instance-operations/terminate") == [{"instance_ids": [b["id"]]}]


def test_down_with_several_boxes_and_no_name_is_a_usage_error(box: Run, fake: FakeLambda,
                                                              repo: Path) -> None:
    a = box("up", "--json").json()["box"]
    b = box("up", "--json").json()["box"]
    r = box("down", "--json")
    assert r.code == 2 and r.json()["error"]["code"] == "E_USAGE"
    assert a["name"] in r.json()["error"]["message"] and b["name"] in r.json()["error"]["message"]
    assert len(fake.live()) == 2
    r = box("down", b["id"], "--json")  # by id works too
    assert r.code == 0 and [i["id"] for i in fake.live()] == [a["id"]]


def test_down_refuses_a_foreign_instance(box: Run, fake: FakeLambda) -> None:
    foreign = fake.add_instance("someones-notebook")
    for ref in (foreign, "someones-notebook"):
        r = box("down", ref, "--json")
        assert r.code == 8 and r.json()["error"]["code"] == "E_BOX"
        assert "not a monte box" in r.json()["error"]["message"]
    assert [i["id"] for i in fake.live()] == [foreign]
    assert fake.calls("POST", "/api/v1/instance-operations/terminate") == []


def test_down_with_nothing_to_terminate_refuses(box: Run, fake: FakeLambda) -> None:
    fake.add_instance("someones-notebook")
    r = box("down", "--json")
    assert r.code == 8 and "no monte box" in r.json()["error"]["message"]
    r = box("down", "monte-ffffffff", "--json")
    assert r.code == 8 and "monte box status" in r.json()["error"]["fix"]


# --- the CLI surface -----------------------------------------------------------------------------


def test_box_help_lists_the_verbs_and_imports_nothing_heavy(repo: Path) -> None:
    code = ("import sys\nfrom monte.cli.main import main\n"
            "try:\n    main(['box', '--help'])\nexcept SystemExit as e:\n    assert not e.code\n"
            "heavy = [m for m in ('torch', 'transformers', 'trl', 'dvc', 'fabric') if m in sys.modules]\n"
            "print('HEAVY=' + ','.join(heavy), file=sys.stderr)\n")
    r = subprocess.run([sys.executable, "-c", code], cwd=repo, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert "HEAVY=\n" in r.stderr
    assert all(verb in r.stdout for verb in ("up", "status", "down"))


def test_a_remote_train_without_a_hub_token_refuses_before_any_box(
        repo: Path, fake: FakeLambda, armed: list[dict[str, Any]], monte: Run, base_model: Path, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 46.10: `--remote` train checked the Hugging Face token only after finding or
    launching a box (a launch, a refusal, a termination)."""
    from tests.support.helpers import push_to_new_origin

    assert monte("env", "add", "--server", "parity", "--dev", "parity", "--test", "parity").code == 0
    assert monte("dataset", "add", "parity-sft", "--from-env", "parity", "--kind", "sft").code == 0
    assert monte("experiment", "init", "exp", "--eval", "parity", "--model", str(base_model)).code == 0
    assert monte("eval", "--yes").code == 0 and monte("eval", "--split", "test", "--yes").code == 0
    (tmp_path / "bucket").mkdir()
    assert monte("config", "set", "bucket", str(tmp_path / "bucket")).code == 0
    push_to_new_origin(repo, tmp_path / "origin.git")
    for var in ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))  # no token saved by `hf auth login` either
    monkeypatch.setenv("MONTE_HUB_REPO", "someone/parity-model")
    r = monte("train", "--recipe", "sft-tiny", "--source", "parity-sft", "--from-base", "--remote", "--yes", "--json")
    err = r.json()["error"]
    assert err["code"] == "E_STORAGE" and "HF_TOKEN" in err["fix"], err
    assert fake.calls("POST", "") == [] and fake.live() == []  # no launch, nothing to terminate
