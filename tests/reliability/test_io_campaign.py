"""The I/O-failure campaign's own check, in the suite (bench/io_campaign.py runs every k; this runs
the final claim with its last ref update failing, the finishing record's, and with its run's event
log failing to open): the failure is a named
refusal or is retried, recover and verify pass, git fsck is clean, no record is lost and no touch
is spent without a score. The injection is in-process in the child (the system-call wrappers and
dulwich's ref writes): the one way to fail exactly the n-th call; the disk itself is real."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]


def test_the_claims_last_ref_update_or_its_event_log_failing_loses_nothing(tmp_path: Path) -> None:
    spec = importlib.util.spec_from_file_location("io_campaign", ROOT / "bench" / "io_campaign.py")
    assert spec and spec.loader
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    env = bench.env_for(tmp_path / "home")
    template = bench.build_template(tmp_path, env)
    # each trial's claim forked from one warm process, as the campaign runs it (its default): a
    # fresh process minus the seconds of imports, its injection installed in the child alone
    bench.ZYGOTES.append(bench.Zygote(env))
    try:
        _trials(bench, template, tmp_path, env)
    finally:
        bench.ZYGOTES.pop().close()


def _trials(bench: Any, template: dict[str, Any], tmp_path: Path, env: dict[str, str]) -> None:
    counted = bench.trial(template, "claim", "", 0, tmp_path, env)
    assert counted["exit"] == 0 and counted["claim"] == "succeeded" and not counted["problems"], counted
    n = counted["counts"]["ref"]
    assert n >= 2  # the started record and the finishing one
    res = bench.trial(template, "claim", "ref", n, tmp_path, env)
    assert res["fired"] and f"ref #{n}" in res["fired"][0], res
    assert not res["problems"], res
    assert res["claim"] == "succeeded", res  # retried, or kept and recorded by recover: never spent for nothing
    # The run's event file (a log beside the record) failing to open, after the test read was
    # spent: the campaign found the claim failed for it, the touch spent without a score. The log
    # misses a line (said on stderr); the claim goes on and is scored.
    opens = [c.split(" ", 1)[1] for c in counted["trace"] if c.startswith("open ")]
    k = next(i for i, path in enumerate(opens, 1) if path.endswith("events.jsonl"))
    res = bench.trial(template, "claim", "open", k, tmp_path, env)
    assert res["fired"] and "events.jsonl" in res["fired"][0], res
    assert not res["problems"], res
    assert res["exit"] == 0 and res["claim"] == "succeeded", res
    # monte's memory of the tips (.git/monte/tips.log) failing to open after the claim's record
    # landed: the claim is recorded and scored, and the missed line is said (before, silently)
    k = next(i for i, path in enumerate(opens, 1) if path.endswith("tips.log"))
    res = bench.trial(template, "claim", "open", k, tmp_path, env)
    assert res["fired"] and "tips.log" in res["fired"][0], res
    assert not res["problems"], res
    assert res["exit"] == 0 and res["claim"] == "succeeded", res
    assert "could not remember it" in res["stderr_tail"], res["stderr_tail"]
