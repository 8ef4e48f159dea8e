"""``monte --help`` as click prints it at the width of a pipe or of a terminal of 80 columns or
more, kept so that the top-level help imports no click (~50 ms). Written by
``python -m monte.cli.app --write-help`` (:func:`monte.cli.app.write_help`); tests/cli/test_help.py
fails when it is not click's text (a command or its help changed: write it again)."""

WIDTH = 78
TEXT = (
    'Usage: monte [OPTIONS] COMMAND [ARGS]...\n'
    '\n'
    '  monte keeps an honest, append-only record of post-training work, in git.\n'
    '\n'
    '  Start with `monte init` in a git repository; see README.md for the whole\n'
    '  loop.\n'
    '\n'
    'Options:\n'
    '  --version   Show the version and exit.\n'
    '  -h, --help  Show this message and exit.\n'
    '\n'
    'Commands:\n'
    '  init        Make this git repository a monte repository (idempotent).\n'
    '  config      Show where monte looks: the data root, the recipe search...\n'
    '  env         Environments: freeze exams (and curricula) from the...\n'
    '  dataset     Datasets: frozen piles of JSONL rows (what an sft recipe...\n'
    '  experiment  Experiments: a frozen measurement and the ledger of every...\n'
    '  model       Models: make a small random one here, with no download.\n'
    '  eval        Score a model on a split and append the row (dev by default).\n'
    '  nominate    Name the checkpoint the final test claim scores (it must...\n'
    '  status      The final claim, rows, delta lines, lineage, cycles and...\n'
    '  show        One full row with all provenance fields.\n'
    "  logs        The run's event file, as JSON lines.\n"
    '  diff        Two dev evals of one exam, item by item: prompt, expected...\n'
    '  stop        Terminate a running Run; its row reads abandoned.\n'
    '  recover     Record the results runs kept in their folders when the...\n'
    "  train       Train one chunk (the experiment's steps_per_chunk steps, 50...\n"
    "  promote     Export a succeeded training checkpoint's servable folder,...\n"
    '  rerun       Print the exact command and environment that launch a train...\n'
    "  plot        Draw each lineage's dev delta against step, with cycles and...\n"
    '  report      Write one self-contained HTML page of the experiment.\n'
    '  quickstart  Run the whole loop in a fresh FOLDER, offline, with a tiny...\n'
    "  push        Upload one experiment's results: new ledger objects and...\n"
    '  sync        Pull the results bucket into read-only mirror refs and run...\n'
    '  ledger      The ledger polices itself: re-derive every rule from the...\n'
    '  hooks       Git hooks that make git itself refuse a forged ledger record.\n'
    '  box         Ephemeral Lambda GPU boxes: up, status, down.\n'
    '  claim       A final claim anyone can check: a signed bundle that...\n'
    "  mcp         Serve this repository's loop to an agent: a Model Context...\n"
    '  grader      The sealed grader: test reads on another account, counted...\n'
    '\n'
    '  Exit codes:\n'
    '    0 ok      1 internal (a bug)   2 usage        3 refused by a rule   4 not found\n'
    '    5 integrity / verify           6 bad input    7 storage / network   8 boxes\n'
    "    9 an environment's grader      10 a launch past one process (a rank died)\n"
    '    130 interrupted (Ctrl-C)       143 stopped (SIGTERM)\n'
    '    (a reader of stdout that goes away, `| head -1`, is a normal end: 0)\n'
)
