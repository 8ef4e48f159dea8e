"""The commands of ``monte`` (name -> module), their one-line help and their examples: plain data,
read by the click group (:mod:`monte.cli.app`) and checked by tests/cli/test_help.py."""

from __future__ import annotations

import os

# name -> "module:attribute"; each module imports only click and monte's light modules at import.
COMMANDS = {
    "init": "monte.cli.init:init",
    "config": "monte.cli.config:config",
    "env": "monte.cli.env:env",
    "dataset": "monte.cli.dataset:dataset",
    "experiment": "monte.cli.experiment:experiment",
    "model": "monte.cli.model:model",
    "eval": "monte.cli.eval:eval_",
    "nominate": "monte.cli.nominate:nominate",
    "status": "monte.cli.runs:status",
    "show": "monte.cli.runs:show",
    "logs": "monte.cli.runs:logs",
    "diff": "monte.cli.diff:diff",
    "stop": "monte.cli.runs:stop",
    "recover": "monte.cli.runs:recover",
    "train": "monte.cli.train:train",
    "promote": "monte.cli.train:promote",
    "rerun": "monte.cli.train:rerun",
    "plot": "monte.cli.plot:plot",
    "report": "monte.cli.report:report",
    "quickstart": "monte.cli.quickstart:quickstart",
    "push": "monte.cli.results:push",
    "sync": "monte.cli.results:sync",
    "ledger": "monte.cli.ledger:ledger",
    "hooks": "monte.cli.ledger:hooks",
    "box": "monte.cli.box:box",
    "claim": "monte.cli.claim:claim",
    "mcp": "monte.cli.mcp:mcp",
    "grader": "monte.cli.grader:grader",
}


#: each command's one line in ``monte --help`` (its help's first sentence, as click shortens
#: it): the list is printed without importing every command's module (tests/cli/test_help.py
#: checks each against the command's own help)
SHORT_HELP = {
    'init': 'Make this git repository a monte repository (idempotent).',
    'config': 'Show where monte looks: the data root, the recipe search path, the recipe names.',
    'env': 'Environments: freeze exams (and curricula) from the catalog, list, install.',
    'dataset': 'Datasets: frozen piles of JSONL rows (what an sft recipe trains on).',
    'experiment': 'Experiments: a frozen measurement and the ledger of every Run against it.',
    'model': 'Models: make a small random one here, with no download.',
    'eval': 'Score a model on a split and append the row (dev by default).',
    'nominate': 'Name the checkpoint the final test claim scores (it must carry an admissible dev eval).',
    'status': 'The final claim, rows, delta lines, lineage, cycles and checkpoints of an experiment.',
    'show': 'One full row with all provenance fields.',
    'logs': "The run's event file, as JSON lines.",
    'diff': 'Two dev evals of one exam, item by item: prompt, expected answer, both outputs, the flip.',
    'stop': 'Terminate a running Run; its row reads abandoned.',
    'recover': 'Record the results runs kept in their folders when the ledger could not be written.',
    'train': "Train one chunk (the experiment's steps_per_chunk steps, 50 by default).",
    'promote': "Export a succeeded training checkpoint's servable folder, sha256-verified.",
    'rerun': "Print the exact command and environment that launch a train run's chunk again.",
    'plot': "Draw each lineage's dev delta against step, with cycles and test reads.",
    'report': 'Write one self-contained HTML page of the experiment.',
    'quickstart': 'Run the whole loop in a fresh FOLDER, offline, with a tiny model built here.',
    'push': "Upload one experiment's results: new ledger objects and refs, new and changed run files.",
    'sync': 'Pull the results bucket into read-only mirror refs and run folders (default: every experiment in it), and merge each mirrored ledger into the local one.',
    'ledger': 'The ledger polices itself: re-derive every rule from the commit history.',
    'hooks': 'Git hooks that make git itself refuse a forged ledger record.',
    'box': 'Ephemeral Lambda GPU boxes: up, status, down.',
    'claim': 'A final claim anyone can check: a signed bundle that verifies without the repository.',
    'mcp': "Serve this repository's loop to an agent: a Model Context Protocol server over stdio.",
    'grader': 'The sealed grader: test reads on another account, counted and signed there.',
}

#: one example per command, shown at the end of its --help (the README walks the whole loop)
EXAMPLES = {
    "init": "monte init            # in a git repository; installs the hooks (--no-hooks opts out)",
    "config": "monte config set bucket gs://my-results/monte",
    "env": "monte env add --server parity --dev parity --test parity",
    "dataset": "monte dataset add parity-sft --from-file rows.jsonl --kind sft",
    "experiment": "monte experiment init exp --eval parity --model ./base-model",
    "model": "monte model init base-model --seed 0",
    "eval": "monte eval --yes            # dev on the newest checkpoint (or the base)\n"
            "  monte eval --split test --yes   # test@0, then the final claim",
    "nominate": "monte nominate RUN@100",
    "status": "monte status          # or: monte status EXP, monte status -e EXP",
    "show": "monte show RUN --json",
    "logs": "monte logs RUN --follow",
    "diff": "monte diff BASELINE_EVAL EVAL --group-by number   # the flips, counted by a metadata field",
    "stop": "monte stop RUN",
    "recover": "monte recover EXP",
    "train": "monte train --recipe sft-tiny --source parity-sft --from-base --yes",
    "promote": "monte promote RUN@100 --dest exported --confirm RUN@100",
    "rerun": "monte rerun RUN --dry-run   # the command and environment that launch it again",
    "plot": "monte plot --out progress.png",
    "report": "monte report --out report.html   # one page: lineage, cycles, flips, test reads",
    "quickstart": "monte quickstart demo",
    "push": "monte push EXP",
    "sync": "monte sync",
    "ledger": "monte ledger verify --all",
    "hooks": "monte hooks install",
    "box": "monte box up --type gpu_1x_h100_pcie",
    "claim": "monte claim export RUN --out claim --key ~/.ssh/id_ed25519\n"
             "  monte claim verify claim --allowed-signers allowed_signers --weights promoted",
    "mcp": "monte mcp --read-only   # in the repository; an agent client starts it (docs/agents.md)",
    "grader": "monte grader init /srv/grader      # as the grader's account; then, in the repository:\n"
              "  monte config set grader ssh://grader@localhost --key 'ssh-ed25519 AAAA...'\n"
              "  monte experiment init exp --eval parity   # hands the test split to the grader",
}

#: one example per subcommand of a group (``env add``, ...), shown at the end of its --help
SUB_EXAMPLES = {
    "config show": "monte config show --json",
    "config set": "monte config set vault gs://my-team-vault/monte",
    "env add": "monte env add --server parity --dev parity --test parity",
    "env list": "monte env list --available     # the catalog and NeMo Gym's servers and benchmarks",
    "env install": "monte env install parity       # fetch and prove the frozen files here",
    "dataset add": "monte dataset add parity-sft --from-file demos.jsonl --kind sft",
    "dataset list": "monte dataset list",
    "dataset show": "monte dataset show parity-sft",
    "experiment init": "monte experiment init exp --eval parity --model ./base-model",
    "experiment list": "monte experiment list --json",
    "model init": "monte model init base-model --size tiny --seed 0",
    "ledger verify": "monte ledger verify --all     # or: monte ledger verify EXP --from REV",
    "hooks install": "monte hooks install            # in a bare server repository too (pre-receive)",
    "hooks uninstall": "monte hooks uninstall",
    "box up": "monte box up --type gpu_1x_h100_pcie --keep-alive",
    "box status": "monte box status --json",
    "box down": "monte box down                 # or: monte box down INSTANCE",
    "grader init": "monte grader init /srv/grader --threads 4   # as the grader's account",
    "grader serve": "monte grader serve --home /srv/grader   # the forced command in authorized_keys",
    "grader take": "monte grader take parity        # an older experiment's test splits into custody",
    "grader restore": "monte grader restore gs://team-vault --home /srv/grader   # as the grader's account",
}

EXIT_CODES = """\b
Exit codes:
  0 ok      1 internal (a bug)   2 usage        3 refused by a rule   4 not found
  5 integrity / verify           6 bad input    7 storage / network   8 boxes
  9 an environment's grader      10 a launch past one process (a rank died)
  130 interrupted (Ctrl-C)       143 stopped (SIGTERM)
  (a reader of stdout that goes away, `| head -1`, is a normal end: 0)"""

_HERE = os.path.dirname(os.path.abspath(__file__))
#: the files that render each view of ``monte status`` (part of its key; what
#: :data:`monte.cli.runs.STATUS_RENDERERS` names; :mod:`monte.cli.reads` reads them too)
STATUS_CODE: dict[str, tuple[str, ...]] = {
    "json": (os.path.join(_HERE, "output.py"),),
    "text": (os.path.join(_HERE, "runs.py"), os.path.join(_HERE, "output.py"),
             os.path.join(_HERE, "..", "stats", "power.py")),
}
