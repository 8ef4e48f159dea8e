"""``monte ledger verify --updates`` reads git's hook lines (``OLD NEW REF``); a line in any other
shape refuses ``E_USAGE``, naming the shape, instead of an ``E_INTERNAL`` from deep in dulwich (a
line with the ref first: an assertion on the object id's length) or of being skipped (its update
would pass unjudged)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from monte import api
from monte.errors import MonteError


def _rev(ref: str) -> str:
    return subprocess.run(["git", "rev-parse", ref], check=True, capture_output=True, text=True).stdout.strip()


@pytest.mark.parametrize("shape", ["pre-push order", "short ids", "two words"])
def test_an_update_line_in_another_shape_refuses_with_its_fix(honest, shape: str) -> None:
    ref = "refs/heads/monte/exp/ledger"
    tip, before = _rev(ref), _rev(f"{ref}~1")
    line = {"pre-push order": f"{ref} {tip} {ref} {before}",  # git's pre-push stdin, unconverted
            "short ids": f"{before[:12]} {tip[:12]} {ref}",
            "two words": f"{before} {tip}"}[shape]
    with pytest.raises(MonteError) as e:
        api.ledger_verify_updates([line], full=True)
    assert e.value.code == "E_USAGE", e.value.to_dict()
    assert "OLD NEW REF" in e.value.fix
    assert _rev(ref) == tip
    # and from the command line, as a hook (or a user) pipes it: exit 2, no traceback
    r = subprocess.run([sys.executable, "-m", "monte", "ledger", "verify", "--updates", "--local"],
                       input=line + "\n", capture_output=True, text=True)
    assert r.returncode == 2, (r.returncode, r.stderr)
    assert r.stderr.startswith("E_USAGE: not an update line"), r.stderr


def test_a_well_formed_line_and_blank_lines_still_verify(honest) -> None:
    ref = "refs/heads/monte/exp/ledger"
    judged = api.ledger_verify_updates(["", f"{_rev(f'{ref}~1')} {_rev(ref)} {ref}", "  "], full=True)
    assert judged.ok and judged.updates == 1 and judged.to_dict() == {"ok": True, "updates": 1}
