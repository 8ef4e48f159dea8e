"""Hostile input for monte, shared by the CI test (``test_hostile_input.py``, hypothesis) and the
long campaign (``bench/fuzz_campaign.py``, atheris or hypothesis).

Everything a user hands monte is a *target*: recipe YAML, dataset JSONL, manifests read back
from the Vault, names, ``RUN/STEP`` references, ``.monte.yaml`` and ``monte config set`` URLs.
A target draws one hostile input through a :class:`Draw` (hypothesis or atheris behind it) and
returns a :class:`Case`: the files to put in place, the argv, the environment. :func:`execute`
runs the case in-process against a :class:`Sandbox` and returns every broken property:

- the exit status is 0 or a documented family (2-8); never 1 (``E_INTERNAL``), never an
  exception escaping ``main``, never a ``Traceback`` on stdout or stderr;
- with ``--json``, stdout is exactly one JSON document; a refusal's ``error.code`` is in
  :data:`monte.errors.CODES` and its family's exit status is the process's;
- nothing outside the data root (and the git store) is written: every file and folder around
  the repository, its tracked files, ``.git/config`` and ``.git/hooks``, a sentinel folder
  beside it, and the Vault (a fetch never writes the Vault) are compared before and after;
- a refusal (and a ``--dry-run``) changes nothing: refs and every file under the data root.
"""

from __future__ import annotations

import base64
import contextlib
import functools
import hashlib
import io
import json
import os
import re
import shutil
import subprocess
import sys
import traceback
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from monte.errors import CODES

# --- drawing inputs: one interface over hypothesis and atheris -----------------------------------


class Draw(Protocol):
    def integer(self, lo: int, hi: int) -> int: ...
    def boolean(self) -> bool: ...
    def choice(self, seq: Sequence[Any]) -> Any: ...
    def raw(self, max_len: int) -> bytes: ...
    def text(self, max_len: int) -> str: ...


class HypothesisDraw:
    """A :class:`Draw` over hypothesis's ``st.data()`` (shrinks like any strategy)."""

    def __init__(self, data: Any) -> None:
        from hypothesis import strategies as st

        self.data = data
        self.st = st

    def integer(self, lo: int, hi: int) -> int:
        return int(self.data.draw(self.st.integers(lo, hi)))

    def boolean(self) -> bool:
        return bool(self.data.draw(self.st.booleans()))

    def choice(self, seq: Sequence[Any]) -> Any:
        return self.data.draw(self.st.sampled_from(list(seq)))

    def raw(self, max_len: int) -> bytes:
        return bytes(self.data.draw(self.st.binary(max_size=max_len)))

    def text(self, max_len: int) -> str:
        return str(self.data.draw(self.st.text(max_size=max_len)))


class BytesDraw:
    """A :class:`Draw` over atheris's ``FuzzedDataProvider`` (coverage-guided mutation)."""

    def __init__(self, fdp: Any) -> None:
        self.fdp = fdp

    def integer(self, lo: int, hi: int) -> int:
        return int(self.fdp.ConsumeIntInRange(lo, hi))

    def boolean(self) -> bool:
        return bool(self.fdp.ConsumeBool())

    def choice(self, seq: Sequence[Any]) -> Any:
        return self.fdp.PickValueInList(list(seq))

    def raw(self, max_len: int) -> bytes:
        return bytes(self.fdp.ConsumeBytes(self.fdp.ConsumeIntInRange(0, max_len)))

    def text(self, max_len: int) -> str:
        return str(self.fdp.ConsumeUnicodeNoSurrogates(self.fdp.ConsumeIntInRange(0, max_len)))


# Pieces hostile strings are built from: path traversal, git ref syntax, shell syntax, option
# look-alikes, unicode digits and direction marks, reserved names, overlong names.
TOKENS = [
    "..", ".", "/", "\\", "../", "../../", "/etc", "~", "~root", "~nosuchuser-monte", "-", "--json", "--help",
    "@", "@50", "/50", "@-1", "@²", "/٣", "@0x10", "@ 5", "@5.0", "exp", "ab", "a", "HEAD", ".lock", "refs/heads/",
    "monte", "vault", "ledger", "lineage", "base", " ", "\t", "\n", "\x00", "é", "²", "٣", "💥", "$(id)", "`id`",
    "*", "?", "[", "{", "^", ":", "%00", "%2e%2e", "x" * 70, "'", '"', ";", "|", "&", ">", "\u202e", "\ufeff",
    "CON", "nul", "gs://", "file://", "http://x", "\udcff", "y" * 300,
]


def hostile_text(d: Draw, *, keep: Sequence[str] = (), max_pieces: int = 6) -> str:
    """A string of hostile pieces, known-good pieces (``keep``) and free text."""
    pieces = []
    for _ in range(d.integer(0, max_pieces)):
        kind = d.integer(0, 3)
        if kind == 0 and keep:
            pieces.append(d.choice(keep))
        elif kind == 3:
            pieces.append(d.text(12))
        else:
            pieces.append(d.choice(TOKENS))
    return "".join(pieces)


# --- running monte in-process ------------------------------------------------------------------


@dataclass
class Outcome:
    code: int
    out: str
    err: str
    escaped: str | None = None  # the traceback of an exception that escaped main()


def run_monte(args: Sequence[str], env: dict[str, str | None] | None = None) -> Outcome:
    """``monte ARGS`` in this process, stdout/stderr captured, no terminal to ask on."""
    from monte.cli.main import main

    out, err = io.StringIO(), io.StringIO()
    saved = {k: os.environ.get(k) for k in (env or {})}
    code, escaped = 0, None
    stdin = sys.stdin
    try:
        for k, v in (env or {}).items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        sys.stdin = io.StringIO("")
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                main(list(args))
            except SystemExit as e:
                code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
            except Exception:  # noqa: BLE001 - exactly what this harness looks for
                escaped = traceback.format_exc()
                code = 1
    finally:
        sys.stdin = stdin
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    return Outcome(code, out.getvalue(), err.getvalue(), escaped)


# --- what must not change ------------------------------------------------------------------------


def tree_state(root: Path, skip: Sequence[Path] = ()) -> dict[str, str]:
    """Every file (sha256), symlink (its target) and folder under ``root``, minus ``skip``."""
    out: dict[str, str] = {}
    skipped = {str(p) for p in skip}
    if not root.exists():
        return out
    for folder, dirs, files in os.walk(root, followlinks=False):
        if folder in skipped:
            dirs[:] = []
            continue
        rel = os.path.relpath(folder, root)
        out[rel + "/"] = "dir"
        keep = []
        for name in dirs:
            p = os.path.join(folder, name)
            if os.path.islink(p):
                out[os.path.relpath(p, root)] = "link:" + os.readlink(p)
            elif p not in skipped:
                keep.append(name)
        dirs[:] = keep
        for name in files:
            p = os.path.join(folder, name)
            key = os.path.relpath(p, root)
            if os.path.islink(p):
                out[key] = "link:" + os.readlink(p)
                continue
            h = hashlib.sha256()
            with open(p, "rb") as f:
                for block in iter(functools.partial(f.read, 1 << 20), b""):
                    h.update(block)
            out[key] = h.hexdigest()
    return out


def refs(repo: Path) -> str:
    return subprocess.run(["git", "-C", str(repo), "for-each-ref", "--format=%(refname) %(objectname)"],
                          capture_output=True, text=True, check=True).stdout


def _diff(a: dict[str, str], b: dict[str, str]) -> list[str]:
    return sorted(k for k in set(a) | set(b) if a.get(k) != b.get(k))


# --- a case and its properties ---------------------------------------------------------------------


@dataclass
class Case:
    target: str
    argv: list[str]
    files: dict[str, bytes] = field(default_factory=dict)  # sandbox-relative path -> bytes, put first
    env: dict[str, str | None] = field(default_factory=dict)
    readonly: bool = False  # a dry run or a read: even success changes nothing
    allowed: tuple[str, ...] = ()  # sandbox-relative paths (or folder prefixes ending "/") success may write
    restore: tuple[str, ...] = ()  # sandbox-relative files to put back afterwards (.monte.yaml...)
    as_json: bool | None = None  # did the case ask for --json (a hostile name may be '--json' too)

    @property
    def json(self) -> bool:
        """Cases put ``--json`` last when they mean it, and say so when a name might be it."""
        argv = list(self.argv)
        if "--" in argv and "--json" in argv and argv.index("--") < argv.index("--json"):
            return False  # after "--", "--json" is an argument (a URL, a name), not the flag
        if self.as_json is not None:
            return self.as_json
        return bool(self.argv) and self.argv[-1] == "--json"

    def to_dict(self) -> dict[str, Any]:
        """JSON-able, to reproduce a failure: ``Case.from_dict(d)``."""
        return {"target": self.target, "argv": self.argv, "env": self.env, "readonly": self.readonly,
                "allowed": list(self.allowed), "restore": list(self.restore), "as_json": self.as_json,
                "files": {k: base64.b64encode(v).decode() for k, v in self.files.items()}}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Case:
        return cls(d["target"], list(d["argv"]), {k: base64.b64decode(v) for k, v in d["files"].items()},
                   dict(d["env"]), d["readonly"], tuple(d["allowed"]), tuple(d["restore"]), d.get("as_json"))


OK_EXITS = {0, 2, 3, 4, 5, 6, 7, 8}
_HUMAN_ERROR = re.compile(r"^(E_[A-Z_]+): ", re.M)


def check_output(case: Case, o: Outcome) -> list[str]:
    problems = []
    if o.escaped:
        problems.append("an exception escaped main():\n" + o.escaped[-1500:])
    if "Traceback" in o.out or "Traceback" in o.err:
        problems.append("a traceback reached the user")
    if o.code not in OK_EXITS:
        problems.append(f"exit status {o.code} (1 is E_INTERNAL: a bug)")
    doc: Any = None
    if case.json and not {"--help", "-h"} & set(case.argv):  # help is help, --json or not
        try:
            doc = json.loads(o.out)
        except ValueError:
            problems.append(f"--json stdout is not one JSON document: {o.out[:300]!r}")
    if o.code != 0 and case.json and doc is not None:
        e = doc.get("error") if isinstance(doc, dict) else None
        if not isinstance(e, dict):
            problems.append(f"a refusal's JSON has no error object: {o.out[:300]!r}")
        else:
            code = e.get("code")
            if code not in CODES:
                problems.append(f"error code {code!r} is not in monte.errors.CODES")
            elif code == "E_INTERNAL":
                problems.append(f"E_INTERNAL: {e.get('message')}")
            elif int(CODES[code].exit_code) != o.code or e.get("exit_code") != o.code:
                problems.append(f"{code} exited {o.code}, its family is {int(CODES[code].exit_code)} "
                                f"(exit_code field {e.get('exit_code')})")
    elif o.code != 0 and not case.json:
        m = _HUMAN_ERROR.search(o.err)
        if m:
            code = m.group(1)
            if code not in CODES or code == "E_INTERNAL" or int(CODES[code].exit_code) != o.code:
                problems.append(f"stderr names {code} but the exit status is {o.code}")
        elif not (o.code == 2 and ("Usage:" in o.err or "Error:" in o.err or '"E_USAGE"' in o.out)):
            problems.append(f"a refusal with no E_ code on stderr: {o.err[:300]!r}")
    elif o.code == 0 and isinstance(doc, dict) and "error" in doc and isinstance(doc["error"], dict):
        problems.append("exit 0 with an error document")
    return problems


class Sandbox:
    """A monte repository with something in it, and a fenced area around it.

    ``base/`` (everything under it is watched) holds ``sandbox/repo`` (git + monte init; the
    trainable ``parity`` environment; experiment ``exp`` on ``model``; one recorded checkpoint,
    run ``self.run`` at step 50; dataset ``rows``), ``sandbox/sentinel`` (files nothing may
    touch), ``sandbox/vault`` (a local-folder Vault, used through ``MONTE_VAULT``) and
    ``sandbox/inputs`` (where cases put their files).
    """

    def __init__(self, repo: Path, base: Path) -> None:
        self.repo = repo
        self.base = base
        self.root = repo.parent
        self.data_root = repo / ".monte"
        self.inputs = self.root / "inputs"
        self.vault = self.root / "vault"
        self.sentinel = self.root / "sentinel"
        self.run = ""
        self.counter = 0
        self.outcomes: dict[str, Counter[str]] = {}  # target -> "exit E_CODE" -> examples
        self.last = Outcome(0, "", "")  # the last case's

    @classmethod
    def build(cls, repo: Path, model: Path, *, base: Path | None = None) -> Sandbox:
        """``repo``: an initialised monte repository (``git init`` + ``monte init``), the cwd."""
        sb = cls(repo, base or repo.parent)
        for d in (sb.inputs, sb.vault, sb.sentinel / "deep"):
            d.mkdir(parents=True, exist_ok=True)
        (sb.sentinel / "keep.txt").write_text("nothing may write here\n")
        (sb.sentinel / "deep" / "keep.bin").write_bytes(bytes(range(256)))
        sb._ok("env", "add", "--server", "parity", "--dev", "parity", "--test", "parity")
        sb._ok("experiment", "init", "exp", "--eval", "parity", "--model", str(model))
        good = sb.inputs / "good.jsonl"
        good.write_text('{"input": "0 1 1", "output": "even"}\n{"input": "1", "output": "odd"}\n')
        sb._ok("dataset", "add", "rows", "--from-file", str(good), "--kind", "sft")
        sb.run = _record_checkpoint(repo, model)
        # a Vault with one real freeze in it, and the same freeze pushed (MONTE_VAULT: not committed)
        sb._ok("env", "add", "--benchmark", "parity", "--as", "pv", env={"MONTE_VAULT": str(sb.vault)})
        return sb

    def _ok(self, *args: str, env: dict[str, str | None] | None = None) -> None:
        o = run_monte([*args, "--json"], env)
        if o.code != 0:
            raise RuntimeError(f"sandbox setup: monte {' '.join(args)} failed: {o.out} {o.err} {o.escaped}")

    def fresh(self, prefix: str = "n") -> str:
        self.counter += 1
        return f"{prefix}{os.getpid()}x{self.counter}"

    # --- state ---------------------------------------------------------------------------------

    def state(self) -> dict[str, Any]:
        git = self.repo / ".git"
        # DVC's cache holds the frozen folders' bytes (links to the data root's files): it is
        # judged with the data root, which a freeze or a fetch may change and a refusal may not
        cache = self.repo / ".dvc" / "cache"
        outside = tree_state(self.base, skip=[git, self.data_root, self.inputs, self.vault, cache])
        outside.update({f"git:{k}": v for k, v in tree_state(git / "hooks").items()})
        for f in ("config", "HEAD"):
            p = git / f
            outside[f"git:{f}"] = hashlib.sha256(p.read_bytes()).hexdigest() if p.exists() else "-"
        data = {**tree_state(self.data_root), **{f"dvc-cache:{k}": v for k, v in tree_state(cache).items()}}
        return {"refs": refs(self.repo), "data": data, "outside": outside, "vault": tree_state(self.vault)}

    def rel(self, key: str) -> str:
        """An ``outside`` key as a sandbox-relative path (what ``Case.allowed`` names)."""
        if key.startswith("git:"):
            return key
        return os.path.relpath(self.base / key.rstrip("/"), self.root) + ("/" if key.endswith("/") else "")

    # --- running a case --------------------------------------------------------------------------

    def execute(self, case: Case) -> list[str]:
        """Put the case's files, run it, check every property; returns the problems (none: ok)."""
        saved = {r: (self.root / r).read_bytes() for r in case.restore if (self.root / r).exists()}
        try:
            for rel, data in case.files.items():
                p = self.root / rel
                p.parent.mkdir(parents=True, exist_ok=True)
                if p.is_symlink() or p.exists():
                    p.unlink()
                p.write_bytes(data)
            before = self.state()
            o = self.last = run_monte(case.argv, case.env)
            after = self.state()
            found = _HUMAN_ERROR.search(o.err) or re.search(r'"code":\s*"(E_[A-Z_]+)"', o.out)
            self.outcomes.setdefault(case.target, Counter())[f"{o.code} {found.group(1) if found else ''}".strip()] += 1
            problems = check_output(case, o)
            changed = [self.rel(k) for k in _diff(before["outside"], after["outside"])]
            bad = [k for k in changed if not any(k == a or (a.endswith("/") and k.startswith(a))
                                                 for a in case.allowed)] if o.code == 0 else changed
            if bad:
                problems.append(f"wrote outside the data root: {bad[:5]}")
            if _diff(before["vault"], after["vault"]) and case.target == "manifest":
                problems.append(f"a Vault read wrote the Vault: {_diff(before['vault'], after['vault'])[:5]}")
            if o.code != 0 or case.readonly:
                what = "a refusal" if o.code != 0 else "a dry run"
                if before["refs"] != after["refs"]:
                    problems.append(f"{what} moved a ref")
                if before["data"] != after["data"]:
                    problems.append(f"{what} changed the data root: {_diff(before['data'], after['data'])[:5]}")
            if problems:
                problems.insert(0, f"monte {' '.join(map(repr, case.argv))} -> exit {o.code}\n"
                                   f"stdout: {o.out[:400]!r}\nstderr: {o.err[:400]!r}")
            return problems
        finally:
            for rel, data in saved.items():
                (self.root / rel).write_bytes(data)
            for rel in case.files:
                if rel.startswith("inputs/"):
                    with contextlib.suppress(OSError):
                        (self.root / rel).unlink()
            for p in self.inputs.glob("dest*"):
                shutil.rmtree(p, ignore_errors=True)
            for p in self.inputs.glob(".dest*"):
                shutil.rmtree(p, ignore_errors=True)


def make_sandbox(base: Path, *, seed: int = 0) -> Sandbox:
    """A whole sandbox from nothing (the long campaign): ``git init``, ``monte init``, a tiny
    model built from a seed, then :meth:`Sandbox.build`. Makes ``base/sandbox/repo`` the cwd."""
    from monte.models.tiny import init_model

    root = base / "sandbox"
    repo = root / "repo"
    repo.mkdir(parents=True)
    subprocess.run(["git", "init", "-q", "-b", "main", str(repo)], check=True)
    os.chdir(repo)
    o = run_monte(["init", "--json"])
    if o.code != 0:
        raise RuntimeError(f"monte init failed: {o.out} {o.err} {o.escaped}")
    model = base / "model"
    init_model(model, seed=seed)
    return Sandbox.build(repo, model, base=base)


def signature(problems: list[str]) -> str:
    """What a failure is, without its particular input: to count distinct failures."""
    lines = [re.sub(r"'[^']*'|\"[^\"]*\"|\b[0-9a-z]{12}\b|\d+", "_", p.splitlines()[0])[:90] for p in problems[1:]]
    return " | ".join(lines)


def _record_checkpoint(repo: Path, model: Path) -> str:
    """One checkpoint at step 50, recorded as `monte train` records it (tests/support/helpers.py)."""
    from monte.ledger.experiment import Ledger
    from monte.ledger.lineage import ensure_base, servable_files
    from monte.training.record import finish_chunk, save_checkpoint, start_chunk
    from monte.workspace import open_workspace

    ws = open_workspace(repo)
    Ledger(ws.store, "exp").measurement()
    cohort, _ = ensure_base(ws.store, "exp", str(model), servable_files(model))
    plan: dict[str, Any] = {"recipe": {"name": "sft-tiny", "sha256": "0" * 64, "algorithm": "sft"},
                            "source": "rows", "parent": None, "boundary": False, "start_step": 0, "steps": 50}
    row = start_chunk(ws, "exp", cohort=cohort, base_model=str(model), plan=plan, smoke=False)
    tmp = repo.parent / f"ck-{row.run}"
    shutil.copytree(model, tmp)
    row = save_checkpoint(ws, "exp", row, 50, tmp)
    finish_chunk(ws, "exp", row, "succeeded")
    return row.run


# --- the targets -----------------------------------------------------------------------------------

RECIPE_KEYS = ["algorithm", "model", "learning_rate", "lr_scheduler_type", "warmup_steps",
               "per_device_train_batch_size", "gradient_accumulation_steps", "weight_decay", "max_grad_norm",
               "seed", "max_length", "completion_only_loss", "num_generations", "beta", "max_completion_length",
               "temperature", "reward_threshold", "teacher", "steps", "max_steps", "steps_per_chunk", "unknown"]
YAML_NASTY = [
    b"a: &a [1]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a]\nc: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b]\n"
    b"d: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c]\ne: &e [*d, *d, *d, *d, *d, *d, *d, *d, *d]\n"
    b"f: &f [*e, *e, *e, *e, *e, *e, *e, *e, *e]\ng: &g [*f, *f, *f, *f, *f, *f, *f, *f, *f]\n"
    b"h: [*g, *g, *g, *g, *g, *g, *g, *g, *g]\nalgorithm: sft\n",
    b"[" * 600 + b"]" * 600,
    b"{a: " * 600 + b"1" + b"}" * 600,
    b"algorithm: !!python/object/apply:os.system ['touch /tmp/monte-pwned']\n",
    b"!!python/object/new:os.system [echo pwned]\n",
    b"algorithm: sft\nalgorithm: grpo\n",
    b"\xef\xbb\xbfalgorithm: sft\n",
    b"\xff\xfe\x00a\x00",
    b"algorithm: sft\n? [a, b]\n: c\n",
    b"algorithm: sft\n<<: {learning_rate: 2}\n",
    b"algorithm: sft\nlearning_rate: .nan\n",
    b"algorithm: sft\nlearning_rate: .inf\n",
    b"algorithm: sft\nseed: 99999999999999999999999999999999999999\n",
    b"algorithm: sft\n1: 2\n",
    b"algorithm: sft\nnull: x\n",
    b"%YAML 1.1\n---\nalgorithm: sft\n...\n---\nalgorithm: grpo\n",
    b"--- !!set\n? a\n",
    b"algorithm: distillation\nteacher: /\n",
    b"algorithm: distillation\nteacher: ../../../../../..\n",
    b"algorithm: sft\nmodel: /etc\n",
    b"algorithm: sft\nmodel: ~nosuchuser-monte/x\n",
    b"algorithm: sft\nmodel: \"a\\0b\"\n",
    b"",
    b"\x00",
]


def _yaml_scalar(d: Draw) -> str:
    return d.choice([
        "1", "0", "-1", "1e-3", "1.0e-4", "2", "0.5", "true", "false", "null", "~", ".nan", ".inf", "-.inf",
        "99999999999999999999999", "'8'", '"1e-4"', "[]", "{}", "[1, 2]", "{a: 1}", "sft", "grpo", "distillation",
        "constant", "!!binary aGVsbG8=", "!!int '3'", "!!float 1", "&x 1", "*x", "/etc", "../../..", "~root",
        "\"\\0\"", "|\n  block\n", "2001-12-14", "0o17", "0x1f", "1_000", "+1", "\"\u202e\"",
    ])


def recipe(d: Draw, sb: Sandbox) -> Case:
    """A recipe file, by path or by name from the repository's ``recipes/``: ``train --dry-run``."""
    mode = d.integer(0, 3)
    if mode == 0:
        text = d.raw(400)
    elif mode == 1:
        text = d.choice(YAML_NASTY)
    else:
        lines = []
        for _ in range(d.integer(0, 8)):
            key = d.choice(RECIPE_KEYS) if d.integer(0, 5) else hostile_text(d, max_pieces=2)
            value = _yaml_scalar(d) if d.integer(0, 4) else json.dumps(hostile_text(d, max_pieces=3))
            lines.append(f"{key}: {value}")
        if d.boolean():
            lines.insert(0, f"algorithm: {d.choice(['sft', 'grpo', 'distillation'])}")
        text = ("\n".join(lines) + "\n").encode("utf-8", "surrogatepass")
    by_name = d.integer(0, 3) == 0
    if by_name:
        rel, spec = "repo/recipes/fuzzed.yaml", "fuzzed"
    else:
        rel = "inputs/recipe.yaml"
        spec = str(sb.root / rel)
    start = d.choice([["--smoke"], ["--from-base"], ["--parent", f"{sb.run}@50"]])
    source = d.choice(["parity", "rows"])
    argv = ["train", "--recipe", spec, "--source", source, *start, "-e", "exp", "--dry-run", "--json"]
    return Case("recipe", argv, files={rel: text}, readonly=True,
                restore=("repo/recipes/fuzzed.yaml",) if by_name else ())


def _jsonl_line(d: Draw) -> bytes:
    kind = d.integer(0, 9)
    if kind == 0:
        return d.raw(60)
    if kind == 1:
        return d.choice([b"", b" ", b"[]", b"1", b"null", b'"x"', b"{", b'{"input": "a"', b"\xff", b"{}\x00",
                         b'{"a": NaN}', b'{"a": Infinity}', b'{"a": 1e999}', b"[" * 2000 + b"]" * 2000,
                         b'{"input": "\\ud800", "output": "x"}', b'{"input": 1, "output": 2}',
                         b'{"input": "", "output": "x"}', b'{"messages": []}',
                         b'{"messages": [{"role": "user", "content": "hi"}]}',
                         b'{"messages": [{"role": 1, "content": "hi"}]}', b'{"__proto__": {"x": 1}}',
                         b'{"input": "a", "input": "b", "output": "c"}'])
    obj: dict[str, Any] = {}
    for _ in range(d.integer(0, 3)):
        key = d.choice(["input", "output", "messages", "prompt", hostile_text(d, max_pieces=2)])
        obj[key] = d.choice([hostile_text(d, max_pieces=3), 1, None, [], {"role": "user", "content": "x"},
                             [{"role": "user", "content": hostile_text(d, max_pieces=2)}], True, 1.5])
    return json.dumps(obj, ensure_ascii=d.boolean()).encode("utf-8", "surrogatepass")


def dataset(d: Draw, sb: Sandbox) -> Case:
    """A JSONL pile handed to ``dataset add --from-file`` (screened, maybe as SFT rows)."""
    sep = d.choice([b"\n", b"\r\n", b"\r", b"\n\n"])
    data = sep.join(_jsonl_line(d) for _ in range(d.integer(0, 6)))
    if d.boolean():
        data += b"\n"
    argv = ["dataset", "add", sb.fresh("ds"), "--from-file", str(sb.inputs / "rows.jsonl")]
    if d.boolean():
        argv += ["--kind", "sft"]
    if d.integer(0, 3) == 0:
        argv += ["--input-key", hostile_text(d, keep=["input", "prompt"], max_pieces=2),
                 "--output-key", hostile_text(d, keep=["output"], max_pieces=2)]
    dry = d.integer(0, 4) == 0
    if dry:
        argv.append("--dry-run")
    as_json = d.integer(0, 5) != 0
    if as_json:
        argv.append("--json")
    return Case("dataset", argv, files={"inputs/rows.jsonl": data}, readonly=dry, as_json=as_json)


HOSTILE_PATHS = ["../x", "../../../../escape", "/abs", "/etc/passwd", "a/../../b", "./a", "a//b", "a/./b", "",
                 ".", "..", "a\\..\\b", "a\x00b", "manifest.json", "exams/parity/dev.jsonl", "rows.jsonl", "a.txt",
                 "deep/er/file", "\udcff", "é/ü", "a/", "~/x", "-rf"]


def _md5(data: bytes) -> str:
    return hashlib.md5(data).hexdigest()  # noqa: S324 - DVC's own object names


def manifest(d: Draw, sb: Sandbox) -> Case:
    """A manifest (and the DVC listing and objects) read back from a local-folder Vault:
    ``env install NAME`` / ``dataset show NAME``. One example in three is a clean freeze (it
    installs: the success path must write only its folder), the rest are hostile at one or more
    of a dozen points."""
    from monte.manifest import Manifest

    hostile = d.integer(0, 2) != 0

    def bad(one_in: int) -> bool:
        return hostile and d.integer(0, one_in - 1) == 0

    kind = d.choice(["environment", "dataset"])
    name = sb.fresh("v")
    plural = kind + "s"
    files: dict[str, bytes] = {}
    # the folder's content: paths (hostile or plain) and their bytes
    content: dict[str, bytes] = {}
    if kind == "dataset":
        content["rows.jsonl"] = b'{"input": "a", "output": "b"}\n'
    else:
        content["exams/parity/dev.jsonl"] = b'{"id": "parity/dev/0", "prompt": "p 1 =", "answer": "odd"}\n'
    for _ in range(d.integer(0, 2)):
        if bad(2):
            path = d.choice(HOSTILE_PATHS) if d.boolean() else hostile_text(d, keep=["a", "b", "/", "x.jsonl"],
                                                                            max_pieces=3)
        else:
            path = d.choice(["a.txt", "deep/er/file", "b.jsonl", "é/ü"])
        content[path] = d.choice([b"", b"x\n", b'{"input": "a", "output": "b"}\n', d.raw(40)])
    if bad(4):
        content.pop(next(iter(content)))
    m: dict[str, Any] = {
        "schema_version": d.choice([2, "1", None]) if bad(8) else 1,
        "kind": d.choice(["environment", "dataset", "other", 1]) if bad(6) else kind,
        "name": hostile_text(d, keep=[name], max_pieces=2) if bad(6) else name,
        "frozen_at": "2026-01-01T00:00:00Z",
        "files": {p: {"sha256": d.choice(["", "0" * 64, "zz"]) if bad(6) else hashlib.sha256(b).hexdigest(),
                      "size": d.choice([-1, 10**30, "1", None]) if bad(6) else len(b)}
                  for p, b in content.items()},
        "provenance": (d.choice([{"source": "file", "path": "/etc/passwd"}, {"source": 1}, []]) if bad(6)
                       else {"source": "catalog"}),
    }
    if kind == "environment":
        first = next(iter(content), "exams/parity/dev.jsonl")
        if bad(2):
            m.update(env_kind=d.choice(["eval-only", "trainable", None, "x"]), form=d.choice(["benchmark", None, "y"]),
                     exams=d.choice([{}, {"parity": {"dev": first}}, {"parity": {"dev": "../../../../etc/passwd"}},
                                     {"../x": {"test": first}}, {"parity": {"dev": "/etc/passwd"}},
                                     {"parity": {"train": first}}, {"parity": {}}, {"parity": {"dev": 1}}]),
                     curriculum=d.choice([None, first, "../../../etc/passwd", "/etc/passwd", "missing.jsonl"]),
                     grader=d.choice([None, {"kind": "catalog", "benchmarks": {"parity": "parity"}}, {"kind": 1}]))
        else:
            m.update(env_kind="eval-only", form="benchmark", exams={"parity": {"dev": first}}, curriculum=None,
                     grader={"kind": "catalog", "benchmarks": {"parity": "parity"}})
    else:
        if bad(2):
            m.update(dataset_kind=d.choice(["sft", None, "rl"]),
                     columns=d.choice([None, {"input": "input", "output": "output"}, {"messages": "messages"}, 1]),
                     rows=d.choice([1, 0, -1, None, 10**20, "x"]))
        else:
            m.update(dataset_kind="sft", columns={"input": "input", "output": "output"}, rows=1)
    if bad(8):
        m[hostile_text(d, max_pieces=2) or "extra"] = 1
    try:
        fingerprint = Manifest.model_validate(m).fingerprint
    except Exception:  # noqa: BLE001 - a hostile manifest need not validate
        fingerprint = "0" * 64
    # the DVC listing: the content's entries, plus hostile extras
    listing = [{"md5": _md5(b), "relpath": p} for p, b in content.items()]
    if bad(3):
        for _ in range(d.integer(1, 2)):
            p = d.choice(HOSTILE_PATHS)
            listing.append({"md5": _md5(p.encode("utf-8", "surrogatepass")), "relpath": p})
    if bad(5):
        listing.append({"md5": d.choice(["../../../../x", "zz", "", "ab/../../../../../escape",
                                         "/" + "a" * 31]), "relpath": d.choice(["a.txt", "rows.jsonl"])})
    for e in listing:
        md5 = str(e["md5"])
        if re.fullmatch(r"[0-9a-f]{32}", md5):
            body = next((b for p, b in content.items() if _md5(b) == md5), md5.encode())
            files[f"vault/files/md5/{md5[:2]}/{md5[2:]}"] = body
    if bad(6) and content:  # an object swapped after the push
        victim = _md5(next(iter(content.values())))
        files[f"vault/files/md5/{victim[:2]}/{victim[2:]}"] = d.raw(20) + b"!"
    listing_raw = json.dumps(listing, ensure_ascii=False).encode("utf-8", "surrogatepass")
    if bad(8):
        listing_raw = d.choice([b"{}", b"[1]", b"not json", b'[{"md5": 1}]', d.raw(40)])
    dir_md5: Any = _md5(listing_raw) + ".dir"
    files[f"vault/files/md5/{dir_md5[:2]}/{dir_md5[2:]}"] = listing_raw
    if bad(8):
        dir_md5 = d.choice(["../../../../x.dir", "", "zz.dir", _md5(b"missing") + ".dir", 1])
    doc: Any = {"manifest": m, "dvc": {"md5": dir_md5, "nfiles": len(listing), "size": 1, "path": f"{plural}/{name}"}}
    raw = json.dumps(doc, ensure_ascii=False, default=str).encode("utf-8", "surrogatepass")
    if bad(10):
        raw = d.raw(200)
    elif bad(10):
        raw = d.choice([b"", b"null", b"[]", b'{"manifest": 1, "dvc": 2}', b'{"manifest": {}}', b"\xff"])
    files[f"vault/monte/manifests/{plural}/{name}.json"] = raw
    claim: Any = {"fingerprint": fingerprint, "host": "h", "claimed_at": "t", "kind": kind, "name": name}
    claim_raw = json.dumps(claim).encode()
    if bad(10):
        claim_raw = d.choice([b"", b"[]", b'{"fingerprint": null}', b"\xff", d.raw(30)])
    files[f"vault/monte/claims/{plural}/{name}.json"] = claim_raw
    argv = ["env", "install", name] if kind == "environment" else ["dataset", "show", name]
    argv.append("--json")
    return Case("manifest", argv, files=files, env={"MONTE_VAULT": str(sb.vault)})


NAME_COMMANDS: list[Callable[[str, Sandbox], list[str]]] = [
    lambda n, sb: ["experiment", "init", n, "--eval", "parity"],
    lambda n, sb: ["experiment", "init", sb.fresh("e"), "--eval", n, "--dry-run"],
    lambda n, sb: ["experiment", "init", sb.fresh("e"), "--eval", "parity", "--model", n, "--dry-run"],
    lambda n, sb: ["env", "add", "--benchmark", "parity", "--as", n],
    lambda n, sb: ["env", "add", "--dev", "parity", "--test", "parity", "--as", n, "--dry-run"],
    lambda n, sb: ["env", "add", "--benchmark", n],
    lambda n, sb: ["env", "install", n],
    lambda n, sb: ["dataset", "add", n, "--from-file", str(sb.inputs / "good.jsonl")],
    lambda n, sb: ["dataset", "show", n],
    lambda n, sb: ["show", n],
    lambda n, sb: ["show", f"exp/{n}"],
    lambda n, sb: ["show", f"{n}/{sb.run}"],
    lambda n, sb: ["logs", f"{n}/{sb.run}"],
    lambda n, sb: ["status", n],
    lambda n, sb: ["ledger", "verify", n],
    lambda n, sb: ["eval", "-e", n, "--dry-run"],
    lambda n, sb: ["train", "--recipe", "sft-tiny", "--source", n, "--smoke", "-e", "exp", "--dry-run"],
    lambda n, sb: ["train", "--recipe", n, "--source", "rows", "--smoke", "-e", "exp", "--dry-run"],
    lambda n, sb: ["push", n],
    lambda n, sb: ["push", "exp", "--run", n],
]


def names(d: Draw, sb: Sandbox) -> Case:
    """A name (experiment, environment, dataset, run) wherever a command takes one."""
    name = hostile_text(d, keep=["exp", "parity", "rows", "pv", sb.run, "vault", "x"], max_pieces=4)
    i = d.integer(0, len(NAME_COMMANDS) - 1)
    argv = NAME_COMMANDS[i](name, sb)
    as_json = d.integer(0, 5) != 0
    if as_json:
        argv.append("--json")
    return Case("names", argv, readonly="--dry-run" in argv or argv[0] in ("show", "status", "logs"),
                env={"MONTE_BUCKET": str(sb.inputs / "no-such-bucket")}, as_json=as_json)


def run_ref(d: Draw, sb: Sandbox) -> str:
    if d.integer(0, 4) == 0:
        return hostile_text(d, keep=[sb.run, "exp", "@50", "/50", "@"], max_pieces=5)
    exp = d.choice(["", "", "exp/", "exp/", "nope/", hostile_text(d, keep=["exp"], max_pieces=2) + "/"])
    run = d.choice([sb.run, sb.run, sb.run[:1], sb.run[:2], sb.run[:11], sb.run + "x", sb.run.upper(),
                    hostile_text(d, keep=[sb.run], max_pieces=2)])
    step = d.choice(["", "@50", "@50", "/50", "@0", "@-1", "@", "@²", "/٣", "@50@50", "@ 50", "@+50", "@5.0",
                     "@" + "9" * 40, "/" + "9" * 40, "@0050", "@" + hostile_text(d, max_pieces=2)])
    return exp + run + step


REF_COMMANDS: list[Callable[[str, Sandbox], list[str]]] = [
    lambda r, sb: ["show", r],
    lambda r, sb: ["logs", r],
    lambda r, sb: ["stop", r],
    lambda r, sb: ["nominate", r, "-e", "exp"],
    lambda r, sb: ["promote", r, "--dest", str(sb.inputs / "dest"), "--confirm", r],
    lambda r, sb: ["promote", r, "--dest", str(sb.inputs / "dest"), "--confirm", r + "x"],
    lambda r, sb: ["eval", "--checkpoint", r, "-e", "exp", "--dry-run"],
    lambda r, sb: ["eval", "--checkpoint", r, "--split", "test", "-e", "exp", "--dry-run"],
    lambda r, sb: ["train", "--recipe", "sft-tiny", "--source", "rows", "--parent", r, "-e", "exp", "--dry-run"],
]


def refs_target(d: Draw, sb: Sandbox) -> Case:
    """``RUN``, ``RUN@STEP``, ``RUN/STEP``, ``EXP/RUN@STEP`` wherever a command takes one."""
    ref = run_ref(d, sb)
    i = d.integer(0, len(REF_COMMANDS) - 1)
    argv = REF_COMMANDS[i](ref, sb)
    as_json = d.integer(0, 5) != 0
    if as_json:
        argv.append("--json")
    promote = argv[0] == "promote"
    return Case("refs", argv, readonly=argv[0] in ("show", "logs") or "--dry-run" in argv or promote,
                allowed=("inputs/",) if promote else (), as_json=as_json)


URLS = ["gs://", "gs:///x", "gs://b", "gs://b/", "gs://b/../..", "gs://b?x=1", "gs://b#f", "gs://b/p/../../q",
        "gs://" + "b" * 300, "file://", "file:///tmp", "file://../../x", "http://x", "s3://b", "", " ", "\t",
        "~", "~/x", "~nosuchuser-monte/x", "../../../../x", "/nonexistent/x", "/", ".", "a\x00b", "\udcff",
        "C:\\x", "gs://b\nvault: /tmp", "-x", "x" * 5000, "/tmp/" + "y" * 300 + "/v"]


def config_set(d: Draw, sb: Sandbox) -> Case:
    """``monte config set vault|bucket URL``: only ``.monte.yaml`` and ``.dvc/config`` may change."""
    url = d.choice(URLS) if d.boolean() else hostile_text(d, keep=["gs://", "b", "/", "file://"], max_pieces=4)
    setting = d.choice(["vault", "bucket", "vault", "bucket", "hub", ""])
    argv = ["config", "set", setting, url]
    as_json = d.integer(0, 5) != 0
    if as_json:
        argv.append("--json")
    return Case("config_set", argv, allowed=("repo/.monte.yaml", "repo/.dvc/config"),
                restore=("repo/.monte.yaml", "repo/.dvc/config"), as_json=as_json)


CONFIG_COMMANDS = [["config"], ["config", "show"], ["status"], ["env", "list"], ["dataset", "list"],
                   ["env", "list", "--vault"], ["dataset", "list", "--vault"], ["show", "exp/{run}"],
                   ["env", "add", "--benchmark", "parity", "--as", "cfgprobe", "--dry-run"],
                   ["dataset", "add", "cfgprobe", "--from-file", "{good}", "--dry-run"],
                   ["eval", "-e", "exp", "--dry-run"], ["ledger", "verify"],
                   ["config", "set", "bucket", "gs://b/p"]]


def config_file(d: Draw, sb: Sandbox) -> Case:
    """Hostile ``.monte.yaml`` contents under the commands that read it."""
    mode = d.integer(0, 3)
    if mode == 0:
        text = d.raw(300)
    elif mode == 1:
        text = d.choice(YAML_NASTY)
    else:
        lines = ["version: 1"] if d.boolean() else []
        for _ in range(d.integer(0, 4)):
            key = d.choice(["vault", "bucket", "hub", "version", "data_root", hostile_text(d, max_pieces=2)])
            value = (json.dumps(d.choice(URLS), ensure_ascii=False) if d.boolean() else _yaml_scalar(d))
            lines.append(f"{key}: {value}")
        text = ("\n".join(lines) + "\n").encode("utf-8", "surrogatepass")
    i = d.integer(0, len(CONFIG_COMMANDS) - 1)
    argv = [a.replace("{run}", sb.run).replace("{good}", str(sb.inputs / "good.jsonl")) for a in CONFIG_COMMANDS[i]]
    argv.append("--json")
    writes = argv[:2] == ["config", "set"]
    return Case("config_file", argv, files={"repo/.monte.yaml": text}, readonly=not writes,
                allowed=("repo/.monte.yaml", "repo/.dvc/config") if writes else (),
                restore=("repo/.monte.yaml", "repo/.dvc/config"),
                env={"MONTE_VAULT": None, "MONTE_BUCKET": None})


TARGETS: dict[str, Callable[[Draw, Sandbox], Case]] = {
    "recipe": recipe,
    "dataset": dataset,
    "manifest": manifest,
    "names": names,
    "refs": refs_target,
    "config_set": config_set,
    "config_file": config_file,
}
