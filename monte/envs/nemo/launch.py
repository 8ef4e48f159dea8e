"""Run inside NeMo Gym's own interpreter, never imported by monte: ``python launch.py COMMAND ...``.

monte runs NeMo Gym's unmodified code in the interpreter that has it installed (another
virtualenv, often another Python), so this file imports nothing of monte and only the standard
library before it hands over to NeMo Gym. Each command prints one JSON line on stdout: what it
did, or ``{"error": KIND, ...}`` with exit status 3, which monte turns into a refusal.

``serve``
    Start one resources server the way NeMo Gym's own tests build theirs, without ``ng_run``, a
    head server or Ray: the config is resolved by NeMo Gym's own parser (``config_paths``,
    ``_inherit_from``), the server class is the ``SimpleResourcesServer`` subclass its
    entrypoint defines, and uvicorn serves it on a socket bound here on 127.0.0.1. The ready line
    (``{"port": P, ...}``) is printed once the socket listens. The server exits when its stdin
    closes: monte holds the other end, so a monte that dies takes its server with it.
``prepare``
    A benchmark's ``prepare()``, imported and called as ``gym eval prepare`` does, then its
    ``prompt_config`` applied by NeMo Gym's own ``apply_prompt_to_row``; the rows go to ``--out``.
``check``
    Parse a benchmark config with NeMo Gym's own ``BenchmarkConfig`` (what ``env install``
    registered is proven readable by NeMo Gym itself); with ``--any``, any config NeMo Gym's
    parser resolves (a training config), listing its datasets.
"""

from __future__ import annotations

import argparse
import importlib
import inspect
import json
import os
import socket
import sys
import threading
import time
from pathlib import Path
from typing import Any

#: Our own stdout, kept for the JSON lines: file descriptor 1 itself is pointed at stderr (in
#: ``main``), so whatever NeMo Gym or a prepare script prints cannot be mistaken for them.
_OUT: Any = None


def say(obj: dict[str, Any]) -> None:
    out = _OUT or sys.stdout
    out.write(json.dumps(obj) + "\n")
    out.flush()


def fail(kind: str, **fields: Any) -> None:
    say({"error": kind, **fields})
    os._exit(3)


def _enter(root: str) -> None:
    sys.path.insert(0, root)
    os.chdir(root)


def _resolved_config(config: str) -> Any:
    """NeMo Gym's own config resolution, with its no-model defaults (a dummy policy model:
    resolving a config must not need one)."""
    from nemo_gym.global_config import GlobalConfigDictParser, GlobalConfigDictParserConfig
    from omegaconf import OmegaConf

    init = OmegaConf.merge(GlobalConfigDictParserConfig.NO_MODEL_GLOBAL_CONFIG_DICT, {"config_paths": [config]})
    return GlobalConfigDictParser().parse_no_environment(initial_global_config_dict=init)


def _watch_stdin() -> None:
    """Exit when stdin closes (the monte process that started this one is gone). Read with
    ``os.read`` on a copy of the descriptor, and fd 0 pointed at /dev/null: a thread blocked in
    ``sys.stdin.buffer.read`` holds the buffer's lock, and a server that forks per verify
    (math_with_judge) would deadlock in its child, which closes ``sys.stdin`` first thing."""
    fd = os.dup(0)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)

    def watch() -> None:
        try:
            while os.read(fd, 1):
                pass
        except OSError:
            pass
        os._exit(0)

    threading.Thread(target=watch, daemon=True).start()


def serve(args: argparse.Namespace) -> None:
    t0 = time.monotonic()
    _enter(args.root)
    _watch_stdin()
    try:
        global_config = _resolved_config(args.config)
    except Exception as e:
        fail("config", message=f"{type(e).__name__}: {e}"[:2000])
    from omegaconf import OmegaConf

    if args.instance not in global_config or "resources_servers" not in global_config[args.instance]:
        fail("config", message=f"{args.config} defines no resources server instance {args.instance!r}")
    servers = global_config[args.instance]["resources_servers"]
    folder = next(iter(servers))
    cfg = OmegaConf.to_container(servers[folder], resolve=True)
    assert isinstance(cfg, dict)
    entry = str(cfg.get("entrypoint") or "app.py")
    server_dir = Path(args.root) / "resources_servers" / folder
    if not (server_dir / entry).is_file():
        fail("entrypoint", path=str(server_dir / entry))
    sys.path.insert(1, str(server_dir))  # as `python app.py` in the server's folder would have it
    try:
        module = importlib.import_module(f"resources_servers.{folder}.{entry[:-3].replace('/', '.')}")
    except ModuleNotFoundError as e:
        req = server_dir / "requirements.txt"
        lines = [ln.strip() for ln in req.read_text().splitlines()] if req.is_file() else []
        fail("import", module=e.name or "", requirements=[ln for ln in lines if ln and not ln.startswith(("#", "-e"))],
             message=str(e), python=sys.executable)
    except Exception as e:
        fail("import", module="", requirements=[], message=f"{type(e).__name__}: {e}"[:2000], python=sys.executable)
    from nemo_gym.base_resources_server import SimpleResourcesServer
    from nemo_gym.config_types import BaseServerConfig
    from nemo_gym.server_utils import ServerClient

    classes = [c for c in vars(module).values() if inspect.isclass(c) and issubclass(c, SimpleResourcesServer)
               and c.__module__ == module.__name__]
    if len(classes) != 1:
        fail("entrypoint", path=str(server_dir / entry),
             message=f"expected one SimpleResourcesServer subclass, found {[c.__name__ for c in classes]}")
    cls: Any = classes[0]
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        sock.bind(("127.0.0.1", args.port))
    except OSError as e:
        fail("port", port=args.port, message=e.strerror or str(e))
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # accepted sockets inherit it (Linux)
    sock.listen(1024)
    port = sock.getsockname()[1]
    cfg.update(host="127.0.0.1", port=port, name=args.instance)
    try:
        config = cls.model_fields["config"].annotation.model_validate(cfg)
        client = ServerClient(head_server_config=BaseServerConfig(host="127.0.0.1", port=0),
                              global_config_dict=global_config)
        server = cls(config=config, server_client=client)
        app = server.setup_webserver()
        server.setup_liveness(app)
    except Exception as e:
        fail("setup", message=f"{type(e).__name__}: {e}"[:2000])
    import uvicorn

    say({"port": port, "server": cls.__name__, "module": module.__name__, "seconds": round(time.monotonic() - t0, 3)})
    uvicorn.Server(uvicorn.Config(app, log_level="warning", timeout_keep_alive=30)).run(sockets=[sock])


def prepare(args: argparse.Namespace) -> None:
    _enter(args.root)
    from nemo_gym.benchmarks import BenchmarkConfig

    try:
        bc = BenchmarkConfig.from_config_path(Path(args.config))
    except Exception as e:
        fail("config", message=f"{type(e).__name__}: {e}"[:2000])
    if bc is None:
        fail("config", message=f"{args.config} holds no benchmark dataset")
    script = Path(bc.dataset.prepare_script)
    try:
        module = importlib.import_module(".".join(script.with_suffix("").parts))
        out = Path(module.prepare())
    except Exception as e:
        fail("prepare", message=f"{type(e).__name__}: {e}"[:2000], script=str(script))
    rows = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines() if line.strip()]
    if bc.dataset.prompt_config:
        from nemo_gym.prompt import apply_prompt_to_row, load_prompt_config

        prompt = load_prompt_config(str(bc.dataset.prompt_config))
        rows = [apply_prompt_to_row(r, prompt) for r in rows]
    with open(args.out, "w", encoding="utf-8") as f:
        for r in rows:
            f.write(json.dumps(r, ensure_ascii=False) + "\n")
    server = _resolved_config(args.config)[bc.agent_name]
    agent = next(iter(server["responses_api_agents"].values()))
    say({"rows": len(rows), "benchmark": bc.name, "agent": bc.agent_name,
         "instance": str(agent["resources_server"]["name"]), "prepared": str(out),
         "prompt_config": str(bc.dataset.prompt_config) if bc.dataset.prompt_config else None})


def check(args: argparse.Namespace) -> None:
    _enter(args.root)
    if args.any:
        try:
            resolved = _resolved_config(args.config)
        except Exception as e:
            fail("config", message=f"{type(e).__name__}: {e}"[:2000])
        from omegaconf import DictConfig

        datasets = []
        for value in resolved.values():
            agents = value.get("responses_api_agents") if isinstance(value, DictConfig) else None
            for agent in (agents or {}).values():
                datasets += [{"name": str(d["name"]), "type": str(d["type"]), "jsonl_fpath": str(d["jsonl_fpath"])}
                             for d in agent.get("datasets") or []]
        say({"datasets": datasets})
        return
    from nemo_gym.benchmarks import BenchmarkConfig

    try:
        bc = BenchmarkConfig.from_config_path(Path(args.config))
    except Exception as e:
        fail("config", message=f"{type(e).__name__}: {e}"[:2000])
    if bc is None:
        fail("config", message=f"{args.config} holds no benchmark dataset")
    say({"benchmark": bc.name, "agent": bc.agent_name, "jsonl_fpath": str(bc.dataset.jsonl_fpath),
         "prepare_script": str(bc.dataset.prepare_script)})


def main() -> None:
    p = argparse.ArgumentParser(prog="launch.py")
    sub = p.add_subparsers(dest="command", required=True)
    s = sub.add_parser("serve")
    s.add_argument("--root", required=True)
    s.add_argument("--config", required=True)
    s.add_argument("--instance", required=True)
    s.add_argument("--port", type=int, default=0)
    s.set_defaults(fn=serve)
    pr = sub.add_parser("prepare")
    pr.add_argument("--root", required=True)
    pr.add_argument("--config", required=True)
    pr.add_argument("--out", required=True)
    pr.set_defaults(fn=prepare)
    c = sub.add_parser("check")
    c.add_argument("--root", required=True)
    c.add_argument("--config", required=True)
    c.add_argument("--any", action="store_true")
    c.set_defaults(fn=check)
    args = p.parse_args()
    global _OUT
    _OUT = os.fdopen(os.dup(1), "w", encoding="utf-8")
    sys.stdout.flush()
    os.dup2(2, 1)
    args.fn(args)


if __name__ == "__main__":
    main()
