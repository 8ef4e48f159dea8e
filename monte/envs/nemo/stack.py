"""Where NeMo Gym is on this machine, and what it ships, read from its files alone.

A *stack* is a folder holding NeMo Gym's ``nemo_gym/`` and ``resources_servers/`` (a checkout, or
the ``site-packages`` of an environment it is installed in) plus, when one is known, an
interpreter that imports it. Found, in this order:

1. ``MONTE_LOCAL``: a NeMo Gym checkout. Its interpreter is ``MONTE_NEMO_GYM_PYTHON``, else the
   checkout's own ``.venv/bin/python``.
2. ``MONTE_NEMO_GYM_PYTHON``: the interpreter of a virtualenv with the ``nemo-gym`` package
   installed (``python -m monte.envs.nemo.venv DEST`` builds one on Python 3.11).
3. ``nemo_gym`` installed beside monte (Python >= 3.12): found, never imported.

Nothing here starts a process, imports NeMo Gym or reaches the network: ``env list --available``
reads the stack's YAML configs and folders.
"""

from __future__ import annotations

import os
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from monte.errors import error

PROVIDER = "nemo-gym"
LOCAL = "MONTE_LOCAL"
PYTHON = "MONTE_NEMO_GYM_PYTHON"

#: What freezes without a Hugging Face token, per server, beside the ``data/example.jsonl`` every
#: server ships (a handful of rows: enough for an exam that tests the plumbing, never a curriculum).
#: ``generator``: reasoning_gym's ``scripts/create_dataset.py``, run with a recorded seed.
OFFLINE_POOLS: dict[str, str] = {
    "math_with_judge": "resources_servers/ns_tools/data/compmath_test.jsonl",
    "math_formal_lean": "resources_servers/math_formal_lean/data/minif2f_test.jsonl",
}
GENERATORS: dict[str, str] = {"reasoning_gym": "resources_servers/reasoning_gym/scripts/create_dataset.py"}
EXAMPLE = "data/example.jsonl"


@dataclass(frozen=True)
class Stack:
    root: Path  # holds nemo_gym/, resources_servers/, benchmarks/
    python: str | None  # an interpreter that imports nemo_gym (None: found without one)
    origin: str  # "MONTE_LOCAL" | "MONTE_NEMO_GYM_PYTHON" | "package"
    version: str

    def describe(self) -> str:
        return f"NeMo Gym {self.version} at {self.root} ({self.origin})"


def _version(root: Path) -> str:
    """``nemo_gym/package_info.py``'s version, read as text (never imported)."""
    try:
        text = (root / "nemo_gym" / "package_info.py").read_text(encoding="utf-8")
    except OSError:
        return "unknown"
    parts = dict(re.findall(r"^(MAJOR|MINOR|PATCH|PRE_RELEASE)\s*=\s*['\"]?([^'\"\n]*)['\"]?\s*$", text, re.M))
    if not all(k in parts for k in ("MAJOR", "MINOR", "PATCH")):
        return "unknown"
    return f"{parts['MAJOR']}.{parts['MINOR']}.{parts['PATCH']}{parts.get('PRE_RELEASE', '')}"


def is_stack(root: Path) -> bool:
    return (root / "nemo_gym").is_dir() and (root / "resources_servers").is_dir()


def _site_packages(python: str) -> Path | None:
    """The site-packages of the virtualenv ``python`` belongs to, when it holds nemo_gym."""
    venv = Path(python).parent.parent  # never resolved: a venv's python is a symlink out of it
    for sp in sorted(venv.glob("lib/python3*/site-packages")) + sorted(venv.glob("Lib/site-packages")):
        if is_stack(sp):
            return sp
    return None


def local_checkout() -> tuple[Path | None, str]:
    """``MONTE_LOCAL`` when it names a NeMo Gym checkout, else ``None`` and why not."""
    value = os.environ.get(LOCAL, "")
    if not value:
        return None, f"{LOCAL} is not set"
    root = Path(os.path.expanduser(value))
    if not root.is_dir():
        return None, f"{LOCAL}={value} is not a folder"
    if not is_stack(root):
        return None, f"{LOCAL}={value} holds no NeMo Gym stack (no nemo_gym/ and resources_servers/ in it)"
    return root, ""


def find() -> Stack | None:
    """The NeMo Gym stack on this machine, or ``None`` (see the module's docstring)."""
    python = os.environ.get(PYTHON) or None
    if os.environ.get(LOCAL):
        root, _ = local_checkout()
        if root is None:
            return None
        if python is None and (root / ".venv" / "bin" / "python").exists():
            python = str(root / ".venv" / "bin" / "python")
        return Stack(root, python, LOCAL, _version(root))
    if python:
        sp = _site_packages(python)
        return Stack(sp, python, PYTHON, _version(sp)) if sp is not None else None
    from importlib.util import find_spec

    try:
        spec = find_spec("nemo_gym")  # finds the package; imports nothing
    except (ImportError, ValueError):
        spec = None
    if spec is not None and spec.origin:
        root = Path(spec.origin).parent.parent
        if is_stack(root):
            return Stack(root, sys.executable, "package", _version(root))
    return None


def require(what: str) -> Stack:
    stack = find()
    if stack is None:
        _, why = local_checkout()
        raise error("E_NOT_FOUND", f"{what} needs NeMo Gym, and none is found here"
                    + (f" ({why})" if os.environ.get(LOCAL) else ""),
                    f"set {LOCAL} to a NeMo Gym checkout, or {PYTHON} to the python of a virtualenv with "
                    "nemo-gym installed (`python -m monte.envs.nemo.venv DEST` builds one)")
    return stack


def require_python(stack: Stack, what: str) -> str:
    if stack.python is None:
        raise error("E_NOT_FOUND", f"{what} runs NeMo Gym's own code, and no interpreter for {stack.root} is known",
                    f"set {PYTHON} to a python that imports nemo_gym, or create {stack.root}/.venv")
    if not os.access(stack.python, os.X_OK):
        raise error("E_NOT_FOUND", f"{PYTHON}={stack.python} is not an executable interpreter",
                    f"point {PYTHON} at the python of a virtualenv with nemo-gym installed")
    return stack.python


# --- what the stack ships -------------------------------------------------------------------------


@dataclass(frozen=True)
class Dataset:
    """One dataset a server's config names (``datasets:`` of the agent that uses the server)."""

    name: str
    type: str  # "train" | "validation" | "example" | "benchmark"
    jsonl_fpath: str
    hf_repo: str | None = None
    hf_file: str | None = None
    license: str | None = None


@dataclass(frozen=True)
class GymEntry:
    name: str
    kind: Literal["server", "benchmark"]
    server: str  # the resources server's folder under resources_servers/
    config: str  # the config file, relative to the stack's root
    instance: str  # the resources server instance the config defines
    description: str
    judge: tuple[str, ...]  # the model servers /verify calls (empty: none)
    datasets: tuple[Dataset, ...] = ()
    offline: str | None = None  # what freezes without a token
    raw: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)

    @property
    def trainable(self) -> bool:
        """Can be a ``--server``: a train dataset its config names, or an offline curriculum."""
        if self.kind != "server":
            return False
        return any(d.type == "train" for d in self.datasets) or self.offline not in (None, EXAMPLE)


def load_yaml(path: Path) -> dict[str, Any]:
    from ruamel.yaml import YAML

    try:
        data = YAML(typ="safe", pure=True).load(path.read_text(encoding="utf-8"))
    except Exception:  # a config NeMo Gym itself could not read is not listed
        return {}
    return data if isinstance(data, dict) else {}


def _judges(cfg: dict[str, Any]) -> tuple[str, ...]:
    """The model servers a resources server instance's config refers to (its judges)."""
    if cfg.get("should_use_judge") is False:
        return ()
    out = []
    for key, value in cfg.items():
        if isinstance(value, dict) and value.get("type") == "responses_api_models":
            out.append(f"{key}={value.get('name')}")
    return tuple(sorted(out))


def _datasets(data: dict[str, Any], instance: str) -> tuple[Dataset, ...]:
    out = []
    for value in data.values():
        agents = value.get("responses_api_agents") if isinstance(value, dict) else None
        for agent in (agents or {}).values() if isinstance(agents, dict) else []:
            if not isinstance(agent, dict) or (agent.get("resources_server") or {}).get("name") != instance:
                continue
            for d in agent.get("datasets") or []:
                if not isinstance(d, dict) or not d.get("jsonl_fpath"):
                    continue
                hf = d.get("huggingface_identifier") or {}
                src = d.get("source") or {}
                if not hf and src.get("type") == "huggingface":
                    hf = src
                out.append(Dataset(str(d.get("name")), str(d.get("type")), str(d["jsonl_fpath"]),
                                   hf.get("repo_id"), hf.get("artifact_fpath"), d.get("license")))
    return tuple(out)


def _instance_of(data: dict[str, Any], folder: str) -> tuple[str, dict[str, Any]] | None:
    for key, value in data.items():
        servers = value.get("resources_servers") if isinstance(value, dict) else None
        if isinstance(servers, dict) and folder in servers and "_inherit_from" not in value:
            return key, servers[folder] or {}
    return None


def server_entry(root: Path, name: str) -> GymEntry | None:
    folder = root / "resources_servers" / name
    configs = sorted((folder / "configs").glob("*.yaml")) if (folder / "configs").is_dir() else []
    preferred = folder / "configs" / f"{name}.yaml"
    for path in ([preferred] if preferred in configs else []) + [c for c in configs if c != preferred]:
        data = load_yaml(path)
        found = _instance_of(data, name)
        if found is None:
            continue
        instance, cfg = found
        offline = ("generator" if name in GENERATORS and (root / GENERATORS[name]).is_file() else
                   OFFLINE_POOLS[name] if name in OFFLINE_POOLS and (root / OFFLINE_POOLS[name]).is_file() else
                   EXAMPLE if (folder / EXAMPLE).is_file() else None)
        return GymEntry(name=name, kind="server", server=name, config=str(path.relative_to(root)),
                        instance=instance, description=str(cfg.get("description") or "").strip(),
                        judge=_judges(cfg), datasets=_datasets(data, instance), offline=offline, raw=cfg)
    return None


def benchmark_entry(root: Path, name: str) -> GymEntry | None:
    """A benchmark: its ``config.yaml``, the resources server instance its benchmark dataset's
    agent uses, and that instance's server folder (through ``_inherit_from`` and ``config_paths``)."""
    path = root / "benchmarks" / name / "config.yaml"
    data = load_yaml(path) if path.is_file() else {}
    instance = None
    for value in data.values():
        agents = value.get("responses_api_agents") if isinstance(value, dict) else None
        for agent in (agents or {}).values() if isinstance(agents, dict) else []:
            if isinstance(agent, dict) and any(isinstance(d, dict) and d.get("type") == "benchmark"
                                               for d in agent.get("datasets") or []):
                instance = (agent.get("resources_server") or {}).get("name")
    if not instance or instance not in data or not isinstance(data[instance], dict):
        return None
    override = data[instance]
    chained: dict[str, Any] = {}
    for rel in data.get("config_paths") or []:
        chained.update(load_yaml(root / str(rel)))
    base = chained.get(override.get("_inherit_from", ""), override)
    servers = (base or {}).get("resources_servers") or {}
    if not isinstance(servers, dict) or len(servers) != 1:
        return None
    folder, cfg = next(iter(servers.items()))
    merged = {**(cfg or {}), **(((override.get("resources_servers") or {}).get(folder)) or {})}
    return GymEntry(name=name, kind="benchmark", server=str(folder), config=str(path.relative_to(root)),
                    instance=str(instance), description=str(merged.get("description") or "").strip(),
                    judge=_judges(merged), raw=merged)


def entries(stack: Stack) -> list[GymEntry]:
    """Every resources server and benchmark the stack ships, servers first, each sorted by name."""
    out: list[GymEntry] = []
    rs = stack.root / "resources_servers"
    for d in sorted(rs.iterdir()) if rs.is_dir() else []:
        if d.is_dir() and (d / "configs").is_dir():
            e = server_entry(stack.root, d.name)
            if e is not None:
                out.append(e)
    bm = stack.root / "benchmarks"
    for d in sorted(bm.iterdir()) if bm.is_dir() else []:
        if (d / "config.yaml").is_file():
            e = benchmark_entry(stack.root, d.name)
            if e is not None:
                out.append(e)
    return out


def resolve(stack: Stack, spec: str, *, want: Literal["server", "exam", "benchmark"]) -> GymEntry | None:
    """The entry ``spec`` names: ``server:NAME`` or ``benchmark:NAME`` exactly; a bare name is a
    server for ``--server``, and a benchmark before a server for an exam (``--benchmark``,
    ``--dev``, ``--test``). ``None`` when the stack has no such entry."""
    kind, _, bare = spec.rpartition(":")
    if kind and kind not in ("server", "benchmark"):
        return None
    order = [kind] if kind else (["server"] if want == "server" else ["benchmark", "server"])
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]*", bare):
        return None
    for k in order:
        e = server_entry(stack.root, bare) if k == "server" else benchmark_entry(stack.root, bare)
        if e is not None:
            return e
    return None
