"""A storage refusal says why in words, whole (issue 46.13). Reproduced on the code before this
file: a Vault that cannot be reached refused with urllib3's prose cut at 200 characters, mid-word
("... (Caused by NewConnectionErro"); a folder Vault DVC could not write printed DVC's own raw
``ERROR: failed to transfer '...' - [Errno 17] ...`` line on stderr, and monte's refusal then said
only "2 object(s) of parity did not upload".

The network is a real one that fails (a loopback port nothing listens on: the kernel refuses);
the folder Vault is a real folder in a shape DVC cannot write into.
"""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest

from monte.errors import in_words
from tests.support.gcs_emulator import write_fake_key
from tests.support.helpers import monte_proc

FREEZE = ("env", "add", "--server", "parity", "--dev", "parity", "--test", "parity")


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_an_unreachable_vault_is_named_by_its_reason_and_host_not_cut_mid_word(repo: Path, tmp_path: Path) -> None:
    with open(repo / ".monte.yaml", "a") as f:
        f.write("vault: gs://bkt\n")
    key = str(write_fake_key(tmp_path / "key.json"))
    port = _closed_port()
    env = {"STORAGE_EMULATOR_HOST": f"http://127.0.0.1:{port}", "GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT": "false",
           "MONTE_GCS_RETRY_S": "3", "MONTE_GCS_BOX_KEY_FILE": key, "MONTE_GCS_KEY_FILE": key}
    r = monte_proc(*FREEZE, "--json", cwd=repo, env=env)
    assert r.returncode == 7, r.stdout + r.stderr
    err = json.loads(r.stdout)["error"]
    assert err["code"] == "E_STORAGE"
    assert f"the network failed: Connection refused (127.0.0.1:{port})" in err["message"], err
    assert "HTTPConnectionPool" not in err["message"] and "Caused by" not in err["message"]
    assert "network connection" in err["fix"]
    assert r.stderr == ""


def test_dvc_says_nothing_raw_and_the_refusal_names_what_it_said(repo: Path, tmp_path: Path) -> None:
    vault = tmp_path / "vault"
    vault.mkdir()
    r = monte_proc("config", "set", "vault", str(vault), cwd=repo)
    assert r.returncode == 0, r.stderr
    md5 = vault / "files" / "md5"
    md5.mkdir(parents=True)
    for i in range(256):  # every object's folder a file: DVC cannot put any object into the Vault
        (md5 / f"{i:02x}").write_text("not a folder\n")
    for form in ((), ("--json",)):
        r = monte_proc(*FREEZE, *form, cwd=repo)
        assert r.returncode == 7, r.stdout + r.stderr
        lines = r.stderr.splitlines()  # monte's refusal (human form) and nothing of DVC's own
        assert not any(line.startswith("ERROR:") or "Traceback" in line for line in lines), r.stderr
        assert r.stderr == "" if form else lines[0].startswith("E_STORAGE: "), r.stderr
    err = json.loads(r.stdout)["error"]  # --json: stdout is monte's one object, nothing of DVC's
    assert err["code"] == "E_STORAGE" and "did not upload (failed to transfer" in err["message"], err
    assert str(md5) in err["message"]
    assert err["fix"].startswith("check the connection and the key (for a folder Vault: the path it names)")
    assert "re-run the same `monte env add`" in err["fix"]


@pytest.mark.parametrize("text", ["word " * 60, "x" * 300])
def test_a_long_message_is_cut_at_a_word_and_says_so(text: str) -> None:
    said = in_words(RuntimeError(text), limit=100)
    assert len(said) <= 101 and said.endswith("…")
    if " " in text:
        assert said[:-1].endswith("word")  # never "wo…"


def test_a_tools_error_prefix_and_later_lines_are_left_out() -> None:
    assert in_words(RuntimeError("ERROR: the remote said no\nHaving any troubles? Hit us up")) == "the remote said no"
