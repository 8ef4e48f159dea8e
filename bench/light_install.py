"""Benchmark: the light install (``pip install monte``: the core, no extras), its size and time.

What CI and the pre-commit hook install to check a ledger. Before the core was split from the
extras every install path pulled the whole training stack: the pre-commit hook environment took
7 min 27 s and 1.9 GB (3 GB with CUDA torch). Goal: under 60 MB and under a minute here.

Builds a wheel of this checkout (from a copy: nothing is written into the tree), makes a fresh
virtualenv, and times ``pip install --no-cache-dir <wheel>`` (every dependency fetched from the
package index, as CI does); then measures what the install added to the virtualenv (``du``
apparent size of every file, over the fresh virtualenv's own pip), and checks what the light
install is for: ``monte --version``, ``monte ledger verify`` in a git repository, ``status``,
``show``, ``logs``, ``hooks`` and ``verify`` import with no torch, transformers, TRL, datasets,
DVC, Fabric, reasoning-gym, numpy or scipy, and a command that needs an extra (``monte init``
needs DVC) refuses with the pip line that installs it.

    .venv/bin/python bench/light_install.py                     # the real install (network: the index)
    .venv/bin/python bench/light_install.py --quick              # the wheel alone (--no-deps): a smoke run
    .venv/bin/python bench/light_install.py --json-out /tmp/light.json
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
HEAVY = ("torch", "transformers", "trl", "datasets", "dvc", "fabric", "reasoning_gym", "numpy", "scipy",
         "matplotlib", "google.cloud.storage", "huggingface_hub")
LIGHT_MODULES = ("monte.cli.main", "monte.cli.ledger", "monte.cli.runs", "monte.ledger.verify", "monte.status",
                 "monte.githooks", "monte.ledger.remotes")
MB = 10**6


def du(folder: Path) -> int:
    """Bytes of every regular file under ``folder`` (apparent size)."""
    total = 0
    for here, _, files in os.walk(folder):
        for f in files:
            p = Path(here) / f
            if not p.is_symlink():
                total += p.stat().st_size
    return total


def build_wheel(tmp: Path) -> Path:
    """A wheel of this checkout, built from a copy (setuptools writes build/ beside the source)."""
    src = tmp / "src"
    src.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, src / name)
    shutil.copytree(ROOT / "monte", src / "monte", ignore=shutil.ignore_patterns("__pycache__"))
    out = tmp / "wheels"
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w", str(out),
                    str(src)], check=True, capture_output=True, text=True)
    return next(out.glob("monte-*.whl"))


def requires(wheel: Path) -> list[str]:
    """The wheel's Requires-Dist lines that hold with no extra."""
    with zipfile.ZipFile(wheel) as z:
        meta = next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))
        lines = z.read(meta).decode().splitlines()
    return [line.split(":", 1)[1].strip() for line in lines
            if line.startswith("Requires-Dist:") and "extra ==" not in line]


def run(cmd: list[str], **kw: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, capture_output=True, text=True, **kw)  # type: ignore[call-overload]


def checks(venv: Path, tmp: Path) -> dict[str, object]:
    """What the light install must do, run with the light virtualenv's own monte."""
    py, monte = venv / "bin" / "python", venv / "bin" / "monte"
    out: dict[str, object] = {}
    probe = ("import importlib.util, sys\n"
             f"for m in {LIGHT_MODULES!r}: __import__(m)\n"
             f"heavy = [m for m in {HEAVY!r} if importlib.util.find_spec(m.split('.')[0]) is not None]\n"
             "loaded = [m for m in sys.modules if m.split('.')[0] in {h.split('.')[0] for h in "
             f"{HEAVY!r}}}]\n"
             "print(heavy, loaded)\n")
    r = run([str(py), "-c", probe], cwd=tmp)
    assert r.returncode == 0, r.stderr
    out["heavy_installed_or_loaded"] = r.stdout.strip()
    assert r.stdout.strip() == "[] []", r.stdout
    r = run([str(monte), "--version"], cwd=tmp)
    assert r.returncode == 0, r.stderr
    out["version"] = r.stdout.strip()
    repo = tmp / "repo"
    run(["git", "init", "-q", str(repo)], check=True)
    r = run([str(monte), "ledger", "verify", "--all", "--json"], cwd=repo)
    assert r.returncode == 0 and json.loads(r.stdout)["ok"] is True, r.stdout + r.stderr
    out["verify"] = "ok"
    r = run([str(monte), "init", "--json"], cwd=repo)
    refusal = json.loads(r.stdout)["error"]
    assert r.returncode == 4 and "pip install" in refusal["fix"] and "storage" in refusal["fix"], r.stdout
    out["init_refusal"] = refusal["fix"]
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="install the wheel alone (--no-deps, no index): seconds")
    ap.add_argument("--json-out", type=Path)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        wheel = build_wheel(tmp)
        core = requires(wheel)
        heavy = [r for r in core if r.split(">")[0].split("=")[0].strip().replace("-", "_") in
                 {h.split(".")[0] for h in HEAVY}]
        assert not heavy, f"the core requires {heavy}"
        venv = tmp / "venv"
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "-q", "--no-cache-dir",
               "--disable-pip-version-check"]
        base = du(venv)
        t0 = time.monotonic()
        r = run([*pip, *(["--no-deps", "--no-index"] if args.quick else []), str(wheel)])
        seconds = time.monotonic() - t0
        assert r.returncode == 0, r.stderr
        added = du(venv) - base
        site = next((venv / "lib").glob("python*/site-packages"))
        sizes = sorted(((du(p) if p.is_dir() else p.stat().st_size, p.name) for p in site.iterdir()
                        if not p.name.endswith(".dist-info") and p.name not in ("pip", "_distutils_hack")),
                       reverse=True)
        figures: dict[str, object] = {
            "when": datetime.now(UTC).isoformat(timespec="seconds"), "machine": platform.platform(),
            "python": platform.python_version(), "cpus": os.cpu_count(), "quick": args.quick,
            "core_requires": core, "install_seconds": round(seconds, 1), "added_mb": round(added / MB, 1),
            "venv_mb": round(du(venv) / MB, 1), "largest": [[n, round(s / MB, 1)] for s, n in sizes[:8]],
            "goal": {"mb": 60, "seconds": 60}, "before": {"mb": 1900, "seconds": 447},
        }
        if not args.quick:
            figures["checks"] = checks(venv, tmp)
    print(f"light install: {figures['install_seconds']} s, {figures['added_mb']} MB added "
          f"(virtualenv {figures['venv_mb']} MB); core requires {', '.join(core)}")
    print("largest: " + ", ".join(f"{n} {s} MB" for n, s in figures["largest"]))  # type: ignore[attr-defined]
    if args.json_out:
        args.json_out.write_text(json.dumps(figures, indent=2) + "\n")


if __name__ == "__main__":
    main()
