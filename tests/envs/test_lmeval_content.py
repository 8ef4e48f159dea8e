"""Issue 42, case 5: an lm-eval exam's content is its documents, not its rendered prompts.

On the code before this file, the same test documents of a GSM8K-shaped lm-eval task, refrozen
with one template branch changed and ``num_fewshot`` 2 -> 3, took a second test@0 on the same base
weights: the seal keyed an item on its rendered prompt, few-shot context included. An lm-eval
item is its document now (lm-eval's own ``doc_hash``), so the refrozen task is the sealed content.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.envs.lmeval_tasks import write_gsm
from tests.support.helpers import snapshot_state

pytest.importorskip("lm_eval")


def _env(monte, folder: Path, name: str) -> None:
    r = monte("env", "add", "--dev", "lm-eval:gsm_local", "--test", "lm-eval:gsm_local", "--as", name,
              "--include-path", str(folder), "--json")
    assert r.code == 0, r.out + r.err


def test_another_template_or_num_fewshot_over_the_same_documents_is_the_sealed_content(
        repo: Path, monte, base_model: Path, tmp_path: Path) -> None:
    _env(monte, write_gsm(tmp_path / "a", n_test=60, shots=2), "gsm")
    other = write_gsm(tmp_path / "b", n_test=60, shots=3)  # the same documents, 3-shot ...
    base = other / "_gsm_base.yaml"  # ... and another template branch
    base.write_text(base.read_text().replace('doc_to_text: "Question: {{question}}\\nAnswer:"',
                                             'doc_to_text: "Q: {{question}}\\nA:"'))
    assert "Q: {{question}}" in base.read_text()
    _env(monte, other, "gsm2")
    env = repo / ".monte" / "environments"
    first = [json.loads(x) for x in (env / "gsm/exams/gsm_local/test.jsonl").read_text().splitlines()]
    second = [json.loads(x) for x in (env / "gsm2/exams/gsm_local/test.jsonl").read_text().splitlines()]
    assert [d["lm_eval"]["doc_hash"] for d in first] == [d["lm_eval"]["doc_hash"] for d in second]
    assert all(a["prompt"] != b["prompt"] for a, b in zip(first, second, strict=True))  # every prompt differs
    assert monte("experiment", "init", "e", "--eval", "gsm", "--model", str(base_model)).code == 0
    assert monte("eval", "-e", "e", "--split", "test", "--yes", "--json").code == 0  # test@0
    assert monte("experiment", "init", "e2", "--eval", "gsm2", "--model", str(base_model)).code == 0
    before = snapshot_state(repo)
    r = monte("eval", "-e", "e2", "--split", "test", "--yes", "--json")
    assert r.code == 3, r.out
    err = r.json()["error"]
    assert err["code"] == "E_SEALED" and "e/" in err["message"], err
    assert "the same items in another order or file" in err["message"], err
    assert snapshot_state(repo) == before
