"""`monte.api`'s face, as a Python caller meets it: one list of verbs (``__all__``), ``evaluate``,
plans that cannot be edited after they were checked, the ``--remote``/``--hosts`` rules, and
refusals (a ``MonteError`` with its ``E_*`` code), never a raw ``OSError``, for what the disk or
the network did."""

from __future__ import annotations

import inspect
import socket
import subprocess
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from monte import api
from monte.errors import MonteError

#: a well-formed ed25519 public key (no one holds its private half)
PUBKEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl"


def _state(repo: Path) -> tuple[str, str]:
    """What a refusal must leave as it was: the refs and the work tree (untracked files too)."""
    refs = subprocess.run(["git", "-C", str(repo), "for-each-ref"], capture_output=True, text=True, check=True)
    tree = subprocess.run(["git", "-C", str(repo), "status", "--porcelain", "--untracked-files=all", "--ignored"],
                          capture_output=True, text=True, check=True)
    return refs.stdout, tree.stdout


# --- one face ------------------------------------------------------------------------------------


def test_all_names_every_public_verb_and_nothing_else() -> None:
    public = {n for n, v in vars(api).items() if not n.startswith("_") and inspect.isfunction(v)
              and v.__module__.startswith("monte.api")}
    assert set(api.__all__) == public
    assert len(api.__all__) == len(set(api.__all__))


def test_every_verb_refuses_rather_than_raising_raw_errors() -> None:
    """Each verb of ``__all__`` is wrapped by ``refusing`` (its signature and docstring kept)."""
    for name in api.__all__:
        verb = getattr(api, name)
        assert hasattr(verb, "__wrapped__"), name
        assert verb.__doc__ and verb.__doc__ == verb.__wrapped__.__doc__, name
        assert inspect.signature(verb) == inspect.signature(verb.__wrapped__), name


def test_evaluate_is_the_verb_and_eval_underscore_is_gone() -> None:
    assert api.evaluate.__wrapped__.__name__ == "evaluate"  # type: ignore[attr-defined]
    assert not hasattr(api, "eval_")  # the old name went once nothing called it


# --- plans are values ----------------------------------------------------------------------------


def test_plans_cannot_be_edited_only_copied() -> None:
    from monte.evals.plan import EvalPlan, ExamPlan
    from monte.training.plan import TrainPlan

    exam = ExamPlan(exam="parity", benchmark="parity", split="dev", path="p", sha256="0" * 64, n=3)
    for plan, field, value in ((EvalPlan.model_construct(adopt={}), "adopt", {"parity": "r1"}),
                               (TrainPlan.model_construct(adopt=None), "adopt", "r1"),
                               (TrainPlan.model_construct(launch=None), "launch", None),
                               (exam, "role", "claim")):
        with pytest.raises(ValidationError, match="frozen"):
            setattr(plan, field, value)
        copy = plan.model_copy(update={field: value})
        assert getattr(copy, field) == value and copy is not plan
    assert exam.role is None


# --- the --remote and --hosts rules, below the CLI -------------------------------------------------


@pytest.mark.parametrize(("kw", "said"), [
    ({"remote": False, "host": "box"}, "--provider and --host choose where --remote runs"),
    ({"remote": False, "provider": "ssh"}, "--provider and --host choose where --remote runs"),
    ({"remote": True, "push": True}, "--remote already runs the box job with --push"),
    ({"remote": True, "dry_run": True}, "--remote submits real compute, so it has no dry run"),
])
def test_check_remote_refuses_options_that_do_not_go_together(kw: dict[str, object], said: str) -> None:
    with pytest.raises(MonteError) as e:
        api.check_remote(**kw)  # type: ignore[arg-type]
    assert e.value.code == "E_USAGE" and said in e.value.message and e.value.fix


def test_check_remote_runs_the_gate_on_a_dirty_tree(repo: Path) -> None:
    (repo / "notes.txt").write_text("uncommitted\n")
    with pytest.raises(MonteError) as e:
        api.check_remote(remote=True)
    assert e.value.code == "E_REFUSED" and "not clean" in e.value.message


def test_plan_train_refuses_remote_with_hosts_or_a_recipe_path(repo: Path) -> None:
    before = _state(repo)
    with pytest.raises(MonteError) as e:
        api.plan_train(recipe="sft-tiny", source="parity", from_base=True, remote=True, hosts="a,b")
    assert e.value.code == "E_USAGE" and "--hosts" in e.value.message
    for recipe in ("./mine.yaml", "recipes/mine.yml"):
        with pytest.raises(MonteError) as e:
            api.plan_train(recipe=recipe, source="parity", from_base=True, remote=True)
        assert e.value.code == "E_USAGE" and "path-spelled" in e.value.message and "recipes/" in e.value.fix
    assert _state(repo) == before


def test_a_test_read_is_not_planned_for_a_box_while_a_grader_holds_the_seal(repo: Path) -> None:
    api.config_set(setting="grader", url="ssh://grader@127.0.0.1:9", key=PUBKEY)
    before = _state(repo)
    with pytest.raises(MonteError) as e:
        api.plan_eval(split="test", remote=True)
    assert e.value.code == "E_REFUSED" and "grader" in e.value.message
    api.check_eval_remote(remote=True, split="test", smoke=True)  # a smoke reads nothing: allowed
    api.check_eval_remote(remote=True, split="dev", smoke=False)
    assert _state(repo) == before


# --- the disk and the network: refusals, not OSErrors ---------------------------------------------


def test_a_folder_where_a_recipe_goes_is_a_refusal_that_leaves_no_trace(repo: Path) -> None:
    (repo / "recipes" / "mine.yaml").mkdir(parents=True)
    before = _state(repo)
    with pytest.raises(MonteError) as e:
        api.recipe_add(name="mine", text="algorithm: sft\n")
    assert e.value.code == "E_STORAGE" and "it is a folder where monte keeps a file" in e.value.message
    assert isinstance(e.value.__cause__, IsADirectoryError)
    assert _state(repo) == before  # no half-written file left beside it


def test_an_unreachable_host_is_a_refusal(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from monte.remote import lambda_api

    with socket.socket() as s:  # a port nothing listens on: connecting is refused at once
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    monkeypatch.setenv("MONTE_LAMBDA_API", f"http://127.0.0.1:{port}")
    monkeypatch.setenv("MONTE_LAMBDA_KEY", "secret_for_a_test")
    monkeypatch.setattr(lambda_api, "RETRY_BUDGET_S", 0.0)  # one try: the refusal, not the backoff
    with pytest.raises(MonteError) as e:
        api.box_status()
    assert e.value.code == "E_BOX" and "refused" in e.value.message.lower()


def test_the_refusal_for_each_kind_of_failure() -> None:
    """:func:`refusal_for`, which the api's verbs and the CLI's handler share."""
    import errno

    from monte.api.refusals import refusal_for

    full = refusal_for(OSError(errno.ENOSPC, "No space left on device", "/data/x"))
    assert full is not None and full.code == "E_STORAGE" and "/data/x" in full.message
    reset = refusal_for(ConnectionResetError(errno.ECONNRESET, "reset"))
    assert reset is not None and reset.code == "E_STORAGE" and "network" in reset.message
    gone = refusal_for(ModuleNotFoundError("No module named 'torch'", name="torch"))
    assert gone is not None and "pip install" in gone.fix
    assert refusal_for(KeyError("a bug")) is None  # a bug stays a bug
    assert refusal_for(OSError(errno.EBADF, "Bad file descriptor")) is None


# --- one result idiom ------------------------------------------------------------------------------


def test_results_are_frozen_dataclasses_whose_json_is_the_dict_they_were(capsys: pytest.CaptureFixture[str]) -> None:
    """A result reads by field, cannot be edited, and ``--json`` prints it as the dict it was."""
    import dataclasses
    import json

    from monte.api.shapes import (
        BoxDown,
        BoxInstance,
        BoxStatus,
        ClaimExported,
        ConfigSet,
        DatasetAdded,
        DatasetShown,
        ExperimentListed,
        HooksInstalled,
        LedgerVerified,
        ModelMade,
        Nominated,
        PlotWritten,
        Promoted,
        Pushed,
        Recovered,
        ReportWritten,
        StopResult,
        Submitted,
        Synced,
        SyncedExperiment,
        Terminated,
    )
    from monte.cli.output import print_json

    row: dict[str, Any] = {"id": "i-1", "name": "monte-a", "owner": "monte", "status": "active", "type": "gpu_1x_h100_pcie",
           "region": "us-east-1", "ip": "10.0.0.1", "age_hours": 1.5, "over_ttl": False, "cold": True,
           "keep_alive": False, "launched_at": "2026-12-05T04:00:00+00:00"}
    as_dict = {"instances": [row], "stale_identity_files": ["/x/boxes/i-0.json"]}
    status = BoxStatus(instances=(BoxInstance(**row),), stale_identity_files=["/x/boxes/i-0.json"])
    assert status.instances[0].age_hours == 1.5 and status.to_dict() == as_dict
    with pytest.raises(dataclasses.FrozenInstanceError):
        status.instances[0].status = "terminated"  # type: ignore[misc]
    down = BoxDown(terminated=Terminated(id="i-1", name="monte-a", type=None, region=None),
                   already_terminating=False, identity_file_removed=None)
    sub = Submitted(experiment="exp", runs=["r1"], box="b", session="s", commit="c" * 40, workdir="/w",
                    timings={"gate": 0.1})
    pushed = Pushed(experiment="exp", bucket="/b", run=None, packs=1, pack_bytes=10, refs=2, files=3,
                    file_bytes=5, uploaded_bytes=15, merged=["ledger"])
    synced = Synced(bucket="/b", experiments=(SyncedExperiment(experiment="exp", packs=1, ledger="merged",
                                                               refs=2, files=0, skipped_weights=0,
                                                               conflicts=["base/c1"]),))
    assert synced.to_dict()["experiments"][0]["conflicts"] == ["base/c1"] and pushed.merged == ["ledger"]
    verified = LedgerVerified(ok=True, experiments=["exp"], records=3, warnings=[], adopted={"ledger": "origin"},
                              unchecked={})
    plotted = PlotWritten(path="/p.png", format="png", experiment="exp", exams=["arith"], paths=1, points=2,
                          lineage=["a"], cycles={"ok": 1}, test_reads=0, claims=[], note=None)
    page = ReportWritten(path="/r.html", bytes=10, experiment="exp", runs=3, checkpoints=2, cycles={"ok": 1}, evals=3,
                         claims=["c"])
    others = (plotted, page, Nominated(experiment="exp", checkpoint="a@50", cohort="c1", at="2026-12-05T05:00:00Z"),
              StopResult(run="r1", status="abandoned", signalled=True),
              ClaimExported(out="/c", statement_sha256="0" * 64, signer="a ssh-ed25519 AAAA", files={"s.json": 9},
                            card=None),
              ModelMade(path="/m", size="tiny", seed=0, parameters=10, architecture="LlamaForCausalLM",
                        shape={"hidden": 8, "layers": 1}, vocab_size=259, eos_token="<eos>", pad_token="<pad>",
                        files={"model.safetensors": "0" * 64}, bytes=100),
              ConfigSet(setting="vault", url="/v", file="/r/.monte.yaml", dvc_config=None, note=""),
              Promoted(checkpoint="a@50", experiment="exp", dest="/d", files=3, bytes=9, disk=4096,
                       sha256={"model.safetensors": "0" * 64}, hub={"repo": "me/m", "revision": "r"}))
    local = Promoted(checkpoint="a@50", experiment="exp", dest="/d", files=3, bytes=9, disk=4096, sha256={}, hub=None)
    assert ExperimentListed(name="e", environment="par", exams=["parity"], model=None,
                            created_at="t").to_dict()["exams"] == ["parity"]
    assert "hub" not in local.to_dict() and local.hub is None
    shown = DatasetShown(name="d", kind="sft", rows=2, columns={"input": "prompt"}, sha256="0" * 64,
                         provenance={"from_file": "/r.jsonl"}, folder="/f", verified=True)
    planned = DatasetAdded(dry_run=True, plan={"name": "d"}, dataset=None, note="", dvc_pointer=None)
    assert "dataset" not in planned.to_dict()  # a dry run's document has no dataset key, as before
    added = DatasetAdded(dry_run=False, plan={"name": "d"}, dataset=shown, note="", dvc_pointer="/p.dvc")
    assert added.to_dict()["dataset"]["columns"] == {"input": "prompt"} and added.dataset is shown  # a local export's JSON has no hub key, as before
    for result in (status, down, sub, pushed, synced, verified, HooksInstalled(installed=["/r/.git/hooks/pre-push"]),
                   *others,
                   [Recovered(run="r1", status="succeeded", score=0.5, n=4)]):
        for tty in (False, True):  # orjson off a terminal, json's encoder on one
            plain = result.to_dict() if not isinstance(result, list) else [r.to_dict() for r in result]
            capsys.readouterr()
            with pytest.MonkeyPatch.context() as m:
                m.setattr("sys.stdout.isatty", lambda tty=tty: tty)
                print_json(result)
                typed = capsys.readouterr().out
                print_json(plain)
                assert typed == capsys.readouterr().out
            assert json.loads(typed) == plain


def test_a_recipe_added_is_a_result_read_by_field(repo: Path) -> None:
    import hashlib

    from monte.api.shapes import RecipeAdded

    added = api.recipe_add(name="mine", text="algorithm: sft\n")
    assert isinstance(added, RecipeAdded) and added.name == "mine" and added.algorithm == "sft"
    assert Path(added.path).read_bytes() == b"algorithm: sft\n"
    assert added.sha256 == hashlib.sha256(b"algorithm: sft\n").hexdigest()
    assert added.to_dict() == {"name": "mine", "path": added.path, "sha256": added.sha256, "algorithm": "sft"}


#: what `monte env add|list|install --json`, `env list --vault` and `grader take --json` printed
#: when these were pydantic models and dicts (copied from their output on one repository)
BEFORE = {
    "env add --dry-run": '{"dry_run":true,"dvc_pointer":null,"environment":null,"floors":{},"note":"","plan":'
                         '{"curriculum":"parity","form":"server","name":"parity"}}',
    "env install": '[{"action":"fetched","changed":"","files":3,"folder":"/d/environments/parity","name":"parity",'
                   '"note":"declares no Gym benchmarks","registered":[],"set_aside":null}]',
    "env list": '[{"benchmarks":["parity"],"exams":{"parity":["dev","test"]},"files":3,"kind":"trainable",'
                '"name":"parity"}]',
    "env list --vault": '[{"claimed_at":"2026-12-05T08:17:25Z","claimed_by":"vm","complete":true,"fingerprint":"b0a1",'
                        '"kind":"environment","lost":0,"name":"parity"}]',
    "env list --available": '[{"benchmark":"parity","description":"Parity.","judge":[],"kind":"catalog",'
                            '"offline":null,"provider":"monte","sizes":{"dev":200},"trainable":true}]',
    "grader take": '{"environment":"parity","grader":"g@h","removed":["/d/t.jsonl"],"taken":[{"content":"c1",'
                   '"exam":"parity","n":200},{"already":true,"content":"c2","exam":"other"}]}',
}


def test_environment_and_grader_results_print_the_json_they_did(capsys: pytest.CaptureFixture[str]) -> None:
    """The environments' verbs, the Vault's listing and `grader take` return Result dataclasses
    now; `--json` prints the same bytes as the models and dicts they were (off a terminal)."""
    from monte.api.shapes import GraderTaken, TakenSplit
    from monte.cli.output import print_json
    from monte.envs.listing import EnvListed
    from monte.envs.manage import CatalogEntry, EnvAddResult, EnvInstallResult
    from monte.storage.vault_remote import VaultEntry

    now = {
        "env add --dry-run": EnvAddResult(dry_run=True, plan={"curriculum": "parity", "form": "server",
                                                              "name": "parity"}),
        "env install": [EnvInstallResult(name="parity", action="fetched", files=3, folder="/d/environments/parity",
                                         note="declares no Gym benchmarks")],
        "env list": [EnvListed(name="parity", kind="trainable", exams={"parity": ["dev", "test"]},
                               benchmarks=["parity"], files=3)],
        "env list --vault": [VaultEntry(name="parity", kind="environment", fingerprint="b0a1", claimed_by="vm",
                                        claimed_at="2026-12-05T08:17:25Z", complete=True)],
        "env list --available": [CatalogEntry(benchmark="parity", provider="monte", trainable=True,
                                              sizes={"dev": 200}, description="Parity.")],
        "grader take": GraderTaken(environment="parity", grader="g@h",
                                   taken=(TakenSplit(exam="parity", content="c1", n=200),
                                          TakenSplit(exam="other", content="c2", already=True)),
                                   removed=["/d/t.jsonl"]),
    }
    for command, result in now.items():
        capsys.readouterr()
        with pytest.MonkeyPatch.context() as m:
            m.setattr("sys.stdout.isatty", lambda: False)
            print_json(result)
        assert capsys.readouterr().out == BEFORE[command] + "\n", command
    with pytest.raises(AttributeError):  # frozen: what happened is read, not edited
        now["env install"][0].action = "verified"  # type: ignore[index]


def test_a_result_prints_the_frozen_settings_it_holds(capsys: pytest.CaptureFixture[str]) -> None:
    """An eval's result holds its plan's settings, frozen as read-only mappings: ``--json`` prints
    them (a deep copy, as ``dataclasses.asdict`` makes, refuses a mappingproxy)."""
    import json
    from types import MappingProxyType

    from monte.cli.output import print_json
    from monte.evals import EvalResult

    settings = MappingProxyType({"max_new_tokens": 8, "stop": MappingProxyType({"eos": True})})
    result = EvalResult(experiment="exp", runs=[{"run": "r1", "score": 0.5}], settings=dict(settings))
    print_json(result)
    assert json.loads(capsys.readouterr().out)["settings"] == {"max_new_tokens": 8, "stop": {"eos": True}}


#: what a verb may return besides a Result: the plans (frozen pydantic: they are recorded), the
#: two documents whose keys grow with the record, and plain values
NOT_RESULTS = {"EvalPlan", "TrainPlan", "StatusDoc", "RowDoc", "str", "bytes", "Path", "None", "bool"}


def test_every_verb_returns_a_result_named_in_shapes_or_a_named_document() -> None:
    """One result idiom: each verb of ``__all__`` returns a frozen Result dataclass that
    ``monte.api.shapes`` names (the type's one home may be lower), a plan, or a named document;
    no bare dict and no pydantic model that nothing persists. docs/api.md names each type."""
    import dataclasses
    import re

    from monte.api import shapes
    from monte.result_type import Result

    page = (Path(__file__).resolve().parents[1] / "docs" / "api.md").read_text()
    for name in api.__all__:
        returns = str(inspect.signature(getattr(api, name)).return_annotation)
        assert "dict[" not in returns and "Any" not in returns, (name, returns)
        for type_name in set(re.findall(r"[A-Za-z_]\w*", returns)) - NOT_RESULTS - {"list"}:
            cls = getattr(shapes, type_name)
            assert issubclass(cls, Result) and dataclasses.is_dataclass(cls), (name, type_name)
            assert getattr(cls, "__dataclass_params__").frozen, (name, type_name)  # noqa: B009 - no stub names it
            assert f"`{type_name}`" in page, f"docs/api.md does not name {type_name} ({name})"
