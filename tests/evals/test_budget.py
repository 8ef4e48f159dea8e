"""Issue 42, case 3: the test budget is per exam content and base weights, whatever the settings.

On the code before this file, `monte experiment init tq --eval parity --model base --temperature
1e-9` gave a second test@0 and a second final claim on the same base weights and items (every
answer byte-identical to the greedy reads), and each further tiny temperature another. Now a
temperature in (0, 0.05) is refused at `experiment init`, and a real new setting (temperature
0.7, another max_new_tokens) is another cohort for pairing, never a fresh budget: the CLI refuses
its test read, and `monte ledger verify` names one written past the CLI. Ledgers written before
keep their counts: two cohorts that differ in settings, each read twice under the older rule,
still verify.

The repository is `monte quickstart`'s shape: the parity environment, experiment ``exp`` on the
tiny base model.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.support.helpers import checkpoint, snapshot_state
from tests.support.plain_git import plain_git_experiment


def _eval(monte, *args: str):
    return monte("eval", "--yes", "--json", *args)


def _error(r: Any) -> dict[str, str]:
    doc: dict[str, str] = json.loads(r.out)["error"]
    return doc


@pytest.mark.parametrize("t", ["1e-9", "2e-9", "0.049"])
def test_a_near_greedy_temperature_is_refused_at_init(repo: Path, monte, exp: str, base_model: Path,
                                                     t: str) -> None:
    before = snapshot_state(repo)
    r = monte("experiment", "init", "tq", "--eval", "parity", "--model", str(base_model), "--temperature", t, "--json")
    assert r.code == 2, r.out
    err = _error(r)
    assert err["code"] == "E_USAGE" and "near-greedy" in err["message"], err
    assert "--temperature 0" in err["fix"] and "0.05" in err["fix"]
    assert snapshot_state(repo) == before
    # the edges are temperatures: greedy, and the first one that samples
    assert monte("experiment", "init", "t0", "--eval", "parity", "--temperature", "0").code == 0
    assert monte("experiment", "init", "t5", "--eval", "parity", "--temperature", "0.05").code == 0


def _claim(repo: Path, monte, tiny_models: dict[int, Path], experiment: str) -> None:
    assert _eval(monte, "-e", experiment).code == 0
    assert _eval(monte, "-e", experiment, "--split", "test").code == 0
    a = checkpoint(repo, tiny_models[1], experiment=experiment)
    assert _eval(monte, "-e", experiment, "--checkpoint", f"{a}@50").code == 0
    r = _eval(monte, "-e", experiment, "--split", "test")
    assert r.code == 0 and r.json()["runs"][0]["role"] == "claim", r.out


def test_another_setting_on_the_same_base_and_content_is_no_fresh_budget(repo: Path, monte, exp: str,
                                                                        base_model: Path, tiny_models) -> None:
    assert _eval(monte, "--split", "test").code == 0  # test@0 of the base, greedy
    assert monte("experiment", "init", "warm", "--eval", "parity", "--model", str(base_model),
                 "--temperature", "0.7").code == 0
    assert monte("eval", "-e", "warm", "--dry-run", "--json").code == 0  # its dev evals pair among themselves
    before = snapshot_state(repo)
    r = _eval(monte, "-e", "warm", "--split", "test")
    assert r.code == 3, r.out
    err = _error(r)
    assert err["code"] == "E_SEALED" and "exp/" in err["message"], err
    assert "whatever the eval settings" in err["message"], err
    assert snapshot_state(repo) == before
    # ... and a dry run says so before anything is spent
    r = monte("eval", "-e", "warm", "--split", "test", "--dry-run", "--json")
    assert r.code == 3 and _error(r)["code"] == "E_SEALED", r.out


def test_verify_names_a_read_of_another_setting_written_past_the_cli(repo: Path, monte, claimed: str,
                                                                    base_model: Path, monkeypatch: Any) -> None:
    from monte.ledger import seal

    assert monte("ledger", "verify", "--all", "--json").code == 0
    assert monte("experiment", "init", "warm", "--eval", "parity", "--model", str(base_model),
                 "--temperature", "0.7").code == 0
    with monkeypatch.context() as mp:  # a monte that counts no other ledger at the read
        mp.setattr(seal.Seal, "touches", lambda self, key, own=None: [])
        r = _eval(monte, "-e", "warm", "--split", "test")
    assert r.code == 0, r.out
    r = monte("ledger", "verify", "--all", "--json")
    assert r.code == 5, r.out
    err = _error(r)
    assert err["code"] == "E_VERIFY" and "[seal]" in err["message"] and "whatever the eval settings" in err["message"]
    assert "exp/" in err["message"] and "warm/" in err["message"], err


def test_reads_counted_under_the_older_rule_still_verify(repo: Path, monte, exp: str, base_model: Path,
                                                        tiny_models, monkeypatch: Any) -> None:
    """Two cohorts of one base that differ in an output setting, each with test@0 and a final
    claim, written as the last round's monte wrote them (no ``seal`` field: counted per settings).
    The second cohort differs in ``max_new_tokens`` (the measurement written with plain git, as
    the CLI sets no such flag): a greedy setting, so its four reads are batched, where a sampled
    one (temperature 0.7) generates item by item, several times slower; both are settings the
    older rule counted apart."""
    from monte.evals import run
    from monte.ledger import seal

    matches = seal.Seal.matches
    with monkeypatch.context() as mp:
        mp.setattr(run, "SEAL_RULE", None)  # the row records no rule, as before
        mp.setattr(seal.Seal, "matches", lambda self, r, key: matches(self, r, key) and  # counted per settings
                   seal.settings_key(r.plan.get("settings") or {}) == key.settings)
        _claim(repo, monte, tiny_models, "exp")
        plain_git_experiment(repo, "warm", lambda m: m["eval"].update(max_new_tokens=m["eval"]["max_new_tokens"] + 1))
        settings = [monte("eval", "-e", e, "--dry-run", "--json").json()["plan"]["settings"] for e in ("exp", "warm")]
        assert seal.settings_key(settings[0]) != seal.settings_key(settings[1])  # two cohorts' settings
        _claim(repo, monte, tiny_models, "warm")
    assert monte("ledger", "verify", "--all", "--json").code == 0
    # the new rule applies to reads from now on: a third experiment on the same base and content
    assert monte("experiment", "init", "hot", "--eval", "parity", "--model", str(base_model),
                 "--temperature", "1.0").code == 0
    r = _eval(monte, "-e", "hot", "--split", "test", "--dry-run")
    assert r.code == 3 and _error(r)["code"] == "E_SEALED", r.out
