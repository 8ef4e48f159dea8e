"""``env install``'s registration: a frozen NeMo Gym environment's exams become benchmarks of the
NeMo Gym checkout ``MONTE_LOCAL`` names.

For each exam, ``benchmarks/monte/<env>/<exam>/`` gets ``config.yaml`` (chaining the server's own
config, as NeMo Gym's benchmarks do), ``prepare.py`` (whose ``prepare()`` proves the frozen rows'
sha256 and returns their path) and ``data/dev.jsonl``, a byte copy of the frozen dev split. The
benchmark is named ``monte_<env>_<exam>``: ``gym eval prepare --benchmark monte_<env>_<exam>``
finds it. The curriculum, when there is one, goes to ``benchmarks/monte/<env>/curriculum.yaml``
(an agent with a ``train`` dataset) and ``curriculum/train.jsonl``.

The test split is not registered: it is sealed, and a read outside monte would be a touch the
record cannot see.

When NeMo Gym's interpreter is known, each written config is parsed by NeMo Gym's own
``BenchmarkConfig`` (``launch.py check``): what monte registers, NeMo Gym reads.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

from monte.envs.nemo import stack as gym_stack
from monte.envs.nemo.stack import LOCAL, PROVIDER
from monte.errors import error
from monte.hashing import sha256_bytes
from monte.manifest import Manifest

PREPARE = '''"""Written by monte (`monte env install {env}`): the frozen rows need no preparing, only proving."""

import hashlib
from pathlib import Path

DATA = Path(__file__).parent / "data" / "dev.jsonl"
SHA256 = "{sha256}"


def prepare() -> Path:
    digest = hashlib.sha256(DATA.read_bytes()).hexdigest()
    if digest != SHA256:
        raise RuntimeError(f"{{DATA}} differs from monte's frozen split (sha256 {{digest}}, frozen {{SHA256}}): "
                           "run `monte env install {env}` again")
    return DATA
'''


def is_gym(m: Manifest) -> bool:
    return (m.grader or {}).get("kind") == PROVIDER


def _safe(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_]", "_", name)


def require_checkout(name: str) -> Path:
    """The checkout ``MONTE_LOCAL`` names, or ``E_NOT_FOUND`` naming it (docs/environments.md, "Install")."""
    root, why = gym_stack.local_checkout()
    if root is None:
        raise error("E_NOT_FOUND", f"environment {name!r} is graded by NeMo Gym, and installing it registers its "
                    f"benchmark configs in the NeMo Gym checkout; this machine has no stack there ({why})",
                    f"set {LOCAL} to a NeMo Gym checkout (a clone of NVIDIA-NeMo/Gym), then run "
                    f"`monte env install {name}` again")
    return root


def register(m: Manifest, folder: Path, root: Path) -> list[str]:
    """Write each exam's benchmark (and the curriculum's config) into ``root``; returns the
    benchmark names. Idempotent: the same manifest writes the same bytes."""
    grader = m.grader or {}
    base = root / "benchmarks" / "monte" / _safe(m.name)
    rel_base = f"benchmarks/monte/{_safe(m.name)}"
    staged = base.with_name(f".{base.name}.staging")
    shutil.rmtree(staged, ignore_errors=True)
    names: list[str] = []
    configs: list[str] = []
    servers: dict[str, Any] = grader.get("servers") or {}
    try:
        for exam, splits in sorted(m.exams.items()):
            if "dev" not in splits or exam not in servers:
                continue
            ident = servers[exam]
            bench = f"monte_{_safe(m.name)}_{_safe(exam)}"
            out = staged / _safe(exam)
            (out / "data").mkdir(parents=True)
            raw = (folder / splits["dev"]).read_bytes()
            (out / "data" / "dev.jsonl").write_bytes(raw)
            (out / "prepare.py").write_text(PREPARE.format(env=m.name, sha256=sha256_bytes(raw)), encoding="utf-8")
            rel = f"{rel_base}/{_safe(exam)}"
            instance = f"{bench}_resources_server"
            chain, inst_block = _instance_block(root, ident)
            doc = {
                "config_paths": chain,
                instance: inst_block,
                f"{bench}_simple_agent": _agent(instance, [{
                    "name": bench, "type": "benchmark", "jsonl_fpath": f"{rel}/data/dev.jsonl",
                    "prepare_script": f"{rel}/prepare.py", "prompt_config": None, "num_repeats": 1}]),
            }
            _write_yaml(out / "config.yaml", doc, header=_header(m, f"exam {exam} (its dev split)"))
            names.append(bench)
            configs.append(f"{rel}/config.yaml")
        cur = grader.get("curriculum")
        if m.curriculum and isinstance(cur, dict):
            (staged / "curriculum").mkdir(parents=True)
            shutil.copyfile(folder / m.curriculum, staged / "curriculum" / "train.jsonl")
            instance = f"monte_{_safe(m.name)}_curriculum_resources_server"
            chain, inst_block = _instance_block(root, cur)
            doc = {"config_paths": chain, instance: inst_block,
                   f"monte_{_safe(m.name)}_curriculum_simple_agent": _agent(instance, [{
                       "name": f"monte_{_safe(m.name)}_train", "type": "train",
                       "jsonl_fpath": f"{rel_base}/curriculum/train.jsonl", "license": "TBD"}])}
            _write_yaml(staged / "curriculum.yaml", doc, header=_header(m, "the curriculum"))
            configs.append(f"{rel_base}/curriculum.yaml")
        shutil.rmtree(base, ignore_errors=True)
        base.parent.mkdir(parents=True, exist_ok=True)
        staged.rename(base)
    finally:
        shutil.rmtree(staged, ignore_errors=True)
    stack = gym_stack.find()
    if stack is not None and stack.root == root and stack.python:
        for cfg in configs:
            _check(stack.python, root, cfg, base)
    return names


def _instance_block(root: Path, ident: dict[str, Any]) -> tuple[list[str], dict[str, Any]]:
    """The ``config_paths`` and resources server instance a registered config uses: for a server,
    its own config and a copy of its instance; for a benchmark, the benchmark's own chain and its
    instance block (its config.yaml holds a benchmark dataset of its own, so it cannot be chained
    itself). NeMo Gym's ``_copy``, not ``_inherit_from``: inheriting pops the source instance,
    and the chained config's own agents, which name it, would no longer resolve."""
    if ident.get("kind") == "benchmark":
        data = gym_stack.load_yaml(root / str(ident["config"]))
        block = data.get(str(ident["instance"]))
        if not isinstance(block, dict):
            raise error("E_NOT_FOUND", f"{root / str(ident['config'])} no longer defines {ident['instance']!r}",
                        f"point {LOCAL} at a NeMo Gym checkout of the version the environment was frozen with "
                        f"({ident.get('version')})")
        block = dict(block)
        if "_inherit_from" in block:
            block["_copy"] = block.pop("_inherit_from")
        return [str(p) for p in data.get("config_paths") or []], block
    return [str(ident["config"])], {"_copy": str(ident["instance"])}


def _agent(instance: str, datasets: list[dict[str, Any]]) -> dict[str, Any]:
    return {"responses_api_agents": {"simple_agent": {
        "entrypoint": "app.py",
        "resources_server": {"type": "resources_servers", "name": instance},
        "model_server": {"type": "responses_api_models", "name": "policy_model"},
        "datasets": datasets}}}


def _header(m: Manifest, what: str) -> str:
    return (f"# Registered by monte (`monte env install {m.name}`): {what} of environment {m.name},\n"
            f"# fingerprint {m.fingerprint}. Frozen rows: do not edit; install again to restore.\n")


def _write_yaml(path: Path, doc: dict[str, Any], *, header: str) -> None:
    from io import StringIO

    from ruamel.yaml import YAML

    yaml = YAML(typ="safe", pure=True)
    yaml.default_flow_style = False
    buf = StringIO()
    yaml.dump(doc, buf)
    path.write_text(header + buf.getvalue(), encoding="utf-8")


def _check(python: str, root: Path, config: str, base: Path) -> None:
    from monte.envs.nemo.server import LAUNCHER

    r = subprocess.run([python, str(LAUNCHER), "check", "--root", str(root), "--config", config,
                        *(["--any"] if config.endswith("/curriculum.yaml") else [])],
                       cwd=root, capture_output=True, text=True)
    msg: dict[str, Any] = {}
    for line in reversed(r.stdout.strip().splitlines()):
        try:
            msg = json.loads(line)
            break
        except ValueError:
            continue
    if r.returncode != 0 or "error" in msg:
        shutil.rmtree(base, ignore_errors=True)
        raise error("E_ENV", f"NeMo Gym at {root} cannot read the benchmark config monte wrote ({config}): "
                    f"{msg.get('message') or r.stderr.strip()[-500:]}",
                    f"check that {LOCAL} is a NeMo Gym checkout of the version the environment was frozen with")
