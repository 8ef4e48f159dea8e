"""The Lambda API client against the fake Lambda on loopback (tests/support/fake_lambda.py): the
key ladder, errors in plain words, retries that are safe, and a lost launch answer adopted by name."""

from __future__ import annotations

import json
import os
import socket
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from monte.errors import Exit, MonteError
from monte.remote import lambda_api
from monte.remote.lambda_api import LambdaClient, LambdaError, LambdaKey, resolve_key
from tests.support.fake_lambda import KEY, FakeLambda, shrink_waits

LAMBDA_VARS = ("MONTE_LAMBDA_KEY", "MONTE_LAMBDA_KEY_OP", "MONTE_LAMBDA_API")


@pytest.fixture(autouse=True)
def _clean(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in LAMBDA_VARS:
        monkeypatch.delenv(var, raising=False)
    shrink_waits(monkeypatch)


@pytest.fixture
def fake() -> Iterator[FakeLambda]:
    f = FakeLambda().start()
    yield f
    f.stop()


@pytest.fixture
def client(fake: FakeLambda) -> LambdaClient:
    return LambdaClient(LambdaKey(KEY, "MONTE_LAMBDA_KEY"), fake.url)


def launch(c: LambdaClient, name: str = "monte-0000abcd", region: str = "us-east-1") -> str:
    return c.launch(name=name, region=region, instance_type="gpu_1x_h100_pcie", ssh_key="laptop",
                    file_systems=[])


# --- the key -------------------------------------------------------------------------------------


def test_no_key_refuses_naming_both_variables() -> None:
    with pytest.raises(MonteError) as e:
        resolve_key()
    assert e.value.code == "E_BOX" and e.value.exit_code == Exit.BOX
    text = str(e.value)
    assert "MONTE_LAMBDA_KEY" in text and "MONTE_LAMBDA_KEY_OP" in text


def test_env_key_wins_and_never_shows(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MONTE_LAMBDA_KEY", f"  {KEY}\n")
    monkeypatch.setenv("MONTE_LAMBDA_KEY_OP", "ignored")
    k = resolve_key()
    assert k.reveal() == KEY
    assert KEY not in repr(k) and KEY not in str(k) and str(k) == "MONTE_LAMBDA_KEY"


def fake_op(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, *, items: dict[str, str],
            fail: str = "") -> Path:
    """A fake `op` first on PATH (1Password cannot exist here): prints an item's credential for
    ``op item get NAME --fields label=credential --reveal``; logs each argv."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    log = tmp_path / "op-argv.log"
    script = bindir / "op"
    script.write_text(f"""#!{sys.executable}
import json, sys
argv = sys.argv[1:]
with open({str(log)!r}, "a") as f:
    f.write(json.dumps(argv) + "\\n")
items, fail = {items!r}, {fail!r}
if fail:
    sys.stderr.write(fail + "\\n"); sys.exit(1)
if argv[:2] != ["item", "get"] or argv[3:] != ["--fields", "label=credential", "--reveal"]:
    sys.stderr.write("[ERROR] unexpected arguments\\n"); sys.exit(2)
if argv[2] not in items:
    sys.stderr.write(f'[ERROR] "{{argv[2]}}" isn\\'t an item. Specify the item with its UUID, name, or domain.\\n')
    sys.exit(1)
print(items[argv[2]])
""")
    script.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bindir}:/usr/bin:/bin")
    return log


def test_op_item_is_read_in_memory_and_the_key_is_never_in_argv(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fake: FakeLambda) -> None:
    log = fake_op(tmp_path, monkeypatch, items={"Lambda API": KEY})
    monkeypatch.setenv("MONTE_LAMBDA_KEY_OP", "Lambda API")
    k = resolve_key()
    assert k.reveal() == KEY and KEY not in repr(k) and "MONTE_LAMBDA_KEY_OP" in str(k)
    argvs = [json.loads(line) for line in log.read_text().splitlines()]
    assert argvs == [["item", "get", "Lambda API", "--fields", "label=credential", "--reveal"]]
    assert LambdaClient(k, fake.url).ssh_keys()[0]["name"] == "laptop"  # and it works


def test_op_failure_refuses_with_op_words_and_the_alternative(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake_op(tmp_path, monkeypatch, items={})
    monkeypatch.setenv("MONTE_LAMBDA_KEY_OP", "nope")
    with pytest.raises(MonteError) as e:
        resolve_key()
    assert e.value.code == "E_BOX"
    assert "isn't an item" in e.value.message and "MONTE_LAMBDA_KEY" in e.value.fix


def test_op_missing_refuses(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setenv("MONTE_LAMBDA_KEY_OP", "Lambda API")
    with pytest.raises(MonteError) as e:
        resolve_key()
    assert e.value.code == "E_BOX" and "`op` is not on PATH" in e.value.message


# --- errors --------------------------------------------------------------------------------------


def test_invalid_key_is_e_box_with_lambdas_words_and_no_key(fake: FakeLambda) -> None:
    wrong = "lk-WRONG-" + "9" * 20
    c = LambdaClient(LambdaKey(wrong, "MONTE_LAMBDA_KEY"), fake.url)
    with pytest.raises(LambdaError) as e:
        c.instances()
    err = e.value
    assert err.code == "E_BOX" and err.status == 401 and err.lambda_code == "global/invalid-api-key"
    assert "API key was invalid, expired, or deleted." in err.message
    assert "Check your API key" in err.fix and "MONTE_LAMBDA_KEY" in err.fix
    assert wrong not in str(err) and wrong not in json.dumps(err.to_dict())
    assert fake.auth_headers == [f"Bearer {wrong}"]  # one try: a 401 is not retried


def test_the_key_travels_only_in_the_authorization_header(client: LambdaClient,
                                                          fake: FakeLambda) -> None:
    launch(client)
    client.instances()
    assert set(fake.auth_headers) == {f"Bearer {KEY}"}
    assert KEY not in json.dumps(fake.log) and KEY not in repr(client)


def test_base_url_comes_from_the_environment(fake: FakeLambda, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MONTE_LAMBDA_API", fake.url + "/")
    c = LambdaClient(LambdaKey(KEY, "test"))
    assert c.base_url == fake.url
    assert "gpu_1x_h100_pcie" in c.instance_types()


# --- retries -------------------------------------------------------------------------------------


def test_429_twice_then_success(client: LambdaClient, fake: FakeLambda) -> None:
    fake.rate_limit_next = 2
    assert client.instances() == []
    assert len(fake.calls("GET", "/api/v1/instances")) == 3


def test_500_once_on_a_read_is_retried(client: LambdaClient, fake: FakeLambda) -> None:
    fake.fail_500["/api/v1/file-systems"] = 1
    assert client.file_systems()[0]["name"] == "monte-data"
    assert len(fake.calls("GET", "/api/v1/file-systems")) == 2


def test_retries_stop_within_the_budget(client: LambdaClient, fake: FakeLambda) -> None:
    fake.rate_limit_next = 10_000
    with pytest.raises(MonteError) as e:
        client.instances()
    assert e.value.code == "E_BOX" and "kept failing" in e.value.message and "429" in e.value.message


def test_launch_429_is_retried_and_makes_one_instance(client: LambdaClient, fake: FakeLambda) -> None:
    fake.rate_limit_next = 1
    iid = launch(client)
    assert [i["id"] for i in fake.live()] == [iid]
    assert len(fake.calls("POST", "/api/v1/instance-operations/launch")) == 2


def test_launch_500_is_not_retried_blindly(client: LambdaClient, fake: FakeLambda) -> None:
    """A 5xx may hide a launch that happened: no second launch; the name is looked up instead."""
    fake.fail_500["/api/v1/instance-operations/launch"] = 1
    with pytest.raises(MonteError) as e:
        launch(client, name="monte-5005005a")
    assert e.value.code == "E_BOX"
    assert "monte-5005005a" in e.value.message and "monte box status" in e.value.fix
    assert len(fake.calls("POST", "/api/v1/instance-operations/launch")) == 1
    assert fake.live() == []


def test_lost_launch_answer_adopts_the_instance_by_name(client: LambdaClient, fake: FakeLambda) -> None:
    fake.drop_launch_response = True
    iid = launch(client, name="monte-10571057")
    assert [(i["id"], i["name"]) for i in fake.live()] == [(iid, "monte-10571057")]
    assert len(fake.calls("POST", "/api/v1/instance-operations/launch")) == 1


def test_capacity_refusal_carries_lambdas_code(client: LambdaClient, fake: FakeLambda) -> None:
    with pytest.raises(LambdaError) as e:
        launch(client, region="us-south-1")
    assert e.value.lambda_code == lambda_api.INSUFFICIENT_CAPACITY
    assert "Not enough capacity" in e.value.message and "try again later" in e.value.fix


def test_terminate_is_retried_and_counts_an_instance_already_going(client: LambdaClient,
                                                                   fake: FakeLambda) -> None:
    iid = launch(client)
    fake.fail_500["/api/v1/instance-operations/terminate"] = 1
    client.terminate([iid])
    assert fake.live() == []
    assert client.terminate([iid]) is not None  # again: already terminating, not an error


def _closed_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port: int = s.getsockname()[1]
    s.close()
    return port


def test_connection_refused_is_retried_then_refused_plainly() -> None:
    c = LambdaClient(LambdaKey(KEY, "test"), f"http://127.0.0.1:{_closed_port()}/api/v1")
    with pytest.raises(MonteError) as e:
        c.instances()
    assert e.value.code == "E_BOX" and "could not reach Lambda's API" in e.value.message
    assert "the connection was refused" in e.value.message and "network connection" in e.value.fix
    # a launch that never connected provably made nothing: retried, not "lost"
    with pytest.raises(MonteError) as e:
        launch(c)
    assert "could not reach" in e.value.message and "did not answer" not in e.value.message


def test_box_status_offline_says_what_it_waits_for_and_refuses_within_its_bound(tmp_path: Path) -> None:
    """Issue 46.10: offline with a key set, `monte box status` waited 83 s in silence (the whole
    retry budget of a flaky API) before "kept failing". Now the wait is said on stderr, with its
    bound, and a network that reaches nothing is refused after NO_NETWORK_BUDGET_S, naming the
    network. A real subprocess with the real retries, against a port nothing listens on; its
    NO_NETWORK_BUDGET_S shrunk from 12 s to 3 s (as this process's is by fake_lambda), so the
    bound is still far below the old wait."""
    import subprocess
    import time

    port = _closed_port()
    env = {**os.environ, "MONTE_LAMBDA_KEY": KEY, "MONTE_LAMBDA_API": f"http://127.0.0.1:{port}/api/v1"}
    code = ("import monte.remote.lambda_api as api\napi.NO_NETWORK_BUDGET_S = 3.0\n"
            "from monte.cli.main import main\nmain()\n")
    t0 = time.monotonic()
    r = subprocess.run([sys.executable, "-c", code, "box", "status", "--json"],
                       cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60)
    took = time.monotonic() - t0
    assert took < 3 + 10, took  # NO_NETWORK_BUDGET_S (shrunk to 3 s here); the old wait: about 83 s
    assert r.returncode == Exit.BOX, r.stdout + r.stderr
    err = json.loads(r.stdout)["error"]
    assert err["code"] == "E_BOX" and f"127.0.0.1:{port}" in err["message"]
    assert "the network failed (the connection was refused" in err["message"], err
    assert "check the network connection" in err["fix"] and "MONTE_LAMBDA_API" in err["fix"]
    said = r.stderr.splitlines()
    assert said and "did not answer listing instances" in said[0], r.stderr
    assert "trying again for up to 3 s" in said[0]
    assert KEY not in r.stdout + r.stderr
