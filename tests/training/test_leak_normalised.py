"""Issue 25, case 5: the leak check was string equality on the input column. A dataset holding
the sealed test items with a zero-width space appended, with ``" ="`` written ``"="``, with the
prompt moved into the output column, in a chat row's user turn, or with words around it trained
without ``E_LEAK``. Each is refused now, naming the row, and leaves the repository as it was; an
honest dataset from the curriculum still trains (its dev overlap is reported, not refused).

Issue 42: the refusal is no membership oracle. It named the sealed item a row matched, so an
agent could ask "is this question in test?" one dataset at a time; it names the dataset's rows
and how many now, never the sealed item, and every refusal is counted against the sealed content
and disclosed by `monte status` beside its test reads."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.support.trainhelp import curriculum, exam_prompts, refused

MOVES: dict[str, Any] = {
    "zero-width space appended": lambda p: {"input": p + "\u200b", "output": " even"},
    "' =' written '='": lambda p: {"input": p.replace(" =", "="), "output": " even"},
    "the prompt in the output column": lambda p: {"input": "Answer:", "output": f"{p} even"},
    "upper case, full width": lambda p: {"input": p.upper().replace("P", "\uff30"), "output": " even"},
    "words around it": lambda p: {"input": f"Question: {p} (answer in one word)", "output": " even"},
}


def _rows(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_a_sealed_item_hidden_by_a_trivial_edit_is_a_leak(repo: Path, monte, trainable: str, tmp_path: Path) -> None:
    honest = [{"input": it["prompt"], "output": " " + it["answer"]} for it in curriculum(repo)[:20]]
    sealed = exam_prompts(repo, "test")[7]
    for k, (move, edit) in enumerate(sorted(MOVES.items())):
        path = _rows(tmp_path / f"rows{k}.jsonl", [*honest, edit(sealed)])
        assert monte("dataset", "add", f"edited{k}", "--from-file", str(path), "--kind", "sft").code == 0, move
        err = refused(monte, repo, "train", "--recipe", "sft-t", "--source", f"edited{k}", "--smoke", "--yes",
                      code="E_LEAK", exit_code=3)
        assert "1 of its row(s)" in err["message"] and "line 21" in err["message"], (move, err)
        assert "parity/test/00007" not in err["message"] and sealed not in err["message"], (move, err)


def test_a_chat_row_holding_a_sealed_item_is_a_leak(repo: Path, monte, trainable: str, tmp_path: Path) -> None:
    sealed = exam_prompts(repo, "test")[3]
    chat = [{"messages": [{"role": "system", "content": "answer odd or even"},
                          {"role": "user", "content": m["prompt"]},
                          {"role": "assistant", "content": m["answer"]}]} for m in curriculum(repo)[:10]]
    chat.append({"messages": [{"role": "system", "content": "answer odd or even"},
                              {"role": "user", "content": "a warm-up first"},
                              {"role": "assistant", "content": "ok"},
                              {"role": "user", "content": sealed.replace(" ", "  ") + "\u200d"},
                              {"role": "assistant", "content": "even"}]})
    path = _rows(tmp_path / "chat.jsonl", chat)
    assert monte("dataset", "add", "chat", "--from-file", str(path), "--kind", "sft").code == 0
    err = refused(monte, repo, "train", "--recipe", "sft-t", "--source", "chat", "--smoke", "--yes",
                  code="E_LEAK", exit_code=3)
    assert "line 11" in err["message"] and "parity/test/00003" not in err["message"]


def test_honest_rows_are_no_leak(repo: Path, monte, trainable: str) -> None:
    """The curriculum (disjoint from both exams by construction) is no leak, in either form."""
    for source in ("parity", "parity-sft"):
        r = monte("train", "--recipe", "grpo-t" if source == "parity" else "sft-t", "--source", source,
                  "--smoke", "--dry-run", "--json")
        assert r.code == 0, r.out + r.err


def test_a_leak_refusal_names_no_sealed_item_and_is_disclosed(repo: Path, monte, trainable: str,
                                                             tmp_path: Path) -> None:
    honest = [{"input": it["prompt"], "output": " " + it["answer"]} for it in curriculum(repo)[:20]]
    test = exam_prompts(repo, "test")
    assert monte("status", "--json").json()["exams"][0]["leak_refusals"] == 0
    rows = [*honest, *({"input": p, "output": " even"} for p in test[:7])]
    assert monte("dataset", "add", "probe", "--from-file", str(_rows(tmp_path / "probe.jsonl", rows)),
                 "--kind", "sft").code == 0
    for _ in range(2):  # each refusal answered a membership question: each is counted
        err = refused(monte, repo, "train", "--recipe", "sft-t", "--source", "probe", "--smoke", "--yes",
                      code="E_LEAK", exit_code=3)
        assert "7 of its row(s)" in err["message"] and "line 21, line 22" in err["message"], err
        assert "..." in err["message"]  # five rows named, the rest counted
        assert not any(p in err["message"] or p.replace(" ", "") in err["message"] for p in test[:7])
        assert "parity/test/" not in err["message"] and "never said" in err["message"]
    (exam,) = monte("status", "--json").json()["exams"]
    assert exam["leak_refusals"] == 2
    assert "2 leak refusal(s)" in monte("status").out
    assert monte("ledger", "verify", "--all").code == 0  # a leak-refusal record is a record verify knows


def test_leak_refusals_travel_with_the_ledger(repo: Path, monte, trainable: str, tmp_path: Path) -> None:
    """The count was kept in the common git directory, which no push or clone carries: a clone (or
    the shared remote) saw no refusal, and the membership questions asked here were hidden from
    whoever reads the claim elsewhere. Each refusal is a record on the experiment's ledger now."""
    from tests.support.helpers import git

    test = exam_prompts(repo, "test")
    rows = [{"input": p, "output": " even"} for p in test[:3]]
    assert monte("dataset", "add", "probe", "--from-file", str(_rows(tmp_path / "probe.jsonl", rows)),
                 "--kind", "sft").code == 0
    refused(monte, repo, "train", "--recipe", "sft-t", "--source", "probe", "--smoke", "--yes",
            code="E_LEAK", exit_code=3)
    clone = tmp_path / "clone"
    git(tmp_path, "clone", "-q", "--mirror", str(repo), str(clone))  # every ref, as a shared remote holds them
    from monte.ledger.experiment import Ledger, experiment_names
    from monte.ledger.seal import leak_refusals
    from monte.ledger.store import Store
    from monte.workspace import open_workspace

    here = open_workspace(repo).store
    (exp,) = experiment_names(here)
    (exam,) = Ledger(here, exp).measurement().exams.values()
    split = exam.splits["test"].sha256
    assert leak_refusals(here, split) == 1
    assert leak_refusals(Store(clone), split) == 1  # the clone counts it, from the ledger it holds
