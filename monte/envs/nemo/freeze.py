"""Freezing a NeMo Gym environment: a server's (or a benchmark's) rows, in NeMo Gym's own shape.

The forms are the catalog's (``monte.envs.freeze``): ``--benchmark B``, ``--server S --dev D
--test T``, ``--dev D --test T --as N``. A name is a NeMo Gym resources server or benchmark
(``server:NAME`` / ``benchmark:NAME`` say which; see :func:`monte.envs.nemo.stack.resolve`).

Where a server's rows come from, in this order:

- a Hugging Face token (``HF_TOKEN``): the datasets the server's config names (its ``train`` set
  is the curriculum, its ``validation`` set the exams), pinned to the commit resolved now;
- offline, what NeMo Gym ships: reasoning_gym's generator (``scripts/create_dataset.py``) run
  with recorded seeds; the shipped sets of math_with_judge (``ns_tools``'s ``compmath_test``) and
  math_formal_lean (``minif2f_test``); for an exam only, the server's ``data/example.jsonl``.
  A curriculum with none of these needs the token: the refusal names ``HF_TOKEN`` before
  anything is written.

A benchmark's rows come from its own ``prepare()``, run once in NeMo Gym's interpreter, with
its ``prompt_config`` applied by NeMo Gym's own code.

Splits are disjoint by content as the catalog's are (docs/design.md, "No leaks"): test first, then dev, then
the curriculum, each dropping any row whose chat was seen before. A fixed pool is shuffled with
a recorded seed and cut; a generator draws each role from its own seed range.

The manifest's grader names, per exam and for the curriculum, the server folder, its config and
instance, NeMo Gym's version, and the sha256 of the config files and the server's code: all part
of the environment's fingerprint.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from monte import jsonl
from monte.envs.items import LeakIndex
from monte.envs.nemo import rows as gym_rows
from monte.envs.nemo import stack as gym_stack
from monte.envs.nemo.stack import EXAMPLE, GENERATORS, OFFLINE_POOLS, PROVIDER, GymEntry, Stack
from monte.errors import error
from monte.hashing import hash_tree, sha256_bytes
from monte.ledger.predicates import is_sealed
from monte.manifest import MANIFEST, FileEntry, Floor, Manifest

#: Default rows per role (the catalog's). A fixed pool smaller than these is cut in proportion.
SIZES = {"test": 200, "dev": 200, "curriculum": 5000}
#: Seeds per role for a generator, a million apart (as the catalog's).
SEEDS = {"test": 3_000_000, "dev": 2_000_000, "curriculum": 1_000_000}
#: The seed that shuffles a fixed pool before it is cut.
SHUFFLE_SEED = 20_251_201
#: reasoning_gym's generator: three tasks its script generates offline, in seconds, the same bytes every run.
GENERATOR_TASKS = "knights_knaves,basic_arithmetic,syllogism"
TOKEN_VARS = ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN")


def hf_token() -> str | None:
    for var in TOKEN_VARS:
        if os.environ.get(var):
            return os.environ[var]
    return None


@dataclass
class GymPlan:
    name: str
    form: Literal["benchmark", "server", "exams"]
    env_kind: Literal["eval-only", "trainable"]
    exams: dict[str, dict[str, str]]  # exam -> split -> spec
    curriculum: str | None  # spec
    stack: Stack
    entries: dict[str, GymEntry]  # spec -> entry
    sources: dict[str, str]  # spec -> "huggingface" | "generator" | "pool" | "example" | "prepare"
    sizes: dict[str, int] = field(default_factory=dict)
    provider: str = PROVIDER
    #: "exam/split" (and "curriculum") -> the rows the freeze takes (:meth:`count`, or the freeze
    #: itself); ``None``: known only once the source is downloaded or prepared
    tasks: dict[str, int | None] | None = None
    tasks_note: str = ""

    def count(self) -> None:
        """What the freeze will take, for a dry run: :func:`count_rows`."""
        self.tasks, self.tasks_note = count_rows(self)
        self.sizes.update({k: n for k, n in self.tasks.items() if n is not None})

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "form": self.form, "kind": self.env_kind, "exams": self.exams,
                "curriculum": self.curriculum, "sizes": self.sizes, "provider": self.provider,
                "nemo_gym": self.stack.describe(), "sources": self.sources,
                **({"tasks": self.tasks} if self.tasks is not None else {}),
                **({"tasks_note": self.tasks_note} if self.tasks_note else {})}


def names_gym(stack: Stack | None, specs: list[str], catalog: set[str]) -> bool | None:
    """Which provider the names belong to: ``True`` NeMo Gym, ``False`` the catalog, ``None``
    nothing named. Names of both refuse: one environment is graded by one provider."""
    gym = [s for s in specs if s not in catalog and (s.startswith(("server:", "benchmark:")) or (
        stack is not None and gym_stack.resolve(stack, s, want="exam") is not None))]
    if not specs:
        return None
    if gym and len(gym) != len(specs):
        raise error("E_USAGE", f"{', '.join(gym)} {'is' if len(gym) == 1 else 'are'} NeMo Gym's and "
                    f"{', '.join(s for s in specs if s not in gym)} the built-in catalog's: an environment is graded "
                    "by one provider", "freeze them as two environments")
    return bool(gym)


def plan_freeze(*, name: str | None, benchmark: str | None, server: str | None, dev: tuple[str, ...],
                test: tuple[str, ...]) -> GymPlan:
    usage = ("the forms are: --benchmark B [--as N] | --server S --dev B --test B [--as N] | "
             "--dev B --test B --as N")
    stack = gym_stack.require("freezing a NeMo Gym environment")
    entries: dict[str, GymEntry] = {}

    def entry(spec: str, want: Literal["server", "exam", "benchmark"]) -> GymEntry:
        e = gym_stack.resolve(stack, spec, want=want)
        if e is None or (want == "server" and e.kind != "server"):
            raise error("E_NOT_FOUND", f"NeMo Gym {stack.version} at {stack.root} has no "
                        f"{'resources server' if want == 'server' else 'benchmark or resources server'} {spec!r}",
                        "list what it ships with `monte env list --available`")
        entries[spec] = e
        return e

    exams: dict[str, dict[str, str]] = {}
    if benchmark:
        if server or dev or test:
            raise error("E_USAGE", "--benchmark stands alone (with --as)", usage)
        e = entry(benchmark, "benchmark")
        exams[e.name] = {"dev": benchmark}
        form: Literal["benchmark", "server", "exams"] = "benchmark"
    else:
        if not (dev and test):
            raise error("E_USAGE", "--server needs both --dev and --test: a frozen environment cannot gain a test "
                        "exam later" if server else "an exams-only environment needs --dev and --test", usage)
        if not server and not name:
            raise error("E_USAGE", "--as NAME is required with --dev/--test alone", usage)
        form = "server" if server else "exams"
        for split, specs in (("dev", dev), ("test", test)):
            for spec in specs:
                e = entry(spec, "exam")
                if split in exams.get(e.name, {}):
                    raise error("E_USAGE", f"--{split} {spec} is given twice", "name each exam once")
                exams.setdefault(e.name, {})[split] = spec
    if server:
        entry(server, "server")
    default = entries[benchmark].name if benchmark else entries[server].name if server else ""
    plan = GymPlan(name=name or default, form=form,
                   env_kind="trainable" if server else "eval-only", exams=exams, curriculum=server,
                   stack=stack, entries=entries, sources={})
    token = hf_token()
    for spec, e in entries.items():
        plan.sources[spec] = _source_for(e, curriculum=spec == server, token=token)
    for exam, splits in exams.items():
        for split in splits:
            plan.sizes[f"{exam}/{split}"] = SIZES[split]
    if server:
        plan.sizes["curriculum"] = SIZES["curriculum"]
    return plan


def _source_for(e: GymEntry, *, curriculum: bool, token: str | None) -> str:
    if e.kind == "benchmark":
        return "prepare"
    hf = [d for d in e.datasets if d.hf_repo and d.type in (("train",) if curriculum else ("validation", "train"))]
    if token and hf:
        return "huggingface"
    if e.offline == "generator":
        return "generator"
    if e.offline not in (None, EXAMPLE):
        return "pool"
    if curriculum:
        raise error("E_STORAGE", f"freezing --server {e.name} downloads the training data its config names "
                    f"({', '.join(sorted({d.hf_repo or '' for d in hf})) or 'none named'}) from Hugging Face, and no "
                    "token is set (NeMo Gym ships no curriculum for it)",
                    "set HF_TOKEN to a Hugging Face token (or `hf auth login` and export it), then add again; "
                    "offline, freeze it as an exam: `monte env add --benchmark " + e.name + "`")
    if e.offline == EXAMPLE:
        return "example"
    raise error("E_NOT_FOUND", f"NeMo Gym's {e.name} ships no rows this machine can freeze offline",
                "set HF_TOKEN so the dataset its config names can be fetched")


# --- prepare: the rows, the splits, the manifest --------------------------------------------------


def _roles(plan: GymPlan) -> tuple[list[tuple[str, str, str]], dict[str, list[str]]]:
    """(role key, split, spec) in the order the splits are cut (test, dev, curriculum), and per
    spec the splits that share its rows."""
    roles: list[tuple[str, str, str]] = []
    roles += [(f"{x}/test", "test", sp["test"]) for x, sp in plan.exams.items() if "test" in sp]
    roles += [(f"{x}/dev", "dev", sp["dev"]) for x, sp in plan.exams.items() if "dev" in sp]
    if plan.curriculum:
        roles.append(("curriculum", "curriculum", plan.curriculum))
    sharing: dict[str, list[str]] = {}
    for _key, split, spec in roles:
        sharing.setdefault(spec, []).append(split)
    return roles, sharing


def count_rows(plan: GymPlan) -> tuple[dict[str, int | None], str]:
    """The rows the freeze will take per role, without freezing: a file on disk in the Gym
    checkout (a shipped pool, a server's ``example.jsonl``) is read and cut by the freeze's own
    code (shuffle, proportional share, disjointness); a generator gives exactly what is asked or
    the freeze refuses. A download or a benchmark's ``prepare()`` is not run: ``None``, and the note
    says at most how many."""
    seen: set[str] = set()
    out: dict[str, int | None] = {}
    later: list[str] = []
    roles, sharing = _roles(plan)
    with tempfile.TemporaryDirectory(prefix="monte-gym-count-") as tmp:
        pools = {spec: _Pool(plan.stack, e, plan.sources[spec], Path(tmp), token=None)
                 for spec, e in plan.entries.items()}
        for key, split, spec in roles:
            source = plan.sources[spec]
            if source == "generator":
                out[key] = plan.sizes[key]
            elif source in ("pool", "example"):
                rows, _ = pools[spec].take(split, plan.sizes[key], seen, sharing[spec])
                out[key] = len(rows)
            else:
                out[key] = None
                later.append(f"{key} at most {plan.sizes[key]}")
    note = (f"{'; '.join(later)}: known once the freeze {'downloads' if 'huggingface' in plan.sources.values() else 'prepares'} "
            "the rows") if later else ""
    return out, note


def prepare(plan: GymPlan, folder: Path) -> Manifest:
    """Fetch or generate each source once, cut disjoint splits into ``folder``, grade each exam
    split's constant-answer floor through its server, return the manifest."""
    seen: set[str] = set()
    dropped: dict[str, int] = {}
    provenance_sources: dict[str, Any] = {}
    pools: dict[str, _Pool] = {}
    exam_rows: dict[str, dict[str, list[dict[str, Any]]]] = {}
    with tempfile.TemporaryDirectory(prefix="monte-gym-") as tmp:
        work = Path(tmp)
        for spec, e in plan.entries.items():
            pools[spec] = _Pool(plan.stack, e, plan.sources[spec], work, token=hf_token())
        roles, sharing = _roles(plan)
        files_for: dict[str, dict[str, str]] = {}
        for key, split, spec in roles:
            rows, d = pools[spec].take(split, plan.sizes[key], seen, sharing[spec])
            plan.sizes[key] = len(rows)
            dropped[key] = d
            rel = "curriculum.jsonl" if split == "curriculum" else f"exams/{key}.jsonl"
            out = folder / rel
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_bytes(jsonl.dump_lines(rows))
            if split != "curriculum":
                exam = key.rsplit("/", 1)[0]
                files_for.setdefault(exam, {})[split] = rel
                exam_rows.setdefault(exam, {})[split] = rows
        for spec, pool in pools.items():
            provenance_sources[spec] = pool.provenance
    plan.tasks = {key: plan.sizes[key] for key, _s, _sp in roles}
    servers = {x: server_identity(plan.stack, plan.entries[next(iter(sp.values()))]) for x, sp in plan.exams.items()}
    grader: dict[str, Any] = {
        "kind": PROVIDER,
        "version": plan.stack.version,
        "benchmarks": {x: next(iter(sp.values())) for x, sp in plan.exams.items()},
        "servers": servers,
        **({"curriculum": server_identity(plan.stack, plan.entries[plan.curriculum])} if plan.curriculum else {}),
    }
    provenance = {
        "source": PROVIDER,
        "nemo_gym": {"version": plan.stack.version, "origin": plan.stack.origin},
        "benchmarks": {spec: {"provider": PROVIDER, "version": plan.stack.version, "kind": e.kind,
                              "server": e.server} for spec, e in plan.entries.items()},
        "roles": {**{f"{x}/{s}": spec for x, sp in plan.exams.items() for s, spec in sp.items()},
                  **({"curriculum": plan.curriculum} if plan.curriculum else {})},
        "rows_from": provenance_sources,
        "sizes": plan.sizes,
        "dropped_for_disjointness": dropped,
    }
    floors, notes = exam_floors(plan.stack, servers, exam_rows)
    provenance["floor"] = notes
    files = {k: FileEntry(**v) for k, v in hash_tree(folder).items() if k != MANIFEST}  # type: ignore[arg-type]
    return Manifest(kind="environment", name=plan.name, files=files, provenance=provenance,
                    env_kind=plan.env_kind, form=plan.form, exams=files_for,
                    curriculum="curriculum.jsonl" if plan.curriculum else None, grader=grader, floors=floors)


def exam_floors(stack: Stack, servers: dict[str, dict[str, Any]], exam_rows: dict[str, dict[str, list[dict[str, Any]]]],
                ) -> tuple[dict[str, dict[str, Floor]], dict[str, dict[str, Any]]]:
    """Each exam split's constant-answer floor (:mod:`monte.envs.nemo.floor`), graded by the exam's
    own server, started once per exam from this stack; and per "exam/split" what the record says
    (the field and form graded, or why there is no floor). A server that cannot start or fails
    refuses the freeze (``E_ENV``): nothing is written."""
    from monte.envs.nemo import floor as gym_floor
    from monte.envs.nemo.server import GymServer
    from monte.errors import MonteError

    floors: dict[str, dict[str, Floor]] = {}
    notes: dict[str, dict[str, Any]] = {}
    for exam, splits in exam_rows.items():
        ident = servers[exam]
        todo = {}
        for split, rows in splits.items():
            why = gym_floor.why_none(rows, ident.get("judge") or [])
            if why is None:
                todo[split] = rows
            else:
                notes[f"{exam}/{split}"] = {"none": why}
        if not todo:
            continue
        fd, name = tempfile.mkstemp(prefix=f"monte-gym-floor-{ident['server']}-", suffix=".log")
        os.close(fd)
        log = Path(name)
        try:
            with GymServer.start(stack, config=str(ident["config"]), instance=str(ident["instance"]),
                                 server=str(ident["server"]), log=log) as server:
                for split, rows in todo.items():
                    f, note = gym_floor.gym_floor(server, rows)
                    notes[f"{exam}/{split}"] = note
                    if f is not None:
                        floors.setdefault(exam, {})[split] = f
        except MonteError as e:
            raise error(e.code, f"grading exam {exam}'s constant-answer floor at freeze time: {e.message}",
                        e.fix) from None
        log.unlink(missing_ok=True)  # kept when the server failed: the fix names it
    return floors, notes


def config_chain(root: Path, config: str) -> list[str]:
    """``config`` and every file its ``config_paths`` name, transitively (relative to ``root``)."""
    out: list[str] = []
    todo = [config]
    while todo:
        rel = todo.pop(0)
        if rel in out or not (root / rel).is_file():
            continue
        out.append(rel)
        data = gym_stack.load_yaml(root / rel)
        todo += [str(p) for p in data.get("config_paths") or [] if isinstance(p, str)]
    return out


def server_identity(stack: Stack, e: GymEntry) -> dict[str, Any]:
    """What grades an exam: the server, its config and instance, and hashes of both (the config
    files with every ``config_paths`` file they chain, and the server folder's Python code)."""
    chain = config_chain(stack.root, e.config)
    folder = stack.root / "resources_servers" / e.server
    code = sorted(p for p in folder.glob("*.py") if p.is_file())
    return {
        "server": e.server, "kind": e.kind, "name": e.name, "config": e.config, "instance": e.instance,
        "version": stack.version, "judge": list(e.judge),
        "config_sha256": _digest({rel: (stack.root / rel).read_bytes() for rel in chain}),
        "code_sha256": _digest({p.name: p.read_bytes() for p in code}),
    }


def _digest(files: dict[str, bytes]) -> str:
    return sha256_bytes(json.dumps({k: sha256_bytes(v) for k, v in sorted(files.items())}, sort_keys=True).encode())


class _Pool:
    """The rows one server or benchmark gives, and how each role takes its share."""

    def __init__(self, stack: Stack, e: GymEntry, source: str, work: Path, *, token: str | None) -> None:
        self.stack, self.e, self.source, self.work, self.token = stack, e, source, work, token
        self.provenance: dict[str, Any] = {"source": source}
        self._fixed: dict[str, list[dict[str, Any]]] = {}  # pool name -> shuffled rows
        self._cursor: dict[str, int] = {}
        self._plan: dict[str, int] = {}
        self._sealed: dict[str, str] = {}  # the test rows' prompts, once taken (test is taken first)
        self._index: LeakIndex | None = None

    def _leaks(self, split: str, row: dict[str, Any]) -> bool:
        """A curriculum row the leak check would refuse as holding a test row (an edited copy, a
        padded one: :class:`monte.envs.items.LeakIndex`, the check training runs): kept out here,
        as equal rows are, so a fresh freeze is a source training accepts."""
        if split != "curriculum" or not self._sealed:
            return False
        if self._index is None:
            self._index = LeakIndex.build(self._sealed)
        return bool(self._index.find(row))

    def take(self, split: str, want: int, seen: set[str], sharing: list[str]) -> tuple[list[dict[str, Any]], int]:
        picked, dropped = self._take(split, want, seen, sharing)
        if is_sealed(split):
            self._sealed.update({f"{split}/{k}": gym_rows.prompt_text(r) for k, r in enumerate(picked)})
            self._index = None
        return picked, dropped

    # which fixed pool a role draws from
    def _pool_name(self, split: str) -> str:
        if self.source == "huggingface":
            where = {d.type: (d.hf_repo, d.hf_file) for d in self.e.datasets if d.hf_repo}
            if "validation" not in where or where.get("train") == where["validation"]:
                return "all"  # one set serves every split (cut disjoint, as a shipped file is)
            return "train" if split == "curriculum" else "validation"
        return "all"

    def _take(self, split: str, want: int, seen: set[str], sharing: list[str]) -> tuple[list[dict[str, Any]], int]:
        if self.source == "generator":
            return self._generate(split, want, seen)
        pool = self._pool_name(split)
        rows = self._load(pool)
        if pool not in self._plan:  # cut in proportion when the pool is smaller than the sizes
            users = [s for s in sharing if self._pool_name(s) == pool]
            self._plan[pool] = len(rows)
            exams = [s for s in users if s != "curriculum"]
            if len(rows) < len(users):
                raise error("E_REFUSED", f"NeMo Gym's {self.e.name} gives {len(rows)} row(s), too few for "
                            f"{len(users)} disjoint splits ({', '.join(users)})",
                            "freeze it as one exam (`--benchmark`), or give it a larger source (HF_TOKEN)")
            share = max(1, len(rows) // (4 if "curriculum" in users else max(1, len(exams))))
            self._plan.update({f"{pool}:{s}": min(SIZES[s], share) for s in exams})
        n = want if split == "curriculum" else min(want, self._plan[f"{pool}:{split}"])
        picked: list[dict[str, Any]] = []
        dropped = 0
        i = self._cursor.get(pool, 0)
        while i < len(rows) and len(picked) < n:
            key = _key(rows[i])
            i += 1
            if key in seen or self._leaks(split, rows[i - 1]):
                dropped += 1
                continue
            seen.add(key)
            picked.append(rows[i - 1])
        self._cursor[pool] = i
        if not picked:
            raise error("E_REFUSED", f"NeMo Gym's {self.e.name} has no rows left for the {split} split that the other "
                        "splits do not already hold", "freeze fewer splits from it, or give it a larger source")
        return picked, dropped

    def _load(self, pool: str) -> list[dict[str, Any]]:
        if pool in self._fixed:
            return self._fixed[pool]
        if self.source == "prepare":
            path, prov = _run_prepare(self.stack, self.e, self.work)
        elif self.source == "huggingface":
            path, prov = _fetch_hf(self.e, pool)
        else:
            rel = OFFLINE_POOLS[self.e.server] if self.source == "pool" else \
                f"resources_servers/{self.e.server}/{EXAMPLE}"
            path = self.stack.root / rel
            prov = {"file": rel}
        raw = path.read_bytes()
        rows = _parse(raw, str(path))
        prov.update(sha256=sha256_bytes(raw), rows=len(rows), shuffle_seed=SHUFFLE_SEED)
        self.provenance[pool] = prov
        order = list(range(len(rows)))
        random.Random(SHUFFLE_SEED).shuffle(order)
        self._fixed[pool] = [rows[i] for i in order]
        return self._fixed[pool]

    def _generate(self, split: str, n: int, seen: set[str]) -> tuple[list[dict[str, Any]], int]:
        """reasoning_gym's own generator, with this role's seed; more rows until ``n`` are new."""
        script = self.stack.root / GENERATORS[self.e.server]
        python = gym_stack.require_python(self.stack, f"NeMo Gym's {self.e.name} generator")
        want = n
        while True:
            out = self.work / f"gen-{split}-{want}.jsonl"
            cmd = [python, str(script), "--tasks", GENERATOR_TASKS, "--size", str(want), "--seed", str(SEEDS[split]),
                   "--output", str(out)]
            r = subprocess.run(cmd, cwd=self.stack.root, capture_output=True, text=True,
                               env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"})
            if r.returncode != 0 or not out.is_file():
                raise error("E_ENV", f"NeMo Gym's {self.e.name} generator failed (status {r.returncode}): "
                            f"{(r.stderr or r.stdout).strip()[-500:]}",
                            f"run it by hand to see why: {' '.join(cmd)}")
            rows = _parse(out.read_bytes(), str(out))
            picked, dropped, keys = [], 0, set()
            for row in rows:
                key = _key(row)
                if key in seen or key in keys or self._leaks(split, row):
                    dropped += 1
                    continue
                keys.add(key)
                picked.append(row)
                if len(picked) == n:
                    break
            if len(picked) == n:
                seen |= keys
                self.provenance[split] = {"script": GENERATORS[self.e.server], "tasks": GENERATOR_TASKS,
                                          "seed": SEEDS[split], "size": want,
                                          "sha256": sha256_bytes(out.read_bytes())}
                return picked, dropped
            if want >= 20 * n + 1000:
                raise error("E_REFUSED", f"NeMo Gym's {self.e.name} generator could not give {n} rows disjoint from "
                            f"the other splits ({len(picked)} of {want} were new)",
                            "its item space is too small for disjoint splits")
            want = want * 2 + 10


def _key(row: dict[str, Any]) -> str:
    from monte.envs.freeze import normalise

    return normalise(gym_rows.prompt_text(row))


def _parse(raw: bytes, where: str) -> list[dict[str, Any]]:
    try:
        rows = jsonl.load_lines(raw)
    except ValueError as e:
        raise error("E_BAD_INPUT", f"{where} is not JSON lines: {e}", "it is not a NeMo Gym data file") from None
    return [gym_rows.check_row(r, f"{where} line {i + 1}") for i, r in enumerate(rows)]


def _run_prepare(stack: Stack, e: GymEntry, work: Path) -> tuple[Path, dict[str, Any]]:
    """The benchmark's ``prepare()``, once, in NeMo Gym's interpreter (see ``launch.py prepare``)."""
    from monte.envs.nemo.server import LAUNCHER

    python = gym_stack.require_python(stack, f"NeMo Gym's {e.name} prepare")
    out = work / f"prepared-{e.name}.jsonl"
    cmd = [python, str(LAUNCHER), "prepare", "--root", str(stack.root), "--config", e.config, "--out", str(out)]
    r = subprocess.run(cmd, cwd=stack.root, capture_output=True, text=True,
                       env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"})
    msg: dict[str, Any] = {}
    for line in reversed(r.stdout.strip().splitlines()):
        try:
            msg = json.loads(line)
            break
        except ValueError:
            continue
    if r.returncode != 0 or "error" in msg or not out.is_file():
        raise error("E_ENV", f"NeMo Gym's prepare for benchmark {e.name} failed: "
                    f"{msg.get('message') or (r.stderr.strip()[-500:])}",
                    "prepare downloads most benchmarks' data: check the network and the packages it imports "
                    f"(run it by hand: {' '.join(cmd)})")
    return out, {"benchmark": e.name, "config": e.config, "prepared": msg.get("prepared"),
                 "prompt_config": msg.get("prompt_config"), "instance": msg.get("instance")}


def _fetch_hf(e: GymEntry, pool: str) -> tuple[Path, dict[str, Any]]:
    from monte.storage.hub import fetch_dataset_file

    want = "validation" if pool == "validation" else "train"
    d = next((d for d in e.datasets if d.type == want and d.hf_repo), None) or next(d for d in e.datasets if d.hf_repo)
    assert d.hf_repo is not None
    path, sha, fname = fetch_dataset_file(d.hf_repo, None, d.hf_file)
    return path, {"huggingface": d.hf_repo, "revision": sha, "file": fname, "dataset": d.name}
