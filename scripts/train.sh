#!/usr/bin/env bash
# The README's first command: installs and builds kiln (scripts/setup.sh), finds WikiText-2, and
# trains a language model with train_lm's defaults to the end (15 minutes on a CPU), then prints
# its validation and test perplexity.
#
#   scripts/train.sh                   # saves runs/lm.safetensors (+ .best, curve, metrics)
#   scripts/train.sh --time-budget 60  # arguments go to train_lm and override the defaults
#
# The data is $KILN_DATA if set, else datasets/wikitext-2 (get it with scripts/get_wikitext2.sh).
# KILN_OFFLINE=1 and KILN_BUILD_DIR work as for setup.sh; setup's output goes to stderr.
set -euo pipefail
cd "$(dirname "$0")/.."

data=${KILN_DATA:-datasets/wikitext-2}
for ((i = 1; i < $#; i++)); do  # a --data DIR among the arguments wins
  if [ "${!i}" = --data ]; then
    next=$((i + 1))
    data=${!next}
  fi
done
for split in train valid test; do
  if [ ! -f "$data/$split.txt" ]; then
    echo "train: no WikiText-2 in $data ($split.txt is missing). Get it with" >&2
    echo "  scripts/get_wikitext2.sh datasets/wikitext-2" >&2
    echo "or point KILN_DATA at a folder holding train.txt, valid.txt and test.txt." >&2
    exit 1
  fi
done

scripts/setup.sh >&2
mkdir -p runs
exec "${KILN_BUILD_DIR:-build}/apps/train_lm" --data "$data" --save runs/lm.safetensors \
  --metrics runs/lm.metrics.jsonl "$@"
