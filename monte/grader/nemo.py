"""NeMo Gym exams on the grader: the frozen resources server started by the grader itself.

A NeMo Gym exam is graded by a resources server over HTTP (:mod:`monte.envs.nemo`). With a grader,
its sealed rows go into custody as a JSONL exam's do, beside the manifest's grader (each exam's
server identity: NeMo Gym's version, the config and the server's code, by sha256). What grades
them is the grader's own NeMo Gym, never a server the agent runs:

- the grader's stack is what ``monte grader serve --nemo-gym PATH`` names (a NeMo Gym checkout,
  whose ``.venv`` runs the servers, or the python of a virtualenv with nemo-gym installed):
  sshd passes no environment, so the forced command carries it (:func:`use`). A server URL in the
  grader's environment is dropped: a read is graded by the server the grader starts;
- :func:`check` refuses an exam this stack cannot grade as frozen (no NeMo Gym, another version,
  another config or code); ``start=True`` also starts the server once and stops it, so a take
  refuses a server that cannot start (a missing dependency) before the split moves;
- :func:`require_version` is the client's side: ``hello`` says what the grader grades
  (:func:`grades`), and a read whose exam needs another NeMo Gym than the grader has refuses
  before anything is recorded.

The read itself is the worker's (:mod:`monte.grader.work`): its :class:`~monte.envs.grading.
ExamGrader` starts the server from this stack after proving it the frozen one.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from monte.envs.grading import GYM
from monte.envs.nemo import stack as gym_stack
from monte.errors import MonteError, error

#: the grader kind of a NeMo Gym exam (the manifest's ``grader.kind``)
KIND = GYM
#: what names the grader's NeMo Gym, in its forced command
OPTION = "--nemo-gym"
SETUP = (f"name the grader's NeMo Gym with `{OPTION} PATH` in the forced command of its authorized_keys line "
         f"(`monte grader init DIR {OPTION} PATH` prints that line; PATH: a NeMo Gym checkout, or the python of "
         "the virtualenv `python -m monte.envs.nemo.venv DEST` builds)")


def use(path: Path | None) -> None:
    """Point this process (and the workers it starts) at the NeMo Gym ``path`` names; never at a
    server already running somewhere (the grader grades with the server it starts itself)."""
    os.environ.pop("MONTE_GYM_SERVER_URL", None)
    if path is None:
        return
    path = path.absolute()
    if path.is_dir():
        os.environ[gym_stack.LOCAL] = str(path)
        os.environ.pop(gym_stack.PYTHON, None)
    else:
        os.environ[gym_stack.PYTHON] = str(path)
        os.environ.pop(gym_stack.LOCAL, None)


def stack_at(path: Path) -> gym_stack.Stack:
    """The stack ``path`` names (``monte grader init --nemo-gym``), refused when it holds none."""
    saved = {k: os.environ.get(k) for k in (gym_stack.LOCAL, gym_stack.PYTHON, "MONTE_GYM_SERVER_URL")}
    try:
        use(path)
        found = gym_stack.find()
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    if found is None or found.python is None or not os.access(found.python, os.X_OK):
        raise error("E_NOT_FOUND", f"{path} holds no NeMo Gym with an interpreter to run its servers",
                    f"pass {OPTION} a NeMo Gym checkout with a .venv, or the python of a virtualenv with nemo-gym "
                    "installed (`python -m monte.envs.nemo.venv DEST` builds one)")
    return found


def grades() -> dict[str, Any]:
    """What ``hello`` adds to the kinds of exam the grader grades: NeMo Gym's, with its version,
    when this grader has a stack whose servers it can run."""
    found = gym_stack.find()
    if found is None or found.python is None or not os.access(found.python, os.X_OK):
        return {}
    return {KIND: {"version": found.version}}


def check(grader: dict[str, Any], exam: str, *, start: bool = False, log: Path | None = None) -> None:
    """Refuse unless this grader's NeMo Gym grades ``exam`` as it was frozen; ``start``: and its
    server starts here (then stops). Nothing is stored or spent by a refusal."""
    from monte.envs import grading

    identity = (grader.get("servers") or {}).get(exam)
    if not isinstance(identity, dict):
        raise error("E_INTEGRITY", f"the grader frozen with this environment names no NeMo Gym server for exam "
                    f"{exam!r}", "re-freeze the environment (`monte env add`) and start a new experiment on it")
    server, version = identity.get("server"), identity.get("version")
    found = gym_stack.find()
    if found is None or found.python is None:
        raise error("E_ENV", f"the grader has no NeMo Gym to start exam {exam}'s {server} server with (frozen with "
                    f"NeMo Gym {version}); nothing was moved or spent", SETUP)
    if found.version != version:
        raise error("E_INTEGRITY", f"the grader's NeMo Gym is {found.version}, and exam {exam} was frozen with NeMo "
                    f"Gym {version}: its {server} server would grade by another version's rule; nothing was moved "
                    "or spent", f"install NeMo Gym {version} for the grader's account and {SETUP.split(' (')[0]}")
    try:
        grading.check_identity(found, identity)  # the config files and the server's code, by sha256
        if start:
            from monte.envs.nemo.server import GymServer

            with GymServer.start(found, config=str(identity["config"]), instance=str(identity["instance"]),
                                 server=str(server), log=log):
                pass
    except MonteError as e:
        raise error(e.code, f"the grader cannot grade exam {exam} with the {server} server it was frozen with: "
                    f"{e.message}; nothing was moved or spent",
                    f"on the grader's account: {e.fix}; then {SETUP.split(' (')[0]}") from None


def require_version(answer: dict[str, Any], grader: dict[str, Any] | None, label: str) -> None:
    """The client's check, from the grader's ``hello``: a NeMo Gym exam is read only by a grader
    whose NeMo Gym is the version frozen (else refused here, before any record)."""
    if (grader or {}).get("kind") != KIND:
        return
    want = {str(i.get("version")) for i in ((grader or {}).get("servers") or {}).values() if isinstance(i, dict)}
    has = ((answer.get("grades") or {}).get(KIND) or {}).get("version")
    if has is None:
        raise error("E_ENV", f"the grader at {label} grades no NeMo Gym exams (its hello names no NeMo Gym); "
                    "nothing was spent", f"on the grader's account, {SETUP}")
    if {str(has)} != want:
        raise error("E_INTEGRITY", f"the grader at {label} has NeMo Gym {has}, and this experiment's exams were "
                    f"frozen with NeMo Gym {', '.join(sorted(want))}; nothing was spent",
                    f"install NeMo Gym {', '.join(sorted(want))} for the grader's account and {SETUP.split(' (')[0]}")
