"""Discovery (``env list --available``) and freezing (``env add``) of NeMo Gym environments, from
the files NeMo Gym 0.4.0 ships (monte/envs/nemo/stack.py, freeze.py)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from monte.envs.nemo.stack import Stack
from tests.envs.nemo.gymhelp import add_server, rows_of, site_packages


def test_available_lists_nemo_gym_beside_the_catalog(repo: Path, monte, gym: Stack) -> None:
    rows = monte("env", "list", "--available", "--json").json()
    by = {(r["provider"], r["benchmark"]): r for r in rows}
    assert ("monte", "parity") in by  # the built-in catalog stays
    for name in ("mcqa", "reasoning_gym", "math_with_judge"):
        r = by[("nemo-gym", name)]
        assert r["kind"] == "server" and r["trainable"] is True and r["judge"] == []
    assert by[("nemo-gym", "reasoning_gym")]["offline"] == "generator"
    assert by[("nemo-gym", "mcqa")]["offline"] == "data/example.jsonl"  # an exam offline; a curriculum needs HF
    aime = by[("nemo-gym", "aime24")]
    assert aime["kind"] == "benchmark" and aime["trainable"] is False
    # a server whose verify calls a judge model says which
    judged = [r for r in rows if r["provider"] == "nemo-gym" and r["judge"]]
    assert judged and all(j.startswith("judge_model_server=") or "model_server=" in j
                          for r in judged for j in r["judge"])
    assert by[("nemo-gym", "equivalence_llm_judge")]["judge"] == ["judge_model_server=policy_model"]
    servers = [r for r in rows if r["provider"] == "nemo-gym" and r["kind"] == "server"]
    assert len(servers) >= 90  # every resources server 0.4.0 ships with a config (95 folders)


def test_available_without_nemo_gym_is_the_catalog(repo: Path, monte, monkeypatch: pytest.MonkeyPatch) -> None:
    for k in ("MONTE_LOCAL", "MONTE_NEMO_GYM_PYTHON"):
        monkeypatch.delenv(k, raising=False)
    rows = monte("env", "list", "--available", "--json").json()
    assert rows and {r["provider"] for r in rows} == {"monte"}


def test_bare_list_never_reads_nemo_gym(repo: Path, monte, gym: Stack, frozen,
                                       monkeypatch: pytest.MonkeyPatch) -> None:
    import monte.envs.nemo.stack as stack

    def boom() -> None:
        raise AssertionError("bare `env list` looked for NeMo Gym")

    frozen("--benchmark", "mcqa")
    monkeypatch.setattr(stack, "find", boom)
    monkeypatch.setattr(stack, "entries", boom)
    r = monte("env", "list", "--json")
    assert r.code == 0 and [e["name"] for e in r.json()] == ["mcqa"]


def test_bare_list_with_nemo_gym_set_imports_nothing_heavy(repo: Path, gym: Stack) -> None:
    code = ("import sys\nfrom monte.cli.main import main\n"
            "try:\n    main(['env', 'list'])\nexcept SystemExit as e:\n    assert not e.code\n"
            "print('MODS=' + ','.join(m for m in ('torch', 'transformers', 'monte.envs.nemo.stack', 'monte.envs.nemo.server')"
            " if m in sys.modules), file=sys.stderr)\n")
    r = subprocess.run([sys.executable, "-c", code], cwd=repo, capture_output=True, text=True)
    assert r.returncode == 0 and "MODS=\n" in r.stderr, r.stderr


def test_server_freezes_its_rows_in_nemo_gym_shape(repo: Path, frozen) -> None:
    env = frozen("--server", "reasoning_gym", "--dev", "reasoning_gym", "--test", "reasoning_gym",
                 "--as", "rg")["environment"]
    assert env["kind"] == "trainable" and env["exams"] == {"reasoning_gym": ["dev", "test"]}
    folder = Path(env["folder"])
    m = json.loads((folder / "manifest.json").read_text())
    keys = {}
    for rel in ("exams/reasoning_gym/test.jsonl", "exams/reasoning_gym/dev.jsonl", "curriculum.jsonl"):
        rows = [json.loads(line) for line in (folder / rel).read_text().splitlines()]
        assert all(set(row) == {"responses_create_params", "question", "answer", "metadata", "agent_ref"} for row in rows)
        keys[rel] = {row["responses_create_params"]["input"][0]["content"] for row in rows}
    assert [len(k) for k in keys.values()] == [200, 200, 5000]
    test, dev, cur = keys.values()
    assert not (test & dev) and not (test & cur) and not (dev & cur)  # disjoint by content
    g = m["grader"]
    assert g["kind"] == "nemo-gym" and g["version"] == "0.4.0"
    ident = g["servers"]["reasoning_gym"]
    assert ident["server"] == "reasoning_gym" and ident["instance"] == "reasoning_gym"
    assert ident["config"] == "resources_servers/reasoning_gym/configs/reasoning_gym.yaml"
    assert len(ident["config_sha256"]) == 64 and len(ident["code_sha256"]) == 64
    assert g["curriculum"] == ident
    gen = m["provenance"]["rows_from"]["reasoning_gym"]
    assert gen["source"] == "generator"
    assert (gen["test"]["seed"], gen["dev"]["seed"], gen["curriculum"]["seed"]) == (3_000_000, 2_000_000, 1_000_000)
    assert gen["test"]["tasks"] == "knights_knaves,basic_arithmetic,syllogism"


def test_a_server_freeze_is_reproducible_and_its_grader_is_in_the_fingerprint(repo: Path, monte, frozen) -> None:
    # ``a`` was frozen for real earlier (in another copy of the repository, where a test of this
    # worker asked for it first), or just now: ``b`` is a second freeze of the same benchmark
    a = frozen("--benchmark", "reasoning_gym", "--as", "rg")["environment"]
    b = monte("env", "add", "--benchmark", "reasoning_gym", "--as", "b", "--json").json()["environment"]
    fa, fb = Path(a["folder"]), Path(b["folder"])
    assert (fa / "exams/reasoning_gym/dev.jsonl").read_bytes() == (fb / "exams/reasoning_gym/dev.jsonl").read_bytes()
    # the same rows graded by another server version would be another environment
    from monte.manifest import read_manifest

    m = read_manifest(fa)
    assert m is not None and m.grader is not None
    other = m.model_copy(update={"grader": {**m.grader, "servers": {"reasoning_gym": {
        **m.grader["servers"]["reasoning_gym"], "version": "0.5.0"}}}})
    assert other.fingerprint != m.fingerprint


def test_a_server_without_an_offline_curriculum_needs_hf_token(repo: Path, monte, gym: Stack, unchanged) -> None:
    r = monte("env", "add", "--server", "mcqa", "--dev", "mcqa", "--test", "mcqa", "--json")
    assert r.code == 7
    err = r.json()["error"]
    assert err["code"] == "E_STORAGE" and "HF_TOKEN" in err["fix"]
    assert "nvidia/Nemotron-RL-knowledge-mcqa" in err["message"]


def test_an_exam_offline_is_the_servers_example_rows(repo: Path, gym: Stack, frozen) -> None:
    folder = Path(frozen("--benchmark", "mcqa")["environment"]["folder"])
    assert folder.is_relative_to(repo)
    rows = [json.loads(line) for line in (folder / "exams/mcqa/dev.jsonl").read_text().splitlines()]
    shipped = rows_of(gym.root, "mcqa")
    key = lambda row: row["uuid"]  # noqa: E731
    assert sorted(rows, key=key) == sorted(shipped, key=key)  # verbatim, every field, nothing added
    prov = json.loads((folder / "manifest.json").read_text())["provenance"]["rows_from"]["mcqa"]
    assert prov["source"] == "example" and prov["all"]["file"] == "resources_servers/mcqa/data/example.jsonl"


def test_math_with_judge_freezes_nemo_gyms_shipped_set_offline(repo: Path, monte, gym: Stack) -> None:
    r = monte("env", "add", "--server", "math_with_judge", "--dev", "math_with_judge", "--test", "math_with_judge",
              "--as", "math", "--json")
    assert r.code == 0, r.out
    plan = r.json()["plan"]
    assert plan["sources"] == {"math_with_judge": "pool"}
    m = json.loads((Path(r.json()["environment"]["folder"]) / "manifest.json").read_text())
    assert m["provenance"]["sizes"] == {"math_with_judge/test": 64, "math_with_judge/dev": 64, "curriculum": 128}
    assert m["provenance"]["rows_from"]["math_with_judge"]["all"]["file"] == \
        "resources_servers/ns_tools/data/compmath_test.jsonl"


def test_a_benchmark_runs_its_own_prepare_once(repo: Path, monte, gym: Stack) -> None:
    """answer-judge's prepare writes rows it ships; its prompt_config is applied by NeMo Gym's code."""
    r = monte("env", "add", "--benchmark", "answer-judge", "--json")
    assert r.code == 0, r.out
    folder = Path(r.json()["environment"]["folder"])
    rows = [json.loads(line) for line in (folder / "exams/answer-judge/dev.jsonl").read_text().splitlines()]
    assert rows and all("expected_judgement" in row for row in rows)
    asked = rows[0]["responses_create_params"]["input"][-1]["content"]
    assert "Judgement" in asked and rows[0]["problem"][:40] in asked
    m = json.loads((folder / "manifest.json").read_text())
    ident = m["grader"]["servers"]["answer-judge"]
    assert ident["kind"] == "benchmark" and ident["server"] == "math_proof_judgement"
    assert ident["instance"] == "answer_judge_math_proof_judgement_resources_server"
    prep = m["provenance"]["rows_from"]["answer-judge"]["all"]
    assert prep["prompt_config"] == "benchmarks/prompts/judge/math.yaml"


def test_a_row_without_responses_create_params_refuses(repo: Path, monte, checkout: Stack, unchanged) -> None:
    add_server(checkout.root, "bad_rows", "", rows=[{"question": "no chat here", "expected": "1"}])
    r = monte("env", "add", "--benchmark", "server:bad_rows", "--json")
    assert r.code == 6, r.out
    err = r.json()["error"]
    assert err["code"] == "E_BAD_INPUT" and "responses_create_params" in err["message"] and "line 1" in err["message"]


def test_names_of_two_providers_refuse(repo: Path, monte, gym: Stack, unchanged) -> None:
    r = monte("env", "add", "--dev", "parity", "--test", "mcqa", "--as", "mixed", "--json")
    assert r.code == 2 and "one provider" in r.json()["error"]["message"]


def test_the_catalog_still_freezes_without_nemo_gym(repo: Path, monte, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MONTE_LOCAL", str(repo / "no-such-checkout"))
    r = monte("env", "add", "--benchmark", "word_sorting", "--json")
    assert r.code == 0, r.out
    r = monte("env", "add", "--benchmark", "nope", "--json")
    assert r.code == 4 and r.json()["error"]["code"] == "E_NOT_FOUND"


# --- with a Hugging Face token: the datasets the server's config names ------------------------------
# No hub is reachable here; the one boundary monte has with it is `monte.storage.hub.HfApi`, faked
# as in tests/datasets. The rows it serves are NeMo Gym's own (mcqa's example rows).


def test_with_a_token_the_configs_datasets_are_frozen(repo: Path, monte, gym: Stack, tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    import monte.storage.hub as hub

    shipped = (gym.root / "resources_servers/mcqa/data/example.jsonl").read_bytes()
    more = b"".join(
        json.dumps({**json.loads(line), "responses_create_params": {"input": [{"role": "user", "content": f"Q{i}"}]},
                    "uuid": f"u{i}"}).encode() + b"\n"
        for i, line in enumerate(shipped.splitlines() * 4))
    calls: list[tuple[str, ...]] = []

    class FakeHfApi:
        def dataset_info(self, repo_id: str, revision: str | None = None):
            calls.append(("dataset_info", repo_id))
            return SimpleNamespace(sha="ab" * 20, siblings=[SimpleNamespace(rfilename="train.jsonl")])

        def hf_hub_download(self, repo_id: str, filename: str, repo_type: str, revision: str) -> str:
            calls.append(("download", repo_id, filename, revision))
            out = tmp_path / "hf" / filename
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_bytes(more)
            return str(out)

    monkeypatch.setattr(hub, "HfApi", FakeHfApi)
    monkeypatch.setenv("HF_TOKEN", "hf_test_token")
    r = monte("env", "add", "--server", "mcqa", "--dev", "mcqa", "--test", "mcqa", "--json")
    assert r.code == 0, r.out
    assert r.json()["plan"]["sources"] == {"mcqa": "huggingface"}
    m = json.loads((Path(r.json()["environment"]["folder"]) / "manifest.json").read_text())
    src = m["provenance"]["rows_from"]["mcqa"]
    # its train and validation sets name the same repo: one set, cut into disjoint splits
    assert src["all"]["huggingface"] == "nvidia/Nemotron-RL-knowledge-mcqa" and src["all"]["revision"] == "ab" * 20
    assert m["provenance"]["sizes"] == {"mcqa/test": 5, "mcqa/dev": 5, "curriculum": 10}
    assert ("download", "nvidia/Nemotron-RL-knowledge-mcqa", "train.jsonl", "ab" * 20) in calls
    assert "hf_test_token" not in json.dumps(m)


def test_the_stack_is_found_from_a_checkout(repo: Path, monte, checkout: Stack) -> None:
    r = monte("env", "list", "--available", "--json")
    assert any(x["benchmark"] == "mcqa" and x["provider"] == "nemo-gym" for x in r.json())
    shutil.rmtree(checkout.root / "resources_servers")
    assert {x["provider"] for x in monte("env", "list", "--available", "--json").json()} == {"monte"}


def test_a_benchmark_whose_prepare_fails_refuses_and_writes_nothing(repo: Path, monte, gym: Stack, unchanged) -> None:
    """aime24's prepare downloads from Hugging Face with `datasets` (not installed in the test venv,
    and the hub is unreachable here): NeMo Gym's own error, as a refusal."""
    r = monte("env", "add", "--benchmark", "aime24", "--json")
    assert r.code == 9, r.out
    err = r.json()["error"]
    assert err["code"] == "E_ENV" and "aime24" in err["message"] and "datasets" in err["message"]


def test_nemo_gym_installed_beside_monte_is_found_without_importing_it(repo: Path, gym_python: str,
                                                                        tmp_path: Path) -> None:
    """On Python >= 3.12, `pip install nemo-gym` next to monte: found by `find_spec`, never imported."""
    sp = site_packages(gym_python)
    beside = tmp_path / "site"
    beside.mkdir()
    for top in ("nemo_gym", "resources_servers", "benchmarks"):
        (beside / top).symlink_to(sp / top)
    env = {k: v for k, v in os.environ.items() if k not in ("MONTE_LOCAL", "MONTE_NEMO_GYM_PYTHON")}
    env["PYTHONPATH"] = str(beside)
    code = ("import sys, json\nfrom monte.cli.main import main\n"
            "try:\n    main(['env', 'list', '--available', '--json'])\nexcept SystemExit:\n    pass\n"
            "print('IMPORTED=' + str('nemo_gym' in sys.modules), file=sys.stderr)\n")
    r = subprocess.run([sys.executable, "-c", code], cwd=repo, capture_output=True, text=True, env=env)
    assert "IMPORTED=False" in r.stderr, r.stderr
    assert any(x["provider"] == "nemo-gym" and x["benchmark"] == "mcqa" for x in json.loads(r.stdout))
