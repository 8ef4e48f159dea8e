"""Issue 41: a read whose target checkpoint was pushed to the hub (its lineage commit records the hub
commit) lets the grader fetch that pinned revision itself instead of the weights streaming over
SSH; it hashes what it wrote against the ledger's file hashes and loads exactly that copy.

The grader runs as the forced command does (``monte grader serve --home H`` in a process of its
own, one request on stdin). The Hugging Face Hub cannot exist here: it is mocked at one narrow
boundary, a loopback HTTP server answering the hub's ``/{repo}/resolve/{revision}/{file}``
endpoint, reached through ``HF_ENDPOINT`` by huggingface_hub's own download code. Everything
else is real: the tiny model, its generation and grading, the grader's ledger and signature."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from monte.grader import home as homes
from monte.ledger.grader_statement import check_signature

# the tests build on each other in order: under `-n 2 --dist loadgroup` the module runs whole on one worker
pytestmark = pytest.mark.xdist_group("test_hub_weights")

GOOD, BAD = "a" * 40, "b" * 40


class Hub:
    """The hub's resolve endpoint on loopback: ``revisions[rev][name]`` -> bytes; every request logged."""

    def __init__(self, revisions: dict[str, dict[str, bytes]]) -> None:
        self.revisions = revisions
        self.requests: list[str] = []
        hub = self

        class Handler(BaseHTTPRequestHandler):
            def _answer(self, body: bool) -> None:
                parts = self.path.split("?")[0].strip("/").split("/")
                hub.requests.append(f"{self.command} {self.path}")
                found = (hub.revisions.get(parts[3], {}).get("/".join(parts[4:]))
                         if len(parts) >= 5 and parts[2] == "resolve" else None)
                if found is None:
                    self.send_response(404)
                    self.send_header("X-Error-Code", "EntryNotFound")
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                self.send_response(200)
                self.send_header("X-Repo-Commit", parts[3])
                self.send_header("ETag", f'"{hashlib.sha256(found).hexdigest()}"')
                self.send_header("Content-Length", str(len(found)))
                self.end_headers()
                if body:
                    self.wfile.write(found)

            def do_HEAD(self) -> None:
                self._answer(False)

            def do_GET(self) -> None:
                self._answer(True)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"


@pytest.fixture
def hub(tiny_models: dict[int, Path]) -> Iterator[Hub]:
    """GOOD serves the checkpoint the ledger names; BAD the same names with another model's weights."""
    from monte.ledger.lineage import servable_files

    good = {n: (tiny_models[0] / n).read_bytes() for n in servable_files(tiny_models[0])}
    bad = {**good, "model.safetensors": (tiny_models[1] / "model.safetensors").read_bytes()}
    h = Hub({GOOD: good, BAD: bad})
    yield h
    h.server.shutdown()
    h.server.server_close()


def _serve(home: homes.Home, request: dict[str, Any], hub: Hub, tmp: Path, payload: bytes = b"") -> dict[str, Any]:
    """One request to ``monte grader serve`` in a process of its own, as sshd's forced command runs it."""
    env = {**os.environ, "HF_ENDPOINT": hub.url, "HF_HUB_OFFLINE": "0", "HF_HOME": str(tmp / "hf"),
           "HF_HUB_DISABLE_TELEMETRY": "1", "OMP_NUM_THREADS": "1"}
    line = json.dumps({**request, "size": len(payload)}).encode() + b"\n"
    r = subprocess.run([sys.executable, "-m", "monte", "grader", "serve", "--home", str(home.root), "--threads", "1"],
                       input=line + payload, capture_output=True, env=env, timeout=600)
    return dict(json.loads(r.stdout.strip().splitlines()[-1]))


def test_the_grader_fetches_a_pinned_hub_revision_and_loads_only_what_the_ledger_names(
        tiny_models: dict[int, Path], hub: Hub, tmp_path: Path) -> None:
    from monte.envs.registry import get
    from monte.grader import server
    from monte.ledger.lineage import servable_files

    home = homes.init(tmp_path / "grader")
    items = get("parity").benchmark.generate(3_000_000, 4)
    for i, item in enumerate(items):
        item["id"] = f"parity/test/{i:05d}"
    raw = b"".join(json.dumps(it, sort_keys=True).encode() + b"\n" for it in items)
    content = hashlib.sha256(raw).hexdigest()
    grader = {"kind": "catalog", "benchmarks": {"parity": "parity"}}
    import io

    took = io.BytesIO()
    server.serve(home, io.BytesIO(json.dumps({"op": "take", "content": content, "exam": "parity",
                                             "benchmark": "parity", "grader": grader,
                                             "size": len(raw)}).encode() + b"\n" + raw), took)
    assert json.loads(took.getvalue())["ok"]
    files = servable_files(tiny_models[0])  # what the checkpoint's lineage commit records
    request = {"op": "read", "experiment": "e", "exam": "parity", "content": content, "cohort": "c1",
               "role": "baseline", "target": {"kind": "checkpoint", "run": "r", "step": 1}, "batch_size": 4,
               "settings": {"max_new_tokens": 4, "temperature": 0.0, "top_p": 1.0, "chat_template": False,
                            "stop": ["\n"]}, "files": files}
    # a hub copy whose bytes are not the ledger's: refused, nothing spent, nothing left in the home
    bad = _serve(home, {**request, "run": "hubbad", "hub": {"repo": "team/ckpts", "revision": BAD}}, hub, tmp_path)
    assert bad["error"]["code"] == "E_INTEGRITY" and "nothing was spent" in bad["error"]["message"]
    assert homes.records(home) == {} and not list((home.root / "weights").iterdir())
    # a branch is no pinned revision: refused before anything is fetched
    branch = _serve(home, {**request, "run": "hubbranch", "hub": {"repo": "team/ckpts", "revision": "main"}}, hub,
                    tmp_path)
    assert branch["error"]["code"] == "E_BAD_INPUT" and homes.records(home) == {}
    hub.requests.clear()
    ok = _serve(home, {**request, "run": "hubgood", "hub": {"repo": "team/ckpts", "revision": GOOD}}, hub, tmp_path)
    assert ok["ok"] and ok["status"] == "finished", ok
    # the grader fetched every file itself, at the pinned commit: no weights came over the session
    resolved = [r for r in hub.requests if "/resolve/" in r]
    assert sorted(r.split()[1].rsplit("/", 1)[1] for r in resolved if r.startswith("GET")) == sorted(files)
    assert all(f"/team/ckpts/resolve/{GOOD}/" in r for r in resolved)
    statement = ok["statement"]
    assert statement["weights"] == files and statement["n"] == 4
    assert check_signature(home.public_key(), statement, ok["signature"])
    started = homes.records(home)["hubgood"]["started"]
    assert started["hub"] == {"repo": "team/ckpts", "revision": GOOD}
    assert not list((home.root / "weights").iterdir())  # the copy loaded is gone once graded


def test_a_claim_on_a_pushed_checkpoint_reaches_the_grader_by_its_hub_commit(
        repo: Path, monte: Any, base_model: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The whole path through a real sshd whose forced command is the grader (this account; the
    other-account path is tests/grader/test_real_grader.py): test@0 streams the base over the
    session, a chunk trained with ``--push`` records its hub commit (the agent's upload goes to
    the hub seam of tests/training/test_push_hub.py), and the claim on it sends no weights: the
    grader fetches that commit from the resolve endpoint on loopback and signs what it loaded."""
    from monte.grader import home as homes
    from monte.storage import hub as hubs
    from tests.support.sshd import SSHD, SSHD_MISSING, Keys, Sshd
    from tests.support.trainhelp import SFT, curriculum, write_recipe, write_sft_rows
    from tests.training.test_push_hub import FakeHub

    if not os.path.exists(SSHD):
        pytest.skip(SSHD_MISSING)
    assert monte("env", "add", "--server", "parity", "--dev", "parity", "--test", "parity").code == 0
    rows = write_sft_rows(tmp_path / "parity-sft.jsonl", curriculum(repo)[:256])
    assert monte("dataset", "add", "parity-sft", "--from-file", str(rows), "--kind", "sft").code == 0
    r = monte("experiment", "init", "exp", "--eval", "parity", "--model", str(base_model), "--steps-per-chunk", "4")
    assert r.code == 0, r.err
    write_recipe(repo, "sft-t", SFT)
    loopback = Hub({})
    home = homes.init(tmp_path / "grader")
    sshd = Sshd(tmp_path / "sshd", Keys.make(tmp_path / "keys"))
    command = (f"env HF_ENDPOINT={loopback.url} HF_HUB_OFFLINE=0 HF_HOME={tmp_path / 'hf'} OMP_NUM_THREADS=1 "
               f"{sys.executable} -m monte grader serve --home {home.root} --threads 1")
    (sshd.folder / "authorized_keys").write_text(
        f'command="{command}",restrict {Path(sshd.key_file + ".pub").read_text()}')
    sshd.start()
    try:
        monkeypatch.setenv("MONTE_GRADER_KEY_FILE", sshd.key_file)
        r = monte("config", "set", "grader", f"ssh://{sshd.user}@127.0.0.1:{sshd.port}", "--key", home.public_key())
        assert r.code == 0, r.err
        assert monte("grader", "take", "parity").code == 0
        assert monte("eval", "--yes").code == 0
        r = monte("eval", "--split", "test", "--yes")
        assert r.code == 0, r.err
        fake = FakeHub()
        monkeypatch.setattr(hubs, "HfApi", lambda: fake)
        bucket = tmp_path / "bucket"
        bucket.mkdir()
        monkeypatch.setenv("MONTE_BUCKET", str(bucket))
        monkeypatch.setenv("MONTE_HUB_REPO", "acme/parity-ckpts")
        r = monte("train", "--yes", "--json", "--recipe", "sft-t", "--source", "parity-sft", "--from-base", "--push")
        assert r.code == 0, r.out + r.err
        ((repo_id, oid), uploaded), = fake.commits.items()
        loopback.revisions[oid] = uploaded  # what the agent pushed is what the hub serves at that commit
        assert monte("eval", "--yes").code == 0
        r = monte("eval", "--split", "test", "--yes", "--json")
        assert r.code == 0, r.out + r.err
        claim = r.json()["runs"][0]
        started = homes.records(home)[claim["run"]]["started"]
        assert started["role"] == "claim" and started["hub"] == {"repo": repo_id, "revision": oid}
        resolved = [x for x in loopback.requests if "/resolve/" in x]  # (huggingface_hub asks other things too)
        gets = sorted(x.split()[1].rsplit("/", 1)[1] for x in resolved if x.startswith("GET"))
        assert gets == sorted(started["weights"]) and all(f"/{repo_id}/resolve/{oid}/" in x for x in resolved)
        assert homes.records(home)[claim["run"]]["statement"]["statement"]["score"] == claim["score"]
        assert monte("ledger", "verify", "--all").code == 0
    finally:
        sshd.stop()
        loopback.server.shutdown()
        loopback.server.server_close()
