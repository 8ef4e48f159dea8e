"""Grading a frozen environment's rows: in-process by the catalog, or over HTTP by NeMo Gym's own
resources server. ``monte eval`` and GRPO's reward both come through here.

An environment's manifest (and the experiment's ``measurement.json``, which copies it) names
its grader: ``{"kind": "catalog", "benchmarks": {exam: benchmark}}`` or ``{"kind": "nemo-gym",
"servers": {exam: identity}, "curriculum": identity, ...}`` (see :mod:`monte.envs.nemo.freeze`), or
``{"kind": "jsonl", "graders": {exam: spec}}`` (:mod:`monte.envs.jsonl_exam`), or ``{"kind": "lm-eval",
"tasks": {exam: closure}}`` (:mod:`monte.envs.lmeval`: lm-eval builds the requests and grades them).
A NeMo Gym server is started from the stack found here, after proving it is the one the
environment was frozen with (NeMo Gym's version, the config files and the server's code, by
sha256), unless a URL names one already running (:func:`monte.envs.nemo.server.server_url`).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

# re-exported: one quoting of answers for every grader
from monte.envs.answers import ANSWER_KEEP as ANSWER_KEEP
from monte.envs.answers import answer_fields as answer_fields
from monte.envs.nemo.rows import is_gym_row, messages
from monte.errors import error

GYM = "nemo-gym"
JSONL = "jsonl"  # monte.envs.jsonl_exam
LMEVAL = "lm-eval"  # monte.envs.lmeval


def is_gym(grader: dict[str, Any] | None) -> bool:
    return (grader or {}).get("kind") == GYM


#: How an experiment on a NeMo Gym environment generates by default: the chat template (its rows
#: are chats), room for a worked answer ending in ``\boxed{}`` or ``<answer>``, and no stop string
#: (a newline would cut the answer before the part the server grades).
GYM_EVAL = {"chat_template": True, "max_new_tokens": 512, "stop": []}


def proves_first(grader: dict[str, Any] | None) -> bool:
    """Whether an eval makes this grader before it writes anything: an lm-eval exam's proof (its
    files and every document's hashes) is cheap and refuses a drifted task before any record."""
    return (grader or {}).get("kind") == LMEVAL


def eval_defaults(grader: dict[str, Any] | None) -> dict[str, Any]:
    """The eval settings an experiment on this environment freezes (the catalog's: monte's own)."""
    return dict(GYM_EVAL) if is_gym(grader) else {}


def prompt_of(row: dict[str, Any]) -> str | list[dict[str, str]]:
    """What the model is asked: a catalog item's prompt text, or a NeMo Gym row's chat (which
    generation renders with the model's chat template)."""
    return messages(row) if is_gym_row(row) else str(row["prompt"])


def task_id(row: dict[str, Any], prefix: str, index: int) -> str:
    """A catalog item's own id; a NeMo Gym row's place in its file (it carries no id of monte's)."""
    rid = row.get("id")
    if not is_gym_row(row) and rid is not None:
        return str(rid)
    return f"{prefix}/{index:06d}" if prefix == "curriculum" else f"{prefix}/{index:05d}"



class ExamGrader:
    """One exam's grader for one eval: the catalog's benchmark, or a NeMo Gym server started
    when this is made (so a server that cannot start refuses before the eval spends its touch).
    :meth:`grade` returns one ``tasks.jsonl`` entry per answer: ``id``, ``score``, ``answer``
    (the whole text the grade was computed from: re-graded, it gives the recorded score) and,
    from a server, its ``reward`` and ``extracted`` answer (whole too). A
    server that fails refuses: no partial set is returned. :meth:`close` stops the server."""

    def __init__(self, grader: dict[str, Any] | None, benchmark: str, exam: str, *, needed: bool = True,
                 config: dict[str, Any] | None = None, log: Path | None = None, folder: Path | None = None,
                 split: str | None = None, items: Sequence[dict[str, Any]] | None = None,
                 graded_elsewhere: bool = False) -> None:
        self.benchmark = benchmark
        self.server: Any = None
        self.gym = is_gym(grader)
        self.kind = (grader or {}).get("kind")
        #: an lm-eval exam: lm-eval builds its requests and grades; :meth:`evaluate` runs them
        self.lmeval: Any = None
        self.file: Any = None
        if self.kind == JSONL and needed:
            from monte.envs.jsonl_exam import JsonlGrader

            assert grader is not None
            self.file = JsonlGrader(dict(grader["graders"][exam]), folder)
        if self.kind == LMEVAL and needed:
            from monte.envs.lmeval.evaluate import Prepared

            assert grader is not None and folder is not None and split is not None and items is not None
            # every frozen file and every document's hashes proven here, before the touch is spent
            self.lmeval = Prepared(grader["tasks"][exam], folder, split, list(items),
                                   graded_elsewhere=graded_elsewhere)
        if not (needed and self.gym):
            return
        assert grader is not None
        identity = (grader.get("servers") or {}).get(exam)
        if not isinstance(identity, dict):
            raise error("E_INTEGRITY", f"the grader frozen with this environment names no NeMo Gym server for exam "
                        f"{exam!r}", "re-freeze the environment (`monte env add`) and start a new experiment on it")
        self.server = open_server(identity, config=config, log=log)

    @property
    def generates(self) -> bool:
        """Whether this grader runs the generation itself (lm-eval builds the requests)."""
        return self.lmeval is not None

    def evaluate(self, model: Any, tok: Any, settings: dict[str, Any],
                 on_progress: Any = None, generate_with: Any = None) -> list[dict[str, Any]]:
        """An lm-eval exam: lm-eval's requests answered by ``model`` (or generated by
        ``generate_with``: the shard processes of ``--processes N``), graded by lm-eval."""
        assert self.lmeval is not None
        return list(self.lmeval.run(model, tok, batch_size=int(settings.get("batch_size", 32)),
                                    on_progress=on_progress, generate_with=generate_with))

    def grade(self, items: Sequence[dict[str, Any]], answers: Sequence[str], ids: Sequence[str]) -> list[dict[str, Any]]:
        if self.file is not None:
            self.file.raised = 0
            out = [{"id": i, "score": float(self.file.grade(item, a)), **answer_fields(a)}
                   for i, item, a in zip(ids, items, answers, strict=True)]
            self.file.check_graded(len(out))
            return out
        if not self.gym:
            from monte.envs.registry import get

            bench = get(self.benchmark).benchmark
            return [{"id": i, "score": float(bench.grade(item, a)), **answer_fields(a)}
                    for i, item, a in zip(ids, items, answers, strict=True)]
        assert self.server is not None
        replies = self.server.verify_many(list(items), list(answers), ids=list(ids))
        out = []
        for i, a, r in zip(ids, answers, replies, strict=True):
            extracted = r.get("extracted_answer")
            out.append({"id": i, "score": float(r["reward"]), "reward": r["reward"], **answer_fields(a),
                        **({"extracted": str(extracted)} if extracted is not None else {})})
        return out

    def close(self) -> None:
        if self.server is not None:
            self.server.close()

    def __enter__(self) -> ExamGrader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def grade_tasks(grader: dict[str, Any] | None, benchmark: str, exam: str, items: Sequence[dict[str, Any]],
                answers: Sequence[str], ids: Sequence[str], *, config: dict[str, Any] | None = None,
                log: Path | None = None) -> list[dict[str, Any]]:
    """Grade once: :class:`ExamGrader` made, used and closed."""
    with ExamGrader(grader, benchmark, exam, config=config, log=log) as g:
        return g.grade(items, answers, ids)


def open_server(identity: dict[str, Any], *, config: dict[str, Any] | None = None, log: Path | None = None) -> Any:
    """The resources server ``identity`` names: one already running at a configured URL, else
    one started here from the stack, proven to be the one the environment was frozen with."""
    from monte.envs.nemo import server as gym_server
    from monte.envs.nemo import stack as gym_stack

    instance = str(identity.get("instance", ""))
    url = gym_server.server_url(config or {}, instance)
    if url:
        return gym_server.connect(url, f"NeMo Gym server {instance}")
    stack = gym_stack.require(f"grading through NeMo Gym's {identity.get('server')} server")
    check_identity(stack, identity)
    return gym_server.GymServer.start(stack, config=str(identity["config"]), instance=instance,
                                      server=str(identity["server"]), log=log)


def check_identity(stack: Any, identity: dict[str, Any]) -> None:
    """Refuse a stack whose server is not the one frozen (version, config or code)."""
    from monte.envs.nemo import freeze as gym_freeze
    from monte.envs.nemo import stack as gym_stack

    kind = identity.get("kind", "server")
    name = str(identity.get("name") or identity.get("server"))
    entry = (gym_stack.benchmark_entry(stack.root, name) if kind == "benchmark"
             else gym_stack.server_entry(stack.root, str(identity.get("server"))))
    if entry is None:
        raise error("E_NOT_FOUND", f"{stack.describe()} has no {kind} {name!r}, which grades this environment",
                    f"point MONTE_LOCAL or MONTE_NEMO_GYM_PYTHON at NeMo Gym {identity.get('version')}")
    here = gym_freeze.server_identity(stack, entry)
    diff = [k for k in ("version", "config", "instance", "config_sha256", "code_sha256") if here.get(k) != identity.get(k)]
    if diff:
        raise error("E_INTEGRITY", f"NeMo Gym's {name} here ({stack.describe()}) is not the one this environment was "
                    f"frozen with: its {', '.join(diff)} differ", f"point MONTE_LOCAL or MONTE_NEMO_GYM_PYTHON at NeMo "
                    f"Gym {identity.get('version')} as it was frozen; a different grader is a different experiment")


class Reward:
    """GRPO's reward through the environment's resources server: 1 for a reward at or above
    ``threshold``, else 0 (the catalog's rule). Started when made; :meth:`close` stops it."""

    def __init__(self, identity: dict[str, Any], rows: dict[str, dict[str, Any]], threshold: float, *,
                 config: dict[str, Any] | None = None, log: Path | None = None) -> None:
        self.rows = rows
        self.threshold = threshold
        self.server = open_server(identity, config=config, log=log)
        self.__name__ = f"nemo_gym_{identity.get('server')}"
        self.calls = 0

    def __call__(self, prompts: list[Any], completions: list[Any], item_id: list[str], **_: Any) -> list[float | None]:
        texts = [c if isinstance(c, str) else (c[-1]["content"] if c else "") for c in completions]
        replies = self.server.verify_many([self.rows[i] for i in item_id], texts, ids=list(item_id))
        self.calls += 1
        return [1.0 if float(r["reward"]) >= self.threshold else 0.0 for r in replies]

    def close(self) -> None:
        self.server.close()


def rule(grader: dict[str, Any] | None, benchmark: str, exam: str) -> str:
    """What a score of this exam means: its grader's rule, in words, and whether it can give
    partial credit (a score between 0 and 1 for one item)."""
    from monte.envs.catalog import RULES

    kind = (grader or {}).get("kind")
    if is_gym(grader):
        server = ((grader or {}).get("servers") or {}).get(exam) or {}
        return f"NeMo Gym's {server.get('server', 'resources')} server's /verify reward (its own rule, 0 to 1)"
    if kind == LMEVAL:
        return "lm-evaluation-harness's own filters and metric for the task, per document"
    if kind == JSONL:
        g = dict(((grader or {}).get("graders") or {}).get(exam) or {})
        what = {"exact": "1 when the graded answer (the last <answer> tag, else the first line) equals the "
                         "reference" + (f" ({', '.join(g.get('options') or [])})" if g.get("options") else "")
                         + ", else 0",
                "numeric": f"1 when the graded answer is a number within {g.get('tolerance')} of the reference, "
                           "else 0",
                "regex": f"the pattern {g.get('pattern')!r}'s match in the output, compared exactly; else 0",
                "python": f"{g.get('module')}:{g.get('function')}'s score, 0 to 1"}
        return what.get(str(g.get("kind")), "the JSONL exam's named grader")
    return RULES.get(benchmark, f"the {benchmark} benchmark's own grader, 0 to 1")


def exact_rate(tasks: Sequence[dict[str, Any]]) -> float | None:
    """The share of items scored 1 (exact match), where some item got partial credit (a score
    strictly between 0 and 1); None where every score is 0 or 1 (the score is that share)."""
    scores = [float(t.get("score") or 0.0) for t in tasks]
    if not scores or not any(0.0 < s < 1.0 for s in scores):
        return None
    return sum(s >= 1.0 for s in scores) / len(scores)
