"""The project's own ``dvc.yaml`` works from a fresh clone (issue 16): its stages run the Python
on PATH (no ``.venv/bin/python``), ``dvc.lock`` and every metric file are committed, so in a
``git clone`` of HEAD ``dvc status`` reports no output changed or missing (a stage whose
*dependencies* changed since its figures were measured is what ``dvc status`` is for: it names
the figures to re-measure with ``dvc repro``), and ``dvc metrics show`` prints every figure."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from ruamel.yaml import YAML

from tests.support.helpers import git

ROOT = Path(__file__).resolve().parents[1]


def test_the_stages_run_the_python_on_path() -> None:
    stages = YAML(typ="safe").load((ROOT / "dvc.yaml").read_text())["stages"]
    assert stages
    for name, stage in stages.items():
        assert stage["cmd"].startswith("python bench/"), (name, stage["cmd"])
        assert ".venv" not in json.dumps(stage), name


def test_a_fresh_clone_has_the_lock_and_every_figure(tmp_path: Path, dvc_cli: Callable[..., str]) -> None:
    clone = tmp_path / "clone"
    git(tmp_path, "clone", "-q", str(ROOT), str(clone))
    stages = YAML(typ="safe").load((clone / "dvc.yaml").read_text())["stages"]
    lock = YAML(typ="safe").load((clone / "dvc.lock").read_text())["stages"]
    assert set(lock) == set(stages)
    metrics = [next(iter(m)) for s in stages.values() for m in s["metrics"]]
    for path in metrics:
        assert (clone / path).is_file(), f"{path} is not committed"
    status = json.loads(dvc_cli(clone, "status", "--json", stderr=False) or "{}")
    for stage, changes in status.items():
        for change in changes:  # only "changed deps" may appear: the figure is older than its code
            assert change == {"changed deps": change.get("changed deps")}, (stage, change)
    shown = json.loads(dvc_cli(clone, "metrics", "show", "--json", stderr=False))
    files = shown[""]["data"] if "" in shown else next(iter(shown.values()))["data"]
    for path in metrics:
        assert files[path]["data"], path
