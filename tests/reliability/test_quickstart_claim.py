"""Issue 43, case 7: the claim commands as docs/claims.md and the model card write them, on
`monte quickstart`'s repository (a real checkpoint trained on CPU, promoted by `monte promote`).

On main `monte claim export --card promoted` and `monte claim verify --weights promoted` refused
`E_INTEGRITY`: `monte promote` rewrites `config.json` (training's `use_cache: false` set back), and
the claim compared it byte for byte. The bundle now carries the checkpoint's own configs and a
promoted config is matched by what it computes; every other file still byte for byte.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from monte import claim
from tests.reliability.conftest import quickstart_copy

#: on one worker under `--dist loadgroup`, with the other module that copies the session's one
#: quickstart: the second copies it at once instead of waiting on the first's build
pytestmark = pytest.mark.xdist_group("quickstart")


@pytest.fixture(scope="module")
def built(quickstart_built: dict[str, Any], tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The session's one quickstart, copied here: this test rewrites its promoted config."""
    return quickstart_copy(quickstart_built, tmp_path_factory.mktemp("machine") / "demo")


def test_the_documented_claim_commands_work_on_a_promoted_folder(built: dict[str, Any], monte, tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    folder: Path = built["folder"]
    promoted = folder / "promoted"
    assert promoted.is_dir(), list(folder.iterdir())
    key = tmp_path / "key"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True)
    monkeypatch.chdir(folder)
    status = monte("status", "--json").json()
    run = next(r["run"] for r in status["rows"] if r["what"].endswith("/test") and r["role"] == "claim")
    out = tmp_path / "claim"
    r = monte("claim", "export", run, "--out", str(out), "--key", str(key), "--identity", "me@example.org",
              "--card", "promoted", "--json")
    assert r.code == 0, r.out
    statement = json.loads((out / claim.STATEMENT).read_bytes())
    config = next(s for s in statement["subject"] if s["name"] == "config.json")
    assert claim._sha256((promoted / "config.json").read_bytes()) != config["digest"]["sha256"]  # promote rewrote it
    (tmp_path / "allowed_signers").write_text(f"me@example.org {(tmp_path / 'key.pub').read_text().split()[0]} "
                                              f"{(tmp_path / 'key.pub').read_text().split()[1]}\n")
    monkeypatch.chdir(tmp_path)
    (tmp_path / "promoted").symlink_to(promoted)
    r = monte("claim", "verify", "claim", "--allowed-signers", "allowed_signers", "--weights", "promoted", "--json")
    assert r.code == 0 and r.json()["weights"].startswith("checked"), r.out
    # a promoted config that computes something else is still refused
    data = json.loads((promoted / "config.json").read_text())
    data["rms_norm_eps"] = 1e-3
    (promoted / "config.json").write_text(json.dumps(data, indent=2))
    r = monte("claim", "verify", "claim", "--allowed-signers", "allowed_signers", "--weights", "promoted", "--json")
    assert r.code == 5 and r.json()["error"]["code"] == "E_INTEGRITY" and "config.json" in r.json()["error"]["message"]
