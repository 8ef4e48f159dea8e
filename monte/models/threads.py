"""How torch computes on a CPU here: how many threads, and how an idle one waits.

torch starts one compute thread per core and OpenMP's threads spin while they wait for work. On a
machine where other processes hold the cores (a laptop with a browser open, a shared CI runner, a
2-core box running a test suite beside this), every parallel region then waits for a thread the
kernel has descheduled, and a chunk that takes 8 s quiet took 395 s at a load of 4-5.
So, unless the user chose (``OMP_NUM_THREADS``, ``OMP_WAIT_POLICY`` set):

- an idle thread sleeps instead of spinning (``OMP_WAIT_POLICY=PASSIVE``), set before torch
  loads OpenMP: the CLI sets it as it starts (:func:`wait_policy`);
- torch computes with the cores the other processes leave free: the cores this process may run
  on less the 1-minute load average beyond this process's own, at least one
  (:func:`compute_threads`), set when a model is loaded to train or evaluate (:func:`apply`).

A launch past one process gives each rank one thread (:mod:`monte.training.launch`), as before.
"""

from __future__ import annotations

import os
from collections.abc import MutableMapping


def wait_policy(environ: MutableMapping[str, str] = os.environ) -> None:
    """Idle OpenMP threads sleep, unless the user set a policy (read when torch loads OpenMP)."""
    environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")


def compute_threads(environ: MutableMapping[str, str] = os.environ) -> int | None:
    """The threads torch should compute with here, or None where ``OMP_NUM_THREADS`` says."""
    if environ.get("OMP_NUM_THREADS"):
        return None
    try:
        cpus = len(os.sched_getaffinity(0))
    except AttributeError:  # (not Linux)
        cpus = os.cpu_count() or 1
    try:
        load = os.getloadavg()[0]
    except OSError:
        load = 0.0
    others = max(0.0, load - 1.0)  # the load average counts this process too
    return max(1, min(cpus, int(cpus - others + 0.5)))


def apply() -> int:
    """Set torch's thread count by :func:`compute_threads`; the count torch computes with."""
    wait_policy()  # (in effect only where torch is not loaded yet: the CLI set it at its start)
    import torch

    n = compute_threads()
    if n is not None and n != torch.get_num_threads():
        torch.set_num_threads(n)
    return int(torch.get_num_threads())
