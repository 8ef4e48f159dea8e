"""Run ids: globally unique without coordination between machines.

60 random bits in lowercase Crockford base32 (12 characters). Uniform, so the first two
characters fan the ledger tree out evenly; random, so a laptop and a box never collide
(the chance of any collision among a million ids is about 4e-7).
"""

from __future__ import annotations

import secrets

_ALPHABET = "0123456789abcdefghjkmnpqrstvwxyz"


def new_run_id() -> str:
    n = secrets.randbits(60)
    return "".join(_ALPHABET[(n >> (5 * i)) & 31] for i in range(11, -1, -1))
