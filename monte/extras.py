"""What the light install leaves out, and the exact pip line that brings it.

``pip install monte`` is the core: the ledger, its rules, ``verify``, ``status``, ``show``,
``logs`` and the git hooks (dulwich, click, pydantic, ruamel.yaml, rich). Everything heavy is
an extra (``pyproject.toml``): ``train`` (torch, transformers, TRL, datasets, reasoning-gym,
matplotlib, numpy, scipy), ``storage`` (DVC, GCS, the Hugging Face Hub), ``remote`` (Fabric),
``lm-eval`` (lm-evaluation-harness), ``mcp`` (the MCP SDK, for ``monte mcp``), and ``all``. A command that imports a module of a missing extra is refused with the pip line
that installs it, spelled for the way this copy of monte was installed (an index, a path, a
git URL: PEP 610's ``direct_url.json``).
"""

from __future__ import annotations

import json
from urllib.parse import unquote, urlparse

from monte.errors import MonteError, error

#: the extra that brings each top-level module monte imports lazily
EXTRA_OF = {
    **dict.fromkeys(("torch", "transformers", "trl", "datasets", "accelerate", "tokenizers", "safetensors",
                     "reasoning_gym", "matplotlib", "numpy", "scipy"), "train"),
    **dict.fromkeys(("dvc", "dvc_gs", "dvc_data", "dvc_objects", "gcsfs", "google", "huggingface_hub", "pyrage"),
                    "storage"),
    **dict.fromkeys(("fabric", "paramiko", "invoke"), "remote"),
    "lm_eval": "lm-eval",
    **dict.fromkeys(("mcp", "mcp_types", "jsonschema"), "mcp"),
}

#: what each extra is for, in a refusal's words
PURPOSE = {
    "train": "evaluating and training models (torch, transformers, TRL) and the built-in environments",
    "storage": "the Vault and the results bucket (DVC, Google Cloud Storage) and the model hub",
    "remote": "remote boxes over SSH (Fabric)",
    "lm-eval": "exams from lm-evaluation-harness tasks, graded by lm-eval's own code",
    "mcp": "`monte mcp`, the Model Context Protocol server an agent drives the loop through",
}


def pip_line(extra: str | None = None) -> str:
    """``pip install ...`` that adds ``extra`` (None: the light core) to this installation."""
    spec = "monte" + (f"[{extra}]" if extra else "")
    info = _direct_url()
    url = str(info.get("url", ""))
    if url.startswith("file://"):
        path = unquote(urlparse(url).path) + (f"[{extra}]" if extra else "")
        dir_info = info.get("dir_info")
        editable = isinstance(dir_info, dict) and bool(dir_info.get("editable"))
        return f"pip install {'-e ' if editable else ''}'{path}'"
    vcs = info.get("vcs_info")
    if url and isinstance(vcs, dict):
        commit = vcs.get("commit_id") or vcs.get("requested_revision")
        return f"pip install '{spec} @ {vcs.get('vcs', 'git')}+{url}{'@' + commit if commit else ''}'"
    if url:
        return f"pip install '{spec} @ {url}'"
    return f"pip install '{spec}'"


def _direct_url() -> dict[str, object]:
    from importlib.metadata import PackageNotFoundError, distribution

    try:
        raw = distribution("monte").read_text("direct_url.json")
    except PackageNotFoundError:
        return {}
    try:
        data = json.loads(raw) if raw else {}
    except ValueError:
        return {}
    return data if isinstance(data, dict) else {}


def missing(e: ModuleNotFoundError) -> MonteError | None:
    """The refusal for an import of a module that an extra brings (None: not one of them, a bug)."""
    top = (e.name or "").split(".")[0]
    extra = EXTRA_OF.get(top)
    if extra is None:
        return None
    return error("E_NOT_FOUND", f"this command needs {top!r}, which the light install of monte leaves out "
                 f"(the {extra!r} extra: {PURPOSE[extra]})", f"install it: {pip_line(extra)}")
