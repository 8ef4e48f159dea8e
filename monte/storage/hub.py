"""The one place monte talks to the Hugging Face Hub. Tests replace ``HfApi`` here, and only here.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from monte.errors import MonteError, error, is_network_failure, network_refusal
from monte.workspace import Workspace

HfApi = None  # bound lazily to huggingface_hub.HfApi; a test may set a fake first

_REPO_ID = re.compile(r"[A-Za-z0-9][\w.-]*/[\w.-]+")


def _api() -> Any:
    global HfApi
    if HfApi is None:
        from huggingface_hub import HfApi as _HfApi

        HfApi = _HfApi
    return HfApi()


def fetch_dataset_file(repo: str, revision: str | None, filename: str | None) -> tuple[Path, str, str]:
    """Download one JSONL file of a dataset repo; returns (local path, resolved commit, filename).

    The revision is resolved to a commit sha first, so what is frozen is pinned exactly.
    """
    from huggingface_hub.errors import (
        GatedRepoError,
        HfHubHTTPError,
        RepositoryNotFoundError,
        RevisionNotFoundError,
    )

    api = _api()
    try:
        info = api.dataset_info(repo, revision=revision)
        sha = info.sha
        names = [s.rfilename for s in (info.siblings or [])]
        if filename is None:
            jsonl = [n for n in names if n.endswith(".jsonl")]
            if len(jsonl) != 1:
                raise error(
                    "E_USAGE",
                    f"dataset repo {repo} holds {len(jsonl)} JSONL files"
                    + (f": {', '.join(jsonl[:5])}" if jsonl else ""),
                    "pick one with --file PATH (repo-relative)",
                )
            filename = jsonl[0]
        elif filename not in names:
            raise error("E_NOT_FOUND", f"dataset repo {repo}@{sha[:12]} has no file {filename!r}",
                        "check --file against the repo's file list")
        local = api.hf_hub_download(repo, filename, repo_type="dataset", revision=sha)
    except GatedRepoError:
        raise error("E_STORAGE", f"dataset repo {repo} is gated or private",
                    "set HF_TOKEN to a token that has access, or log in with `hf auth login`") from None
    except RepositoryNotFoundError:
        raise error("E_NOT_FOUND", f"no dataset repo {repo} on the hub (or it is private)",
                    "check the name; a private repo needs HF_TOKEN") from None
    except RevisionNotFoundError:
        raise error("E_NOT_FOUND", f"dataset repo {repo} has no revision {revision!r}",
                    "check the @REVISION") from None
    except HfHubHTTPError as e:
        raise error("E_STORAGE", f"the hub refused: {e}", "check the connection and retry") from None
    except OSError as e:
        raise error("E_STORAGE", f"could not reach the hub: {e}", "check the connection and retry") from None
    except Exception as e:
        if is_network_failure(e):
            raise network_refusal(e, f"the Hugging Face Hub ({_endpoint()}) for dataset {repo}") from None
        raise
    return Path(local), sha, filename


def _endpoint() -> str:
    return os.environ.get("HF_ENDPOINT") or "https://huggingface.co"


def fetch_model(repo: str, revision: str | None, *, download: bool = True) -> tuple[Path | None, str]:
    """A model repo at one commit: (its snapshot folder in the hub cache, the commit sha). A
    branch or tag is pinned to its commit first, so a record names exactly what was read; a
    commit sha is served from the cache when it is there (offline too). ``download=False``:
    the commit only."""
    from huggingface_hub.errors import (
        GatedRepoError,
        HfHubHTTPError,
        RepositoryNotFoundError,
        RevisionNotFoundError,
    )

    api = _api()
    try:
        sha = revision if revision and re.fullmatch(r"[0-9a-f]{40}", revision) else \
            api.model_info(repo, revision=revision).sha
        if not download:
            return None, str(sha)
        folder = api.snapshot_download(repo_id=repo, revision=sha)
    except GatedRepoError:
        raise error("E_STORAGE", f"the hub model {repo} is gated or private",
                    "set HF_TOKEN to a token that has access, or log in with `hf auth login`") from None
    except RepositoryNotFoundError:
        raise error("E_NOT_FOUND", f"no model repo {repo} on the hub (or it is private)",
                    "check the id; a private repo needs HF_TOKEN") from None
    except RevisionNotFoundError:
        raise error("E_NOT_FOUND", f"the hub model {repo} has no revision {revision!r}", "check the @REVISION") from None
    except HfHubHTTPError as e:
        raise error("E_STORAGE", f"the hub refused: {type(e).__name__}", "check the connection and retry") from None
    except (OSError, ValueError) as e:  # offline (HF_HUB_OFFLINE) and not in the cache, no network
        raise error("E_STORAGE", f"could not reach the hub for {repo} ({type(e).__name__})",
                    "check the connection and retry, or fetch the model into a folder and pass that") from None
    except Exception as e:
        if is_network_failure(e):
            raise error("E_STORAGE", f"could not reach the Hugging Face Hub ({_endpoint()}) for model {repo}: the "
                        f"network failed ({type(e).__name__})", "check the network connection (and any proxy) and "
                        "retry, or fetch the model into a folder and pass that") from None
        raise
    return Path(folder), str(sha)


# --- checkpoint weights: one branch per checkpoint ----------------------------------------------

HUB_ENV = "MONTE_HUB_REPO"


def repo_for(ws: Workspace) -> str | None:
    """The hub model repo checkpoints go to: ``MONTE_HUB_REPO``, else ``.monte.yaml``'s ``hub``."""
    raw = os.environ.get(HUB_ENV) or ws.config.get("hub")
    if not raw:
        return None
    if not isinstance(raw, str) or not _REPO_ID.fullmatch(raw.strip()):
        raise error("E_BAD_INPUT", f"the hub repo {raw!r} is not a repo id (OWNER/NAME)",
                    f"set {HUB_ENV}=OWNER/NAME, or `hub: OWNER/NAME` in .monte.yaml")
    return raw.strip()


def require_repo(ws: Workspace) -> str:
    repo = repo_for(ws)
    if repo is None:
        raise error("E_STORAGE", "a real --push chunk uploads its checkpoint to the hub, and no hub repo is "
                    "configured", f"set {HUB_ENV}=OWNER/NAME (or `hub: OWNER/NAME` in .monte.yaml); the "
                    "token comes from HF_TOKEN or `hf auth login`")
    return repo


def branch_name(experiment: str, run: str, step: int) -> str:
    return f"{experiment}--{run}--step{step}"


def ensure_repo(repo: str) -> None:
    """Create the (private) model repo if it is missing: proves the token can write before any compute."""
    with _hub_errors(f"reaching the hub repo {repo}", repo):
        _api().create_repo(repo, exist_ok=True, private=True)


def upload_checkpoint(repo: str, branch: str, folder: Path, files: list[str], readme: str,
                      message: str) -> str:
    """Upload a checkpoint's servable ``files`` (from ``folder``) plus a model card to a branch of
    its own, in one hub commit; returns that commit's id. Nothing in ``folder`` is changed."""
    with tempfile.TemporaryDirectory(prefix=".hub-", dir=folder.parent) as tmp:
        staged = Path(tmp)
        for name in files:  # a hard link where the file system allows it: weights are large
            try:
                os.link(folder / name, staged / name)
            except OSError:
                shutil.copy2(folder / name, staged / name)
        (staged / "README.md").write_text(readme, encoding="utf-8")
        with _hub_errors(f"uploading {branch} to the hub repo {repo}", repo):
            api = _api()
            api.create_repo(repo, exist_ok=True, private=True)
            api.create_branch(repo, branch=branch, exist_ok=True)
            info = api.upload_folder(repo_id=repo, folder_path=str(staged), revision=branch,
                                     commit_message=message)
    oid = getattr(info, "oid", None)
    if not oid:
        raise error("E_STORAGE", f"the hub did not say which commit holds {branch} in {repo}",
                    "retry; check the repo's branch on the hub")
    return str(oid)


def download_checkpoint(repo: str, revision: str, files: list[str], dest: Path) -> dict[str, Path]:
    """Download the named files of one hub commit into ``dest``; returns name -> local file.
    Nothing is verified here: the caller proves every byte against the lineage commit."""
    out: dict[str, Path] = {}
    with _hub_errors(f"downloading revision {revision[:12]} of the hub repo {repo}", repo):
        api = _api()
        for name in files:
            out[name] = Path(api.hf_hub_download(repo_id=repo, filename=name, revision=revision,
                                                 local_dir=str(dest)))
    return out


@contextmanager
def _hub_errors(doing: str, repo: str) -> Iterator[None]:
    """Hub failures as E_STORAGE. The message names the repo and the failure, never a token."""
    from huggingface_hub.errors import (
        GatedRepoError,
        HfHubHTTPError,
        RepositoryNotFoundError,
        RevisionNotFoundError,
    )

    token_fix = (f"check that HF_TOKEN (or `hf auth login`) holds a token with write access to {repo}, "
                 f"and that {HUB_ENV} names the repo you mean")
    try:
        yield
    except MonteError:
        raise
    except (RepositoryNotFoundError, GatedRepoError):
        raise error("E_STORAGE", f"{doing} failed: the hub repo {repo} is missing or not accessible",
                    token_fix) from None
    except RevisionNotFoundError:
        raise error("E_STORAGE", f"{doing} failed: the hub repo {repo} has no such revision",
                    "the hub copy was deleted or rewritten; promote from the run folder instead") from None
    except HfHubHTTPError as e:
        status = getattr(getattr(e, "response", None), "status_code", None)
        if status in (401, 403):
            raise error("E_STORAGE", f"{doing} failed: the hub refused ({status})", token_fix) from None
        raise error("E_STORAGE", f"{doing} failed: the hub answered {status or type(e).__name__}",
                    "check the connection and retry") from None
    except (OSError, ValueError) as e:
        raise error("E_STORAGE", f"{doing} failed: {type(e).__name__}", "check the connection and retry") from None
    except Exception as e:
        if is_network_failure(e):
            raise network_refusal(e, f"the Hugging Face Hub ({_endpoint()}): {doing}") from None
        raise
