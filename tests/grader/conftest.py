"""The module fixture of the real-grader tests (a repository pinning a grader, before any experiment:
the first test freezes it); the parts are in tests/support/grader.py."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.grader import Setup, real_grader, tiny_model


@pytest.fixture(scope="module")
def grader_setup() -> Iterator[Setup]:
    with real_grader(("mgrader", "magent")) as setup:
        setup.agent_monte("init", check=True)
        tiny_model(setup.agent, setup.repo / "base-model", 0)  # `monte model init base-model --seed 0`
        for args in (("env", "add", "--server", "parity", "--dev", "parity", "--test", "parity"),
                     ("config", "set", "grader", setup.url, "--key", setup.public_key)):
            setup.agent_monte(*args, check=True)
        yield setup
