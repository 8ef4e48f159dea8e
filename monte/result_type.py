"""What a verb returns: a frozen dataclass (:class:`Result`) read by field, with ``to_dict()`` as
the document ``--json`` prints.

It sits at the bottom so that each result has one home: the module that makes it defines it
(``plot.PlotWritten``, ``claim.ClaimVerified``, ...) and :mod:`monte.api.shapes` names them all
for a caller, instead of a lower layer's dict and an API dataclass spelling the same fields."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, cast


@dataclass(frozen=True)
class Result:
    """Base of the results: frozen (a result is what happened), read by field."""

    def to_dict(self) -> dict[str, Any]:
        """The result as the JSON document ``--json`` prints (rows as dicts, tuples as lists)."""
        return cast("dict[str, Any]", plain(dataclasses.asdict(self)))


def plain(value: Any) -> Any:
    """JSON's shapes: a tuple (a frozen result's rows) as a list."""
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [plain(v) for v in value]
    return value
