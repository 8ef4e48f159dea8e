"""The record rules, one commit at a time: each record's rows, indexes and nominations re-derived and
checked (append-only, transitions, baselines first, two-touch, nominations, checkpoints, frozen hashes).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, cast

from dulwich.objects import Commit, ObjectID

from monte.ci import LEDGER_WORKFLOW
from monte.ledger import cohorts as cohort_index
from monte.ledger.merge import MERGE_EVENT
from monte.ledger.predicates import (
    is_admissible,
    is_base_eval,
    is_checkpoint_eval,
    is_test_read,
    target_kind,
)
from monte.ledger.records import RunRow
from monte.ledger.refs import (
    VAULT_REF,
    base_ref,
)
from monte.ledger.store import parse_trailers
from monte.ledger.verify.model import (
    COHORT_INDEX,
    GRADER,
    INDEX,
    LEAK_REFUSAL,
    NOMINATION,
    ROW,
    TASKS,
    Violation,
    json_line,
)
from monte.ledger.verify.rewinds import Rewinds
from monte.ledger.verify.rules import changed_row, first_record, new_row_violations
from monte.ledger.verify.state import (
    WalkState,
)
from monte.ledger.views import cohort_index_path, manifest_path, run_dir


class Records(Rewinds):
    def _tasks_blob(self, state: WalkState, run: str) -> ObjectID | None:
        if run in state.tasks:
            return state.tasks[run]
        if state.since is not None:
            found = state.since._lookup(f"{run_dir(run)}/tasks.jsonl")
            if found is not None:
                state.tasks[run] = found[1]
                return cast(ObjectID, found[1])
        return None

    def _record(self, experiment: str, state: WalkState, c: Commit, prev_tree: ObjectID | None,
                *, first: bool, side: bool = False) -> list[Violation]:
        cid = c.id.decode()[:12]
        out: list[Violation] = []

        def bad(rule: str, msg: str) -> None:
            out.append(Violation(cid, rule, msg))

        if not side:
            state.refolded = set()  # what this record changes (checked with its indexes)
        trailers = parse_trailers(c.message)
        if "Monte-Event" not in trailers:
            bad("one-record", "the commit has no Monte-Event trailer: not a monte record")
        if first and c.parents:
            bad("one-record", "the experiment's first record has a parent")
        if len(c.parents) > 1:
            bad("one-record", f"a merge commit of {len(c.parents)} parents on the ledger line: a ledger merge "
                "joins two ledgers")
        elif trailers.get("Monte-Event") == MERGE_EVENT:
            bad("one-record", "a merge record with one parent: a merge joins two ledgers")
        changes = self._changes(prev_tree, c.tree)
        row_changes = [(p, o, n) for p, o, n in changes if ROW.match(p)]
        if len(row_changes) > 1:
            bad("one-record", f"one commit changes {len(row_changes)} rows; a record is one row")
        for path, old, new in changes:
            if new is None:
                bad("append-only", f"{path} was removed: records are never deleted")
                if (m := ROW.match(path)) is not None:  # one finding, not a stale-index one too
                    state.rows.pop(m.group(3), None)
                    state.buckets.get(m.group(3)[:2], set()).discard(m.group(3))
                continue
            if path == "measurement.json":
                if not first:
                    bad("append-only", "measurement.json changed after the experiment was created: it is frozen")
                else:
                    state.measurement = new
                    try:
                        state.meas = json.loads(self._blob(new))
                    except ValueError:
                        bad("well-formed", "measurement.json is not JSON")
                    else:
                        out += [Violation(cid, v.rule, v.message) for v in self._frozen_hashes(state.meas or {})]
            elif path in ("meta.json", LEDGER_WORKFLOW) or INDEX.match(path) or COHORT_INDEX.match(path):
                continue  # derived (the record count, the CI workflow); indexes are checked below
            elif (m := TASKS.match(path)) is not None:
                if old is not None:
                    bad("append-only", f"per-task results of run {m.group(3)} were rewritten")
                state.tasks[m.group(3)] = new
            elif (m := GRADER.match(path)) is not None:
                if old is not None:  # what it says is checked against the pinned key (monte.ledger.grader_statement)
                    bad("append-only", f"the grader's signed statement of run {m.group(3)} was rewritten")
            elif (m := NOMINATION.match(path)) is not None:
                out += self._nomination(state, cid, m.group(1), new)
            elif (m := LEAK_REFUSAL.match(path)) is not None:
                if old is not None or not m.group(2).startswith(m.group(1)):
                    bad("append-only" if old is not None else "well-formed",
                        f"{path}: a leak refusal is counted once and never rewritten")
            elif ROW.match(path) is None:
                bad("well-formed", f"{path} is not a path monte writes")
        if first and state.measurement is None:
            bad("well-formed", "the experiment's first record holds no measurement.json")
        for path, _, new in row_changes:
            if new is not None:
                out += self._row(experiment, state, cid, ROW.match(path).group(3), new)  # type: ignore[union-attr]
        if side:  # merged in: its indexes lack the other side's runs; the merge's are checked
            return out
        for path, _, new in changes:
            if new is not None and (m := INDEX.match(path)) is not None:
                out += self._index(state, cid, path, new, m.group(1) + m.group(2))
        out += self._cohort_indexes(state, cid, changes)
        return out

    def _cohort_indexes(self, state: WalkState, cid: str,
                        changes: Sequence[tuple[str, ObjectID | None, ObjectID | None]]) -> list[Violation]:
        """Each cohort index the record (or merge) wrote equals the fold of the rows verified so
        far (:mod:`monte.ledger.cohorts`); one it left as it was still does, where the ledger
        keeps one for that cohort (a ledger written before there were any has none)."""
        out: list[Violation] = []
        written: set[str] = set()
        for path, _, new in changes:
            if (m := COHORT_INDEX.match(path)) is None:
                continue
            cohort = m.group(1)
            if new is None:  # removed: an append-only violation already
                state.indexed.discard(cohort)
                continue
            written.add(cohort)
            state.indexed.add(cohort)
            try:
                index = json.loads(self._blob(new))
            except ValueError:
                out.append(Violation(cid, "well-formed", f"{path} is not JSON"))
                continue
            if index != state.cohorts.get(cohort, cohort_index.empty()):
                out.append(Violation(cid, "well-formed", f"{path} does not match the rows of cohort {cohort} "
                                     "(its baselines and test reads)"))
        for cohort in sorted(state.refolded - written):
            path = cohort_index_path(cohort)
            if cohort in state.indexed or (state.since is not None and state.since.exists(path)):
                out.append(Violation(cid, "well-formed", f"{path} is stale: this record changed the baselines "
                                     f"or test reads of cohort {cohort} and left the index as it was"))
        state.refolded = set()
        return out

    def _index(self, state: WalkState, cid: str, path: str, blob: ObjectID, bucket: str) -> list[Violation]:
        try:
            index = json.loads(self._blob(blob))
        except ValueError:
            return [Violation(cid, "well-formed", f"{path} is not JSON")]
        want = {}
        for run in state.buckets.get(bucket, ()):
            dump = state.dumps.get(run)
            if dump is None:  # dumped once per version of the row, not once per record of its bucket
                dump = state.dumps[run] = state.rows[run].model_dump(mode="json")
            want[run] = dump
        if index != want:
            return [Violation(cid, "well-formed", f"{path} does not match the rows it indexes")]
        return []

    def _row(self, experiment: str, state: WalkState, cid: str, run: str, blob: ObjectID) -> list[Violation]:
        self.wrote.add(run)
        out: list[Violation] = []
        try:
            row = RunRow.model_validate_json(self._blob(blob))
        except ValueError as e:
            return [Violation(cid, "well-formed", f"the row of run {run} does not parse: {str(e)[:120]}")]
        if row.run != run:
            out.append(Violation(cid, "well-formed", f"the row at {run}'s path names run {row.run}"))
        old = state.rows.get(run)
        if old is None:
            out += first_record(state, cid, row)
            for ck in row.checkpoints:  # (first_record refused them: each is still checked)
                out += self._checkpoint(experiment, state, cid, row, ck)
            out += self._new_row(experiment, state, cid, row)
        else:
            out += changed_row(old, row, cid)
            for ck in row.checkpoints[len(old.checkpoints):]:
                out += self._checkpoint(experiment, state, cid, row, ck)
            if row.status == "succeeded" and row.kind == "eval" and not row.smoke:
                if self._tasks_blob(state, run) is None:
                    out.append(Violation(cid, "well-formed", f"eval {run} succeeded without per-task results"))
                else:
                    scores = list(self._tasks(state, run).values())
                    mean = sum(scores) / len(scores) if scores else 0.0
                    if row.n != len(scores) or row.score is None or abs(row.score - mean) > 1e-9:
                        out.append(Violation(cid, "well-formed", f"eval {run}: score {row.score} over n={row.n} "
                                             f"does not match its per-task results ({mean:.6f} over {len(scores)})"))
        state.put(row)
        return out

    def _new_row(self, experiment: str, state: WalkState, cid: str, row: RunRow) -> list[Violation]:
        return new_row_violations(state, cid, row, chosen=lambda cohort: self._chosen(state, cohort))

    def _chosen(self, state: WalkState, cohort: str) -> str | None:
        """The nomination, or the best paired dev delta recomputed from the per-task files."""
        if cohort in state.nominations:
            return state.nominations[cohort]
        exams = [e for e, x in (state.meas or {}).get("exams", {}).items() if "dev" in x.get("splits", {})]
        if len(exams) != 1:
            return "a nomination (several dev exams)"
        from monte.stats.paired import paired_delta

        exam = exams[0]
        rows = sorted(state.rows.values(), key=lambda r: r.seq)
        base = next((r for r in rows if is_base_eval(r) and r.cohort == cohort and r.exam == exam
                     and r.split == "dev"), None)
        if base is None or self._tasks_blob(state, base.run) is None:
            return None
        base_tasks = self._tasks(state, base.run)
        best: tuple[float, int, int] | None = None
        chosen = None
        for r in rows:
            t = r.plan.get("target", {})
            if is_checkpoint_eval(r) and r.cohort == cohort and r.exam == exam and r.split == "dev":
                mine = self._tasks(state, r.run) if self._tasks_blob(state, r.run) is not None else None
                if mine is None or set(mine) != set(base_tasks):
                    return None  # unpairable: the live rule refuses; nothing to compare against
                ids = sorted(base_tasks)
                d = paired_delta([base_tasks[i] for i in ids], [mine[i] for i in ids]).delta
                key = (d, int(t.get("step", 0)), r.seq)
                if best is None or key > best:
                    best, chosen = key, f"{t.get('run')}@{t.get('step')}"
        return chosen

    def _tasks(self, state: WalkState, run: str) -> dict[str, float]:
        blob = self._tasks_blob(state, run)
        assert blob is not None
        lines = self._blob(blob).decode().split("\n")  # \n only: an answer may hold U+2028 raw
        out: dict[str, float] = {}
        for line in lines:
            if line.strip():
                t = json_line(line)
                out[t["id"]] = float(t["score"])
        return out

    def _nomination(self, state: WalkState, cid: str, cohort: str, blob: ObjectID) -> list[Violation]:
        try:
            ck = json.loads(self._blob(blob))["checkpoint"]
        except (ValueError, KeyError):
            return [Violation(cid, "well-formed", f"the nomination of cohort {cohort} does not parse")]
        out = []
        claims = [r for r in state.rows.values() if r.cohort == cohort and is_test_read(r)
                  and target_kind(r) == "checkpoint"]
        if claims:
            out.append(Violation(cid, "two-touch", f"cohort {cohort} re-nominated after its claim started"))
        run, _, step = ck.partition("@")
        src = state.rows.get(run)
        if src is not None and src.smoke:
            out.append(Violation(cid, "no-smoke-evidence", f"nominee {ck} is a smoke run"))
        if not any(is_admissible(r) and r.split == "dev"
                   and r.plan.get("target", {}).get("run") == run and str(r.plan["target"].get("step")) == step
                   for r in state.rows.values()):
            out.append(Violation(cid, "two-touch", f"nominee {ck} carries no admissible dev eval"))
        state.nominations[cohort] = ck
        return out

    def _checkpoint(self, experiment: str, state: WalkState, cid: str, row: RunRow, ck: dict[str, Any]) -> list[Violation]:

        out: list[Violation] = []
        sha = str(ck.get("commit", "")).encode()
        try:
            commit = self._obj(ObjectID(sha))
        except (KeyError, ValueError, AssertionError):
            return [Violation(cid, "lineage", f"checkpoint {row.run}@{ck.get('step')}: lineage commit "
                              f"{sha.decode()[:12]} does not exist")]
        tree = self._obj(commit.tree)
        try:
            info = json.loads(self._blob(tree[b"checkpoint.json"][1]))
        except (KeyError, ValueError):
            return [Violation(cid, "lineage", f"lineage commit {sha.decode()[:12]} holds no checkpoint.json")]
        step = int(ck.get("step", -1))
        if info.get("run") != row.run or int(info.get("step", -2)) != step:
            out.append(Violation(cid, "lineage", f"lineage commit {sha.decode()[:12]} names "
                                 f"{info.get('run')}@{info.get('step')}, not {row.run}@{step}"))
        start = int(row.plan.get("start_step", 0))
        if not start < step <= start + int(row.plan.get("steps", step - start)):
            out.append(Violation(cid, "lineage", f"checkpoint {row.run}@{step} is outside its chunk "
                                 f"({start} + {row.plan.get('steps')})"))
        earlier = [c for c in row.checkpoints if c is not ck and int(c["step"]) < step]
        if earlier:
            want = str(max(earlier, key=lambda c: int(c["step"]))["commit"]).encode()
        elif row.plan.get("parent"):
            p = row.plan["parent"]
            src = state.rows.get(p["run"])
            hit = [c for c in (src.checkpoints if src else []) if int(c["step"]) == int(p["step"])]
            want = str(hit[0]["commit"]).encode() if hit else b"?"
        else:
            tip = self.store.tip(base_ref(experiment, row.cohort))
            want = tip or b"?"
        if [want] != list(commit.parents):
            out.append(Violation(cid, "lineage", f"lineage commit {sha.decode()[:12]} of {row.run}@{step} hangs "
                                 f"off {b','.join(commit.parents).decode()[:12] or 'nothing'}, "
                                 f"not the plan's parent {want.decode()[:12]}"))
        return out

    def _frozen_hashes(self, meas: dict[str, Any]) -> list[Violation]:
        out: list[Violation] = []
        env = meas.get("environment", "")
        snap_tip = self.store.tip(VAULT_REF)
        if snap_tip is None:
            return [Violation("-", "frozen-hashes", f"no vault ref holds environment {env!r}")]
        from monte.ledger.store import Snapshot

        raw = Snapshot(self.store.repo, snap_tip).read(manifest_path("environment", env))
        if raw is None:
            return [Violation("-", "frozen-hashes", f"the vault holds no manifest for environment {env!r}")]
        files = json.loads(raw).get("files", {})
        prefix = f"environments/{env}/"
        for exam, x in meas.get("exams", {}).items():
            for split, s in x.get("splits", {}).items():
                rel = str(s.get("path", "")).removeprefix(prefix)
                if files.get(rel, {}).get("sha256") != s.get("sha256"):
                    out.append(Violation("-", "frozen-hashes", f"{exam}/{split}: measurement.json's sha256 does not "
                                         "match the vault manifest"))
        return out
