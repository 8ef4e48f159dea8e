"""Issue 25, cases 3 and 4: what the seal is keyed on besides the weights.

- Case 3: a ``measurement.json`` whose eval settings differ only in ``batch_size`` (bytes plain git
  can write) got a fresh seal. An execution detail never defines a cohort now: the seal is keyed
  on the settings that change what is generated or graded.
- Case 4: the same 200 test items in reverse order, frozen under a new name and recorded on the
  vault ref, were a new exam: the seal was keyed by the split file's sha256. A split is its set
  of normalised items now, and one sharing 5% of either side or 10 items with a sealed one is a
  read of that exam (issue 42).

Each repository here is ``monte quickstart``'s shape: the parity environment, experiment ``exp``
on the tiny base model, its test@0 taken; the second experiment is written as the attack wrote it.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from tests.support.helpers import snapshot_state
from tests.support.plain_git import plain_git_experiment


def _test0(monte) -> None:
    assert monte("eval", "--yes", "--json", "--split", "test").code == 0


def _batch_size(meas: dict[str, Any], n: int) -> None:
    """As the file was written: ``execution`` where the measurement has one, else among ``eval``."""
    (meas["execution"] if "execution" in meas else meas["eval"])["batch_size"] = n


def _refused_sealed(monte, repo: Path, *args: str) -> dict[str, str]:
    before = snapshot_state(repo)
    r = monte("eval", "--yes", "--json", "--split", "test", *args)
    assert r.code == 3, r.out + r.err
    err: dict[str, str] = json.loads(r.out)["error"]
    assert err["code"] == "E_SEALED", err
    assert snapshot_state(repo) == before
    return err


def test_an_execution_detail_is_not_a_new_seal(repo: Path, monte, exp: str) -> None:
    _test0(monte)
    plain_git_experiment(repo, "exp2", lambda m: _batch_size(m, 7))
    # the form a measurement had before eval settings were split: batch_size among them
    plain_git_experiment(repo, "exp3", lambda m: (m.pop("execution", None), m["eval"].update(batch_size=5)))
    for other in ("exp2", "exp3"):
        err = _refused_sealed(monte, repo, "-e", other)
        assert "exp/" in err["message"] and "spans the repository" in err["message"]
        plan = monte("eval", "-e", other, "--dry-run", "--json").json()["plan"]
        assert plan["execution"]["batch_size"] in (7, 5) and "batch_size" not in plan["settings"]
    assert monte("ledger", "verify", "--json").code == 0  # both ledgers are well-formed
    # an output setting is another cohort for pairing, never a fresh test budget (issue 42)
    plain_git_experiment(repo, "exp4", lambda m: m["eval"].update(max_new_tokens=17))
    assert "whatever the eval settings" in _refused_sealed(monte, repo, "-e", "exp4")["message"]


def _env_from_parity(repo: Path, monte, name: str, test_items: list[dict[str, Any]], model: Path) -> None:
    """Environment ``name``: parity's files with another test split, frozen and on the vault ref."""
    from monte.hashing import hash_tree
    from monte.ledger.vault_ref import Vault
    from monte.manifest import MANIFEST, FileEntry, read_manifest
    from monte.workspace import open_workspace

    src = repo / ".monte" / "environments" / "parity"
    dest = src.parent / name
    shutil.copytree(src, dest)
    (dest / "exams" / "parity" / "test.jsonl").write_text(
        "".join(json.dumps(i, sort_keys=True) + "\n" for i in test_items))
    m = read_manifest(src)
    assert m is not None
    files = {k: FileEntry(**v) for k, v in hash_tree(dest).items() if k != MANIFEST}  # type: ignore[arg-type]
    m = m.model_copy(update={"name": name, "files": files})
    (dest / MANIFEST).write_bytes(m.dumps())
    Vault(open_workspace(repo).store).record(m)
    r = monte("experiment", "init", f"x-{name}", "--eval", name, "--model", str(model))
    assert r.code == 0, r.out + r.err


def _items(repo: Path, split: str) -> list[dict[str, Any]]:
    path = repo / ".monte" / "environments" / "parity" / "exams" / "parity" / f"{split}.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def test_a_reordered_or_mostly_shared_test_split_is_the_same_exam(repo: Path, monte, exp: str,
                                                                 base_model: Path) -> None:
    _test0(monte)
    test, dev = _items(repo, "test"), _items(repo, "dev")
    _env_from_parity(repo, monte, "reversed", test[::-1], base_model)
    renumbered = [{**it, "id": f"parity/test/{k:05d}", "metadata": {}} for k, it in enumerate(test[::-1])]
    _env_from_parity(repo, monte, "renumbered", renumbered, base_model)
    _env_from_parity(repo, monte, "mostly", test[:150] + dev[:50], base_model)
    for env in ("reversed", "renumbered", "mostly"):
        err = _refused_sealed(monte, repo, "-e", f"x-{env}")
        assert "exp/" in err["message"] and "another test split is this exam" in err["message"], err
    assert "the same items in another order" in _refused_sealed(monte, repo, "-e", "x-reversed")["message"]
    assert "150 of its items in common" in _refused_sealed(monte, repo, "-e", "x-mostly")["message"]
    # a split sharing 10 items (5% of neither side) is a read of the sealed content (issue 42)
    _env_from_parity(repo, monte, "ten", dev[50:200] + test[:10], base_model)
    assert "10 of its items in common" in _refused_sealed(monte, repo, "-e", "x-ten")["message"]
    # other items are another exam: a split sharing under 10 items and 5% has its own two reads
    _env_from_parity(repo, monte, "other", dev[50:200] + test[:5], base_model)
    r = monte("eval", "-e", "x-other", "--split", "test", "--dry-run", "--json")
    assert r.code == 0 and r.json()["plan"]["exams"][0]["role"] == "baseline", r.out


def test_verify_names_a_second_test0_that_differs_only_in_an_execution_detail(
        repo: Path, monte, exp: str, monkeypatch: Any) -> None:
    """Case 3's other half: the read the old CLI let through (a second test@0 under a measurement
    that differs only in batch size) is named by `monte ledger verify`, which counts the seal
    across every ledger with the same settings key. The CLI check is switched off in-process to
    write that read, as a monte of the last round would have written it."""
    from monte.ledger import seal

    _test0(monte)
    plain_git_experiment(repo, "exp2", lambda m: _batch_size(m, 7))
    with monkeypatch.context() as mp:  # the last round's monte: no other ledger is counted at the read
        mp.setattr(seal.Seal, "touches", lambda self, key, own=None: [])
        r = monte("eval", "-e", "exp2", "--split", "test", "--yes", "--json")
    assert r.code == 0, r.out + r.err
    r = monte("ledger", "verify", "--all", "--json")
    assert r.code == 5, r.out
    err = r.json()["error"]
    assert err["code"] == "E_VERIFY" and "[seal]" in err["message"] and "two test@0 reads" in err["message"], err
    assert "exp/" in err["message"] and "exp2/" in err["message"], err


def test_a_split_steered_with_items_of_smaller_keys_is_the_sealed_exam(repo: Path, monte, exp: str,
                                                                      base_model: Path) -> None:
    """Issue 42, case 4: a test file holding all 200 sealed items plus 64 new items chosen so that
    their keys sort below the sealed ones. The bottom-k sketch a read recorded held none of the
    sealed keys (estimated overlap 0.0: a fresh exam whose claim scored every sealed item); a read
    records every key now, so the 200 shared items are counted exactly."""
    from monte.envs.items import item_key

    _test0(monte)
    test, dev = _items(repo, "test"), _items(repo, "dev")
    taken = {it["prompt"] for it in test + dev}
    floor = min(item_key(it) for it in test)
    fresh = [{"id": f"parity/test/9{x:05d}", "prompt": f"p {x} =", "answer": "odd" if x % 2 else "even",
              "metadata": {"number": x}} for x in range(10_000, 100_000) if f"p {x} =" not in taken]
    low = sorted((it for it in fresh if item_key(it) < floor), key=item_key)[:64]
    assert len(low) == 64
    _env_from_parity(repo, monte, "steered", test + low, base_model)
    err = _refused_sealed(monte, repo, "-e", "x-steered")
    assert "exp/" in err["message"] and "200 of its items in common" in err["message"], err
