"""The grader's own side without SSH or a model: its home, its protocol's refusals, its budget
rule, and what it signs (tests/grader/test_real_grader.py runs all of it over a real sshd)."""

from __future__ import annotations

import hashlib
import io
import json
import os
import stat
import subprocess
import sys
import tarfile
from pathlib import Path
from typing import Any

import pytest

from monte.errors import MonteError
from monte.grader import home as homes
from monte.grader import server
from monte.ledger.grader_statement import (
    canonical,
    check_signature,
    outcomes_sha256,
    row_mismatch,
    weights_id,
)
from monte.ledger.signing import ssh_sign


def _ask(home: homes.Home, request: dict[str, Any], payload: bytes = b"") -> dict[str, Any]:
    out = io.BytesIO()
    line = json.dumps({**request, "size": len(payload)}).encode() + b"\n"
    server.serve(home, io.BytesIO(line + payload), out)
    return dict(json.loads(out.getvalue()))


@pytest.fixture
def home(tmp_path: Path) -> homes.Home:
    return homes.init(tmp_path / "grader")


def test_init_makes_a_home_only_its_account_enters(home: homes.Home, tmp_path: Path) -> None:
    assert stat.S_IMODE(home.root.stat().st_mode) == 0o700
    assert stat.S_IMODE(home.key.stat().st_mode) == 0o600
    assert home.public_key().startswith("ssh-ed25519 ")
    assert (home.ledger / "HEAD").is_file() and homes.records(home) == {}
    with pytest.raises(MonteError) as e:  # never over an existing home
        homes.init(home.root)
    assert e.value.code == "E_REFUSED"


def test_serve_answers_its_operations_only(home: homes.Home) -> None:
    assert _ask(home, {"op": "hello"})["public_key"] == home.public_key()
    assert _ask(home, {"op": "shell", "cmd": "id"})["error"]["code"] == "E_USAGE"
    out = io.BytesIO()
    server.serve(home, io.BytesIO(b"cat /etc/passwd\n"), out)
    assert json.loads(out.getvalue())["error"]["code"] == "E_BAD_INPUT"
    assert _ask(home, {"op": "fetch", "run": "nosuchrun"})["error"]["code"] == "E_NOT_FOUND"
    assert _ask(home, {"op": "fetch", "run": "../../key"})["error"]["code"] == "E_INVALID_NAME"


def test_take_keeps_only_bytes_that_hash_to_the_content(home: homes.Home) -> None:
    raw = b'{"id": "a", "prompt": "p", "answer": "1"}\n'
    bad = _ask(home, {"op": "take", "content": "0" * 64, "exam": "parity", "benchmark": "parity"}, raw)
    assert bad["error"]["code"] == "E_INTEGRITY" and list(home.sealed.iterdir()) == []
    content = hashlib.sha256(raw).hexdigest()
    gym = _ask(home, {"op": "take", "content": content, "grader": {"kind": "gym"}}, raw)
    assert gym["error"]["code"] == "E_USAGE" and list(home.sealed.iterdir()) == []
    ok = _ask(home, {"op": "take", "content": content, "exam": "parity", "benchmark": "parity"}, raw)
    assert ok["ok"] and ok["n"] == 1
    assert stat.S_IMODE((home.sealed / f"{content}.jsonl").stat().st_mode) == 0o600


def _tar(files: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:") as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def test_an_lm_eval_take_keeps_only_the_task_its_record_names(home: homes.Home,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """An lm-eval exam arrives as its split and its whole frozen task: every file proven against
    the sha256 the task's record names, nothing else let in; a grader without lm_eval says so in
    ``hello`` and takes nothing."""
    items = b'{"id": "t/test/00000", "doc_id": 0, "prompt": "p", "answer": "1"}\n'
    task = {"lmeval/t/task/t.yaml": b"task: t\n", "lmeval/t/data/test.jsonl": b'{"q": "sealed", "gold": "1"}\n'}
    spec = {"files": {k: hashlib.sha256(v).hexdigest() for k, v in task.items()}}
    content = hashlib.sha256(items).hexdigest()
    req = {"op": "take", "content": content, "exam": "t", "benchmark": "lm-eval:t", "split": "exams/t/test.jsonl",
           "grader": {"kind": "lm-eval", "tasks": {"t": spec}}}
    edited = {**task, "lmeval/t/data/test.jsonl": b'{"q": "sealed", "gold": "2"}\n'}
    for payload, code in ((_tar({"exams/t/test.jsonl": items, **edited}), "E_INTEGRITY"),
                          (_tar({"exams/t/test.jsonl": items, **task, "lmeval/t/task/extra.py": b""}), "E_BAD_INPUT"),
                          (_tar({"exams/t/test.jsonl": items, "../../key": b"x"}), "E_BAD_INPUT"),
                          (_tar({"exams/t/test.jsonl": b"other\n", **task}), "E_INTEGRITY")):
        assert _ask(home, req, payload)["error"]["code"] == code
        assert list(home.sealed.iterdir()) == []  # nothing kept, no half-written folder
    assert "lm-eval" in _ask(home, {"op": "hello"})["grades"]
    ok = _ask(home, req, _tar({"exams/t/test.jsonl": items, **task}))
    assert ok["ok"] and ok["n"] == 1 and _ask(home, {"op": "hello"})["sealed"] == {content: 1}
    kept = home.sealed / f"{content}.d"
    assert (kept / "lmeval/t/data/test.jsonl").read_bytes() == task["lmeval/t/data/test.jsonl"]
    assert (home.sealed / f"{content}.jsonl").read_bytes() == items and stat.S_IMODE(kept.stat().st_mode) == 0o700
    # the grader's python without lm_eval, at its one boundary: it says so, and takes nothing more
    monkeypatch.setitem(sys.modules, "lm_eval", None)
    grades = _ask(home, {"op": "hello"})["grades"]
    assert "lm-eval" not in grades and {"catalog", "jsonl"} <= set(grades)
    refused = _ask(home, {**req, "content": "1" * 64}, _tar({"exams/t/test.jsonl": items, **task}))
    assert refused["error"]["code"] == "E_NOT_FOUND" and "monte[lm-eval]" in refused["error"]["fix"]


def test_a_read_whose_weights_leave_their_folder_is_refused_and_spends_nothing(home: homes.Home) -> None:
    raw = b'{"id": "a", "prompt": "p", "answer": "1"}\n'
    content = hashlib.sha256(raw).hexdigest()
    _ask(home, {"op": "take", "content": content, "exam": "parity", "benchmark": "parity"}, raw)
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:") as tar:
        info = tarfile.TarInfo("../../key")
        info.size = 1
        tar.addfile(info, io.BytesIO(b"x"))
    r = _ask(home, {"op": "read", "run": "r1", "content": content, "cohort": "c", "role": "baseline",
                    "settings": {"temperature": 0.0}, "files": {"../../key": "x"}}, buf.getvalue())
    assert r["error"]["code"] == "E_BAD_INPUT"
    assert homes.records(home) == {} and not (home.root / "weights" / "r1").exists()


def test_the_budget_is_the_graders_own_two_reads_per_content_and_cohort() -> None:
    recs: dict[str, dict[str, Any]] = {}

    def spend(run: str, cohort: str, role: str, wid: str) -> int:
        which = server.check_budget(recs, run=run, content="C", cohort=cohort, role=role, wid=wid)
        recs[run] = {"started": {"content": "C", "cohort": cohort, "role": role, "weights_id": wid}}
        return which

    with pytest.raises(MonteError) as e:
        spend("r0", "c1", "claim", "w1")
    assert e.value.code == "E_NO_BASELINE"
    assert spend("r1", "c1", "baseline", "w0") == 1
    assert spend("r2", "c1", "claim", "w1") == 2
    for run, cohort, role, wid in (("r3", "c1", "claim", "w2"), ("r4", "c1", "baseline", "w9"),
                                   ("r5", "c2", "baseline", "w1")):  # a read checkpoint is no new base
        with pytest.raises(MonteError) as e:
            spend(run, cohort, role, wid)
        assert e.value.code == "E_SEALED"


def test_a_statement_verifies_with_the_pinned_key_only_as_signed(home: homes.Home, tmp_path: Path) -> None:
    tasks = [{"id": "a", "score": 1.0}, {"id": "b", "score": 0.0}]
    statement = {"kind": "monte-grader-read/v1", "run": "r1", "experiment": "exp", "exam": "parity",
                 "content": "C", "cohort": "c1", "role": "baseline", "n": 2, "score": 0.5,
                 "outcomes_sha256": outcomes_sha256(tasks), "target": {"kind": "base", "run": None, "step": 0},
                 "delta": None, "weights_id": weights_id({"model.safetensors": "ab"})}
    sig = ssh_sign(home.key, canonical(statement), "monte-grader").decode()
    assert check_signature(home.public_key(), statement, sig)
    assert not check_signature(home.public_key(), {**statement, "score": 1.0}, sig)
    other = homes.init(tmp_path / "other")
    assert not check_signature(other.public_key(), statement, sig)
    claim_sig = ssh_sign(home.key, canonical(statement), "monte-claim").decode()  # another namespace
    assert not check_signature(home.public_key(), statement, claim_sig)
    row = {"run": "r1", "experiment": "exp", "exam": "parity", "cohort": "c1", "role": "baseline", "n": 2,
           "score": 0.5, "plan": {"split_sha256": "C", "target": {"kind": "base", "run": None, "step": 0}},
           "delta": None}
    assert row_mismatch(statement, row, tasks) is None
    assert "score" in (row_mismatch(statement, {**row, "score": 1.0}, tasks) or "")
    assert "outcomes" in (row_mismatch(statement, row, [{"id": "a", "score": 1.0}, {"id": "b", "score": 1.0}]) or "")


def test_a_sampled_reads_outcomes_carry_each_samples_score_and_its_k_is_signed() -> None:
    """K > 1: the signed outcomes hold each sample's index, seed and score (never its answer), so
    a sample's score edited changes the hash; a row drawing another K than the one signed differs."""
    from monte.ledger.grader_statement import outcomes

    drawn = [{"id": "a", "score": 0.5, "answer": "1", "seed": 7,
              "samples": [{"sample": 0, "seed": 7, "score": 1.0, "answer": "1"},
                          {"sample": 1, "seed": 7, "score": 0.0, "answer": "0"}]}]
    kept = outcomes(drawn)
    assert kept == [{"id": "a", "score": 0.5, "seed": 7, "samples": [{"sample": 0, "seed": 7, "score": 1.0},
                                                                     {"sample": 1, "seed": 7, "score": 0.0}]}]
    swapped = [{**kept[0], "samples": [{**x, "score": 1.0 - x["score"]} for x in kept[0]["samples"]]}]
    assert outcomes_sha256(swapped) != outcomes_sha256(kept)  # the same mean, other samples: another hash
    statement = {"kind": "monte-grader-read/v1", "run": "r1", "experiment": "exp", "exam": "parity",
                 "content": "C", "cohort": "c1", "role": "baseline", "n": 1, "score": 0.5, "samples": 2,
                 "outcomes_sha256": outcomes_sha256(kept), "target": {"kind": "base", "run": None, "step": 0},
                 "delta": None}
    plan: dict[str, Any] = {"split_sha256": "C", "settings": {"samples": 2},
                            "target": {"kind": "base", "run": None, "step": 0}}
    row = {"run": "r1", "experiment": "exp", "exam": "parity", "cohort": "c1", "role": "baseline", "n": 1,
           "score": 0.5, "delta": None, "plan": plan}
    assert row_mismatch(statement, row, kept) is None
    four = {**row, "plan": {**plan, "settings": {"samples": 4}}}
    assert "samples" in (row_mismatch(statement, four, kept) or "")
    assert "samples" in (row_mismatch({**statement, "samples": 1}, row, kept) or "")


def test_config_set_grader_pins_a_key_or_writes_nothing(repo: Path, monte: Any) -> None:
    before = (repo / ".monte.yaml").read_text()
    r = monte("config", "set", "grader", "ssh://g@127.0.0.1:2222")
    assert r.code == 2 and "--key" in r.err
    r = monte("config", "set", "grader", "http://nope", "--key", "ssh-ed25519 AAAA")
    assert r.code == 2
    assert (repo / ".monte.yaml").read_text() == before
    key = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIKRUMXHrs23jSPHtkjU3ptr9r8FCW7sllGN4nPyLP7xN"
    r = monte("config", "set", "grader", "ssh://g@127.0.0.1:2222", "--key", key)
    assert r.code == 0, r.err
    text = (repo / ".monte.yaml").read_text()
    assert "grader: ssh://g@127.0.0.1:2222" in text and key in text


def test_the_leak_check_runs_on_the_grader_and_names_an_id_not_the_item(home: homes.Home) -> None:
    items = [{"id": f"p{i}", "prompt": f"What is the parity of the bits {i:08b} counted twice over?",
              "answer": str(i % 2)} for i in range(6)]
    raw = "".join(json.dumps(i) + "\n" for i in items).encode()
    content = hashlib.sha256(raw).hexdigest()
    _ask(home, {"op": "take", "content": content, "exam": "parity", "benchmark": "parity"}, raw)
    clean = b'{"input": "What is two plus two?", "output": " 4"}\n'
    req = {"op": "leaks", "contents": [content], "name": "ds", "kind": "dataset", "columns": None}
    assert _ask(home, req, clean)["leaks"] == 0
    leaky = clean + json.dumps({"input": items[3]["prompt"].upper(), "output": " 1"}).encode() + b"\n"
    found = _ask(home, req, leaky)
    assert found["leaks"] == 1 and found["example"] == ["line 2", "p3"]
    assert items[3]["prompt"] not in json.dumps(found)  # an id comes back, never the sealed text
    # every answer is counted in the grader's home: two sources, one sealed item named; the same
    # source again is no new source, and a read's signed statement carries the count (work.py)
    _ask(home, req, leaky)
    assert homes.leak_checks(home, content) == {"sources": 2, "named": 1}
    assert homes.leak_checks(home, "0" * 64) == {"sources": 0, "named": 0}
    assert _ask(home, {**req, "contents": ["0" * 64]}, clean)["error"]["code"] == "E_NOT_FOUND"


def test_a_read_of_no_model_folder_is_refused_before_it_is_spent(home: homes.Home) -> None:
    raw = b'{"id": "a", "prompt": "p", "answer": "1"}\n'
    content = hashlib.sha256(raw).hexdigest()
    _ask(home, {"op": "take", "content": content, "exam": "parity", "benchmark": "parity"}, raw)
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:") as tar:
        info = tarfile.TarInfo("README.md")
        info.size = 2
        tar.addfile(info, io.BytesIO(b"hi"))
    files = {"README.md": hashlib.sha256(b"hi").hexdigest()}
    r = _ask(home, {"op": "read", "run": "r1", "content": content, "cohort": "c", "role": "baseline",
                    "settings": {"temperature": 0.0}, "files": files}, buf.getvalue())
    assert r["error"]["code"] == "E_BAD_INPUT" and homes.records(home) == {}


def _started(home: homes.Home, run: str, *, lock: bool = True) -> int | None:
    """A read as the server leaves it once ``started`` is in: its liveness lock taken first (None:
    a read started by a monte that kept no lock), its weights copy written."""
    fd = homes.lock_run(home, run) if lock else None
    homes.append(home, run, {"started": {"run": run, "content": "C", "cohort": "c", "role": "baseline", "read": 1}},
                 f"read 1 started: {run}")
    home.weights(run).mkdir(parents=True)
    (home.weights(run) / "model.safetensors").write_bytes(b"w")
    return fd


def _holder(fd: int) -> subprocess.Popen[bytes]:
    """A live worker: a process that inherited the read's lock (as ``monte.grader.work`` does)."""
    p = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"], pass_fds=(fd,))
    os.close(fd)  # as the server does once its worker holds it
    return p


def test_a_read_whose_worker_was_killed_is_recorded_failed_with_why_not_running_forever(home: homes.Home) -> None:
    fd = _started(home, "r1")
    assert fd is not None
    worker = _holder(fd)
    try:
        assert _ask(home, {"op": "fetch", "run": "r1"}) == {"ok": True, "status": "running"}  # alive: no false failure
        assert home.weights("r1").is_dir() and "failed" not in homes.records(home)["r1"]
    finally:
        worker.kill()  # SIGKILL: nothing it runs can write `failed`
        worker.wait()
    got = _ask(home, {"op": "fetch", "run": "r1"})
    assert got["status"] == "failed", got
    assert "ended without a result" in got["error"] and "logs/r1.log" in got["error"], got["error"]
    assert "stays spent" in got["error"]
    assert not home.weights("r1").exists(), "a dead read's weights copy stays on the grader"
    assert _ask(home, {"op": "fetch", "run": "r1"}) == got  # recorded once: the record answers from now on
    # the server that waited for its worker knows how it ended
    fd = _started(home, "r2")
    assert fd is not None
    worker = _holder(fd)
    worker.kill()
    server.settle(home, "r2", exit=worker.wait())
    assert "killed by SIGKILL" in homes.records(home)["r2"]["failed"]["error"]
    # a finished read is never turned into a failed one
    homes.append(home, "r3", {"started": {"run": "r3"}, "statement": {"statement": {}, "signature": ""},
                              "outcomes": {"outcomes": []}}, "read 1 finished: r3")
    os.close(homes.lock_run(home, "r3"))  # its worker has exited
    server.settle(home, "r3", exit=0)
    assert "failed" not in homes.records(home)["r3"]


def test_a_read_started_before_the_liveness_lock_stays_as_its_record_says(home: homes.Home) -> None:
    """No lock file (a read started by an older monte): whether its worker lives is unknown, so
    nothing is recorded for it; its record alone answers."""
    _started(home, "old", lock=False)
    assert _ask(home, {"op": "fetch", "run": "old"})["status"] == "running"
    assert "failed" not in homes.records(home)["old"] and home.weights("old").is_dir()


def _status_on_a_terminal(repo: Path) -> tuple[str, str]:
    """`monte status` with stderr on a terminal (a pty), stdout a pipe: (stdout, stderr)."""
    import os
    import subprocess
    import sys

    master, slave = os.openpty()
    p = subprocess.run([sys.executable, "-m", "monte", "status"], cwd=repo, stdout=subprocess.PIPE, stderr=slave,
                       timeout=300)
    os.close(slave)
    err = os.read(master, 1 << 16).decode()
    os.close(master)
    assert p.returncode == 0, err
    return p.stdout.decode(), err


def test_status_says_in_one_line_where_the_seal_is_held(benchmark_exp: str, repo: Path, monte: Any) -> None:
    out, err = _status_on_a_terminal(repo)
    assert err.startswith("seal: local") and "monte grader init" in err and "seal" not in out
    key = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIKRUMXHrs23jSPHtkjU3ptr9r8FCW7sllGN4nPyLP7xN"
    assert monte("config", "set", "grader", "ssh://g@127.0.0.1:2222", "--key", key).code == 0
    out, err = _status_on_a_terminal(repo)
    assert err.startswith("seal: held by the grader ssh://g@127.0.0.1:2222 (key SHA256:")
    assert monte("status").err == ""  # a program reading the output (a pipe) gets the view alone


def test_the_pin_for_hooks_and_ci_is_found_without_a_work_tree_config(tmp_path: Path) -> None:
    """repository_pin: a bare server's own git config first; else the work tree's .monte.yaml; else
    the one committed on the default branch (CI's checkout of a ledger branch has none)."""
    import subprocess

    from monte.ledger.grader_statement import repository_pin
    from monte.ledger.store import Store

    def git(*args: str, cwd: Path) -> None:
        subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@monte.invalid", "-c", "core.hooksPath=/dev/null",
                        *args], cwd=cwd, check=True, capture_output=True)

    main_key, server_key = "ssh-ed25519 AAAAmain", "ssh-ed25519 AAAAserver"
    repo = tmp_path / "repo"
    git("init", "-q", "-b", "main", str(repo), cwd=tmp_path)
    assert repository_pin(Store(repo)) is None  # no grader anywhere: the local rules only
    (repo / ".monte.yaml").write_text(f"grader: ssh://g@h\ngrader_key: {main_key} comment\n")
    git("add", ".monte.yaml", cwd=repo)
    git("commit", "-q", "-m", "pin", cwd=repo)
    assert repository_pin(Store(repo)) == main_key
    assert repository_pin(Store(repo), {"grader": "ssh://g@h", "grader_key": server_key}) == server_key
    # a clone checked out on a ledger branch (no .monte.yaml in its tree): the default branch's pin
    clone = tmp_path / "clone"
    git("clone", "-q", str(repo), str(clone), cwd=tmp_path)
    git("checkout", "-q", "--orphan", "monte/exp/ledger", cwd=clone)
    git("rm", "-q", "-rf", ".", cwd=clone)
    git("commit", "-q", "--allow-empty", "-m", "ledger", cwd=clone)
    git("branch", "-q", "-D", "main", cwd=clone)
    assert not (clone / ".monte.yaml").exists()
    assert repository_pin(Store(clone)) == main_key  # origin/main's
    # a bare server repository: its own config wins over whatever a push commits
    bare = tmp_path / "shared.git"
    git("clone", "-q", "--bare", str(repo), str(bare), cwd=tmp_path)
    assert repository_pin(Store(bare)) == main_key
    git("config", "monte.graderKey", server_key, cwd=bare)
    assert repository_pin(Store(bare)) == server_key


def test_draw_keeps_a_catalog_split_and_its_secret_seed_here_and_sends_back_no_item(home: homes.Home) -> None:
    """A catalog exam's test split drawn on the grader: its items come from a seed only the home
    holds, never from the catalog's public one, and avoid what the freeze's dev and curriculum
    hold (drawn there from the plan, not from prompts a client sends); what goes back names no item."""
    import base64

    from monte.envs import freeze
    from monte.envs.registry import get
    from monte.storage.sealed_copy import decrypt

    plan = freeze.plan_freeze(name=None, benchmark=None, server="parity", dev=("parity",), test=("parity",))
    request = {"op": "draw", "plan": plan.describe()}
    first, second = _ask(home, request), _ask(home, request)
    assert first["benchmarks"] == freeze.versions(["parity"])
    got = first["drawn"]["parity"]
    assert got["content"] != second["drawn"]["parity"]["content"]  # a new secret seed each draw
    raw = (home.sealed / f"{got['content']}.jsonl").read_bytes()
    assert hashlib.sha256(raw).hexdigest() == got["content"] and len(raw) == got["size"] and got["n"] == 200
    assert set(got) == {"content", "size", "n", "dropped", "floor", "meta", "signature", "vault"}
    # the Vault's copy, encrypted on the grader: only the grader's key opens it
    assert decrypt(base64.b64decode(got["vault"]["age"]), home.key.read_bytes()) == raw
    items = [json.loads(x) for x in raw.splitlines()]
    assert all(x["prompt"] not in json.dumps(first) for x in items)
    prompts = {freeze.normalise(x["prompt"]) for x in items}
    # the split the public seed draws (what `monte env install` re-created before) shares none of them
    public = {freeze.normalise(str(x["prompt"])) for x in get("parity").benchmark.generate(freeze.SEEDS["test"], 200)}
    local = home.root.parent / "local"
    m = freeze.prepare(plan, local, sealed=lambda _: first["drawn"])
    assert m.provenance["seeds"]["test"] == "grader" and m.files["exams/parity/test.jsonl"].sha256 == got["content"]
    held = {freeze.normalise(str(x["prompt"])) for rel in ("exams/parity/dev.jsonl", "curriculum.jsonl")
            for x in map(json.loads, (local / rel).read_text().splitlines())}
    assert len(held) == 5200 and not prompts & public and not prompts & held
    seed = int((home.sealed / f"{got['content']}.seed").read_text())
    assert seed >= 2**32 and str(seed) not in json.dumps(first)
    assert server.held(home)[got["content"]] == 200
    # a plan the grader's catalog would not make (a curriculum sized to fill the item space, so the
    # test split would be what the agent knows is left), or no plan: refused, nothing drawn
    big = {**plan.describe(), "sizes": {**plan.sizes, "curriculum": 89_000}}
    for bad in ({"op": "draw", "plan": big}, {"op": "draw"}, {"op": "draw", "plan": {**plan.describe(), "exams": {}}}):
        assert _ask(home, bad)["error"]["code"] == "E_BAD_INPUT"
    assert len(list(home.sealed.glob("*.jsonl"))) == 2
