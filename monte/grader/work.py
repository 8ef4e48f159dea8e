"""One test read on the grader, in a process of its own session (``python -m monte.grader.work
HOME RUN``): started by :func:`monte.grader.server.read` after the ``started`` record, it loads
the weights from the copy the server hashed, generates with the frozen settings, grades, records
the result in the grader's ledger and signs the statement. A client that dies does not stop it.
It inherits the read's liveness lock (:func:`monte.grader.home.lock_run`) and holds it until it
exits: a worker killed before it could write ``failed`` is found by the lock left free, and
:func:`monte.grader.server.settle` records why.
"""

from __future__ import annotations

import hashlib
import shutil
import sys
from pathlib import Path
from typing import Any

from monte import jsonl
from monte.grader import home as homes
from monte.grader import lmeval
from monte.grader.home import Home
from monte.ledger.grader_statement import KIND, canonical, outcomes, outcomes_sha256


def grade_read(home: Home, run: str, loaded: tuple[Any, Any] | None = None) -> dict[str, Any]:
    """Generate and grade the read ``run`` started; returns the signed record written.
    ``loaded``: the model and tokenizer, loaded already from the copy the server hashed (:func:`hold`)."""
    from monte.envs import grading
    from monte.evals.run import graded_samples, is_sampled, samples_per_item
    from monte.ledger.signing import ssh_sign
    from monte.models import generate as gen

    started = homes.records(home)[run]["started"]
    meta = homes.sealed_meta(home, started["content"])
    assert meta is not None
    raw = (home.sealed / f"{started['content']}.jsonl").read_bytes()
    if hashlib.sha256(raw).hexdigest() != started["content"]:
        raise RuntimeError("a sealed split in custody does not match its content hash")
    items = jsonl.load_lines(raw)
    folder = home.weights(run)
    model, tok = loaded or gen.load(folder)
    s = started["settings"]
    exam = str(started["exam"])
    ids = [grading.task_id(it, f"{exam}/test", k) for k, it in enumerate(items)]
    prompts = [grading.prompt_of(i) for i in items]
    if lmeval.is_lmeval(meta["grader"]):  # lm-eval builds the requests and grades, on the grader's copy of the task
        tasks = outcomes(lmeval.grade(home.sealed, meta, items, model, tok, batch_size=started["batch_size"]))
    else:
        with grading.ExamGrader(meta["grader"], meta["benchmark"], exam, split="test", items=items) as grader:
            if is_sampled(s):  # K seeded samples per item, drawn and graded as a local read does them
                seeds = [gen.sample_seed(i) for i in ids]
                drawn = gen.sample(model, tok, prompts, seeds, k=samples_per_item(s), max_new_tokens=s["max_new_tokens"],
                                   temperature=s["temperature"], top_p=s["top_p"], stop=s["stop"],
                                   chat_template=s["chat_template"])
                tasks = outcomes(graded_samples(grader, items, ids, seeds, drawn))
            else:
                answers = gen.generate(model, tok, prompts, max_new_tokens=s["max_new_tokens"],
                                       batch_size=started["batch_size"], temperature=s["temperature"], top_p=s["top_p"],
                                       stop=s["stop"], chat_template=s["chat_template"])
                tasks = outcomes(grader.grade(items, answers, ids))
    score = sum(t["score"] for t in tasks) / len(tasks) if tasks else 0.0
    statement = {"kind": KIND, "run": run, "experiment": started["experiment"], "exam": exam,
                 "content": started["content"], "cohort": started["cohort"], "role": started["role"],
                 "read": started["read"], "target": started["target"], "weights": started["weights"],
                 "weights_id": started["weights_id"], "settings_sha256": hashlib.sha256(canonical(s)).hexdigest(),
                 "samples": samples_per_item(s), "score": score, "n": len(tasks), "outcomes_sha256": outcomes_sha256(tasks),
                 "delta": _delta(home, started, tasks), "started_at": started["started_at"],
                 # what the leak check has told of this split so far: a probed split shows in the record
                 "leak_checks": homes.leak_checks(home, started["content"])}
    signature = ssh_sign(home.key, canonical(statement), "monte-grader").decode()
    with homes.locked(home):  # one writer of the grader's ledger: another read's `started` may land meanwhile
        homes.append(home, run, {"statement": {"statement": statement, "signature": signature},
                                 "outcomes": {"outcomes": tasks}}, f"read {started['read']} finished: {run}")
    shutil.rmtree(folder, ignore_errors=True)  # the hashes are recorded; the bytes are the agent's anyway
    return statement


def _delta(home: Home, started: dict[str, Any], tasks: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The claim's paired delta against the grader's own test@0 of its cohort on this content."""
    from monte.stats.paired import paired_delta, verdict
    from monte.stats.samples import sampled_delta, samples_of

    if started["role"] != "claim":
        return None
    base = [r for r in homes.records(home).values() if "outcomes" in r
            and r["started"]["content"] == started["content"] and r["started"]["cohort"] == started["cohort"]
            and r["started"]["role"] == "baseline"]
    if not base:
        return None
    base_tasks = base[0]["outcomes"]["outcomes"]
    mine = {t["id"]: t["score"] for t in tasks}
    if [t["id"] for t in base_tasks] != [t["id"] for t in tasks]:
        return None
    a, b = samples_of(base_tasks), samples_of(tasks)
    if a is not None and b is not None:  # K > 1: the item is the unit, as the agent's ledger pairs them
        ids = [t["id"] for t in base_tasks]
        d = sampled_delta([a[i] for i in ids], [b[i] for i in ids]).d
    else:
        d = paired_delta([t["score"] for t in base_tasks], [mine[t["id"]] for t in base_tasks])
    return {"baseline": base[0]["started"]["run"], "delta": d.delta, "lower": d.lower, "upper": d.upper,
            "n": d.n, "paired": d.paired, "verdict": verdict(d)}


def hold(home: Home, run: str) -> tuple[Any, Any] | None:
    """A new base's read, first step: load the copy the server hashed, write its behavioural
    fingerprint (taken as a local read takes it: :func:`monte.models.fingerprint.fingerprint`) as
    one JSON line on stdout, then wait for the server's go. Returns the loaded model, or None when
    the read was withdrawn (no ``started`` record: nothing spent; its weights are removed)."""
    import json
    import os

    from monte.models import fingerprint
    from monte.models import generate as gen

    folder = home.weights(run)
    try:
        try:
            fp: dict[str, Any] | None = fingerprint.fingerprint(folder)
        except Exception:  # noqa: BLE001 - no transformers model: known by its bytes alone, as a local read
            fp = None
        loaded = gen.load(folder)
        said: dict[str, Any] = {"fingerprint": fp}
    except Exception as e:  # noqa: BLE001 - it cannot be read: refused before anything is spent
        loaded, said = None, {"error": f"{type(e).__name__}: {e}"[:500]}
    sys.stdout.buffer.write(json.dumps(said).encode() + b"\n")
    sys.stdout.flush()
    os.dup2(2, 1)  # what it prints from here on goes to its log: the server no longer reads it
    sys.stdin.buffer.readline()  # the go, or an end of input: the record decides, not the message
    if loaded is None or "started" not in homes.records(home).get(run, {}):
        shutil.rmtree(folder, ignore_errors=True)
        return None
    return loaded


def main(argv: list[str]) -> int:
    home, run = Home(Path(argv[0])), argv[1]
    loaded = None
    if "--hold" in argv[2:]:
        loaded = hold(home, run)
        if loaded is None:
            return 0
    try:
        grade_read(home, run, loaded)
    except BaseException as e:  # a read that cannot finish is recorded as failed: its touch stays spent
        with homes.locked(home):
            homes.append(home, run, {"failed": {"error": f"{type(e).__name__}: {e}"[:2000]}}, f"read failed: {run}")
        shutil.rmtree(home.weights(run), ignore_errors=True)
        raise
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
