"""The one place monte talks to the Hugging Face Hub. Tests replace ``HfApi`` here, and only here.
"""

from __future__ import annotations

from pathlib import Path

from monte.errors import error

HfApi = None  # bound lazily to huggingface_hub.HfApi; a test may set a fake first


def _api():  # type: ignore[no-untyped-def]
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
    return Path(local), sha, filename
