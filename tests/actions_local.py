"""Run a repository's GitHub Actions push workflows here, as GitHub would for one pushed branch.

What GitHub does on a push of ``refs/heads/BRANCH``, reproduced with git and bash:

1. it reads the workflow files of the *pushed commit* (``.github/workflows/*.yml`` in that
   commit's tree, not the default branch's) and keeps those whose ``on.push.branches`` filter
   matches BRANCH (GitHub's glob: ``*`` stops at ``/``, ``**`` does not);
2. ``actions/checkout@v4`` with ``fetch-depth: 0``: ``git init``, ``git remote add origin``,
   ``git fetch --prune --no-recurse-submodules origin +refs/heads/*:refs/remotes/origin/*
   +refs/tags/*:refs/tags/*``, ``git checkout --progress --force -B BRANCH
   refs/remotes/origin/BRANCH`` (the local branch checked out, every other branch only a
   remote-tracking ref);
3. ``actions/setup-python``: the interpreter given here (``--python``) first on ``PATH``;
4. each ``run:`` step in order, with ``bash -e {0}`` (GitHub's default shell on Linux) in the
   checkout, and ``GITHUB_REF``, ``GITHUB_REF_NAME``, ``GITHUB_SHA``, ``GITHUB_WORKSPACE``,
   ``GITHUB_EVENT_NAME`` set; a failing step fails the job.

    python tests/actions_local.py --remote /srv/repo.git --branch monte/exp/ledger --python /opt/light/bin/python
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

KNOWN_ACTIONS = ("actions/checkout@", "actions/setup-python@")


@dataclass
class Step:
    name: str
    returncode: int
    output: str


@dataclass
class Job:
    workflow: str
    job: str
    steps: list[Step] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return all(s.returncode == 0 for s in self.steps)


def branch_matches(pattern: str, branch: str) -> bool:
    """GitHub's branch filter glob: ``**`` any characters, ``*`` any but ``/``."""
    rx = "".join(".*" if tok == "**" else "[^/]*" if tok == "*" else re.escape(tok)
                 for tok in re.split(r"(\*\*|\*)", pattern) if tok)
    return re.fullmatch(rx, branch) is not None


def triggered(workflow: dict[str, Any], branch: str) -> bool:
    on = workflow.get("on") or {}
    if isinstance(on, str):
        on = {on: None}
    elif isinstance(on, list):
        on = dict.fromkeys(on)
    if "push" not in on:
        return False
    push = on["push"] or {}
    if "branches" not in push:
        return "branches-ignore" not in push or not any(branch_matches(p, branch) for p in push["branches-ignore"])
    return any(branch_matches(p, branch) for p in push["branches"])


def git(*args: str, cwd: Path) -> str:
    r = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"git {' '.join(args)}: {r.stderr}")
    return r.stdout


def checkout(remote: str, branch: str, workspace: Path) -> str:
    """actions/checkout@v4, ``fetch-depth: 0``, for a push of ``branch``; the commit checked out."""
    workspace.mkdir(parents=True)
    git("init", "-q", str(workspace), cwd=workspace)
    git("remote", "add", "origin", remote, cwd=workspace)
    git("fetch", "-q", "--prune", "--no-recurse-submodules", "origin", "+refs/heads/*:refs/remotes/origin/*",
        "+refs/tags/*:refs/tags/*", cwd=workspace)
    git("checkout", "-q", "--progress", "--force", "-B", branch, f"refs/remotes/origin/{branch}", cwd=workspace)
    return git("rev-parse", "HEAD", cwd=workspace).strip()


def workflows_of(remote: str, branch: str, scratch: Path) -> dict[str, dict[str, Any]]:
    """The workflow files in the pushed commit's tree (read with git, as GitHub does)."""
    from ruamel.yaml import YAML

    r = subprocess.run(["git", "--git-dir", remote, "ls-tree", "--name-only", f"refs/heads/{branch}",
                        ".github/workflows/"], capture_output=True, text=True, check=True)
    out = {}
    for path in r.stdout.split():
        if path.endswith((".yml", ".yaml")):
            text = subprocess.run(["git", "--git-dir", remote, "show", f"refs/heads/{branch}:{path}"],
                                  capture_output=True, text=True, check=True).stdout
            out[path] = YAML(typ="safe").load(text)
    return out


def run_push(remote: str, branch: str, python: str, scratch: Path) -> list[Job]:
    """Every job GitHub would run for a push of ``branch`` to ``remote``, run here."""
    jobs = []
    for path, wf in sorted(workflows_of(remote, branch, scratch).items()):
        if not triggered(wf, branch):
            continue
        for name, spec in (wf.get("jobs") or {}).items():
            job = Job(path, name)
            jobs.append(job)
            workspace = scratch / f"{Path(path).stem}-{name}"
            sha = ""
            env = {**os.environ, "PATH": f"{Path(python).parent}{os.pathsep}{os.environ.get('PATH', '')}",
                   "GITHUB_REF": f"refs/heads/{branch}", "GITHUB_REF_NAME": branch, "GITHUB_EVENT_NAME": "push",
                   "GITHUB_WORKSPACE": str(workspace), "CI": "true"}
            for i, step in enumerate(spec.get("steps") or []):
                label = step.get("name") or step.get("uses") or f"step {i}"
                if "uses" in step:
                    uses = str(step["uses"])
                    if not uses.startswith(KNOWN_ACTIONS):
                        job.steps.append(Step(label, 1, f"no local stand-in for {uses}"))
                        break
                    if uses.startswith("actions/checkout@"):
                        if (step.get("with") or {}).get("fetch-depth") != 0:
                            job.steps.append(Step(label, 1, "only fetch-depth: 0 is reproduced here"))
                            break
                        sha = checkout(remote, branch, workspace)
                        env["GITHUB_SHA"] = sha
                    job.steps.append(Step(label, 0, ""))
                    continue
                r = subprocess.run(["bash", "-e", "-c", str(step["run"])], cwd=workspace, env=env,
                                   capture_output=True, text=True)
                job.steps.append(Step(label, r.returncode, r.stdout + r.stderr))
                if r.returncode != 0:
                    break
    return jobs


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--remote", required=True, help="the repository pushed to (a path or URL git can fetch)")
    ap.add_argument("--branch", required=True, help="the pushed branch, e.g. monte/exp/ledger")
    ap.add_argument("--python", default=sys.executable, help="the interpreter actions/setup-python provides")
    ap.add_argument("--scratch", type=Path, required=True, help="an empty folder for the checkouts")
    args = ap.parse_args()
    jobs = run_push(args.remote, args.branch, args.python, args.scratch)
    for job in jobs:
        for s in job.steps:
            print(f"[{job.workflow} {job.job}] {'ok ' if s.returncode == 0 else 'FAIL'} {s.name}")
            if s.returncode:
                print(s.output)
    print(f"{len(jobs)} job(s) triggered; {sum(j.ok for j in jobs)} passed")
    sys.exit(0 if jobs and all(j.ok for j in jobs) else 1)


if __name__ == "__main__":
    main()
