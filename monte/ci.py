"""CI that runs where the ledgers are: two GitHub Actions workflows monte writes.

GitHub runs the workflow files of the commit a push brings, and a ledger commit holds only the
ledger. So every ledger commit carries :data:`LEDGER_WORKFLOW` in its own tree (the store writes
it with each record; ``monte ledger verify`` allows the path and merges treat it as derived): a
push of ``monte/<exp>/ledger`` runs a full ``monte ledger verify <exp>`` of that ledger.
``monte init`` writes :data:`DEFAULT_WORKFLOW` on the default branch: on each push there, every
day, and by hand, it fetches every ``refs/heads/monte/*`` and verifies all ledgers.

Both install monte from a pinned source, never ``pip install .`` (on the default branch that
would be the user's project; a ledger branch has none), the light install (no torch, DVC, ...).
The pin (:func:`resolve`), first found wins: ``monte init --ci-install SPEC``, else
``$MONTE_CI_INSTALL`` (one shell's), else the repository's (``ci_install`` in ``.monte.yaml``, where
``--ci-install`` keeps it, so the records written later carry it too), else where this monte came from, as its distribution recorded it (PEP 610's
``direct_url.json``): a git URL at its commit, an archive URL, a local git checkout whose commit a
remote holds (``git+URL@COMMIT``), or, with no such record, the index release it was installed
as (``monte==VERSION``). A local folder or file that no runner can reach is no pin: the default
workflow is then not written, a ledger record carries none, and ``monte init`` says what to set.
"""

from __future__ import annotations

import functools
import json
import os
import subprocess
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote, urlparse

#: Where a ledger commit carries its workflow (a path in the ledger's tree).
LEDGER_WORKFLOW = ".github/workflows/monte-ledger.yml"
#: Where ``monte init`` writes the default branch's workflow (a path in the work tree).
DEFAULT_WORKFLOW = ".github/workflows/monte-verify.yml"
#: The actions the workflows use, pinned by major version.
CHECKOUT = "actions/checkout@v4"
SETUP_PYTHON = "actions/setup-python@v5"
PYTHON = "3.11"


#: The key of ``.monte.yaml`` that holds the repository's pin (``monte init --ci-install SPEC``).
CONFIG_KEY = "ci_install"
#: The first line of the default workflow as monte writes it (a file without it is the user's).
MARK = "# Written by `monte init`"


@dataclass(frozen=True)
class Pin:
    """The pip requirement CI installs (None: no pin that a runner can install) and where it came
    from, or why there is none, in words."""

    spec: str | None
    source: str


def resolve(root: Path | None = None, explicit: str | None = None) -> Pin:
    """The pin, first found wins: ``explicit`` (``--ci-install``), ``$MONTE_CI_INSTALL`` (one
    shell's), the repository's (``.monte.yaml`` at ``root``), where this monte was installed from."""
    if explicit is not None and explicit.strip():
        return Pin(explicit.strip(), "--ci-install")
    env = os.environ.get("MONTE_CI_INSTALL", "").strip()
    if env:
        return Pin(env, "MONTE_CI_INSTALL")
    kept = configured(root) if root is not None else None
    if kept:
        return Pin(kept, f"{CONFIG_KEY} in .monte.yaml")
    return _installed_from()


def install_spec(root: Path | None = None) -> str | None:
    """The pip requirement CI installs, or None where no pin can install (see :func:`resolve`)."""
    return resolve(root).spec


def how_to_pin(pin: Pin) -> str:
    """The fix where there is no pin: what to set."""
    return (f"no CI workflow written: {pin.source}. Pin monte where GitHub's runner can install it: "
            "`monte init --ci-install 'monte @ git+https://github.com/ORG/monte@COMMIT'` (a commit your "
            "repository's runners can fetch; no package index serves monte), or set MONTE_CI_INSTALL")


def check_spec(spec: str) -> str:
    """An explicit pin, as pip reads a requirement of monte: refused (``E_USAGE``) when it names
    another project, a bare path or is empty."""
    from monte.errors import error

    spec = spec.strip()
    name = spec.split("@", 1)[0].split("==", 1)[0].split("[", 1)[0].strip().lower()
    if name != "monte" or "\n" in spec:
        raise error("E_USAGE", f"--ci-install {spec!r} is not a pip requirement of monte",
                    "pass e.g. 'monte @ git+https://github.com/ORG/monte@COMMIT'")
    return spec


def save_spec(root: Path, spec: str) -> None:
    """Keep the repository's pin in ``.monte.yaml`` (comments kept), so records written later
    carry it too."""
    import io

    from ruamel.yaml import YAML

    path = root / ".monte.yaml"
    yaml = YAML()
    yaml.width = 4096  # a pin on one line
    data = yaml.load(path.read_text(encoding="utf-8")) if path.exists() else None
    if not isinstance(data, dict):
        data = {"version": 1}
    data[CONFIG_KEY] = spec
    out = io.StringIO()
    yaml.dump(data, out)
    tmp = path.with_suffix(".yaml.tmp")
    tmp.write_text(out.getvalue(), encoding="utf-8")
    os.replace(tmp, path)


def configured(root: Path) -> str | None:
    """The pin `.monte.yaml` at ``root`` keeps (``ci_install``), if any."""
    path = root / ".monte.yaml"
    try:
        st = path.stat()
    except OSError:
        return None
    return _read_configured(str(path), st.st_mtime_ns, st.st_size)


@functools.lru_cache(maxsize=8)
def _read_configured(path: str, mtime_ns: int, size: int) -> str | None:
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None
    if CONFIG_KEY not in text:
        return None
    from ruamel.yaml import YAML
    from ruamel.yaml.error import YAMLError

    try:
        data = YAML(typ="safe").load(text)
    except YAMLError:
        return None
    value = data.get(CONFIG_KEY) if isinstance(data, dict) else None
    return value.strip() if isinstance(value, str) and value.strip() else None


@functools.lru_cache(maxsize=1)
def _installed_from() -> Pin:
    """Where this monte came from, as a pin a runner can install (PEP 610's record)."""
    from importlib.metadata import PackageNotFoundError, distribution

    try:
        dist = distribution("monte")
    except PackageNotFoundError:
        return Pin(None, "this monte is not an installed distribution (run from a source folder)")
    try:
        info = json.loads(dist.read_text("direct_url.json") or "null")
    except ValueError:
        info = None
    if not isinstance(info, dict):  # installed by name from a package index: that release exists there
        return Pin(f"monte=={dist.version}", f"monte {dist.version}, installed from a package index")
    url = str(info.get("url", ""))
    vcs = info.get("vcs_info")
    if isinstance(vcs, dict) and url:
        commit = vcs.get("commit_id")
        if vcs.get("vcs", "git") == "git" and isinstance(commit, str) and commit and not url.startswith("file:"):
            return Pin(f"monte @ git+{url}@{commit}", f"installed from {url} at {commit}")
        return Pin(None, f"this monte was installed from {url} with no commit a runner can fetch")
    if url.startswith("file:"):
        path = Path(unquote(urlparse(url).path))
        pushed = _pushed_commit(path) if path.is_dir() else None
        if pushed is not None:
            remote, commit = pushed
            return Pin(f"monte @ git+{remote}@{commit}", f"the checkout {path} at {commit}, which {remote} holds")
        return Pin(None, f"this monte was installed from {path}, a local "
                   f"{'folder' if path.is_dir() else 'file'} that no CI runner can reach")
    if url.startswith("https://"):
        archive = info.get("archive_info")
        hashes = archive.get("hashes") if isinstance(archive, dict) else None
        digest = hashes.get("sha256") if isinstance(hashes, dict) else None
        return Pin(f"monte @ {url}" + (f"#sha256={digest}" if digest else ""), f"installed from {url}")
    return Pin(None, f"this monte was installed from {url or 'an unrecorded source'}, which no CI runner can reach")


def _pushed_commit(folder: Path) -> tuple[str, str] | None:
    """(the remote's URL, HEAD) when ``folder`` is a git checkout whose HEAD a remote that is not
    a local path already holds (a remote-tracking ref contains it)."""
    def git(*args: str) -> str | None:
        try:
            r = subprocess.run(["git", "-C", str(folder), *args], capture_output=True, text=True, timeout=30)
        except (OSError, subprocess.SubprocessError):
            return None
        return r.stdout.strip() if r.returncode == 0 else None

    head = git("rev-parse", "--verify", "-q", "HEAD^{commit}")
    holders = git("for-each-ref", "--format=%(refname)", f"--contains={head}", "refs/remotes/") if head else None
    for ref in (holders or "").splitlines():
        name = ref.split("/")[2] if ref.count("/") >= 3 else ""
        remote = git("remote", "get-url", name) if name else None
        if remote and (remote.startswith(("https://", "ssh://")) or ("@" in remote and ":" in remote
                                                                     and not remote.startswith("/"))):
            if not remote.startswith(("https://", "ssh://")):  # scp-like git@host:org/repo
                host, _, where = remote.partition(":")
                remote = f"ssh://{host}/{where}"
            return remote, str(head)
    return None


#: compiles the installed package once, where it is installed: a runner or image that keeps no
#: bytecode (``PYTHONDONTWRITEBYTECODE=1``, ``pip install --no-compile``) would otherwise compile
#: every module monte imports in every process (docs/hooks-and-ci.md); bytecode already there is
#: kept (compileall skips what is up to date)
PRECOMPILE = ("python -m compileall -q \"$(python -P -c 'import monte, os; print(os.path.dirname(monte.__file__))')\"")


def _install_steps(spec: str) -> str:
    return (f"      - uses: {SETUP_PYTHON}\n"
            f"        with:\n"
            f"          python-version: \"{PYTHON}\"\n"
            f"      - name: install monte, light and pinned (no torch, transformers or DVC)\n"
            f"        run: python -m pip install {json.dumps(spec)}\n"
            f"      - name: compile monte once (a runner may keep no bytecode)\n"
            f"        run: {PRECOMPILE}\n")


def ledger_workflow(spec: str | None = None, root: Path | None = None) -> bytes | None:
    """The workflow every ledger commit carries (at :data:`LEDGER_WORKFLOW`); None where there
    is no pin a runner can install (:func:`resolve`): the record then carries none."""
    spec = spec or install_spec(root)
    if spec is None:
        return None
    return (
        "# Written by monte into every record of this ledger branch: GitHub runs the workflow files\n"
        "# of the commit a push brings, so a push of monte/<exp>/ledger verifies that ledger here.\n"
        "# Change the pin with `monte init --ci-install SPEC` (or MONTE_CI_INSTALL) where monte writes the records.\n"
        "name: monte ledger\n"
        "on:\n"
        "  push:\n"
        "    branches: [\"monte/**\"]\n"
        "permissions:\n"
        "  contents: read\n"
        "jobs:\n"
        "  verify:\n"
        "    runs-on: ubuntu-latest\n"
        "    timeout-minutes: 30\n"
        "    steps:\n"
        f"      - uses: {CHECKOUT}\n"
        "        with:\n"
        "          fetch-depth: 0\n"
        + _install_steps(spec) +
        "      - name: verify this ledger (every rule, from its whole history)\n"
        "        run: |\n"
        "          exp=\"${GITHUB_REF_NAME#monte/}\"\n"
        "          monte ledger verify \"${exp%/ledger}\"\n"
    ).encode()


def default_workflow(branch: str, spec: str) -> str:
    """The default branch's workflow (at :data:`DEFAULT_WORKFLOW`): every ledger, verified."""
    return (
        f"{MARK}: verify every monte ledger of this repository on each push of the\n"
        "# default branch, every day, and by hand. (A push of a ledger branch runs the workflow that\n"
        "# its own commits carry.) Change the pin with `monte init --ci-install SPEC`.\n"
        "name: monte ledgers\n"
        "on:\n"
        "  push:\n"
        f"    branches: [{json.dumps(branch)}]\n"
        "  schedule:\n"
        "    - cron: \"17 4 * * *\"\n"
        "  workflow_dispatch: {}\n"
        "permissions:\n"
        "  contents: read\n"
        "jobs:\n"
        "  verify:\n"
        "    runs-on: ubuntu-latest\n"
        "    timeout-minutes: 30\n"
        "    steps:\n"
        f"      - uses: {CHECKOUT}\n"
        "        with:\n"
        "          fetch-depth: 0\n"
        "      - name: fetch every monte ref\n"
        "        run: git fetch --atomic origin '+refs/heads/monte/*:refs/heads/monte/*'\n"
        + _install_steps(spec) +
        "      - name: verify every ledger\n"
        "        run: monte ledger verify --all\n"
    )


def write_default_workflow(repo_root: Path, pin: Pin, *, rewrite: bool = False) -> str | None:
    """Write :data:`DEFAULT_WORKFLOW` for the repository's default branch (the branch ``HEAD``
    names) with ``pin``: when there is none yet, or, with ``rewrite`` (a pin named by
    ``--ci-install`` or ``MONTE_CI_INSTALL``), over monte's own file whose pin differs. The path
    written, relative to ``repo_root``; None when nothing was written (no pin: nothing at all)."""
    if pin.spec is None:
        return None
    path = repo_root / DEFAULT_WORKFLOW
    text = default_workflow(_default_branch(repo_root), pin.spec)
    if path.exists():
        try:
            old = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            return None
        if not rewrite or old == text or not old.startswith(MARK):
            return None
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return DEFAULT_WORKFLOW


def _default_branch(repo_root: Path) -> str:
    head = repo_root / ".git" / "HEAD"
    try:
        line = head.read_text().strip()
    except OSError:
        return "main"
    prefix = "ref: refs/heads/"
    return line[len(prefix):] if line.startswith(prefix) else "main"
