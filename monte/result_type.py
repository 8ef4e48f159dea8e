"""What a verb returns: a frozen dataclass (:class:`Result`) read by field, with ``to_dict()`` as
the document ``--json`` prints.

It sits at the bottom so that each result has one home: the module that makes it defines it
(``plot.PlotWritten``, ``claim.ClaimVerified``, ...) and :mod:`monte.api.shapes` names them all
for a caller, instead of a lower layer's dict and an API dataclass spelling the same fields."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Result:
    """Base of the results: frozen (a result is what happened), read by field."""

    def to_dict(self) -> dict[str, Any]:
        """The result as the JSON document ``--json`` prints (rows as dicts, tuples as lists)."""
        return {f.name: plain(getattr(self, f.name)) for f in dataclasses.fields(self)}


def plain(value: Any) -> Any:
    """JSON's shapes: a result (a row) through its own ``to_dict``, any mapping (a plan's frozen
    settings too) as a dict, a tuple (a frozen result's rows) as a list; nothing is copied that
    JSON writes as it is (``dataclasses.asdict`` deep-copies, and a mappingproxy refuses that)."""
    if isinstance(value, Result):
        return value.to_dict()
    if isinstance(value, Mapping):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [plain(v) for v in value]
    return value
