"""``monte nominate``: the operator names the checkpoint the final claim will score."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from monte.errors import error
from monte.ledger import rules
from monte.ledger.experiment import Ledger, dumps
from monte.ledger.store import Change, Snapshot
from monte.ledger.views import nomination_path
from monte.manifest import now
from monte.result_type import Result
from monte.runs.lifecycle import experiment_name, read_rows
from monte.runs.naming import parse_run_ref
from monte.workspace import Workspace


@dataclass(frozen=True)
class Nominated(Result):
    """``monte nominate``: the checkpoint the final claim of its cohort scores, and when."""

    experiment: str
    checkpoint: str
    cohort: str
    at: str


def nominate(ws: Workspace, *, ref: str, experiment: str | None, model: str | None) -> Nominated:
    exp0, run, step = parse_run_ref(ref, None)
    exp = experiment_name(ws, experiment or exp0)
    ledger = Ledger(ws.store, exp)
    snap = ledger.snapshot()
    meas = ledger.measurement(snap)
    rows = read_rows(ledger, snap)
    ck = rules.find_checkpoint(rows, run, step)
    dev_exams = sorted(e for e, x in meas.exams.items() if "dev" in x.splits)
    result: dict[str, Any] = {}

    def build(snap: Snapshot) -> Change:
        rows = read_rows(ledger, snap)
        rules.nominee_is_admissible(rows, ck, dev_exams)
        claims = [r for r in rows if r.cohort == ck.cohort and r.role == "claim"]
        if claims:
            raise error("E_SEALED", f"the final claim of cohort {ck.cohort} has started ({claims[0].run}); "
                        "the nomination is fixed", "nothing to do: the claim is the record")
        body = {"checkpoint": ck.ref, "cohort": ck.cohort, "at": now()}
        result.update(body)
        return Change(summary=f"nominate {ck.ref} for the final claim of cohort {ck.cohort}",
                      writes={nomination_path(ck.cohort): dumps(body)},
                      trailers={"Monte-Event": "nominate", "Monte-Run": ck.run, "Monte-Step": str(ck.step),
                                "Monte-Cohort": ck.cohort})

    ws.store.append(ledger.ref, build)
    return Nominated(experiment=exp, checkpoint=result["checkpoint"], cohort=result["cohort"], at=result["at"])
