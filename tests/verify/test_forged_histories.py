"""Forged histories, written by hand with git plumbing on top of an honest ledger.

Each forgery breaks one rule of the record. For each one:

- ``monte ledger verify --json`` exits 5 (E_VERIFY) and its ``details`` name the forged commit
  (short id) and the rule (the names in ``monte/ledger/verify.py``'s docstring);
- with ``monte hooks install``, ``git update-ref`` of the forged commit is refused by git itself
  (the reference-transaction hook) and the ref does not move;
- ``git push`` of the forged commit to a bare repository running monte's ``pre-receive`` is
  refused, and the bare ref does not move.

The honest history of the same size passes all three.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.verify.forgehelp import (
    Forged,
    Honest,
    cat,
    commit_tree,
    compact,
    dumps,
    forge,
    forge_row,
    g,
    git_run,
    index_for,
    index_path,
    ledger_ref,
    lineage_ref,
    new_id,
    records,
    rev,
    row_changes,
    rows,
    run_dir,
    short,
    started_eval,
    update_ref,
    write_tree,
)

# --- the forgeries ---------------------------------------------------------------------------------


@dataclass
class Case:
    forged: Forged
    rule: str
    ref: str = field(default_factory=ledger_ref)
    #: a word the violation's message must hold (which branch of the rule fired)
    says: str = ""
    #: refs the forger moved first (outside the ledger), pushed along with hooks off
    side_refs: list[str] = field(default_factory=list)


def _tip(h: Honest) -> str:
    sha = rev(h.path, ledger_ref())
    assert sha is not None
    return sha


def _cohort2(h: Honest) -> str:
    """Another base model's cohort in the same experiment: no baselines, no test@0."""
    return h["cohort2"]


def _target(h: Honest, run: str, step: int) -> dict[str, Any]:
    return {"kind": "checkpoint", "run": run, "step": step, "recipe": "sft-tiny",
            "model": str(h.path / ".monte" / "runs" / "exp" / run / "checkpoints" / f"step-{step}")}


def _test_read(h: Honest, target: dict[str, Any], *, role: str, cohort: str | None = None,
               run: str | None = None) -> dict[str, Any]:
    tip = _tip(h)
    tpl = rows(h.path, tip)[h["test0"]]
    row = started_eval(tpl, run=run or new_id(), seq=records(h.path, tip) + 1, split="test", target=target,
                       role=role, step=int(target.get("step", 0)))
    if cohort:
        row["cohort"] = cohort
    return row


def _started(h: Honest, row: dict[str, Any], summary: str, **trailers: str) -> Forged:
    return forge_row(h.path, row, summary, event="started", kind=row["kind"],
                     **trailers)  # type: ignore[arg-type]  # **trailers are str: they fill no other parameter


def third_test_read(h: Honest) -> Case:
    from monte import api

    api.evaluate(split="test")  # the honest final claim: the second read
    row = _test_read(h, _target(h, h["other"], 50 if h["other"] == h["a"] else 100), role="claim")
    return Case(_started(h, row, "eval parity/test started"), "two-touch", says="third read")


def claim_before_test0(h: Honest) -> Case:
    row = _test_read(h, _target(h, h["a"], 50), role="claim", cohort=_cohort2(h))
    return Case(_started(h, row, "eval parity/test started"), "two-touch", says="before test@0")


def second_test0_after_checkpoints(h: Honest) -> Case:
    base = rows(h.path, _tip(h))[h["test0"]]["plan"]["target"]
    row = _test_read(h, base, role="baseline")
    return Case(_started(h, row, "eval parity/test@0 started"), "two-touch", says="test@0")


def late_test0_after_forged_checkpoints(h: Honest) -> Case:
    """Another base model's cohort: a chunk trained with no baselines (a forgery of its own), a
    base commit and a lineage commit for it, then the cohort's test@0, after its checkpoint."""
    tip = _tip(h)
    cohort = _cohort2(h)
    a = rows(h.path, tip)[h["a"]]
    base_info = {"experiment": "exp", "cohort": cohort, "model": "/elsewhere/seed3", "files": {}}
    base = commit_tree(h.path, write_tree(h.path, None, {"base.json": dumps(base_info)}), [],
                       f"base model of cohort {cohort}\n\nMonte-Event: base\nMonte-Cohort: {cohort}\n")
    assert update_ref(h.path, f"refs/heads/monte/exp/base/{cohort}", base, hooks=False).returncode == 0
    run = new_id()
    row = {**a, "run": run, "cohort": cohort, "seq": records(h.path, tip) + 1, "status": "started", "step": 0,
           "checkpoints": []}
    started = forge_row(h.path, row, f"train started: {run}", event="started")
    info = json.loads(cat(h.path, lineage_ref(h["a"]), "checkpoint.json") or b"")
    info.update(run=run, step=50, cohort=cohort)
    ck = commit_tree(h.path, write_tree(h.path, None, {"checkpoint.json": dumps(info)}), [base],
                     f"checkpoint {run}@50\n\nMonte-Event: checkpoint\nMonte-Run: {run}\nMonte-Step: 50\n")
    assert update_ref(h.path, lineage_ref(run), ck, hooks=False).returncode == 0
    row = {**row, "status": "running", "step": 50, "checkpoints": [{"step": 50, "commit": ck}]}
    saved = forge(h.path, row_changes(h.path, started.sha, row), f"checkpoint {run}@50", event="checkpoint",
                  parent=started.sha, run=run)
    tpl = rows(h.path, tip)[h["test0"]]
    test0 = started_eval(tpl, run=new_id(), seq=records(h.path, saved.sha) + 1, split="test",
                         target=tpl["plan"]["target"], role="baseline")
    test0["cohort"] = cohort
    forged = forge_row(h.path, test0, "eval parity/test@0 started", event="started", parent=saved.sha)
    return Case(forged, "two-touch", says="after the cohort has checkpoints",
                side_refs=[f"refs/heads/monte/exp/base/{cohort}", lineage_ref(run)])


def claim_not_selected(h: Honest) -> Case:
    """No nomination: the claim must read the best paired dev delta (ties: higher step)."""
    other = h["other"]
    row = _test_read(h, _target(h, other, 50 if other == h["a"] else 100), role="claim")
    return Case(_started(h, row, "eval parity/test started"), "two-touch", says="rule-selected")


def claim_not_nominated(h: Honest) -> Case:
    from monte import api

    other = h["other"]
    api.nominate(ref=f"{other}@{50 if other == h['a'] else 100}")
    sel = h["selected"]
    row = _test_read(h, _target(h, sel, 50 if sel == h["a"] else 100), role="claim")
    return Case(_started(h, row, "eval parity/test started"), "two-touch", says="nominated")


def rewritten_finished_row(h: Honest) -> Case:
    tip = _tip(h)
    row = rows(h.path, tip)[h["dev0"]]
    row["score"] = 0.97
    row["updated_at"] = "2026-12-01T00:00:00Z"
    return Case(forge_row(h.path, row, "eval parity/dev@0 succeeded (better)"), "append-only",
                says="never rewritten")


def rewritten_tasks(h: Honest) -> Case:
    """The per-task file of a finished eval, edited so its score looks better."""
    path = f"{run_dir(h['dev_a'])}/tasks.jsonl"
    lines = [json.loads(x) for x in (cat(h.path, _tip(h), path) or b"").decode().splitlines()]
    for t in lines[:50]:
        t["score"] = 1.0
    body = "".join(json.dumps(t, sort_keys=True, separators=(",", ":")) + "\n" for t in lines).encode()
    return Case(forge(h.path, {path: body}, "fix scores"), "append-only", says="rewritten")


def deleted_row(h: Honest) -> Case:
    tip = _tip(h)
    run = h["dev_a"]
    changes: dict[str, bytes | None] = {f"{run_dir(run)}/row.json": None, f"{run_dir(run)}/tasks.jsonl": None,
                                        index_path(run): index_for(h.path, tip, run, None)}
    return Case(forge(h.path, changes, "tidy up"), "append-only", says="removed")


def duplicated_run_id(h: Honest) -> Case:
    """A new ``started`` row written at an existing (finished) run's path."""
    tip = _tip(h)
    tpl = rows(h.path, tip)[h["dev0"]]
    row = started_eval(tpl, run=h["dev0"], seq=records(h.path, tip) + 1, split="dev", target=tpl["plan"]["target"],
                       role=None)
    return Case(_started(h, row, "eval parity/dev@0 started"), "unique-run-id")


def lineage_wrong_parent(h: Honest) -> Case:
    """A hand-made chunk continuing A@50 whose lineage commit hangs off the base commit."""
    tip = _tip(h)
    base = g(h.path, "for-each-ref", "--format=%(objectname)", "refs/heads/monte/exp/base/").split()[0]
    a = rows(h.path, tip)[h["a"]]
    run = new_id()
    row = {**a, "run": run, "seq": records(h.path, tip) + 1, "status": "started", "step": 50, "checkpoints": [],
           "plan": {**a["plan"], "parent": {"run": h["a"], "step": 50}, "start_step": 50, "steps": 50}}
    started = forge_row(h.path, row, f"train started: {run}", event="started")
    info = json.loads(cat(h.path, lineage_ref(h["a"]), "checkpoint.json") or b"")
    info.update(run=run, step=100, parent={"run": h["a"], "step": 50})
    ck = commit_tree(h.path, write_tree(h.path, None, {"checkpoint.json": dumps(info)}), [base],
                     f"checkpoint {run}@100\n\nMonte-Event: checkpoint\nMonte-Run: {run}\nMonte-Step: 100\n")
    assert update_ref(h.path, lineage_ref(run), ck, hooks=False).returncode == 0
    row2 = {**row, "status": "running", "step": 100, "checkpoints": [{"step": 100, "commit": ck}]}
    forged = forge(h.path, row_changes(h.path, started.sha, row2), f"checkpoint {run}@100", event="checkpoint",
                   parent=started.sha, run=run)
    return Case(forged, "lineage", says="plan's parent", side_refs=[lineage_ref(run)])


def split_hash_new_experiment(h: Honest) -> Case:
    """A new experiment whose measurement.json carries a swapped test-split hash."""
    meas = json.loads(cat(h.path, _tip(h), "measurement.json") or b"")
    meas["experiment"] = "exp2"
    meas["exams"]["parity"]["splits"]["test"]["sha256"] = "f" * 64
    tree = write_tree(h.path, None, {"measurement.json": dumps(meas), "meta.json": dumps({"records": 1})})
    sha = commit_tree(h.path, tree, [], "experiment exp2: measurement frozen\n\nMonte-Event: created\n"
                      "Monte-Experiment: exp2\n")
    return Case(Forged(sha, ""), "frozen-hashes", ref=ledger_ref("exp2"), says="vault")


def split_hash_changed_later(h: Honest) -> Case:
    meas = json.loads(cat(h.path, _tip(h), "measurement.json") or b"")
    meas["exams"]["parity"]["splits"]["dev"]["sha256"] = "0" * 64
    return Case(forge(h.path, {"measurement.json": dumps(meas)}, "measurement fix"), "append-only",
                says="measurement.json")


def training_before_baselines(h: Honest) -> Case:
    tip = _tip(h)
    a = rows(h.path, tip)[h["a"]]
    run = new_id()
    row = {**a, "run": run, "cohort": _cohort2(h), "seq": records(h.path, tip) + 1, "status": "started",
           "step": 0, "checkpoints": []}
    return Case(_started(h, row, f"train started: {run}"), "baselines-first")


def smoke_eval_target(h: Honest) -> Case:
    tip = _tip(h)
    tpl = rows(h.path, tip)[h["dev_a"]]
    row = started_eval(tpl, run=new_id(), seq=records(h.path, tip) + 1, split="dev",
                       target=_target(h, h["smoke"], 50), role=None, step=50)
    return Case(_started(h, row, "eval parity/dev@50 started"), "no-smoke-evidence")


def smoke_parent(h: Honest) -> Case:
    tip = _tip(h)
    a = rows(h.path, tip)[h["a"]]
    run = new_id()
    row = {**a, "run": run, "seq": records(h.path, tip) + 1, "status": "started", "step": 50, "checkpoints": [],
           "plan": {**a["plan"], "parent": {"run": h["smoke"], "step": 50}, "start_step": 50}}
    return Case(_started(h, row, f"train started: {run}"), "no-smoke-evidence")


def smoke_nominee(h: Honest) -> Case:
    rows_ = rows(h.path, _tip(h))
    body = {"checkpoint": f"{h['smoke']}@50", "cohort": rows_[h["a"]]["cohort"], "at": "2026-12-01T00:00:00Z"}
    path = f"cohorts/{body['cohort']}/nomination.json"
    return Case(forge(h.path, {path: dumps(body)}, "nominate", event="nominate"), "no-smoke-evidence")


def no_event_trailer(h: Honest) -> Case:
    """A row that could be honest, in a commit that is not a monte record (no trailer)."""
    tip = _tip(h)
    tpl = rows(h.path, tip)[h["dev0"]]
    row = started_eval(tpl, run=new_id(), seq=records(h.path, tip) + 1, split="dev", target=tpl["plan"]["target"],
                       role=None)
    tree = write_tree(h.path, tip, row_changes(h.path, tip, row))
    return Case(Forged(commit_tree(h.path, tree, [tip], "a plain commit\n"), tip), "one-record",
                says="Monte-Event")


def stale_index(h: Honest) -> Case:
    """The row is honest-looking but the derived index says something else."""
    tip = _tip(h)
    row = rows(h.path, tip)[h["test0"]]
    run = new_id()
    new = started_eval(row, run=run, seq=records(h.path, tip) + 1, split="dev", target=row["plan"]["target"],
                       role=None)
    changes = row_changes(h.path, tip, new)
    lie = json.loads(changes[index_path(run)] or b"")
    lie[run]["status"] = "succeeded"
    changes[index_path(run)] = json.dumps(lie, sort_keys=True, separators=(",", ":")).encode() + b"\n"
    return Case(_forge_changes(h, changes, run), "well-formed", says="index")


def forged_cohort_index(h: Honest) -> Case:
    """A record that rewrites only the cohort's derived index: its dev baseline becomes a
    checkpoint's eval (what a delta would then pair against); no row changes."""
    tip = _tip(h)
    path = f"cohorts/{h['cohort']}/index.json"
    index = json.loads(cat(h.path, tip, path) or b"")
    exam = sorted(index["base"])[0]
    index["base"][exam]["dev"] = [[rows(h.path, tip)[h["dev_a"]]["seq"], h["dev_a"]]]
    changes: dict[str, bytes | None] = {path: compact(index), "meta.json": dumps({"records": records(h.path, tip) + 1})}
    return Case(forge(h.path, changes, "index rewritten", event="finished"), "well-formed",
                says=f"{path} does not match")


def stale_cohort_index(h: Honest) -> Case:
    """A read of the sealed test split whose record leaves the cohort's derived index as it was
    (its test reads then lie: a plan would count one read too few)."""
    from monte import api

    api.evaluate(split="test")  # the honest final claim: the second read
    row = _test_read(h, _target(h, h["other"], 50 if h["other"] == h["a"] else 100), role="claim")
    changes = row_changes(h.path, _tip(h), row)
    path = f"cohorts/{h['cohort']}/index.json"
    assert changes.pop(path, None) is not None  # the forger keeps the index as it was
    return Case(_forge_changes(h, changes, row["run"]), "well-formed", says=f"{path} is stale")


def _forge_changes(h: Honest, changes: dict[str, bytes | None], run: str) -> Forged:
    return forge(h.path, changes, f"eval started: {run}", event="started", run=run)


FORGERIES: dict[str, Callable[[Honest], Case]] = {f.__name__: f for f in (
    third_test_read, claim_before_test0, second_test0_after_checkpoints, late_test0_after_forged_checkpoints,
    claim_not_selected, claim_not_nominated,
    rewritten_finished_row, rewritten_tasks, deleted_row, duplicated_run_id, lineage_wrong_parent,
    split_hash_new_experiment, split_hash_changed_later, training_before_baselines, smoke_eval_target,
    smoke_parent, smoke_nominee, no_event_trailer, stale_index, forged_cohort_index, stale_cohort_index)}


# --- checks ----------------------------------------------------------------------------------------


def assert_names(details: list[dict[str, str]], case: Case) -> None:
    hits = [d for d in details if d["commit"] == case.forged.short and d["rule"] == case.rule]
    assert hits, f"no {case.rule} violation naming {case.forged.short}: {details}"
    assert any(case.says in d["message"] for d in hits), (case.says, hits)


def verify_json(monte, *args: str) -> tuple[int, dict[str, Any]]:
    r = monte("ledger", "verify", "--json", *args)
    return r.code, r.json()


@pytest.mark.parametrize("name", list(FORGERIES))
def test_verify_names_the_forged_commit_and_rule(honest: Honest, monte, name: str) -> None:
    case = FORGERIES[name](honest)
    assert update_ref(honest.path, case.ref, case.forged.sha, hooks=False).returncode == 0
    code, out = verify_json(monte)
    assert code == 5, out
    assert out["error"]["code"] == "E_VERIFY"
    assert_names(out["error"]["details"], case)
    # naming the experiment verifies the same; the honest prefix alone still passes
    exp = case.ref.split("/")[3]
    code, out = verify_json(monte, exp)
    assert code == 5 and out["error"]["code"] == "E_VERIFY"
    assert_names(out["error"]["details"], case)


@pytest.mark.parametrize("name", list(FORGERIES))
def test_reference_transaction_hook_refuses_the_forgery(honest: Honest, monte, name: str) -> None:
    case = FORGERIES[name](honest)
    assert monte("hooks", "install").code == 0
    for ref in case.side_refs:  # already in place (a forger with MONTE_HOOKS=off, say)
        assert rev(honest.path, ref) is not None
    before = rev(honest.path, case.ref)
    r = update_ref(honest.path, case.ref, case.forged.sha)
    assert r.returncode != 0, r.stderr.decode()
    assert rev(honest.path, case.ref) == before
    err = r.stderr.decode()
    assert "E_VERIFY" in err and f"[{case.rule}]" in err and case.forged.short in err, err
    # with the old value stated (`update-ref REF NEW OLD`) it is refused the same way
    if before is not None:
        r = update_ref(honest.path, case.ref, case.forged.sha, before)
        assert r.returncode != 0 and rev(honest.path, case.ref) == before


def _push(src: Path, bare: Path, *refspecs: str, hooks: bool = True, verify: bool = False):
    args = ["push", "--force", str(bare), *refspecs] if verify else ["push", "--no-verify", "--force", str(bare),
                                                                      *refspecs]
    return git_run(src, *args, env=None if hooks else {"MONTE_HOOKS": "off"})


PRE_RECEIVE_BROKEN = (
    "pre-receive in a bare repository never gets to verify: `monte ledger verify --updates` opens a "
    "monte workspace (find_repo_root wants a .git folder and .monte.yaml; a bare repo has neither: "
    "E_NOT_INITIALIZED), and dulwich does not read git's quarantine (GIT_OBJECT_DIRECTORY / "
    "GIT_ALTERNATE_OBJECT_DIRECTORIES), so the pushed commits are a KeyError. Every push is refused, "
    "honest or forged, with the wrong reason")


@pytest.mark.parametrize("name", list(FORGERIES))
def test_pre_receive_refuses_the_forgery(honest: Honest, bare: Path, name: str) -> None:
    case = FORGERIES[name](honest)
    # whatever honest records the scenario added first land on the server (hooks off)
    r = _push(honest.path, bare, "refs/heads/monte/*", hooks=False)
    assert r.returncode == 0, r.stderr.decode()
    for ref in case.side_refs:
        assert rev(bare, ref) is not None
    before = rev(bare, case.ref)
    r = _push(honest.path, bare, f"{case.forged.sha}:{case.ref}")
    err = r.stderr.decode()
    assert r.returncode != 0 and rev(bare, case.ref) == before
    assert "pre-receive hook declined" in err
    assert "E_VERIFY" in err and f"[{case.rule}]" in err and case.forged.short in err, err


def test_pre_receive_refuses_a_forgery_today(honest: Honest, bare: Path) -> None:
    """What holds even now: the forged commit does not land on the server."""
    case = rewritten_finished_row(honest)
    before = rev(bare, case.ref)
    r = _push(honest.path, bare, f"{case.forged.sha}:{case.ref}")
    assert r.returncode != 0 and rev(bare, case.ref) == before
    assert "pre-receive hook declined" in r.stderr.decode()


# --- the honest history of the same size -----------------------------------------------------------


def _honest_claim(h: Honest) -> None:
    """Finish the honest story: nominate the selected checkpoint, run the final claim."""
    from monte import api

    sel = h["selected"]
    api.nominate(ref=f"{sel}@{50 if sel == h['a'] else 100}")
    api.evaluate(split="test")


def test_honest_history_verifies(honest: Honest, monte) -> None:
    code, out = verify_json(monte)
    assert code == 0 and out["ok"] is True and out["experiments"] == ["exp"], out
    n = out["records"]
    _honest_claim(honest)
    code, out = verify_json(monte, "exp")
    assert code == 0 and out["records"] == n + 3, out
    r = monte("ledger", "verify")
    assert r.code == 0 and r.out.startswith("ok: ") and "keep every rule" in r.out


def test_honest_next_record_passes_the_hook(honest: Honest, monte) -> None:
    """A record monte wrote, replayed with `git update-ref`, and one written by hand that keeps
    every rule: both are accepted by git with the hooks in place."""
    assert monte("hooks", "install").code == 0
    old = _tip(honest)
    _honest_claim(honest)  # monte writes with dulwich: no hook runs
    new = _tip(honest)
    assert update_ref(honest.path, ledger_ref(), old, hooks=False).returncode == 0
    r = update_ref(honest.path, ledger_ref(), new)
    assert r.returncode == 0, r.stderr.decode()
    assert _tip(honest) == new
    # a hand-written record that breaks nothing: a dev eval of checkpoint A, started
    tpl = rows(honest.path, new)[honest["dev_a"]]
    row = started_eval(tpl, run=new_id(), seq=records(honest.path, new) + 1, split="dev",
                       target=tpl["plan"]["target"], role=None, step=50)
    forged = _started(honest, row, "eval parity/dev@50 started")
    r = update_ref(honest.path, ledger_ref(), forged.sha, new)
    assert r.returncode == 0, r.stderr.decode()
    assert monte("ledger", "verify").code == 0


def test_hooks_off_lets_a_repair_through(honest: Honest, monte) -> None:
    assert monte("hooks", "install").code == 0
    case = rewritten_finished_row(honest)
    assert update_ref(honest.path, case.ref, case.forged.sha, hooks=False).returncode == 0
    assert rev(honest.path, case.ref) == case.forged.sha
    # the repair (the ref put back) is a rewind: refused with the hooks on, fine with them off
    assert update_ref(honest.path, case.ref, case.forged.parent).returncode != 0
    assert update_ref(honest.path, case.ref, case.forged.parent, hooks=False).returncode == 0
    assert monte("ledger", "verify").code == 0


def test_honest_push_is_accepted_by_pre_receive(honest: Honest, bare: Path) -> None:
    _honest_claim(honest)
    r = _push(honest.path, bare, "refs/heads/monte/*")
    assert r.returncode == 0, r.stderr.decode()
    assert rev(bare, ledger_ref()) == _tip(honest)


def test_honest_push_to_a_fresh_bare_repository_with_hooks_off(honest: Honest, tmp_path: Path) -> None:
    bare = tmp_path / "fresh.git"
    g(tmp_path, "init", "-q", "--bare", str(bare))
    r = _push(honest.path, bare, "refs/heads/monte/*", hooks=False)
    assert r.returncode == 0
    assert rev(bare, ledger_ref()) == _tip(honest)


# --- a record removed by moving the ref backwards --------------------------------------------------


def test_rewound_ref_is_refused_by_the_hook_and_reported_by_from(honest: Honest, monte) -> None:
    assert monte("hooks", "install").code == 0
    tip = _tip(honest)
    back = rev(honest.path, f"{tip}~1")
    assert back is not None
    r = update_ref(honest.path, ledger_ref(), back)
    assert r.returncode != 0 and _tip(honest) == tip
    err = r.stderr.decode()
    assert "[append-only]" in err and "rewritten" in err, err
    r = update_ref(honest.path, ledger_ref(), back, tip)
    assert r.returncode != 0 and _tip(honest) == tip
    # deleting a monte ref is refused too
    r = git_run(honest.path, "update-ref", "-d", ledger_ref())
    assert r.returncode != 0 and _tip(honest) == tip
    assert "[append-only]" in r.stderr.decode()
    # done by hand anyway: verifying from the old tip says the history was rewritten
    assert update_ref(honest.path, ledger_ref(), back, hooks=False).returncode == 0
    code, out = verify_json(monte, "exp", "--from", tip)
    assert code == 5 and out["error"]["code"] == "E_VERIFY"
    assert any(d["rule"] == "append-only" and "not an ancestor" in d["message"] for d in out["error"]["details"])


def test_rewound_ref_is_refused_by_pre_receive(honest: Honest, bare: Path) -> None:
    tip = _tip(honest)
    back = rev(honest.path, f"{tip}~1")
    r = _push(honest.path, bare, f"{back}:{ledger_ref()}")
    assert r.returncode != 0 and rev(bare, ledger_ref()) == tip
    assert "[append-only]" in r.stderr.decode()


def test_rewind_past_a_checkpoint_record_is_caught_by_verify(honest: Honest, monte) -> None:
    log = g(honest.path, "log", "--format=%H %s", ledger_ref()).splitlines()
    # back to just before checkpoint B's chunk started: B's lineage ref is now an orphan
    started_b = next(i for i, line in enumerate(log) if line.endswith(f"started: {honest['b']}"))
    back = log[started_b + 1].split()[0]
    assert update_ref(honest.path, ledger_ref(), back, hooks=False).returncode == 0
    code, out = verify_json(monte)
    assert code == 5, out
    assert any(d["rule"] == "append-only" for d in out["error"]["details"])


# --- what verify does not see yet ------------------------------------------------------------------


def test_new_row_born_with_a_checkpoint_is_checked(honest: Honest, monte) -> None:
    tip = _tip(honest)
    a = rows(honest.path, tip)[honest["a"]]
    row = {**a, "run": new_id(), "seq": records(honest.path, tip) + 1, "status": "started", "step": 50,
           "checkpoints": [{"step": 50, "commit": "d" * 40}]}
    forged = _started(honest, row, "train started")
    assert update_ref(honest.path, ledger_ref(), forged.sha, hooks=False).returncode == 0
    code, out = verify_json(monte)
    assert code == 5, out
    assert_names(out["error"]["details"], Case(forged, "lineage"))


def test_lineage_ref_swapped_to_a_forged_checkpoint_is_caught(honest: Honest, monte) -> None:
    a, b = honest["a"], honest["b"]
    base = g(honest.path, "for-each-ref", "--format=%(objectname)", "refs/heads/monte/exp/base/").split()[0]
    info = json.loads(cat(honest.path, lineage_ref(a), "checkpoint.json") or b"")
    commit_of_a = g(honest.path, "rev-parse", lineage_ref(a)).strip()
    other = json.loads(cat(honest.path, lineage_ref(b), "checkpoint.json") or b"")
    info.update(files=other["files"], weights=other["weights"])  # "a@50" is now B's weights
    ck = commit_tree(honest.path, write_tree(honest.path, None, {"checkpoint.json": dumps(info)}), [base],
                     f"checkpoint {a}@50\n\nMonte-Event: checkpoint\nMonte-Run: {a}\nMonte-Step: 50\n")
    assert update_ref(honest.path, lineage_ref(a), ck, hooks=False).returncode == 0
    # an eval of a@50 still scores the weights the ledger row recorded, not the swapped ref's
    r = monte("eval", "--checkpoint", f"{a}@50", "--yes", "--json")
    assert r.code == 0 and r.json()["runs"][0]["plan"]["target"]["commit"] == commit_of_a, r.out
    code, out = verify_json(monte)
    assert code == 5, out
    assert any(d["rule"] == "lineage" and d["commit"] == short(ck) for d in out["error"]["details"]), out


def test_finished_eval_whose_score_lies_about_its_tasks_is_caught(honest: Honest, monte) -> None:
    tip = _tip(honest)
    done = rows(honest.path, tip)[honest["dev_a"]]
    run = new_id()
    row = started_eval(done, run=run, seq=records(honest.path, tip) + 1, split="dev",
                       target=done["plan"]["target"], role=None, step=50)
    started = _started(honest, row, "eval parity/dev@50 started")
    tasks = cat(honest.path, tip, f"{run_dir(honest['dev_a'])}/tasks.jsonl") or b""
    assert all(json.loads(t)["score"] == 0.0 for t in tasks.splitlines())
    fin = {**row, "status": "succeeded", "score": 0.95, "n": done["n"],
           "delta": {**done["delta"], "delta": 0.95, "lower": 0.9, "upper": 1.0, "fixed": 190, "verdict": "ok"}}
    forged = forge(honest.path, row_changes(honest.path, started.sha, fin, files={"tasks.jsonl": tasks}),
                   "eval parity/dev@50 succeeded: score 0.9500", parent=started.sha, run=run)
    assert update_ref(honest.path, ledger_ref(), forged.sha, hooks=False).returncode == 0
    code, out = verify_json(monte)
    assert code == 5, out
    assert any(d["commit"] == forged.short for d in out["error"]["details"]), out
