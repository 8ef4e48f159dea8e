"""``python -m monte``: the same CLI (git hooks call it this way, with the Python they were
installed with)."""

from monte.cli.main import main

main()
