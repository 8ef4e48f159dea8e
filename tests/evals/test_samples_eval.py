"""Issue 33 end to end: `monte experiment init --samples K --temperature T` freezes K into the
measurement, every eval samples K seeded answers per item on the real tiny model, tasks.jsonl
holds every sample, the delta is judged on the items, status prints K, and a test read at K is
one read."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from monte.ledger.seal import settings_key
from tests.support.helpers import checkpoint, git, snapshot_state

K = 4


@pytest.mark.parametrize(("args", "needle"), [
    (["--samples", "0"], "--samples 0"),
    (["--samples", "4"], "copies of one answer"),
    (["--samples", "4", "--temperature", "0"], "--temperature T > 0"),
    (["--temperature", "-1"], "not a temperature"),
    (["--samples", "4", "--temperature", "0.7", "--top-p", "1.5"], "(0, 1]"),
    (["--top-p", "0.9"], "greedy"),
    (["--samples", "4", "--temperature", "0.7", "--pass-at", "8"], "1..K"),
    (["--samples", "4", "--temperature", "0.7", "--pass-at", "x"], "whole numbers"),
])
def test_refusals_write_nothing(repo: Path, monte, args: list[str], needle: str) -> None:
    assert monte("env", "add", "--benchmark", "parity").code == 0
    before = snapshot_state(repo)
    r = monte("experiment", "init", "e", "--eval", "parity", *args, "--json")
    err = r.json()["error"]
    assert r.code == 2 and err["code"] == "E_USAGE" and needle in err["message"] + err["fix"], r.out
    assert err["fix"]
    assert snapshot_state(repo) == before


def test_k_is_an_eval_setting_and_k1_keeps_its_bytes(repo: Path, monte) -> None:
    assert monte("env", "add", "--benchmark", "parity").code == 0
    assert monte("experiment", "init", "one", "--eval", "parity").code == 0
    r = monte("experiment", "init", "many", "--eval", "parity", "--samples", "8", "--temperature", "0.7",
              "--top-p", "0.95", "--pass-at", "1,8")
    assert r.code == 0, r.out
    assert "samples per item: K = 8 (temperature 0.7, top-p 0.95); pass@1, pass@8 reported" in r.out
    one = json.loads(git(repo, "show", "monte/one/ledger:measurement.json"))
    many = json.loads(git(repo, "show", "monte/many/ledger:measurement.json"))
    assert "samples" not in one["eval"] and "pass_at" not in one  # K = 1: the bytes of before K
    assert (many["eval"]["samples"], many["eval"]["temperature"], many["eval"]["top_p"]) == (8, 0.7, 0.95)
    assert many["pass_at"] == [1, 8]
    # K, the temperature and top-p are output settings: another cohort, another seal
    assert settings_key(one["eval"]) != settings_key(many["eval"])
    assert settings_key(many["eval"]) != settings_key({**many["eval"], "samples": 4})
    # K = 1 asked for by name is the K = 1 of before: the same bytes, so the same cohort and seal
    assert monte("experiment", "init", "k1", "--eval", "parity", "--samples", "1").code == 0
    k1 = json.loads(git(repo, "show", "monte/k1/ledger:measurement.json"))
    assert k1["eval"] == one["eval"] and settings_key(k1["eval"]) == settings_key(one["eval"])


def test_sampling_is_seeded_per_item(base_model: Path) -> None:
    from monte.models import generate as gen

    model, tok = gen.load(base_model)
    prompts = ["1 0 1 1 ->", "0 0 1 ->", "1 1 1 0 1 ->"]
    seeds = [gen.sample_seed(p) for p in prompts]
    first = gen.sample(model, tok, prompts, seeds, k=K, max_new_tokens=6, temperature=1.0)
    # the same item draws the same samples whatever comes before it (no batch, no order effect)
    again = gen.sample(model, tok, prompts[::-1], seeds[::-1], k=K, max_new_tokens=6, temperature=1.0)
    assert again[::-1] == first
    assert all(len(s) == K for s in first)
    other = gen.sample(model, tok, prompts, [s + 1 for s in seeds], k=K, max_new_tokens=6, temperature=1.0)
    assert other != first  # the seed is what fixes them


def test_k_samples_end_to_end(repo: Path, monte, base_model: Path, tiny_models) -> None:
    assert monte("env", "add", "--server", "parity", "--dev", "parity", "--test", "parity").code == 0
    r = monte("experiment", "init", "k", "--eval", "parity", "--model", str(base_model), "--samples", str(K),
              "--temperature", "1.0", "--pass-at", "1,4")
    assert r.code == 0, r.out
    plan = monte("eval", "--dry-run")
    assert f"generations ({200} items x K = {K} samples, temperature 1)" in plan.out, plan.out
    r = monte("eval", "--yes", "--json")
    assert r.code == 0, r.out
    base = r.json()["runs"][0]
    tasks = [json.loads(x) for x in git(repo, "show", f"monte/k/ledger:runs/{base['run'][0]}/{base['run'][1]}/"
                                                   f"{base['run']}/tasks.jsonl").splitlines()]
    assert len(tasks) == 200 and base["n"] == 200
    for t in tasks:
        assert [s["sample"] for s in t["samples"]] == list(range(K))
        assert all(s["seed"] == t["seed"] for s in t["samples"]) and all("answer" in s for s in t["samples"])
        assert t["score"] == pytest.approx(sum(s["score"] for s in t["samples"]) / K)
    assert base["score"] == pytest.approx(sum(t["score"] for t in tasks) / 200)

    # a test read at K samples is one read: test@0, touch 1 of 2
    assert monte("eval", "--yes", "--split", "test", "--smoke").code == 0  # reveals nothing, spends nothing
    assert monte("eval", "--yes", "--split", "test").code == 0
    doc = monte("status", "--json").json()
    test_rows = [x for x in doc["rows"] if x["what"] == "parity/test"]
    assert [x["role"] for x in test_rows if not x["smoke"]] == ["baseline"]
    smoke = [x for x in test_rows if x["smoke"]]
    assert smoke and smoke[0]["score"] is None
    assert "test reads parity 1/2" in monte("status").out

    a = checkpoint(repo, tiny_models[1], algorithm="sft", source="parity-sft", experiment="k")
    r = monte("eval", "--yes", "--checkpoint", f"{a}@50", "--json")
    assert r.code == 0, r.out
    d = r.json()["runs"][0]["delta"]
    assert d["samples"] == K and d["paired"] and d["method"].startswith("item-exact-conditional")
    assert d["n"] == 200 and d["fixed"] is None
    assert 200 <= d["effective_n"] <= 200 * K and 1 <= d["design_effect"] <= K
    assert set(d["pass_at"]) == {"1", "4"} and d["pass_at"]["1"]["delta"] == pytest.approx(d["delta"])
    assert d["verdict"] in ("ok", "STRIKE") and (d["verdict"] == "ok") == (d["lower"] > 0)
    out = monte("status", "--wide").out  # whole lines (the default folds at 120 columns)
    line = next(x for x in out.splitlines() if x.startswith(f"delta parity/dev {a}@50"))
    assert f"K {K}, effective n " in line and "design effect " in line and "; pass@4 " in line
    assert f"a test read (n 200 items, K {K}) shows a gain of about" in out
    assert monte("ledger", "verify").code == 0
