"""A NeMo Gym checkout for the grader's tests and benchmark: links into the pinned nemo-gym venv
(``make nemo-gym``), plus a resources server of their own, ``hashed``, whose ``/verify`` reward is
a function of every character of the answer (two reads agree only on the same texts, graded by
the same server). Its rows carry no reference answer: freezing them starts no server.
"""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

SERVER = "hashed"
APP = """
    import hashlib

    from nemo_gym.base_resources_server import BaseResourcesServerConfig, BaseVerifyRequest, SimpleResourcesServer


    class HashedConfig(BaseResourcesServerConfig):
        pass


    class HashedServer(SimpleResourcesServer):
        config: HashedConfig

        async def verify(self, body: BaseVerifyRequest) -> dict:
            # 0, 1/3, 2/3 or 1 from every character of the answer: equal rewards mean equal texts
            return {"reward": hashlib.sha256(body.response.output_text.encode()).digest()[0] % 4 / 3}
"""


def checkout(dest: Path, venv: Path, *, version: str | None = None, runs: Path | None = None,
             rows: int = 8) -> Path:
    """A NeMo Gym checkout of links into the venv's files, holding the test's server; its
    ``.venv`` is the venv (the stack's interpreter), or ``runs``. ``version``: its package_info
    says another."""
    sp = next(iter(sorted(venv.glob("lib/python3*/site-packages"))))
    dest.mkdir()
    if version is None:
        (dest / "nemo_gym").symlink_to(sp / "nemo_gym")
    else:
        (dest / "nemo_gym").mkdir()
        for child in (sp / "nemo_gym").iterdir():
            if child.name != "package_info.py":
                (dest / "nemo_gym" / child.name).symlink_to(child)
        info = (sp / "nemo_gym" / "package_info.py").read_text()
        (dest / "nemo_gym" / "package_info.py").write_text(info.replace("PATCH = 0", f"PATCH = {version}"))
    for top in ("resources_servers", "benchmarks"):
        (dest / top).mkdir()
        for child in (sp / top).iterdir():
            (dest / top / child.name).symlink_to(child)
    (dest / ".venv").symlink_to(runs or venv)
    folder = dest / "resources_servers" / SERVER
    (folder / "configs").mkdir(parents=True)
    (folder / "data").mkdir()
    (folder / "configs" / f"{SERVER}.yaml").write_text(textwrap.dedent(f"""\
        {SERVER}:
          resources_servers:
            {SERVER}:
              entrypoint: app.py
              domain: other
              description: a reward from every character of the answer
        """))
    (folder / "app.py").write_text(textwrap.dedent(APP))
    data = [{"responses_create_params": {"input": [{"role": "user", "content": f"Name a number after {i}."}]},
             "expected": str(i + 1)} for i in range(rows)]
    (folder / "data" / "example.jsonl").write_text("".join(json.dumps(r) + "\n" for r in data))
    return dest
