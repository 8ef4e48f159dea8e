"""Past one process: how a chunk is launched across processes and machines, and the launch record.

monte drives the engines a user already runs; it does not build its own:

- **torchrun** (``python -m torch.distributed.run``) starts the ranks of a chunk on this machine:
  ``--processes N`` ranks per node. With ``--nodes M`` it starts M torchrun agents, one per node,
  that meet at a static rendezvous on ``127.0.0.1`` (loopback nodes: how a multi-node launch is
  exercised on one machine).
- **accelerate launch** runs them instead when there are GPUs (``--multi_gpu``, TRL's supported
  path) or when the user hands ``--accelerate-config FILE``; the YAML is frozen into the plan by
  content and sha256 and the ranks read the frozen copy, never the user's file.
- On CPU the backend is gloo: the trainer is built with ``use_cpu=True`` and accelerate's state
  picks MULTI_CPU/gloo from torchrun's environment. Every rank runs with ``OMP_NUM_THREADS=1``
  unless the caller set it.

What a chunk's ranks do: each rank (``monte.training.launch_rank``) builds the same TRL trainer and
trains its share; the trainer's main process saves the checkpoint. None of them writes the
ledger: the one ``monte train`` process that planned the chunk owns the row, waits for every
rank, and records the checkpoint only when all of them exited 0. A rank that dies fails the run
with ``E_RANK`` naming it; the other ranks are stopped, the whole process group of each node is
killed, and no checkpoint is recorded.

The batch a recipe states is the chunk's, whatever the process count: ``per_device_train_batch_size
x gradient_accumulation_steps`` is the effective batch on one process, and N processes each take a
1/N share of it (the per-device batch divided, else the accumulation), so the effective batch,
the data order and the updates stay those of one process. A batch that does not split refuses.
The process count is an execution detail: it is recorded on the row, never in a cohort.

This module imports no torch, transformers or TRL: planning a launch reads package versions from
their metadata.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
from collections.abc import Sequence
from importlib import metadata
from importlib.util import find_spec
from pathlib import Path
from typing import Any, Protocol

from pydantic import BaseModel

from monte.errors import error
from monte.processes import run_together

#: The packages whose versions a launch record names (None: not installed here).
VERSIONED = ("torch", "transformers", "trl", "accelerate", "vllm", "deepspeed", "datasets")
#: accelerate ``distributed_type`` values that need GPUs (nccl or a GPU-only engine).
GPU_TYPES = frozenset({"MULTI_GPU", "DEEPSPEED", "FSDP", "MEGATRON_LM", "XLA"})
#: accelerate ``distributed_type`` values a chunk can run under on CPU (gloo).
CPU_TYPES = frozenset({"MULTI_CPU", "NO"})
LOOPBACK = "127.0.0.1"
#: the file in a run's folder where each launch keeps its job, its frozen YAML and its rank logs
LAUNCH_DIR = "launch"


_HOST = re.compile(r"(?:(?P<user>[A-Za-z0-9._-]+)@)?(?P<host>[A-Za-z0-9._-]+|\[[0-9A-Fa-f:]+\])(?::(?P<port>\d+))?\Z")


class Host(BaseModel):
    """One machine of ``--hosts``: ``[USER@]HOST[:PORT]``."""

    user: str | None = None
    host: str
    port: int = 22

    @property
    def login(self) -> str:
        return f"{self.user + '@' if self.user else ''}{self.host}{'' if self.port == 22 else f':{self.port}'}"

    @property
    def address(self) -> str:
        return self.host.strip("[]")


def parse_hosts(text: str | Sequence[str]) -> list[Host]:
    """``[USER@]HOST[:PORT]`` entries, comma-separated (or a list of them); E_USAGE otherwise."""
    items = [p.strip() for p in (text.split(",") if isinstance(text, str) else text)]
    if not items or any(not p for p in items):
        raise error("E_USAGE", f"--hosts {text!r}: an empty host name",
                    "pass --hosts HOST1,HOST2 ([USER@]HOST[:PORT] each)")
    out = []
    for item in items:
        m = _HOST.match(item)
        port = int(m.group("port")) if m and m.group("port") else 22
        if not m or not 0 < port < 65536:
            raise error("E_USAGE", f"--hosts: {item!r} is not [USER@]HOST[:PORT]",
                        "pass --hosts HOST1,HOST2, e.g. --hosts ubuntu@10.0.0.1,ubuntu@10.0.0.2:2222")
        out.append(Host(user=m.group("user"), host=m.group("host"), port=port))
    return out


class LaunchSpec(BaseModel):
    """How a chunk runs: the plan's launch, and (``record()``) what its train row records."""

    world_size: int = 1
    nodes: int = 1
    processes_per_node: int = 1
    backend: str | None = None  # gloo | nccl; None: one process, no process group
    launcher: str = "none"  # none | torchrun | accelerate
    port: int | None = None  # the rendezvous port the user named (else one is picked at launch)
    #: the machines the nodes run on (``--hosts``, [USER@]HOST[:PORT] each; node K on host K, the
    #: rendezvous on the first); empty: every node on this machine, meeting on 127.0.0.1
    hosts: list[str] = []
    ssh_key: str | None = None  # the key that opens the hosts (an execution detail, never recorded)
    #: where the user's accelerate YAML is on this machine (None for a profile): a ``--remote``
    #: job names it in the box's checkout (an execution detail, never recorded)
    config_path: str | None = None
    #: per_device_train_batch_size x gradient_accumulation_steps x world_size
    effective_batch: int = 0
    per_device_batch: int = 0
    gradient_accumulation_steps: int = 1
    config: dict[str, Any] | None = None  # the accelerate YAML: {name, content, sha256, distributed_type}
    config_sha256: str | None = None
    seeds: dict[str, int] = {}
    versions: dict[str, str | None] = {}
    python: str = ""
    gpus: list[dict[str, str]] = []  # {model, driver}, one per GPU (none on CPU)
    generation: str | None = None  # grpo / rloo / distillation: "vllm" (TRL's use_vllm) or "hf"

    def record(self) -> dict[str, Any]:
        """What a train row records (the port is an execution detail of one launch)."""
        return self.model_dump(mode="json", exclude={"port", "ssh_key", "config_path"})

    @property
    def master_addr(self) -> str:
        """Where the rendezvous is: the first host, else loopback."""
        return parse_hosts(self.hosts[:1])[0].address if self.hosts else LOOPBACK

    def trainer_overrides(self) -> dict[str, Any]:
        """The TRL config fields the launch decides: each rank's share of the recipe's batch,
        and vLLM generation when it is chosen."""
        out: dict[str, Any] = {}
        if self.world_size > 1:
            out.update(per_device_train_batch_size=self.per_device_batch,
                       gradient_accumulation_steps=self.gradient_accumulation_steps)
            if self.backend:
                out["ddp_backend"] = self.backend
        if self.generation == "vllm":
            out.update(use_vllm=True, vllm_mode="colocate")
        return out

    def lines(self) -> list[str]:
        if self.world_size <= 1 and not self.config:
            return [f"  launch: one process, effective batch {self.effective_batch}"]
        how = (f"{self.nodes} nodes x {self.processes_per_node} processes" if self.nodes > 1
               else f"{self.processes_per_node} processes")
        if self.hosts:
            how += f" on hosts {', '.join(self.hosts)} (rendezvous on {self.master_addr})"
        out = [f"  launch: {how} under {self.launcher} ({self.backend or 'no'} backend), effective batch "
               f"{self.effective_batch} = {self.per_device_batch} per device x {self.gradient_accumulation_steps} "
               f"accumulation x {self.world_size}"]
        if self.config:
            kind = "profile" if self.config.get("profile") else "config"
            out.append(f"  accelerate {kind} {self.config['name']} (sha256 {str(self.config_sha256)[:12]}), "
                       "frozen into the plan")
        return out


# --- planning: every refusal before the `started` record -----------------------------------------


def versions() -> dict[str, str | None]:
    out: dict[str, str | None] = {}
    for name in VERSIONED:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = None
    return out


def gpus() -> list[dict[str, str]]:
    """Each GPU's model and driver, from ``nvidia-smi`` (none when it is not there)."""
    smi = shutil.which("nvidia-smi")
    if not smi:
        return []
    try:
        out = subprocess.run([smi, "--query-gpu=name,driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=20, check=True).stdout
    except (OSError, subprocess.SubprocessError):
        return []
    found = []
    for line in out.splitlines():
        if "," in line:
            model, driver = (part.strip() for part in line.split(",", 1))
            found.append({"model": model, "driver": driver})
    return found


def port_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind((LOOPBACK, port))
        except OSError:
            return False
    return True


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((LOOPBACK, 0))
        return int(s.getsockname()[1])


def profiles() -> dict[str, str]:
    """The accelerate profiles monte ships (``--accelerate-config NAME``): name -> its first line."""
    from importlib import resources

    out = {}
    for entry in sorted(resources.files("monte.training").joinpath("accelerate").iterdir(), key=lambda e: e.name):
        if entry.name.endswith(".yaml"):
            first = entry.read_text("utf-8").splitlines()[0]
            out[entry.name[:-5]] = first.split(":", 1)[1].strip() if ":" in first else first
    return out


def profile_text(name: str) -> bytes:
    from importlib import resources

    return resources.files("monte.training").joinpath("accelerate", f"{name}.yaml").read_bytes()


def is_profile_name(value: str | Path) -> bool:
    """``--accelerate-config`` names a profile (a bare name, no folder, no .yaml) rather than a file."""
    text = str(value)
    return bool(re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_-]*", text)) and not Path(text).exists()


def read_accelerate_config(path: Path | str, *, cuda: bool) -> dict[str, Any]:
    """The accelerate YAML (a user's file, or a profile monte ships, by name), parsed and checked
    against this machine: an unknown profile refuses E_NOT_FOUND naming the known ones; a file
    that does not parse refuses E_BAD_INPUT; a distributed type that needs GPUs (nccl) on a
    machine without them refuses E_LAUNCH."""
    from ruamel.yaml import YAML
    from ruamel.yaml.error import YAMLError

    profile = None
    if is_profile_name(path):
        known = profiles()
        profile = str(path)
        if profile not in known:
            raise error("E_NOT_FOUND", f"no accelerate profile named {profile!r} (and no file of that name)",
                        f"name one of monte's profiles ({', '.join(known)}) or pass the path of an accelerate "
                        "YAML (`accelerate config` writes one)")
        raw = profile_text(profile)
        label = f"the accelerate profile {profile}"
    else:
        path = Path(path)
        try:
            raw = path.read_bytes()
        except OSError as e:
            raise error("E_NOT_FOUND", f"the accelerate config {path} cannot be read ({e.strerror})",
                        "pass the path of an accelerate YAML (`accelerate config` writes one), or a profile "
                        f"name ({', '.join(profiles())})") from None
        label = f"the accelerate config {path}"
    try:
        data = YAML(typ="safe").load(raw.decode("utf-8"))
    except (YAMLError, UnicodeDecodeError) as e:
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise error("E_BAD_INPUT", f"{label} does not parse as YAML: {first}",
                    "fix the file, or write one with `accelerate config`") from None
    if not isinstance(data, dict):
        raise error("E_BAD_INPUT", f"{label} is not a YAML mapping",
                    "an accelerate config maps keys (distributed_type, num_processes, ...) to values")
    kind = str(data.get("distributed_type", "NO")).upper()
    backend = str(data.get("backend") or data.get("ddp_backend") or "").lower() or None
    if not cuda and (kind in GPU_TYPES or backend == "nccl"):
        what = f"backend {backend}" if backend == "nccl" else f"distributed_type {kind}"
        raise error("E_LAUNCH", f"{label} names {what}, which needs GPUs (nccl); "
                    "this machine has none", "use `--accelerate-config cpu-ddp` or `distributed_type: MULTI_CPU` "
                    "(gloo) here, or run the chunk on a GPU box (--remote)")
    if kind not in GPU_TYPES | CPU_TYPES:
        raise error("E_LAUNCH", f"{label} names distributed_type {kind}, which monte "
                    "does not launch", f"use one of {', '.join(sorted(GPU_TYPES | CPU_TYPES))}")
    if backend not in (None, "gloo", "nccl"):
        raise error("E_LAUNCH", f"{label} names backend {backend!r}, which is not there",
                    "use gloo (CPU) or nccl (GPUs), or leave the backend out")
    return {"name": profile or Path(path).name, "profile": profile, "content": raw.decode("utf-8"),
            "sha256": hashlib.sha256(raw).hexdigest(), "distributed_type": kind, "data": data}


def generation_engine(settings: dict[str, Any], algorithm: str, *, vllm: bool, cuda: bool) -> str | None:
    """GRPO's, RLOO's and distillation's generation: TRL's vLLM path (``use_vllm``) where vLLM and
    a GPU exist and the recipe does not turn it off, else the trainer's own HF ``generate``. A
    recipe that asks for vLLM where it is not refuses E_LAUNCH."""
    if algorithm not in ("grpo", "rloo", "distillation"):
        return None
    asked = settings.get("use_vllm")
    if asked is True and not (vllm and cuda):
        raise error("E_LAUNCH", "the recipe sets use_vllm: true, but " + ("vLLM is not installed here" if not vllm
                    else "this machine has no GPU for vLLM"),
                    "drop use_vllm (monte then uses vLLM where it exists, HF generation elsewhere)")
    if asked is False:
        return "hf"
    return "vllm" if vllm and cuda and algorithm in ("grpo", "rloo") else "hf"


def _split_batch(batch: int, accum: int, world: int) -> tuple[int, int]:
    """Each rank's (per-device batch, accumulation) for ``world`` ranks, keeping their product x
    world equal to ``batch x accum``."""
    if world <= 1:
        return batch, accum
    if batch % world == 0:
        return batch // world, accum
    if accum % world == 0:
        return batch, accum // world
    raise error("E_LAUNCH", f"the recipe's batch ({batch} per device x {accum} accumulation = {batch * accum}) "
                f"does not split over {world} processes: the effective batch would change",
                f"make per_device_train_batch_size (or gradient_accumulation_steps) a multiple of {world}, "
                "or launch a process count that divides it")


def plan_launch(settings: dict[str, Any], algorithm: str, *, processes: int | None = 1, nodes: int = 1,
                accelerate_config: Path | str | None = None, port: int | None = None,
                cuda: bool | None = None, hosts: str | None = None, ssh_key: str | None = None) -> LaunchSpec:
    """The chunk's launch, every refusal proven before anything is written. ``processes``: ranks
    per node (default: the accelerate config's ``num_processes`` per machine, else 1)."""
    cuda = has_cuda() if cuda is None else cuda
    if processes is not None and processes < 1:
        raise error("E_USAGE", f"--processes {processes}: a chunk runs on at least one process",
                    "pass --processes 1 or more (ranks per node)")
    if nodes < 1:
        raise error("E_USAGE", f"--nodes {nodes}: a chunk runs on at least one node", "pass --nodes 1 or more")
    parsed_hosts = []
    if hosts is not None:
        parsed_hosts = parse_hosts(hosts)
        if nodes not in (1, len(parsed_hosts)):
            raise error("E_USAGE", f"--nodes {nodes} with {len(parsed_hosts)} --hosts: one node runs on each host",
                        "leave --nodes out with --hosts (the node count is the host count)")
        nodes = len(parsed_hosts)
    config = read_accelerate_config(accelerate_config, cuda=cuda) if accelerate_config else None
    if processes is None:
        data = (config or {}).get("data", {})
        machines = int(data.get("num_machines", 1) or 1)
        processes = max(int(data.get("num_processes", 1) or 1) // max(machines, 1), 1)
    world = processes * nodes
    if str(settings.get("ddp_backend") or "").lower() == "nccl" and not cuda:
        raise error("E_LAUNCH", "the recipe sets ddp_backend: nccl, which needs GPUs; this machine has none",
                    "drop ddp_backend (monte uses gloo on CPU, nccl on GPUs)")
    if port is not None:
        if not 0 < port < 65536:
            raise error("E_USAGE", f"--port {port} is not a TCP port", "pass a port between 1024 and 65535")
        if world > 1 and not parsed_hosts and not port_free(port):
            raise error("E_LAUNCH", f"the rendezvous port {LOOPBACK}:{port} is in use",
                        "pass another --port, or leave it out and monte picks a free one")
    batch = int(settings.get("per_device_train_batch_size", 8))
    accum = int(settings.get("gradient_accumulation_steps", 1))
    per_device, per_accum = _split_batch(batch, accum, world)
    launcher = "none" if world <= 1 and not config else "accelerate" if (config or cuda) else "torchrun"
    if config:
        config = {k: v for k, v in config.items() if k != "data"}
    return LaunchSpec(
        world_size=world, nodes=nodes, processes_per_node=processes,
        hosts=[h.login for h in parsed_hosts], ssh_key=ssh_key if parsed_hosts else None,
        backend=None if world <= 1 else ("nccl" if cuda else "gloo"), launcher=launcher, port=port,
        effective_batch=per_device * per_accum * world, per_device_batch=per_device,
        gradient_accumulation_steps=per_accum, config=config,
        config_sha256=config["sha256"] if config else None,
        config_path=(str(Path(accelerate_config).resolve())
                     if accelerate_config is not None and config and not config.get("profile") else None),
        seeds={"seed": int(settings.get("seed", 0)), "data_seed": int(settings.get("data_seed", settings.get("seed", 0)))},
        versions=versions(), python=sys.version.split()[0], gpus=gpus() if cuda else [],
        generation=generation_engine(settings, algorithm, vllm=find_spec("vllm") is not None, cuda=cuda))


def has_cuda() -> bool:
    """Whether this machine has a GPU torch can use (asked of torch only when nvidia-smi lists one)."""
    if not shutil.which("nvidia-smi"):
        return False
    import torch

    return bool(torch.cuda.is_available())


# --- the rank commands ---------------------------------------------------------------------------


def rank_env(base: dict[str, str] | None = None, *, cuda: bool = False) -> dict[str, str]:
    """The environment every rank gets: this one, with one CPU thread per rank on CPU (two
    ranks on a busy machine are many times slower otherwise) and no inherited rank variables."""
    env = dict(os.environ if base is None else base)
    for k in ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "GROUP_RANK"):
        env.pop(k, None)
    if not cuda:
        env.setdefault("OMP_NUM_THREADS", "1")
        env.setdefault("MKL_NUM_THREADS", env["OMP_NUM_THREADS"])
        env["ACCELERATE_USE_CPU"] = "true"
    env.setdefault("TOKENIZERS_PARALLELISM", "false")
    env["PYTHONUNBUFFERED"] = "1"
    return env


def rank_command(spec: LaunchSpec, node: int, port: int | str, job: Path | str, *, python: str | None = None,
                 config_file: Path | str | None = None, module: str = "monte.training.launch_rank") -> list[str]:
    """The argv of one node's launcher: torchrun, or accelerate launch (GPUs, or a user's YAML)."""
    py = python or sys.executable
    if spec.launcher == "accelerate":
        argv = [py, "-m", "accelerate.commands.launch"]
        if config_file is not None:
            argv += ["--config_file", str(config_file)]
        kind = (spec.config or {}).get("distributed_type", "MULTI_GPU")
        if spec.world_size > 1 and kind in ("MULTI_GPU", "MULTI_CPU", "NO"):
            # accelerate's own CPU path is mpirun; --multi_gpu makes it run torch.distributed.run,
            # and on CPU each rank's trainer (use_cpu=True) takes gloo
            argv.append("--multi_gpu")
        argv += ["--num_processes", str(spec.world_size), "--num_machines", str(spec.nodes),
                 "--machine_rank", str(node), "--main_process_ip", spec.master_addr, "--main_process_port", str(port),
                 "--mixed_precision", str(((spec.config or {}).get("content") and _yaml_value(spec, "mixed_precision"))
                                          or "no"), "--dynamo_backend", "no"]
        if spec.nodes > 1:
            argv.append("--same_network")
        return [*argv, "-m", module, str(job)]
    return [py, "-m", "torch.distributed.run", "--nnodes", str(spec.nodes), "--node_rank", str(node),
            "--nproc_per_node", str(spec.processes_per_node), "--master_addr", spec.master_addr,
            "--master_port", str(port), "--max_restarts", "0", "--monitor_interval", "0.5",
            "-m", module, str(job)]


def _yaml_value(spec: LaunchSpec, key: str) -> Any:
    from ruamel.yaml import YAML

    data = YAML(typ="safe").load((spec.config or {}).get("content") or "") or {}
    return data.get(key) if isinstance(data, dict) else None


# --- running the ranks ---------------------------------------------------------------------------


class NodeRunner(Protocol):
    """Starts a launch's nodes somewhere else than this machine (``--hosts``: over SSH,
    :class:`monte.remote.hosts.SSHNodes`), with :func:`monte.processes.run_together`'s contract:
    the (node, exit status) of each that failed, every node stopped before it returns."""

    def free_port(self, spec: LaunchSpec) -> int: ...

    def run(self, spec: LaunchSpec, commands: Sequence[Sequence[str]], folder: Path, *, cwd: Path,
            env: dict[str, str], poll: float) -> list[tuple[int, int]]: ...


class RankResult(BaseModel):
    checkpoint: str
    step: int


def run_ranks(spec: LaunchSpec, job: dict[str, Any], folder: Path, *, cwd: Path,
              poll: float = 0.2, nodes: NodeRunner | None = None) -> RankResult:
    """Start every node's launcher, wait for all of them, and return what rank 0 saved. A node
    that exits non-zero stops the others; whatever happens, every node's process group is
    killed before this returns, so no rank outlives the chunk. A failure refuses E_RANK
    naming the rank that died first."""
    folder.mkdir(parents=True, exist_ok=True)
    for old in [*folder.glob("rank-*"), *folder.glob("node-*.pgid")]:
        old.unlink()
    config_file = None
    if spec.config:
        config_file = folder / "accelerate.yaml"  # the frozen copy: the ranks never read the user's file
        config_file.write_text(spec.config["content"], encoding="utf-8")
    job_file = folder / "job.json"
    job_file.write_text(json.dumps({**job, "dir": str(folder)}, sort_keys=True), encoding="utf-8")
    env = rank_env(cuda=bool(spec.gpus))
    if spec.hosts:  # node K on host K
        if nodes is None:
            raise error("E_INTERNAL", "a launch on --hosts was run without a way to reach the hosts",
                        "run it through monte train (monte.api.run_train)")
        port = spec.port or nodes.free_port(spec)
        failed = nodes.run(spec, [rank_command(spec, node, port, job_file, config_file=config_file)
                                  for node in range(spec.nodes)], folder, cwd=cwd, env=env, poll=poll)
    else:
        port = spec.port or free_port()
        failed = run_together([rank_command(spec, node, port, job_file, config_file=config_file)
                               for node in range(spec.nodes)],
                              [folder / f"node-{node}.log" for node in range(spec.nodes)], cwd=cwd, env=env,
                              poll=poll)  # (node, exit status) of each that failed
        stop_strays(folder)  # a rank whose launcher was killed outright
    done = folder / "rank-0.done"
    if not failed and done.is_file():
        return RankResult.model_validate_json(done.read_text(encoding="utf-8"))
    raise rank_failure(spec, folder, failed)


def stop_strays(folder: Path, *, grace: float = 5.0) -> None:
    """SIGKILL every rank of this launch still running here (torchrun starts its workers in
    sessions of their own, so a launcher killed outright leaves them outside its process group),
    and wait until they are gone. A pid that now names another program is left alone."""
    import time

    left = []
    for path in folder.glob("rank-*.pid"):
        try:
            pid = int(path.read_text(encoding="utf-8") or 0)
            if pid and b"launch_rank" in Path(f"/proc/{pid}/cmdline").read_bytes():
                os.kill(pid, signal.SIGKILL)
                left.append(pid)
        except (OSError, ValueError):
            continue
    deadline = time.monotonic() + grace
    while left and time.monotonic() < deadline:
        left = [p for p in left if _running(p)]
        time.sleep(0.05)


def _running(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


_ROOT_CAUSE = re.compile(r"Root Cause.*?rank\s*:\s*(\d+).*?exitcode\s*:\s*(-?\d+)", re.S)


def rank_failure(spec: LaunchSpec, folder: Path, failed: list[tuple[int, int]]) -> Exception:
    """E_RANK naming the rank that died first: its own error file (an exception it raised), else
    the root cause torchrun reports (a rank killed by a signal), else the node that exited."""
    errors = sorted(folder.glob("rank-*.error"), key=lambda p: p.stat().st_mtime)
    for path in errors:
        info = json.loads(path.read_text(encoding="utf-8"))
        return _rank_error(spec, int(info["rank"]), info.get("error", "it raised"), folder)
    for node, _code in failed or [(0, 1)]:
        text = (folder / f"node-{node}.log").read_text(encoding="utf-8", errors="replace")
        m = _ROOT_CAUSE.search(text)
        if m:
            code = int(m.group(2))
            why = (f"killed by signal {-code} ({signal.Signals(-code).name})" if code < 0 and -code in
                   signal.valid_signals() else f"exit status {code}")
            return _rank_error(spec, int(m.group(1)), why, folder)
    node, code = (failed or [(0, 1)])[0]
    first = node * spec.processes_per_node
    return _rank_error(spec, first, f"its node's launcher exited with status {code}", folder,
                       label=f"a rank of node {node} (ranks {first}-{first + spec.processes_per_node - 1})")


def _rank_error(spec: LaunchSpec, rank: int, why: str, folder: Path, label: str | None = None) -> Exception:
    return error("E_RANK", f"{label or f'rank {rank}'} of {spec.world_size} died ({why}); every other rank was "
                 "stopped and the chunk recorded no checkpoint",
                 f"read the rank logs in {folder} (node-N.log) and `monte logs RUN`, fix the cause, and "
                 "train the chunk again")


# --- rerun ---------------------------------------------------------------------------------------


#: what monte sets in every rank's environment on CPU (rank_env); the rest is inherited
RANK_ENV_CPU = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "ACCELERATE_USE_CPU": "true",
                "TOKENIZERS_PARALLELISM": "false", "PYTHONUNBUFFERED": "1"}


def rerun(experiment: str, run: str, plan: dict[str, Any], folder: str, *, smoke: bool = False) -> dict[str, Any]:
    """The exact command that launches a recorded train row's chunk again, its environment,
    and the rank launchers it starts (``monte rerun RUN --dry-run``). ``folder``: the run's
    launch folder on this data root (where the frozen accelerate YAML is)."""
    rec = plan.get("launch") or {}
    spec = LaunchSpec.model_validate(rec) if rec else LaunchSpec()
    recipe = plan.get("recipe") or {}
    parent = plan.get("parent")
    argv = ["monte", "train", "--experiment", experiment, "--recipe", str(recipe.get("name")),
            "--source", str(plan.get("source"))]
    argv += ["--smoke"] if smoke else [f"--parent={parent['run']}@{parent['step']}"] if parent else ["--from-base"]
    if plan.get("base_model"):
        argv += ["--model", str(plan["base_model"])]
    config_file = f"{folder}/accelerate.yaml" if spec.config else None
    if spec.world_size > 1 or spec.config:
        argv += ["--processes", str(spec.processes_per_node)]
        if spec.hosts:
            argv += ["--hosts", ",".join(spec.hosts)]
        elif spec.nodes > 1:
            argv += ["--nodes", str(spec.nodes)]
        if config_file:  # a profile monte ships is named, while it still holds the bytes the run froze
            argv += ["--accelerate-config", _shipped_profile(spec.config) or config_file]
    argv.append("--yes")
    env = dict(RANK_ENV_CPU) if spec.world_size > 1 and not spec.gpus else {}
    ranks = ([rank_command(spec, node, "PORT", f"{folder}/job.json", python="python", config_file=config_file)
              for node in range(spec.nodes)] if spec.world_size > 1 or spec.config else [])
    return {"run": run, "experiment": experiment, "command": argv, "env": env, "ranks": ranks,
            "recipe_sha256": recipe.get("sha256"), "config_sha256": spec.config_sha256,
            "versions": spec.versions, "gpus": spec.gpus, "recorded": bool(rec)}


def _shipped_profile(config: dict[str, Any] | None) -> str | None:
    """The name of the profile ``config`` was frozen from, when monte still ships it unchanged."""
    import hashlib

    name = (config or {}).get("profile")
    if not name or name not in profiles():
        return None
    same = hashlib.sha256(profile_text(str(name))).hexdigest() == (config or {}).get("sha256")
    return str(name) if same else None


def launch_command(python: str, args: list[str], gpus: int) -> list[str]:
    """How a box runs ``monte train ARGS``: one process, or with several GPUs ``--processes``
    one per GPU: that one monte process records, and starts the ranks under ``accelerate
    launch --multi_gpu`` (TRL's supported multi-GPU path; :mod:`monte.training.launch`)."""
    if gpus <= 1:
        return [python, "-m", "monte", "train", *args]
    return [python, "-m", "monte", "train", *args, "--processes", str(gpus)]
