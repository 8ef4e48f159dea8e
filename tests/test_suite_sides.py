"""The suite's two sides (tests/conftest.py): ``pytest -m "not slow"`` is the inner loop, and a test
lands on a side by what it uses, never by a hand-set marker. Collected here in a fresh interpreter,
as a developer runs it (this file is itself on the slow side: it collects the whole suite)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
HEAVY = ("torch", "transformers", "trl", "lm_eval", "accelerate", "nemo_gym", "dvc")
PROBE = f"""
import json, sys, pytest
ids = []
class Keep:
    def pytest_collection_finish(self, session):
        ids.extend(item.nodeid for item in session.items)
code = pytest.main(["--collect-only", "-q", "-p", "no:cacheprovider", "-m", "not slow", "tests"], plugins=[Keep()])
print(json.dumps({{"code": int(code), "ids": ids, "heavy": [m for m in {HEAVY!r} if m in sys.modules]}}))
"""


def _fast_side() -> dict[str, object]:
    r = subprocess.run([sys.executable, "-c", PROBE], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    doc: dict[str, object] = json.loads(r.stdout.splitlines()[-1])
    return doc


def test_the_fast_side_imports_no_heavy_package_and_keeps_what_runs_none() -> None:
    doc = _fast_side()
    assert doc["code"] == 0 and doc["heavy"] == []  # not even imported to be deselected
    ids = set(doc["ids"])  # type: ignore[call-overload]
    assert len(ids) > 500
    # DVC's own CLI (the dvc_cli fixture) is slow; a folder Vault's test that runs no dvc stays fast
    dvc = "tests/storage/test_dvc_tracking.py::"
    assert f"{dvc}test_the_dvc_cache_links_the_frozen_files_instead_of_copying_them[folder]" in ids
    assert f"{dvc}test_a_freeze_is_a_dvc_output_that_plain_dvc_sees[folder]" not in ids
    assert "tests/test_dvc_project.py::test_the_stages_run_the_python_on_path" in ids
    assert "tests/test_dvc_project.py::test_a_fresh_clone_has_the_lock_and_every_figure" not in ids
    # the K-sample simulations are slow, the exact checks of the same functions fast
    assert not any(i.startswith("tests/stats/test_samples_sizes.py") for i in ids)
    assert "tests/stats/test_samples.py::test_pass_at_k_is_chen_et_al" in ids
    # a real model, the GCS emulator, sshd: slow; the ledger's rules: fast
    assert not any(i.startswith(("tests/training/", "tests/remote/")) for i in ids)
    assert any(i.startswith("tests/ledger/test_store.py::") for i in ids)
    # verify's honest ledger is built from recorded answers (tests/verify/recorded.py): most of
    # verify is on the fast side; the check of the recording against the real models is not
    verify = [i for i in ids if i.startswith("tests/verify/")]
    assert len(verify) >= 200, len(verify)
    assert "tests/verify/test_lineage_log.py::test_lineage_subjects_carry_the_move_and_the_stage_boundary" in ids
    assert not any(i.startswith("tests/verify/test_recorded.py") for i in ids)


RUN_PROBE = f"""
import json, sys, pytest
code = pytest.main(["-q", "-p", "no:cacheprovider", "-m", "not slow", *sys.argv[1:]])
print(json.dumps({{"code": int(code), "heavy": [m for m in {HEAVY!r} if m in sys.modules]}}))
"""


def test_verifys_honest_ledger_is_built_and_read_without_torch() -> None:
    # a fresh interpreter runs fast-side tests that build the whole honest ledger (three session
    # templates: baselines, checkpoints, dev evals) and take the final claim's test read themselves
    r = subprocess.run([sys.executable, "-c", RUN_PROBE, "tests/verify/test_lineage_log.py",
                        "tests/verify/test_rewinds.py::test_deleting_the_refs_and_init_again_is_refused_and_fails_verify"],
                       cwd=ROOT, capture_output=True, text=True, timeout=600)
    doc = json.loads(r.stdout.splitlines()[-1])
    assert doc["code"] == 0, r.stdout[-3000:]
    # not torch, not transformers (DVC's library is imported: `monte init` sets DVC up)
    assert not set(doc["heavy"]) & {"torch", "transformers", "trl", "accelerate"}, doc
