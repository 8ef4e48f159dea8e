"""Plain JSONL exams: `monte env add --dev file:DEV.jsonl --test file:TEST.jsonl --grader G --as NAME`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from monte.envs.jsonl_exam import JsonlGrader, parse_grader
from tests.support.helpers import snapshot_state


def _write(path: Path, rows: list[dict[str, object]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def _pair(tmp: Path, n: int = 12) -> tuple[Path, Path]:
    dev = _write(tmp / "dev.jsonl", [{"id": f"d{i}", "prompt": f"{i} + 1 =", "answer": str(i + 1)} for i in range(n)])
    test = _write(tmp / "test.jsonl", [{"id": f"t{i}", "prompt": f"{i} + 2 =", "answer": str(i + 2)} for i in range(n)])
    return dev, test


def test_jsonl_exams_freeze_and_an_experiment_evaluates_them(repo: Path, monte, base_model: Path) -> None:
    dev, test = _pair(repo)
    r = monte("env", "add", "--dev", f"file:{dev}", "--test", f"file:{test}", "--grader", "numeric",
              "--as", "sums", "--json")
    assert r.code == 0, r.out
    env = r.json()["environment"]
    assert env["exams"] == {"sums": ["dev", "test"]}
    folder = repo / ".monte/environments/sums"
    frozen = [json.loads(x) for x in (folder / "exams/sums/dev.jsonl").read_text().splitlines()]
    assert [x["id"] for x in frozen] == [f"d{i}" for i in range(12)]
    manifest = json.loads((folder / "manifest.json").read_text())
    assert manifest["grader"]["graders"]["sums"] == {"kind": "numeric", "tolerance": 0.0}
    assert monte("experiment", "init", "e", "--eval", "sums", "--model", str(base_model)).code == 0
    r = monte("eval", "--yes", "--json")
    assert r.code == 0, r.out
    run = r.json()["runs"][0]
    assert run["n"] == 12 and run["exam"] == "sums" and run["split"] == "dev"


def test_dev_and_test_sharing_an_item_refuse_e_leak_and_write_nothing(repo: Path, monte) -> None:
    dev, test = _pair(repo)
    rows = [json.loads(x) for x in test.read_text().splitlines()]
    rows[3]["prompt"] = "  5 + 1 =  "  # dev d5's prompt, spaced differently
    _write(test, rows)
    before = snapshot_state(repo)
    r = monte("env", "add", "--dev", f"file:{dev}", "--test", f"file:{test}", "--grader", "exact",
              "--as", "sums", "--json")
    assert r.code != 0
    err = r.json()["error"]
    assert err["code"] == "E_LEAK" and "'d5'" in err["message"] and "'t3'" in err["message"]
    assert snapshot_state(repo) == before


@pytest.mark.parametrize(("content", "code"), [
    ("{not json\n", "E_BAD_INPUT"),
    ('{"id": 1, "prompt": "x"}\n', "E_BAD_INPUT"),
    ('{"id": 1, "prompt": "x", "answer": "1"}\n{"id": 1, "prompt": "y", "answer": "2"}\n', "E_BAD_INPUT"),
])
def test_bad_rows_refuse_and_write_nothing(repo: Path, monte, content: str, code: str) -> None:
    dev, test = _pair(repo)
    dev.write_text(content)
    before = snapshot_state(repo)
    r = monte("env", "add", "--dev", f"file:{dev}", "--test", f"file:{test}", "--grader", "exact",
              "--as", "sums", "--json")
    assert r.json()["error"]["code"] == code, r.out
    assert snapshot_state(repo) == before


def test_a_missing_file_and_a_missing_grader_refuse(repo: Path, monte) -> None:
    dev, test = _pair(repo)
    r = monte("env", "add", "--dev", f"file:{repo / 'nope.jsonl'}", "--test", f"file:{test}", "--grader",
              "exact", "--as", "sums", "--json")
    assert r.json()["error"]["code"] == "E_NOT_FOUND"
    r = monte("env", "add", "--dev", f"file:{dev}", "--test", f"file:{test}", "--as", "sums", "--json")
    assert r.json()["error"]["code"] == "E_USAGE" and "--grader" in r.json()["error"]["message"]
    r = monte("env", "add", "--dev", f"file:{dev}", "--test", f"file:{test}", "--grader", "fuzzy",
              "--as", "sums", "--json")
    assert r.json()["error"]["code"] == "E_USAGE"
    r = monte("env", "add", "--benchmark", "parity", "--grader", "exact", "--json")
    assert r.json()["error"]["code"] == "E_USAGE"


def test_the_graders() -> None:
    item = {"id": "1", "prompt": "q", "answer": "Paris"}
    assert JsonlGrader(parse_grader("exact")).grade(item, "Paris\nmore") == 1.0
    assert JsonlGrader(parse_grader("exact")).grade(item, "paris") == 0.0
    assert JsonlGrader(parse_grader("exact:ignore_case,ignore_punctuation")).grade(item, "paris!") == 1.0
    num = {"id": "2", "prompt": "q", "answer": "1,234.5"}
    assert JsonlGrader(parse_grader("numeric")).grade(num, "it is 1234.5 apples") == 1.0
    assert JsonlGrader(parse_grader("numeric:0.1")).grade(num, "1234.45") == 1.0
    assert JsonlGrader(parse_grader("numeric")).grade(num, "1234.45") == 0.0
    rx = JsonlGrader(parse_grader(r"regex:#### (\S+)"))
    assert rx.grade({"answer": "42"}, "so\n#### 42") == 1.0
    assert rx.grade({"answer": "42"}, "42") == 0.0


def test_a_python_grader_is_frozen_by_its_hash(repo: Path, monte, base_model: Path) -> None:
    dev, test = _pair(repo, 6)
    (repo / "mygrade.py").write_text("def score(item, answer):\n    return 1.0 if answer.strip() else 0.5\n")
    r = monte("env", "add", "--dev", f"file:{dev}", "--test", f"file:{test}", "--grader",
              "python:mygrade:score", "--as", "py", "--json")
    assert r.code == 0, r.out
    folder = repo / ".monte/environments/py"
    spec = json.loads((folder / "manifest.json").read_text())["grader"]["graders"]["py"]
    assert spec["file"] == "graders/mygrade.py" and len(spec["sha256"]) == 64
    (repo / "mygrade.py").write_text("def score(item, answer):\n    return 0.0\n")  # the original moves on
    assert monte("experiment", "init", "e", "--eval", "py", "--model", str(base_model)).code == 0
    r = monte("eval", "--yes", "--json")
    assert r.code == 0, r.out
    assert r.json()["runs"][0]["score"] >= 0.5  # graded by the frozen copy, never the edited file
    r = monte("env", "add", "--dev", f"file:{dev}", "--test", f"file:{test}", "--grader",
              "python:nosuchmodule:score", "--as", "py2", "--json")
    assert r.json()["error"]["code"] == "E_BAD_INPUT"


def test_a_python_grader_that_raises_on_every_item_records_no_score(repo: Path, monte, base_model: Path) -> None:
    """Issue 43, case 9: on main such a grader scored each item 0 and the read succeeded (a test
    read spent on zeros the grader never gave). It now refuses before any score is recorded."""
    dev, test = _pair(repo, 6)
    (repo / "brokengrade.py").write_text("def score(item, answer):\n    raise KeyError('expected')\n")
    r = monte("env", "add", "--dev", f"file:{dev}", "--test", f"file:{test}", "--grader",
              "python:brokengrade:score", "--as", "broken", "--json")
    assert r.code == 0, r.out
    assert monte("experiment", "init", "e", "--eval", "broken", "--model", str(base_model)).code == 0
    r = monte("eval", "--yes", "--json")
    assert r.code not in (0, 1), r.out
    err = r.json()["error"]
    assert err["code"] == "E_BAD_INPUT" and "raised on every item" in err["message"] and "KeyError" in err["message"]
    rows = monte("status", "--json").json()["rows"]
    assert not any(row.get("score") is not None for row in rows), rows
