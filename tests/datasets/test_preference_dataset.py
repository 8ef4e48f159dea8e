"""`monte dataset add --kind preference`: TRL's preference shapes screened row by row, the flat
pile's own column names, and every bad row refused by its line with nothing written."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.helpers import git, snapshot_state


def _write(path: Path, rows: list[object]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def _msgs(role: str, text: str) -> list[dict[str, str]]:
    return [{"role": role, "content": text}]


SHAPES: dict[str, tuple[list[object], dict[str, str]]] = {
    "explicit text": ([{"prompt": "p 12 =", "chosen": " even", "rejected": " odd"}],
                      {"prompt": "prompt", "chosen": "chosen", "rejected": "rejected"}),
    "implicit text": ([{"chosen": "p 12 = even", "rejected": "p 12 = odd"}],
                      {"chosen": "chosen", "rejected": "rejected"}),
    "explicit conversational": ([{"prompt": _msgs("user", "p 12 ="), "chosen": _msgs("assistant", "even"),
                                  "rejected": _msgs("assistant", "odd")}],
                                {"prompt": "prompt", "chosen": "chosen", "rejected": "rejected"}),
    "implicit conversational": ([{"chosen": _msgs("user", "p 12 =") + _msgs("assistant", "even"),
                                  "rejected": _msgs("user", "p 12 =") + _msgs("assistant", "odd")}],
                                {"chosen": "chosen", "rejected": "rejected"}),
}


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_each_of_trls_preference_shapes_freezes_with_its_columns(repo: Path, monte, tmp_path: Path,
                                                                 shape: str) -> None:
    rows, columns = SHAPES[shape]
    src = _write(tmp_path / "prefs.jsonl", rows * 3)
    r = monte("dataset", "add", "prefs", "--from-file", str(src), "--kind", "preference", "--json")
    assert r.code == 0, r.out + r.err
    d = r.json()["dataset"]
    assert d["kind"] == "preference" and d["rows"] == 3 and d["columns"] == columns
    assert (repo / ".monte/datasets/prefs/rows.jsonl").read_bytes() == src.read_bytes()  # frozen by hash
    manifest = json.loads(git(repo, "show", "monte/vault:datasets/prefs/manifest.json"))
    assert manifest["dataset_kind"] == "preference" and manifest["columns"] == columns
    shown = monte("dataset", "show", "prefs", "--json").json()
    assert shown["verified"] is True and shown["kind"] == "preference"


def test_a_flat_pile_names_its_own_columns(repo: Path, monte, tmp_path: Path) -> None:
    src = _write(tmp_path / "pile.jsonl", [{"q": "p 12 =", "good": " even", "bad": " odd", "note": "x"}] * 2)
    before = snapshot_state(repo)
    r = monte("dataset", "add", "pile", "--from-file", str(src), "--kind", "preference", "--json")
    assert r.code == 6 and r.json()["error"]["code"] == "E_BAD_INPUT"
    err = r.json()["error"]
    assert "line 1" in err["message"] and "'chosen'" in err["message"]
    assert "--prompt-key/--chosen-key/--rejected-key" in err["fix"]
    assert snapshot_state(repo) == before
    r = monte("dataset", "add", "pile", "--from-file", str(src), "--kind", "preference", "--prompt-key", "q",
              "--chosen-key", "good", "--rejected-key", "bad", "--json")
    assert r.code == 0, r.out + r.err
    assert r.json()["dataset"]["columns"] == {"prompt": "q", "chosen": "good", "rejected": "bad"}
    dry = monte("dataset", "add", "pile2", "--from-file", str(src), "--kind", "preference", "--chosen-key", "good",
                "--rejected-key", "bad", "--dry-run", "--json").json()["plan"]
    assert dry["chosen_key"] == "good" and "input_key" not in dry


GOOD = {"prompt": "p 12 =", "chosen": " even", "rejected": " odd"}
BAD_ROWS = [
    ({"prompt": "p 12 =", "chosen": " even"}, "no 'rejected'"),
    ({"prompt": "p 12 =", "chosen": " even", "rejected": ""}, "'rejected' is neither non-empty text"),
    ({"prompt": "p 12 =", "chosen": 3, "rejected": " odd"}, "'chosen' is neither non-empty text"),
    ({"prompt": "p 12 =", "chosen": " even", "rejected": " even"}, "equals"),
    ({"prompt": "p 12 =", "chosen": _msgs("assistant", "even"), "rejected": " odd"}, "a pair has one form"),
    ({"prompt": _msgs("user", "p 12 ="), "chosen": " even", "rejected": " odd"}, "the prompt has the pair's form"),
    ({"prompt": "p 12 =", "chosen": [{"role": "assistant"}], "rejected": " odd"}, "'chosen' is neither"),
    ({"chosen": "p 12 = even", "rejected": "p 12 = odd"}, "mixes implicit text rows with explicit text rows"),
]


@pytest.mark.parametrize(("bad", "says"), BAD_ROWS)
def test_a_bad_preference_row_is_refused_by_its_line_and_nothing_is_written(repo: Path, monte, tmp_path: Path,
                                                                            bad: dict[str, object], says: str) -> None:
    src = _write(tmp_path / "bad.jsonl", [GOOD, GOOD, bad])
    before = snapshot_state(repo)
    r = monte("dataset", "add", "bad", "--from-file", str(src), "--kind", "preference", "--json")
    assert r.code == 6, r.out
    err = r.json()["error"]
    assert err["code"] == "E_BAD_INPUT" and "line 3" in err["message"] and says in err["message"], err
    assert snapshot_state(repo) == before
    assert not (repo / ".monte/datasets/bad").exists()
    # the same rows without --kind are any JSON objects: no screening, no columns
    r = monte("dataset", "add", "raw", "--from-file", str(src), "--json")
    assert r.code == 0 and r.json()["dataset"]["columns"] is None


def test_the_kind_choice_names_preference(repo: Path, monte, tmp_path: Path) -> None:
    src = _write(tmp_path / "p.jsonl", [GOOD])
    r = monte("dataset", "add", "x", "--from-file", str(src), "--kind", "pairs")
    assert r.code == 2 and "'sft', 'preference'" in r.err


def test_a_curriculum_becomes_a_preference_set_with_the_right_answer_chosen(repo: Path, monte,
                                                                             tmp_path: Path) -> None:
    from monte.errors import MonteError
    from monte.quickstart import preference_rows

    items = [{"prompt": f"p {n} =", "answer": "even" if n % 2 == 0 else "odd"} for n in (48213, 10000, 77, 2)]
    cur = _write(tmp_path / "curriculum.jsonl", list(items))
    out = preference_rows(cur, tmp_path / "pref.jsonl")
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert rows[0] == {"prompt": "p 48213 =", "chosen": " odd", "rejected": " even"}
    assert [r["chosen"] for r in rows] == [" odd", " even", " odd", " even"]
    assert all(r["rejected"] != r["chosen"] for r in rows)
    r = monte("dataset", "add", "pref", "--from-file", str(out), "--kind", "preference", "--json")
    assert r.code == 0 and r.json()["dataset"]["rows"] == 4
    one = _write(tmp_path / "one.jsonl", [{"prompt": "p 2 =", "answer": "even"}])
    with pytest.raises(MonteError) as e:
        preference_rows(one, tmp_path / "none.jsonl")
    assert e.value.code == "E_BAD_INPUT" and "no wrong one" in e.value.message
