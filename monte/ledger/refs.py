"""Every git ref monte writes or reads, named in one place; nothing else spells a ref string.

| ref | holds |
|---|---|
| ``refs/heads/monte/<exp>/ledger`` | one commit per record of the experiment |
| ``refs/heads/monte/<exp>/base/<cohort>`` | the cohort's base commit (the base model's identity) |
| ``refs/heads/monte/<exp>/lineage/<run>`` | the run's checkpoints, one commit each |
| ``refs/heads/monte/vault`` | one commit per freeze manifest |
| ``refs/remotes/results/monte/<exp>/<name>`` | read-only mirrors of the results bucket's refs (``monte sync``) |

In the results bucket a ref ``<name>`` of an experiment (``ledger``, ``base/<c>``, ``lineage/<r>``)
is the object :func:`bucket_ref`.
"""

from __future__ import annotations

#: Every monte ref lives under this prefix.
PREFIX = "refs/heads/monte/"
VAULT_REF = PREFIX + "vault"
#: Mirrors of the results bucket's refs, written by ``monte sync``.
MIRROR = "refs/remotes/results/monte"
#: The object id git writes for a ref that is not there (the old value of a ref a push creates,
#: the new value of one it deletes; a reflog line's old value of a new ref).
ZERO = b"0" * 40


def experiment_prefix(experiment: str) -> str:
    """``refs/heads/monte/<exp>/``: every ref of one experiment."""
    return f"{PREFIX}{experiment}/"


def experiment_ref(experiment: str, name: str) -> str:
    """An experiment's ref by its short name (``ledger``, ``base/<cohort>``, ``lineage/<run>``)."""
    return f"{PREFIX}{experiment}/{name}"


def ledger_ref(experiment: str) -> str:
    return experiment_ref(experiment, "ledger")


def base_ref(experiment: str, cohort: str) -> str:
    return experiment_ref(experiment, f"base/{cohort}")


def lineage_prefix(experiment: str) -> str:
    return experiment_ref(experiment, "lineage/")


def lineage_ref(experiment: str, run: str) -> str:
    return experiment_ref(experiment, f"lineage/{run}")


def experiment_of_ledger(ref: str) -> str | None:
    """The experiment whose ledger ``ref`` is, or None when it is no ledger ref."""
    if ref.startswith(PREFIX) and ref.endswith("/ledger"):
        middle = ref[len(PREFIX):-len("/ledger")]
        return middle if middle and "/" not in middle else None
    return None


def mirror_prefix(experiment: str) -> str:
    return f"{MIRROR}/{experiment}/"


def mirror_ref(experiment: str, name: str) -> str:
    return f"{MIRROR}/{experiment}/{name}"


def bucket_refs_prefix(experiment: str) -> str:
    """Where the results bucket keeps one experiment's refs (one object each)."""
    return f"git/{experiment}/refs/"


def bucket_ref(experiment: str, name: str) -> str:
    return f"git/{experiment}/refs/{name}"
