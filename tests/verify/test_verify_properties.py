"""Properties of ``monte ledger verify``.

1. Whatever sequence of legal actions monte's API is asked to do (evals on dev, test@0,
   training chunks with real tiny-model checkpoints, dev evals of checkpoints, nominations, the
   final claim, smoke runs), the resulting ledger verifies, as a whole and record by record
   (each ref move as the hooks would see it). An action the API refuses writes nothing.
2. Any single-commit corruption of an honest ledger (a random record rewritten in place, the
   later records replayed on top) is caught, naming the corrupted commit and the rule it breaks.
"""

from __future__ import annotations

import itertools
import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, event, given, settings
from hypothesis import strategies as st

from monte.errors import MonteError
from tests.verify.forgehelp import (
    Honest,
    cat,
    checkpoint,
    commit_tree,
    dumps,
    g,
    index_for,
    index_path,
    ledger_ref,
    new_id,
    row_changes,
    rows,
    run_dir,
    short,
    started_eval,
    update_ref,
    write_tree,
)
from tests.verify.recorded import recorded_engine

# each example runs real evals (~1 s each): few examples, and no shrinking (the draws are printed)
SLOW = settings(max_examples=10, deadline=None, phases=[Phase.explicit, Phase.reuse, Phase.generate],
                suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow,
                                       HealthCheck.data_too_large])
FAST = settings(max_examples=15, deadline=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])

_counter = itertools.count()


# --- 1. legal histories verify -----------------------------------------------------------------------



def _monte_refs(repo: Path) -> dict[str, str]:
    out = g(repo, "for-each-ref", "--format=%(refname) %(objectname)", "refs/heads/monte/")
    return dict(line.split() for line in out.splitlines())


class Story:
    """Drives monte's API through one drawn sequence of actions, tracking what is legal."""

    def __init__(self, repo: Path, models: dict[int, Path], baselines: bool) -> None:
        from monte.workspace import open_workspace

        self.repo = repo
        self.models = models
        self.ws = open_workspace(repo)
        self.baselines = {"dev": baselines, "test": baselines}
        self.cks: list[tuple[str, int]] = []
        self.evaluated = False  # some checkpoint carries a dev eval

    def offer(self) -> list[str]:
        """The actions worth drawing now: mostly the next step of a real workflow, plus a few that
        the API may refuse (a second test@0, a claim too early, a nomination after the claim)."""
        always = ["smoke_train", "smoke_eval"]
        if not self.baselines["dev"]:
            return ["dev0", "dev0", "dev0", "test0", *always]
        if not self.baselines["test"]:
            return ["test0", "test0", "test0", "dev0", "train", *always]
        if not self.cks:
            return ["train", "train", "train", "test0", "claim", "dev0", *always]
        if not self.evaluated:
            return ["dev_ck", "dev_ck", "dev_ck", "train", "nominate", "claim", *always]
        return ["train", "dev_ck", "dev_ck", "nominate", "nominate", "claim", "claim", "claim", "test0", "dev0",
                *always]

    def do(self, action: str, data: st.DataObject) -> None:
        from monte import api

        ws = self.ws
        if action == "dev0":
            self.baselines["dev"] |= bool(api.evaluate(step=0, ws=ws).runs)
        elif action == "test0":
            self.baselines["test"] |= bool(api.evaluate(split="test", ws=ws).runs)
        elif action == "train":
            # `monte train` refuses a real chunk before both baselines (E_NO_BASELINE); the
            # recording helper does not check, so the story does
            if not all(self.baselines.values()):
                return
            parent = data.draw(st.sampled_from([None, *self.cks]), label="parent")
            seed = data.draw(st.sampled_from(sorted(self.models)), label="weights")
            run = checkpoint(self.repo, self.models[seed], parent=parent)
            self.cks.append((run, (parent[1] if parent else 0) + 50))
        elif action == "dev_ck" and self.cks:
            run, step = data.draw(st.sampled_from(self.cks), label="ck")
            api.evaluate(checkpoint=f"{run}@{step}", ws=ws)
            self.evaluated = True
        elif action == "nominate" and self.cks:
            run, step = data.draw(st.sampled_from(self.cks), label="nominee")
            api.nominate(ref=f"{run}@{step}", ws=ws)
        elif action == "claim":
            api.evaluate(split="test", ws=ws)
        elif action == "smoke_train":
            checkpoint(self.repo, self.models[3], smoke=True)
        elif action == "smoke_eval":
            split = data.draw(st.sampled_from(["dev", "test"]), label="smoke split")
            api.evaluate(split=split, smoke=True, ws=ws)


def _hook_view(store: Any, ref: str, old: str | None, new: str) -> list[Any]:
    """What ``verify_update`` checks for ``ref: old -> new``, run after the fact (the ref has
    already moved, so a created ref cannot be told from a moved one by reading it)."""
    from dulwich.objects import ObjectID

    from monte.ledger import verify as vf

    if old is None and "/base/" in ref:
        return []  # a base ref is written once: creating it is all there is
    if old is None:
        old = "0" * 40
    with_old = vf.verify_update(store, ref, old.encode(), new.encode())
    if old == "0" * 40:  # verify_update would read the (already moved) ref: verify the whole line
        v = vf.Verifier(store)
        parts = ref.split("/")
        if parts[4] == "lineage":
            return v.verify_lineage(parts[3], parts[5], tip=ObjectID(new.encode()))
        return v.verify(parts[3], tip=ObjectID(new.encode()))
    return with_old


def _step(story: Story, action: str, data: st.DataObject) -> None:
    before = _monte_refs(story.repo)
    try:
        story.do(action, data)
    except MonteError as e:  # refused before writing: nothing moved
        assert e.code != "E_INTERNAL", e
        assert _monte_refs(story.repo) == before, (action, e)
        event(f"{action}: refused {e.code}")
        return
    after = _monte_refs(story.repo)
    event(f"{action}: {'recorded' if after != before else 'nothing to do'}")
    for ref, sha in after.items():  # each ref move, checked as the hooks check it
        if before.get(ref) != sha:
            assert _hook_view(story.ws.store, ref, before.get(ref), sha) == [], (action, ref)


@SLOW
@given(data=st.data())
def test_any_legal_history_verifies(data: st.DataObject, _exp_template: Path, _baselines_template: Honest,
                                    recorded_models: dict[int, Path], tmp_path: Path,
                                    monkeypatch: pytest.MonkeyPatch, monte) -> None:
    start = data.draw(st.sampled_from(["fresh", "baselines", "baselines"]), label="start")
    repo = tmp_path / f"story{next(_counter)}"
    shutil.copytree(_exp_template if start == "fresh" else _baselines_template.path, repo, symlinks=True)
    monkeypatch.chdir(repo)
    story = Story(repo, recorded_models, baselines=start == "baselines")
    n = data.draw(st.integers(3, 7), label="length")
    with pytest.MonkeyPatch.context() as mp, recorded_engine(mp, recorded_models):  # the models answer as recorded
        for _ in range(n):
            _step(story, data.draw(st.sampled_from(story.offer()), label="action"), data)
        if data.draw(st.booleans(), label="claim at the end"):  # half the stories end trying to claim
            _step(story, "claim", data)
    r = monte("ledger", "verify", "--json")
    assert r.code == 0, r.out
    assert r.json()["ok"] is True


# --- 2. single-commit corruptions are caught ------------------------------------------------------


def _chain(repo: Path, tip: str) -> list[str]:
    return g(repo, "rev-list", "--first-parent", "--reverse", tip).split()


def _files(repo: Path, commit: str) -> list[str]:
    return g(repo, "ls-tree", "-r", "--name-only", commit).splitlines()


def _changed_rows(repo: Path, parent: str | None, commit: str) -> list[str]:
    if parent is None:
        return []
    names = g(repo, "diff-tree", "-r", "--name-only", "--no-commit-id", parent, commit).splitlines()
    return [n.split("/")[3] for n in names if n.endswith("/row.json")]


def _message(repo: Path, commit: str) -> str:
    return g(repo, "cat-file", "commit", commit).split("\n\n", 1)[1]


FINISHED = ("succeeded", "failed", "abandoned")


def _kinds(repo: Path, chain: list[str], k: int) -> list[str]:
    """The corruptions that apply to record ``k``."""
    kinds = ["no_trailer", "stray_file", "measurement"]
    if k == 0:
        return kinds
    parent, commit = chain[k - 1], chain[k]
    before = rows(repo, parent)
    kinds += ["merge"]
    if any(f != "meta.json" and not f.endswith("index.json") for f in _files(repo, parent)):
        kinds.append("remove_file")
    if before:
        kinds += ["stale_index", "rewrite_row"]
    written = _changed_rows(repo, parent, commit)
    if written and written[0] not in before:
        kinds.append("status_jump")
        if any(r["status"] in FINISHED for r in before.values()):
            kinds.append("reuse_id")
    if written and before:
        kinds.append("two_rows")
    return kinds


def _corrupted(repo: Path, chain: list[str], k: int, kind: str,
               data: st.DataObject) -> tuple[str, str, list[str], str]:
    commit = chain[k]
    parent = chain[k - 1] if k else None
    parents = [parent] if parent else []
    msg = _message(repo, commit)
    changes: dict[str, bytes | None] = {}
    pick = lambda what, xs: data.draw(st.sampled_from(sorted(xs)), label=what)  # noqa: E731
    if kind == "no_trailer":
        msg = msg.split("\n\n")[0] + "\n"
        rule = "one-record"
    elif kind == "merge":
        other = g(repo, "rev-parse", "refs/heads/monte/vault")
        parents = [*parents, other]
        rule = "one-record"
    elif kind == "stray_file":
        changes[pick("stray", ["notes.txt", "runs/0/0/index.md", "cohorts/x/extra.json"])] = b"hello\n"
        rule = "well-formed"
    elif kind == "measurement":
        meas = json.loads(cat(repo, commit, "measurement.json") or b"")
        split = pick("split", meas["exams"]["parity"]["splits"])
        meas["exams"]["parity"]["splits"][split]["sha256"] = "e" * 64
        changes["measurement.json"] = dumps(meas)
        rule = "frozen-hashes" if k == 0 else "append-only"
    elif kind == "remove_file":
        assert parent is not None
        f = pick("file", [f for f in _files(repo, parent) if f != "meta.json" and not f.endswith("index.json")])
        changes[f] = None
        rule = "append-only"
    elif kind == "stale_index":
        assert parent is not None
        run = pick("run", rows(repo, parent))
        index = json.loads(cat(repo, commit, index_path(run)) or b"")
        index[run]["score"] = 0.5 if index[run].get("score") != 0.5 else 0.25
        changes[index_path(run)] = json.dumps(index, sort_keys=True, separators=(",", ":")).encode() + b"\n"
        rule = "well-formed"
    elif kind == "rewrite_row":
        assert parent is not None
        run = pick("run", rows(repo, parent))
        row = rows(repo, commit)[run]
        # a score or status change is only a rewrite of a row already finished before record k
        # (on the record that finishes it, any score is a legal transition as far as rows go)
        finished = rows(repo, parent)[run]["status"] in FINISHED
        field = pick("field", ["kind", "cohort", "created_at", "smoke", "plan"]
                     + (["score", "status"] if finished else []))
        if field == "kind":
            row["kind"] = "train" if row["kind"] == "eval" else "eval"
        elif field == "cohort":
            row["cohort"] = "000000000000"
        elif field == "created_at":
            row["created_at"] = "2020-01-01T00:00:00Z"
        elif field == "smoke":
            row["smoke"] = not row["smoke"]
        elif field == "plan":
            row["plan"] = {**row["plan"], "forged": True}
        elif field == "score":
            row["score"] = 0.99
        else:
            row["status"] = "started" if row["status"] != "started" else "succeeded"
        changes = {f"{run_dir(run)}/row.json": dumps(row), index_path(run): index_for(repo, commit, run, row)}
        rule = "unique-run-id" if field == "status" and row["status"] == "started" else "append-only"
    elif kind == "status_jump":
        assert parent is not None
        run = _changed_rows(repo, parent, commit)[0]
        row = rows(repo, commit)[run]
        row["status"] = pick("status", ["succeeded", "running", "failed"])
        changes = {f"{run_dir(run)}/row.json": dumps(row), index_path(run): index_for(repo, commit, run, row)}
        rule = "one-record"
    elif kind == "reuse_id":
        assert parent is not None
        before = rows(repo, parent)
        run = _changed_rows(repo, parent, commit)[0]
        old = pick("reused", [r for r, x in before.items() if x["status"] in FINISHED])
        row = {**rows(repo, commit)[run], "run": old}
        tree = write_tree(repo, parent, row_changes(repo, parent, row))
        return tree, msg, parents, "unique-run-id"
    elif kind == "two_rows":
        assert parent is not None
        tpl = pick("template", rows(repo, parent))
        row = started_eval(rows(repo, parent)[tpl], run=new_id(), seq=999, split="dev",
                           target={"kind": "base"}, role=None)
        changes = row_changes(repo, commit, row, bump=False)
        rule = "one-record"
    else:  # pragma: no cover
        raise AssertionError(kind)
    tree = write_tree(repo, commit, changes) if changes else g(repo, "rev-parse", f"{commit}^{{tree}}")
    return tree, msg, parents, rule


@FAST
@given(data=st.data())
def test_any_single_commit_corruption_is_caught(data: st.DataObject, honest: Honest, monte) -> None:
    from monte import api

    repo = honest.path
    ref = ledger_ref()
    tip = g(repo, "rev-parse", ref)
    chain = _chain(repo, tip)
    k = data.draw(st.integers(0, len(chain) - 1), label="record")
    kind = data.draw(st.sampled_from(_kinds(repo, chain, k)), label="kind")
    event(kind)
    tree, msg, parents, rule = _corrupted(repo, chain, k, kind, data)
    bad = commit_tree(repo, tree, parents, msg)
    new = bad
    for c in chain[k + 1:]:  # replay the later records, unchanged, on top
        new = commit_tree(repo, g(repo, "rev-parse", f"{c}^{{tree}}"), [new], _message(repo, c))
    try:
        assert update_ref(repo, ref, new, hooks=False).returncode == 0
        r = monte("ledger", "verify", "--json")
        assert r.code == 5, (kind, k, r.out)
        details = r.json()["error"]["details"]
        assert any(d["commit"] == short(bad) and d["rule"] == rule for d in details), (kind, k, rule, details)
        # and the hook, which knows the old tip, refuses the move
        with pytest.raises(MonteError) as e:
            api.ledger_verify_updates([f"{tip} {new} {ref}"])
        assert e.value.code == "E_VERIFY"
    finally:
        assert update_ref(repo, ref, tip, hooks=False).returncode == 0


def test_corruption_kinds_cover_every_record(honest: Honest) -> None:
    """Every record of the honest ledger admits several corruptions (the property's domain)."""
    chain = _chain(honest.path, g(honest.path, "rev-parse", ledger_ref()))
    kinds: set[str] = set()
    for k in range(len(chain)):
        ks = _kinds(honest.path, chain, k)
        assert len(ks) >= 3
        kinds |= set(ks)
    assert kinds == {"no_trailer", "stray_file", "measurement", "merge", "remove_file", "stale_index",
                     "rewrite_row", "status_jump", "reuse_id", "two_rows"}

