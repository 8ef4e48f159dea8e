"""`monte dataset add / list / show`: proving rows, provenance, the source namespace."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from tests.support.helpers import git, snapshot_state


def _write(path: Path, lines: list[str]) -> Path:
    path.write_text("".join(line + "\n" for line in lines))
    return path


@pytest.fixture
def rows(tmp_path: Path) -> Path:
    return _write(tmp_path / "rows.jsonl", [json.dumps({"input": f"q{i}", "output": f"a{i}"}) for i in range(5)])


def test_add_from_file_freezes_rows_and_provenance(repo: Path, monte, rows: Path) -> None:
    r = monte("dataset", "add", "demos", "--from-file", str(rows), "--kind", "sft", "--json")
    assert r.code == 0, r.out
    d = r.json()["dataset"]
    assert d["rows"] == 5 and d["kind"] == "sft"
    assert d["columns"] == {"input": "input", "output": "output"}
    # a file outside the repository is recorded by its name: no machine-local path in the record
    assert d["provenance"]["source"] == "file" and d["provenance"]["file"] == rows.name
    assert str(rows.parent) not in json.dumps(d["provenance"])
    frozen = repo / ".monte/datasets/demos/rows.jsonl"
    assert frozen.read_bytes() == rows.read_bytes()
    assert json.loads(git(repo, "show", "monte/vault:datasets/demos/manifest.json"))["rows"] == 5
    # the frozen copy does not follow the source
    rows.write_text("changed\n")
    assert monte("dataset", "show", "demos", "--json").json()["verified"] is True


@pytest.mark.parametrize(
    ("lines", "lineno", "what"),
    [
        (['{"input": "a", "output": "b"}', "not json"], 2, "not valid JSON"),
        (['{"input": "a", "output": "b"}', "[1, 2]"], 2, "not an object"),
        (['"a string"'], 1, "not an object"),
        (['{"input": "a", "output": "b"}', "", '{"input": "c", "output": "d"}'], 2, "blank"),
        (['{"input": "a", "output": "b"}', "{\"input\": \"a\""], 2, "not valid JSON"),
    ],
)
def test_malformed_lines_refuse_naming_the_line(repo: Path, monte, tmp_path: Path, lines, lineno, what) -> None:
    src = _write(tmp_path / "bad.jsonl", lines)
    before = snapshot_state(repo)
    r = monte("dataset", "add", "bad", "--from-file", str(src), "--json")
    assert r.code == 6, r.out
    err = r.json()["error"]
    assert err["code"] == "E_BAD_INPUT"
    assert f"line {lineno}" in err["message"] and what in err["message"]
    assert snapshot_state(repo) == before


def test_sft_kind_screens_columns(repo: Path, monte, tmp_path: Path) -> None:
    src = _write(tmp_path / "r.jsonl", ['{"prompt": "a", "completion": "b"}'])
    r = monte("dataset", "add", "x", "--from-file", str(src), "--kind", "sft", "--json")
    assert r.code == 6 and "line 1" in r.json()["error"]["message"]
    assert "--input-key" in r.json()["error"]["fix"]
    r = monte("dataset", "add", "x", "--from-file", str(src), "--kind", "sft",
              "--input-key", "prompt", "--output-key", "completion", "--json")
    assert r.code == 0
    assert r.json()["dataset"]["columns"] == {"input": "prompt", "output": "completion"}


def test_sft_accepts_conversations(repo: Path, monte, tmp_path: Path) -> None:
    msg = {"messages": [{"role": "user", "content": "2+2"}, {"role": "assistant", "content": "4"}]}
    src = _write(tmp_path / "c.jsonl", [json.dumps(msg)] * 3)
    r = monte("dataset", "add", "chat", "--from-file", str(src), "--kind", "sft", "--json")
    assert r.code == 0 and r.json()["dataset"]["columns"] == {"messages": "messages"}


def test_without_kind_any_object_is_accepted_but_declares_no_columns(repo: Path, monte, tmp_path: Path) -> None:
    src = _write(tmp_path / "a.jsonl", ['{"anything": 1}'])
    d = monte("dataset", "add", "raw", "--from-file", str(src), "--json").json()["dataset"]
    assert d["kind"] is None and d["columns"] is None


def test_readd_refuses(repo: Path, monte, rows: Path) -> None:
    monte("dataset", "add", "demos", "--from-file", str(rows))
    before = snapshot_state(repo)
    r = monte("dataset", "add", "demos", "--from-file", str(rows), "--json")
    assert r.code == 3 and r.json()["error"]["code"] == "E_NAME_TAKEN"
    assert snapshot_state(repo) == before


def test_dataset_refuses_any_environment_name(repo: Path, monte, rows: Path) -> None:
    monte("env", "add", "--benchmark", "parity")  # even an eval-only one: the dataset side is strict
    before = snapshot_state(repo)
    r = monte("dataset", "add", "parity", "--from-file", str(rows), "--json")
    assert r.code == 3 and r.json()["error"]["code"] == "E_SOURCE_CONFLICT"
    assert snapshot_state(repo) == before


def test_trainable_env_refuses_a_dataset_name_but_eval_only_does_not(repo: Path, monte, rows: Path) -> None:
    monte("dataset", "add", "parity", "--from-file", str(rows))
    before = snapshot_state(repo)
    r = monte("env", "add", "--server", "parity", "--dev", "parity", "--test", "parity", "--json")
    assert r.code == 3 and r.json()["error"]["code"] == "E_SOURCE_CONFLICT"
    assert snapshot_state(repo) == before
    assert monte("env", "add", "--benchmark", "parity").code == 0


def test_missing_source_file_and_flag_mixes(repo: Path, monte, unchanged, tmp_path: Path) -> None:
    r = monte("dataset", "add", "x", "--from-file", str(tmp_path / "nope.jsonl"), "--json")
    assert r.code == 4
    assert monte("dataset", "add", "x", "--json").code == 2
    assert monte("dataset", "add", "x", "--from-file", "a", "--from-hf", "b/c", "--json").code == 2
    assert monte("dataset", "add", "x", "--from-file", "a", "--file", "t.jsonl", "--json").code == 2
    assert monte("dataset", "add", "../x", "--from-file", "a", "--json").json()["error"]["code"] == "E_INVALID_NAME"


def test_from_env_freezes_the_curriculum_as_demonstrations(repo: Path, monte) -> None:
    """Issue 46.1/14: the README's loop made its demonstrations from a file nothing made; now one
    command writes a trainable environment's curriculum as SFT rows, input and output joined by a space."""
    assert monte("env", "add", "--server", "parity", "--dev", "parity", "--test", "parity").code == 0
    r = monte("dataset", "add", "parity-sft", "--from-env", "parity", "--kind", "sft", "--json")
    assert r.code == 0, r.out
    d = r.json()["dataset"]
    curriculum = [json.loads(line) for line in
                  (repo / ".monte" / "environments" / "parity" / "curriculum.jsonl").read_text().splitlines()]
    assert d["rows"] == len(curriculum) and d["columns"] == {"input": "input", "output": "output"}
    frozen = [json.loads(line) for line in Path(d["folder"], "rows.jsonl").read_text().splitlines()]
    assert frozen[0] == {"input": curriculum[0]["prompt"], "output": " " + curriculum[0]["answer"]}
    assert d["provenance"]["source"] == "environment" and d["provenance"]["environment"] == "parity"
    assert "' ' + answer" in d["provenance"]["join"]


def test_from_env_refusals_change_nothing(repo: Path, monte, unchanged) -> None:
    r = monte("dataset", "add", "x", "--from-env", "parity", "--json")  # no --kind sft
    assert r.code == 2 and "--kind sft" in r.json()["error"]["fix"]
    r = monte("dataset", "add", "x", "--from-env", "parity", "--kind", "sft", "--json")  # not frozen here
    assert r.code == 4 and "monte env add --server parity" in r.json()["error"]["fix"]
    assert monte("dataset", "add", "x", "--from-env", "parity", "--from-file", "a", "--json").code == 2


def test_from_env_refuses_an_eval_only_environment(repo: Path, monte) -> None:
    assert monte("env", "add", "--benchmark", "parity").code == 0
    before = snapshot_state(repo)
    r = monte("dataset", "add", "x", "--from-env", "parity", "--kind", "sft", "--json")
    assert r.code == 3 and "eval-only" in r.json()["error"]["message"]
    assert snapshot_state(repo) == before


def test_list_and_show(repo: Path, monte, rows: Path) -> None:
    monte("dataset", "add", "b", "--from-file", str(rows))
    monte("dataset", "add", "a", "--from-file", str(rows), "--kind", "sft")
    assert [d["name"] for d in monte("dataset", "list", "--json").json()] == ["a", "b"]
    shown = monte("dataset", "show", "a", "--json").json()
    assert shown["verified"] is True and shown["rows"] == 5
    assert monte("dataset", "show", "zzz", "--json").json()["error"]["code"] == "E_NOT_FOUND"


def test_show_reproves_the_hash(repo: Path, monte, rows: Path) -> None:
    monte("dataset", "add", "a", "--from-file", str(rows))
    frozen = repo / ".monte/datasets/a/rows.jsonl"
    frozen.write_text(frozen.read_text().replace("q1", "q9"))
    r = monte("dataset", "show", "a", "--json")
    assert r.code == 5
    assert "rows.jsonl" in r.json()["error"]["message"]


# --- the hub -----------------------------------------------------------------------------------
# No hub is reachable here. The one boundary monte has with it is `monte.storage.hub.HfApi`;
# this fake stands in for it (and only it), recording the calls. Everything after the download
# (screening, hashing, the freeze) is real.


class FakeHfApi:
    calls: list[tuple] = []
    files: dict[str, bytes] = {}
    download_dir: Path = Path()

    def dataset_info(self, repo_id: str, revision: str | None = None):
        from huggingface_hub.errors import RepositoryNotFoundError

        FakeHfApi.calls.append(("dataset_info", repo_id, revision))
        if repo_id != "acme/demos":
            raise RepositoryNotFoundError(f"{repo_id} not found", response=SimpleNamespace(
                status_code=404, headers={}, request=None, url="", text=""))  # type: ignore[arg-type]
        return SimpleNamespace(sha="c0ffee" + "0" * 34, siblings=[SimpleNamespace(rfilename=n) for n in self.files])

    def hf_hub_download(self, repo_id: str, filename: str, repo_type: str, revision: str) -> str:
        FakeHfApi.calls.append(("hf_hub_download", repo_id, filename, repo_type, revision))
        out = self.download_dir / filename
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_bytes(self.files[filename])
        return str(out)


@pytest.fixture
def fake_hub(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> type[FakeHfApi]:
    import monte.storage.hub as hub

    FakeHfApi.calls = []
    FakeHfApi.files = {
        "data/train.jsonl": b'{"input": "x", "output": "y"}\n',
        "data/extra.jsonl": b'{"input": "z", "output": "w"}\n',
        "README.md": b"# card\n",
    }
    FakeHfApi.download_dir = tmp_path / "hfcache"
    monkeypatch.setattr(hub, "HfApi", FakeHfApi)
    return FakeHfApi


def test_from_hf_pins_the_resolved_revision(repo: Path, monte, fake_hub) -> None:
    r = monte("dataset", "add", "hubrows", "--from-hf", "acme/demos@main", "--file", "data/train.jsonl",
              "--kind", "sft", "--json")
    assert r.code == 0, r.out
    prov = r.json()["dataset"]["provenance"]
    assert prov["source"] == "hf" and prov["repo"] == "acme/demos"
    assert prov["revision"].startswith("c0ffee") and prov["requested_revision"] == "main"
    # the download asked for the resolved commit, not the moving branch name
    assert fake_hub.calls[-1] == ("hf_hub_download", "acme/demos", "data/train.jsonl", "dataset", prov["revision"])


def test_from_hf_with_several_jsonl_files_needs_file(repo: Path, monte, fake_hub, unchanged) -> None:
    r = monte("dataset", "add", "hubrows", "--from-hf", "acme/demos", "--json")
    assert r.code == 2 and "--file" in r.json()["error"]["fix"]


def test_from_hf_unknown_repo_or_file(repo: Path, monte, fake_hub, unchanged) -> None:
    assert monte("dataset", "add", "h", "--from-hf", "acme/nope", "--json").json()["error"]["code"] == "E_NOT_FOUND"
    r = monte("dataset", "add", "h", "--from-hf", "acme/demos", "--file", "nope.jsonl", "--json")
    assert r.code == 4
