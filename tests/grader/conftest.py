"""The module fixture of the real-grader tests (a repository pinning a grader, before any experiment:
the first test freezes it); the parts are in tests/support/grader.py."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.grader import Setup, real_grader


@pytest.fixture(scope="module")
def grader_setup() -> Iterator[Setup]:
    with real_grader(("mgrader", "magent")) as setup:
        for args in (("init",), ("model", "init", "base-model", "--size", "tiny", "--seed", "0"),
                     ("env", "add", "--server", "parity", "--dev", "parity", "--test", "parity"),
                     ("config", "set", "grader", setup.url, "--key", setup.public_key)):
            setup.agent_monte(*args, check=True)
        yield setup
