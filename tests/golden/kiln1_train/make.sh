#!/bin/bash
# Makes the files of this folder: a training checkpoint in the format train_lm wrote up to
# commit baed1dc (the model settings saved twice, in "config" and in "train"), kept so that
# tests/examples/test_old_checkpoints.cpp proves such files still resume, evaluate and
# generate. Run once with a train_lm built from baed1dc; the files are committed.
#
#   tests/golden/kiln1_train/make.sh path/to/train_lm_at_baed1dc
set -euo pipefail
TRAIN_LM=$1
HERE=$(cd "$(dirname "$0")" && pwd)
# A corpus of 40 words in 120 lines, from a fixed linear congruential sequence.
python3 - "$HERE" <<'PY'
import sys
words = [f"w{i}" for i in range(40)]
state = 12345
def text(lines):
    global state
    out = []
    for _ in range(lines):
        line = []
        for _ in range(6):
            state = (state * 1103515245 + 12345) % 2**31
            line.append(words[state % len(words)])
        out.append(" " + " ".join(line) + " \n")
    return "".join(out)
for split, lines in (("train", 120), ("valid", 30), ("test", 30)):
    open(f"{sys.argv[1]}/{split}.txt", "w").write(text(lines))
PY
FLAGS=(--data "$HERE" --d-model 16 --heads 2 --layers 1 --ff 32 --max-seq-len 16 --seq-len 8
       --batch-size 4 --seed 5 --shuffle --optimizer adamw --weight-decay 0.01 --schedule cosine
       --warmup 2 --decay-steps 6 --threads 3 --time-budget 0 --log-every 1 --eval-every 3)
"$TRAIN_LM" "${FLAGS[@]}" --steps 3 --save "$HERE/step3.safetensors" > /dev/null
"$TRAIN_LM" "${FLAGS[@]}" --steps 6 --save "$HERE/step6.safetensors" > /dev/null
rm -f "$HERE"/*.curve.svg
