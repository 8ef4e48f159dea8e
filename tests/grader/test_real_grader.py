"""Issue 41 against a real grader (tests/grader/conftest.py): the grader's own Unix account
reached over a real sshd with the forced command, every agent-side command run as a third,
unprivileged account. The tests run in order, as the quickstart's loop does: custody, the swap
after the plan, test@0 on the grader, a chunk, the final claim whose client is killed, recover,
then what the agent cannot do."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from tests.support.grader import PYTHON, Setup, tiny_model

# the tests build on each other in order: under `-n 2 --dist loadgroup` the module runs whole on one worker
pytestmark = pytest.mark.xdist_group("test_real_grader")


def _rows(s: Setup) -> list[dict[str, Any]]:
    """The agent's ledger as recorded (read here, as root, through monte's own reader)."""
    from monte.ledger.experiment import Ledger
    from monte.workspace import open_workspace

    ws = open_workspace(s.repo, require_data_root=False)
    return [r.model_dump(mode="json") for r in Ledger(ws.store, "quickstart").rows()]


def _test_reads(s: Setup) -> list[dict[str, Any]]:
    return [r for r in _rows(s) if r["split"] == "test" and not r["smoke"]]


def test_experiment_init_hands_the_test_split_to_the_grader_and_the_agent_cannot_read_it(
        grader_setup: Setup) -> None:
    s = grader_setup
    split = s.repo / ".monte" / "environments" / "parity" / "exams" / "parity" / "test.jsonl"
    # 4 steps a chunk, not the default 50: the loop's chunks are trained for their checkpoints, and no
    # assertion here is about what training learns (tests/training is)
    init = ("experiment", "init", "quickstart", "--eval", "parity", "--model", "base-model", "--steps-per-chunk", "4")
    # the grader unreachable: refused, nothing frozen, nothing moved
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    s.agent_monte("config", "set", "grader", f"ssh://{s.grader.name}@127.0.0.1:{port}", "--key", s.public_key,
                  check=True)
    r = s.agent_monte(*init)
    assert r.returncode != 0 and "E_BOX" in r.stderr and "nothing was frozen" in r.stderr, r.stderr
    assert split.is_file() and s.agent_monte("experiment", "list", "--json", check=True).stdout.strip() == "[]"
    s.agent_monte("config", "set", "grader", s.url, "--key", s.public_key, check=True)
    # the freeze hands the split over: no moment after it where the plaintext sits on the data root
    r = s.agent_monte(*init, "--json", check=True)
    assert json.loads(r.stdout)["measurement"]["exams"]["parity"]["splits"]["test"]["n"] == 200
    assert not split.exists()
    # `parity` was frozen before the pin, from the catalog's public seed: the freeze says custody keeps
    # its items from no one, as `monte grader take` says it (tests/grader/test_catalog_draw.py)
    assert json.loads(r.stdout)["redrawable"] == ["parity"]
    content = hashlib.sha256(next((s.home / "sealed").glob("*.jsonl")).read_bytes()).hexdigest()
    assert json.loads(r.stdout)["measurement"]["exams"]["parity"]["splits"]["test"]["sha256"] == content
    for path in (s.home / "sealed" / f"{content}.jsonl", s.home, s.grader.home):
        denied = s.agent.run("cat" if path.suffix else "ls", str(path))
        assert denied.returncode != 0 and "Permission denied" in denied.stderr
    # no copy of the sealed bytes is left anywhere in the agent's repository or data root
    sealed = (s.home / "sealed" / f"{content}.jsonl").read_bytes()
    for p in s.repo.rglob("*"):
        if p.is_file() and p.stat().st_size == len(sealed):
            assert p.read_bytes() != sealed, p
    # another experiment on the same environment: the split in custody is proven by the grader's word
    r = s.agent_monte("experiment", "init", "second", "--eval", "parity", "--dry-run", "--json", check=True)
    assert json.loads(r.stdout)["measurement"]["exams"]["parity"]["splits"]["test"] == {
        "path": "environments/parity/exams/parity/test.jsonl", "sha256": content, "n": 200}
    # `monte grader take` stays for environments frozen before the grader: nothing left here to take
    r = s.agent_monte("grader", "take", "parity", "--json", check=True)
    assert json.loads(r.stdout)["taken"][0]["already"] is True


def test_the_agents_key_gets_no_shell_only_the_grader(grader_setup: Setup) -> None:
    s = grader_setup
    r = s.agent.run("ssh", "-i", str(s.key_file), "-p", str(s.sshd.port), "-o", "StrictHostKeyChecking=no",
                    "-o", "UserKnownHostsFile=/dev/null", "-o", "BatchMode=yes",
                    f"{s.grader.name}@127.0.0.1", "id; cat /etc/hostname", timeout=60, input="id\n")
    assert "uid=" not in r.stdout, r.stderr
    answer = json.loads(r.stdout.strip().splitlines()[-1])
    assert answer["error"]["code"] == "E_BAD_INPUT"  # the forced command read the line as a request


def test_case_1_weights_swapped_after_the_plan_change_nothing(grader_setup: Setup) -> None:
    """The plan proves the weights; a swap before the read is sent is refused, nothing spent."""
    s = grader_setup
    tiny_model(s.agent, s.agent.home / "other", 1)  # `monte model init OTHER --seed 1`, as the agent
    script = (
        "import shutil, sys\n"
        "from monte import api\n"
        "from monte.errors import MonteError\n"
        "plan = api.plan_eval(split='test')\n"
        f"shutil.copy('{s.agent.home}/other/model.safetensors', 'base-model/model.safetensors')\n"
        "try:\n    api.run_eval(plan)\nexcept MonteError as e:\n    print(e.code); sys.exit(5)\n"
    )
    keep = (s.repo / "base-model" / "model.safetensors").read_bytes()
    r = s.agent.run(PYTHON, "-c", script, cwd=s.repo, MONTE_GRADER_KEY_FILE=str(s.key_file))
    assert r.returncode == 5 and "E_INTEGRITY" in r.stdout, r.stderr
    assert _test_reads(s) == [] and s.grader_reads() == {}
    (s.repo / "base-model" / "model.safetensors").write_bytes(keep)  # put back (the owner stays the agent)


def test_test_at_0_runs_on_the_grader_and_verifies_by_its_signature(grader_setup: Setup) -> None:
    s = grader_setup
    s.agent_monte("eval", "--yes", check=True)  # dev@0, local
    bucket = s.agent.home / "bucket"
    s.agent.run("mkdir", str(bucket), check=True)
    s.agent_monte("config", "set", "bucket", str(bucket), check=True)
    r = s.agent_monte("eval", "--split", "test", "--push", "--yes", "--json", check=True)
    row = json.loads(r.stdout)["runs"][0]
    # --push: the results bucket holds the read after each of its records, as for a local read
    events = (bucket / "runs" / "quickstart" / row["run"] / "events.jsonl").read_text().splitlines()
    assert [json.loads(x)["event"] for x in events] == ["started", "succeeded"]
    reads = s.grader_reads()
    assert list(reads) == [row["run"]]
    statement = reads[row["run"]]["statement"]["statement"]
    assert statement["score"] == row["score"] and statement["n"] == row["n"] == 200
    assert statement["role"] == "baseline" and statement["read"] == 1
    s.agent_monte("ledger", "verify", "--all", check=True)


def test_the_loop_a_chunk_then_a_claim_whose_client_is_killed_completes_and_recover_records_it(
        grader_setup: Setup) -> None:
    s = grader_setup
    rows = s.agent.home / "parity-sft.jsonl"
    with open(s.repo / ".monte" / "environments" / "parity" / "curriculum.jsonl") as src, open(rows, "w") as out:
        for line in src:
            item = json.loads(line)
            out.write(json.dumps({"input": item["prompt"], "output": " " + item["answer"]}) + "\n")
    shutil.chown(rows, s.agent.name, s.agent.name)
    # as the quickstart freezes its demonstrations: from the environment whose test split is in custody
    s.agent_monte("dataset", "add", "parity-sft", "--from-env", "parity", "--kind", "sft", check=True)
    # the leak check runs where the sealed items are: one sealed prompt in a dataset is found there
    sealed = next((s.home / "sealed").glob("*.jsonl")).read_text().splitlines()[3]
    leaky = s.agent.home / "leaky.jsonl"
    leaky.write_text(rows.read_text() + json.dumps({"input": json.loads(sealed)["prompt"], "output": " 1"}) + "\n")
    shutil.chown(leaky, s.agent.name, s.agent.name)
    s.agent_monte("dataset", "add", "leaky", "--from-file", str(leaky), "--kind", "sft", check=True)
    r = s.agent_monte("train", "--recipe", "sft-tiny", "--source", "leaky", "--from-base", "--yes")
    assert r.returncode == 3 and "E_LEAK" in r.stderr and "found by the grader" in r.stderr, r.stderr
    r = s.agent_monte("train", "--recipe", "sft-tiny", "--source", "parity-sft", "--from-base", "--yes", "--json",
                      check=True)
    first = json.loads(r.stdout)["run"]
    # a chunk on top of it, across a stage boundary: GRPO on the environment (the claim's lineage is two
    # chunks deep). The quickstart's second SFT chunk between them, and a dev eval of each chunk, prove
    # nothing more about the grader (dev evals run here; tests/training covers --parent chains)
    a = f"{first['run']}@{first['checkpoints'][-1]['step']}"
    s.agent_monte("train", "--recipe", "grpo-tiny", "--source", "parity", "--parent", a, "--yes", check=True)
    s.agent_monte("eval", "--yes", check=True)  # dev on the GRPO chunk, before the claim
    env = s.agent.env(MONTE_GRADER_KEY_FILE=str(s.key_file))
    client = subprocess.Popen(["runuser", "-u", s.agent.name, "--", "env", "-i",
                               *(f"{k}={v}" for k, v in env.items()), PYTHON, "-m", "monte", "eval", "--split",
                               "test", "--yes"], cwd=s.repo, start_new_session=True,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and len(s.grader_reads()) < 2:
        time.sleep(0.2)
    assert len(s.grader_reads()) == 2, "the claim never reached the grader"
    os.killpg(client.pid, signal.SIGKILL)  # the client dies mid-read
    client.wait()
    claim = next(r for r in s.grader_reads().values() if r["started"]["role"] == "claim")
    run = claim["started"]["run"]
    while time.monotonic() < deadline and "statement" not in s.grader_reads()[run]:
        time.sleep(0.05)
    assert "statement" in s.grader_reads()[run], "the read did not complete on the grader"
    # case 2: a result file written by the agent (every outcome flipped) is never what recover records
    folder = s.repo / ".monte" / "runs" / "quickstart" / run
    flipped = [{"id": o["id"], "score": 1.0 - o["score"]} for o in s.grader_reads()[run]["outcomes"]["outcomes"]]
    forged = {"n": 200, "smoke": False, "tasks": flipped}
    s.agent.run("sh", "-c", f"mkdir -p {folder} && cat > {folder}/finish.json", input=json.dumps(forged), check=True)
    r = s.agent_monte("recover", "quickstart", "--json", check=True)
    assert [x["run"] for x in json.loads(r.stdout)] == [run]
    reads = _test_reads(s)
    assert [x["role"] for x in reads] == ["baseline", "claim"] and all(x["status"] == "succeeded" for x in reads)
    signed = s.grader_reads()[run]["statement"]["statement"]
    # the leak check's answers are counted there and signed: it named one sealed item (the leaky dataset's)
    assert signed["leak_checks"]["named"] == 1 and signed["leak_checks"]["sources"] >= 2, signed["leak_checks"]
    mine = next(x for x in reads if x["run"] == run)
    assert mine["score"] == signed["score"] and abs(mine["delta"]["delta"] - signed["delta"]["delta"]) < 1e-12
    assert mine["score"] != sum(t["score"] for t in flipped) / 200  # not the forged file's score
    s.agent_monte("ledger", "verify", "--all", check=True)


def test_the_claim_made_through_the_grader_is_promoted_and_reported(grader_setup: Setup) -> None:
    """The quickstart's end: the claimed checkpoint promoted (its confirmation is the claim's own
    reference) and the page of it all written, both from the rows the grader signed."""
    s = grader_setup
    claim = next(r for r in _test_reads(s) if r["role"] == "claim")
    target = f"{claim['plan']['target']['run']}@{claim['plan']['target']['step']}"
    promoted = s.agent.home / "promoted"
    s.agent_monte("promote", target, "--dest", str(promoted), "--confirm", target, check=True)
    assert (promoted / "config.json").is_file() and any(promoted.glob("*.safetensors"))
    page = s.agent.home / "report.html"
    s.agent_monte("report", "--out", str(page), check=True)
    assert claim["run"] in page.read_text()


def test_a_claim_bundle_is_trusted_by_the_graders_key(grader_setup: Setup) -> None:
    """`monte claim verify --grader-key`: test@0 and the claim signed by the team's grader."""
    s = grader_setup
    claim = next(r for r in _test_reads(s) if r["role"] == "claim")
    out = s.agent.home / "claim"
    s.agent_monte("claim", "export", claim["run"], "--out", str(out), "--key", str(s.key_file), "--identity",
                  "agent", check=True)
    allowed = s.agent.home / "allowed_signers"
    allowed.write_text("agent " + s.key_file.with_suffix(".pub").read_text())
    ok = s.agent_monte("claim", "verify", str(out), "--allowed-signers", str(allowed), "--grader-key", s.public_key)
    assert ok.returncode == 0, ok.stderr
    other = s.agent_monte("claim", "verify", str(out), "--allowed-signers", str(allowed),
                          "--grader-key", s.key_file.with_suffix(".pub").read_text().strip())
    assert other.returncode == 5 and "grader key" in other.stderr, other.stderr


def test_a_forged_test_read_row_fails_verify(grader_setup: Setup, tmp_path: Path) -> None:
    """A copy of the repository whose test@0 statement was edited (its score) fails verify."""
    from monte.ledger.grader_statement import ROW_FILE
    from monte.ledger.refs import ledger_ref
    from monte.ledger.store import Change
    from monte.ledger.views import run_dir
    from monte.workspace import open_workspace

    s = grader_setup
    copy = tmp_path / "repo"
    shutil.copytree(s.repo, copy, symlinks=True)
    ws = open_workspace(copy)
    base = next(r for r in _test_reads(s) if r["role"] == "baseline")
    path = f"{run_dir(base['run'])}/{ROW_FILE}"
    snap = ws.store.snapshot(ledger_ref("quickstart"))
    doc = json.loads(snap.read(path) or b"{}")
    doc["statement"]["score"] = 1.0
    ws.store.append(ledger_ref("quickstart"), lambda snap: Change(
        summary="edit", writes={path: json.dumps(doc).encode()}, trailers={"Monte-Event": "note"}))
    r = subprocess.run([PYTHON, "-m", "monte", "ledger", "verify", "--all", "--json"], cwd=copy,
                       capture_output=True, text=True, env={**os.environ, "MONTE_DATA_ROOT": str(copy / ".monte")})
    assert r.returncode == 5, r.stdout
    details = json.loads(r.stdout)["error"].get("details") or []
    assert any(d["rule"] == "grader" for d in details), r.stdout


def _git(*args: str, cwd: Path, check: bool = True, **env: str) -> subprocess.CompletedProcess[str]:
    r = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True,
                       env={**os.environ, "GIT_AUTHOR_NAME": "x", "GIT_AUTHOR_EMAIL": "x@monte.invalid",
                            "GIT_COMMITTER_NAME": "x", "GIT_COMMITTER_EMAIL": "x@monte.invalid", **env})
    if check and r.returncode != 0:
        raise AssertionError(f"git {' '.join(args)} exited {r.returncode}: {r.stderr}")
    return r


def _forge(s: Setup, where: Path, run: str, statement: dict[str, Any] | None) -> Path:
    """A copy of the agent's repository whose ledger history was rewritten as a forger would (git
    filter-branch, monte's hooks bypassed): run ``run``'s finishing commit carries ``statement``
    as its grader.json (None: no grader.json at all, an unsigned read). Nothing else changes."""
    from monte.ledger.grader_statement import ROW_FILE
    from monte.ledger.views import run_dir

    copy = where / "repo"
    shutil.copytree(s.repo, copy, symlinks=True)
    path = f"{run_dir(run)}/{ROW_FILE}"
    if statement is None:
        cmd = f"git rm -q --cached --ignore-unmatch {path}"
    else:
        blob = subprocess.run(["git", "hash-object", "-w", "--stdin"], cwd=copy, input=json.dumps(statement),
                              capture_output=True, text=True, check=True).stdout.strip()
        cmd = f"if git ls-files --error-unmatch {path} >/dev/null 2>&1; then " \
              f"git update-index --cacheinfo 100644,{blob},{path}; fi"
    ref = "refs/heads/monte/quickstart/ledger"
    mirror = where / "mirror.git"  # filter-branch wants no local changes: rewritten in a bare copy, fetched back
    _git("clone", "-q", "--bare", str(copy), str(mirror), cwd=where)
    _git("-c", "core.hooksPath=/dev/null", "filter-branch", "-f", "--index-filter", cmd, "--", ref, cwd=mirror,
         FILTER_BRANCH_SQUELCH_WARNING="1")
    _git("-c", "core.hooksPath=/dev/null", "fetch", "-q", str(mirror), f"+{ref}:{ref}", cwd=copy)
    return copy


def _bare(where: Path, pin: str | None) -> Path:
    """A shared bare repository with monte's hooks installed, pinning ``pin`` as its grader key."""
    bare = where / "shared.git"
    _git("init", "-q", "--bare", str(bare), cwd=where)
    subprocess.run([PYTHON, "-m", "monte", "hooks", "install"], cwd=bare, check=True, capture_output=True,
                   env={**os.environ, "GIT_DIR": str(bare)})
    if pin is not None:
        _git("config", "monte.graderKey", pin, cwd=bare)
    return bare


def _push(copy: Path, bare: Path, *, verify: bool = False) -> subprocess.CompletedProcess[str]:
    return _git("push", *(() if verify else ("--no-verify",)), str(bare), "refs/heads/monte/*:refs/heads/monte/*",
                cwd=copy, check=False)


def test_the_hooks_refuse_a_pushed_test_read_without_the_graders_signature(grader_setup: Setup,
                                                                          tmp_path: Path) -> None:
    """pre-receive (a shared bare repository's own pin) and pre-push (the work tree's): a test read
    whose row carries no signature, or a signed statement edited, is refused with rule ``grader``;
    the honest ledger passes; the same unsigned push to a repository pinning no grader passes."""
    s = grader_setup
    claim = next(r for r in _test_reads(s) if r["role"] == "claim")
    honest = tmp_path / "honest"
    honest.mkdir()
    shutil.copytree(s.repo, honest / "repo", symlinks=True)
    ok = _push(honest / "repo", _bare(honest, s.public_key))
    assert ok.returncode == 0, ok.stderr
    unsigned = tmp_path / "unsigned"
    unsigned.mkdir()
    copy = _forge(s, unsigned, claim["run"], None)
    r = _push(copy, _bare(unsigned, s.public_key))
    assert r.returncode != 0 and "[grader]" in r.stderr and "no grader signature" in r.stderr, r.stderr
    (unsigned / "open").mkdir()
    assert _push(copy, _bare(unsigned / "open", None)).returncode == 0  # no pin there: the local rules only
    # pre-push: the agent's own push, with the pin of its work tree's .monte.yaml (its local memory wiped first)
    for memory in (".git/monte", ".git/logs"):  # tips.log and git's reflogs: the agent's to delete
        shutil.rmtree(copy / memory, ignore_errors=True)
    (unsigned / "pre-push").mkdir()
    r = _push(copy, _bare(unsigned / "pre-push", None), verify=True)
    assert r.returncode != 0 and "[grader]" in r.stderr, r.stderr
    edited = tmp_path / "edited"
    edited.mkdir()
    doc = s.grader_reads()[claim["run"]]["statement"]
    score = 0.25 if doc["statement"]["score"] != 0.25 else 0.5  # another score than the one signed
    forged = {"statement": {**doc["statement"], "score": score}, "signature": doc["signature"]}
    r = _push(_forge(s, edited, claim["run"], forged), _bare(edited, s.public_key))
    assert r.returncode != 0 and "[grader]" in r.stderr and "does not verify" in r.stderr, r.stderr


def test_a_sampled_test_read_draws_k_samples_per_item_on_the_grader(grader_setup: Setup) -> None:
    """K > 1 at temperature > 0 (a new cohort: the quickstart's two reads stay spent): the grader draws
    each item's K seeded samples with the frozen settings, grades them, signs K and the per-item
    outcomes with every sample's score; the agent's row records them as a local K > 1 read does."""
    from monte.models.generate import sample_seed

    s = grader_setup
    tiny_model(s.agent, s.repo / "sampled-base", 2)  # a new cohort (`monte model init sampled-base --seed 2`)
    s.agent_monte("experiment", "init", "sampled", "--eval", "parity", "--model", "sampled-base", "--samples", "2",
                  "--temperature", "1.0", "--pass-at", "2", check=True)  # K = 2: the least K > 1
    r = s.agent_monte("eval", "-e", "sampled", "--split", "test", "--yes", "--json", check=True)
    row = json.loads(r.stdout)["runs"][0]
    read = s.grader_reads()[row["run"]]
    statement, signed = read["statement"]["statement"], read["outcomes"]["outcomes"]
    assert statement["samples"] == 2 and statement["n"] == row["n"] == 200 and statement["score"] == row["score"]
    assert all(len(o["samples"]) == 2 and o["seed"] == sample_seed(o["id"]) for o in signed)
    assert not any("answer" in x for o in signed for x in o["samples"])  # scores come back, never a text
    from monte.ledger.experiment import Ledger
    from monte.ledger.refs import ledger_ref
    from monte.runs.lifecycle import read_tasks
    from monte.workspace import open_workspace

    ws = open_workspace(s.repo, require_data_root=False)
    tasks = read_tasks(ws.store.snapshot(ledger_ref("sampled")), row["run"])
    assert tasks == signed  # what status pairs (K samples per item) is what the grader signed
    assert Ledger(ws.store, "sampled").row(row["run"]).status == "succeeded"  # type: ignore[union-attr]
    s.agent_monte("ledger", "verify", "--all", check=True)
    shown = s.agent_monte("status", "sampled", check=True).stdout
    assert "K = 2 samples per item" in shown and f"test@0: {row['score']:.4f} (n=200, run {row['run']})" in shown


def test_local_logs_and_refs_grant_no_third_read(grader_setup: Setup) -> None:
    """The agent edits the seal's local memory and asks the grader directly: refused there."""
    s = grader_setup
    s.agent.run("sh", "-c", f"echo forged >> {s.repo}/.git/monte/verified.log", check=False)
    bases = s.agent.run("git", "for-each-ref", "--format=%(refname)", "refs/heads/monte/", cwd=s.repo).stdout.split()
    for ref in [r for r in bases if "/base" in r or "/lineage/" in r]:  # the cohort's local memory, gone
        s.agent.run("git", "update-ref", "-d", ref, cwd=s.repo, check=True, MONTE_HOOKS="off")  # the agent can
    before = len(s.grader_reads())
    first = next(r["started"] for r in s.grader_reads().values()
                 if r["started"]["role"] == "baseline" and r["started"]["experiment"] == "quickstart")
    script = (
        "import json, sys\n"
        "from pathlib import Path\n"
        "from monte.grader import client\n"
        "from monte.ledger.lineage import servable_files\n"
        "from monte.workspace import open_workspace\n"
        "from monte.errors import MonteError\n"
        "g = client.require(open_workspace())\n"
        "files = servable_files(Path('base-model'))\n"
        "payload = client.pack_weights(Path('base-model'), files)[0]\n"
        f"base = json.loads({json.dumps(first)!r})\n"
        "for role, cohort, run in (('baseline', base['cohort'], 'forged1'), ('baseline', 'c-new', 'forged2'),\n"
        "                          ('claim', base['cohort'], 'forged3')):\n"
        "    req = dict(op='read', run=run, experiment='quickstart', exam=base['exam'], content=base['content'],\n"
        "               cohort=cohort, role=role, target=base['target'], settings=base['settings'], files=files)\n"
        "    try:\n        client.call(g, req, payload)\n"
        "    except MonteError as e:\n        print(e.code)\n"
    )
    r = s.agent.run(PYTHON, "-c", script, cwd=s.repo, MONTE_GRADER_KEY_FILE=str(s.key_file))
    assert r.stdout.split() == ["E_SEALED", "E_SEALED", "E_SEALED"], (r.stdout, r.stderr)
    assert len(s.grader_reads()) == before

