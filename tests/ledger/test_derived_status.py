"""`monte status` through its derived cache (`monte.ledger.derived`): what it prints is what it
computes without the cache, cold, warm, after an append and after a row's transition; a dead
run reads abandoned with the cache warm; a torn, edited or forged cache is never a wrong status
unless its MAC was forged too, and `monte ledger verify` names it either way."""

from __future__ import annotations

import hashlib
import hmac
import json
import marshal
import os
import shutil
import socket
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from monte import status as st
from monte.ledger import derived
from monte.ledger.experiment import Ledger
from monte.ledger.records import RunRow
from monte.ledger.store import Store
from tests.support.helpers import monte_proc

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
import status_10k  # noqa: E402 - the benchmark's ledger builder: evals, deltas, training rows, forks

EXP = status_10k.EXPERIMENT


def _cli(repo: Path, *args: str) -> Any:
    r = monte_proc("status", "--json", *args, cwd=repo)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


CACHES = ("status", "view-json", "view-text", "fold-json", "fold-text")


def _without_cache(repo: Path, *, text: bool = False) -> Any:
    """The status computed with no derived cache at all (the facts, the kept views and folds
    moved aside, then back); ``text``: the human status off a terminal."""
    paths = [derived.cache_path(repo / ".git", EXP, name) for name in CACHES]
    moved = [(p, p.with_name(f"aside-{p.name}")) for p in paths if p.exists()]
    for path, aside in moved:
        path.rename(aside)
    try:
        r = monte_proc("status", *(() if text else ("--json",)), cwd=repo)
        assert r.returncode == 0, r.stderr
        return r.stdout if text else json.loads(r.stdout)
    finally:
        for path in paths:
            path.unlink(missing_ok=True)
        for path, aside in moved:
            aside.rename(path)


def _views(repo: Path) -> list[Path]:
    return [derived.cache_path(repo / ".git", EXP, f"view-{mode}") for mode in ("json", "text")]


def _folds(repo: Path) -> list[Path]:
    return [derived.cache_path(repo / ".git", EXP, f"fold-{mode}") for mode in ("json", "text")]


def _append(repo: Path, **fields: Any) -> RunRow:
    led = Ledger(Store(repo), EXP)
    snap = led.snapshot()
    base = next(r for r in led.rows(snap) if r.kind == "eval")
    row = base.model_copy(update={"seq": 0, **fields})
    return led.append_row(lambda _s, _q: row.model_copy(), event="finished", summary=lambda r: f"eval {r.run}")


@pytest.fixture(scope="module")
def _built_once(_template: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    dest = tmp_path_factory.mktemp("built") / "repo"
    shutil.copytree(_template, dest, symlinks=True)
    status_10k.build_ledger(dest, 60, 7, 5, 4, progress_every=0)
    return dest


@pytest.fixture
def built(_built_once: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A ledger of 60 runs as the benchmark builds them (built once per module), copied."""
    dest = tmp_path / "built"
    shutil.copytree(_built_once, dest, symlinks=True)
    monkeypatch.chdir(dest)
    return dest


def test_status_through_the_cache_is_the_status_computed_without_it(built: Path) -> None:
    repo = built
    path = derived.cache_path(repo / ".git", EXP, "status")
    reference = _without_cache(repo)
    assert not path.exists()
    assert _cli(repo) == reference  # cold: derives every index, writes the cache
    assert path.is_file()
    assert _cli(repo) == reference  # warm: the runs/ tree is the one the cache describes
    assert reference["deltas"] and reference["checkpoints"] and reference["lineage"]
    # an append: one index derived again, the rest from the cache
    new = _append(built, run="zz0000000001", status="started", host="elsewhere", pid=1)
    after = _cli(repo)
    assert after == _without_cache(repo) and after != reference
    assert [r["run"] for r in after["rows"]][-1] == new.run
    # a transition rewrites the row in place (same run, same seq)
    _append(built, run=new.run, status="failed", seq=new.seq, error="boom")
    again = _cli(repo)
    assert again == _without_cache(repo)
    assert next(r for r in again["rows"] if r["run"] == new.run)["status"] == "failed"
    # the Python API's rows (a list) are the CLI's rows (written from their serialized form)
    from monte import api
    from monte.workspace import open_workspace

    listed = api.status(ws=open_workspace(repo, require_data_root=False))
    assert json.loads(json.dumps(listed["rows"])) == again["rows"]


def test_a_dead_run_reads_abandoned_with_the_cache_warm(built: Path) -> None:
    gone = 2**22 + 12345  # above pid_max's default: no such process
    row = _append(built, run="zz0000000002", status="running", host=socket.gethostname(), pid=gone,
                  proc_start="1")
    mine = _append(built, run="zz0000000003", status="running", host=socket.gethostname(), pid=os.getpid(),
                   proc_start=None)
    for _ in range(2):  # cold, then warm: the liveness probe runs on every read, never cached
        rows = {r["run"]: r for r in _cli(built)["rows"]}
        assert rows[row.run]["status"] == "abandoned"
        assert rows[mine.run]["status"] == "running"


def test_a_row_orjson_refuses_is_written_the_slow_way(built: Path) -> None:
    _append(built, run="zz0000000004", status="failed", role="odd \udc80 role")
    out = _cli(built)
    assert _cli(built) == out == _without_cache(built)
    assert next(r for r in out["rows"] if r["run"] == "zz0000000004")["role"] == "odd \udc80 role"


def _verify(repo: Path) -> str:
    r = monte_proc("ledger", "verify", cwd=repo)
    return r.stdout + r.stderr


def test_an_edited_cache_is_not_used_and_verify_names_it(built: Path) -> None:
    reference = _cli(built)
    path = derived.cache_path(built / ".git", EXP, "status")
    assert "[cache]" not in _verify(built)  # the honest cache (the ledger itself fails verify: it
    # is the benchmark's, written without the started records)
    data = bytearray(path.read_bytes())
    at = data.index(b"succeeded")
    data[at:at + 9] = b"abandoned"  # same length: only the MAC tells
    path.write_bytes(bytes(data))
    assert _cli(built) == reference  # not used: derived again, and rewritten
    path.write_bytes(bytes(data))
    assert "its MAC does not match" in _verify(built)


def test_a_forged_cache_that_passes_its_mac_is_a_verify_failure(built: Path) -> None:
    _cli(built)
    path = derived.cache_path(built / ".git", EXP, "status")
    key = (path.parent / "key").read_bytes()
    body = path.read_bytes()[:-32]
    version, runs_tree, entries = marshal.loads(body[len(derived.MAGIC):])
    sha, facts = next((s, f) for s, f in entries.items() if any(x[st.DELTA] for x in f))
    i = next(i for i, x in enumerate(facts) if x[st.DELTA])
    forged = list(facts[i])
    forged[st.DELTA] = {**forged[st.DELTA], "verdict": "ok", "lower": 0.5}
    entries[sha] = [*facts[:i], tuple(forged), *facts[i + 1:]]
    body = derived.MAGIC + marshal.dumps((version, runs_tree, entries))
    path.write_bytes(body + hmac.new(key, body, hashlib.sha256).digest())
    for view in _views(built) + _folds(built):  # the kept view and fold of this state, made before the
        view.unlink(missing_ok=True)  # forgery: not the facts'
    shown = _cli(built)
    assert any(d.get("lower") == 0.5 for d in shown["deltas"])  # a forger with the key fools status...
    out = _verify(built)
    assert "[cache]" in out and "not what the index derives" in out  # ...and verify names it
    assert sha.decode() in out


def test_no_cache_file_without_a_runs_tree(repo: Path) -> None:
    from monte.ledger.records import ExamFreeze, Measurement, SplitFreeze

    Ledger(Store(repo), EXP).create(Measurement(
        experiment=EXP, created_at="2026-01-01T00:00:00Z", environment="parity",
        environment_fingerprint="sha256:" + "ab" * 32, grader={},
        exams={"parity": ExamFreeze(benchmark="parity", splits={
            "dev": SplitFreeze(path="d.jsonl", sha256="cd" * 32, n=10)})}))
    assert _cli(repo)["rows"] == []
    assert not derived.cache_path(repo / ".git", EXP, "status").exists()


def test_status_reads_the_measurement_as_validation_would() -> None:
    from monte.ledger.records import EvalSettings, ExamFreeze, Measurement, SplitFreeze
    from monte.ledger.views import MeasurementView

    m = Measurement(experiment="e", created_at="2026-01-01T00:00:00Z", environment="parity",
                    environment_fingerprint="sha256:" + "ab" * 32, grader={"x": 1}, model="repo:base",
                    eval=EvalSettings(max_new_tokens=8, stop=["\n", "."]),
                    exams={"parity": ExamFreeze(benchmark="parity", splits={
                        "dev": SplitFreeze(path="d.jsonl", sha256="cd" * 32, n=10),
                        "test": SplitFreeze(path="t.jsonl", sha256="ef" * 32, n=20)})})
    view = MeasurementView.parse(m.model_dump_json().encode())
    assert (view.experiment, view.environment) == (m.experiment, m.environment)
    assert {e: {s: v._asdict() for s, v in x.splits.items()} for e, x in view.exams.items()} == \
        {e: {s: v.model_dump() for s, v in x.splits.items()} for e, x in m.exams.items()}
    with pytest.raises((KeyError, TypeError, ValueError)):
        MeasurementView.parse(b'{"experiment": "e", "environment": "p", "exams": {"x": {"splits": {}}}}')


def test_a_status_imports_no_pydantic(built: Path) -> None:
    """What a status prints needs no model object: pydantic's import and models were ~50 ms of
    every status process (issue 19)."""
    probe = ("import sys\nfrom monte.cli.main import main\ntry:\n    main(['status', '--json'])\n"
             "except SystemExit:\n    pass\nprint(sorted(m for m in sys.modules if m.split('.')[0] in "
             "('pydantic', 'torch', 'transformers', 'dvc', 'fabric')), file=sys.stderr)")
    for _ in range(2):  # cold (derives and writes the cache), then warm
        r = subprocess.run([sys.executable, "-c", probe], cwd=built, capture_output=True, text=True)
        assert r.returncode == 0 and json.loads(r.stdout)["rows"]
        assert r.stderr.strip().splitlines()[-1] == "[]"


def test_a_cache_without_a_readable_key_is_not_used_nor_called_forged(built: Path) -> None:
    reference = _cli(built)
    key = derived.cache_path(built / ".git", EXP, "status").parent / "key"
    key.unlink()  # as another user sees a 0600 key: unreadable
    assert _cli(built) == reference  # derived again (and a new key written)
    key.unlink()
    assert "[cache]" not in _verify(built)


def test_the_human_status_from_the_cached_lines_is_the_one_from_the_rows(built: Path) -> None:
    """Off a terminal `monte status` prints each row's and delta's line as the cache kept it
    formatted; rendered from the rows themselves (the Python API's dicts) it reads the same,
    a dead run included."""
    import contextlib
    import io

    from monte import api
    from monte.cli.runs import render_status
    from monte.workspace import open_workspace

    _append(built, run="zz0000000005", status="running", host=socket.gethostname(), pid=2**22 + 54321,
            proc_start="1")
    for _ in range(2):  # cold, then warm
        r = monte_proc("status", cwd=built)
        assert r.returncode == 0, r.stderr
        buf = io.StringIO()
        with contextlib.redirect_stdout(buf):
            render_status(api.status(ws=open_workspace(built, require_data_root=False)))
        assert r.stdout == buf.getvalue()
        assert "zz0000000005\teval\t" in r.stdout and "\tabandoned\t" in r.stdout


# --- the kept views (issue 35): what status printed for one state of the repository ---------------


def test_a_kept_view_is_what_status_prints_without_it_in_both_forms(built: Path) -> None:
    reference = _without_cache(built)
    assert _cli(built) == reference  # made, and kept
    text = monte_proc("status", cwd=built).stdout
    assert all(v.is_file() for v in _views(built))
    assert _cli(built) == reference  # from the kept view
    assert monte_proc("status", cwd=built).stdout == text
    for v in _views(built):
        v.unlink()
    assert monte_proc("status", cwd=built).stdout == text  # made again: the same


def test_a_view_is_not_used_for_another_state(built: Path) -> None:
    before = _cli(built)
    _append(built, run="zz0000000006", status="failed", error="x")
    after = _cli(built)
    assert after != before and after == _without_cache(built)
    # a new ref the disclosure reads (another experiment's ledger) is another state too
    key_before = marshal.loads(_views(built)[0].read_bytes()[len(derived.MAGIC):-32])[1]
    subprocess.run(["git", "update-ref", "refs/heads/monte/other/ledger", f"refs/heads/monte/{EXP}/ledger"],
                   cwd=built, check=True, env={**os.environ, "MONTE_HOOKS": "off"})
    assert _cli(built, EXP) == after  # (a copy of the same ledger: the same reads, the same status)
    assert marshal.loads(_views(built)[0].read_bytes()[len(derived.MAGIC):-32])[1] != key_before


def test_a_run_that_died_after_its_view_was_kept_reads_abandoned(built: Path) -> None:
    p = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        from monte.processes import proc_start

        _append(built, run="zz0000000007", status="running", host=socket.gethostname(), pid=p.pid,
                proc_start=proc_start(p.pid))
        assert {r["run"]: r for r in _cli(built)["rows"]}["zz0000000007"]["status"] == "running"
        assert "zz0000000007\teval" in monte_proc("status", cwd=built).stdout
    finally:
        p.kill()
        p.wait()
    assert {r["run"]: r for r in _cli(built)["rows"]}["zz0000000007"]["status"] == "abandoned"
    line = next(x for x in monte_proc("status", cwd=built).stdout.splitlines() if x.startswith("zz0000000007"))
    assert "\tabandoned\t" in line


def _forge_view(path: Path, change: Any) -> None:
    key = (path.parent / "key").read_bytes()
    body = path.read_bytes()[:-32]
    version, state, live, depends, payload = marshal.loads(body[len(derived.MAGIC):])
    body = derived.MAGIC + marshal.dumps((version, state, live, depends, change(payload)))
    path.write_bytes(body + hmac.new(key, body, hashlib.sha256).digest())


def test_an_edited_view_is_not_used_and_a_forged_one_is_a_verify_failure(built: Path) -> None:
    reference = _cli(built)
    text = monte_proc("status", cwd=built).stdout
    assert "[cache]" not in _verify(built)
    js, tx = _views(built)
    data = bytearray(js.read_bytes())
    at = data.index(b"succeeded")
    data[at:at + 9] = b"abandoned"
    js.write_bytes(bytes(data))
    assert _cli(built) == reference  # its MAC fails: made again, and rewritten
    js.write_bytes(bytes(data))
    assert "view-json: its MAC does not match" in _verify(built)
    _cli(built)
    # forged with the key: status prints it (a forger with the key fools a read), verify names it
    _forge_view(js, lambda b: b.replace(b'"verdict":"STRIKE"', b'"verdict":"ok"', 1))
    _forge_view(tx, lambda t: t.replace(" STRIKE", " ok", 1))
    assert _cli(built) != reference and monte_proc("status", cwd=built).stdout != text
    out = _verify(built)
    assert "view-json: its view of the current state is not what the ledger derives" in out
    assert "view-text: its view of the current state is not what the ledger derives" in out


# --- a view made again continues from the kept fold (issue 35) ---------------------------------


def _both(repo: Path) -> tuple[Any, str]:
    r = monte_proc("status", cwd=repo)
    assert r.returncode == 0, r.stderr
    return _cli(repo), r.stdout


def _append_like(repo: Path, pick: Any, **fields: Any) -> RunRow:
    """A new run (new id, the next record number) shaped like the newest row ``pick`` accepts."""
    led = Ledger(Store(repo), EXP)
    like = next(r for r in reversed(led.rows()) if pick(r))
    row = like.model_copy(update={"seq": 0, **fields})
    return led.append_row(lambda _s, _q: row.model_copy(), event="finished", summary=lambda r: f"{r.kind} {r.run}")


def _target(r: RunRow) -> str:
    return str((r.plan.get("target") or {}).get("kind"))


def test_a_view_made_after_appends_of_each_row_kind_is_the_one_made_from_scratch(built: Path) -> None:
    facts = derived.cache_path(built / ".git", EXP, "status")
    _both(built)  # cold: every index derived, the views and the folds kept
    derived_once = facts.read_bytes()

    def dev_eval(r: RunRow) -> bool:
        return bool(r.kind == "eval" and r.split == "dev" and _target(r) == "checkpoint" and r.delta
                    and r.status == "succeeded")

    kinds: dict[str, tuple[Callable[[Any], bool], dict[str, Any]]] = {
        "started elsewhere": (dev_eval, {"status": "started", "delta": None, "score": None, "host": "elsewhere",
                                         "pid": 1}),
        "dev eval with its delta": (dev_eval, {}),
        "base eval": (lambda r: r.kind == "eval" and _target(r) == "base", {}),
        "test read": (dev_eval, {"split": "test", "delta": None}),
        "training run": (lambda r: r.kind == "train" and bool(r.checkpoints) and not r.smoke, {}),
        "smoke": (dev_eval, {"smoke": True}),
        "failed": (dev_eval, {"status": "failed", "error": "boom", "delta": None}),
        "dead on this host": (dev_eval, {"status": "running", "host": socket.gethostname(), "pid": 2**22 + 7,
                                         "proc_start": "1", "delta": None}),
    }
    shown = []
    for i, (kind, (pick, fields)) in enumerate(kinds.items()):
        row = _append_like(built, pick, run=f"zf{i:010d}", **fields)
        folded = _both(built)
        assert facts.read_bytes() == derived_once, kind  # continued from the fold: no index derived again
        assert folded == (_without_cache(built), _without_cache(built, text=True)), kind
        assert [r["run"] for r in folded[0]["rows"]][-1] == row.run
        shown.append(folded[0])
    assert shown[1]["deltas"] != shown[0]["deltas"]  # the folded rows reached the aggregates
    assert shown[4]["lineage"] != shown[3]["lineage"]
    assert shown[3]["cohorts"] != shown[2]["cohorts"] or shown[3]["exams"] != shown[2]["exams"]
    assert {r["run"]: r for r in shown[-1]["rows"]}["zf0000000007"]["status"] == "abandoned"
    assert "[cache]" not in _verify(built)  # the folds kept are what the ledger derives


def test_a_rewritten_history_or_a_changed_row_is_read_again_not_folded(built: Path) -> None:
    facts = derived.cache_path(built / ".git", EXP, "status")
    ref = f"refs/heads/monte/{EXP}/ledger"
    env = {**os.environ, "MONTE_HOOKS": "off"}

    def git(*args: str) -> str:
        return subprocess.run(["git", *args], cwd=built, check=True, env=env, capture_output=True,
                              text=True).stdout.strip()

    led = Ledger(Store(built), EXP)
    start = led.snapshot().commit_id
    assert start is not None
    row = _append(built, run="zr0000000001", status="failed", error="x")
    rows = led.appended(start, led.snapshot())
    assert rows is not None and [r["run"] for r in rows] == [row.run]  # a plain append
    _both(built)
    kept, appended = facts.read_bytes(), led.snapshot().commit_id
    assert appended is not None
    # a transition rewrites a row in place: not an append, every index read again
    _append(built, run=row.run, status="succeeded", seq=row.seq)
    assert led.appended(appended, led.snapshot()) is None
    assert _both(built) == (_without_cache(built), _without_cache(built, text=True))
    assert facts.read_bytes() != kept
    # a rewritten history holding the same rows (the tip's tree on another parent): the fold's
    # tip is no ancestor of it, so it is never folded, whatever its tree says
    _both(built)
    tip = git("rev-parse", ref)
    other = git("commit-tree", f"{ref}^{{tree}}", "-p", f"{ref}~3", "-m", "rewritten")
    assert led.appended(tip.encode(), led.snapshot()) == []  # (the same tip: nothing appended)
    git("update-ref", ref, other)
    assert led.appended(tip.encode(), led.snapshot()) is None
    assert _both(built) == (_without_cache(built), _without_cache(built, text=True))
    # a ledger reset below the fold's tip: rows gone, read again
    git("update-ref", ref, f"{ref}~2")
    assert led.appended(other.encode(), led.snapshot()) is None
    gone = _both(built)
    assert row.run not in {r["run"] for r in gone[0]["rows"]}
    assert gone == (_without_cache(built), _without_cache(built, text=True))


def test_a_forged_fold_that_passes_its_mac_is_a_verify_failure(built: Path) -> None:
    reference = _cli(built)
    _append(built, run="zg0000000001", status="failed", error="x")
    path = _folds(built)[0]
    key = (path.parent / "key").read_bytes()
    body = path.read_bytes()[:-32]
    version, code, tip, state, memo = marshal.loads(body[len(derived.MAGIC):])
    acc = marshal.loads(state)
    if acc.get("deltas_json"):  # (the compact status keeps its delta lines serialized)
        acc["deltas_json"][0] = json.dumps({**json.loads(acc["deltas_json"][0]), "verdict": "ok", "lower": 0.5},
                                           sort_keys=True, separators=(",", ":")).encode()
    else:
        acc["deltas"][0] = {**acc["deltas"][0], "verdict": "ok", "lower": 0.5}
    body = derived.MAGIC + marshal.dumps((version, code, tip, marshal.dumps(acc), memo))
    path.write_bytes(body + hmac.new(key, body, hashlib.sha256).digest())
    shown = _cli(built)
    assert shown != reference and shown["deltas"][0]["lower"] == 0.5  # a forger with the key fools a read...
    out = _verify(built)
    assert "fold-json: its rows at" in out and "not what the ledger derives" in out  # ...verify names it
    # a forged memo (a detectable effect kept by its inputs) too
    _cli(built)
    body = path.read_bytes()[:-32]
    version, code, tip, state, memo = marshal.loads(body[len(derived.MAGIC):])
    assert memo
    memo = {k: 0.001 for k in memo}
    body = derived.MAGIC + marshal.dumps((version, code, tip, state, memo))
    path.write_bytes(body + hmac.new(key, body, hashlib.sha256).digest())
    assert "fold-json: its rows at" in _verify(built)


def test_an_edit_to_code_the_facts_call_derives_them_again_and_verify_stays_quiet(built: Path,
                                                                                  tmp_path: Path) -> None:
    """The facts' cache was keyed by two files; `delta_head` calls `format_interval`
    (stats/printing.py) for a bound under 1e-4, so an edit there served the old delta line from
    the cache, and `monte ledger verify` (with the edited code) then called the user's own cache
    forged. Now every derived cache is keyed by the whole installed package (monte/codekey.py)."""
    import monte

    led = Ledger(Store(built), EXP)
    with_delta = next(r for r in led.rows(led.snapshot()) if r.kind == "eval" and r.delta)
    led.append_row(lambda _s, _q: with_delta.model_copy(update={
        "seq": 0, "run": "zz0000000009", "delta": {**(with_delta.delta or {}), "lower": 0.00003}}),
        event="finished", summary=lambda r: f"eval {r.run}")
    pkg = tmp_path / "pkg"
    shutil.copytree(Path(monte.__file__).parent, pkg / "monte", ignore=shutil.ignore_patterns("__pycache__"))
    env = {"PYTHONPATH": str(pkg)}

    def text() -> str:
        r = monte_proc("status", cwd=built, env=env)
        assert r.returncode == 0, r.stderr
        return r.stdout

    before = text()
    assert text() == before and "zz0000000009@" not in before  # warm: the facts and views are kept
    line = next(x for x in before.splitlines() if "[+0.00003, " in x)
    printing = pkg / "monte" / "stats" / "printing.py"
    source = printing.read_text()
    old = 'return f"[{format_bound(lower, digits)}, {format_bound(upper, digits)}]"'
    assert old in source
    printing.write_text(source.replace(old, 'return f"<{format_bound(lower, digits)} .. {format_bound(upper, digits)}>"'))
    after = text()
    assert line not in after and "<+0.00003 .. +0." in after
    for name in CACHES:  # the status the edited code computes with no cache at all
        derived.cache_path(built / ".git", EXP, name).unlink(missing_ok=True)
    assert text() == after
    r = monte_proc("ledger", "verify", cwd=built, env=env)
    assert "[cache]" not in r.stdout + r.stderr
