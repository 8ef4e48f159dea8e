"""A network that fails is E_STORAGE (exit 7) naming it, never a bug (issue 30.6).

Reproduced on the code before: `monte dataset add --from-hf` with no network refused E_INTERNAL
exit 1 "ConnectError", and `--model ORG/NAME` refused E_NOT_FOUND "no hub model of that id" (the
hub was never asked). The network here is a real one that fails: the Hub's endpoint is a loopback
port nothing listens on (HF_ENDPOINT), so the connection is refused by the kernel; no fake.
(`env add --server` reaches the network only for a NeMo Gym server's Hugging Face datasets; the
same handler maps its failure, but NeMo Gym is not installed here, so that path is not run.)
"""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest

from tests.support.helpers import monte_proc, snapshot_state


@pytest.fixture
def offline() -> dict[str, str]:
    with socket.socket() as s:  # a port that was free a moment ago, and is closed now
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return {"HF_ENDPOINT": f"http://127.0.0.1:{port}", "HF_HUB_OFFLINE": "0", "HF_HUB_ETAG_TIMEOUT": "5",
            "HF_HUB_DOWNLOAD_TIMEOUT": "5"}


def _refusal(r: object) -> dict[str, object]:
    out: dict[str, object] = json.loads(r.stdout)["error"]  # type: ignore[attr-defined]
    return out


def test_dataset_from_hf_with_no_network_is_a_storage_error(repo: Path, offline: dict[str, str]) -> None:
    before = snapshot_state(repo)
    r = monte_proc("dataset", "add", "d", "--from-hf", "org/name", "--kind", "sft", "--json", cwd=repo, env=offline)
    err = _refusal(r)
    assert (r.returncode, err["code"]) == (7, "E_STORAGE"), r.stdout
    assert "network" in str(err["message"]) and offline["HF_ENDPOINT"] in str(err["message"]), err
    assert "network" in str(err["fix"])
    assert snapshot_state(repo) == before


def test_a_hub_model_id_with_no_network_is_a_storage_error(repo: Path, offline: dict[str, str], monte) -> None:
    assert monte("env", "add", "--server", "parity", "--dev", "parity", "--test", "parity").code == 0
    before = snapshot_state(repo)
    r = monte_proc("experiment", "init", "e", "--eval", "parity", "--model", "org/name", "--json", cwd=repo,
                   env=offline)
    err = _refusal(r)
    assert (r.returncode, err["code"]) == (7, "E_STORAGE"), r.stdout
    assert "network" in str(err["message"]) and "org/name" in str(err["message"]), err
    assert snapshot_state(repo) == before
