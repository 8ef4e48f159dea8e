"""``monte ledger verify``: every rule of every ledger of the repository, re-derived from the
commit history (:class:`~monte.ledger.verify.Verifier`), with the repository-wide seal, the vault
ref, the lineage refs, the object cache, what a clone's remote-tracking refs hold, and the
records an older monte wrote with a folder of its machine (warnings). One call, one
:class:`LedgerVerified`, or ``E_VERIFY`` naming each violation.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from monte.errors import error
from monte.ledger.refs import ledger_ref
from monte.ledger.verify.lineage import Verifier
from monte.ledger.verify.model import Violation
from monte.ledger.verify.updates import experiments, seal_violations
from monte.names import check_name
from monte.result_type import Result

if TYPE_CHECKING:
    from monte.workspace import Workspace


@dataclass(frozen=True)
class LedgerVerified(Result):
    """``monte ledger verify`` that found nothing (a violation is E_VERIFY): the experiments and
    records checked, the warnings (records that verify, and are named), the remote copies let in
    (``adopted``: ref -> remote ref) and the refs not read (ref -> why)."""

    ok: bool
    experiments: list[str]
    records: int
    warnings: list[Any]
    adopted: dict[str, Any]
    unchecked: dict[str, str]


def verify_repository(ws: Workspace, *, experiment: str | None = None, all_: bool = False,
                      from_rev: str | None = None,
                      derived: Callable[[], list[dict[str, str]]] = list) -> LedgerVerified:
    """Verify one experiment (``experiment``; with ``from_rev``, only its records since that
    commit) or every one (``all_``, or neither given). ``derived``: the caches a reader derived
    from the ledger, each checked against what it derives from (a full check only)."""
    if experiment and all_:
        raise error("E_USAGE", "name one experiment or pass --all", "monte ledger verify EXP | --all")
    if from_rev and (all_ or not experiment):
        raise error("E_USAGE", "--from verifies one experiment's new records", "monte ledger verify EXP --from REV")
    names = experiments(ws.store) if (all_ or not experiment) else [check_name(experiment, "experiment name")]
    if experiment and ws.store.tip(ledger_ref(experiment)) is None and experiment not in experiments(ws.store):
        raise error("E_NOT_FOUND", f"no experiment named {experiment!r}", "list them with `monte experiment list`")
    since = None
    if from_rev:
        from dulwich.objectspec import parse_commit

        try:
            since = parse_commit(ws.store.repo, from_rev.encode()).id
        except (KeyError, ValueError):
            raise error("E_NOT_FOUND", f"no commit {from_rev!r}", "pass a commit id of the ledger") from None
    v = Verifier(ws.store)
    violations = [{"experiment": "", **x.to_dict()} for x in v.verify_vault()]
    from monte.ledger import objcache

    # the state reads' object cache: a forged entry is never read (its bytes are not its id), but say so
    violations += [{"experiment": "", "commit": "-", "rule": "cache", "message": m,
                    "fix": f"remove {objcache.cache_path(ws.store.repo.commondir(), '*')} (rebuilt from the ledger "
                    "on the next read), then find who wrote it"} for m in objcache.check(ws.store.repo.commondir())]
    if since is None:  # a full check: what status derived from each index, re-derived (~0.1 s per 10,000 rows)
        violations += derived()
    records = 0
    rows: dict[str, Any] = {}  # each experiment's rows, as its walk read them (for the warnings)
    only: dict[str, set[str]] | None = {} if since is not None else None  # --from: the runs written since
    for name in names:
        found = v.verify(name, since=since)
        violations += [{"experiment": name, **x.to_dict()} for x in found]
        records += v.records
        if only is not None:
            only[name] = set(v.wrote)
        violations += [{"experiment": name, **x.to_dict()}
                       for x in lineage_matches_ledger(ws, v, name, None if only is None else only[name])]
        if v.passed is not None and v.passed.experiment == name and (v.passed.complete or only is not None):
            rows[name] = v.passed.rows.values()
    # the repository-wide seal: every ledger's test reads counted per seal key (rule ``seal``)
    violations += [{"experiment": exp, **x.to_dict()}
                   for exp, x in seal_violations(ws.store, new_runs=only if only is not None else None)]
    if since is None:  # every base commit behaves as no model recorded before it (rule ``behaviour``)
        from monte.ledger.verify.behaviour import behaviour_violations

        violations += [{"experiment": exp, **x.to_dict()} for exp, x in behaviour_violations(ws.store)]
    from monte.ledger.grader_statement import ledger_violations, repository_pin
    from monte.ledger.verify.updates import GRADER_FIX

    # a grader-pinned repository: a test read counts only with the grader's signature (docs/grader.md);
    # the pin is the work tree's, else the repository's own (CI on a ledger branch reads the default branch's)
    grader_key = repository_pin(ws.store, ws.config)
    if grader_key is not None:
        violations += [{"experiment": exp, "commit": run, "rule": "grader", "message": why, "fix": GRADER_FIX}
                       for exp, run, why in ledger_violations(ws.store, names, grader_key)]
    from monte.ledger import remotes

    # what a clone's remote-tracking refs hold: let in when it could be; a forged copy is named
    violations += remotes.refused_violations(ws.remotes_let_in)
    unchecked = remotes.unchecked(ws.store, ws.remotes_let_in)
    if violations:
        lines = "; ".join(f"{x['commit']} [{x['rule']}] {x['message']}" for x in violations[:20])
        own = [x["fix"] for x in violations if x.get("fix")]  # e.g. a rewound ref: the restore command
        raise error("E_VERIFY", f"{len(violations)} violation(s): {lines}",
                    own[0] if len(own) == len(violations) else "the ledger was written outside monte; find who wrote "
                    "these commits (`git show COMMIT`) and restore the ref from a good copy", details=violations)
    if not records and unchecked:  # never "ok" over nothing while ledgers exist elsewhere in the repository
        raise error("E_NOT_FOUND", "no ledger record was checked, but this repository holds monte refs verify does "
                    f"not read: {'; '.join(f'{r} ({why})' for r, why in sorted(unchecked.items())[:10])}",
                    "let them in as monte refs (`git update-ref refs/heads/monte/... SHA`; a clone's "
                    "refs/remotes/<remote>/monte/* are let in by any monte command), then verify again")
    from monte.ledger.portable import scan

    # records an older monte wrote with a folder of its machine: they verify, and are named
    return LedgerVerified(ok=True, experiments=names, records=records,
                          warnings=scan(ws.store, names, rows=rows, only=only),
                          adopted=dict(ws.remotes_let_in.moved) if ws.remotes_let_in else {}, unchecked=unchecked)


def lineage_matches_ledger(ws: Workspace, v: Verifier, name: str, only: set[str] | None = None) -> list[Violation]:
    """Each lineage ref walks cleanly and its tip is the last checkpoint its run's row lists;
    ``only`` (``--from``): the lineage refs of these runs (those the new records wrote)."""
    from monte.ledger.experiment import Ledger
    from monte.ledger.refs import lineage_prefix, lineage_ref

    ledger = Ledger(ws.store, name)
    if only is None:
        refs = ws.store.refs_under(lineage_prefix(name))
    else:  # not every lineage ref read to keep a few
        refs = {ref: tip for ref in sorted(lineage_ref(name, run) for run in only)
                if (tip := ws.store.tip(ref)) is not None}
    passed = v.passed
    if passed is not None and (passed.experiment, passed.tip) == (name, ws.store.tip(ledger.ref)) and (
            passed.complete or (only is not None and only <= passed.rows.keys())):
        rows = passed.rows  # the walk that just passed holds these rows at the tip: the indexes' rows
    else:
        rows = {r.run: r for r in ledger.rows()} if ledger.exists() else {}  # a deleted ledger: verify says so
    out: list[Violation] = []
    walked = v.verify_lineages(name, refs, own=only is not None)  # each ref's walk, all read at once
    for ref, tip in refs.items():
        run = ref.rsplit("/", 1)[1]
        out += walked[ref]
        row = rows.get(run)
        if row is None:
            out.append(Violation(tip.decode()[:12], "append-only", f"lineage ref of {run}: no such run in the "
                                 "ledger (a record was removed, or the ref was made by hand)"))
        elif row.checkpoints and row.checkpoints[-1]["commit"] != tip.decode():
            out.append(Violation(tip.decode()[:12], "lineage", f"the lineage ref of {run} is not the checkpoint "
                                 f"its row records ({row.checkpoints[-1]['commit'][:12]})"))
    return out


