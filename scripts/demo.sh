#!/usr/bin/env bash
# make demo: the longest real flow monte has today, in a throwaway repository (./demo).
# Everything runs offline: the environment is generated from monte's built-in catalog.
set -euo pipefail

here=$(cd "$(dirname "$0")/.." && pwd)
demo="$here/demo"
rm -rf "$demo" && mkdir -p "$demo" && cd "$demo"
step() { printf '\n\033[1m$ %s\033[0m\n' "$*"; "$@"; }

git init -q -b main .
git config user.name "monte demo" && git config user.email "demo@monte.invalid"
step monte init
step monte env list --available
step monte env add --server parity --dev parity --test parity
step monte env add --benchmark chain_sum

# An SFT dataset made from the trainable environment's curriculum (input/output rows).
python3 - <<'PY'
import json
with open(".monte/environments/parity/curriculum.jsonl") as src, open("parity-sft.jsonl", "w") as out:
    for line in src:
        item = json.loads(line)
        out.write(json.dumps({"input": item["prompt"], "output": " " + item["answer"]}) + "\n")
PY
step monte dataset add parity-sft --from-file parity-sft.jsonl --kind sft
step monte experiment init demo --eval parity
step monte env list
step monte dataset show parity-sft
step monte env install --all

printf '\n\033[1m# A refusal changes nothing: re-freezing a name is refused (exit 3).\033[0m\n'
set +e
monte env add --benchmark parity; echo "exit status: $?"
set -e

printf '\n\033[1m# The record is plain git.\033[0m\n'
step git log --graph --format='%h %s%n%(trailers:only,unfold)' monte/vault monte/demo/ledger
step git show monte/demo/ledger:measurement.json
step git fsck --strict
printf '\nThe demo repository is in %s\n' "$demo"
