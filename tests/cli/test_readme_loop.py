"""The README's "loop, by hand", run as written (issue 30.1).

The commands are copied out of README.md's fenced shell block, as a user pastes them, and run one
by one by bash in an empty folder, from its ``git init`` on, with ``monte`` on ``PATH`` (this
checkout's). The one blank the README leaves for the user is filled as a user would: ``RUN``,
``RUN2``, ``RUN3`` are the runs the three ``monte train`` lines printed, in order. Reproduced on
the README before: ``monte nominate RUN2@100`` refused E_REFUSED "has no admissible dev eval" (the
loop never evaluated ``RUN2@100``, issue 30.1); ``monte dataset add ... --from-file demos.jsonl``
refused E_NOT_FOUND, nothing in the loop made that file (issue 46.1); and every run recorded
``git_sha: null``, the loop committed nothing (issue 46.5).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

README = Path(__file__).resolve().parents[2] / "README.md"


def loop_commands() -> list[str]:
    """The shell lines of the fenced block under "## The loop, by hand"."""
    text = README.read_text(encoding="utf-8")
    section = text.split("## The loop, by hand", 1)[1]
    block = re.search(r"```(?:bash|sh|shell)\n(.*?)```", section, re.S)
    assert block, "the loop section has no fenced shell block"
    return [line for line in block.group(1).splitlines() if line.strip() and not line.lstrip().startswith("#")]


def test_the_readme_loop_runs_as_written(tmp_path: Path) -> None:
    commands = loop_commands()
    assert any(c.startswith("monte nominate") for c in commands) and sum("monte train" in c for c in commands) == 3
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "monte").write_text(f'#!/bin/sh\nexec {sys.executable} -c "from monte.cli.main import main; main()" "$@"\n')
    (bin_dir / "monte").chmod(0o755)
    assert commands[0].startswith("git init your-repo && cd your-repo"), commands[0]
    home = tmp_path / "work"
    home.mkdir()
    repo = home / "your-repo"
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"}
    runs: list[str] = []
    transcript = []
    for i, line in enumerate(commands):
        # one shell per line, as pasted; the first line's `cd` is the folder every later line runs in
        cmd = line

        def fill(m: re.Match[str]) -> str:
            n = int(m.group(1) or 1)
            assert n <= len(runs), f"RUN{m.group(1)} is named before a train printed it"
            return runs[n - 1] + "@"

        cmd = re.sub(r"\bRUN(\d*)@", fill, cmd)
        r = subprocess.run(["bash", "-o", "pipefail", "-c", cmd], cwd=home if i == 0 else repo, env=env, capture_output=True, text=True,
                           timeout=1800)
        transcript.append(f"$ {cmd}\n{r.stdout}{r.stderr}")
        if os.environ.get("MONTE_TEST_TRANSCRIPT"):  # to follow a slow machine's progress
            with open(os.environ["MONTE_TEST_TRANSCRIPT"], "a") as log:
                log.write(transcript[-1])
        assert r.returncode == 0, "\n".join(transcript)
        if "monte train" in cmd:
            made = re.search(r"checkpoints: ([a-z0-9]+)@\d+", r.stdout)
            assert made, "\n".join(transcript)
            runs.append(made.group(1))
    assert (repo / "exported" / "config.json").is_file() and (repo / "progress.png").is_file()
    status = transcript[-2]
    assert "test reads parity 2/2" in status, status
    # every run records the code version the loop committed before its first run
    shown = subprocess.run(["bash", "-c", f"monte show {runs[0]} --json"], cwd=repo, env=env, capture_output=True,
                           text=True)
    assert shown.returncode == 0, shown.stderr
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=repo, capture_output=True, text=True).stdout.strip()
    assert json.loads(shown.stdout)["plan"]["git_sha"] == head, shown.stdout
