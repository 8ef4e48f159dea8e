"""Records that still hold a folder of the machine that wrote them.

monte records model references that mean the same thing on every machine
(:mod:`monte.models.locate`), checkpoints by run and step, and data-root paths relative to the
data root. An older monte wrote absolute folders: a base model's (``measurement.json``,
``base.json``, a row's ``model`` and ``plan.base_model``), a checkpoint's (an eval row's target),
a trainer state's, a dataset's source file. Such a record keeps verifying and still resolves
where its folder exists; ``monte ledger verify`` lists it as a warning, not a violation, so the
reader knows which records will not read the same on another machine.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from monte.ledger.experiment import Ledger
from monte.ledger.records import RunRow
from monte.ledger.refs import VAULT_REF, experiment_prefix, experiment_ref, lineage_ref
from monte.ledger.store import Snapshot, Store
from monte.ledger.views import VAULT_FOLDERS, manifest_path

#: an absolute folder of some machine: /x/y, ~/x, C:\x or C:/x (a lone "/" is not a folder)
_LOCAL = re.compile(r"(/[^/\s]+/|/[^/\s]+$|~/|[A-Za-z]:[\\/])")


def is_machine_local(text: str) -> bool:
    """Does this recorded string name a folder of the machine that wrote it?"""
    return bool(_LOCAL.match(text))


def local_values(value: Any, where: str = "") -> Iterator[tuple[str, str]]:
    """(field, value) for every string in ``value`` (JSON-like) that names a machine-local folder."""
    if isinstance(value, str):
        if is_machine_local(value):
            yield where, value
    elif isinstance(value, dict):
        for k, v in value.items():
            yield from local_values(v, f"{where}.{k}" if where else str(k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from local_values(v, f"{where}[{i}]")


def _json(raw: bytes | None) -> Any:
    if raw is None:
        return None
    try:
        return json.loads(raw)
    except ValueError:  # not monte's to judge here: verify's well-formed rule names it
        return None


def scan(store: Store, experiments: list[str], *, rows: Mapping[str, Iterable[RunRow]] | None = None,
         only: Mapping[str, set[str]] | None = None) -> list[dict[str, str]]:
    """Every record at the tips of these experiments' ledger, base and lineage refs, and of the
    vault ref, that holds a machine-local folder: one warning per (record, field).

    ``rows``: an experiment's rows at its tip, already read (by verify's walk), in any order.
    ``only``: an experiment's runs to look at (``verify --from``: those its new records wrote),
    their rows and their own checkpoints; the rest of its ledger and lineage is not read."""
    out: list[dict[str, str]] = []

    def warn(experiment: str, record: str, found: Iterator[tuple[str, str]]) -> None:
        out.extend({"experiment": experiment, "record": record, "field": f, "value": v} for f, v in found)

    for exp in experiments:
        ledger = Ledger(store, exp)
        if ledger.exists():
            snap = ledger.snapshot()
            warn(exp, "measurement.json", local_values(_json(snap.read("measurement.json"))))
            mine = only.get(exp) if only is not None else None
            given = rows.get(exp) if rows is not None else None
            read = sorted(given, key=lambda r: r.seq) if given is not None else ledger.rows(snap)
            for r in read:
                if mine is None or r.run in mine:
                    warn(exp, f"run {r.run}", local_values({"model": r.model, "plan": r.plan, "error": r.error}))
        seen: set[bytes] = set()
        if only is not None and exp in only:  # the base refs, and the lineage refs of these runs only
            refs = store.refs_under(experiment_ref(exp, "base/"))
            refs.update((ref, tip) for ref in map(lambda run: lineage_ref(exp, run), only[exp])
                        if (tip := store.tip(ref)) is not None)
        else:
            refs = store.refs_under(experiment_prefix(exp))
        for ref, tip in sorted(refs.items()):
            if "/base/" in ref:
                base = _json(Snapshot(store.repo, tip).read("base.json"))
                warn(exp, f"base {ref.rsplit('/', 1)[1]}", local_values(base))
            elif "/lineage/" in ref:
                for commit in store.log(ref):
                    if commit.id in seen:
                        break
                    seen.add(commit.id)
                    info = _json(Snapshot(store.repo, commit.id).read("checkpoint.json"))
                    if info is None:  # the base commit
                        break
                    if only is not None and exp in only and info.get("run") != ref.rsplit("/", 1)[1]:
                        break  # the parent run's checkpoints: not the runs asked about
                    warn(exp, f"checkpoint {info.get('run')}@{info.get('step')}", local_values(info))
    if store.tip(VAULT_REF) is not None:
        vault = store.snapshot(VAULT_REF)
        for kind, folder in VAULT_FOLDERS.items():
            for name in vault.listdir(folder):
                manifest = _json(vault.read(manifest_path(kind, name)))
                warn("", f"vault {kind} {name}", local_values(manifest))
    return out
