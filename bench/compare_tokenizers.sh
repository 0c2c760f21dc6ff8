#!/usr/bin/env bash
# Byte-level BPE encoding, kiln against Hugging Face tokenizers, with the same tokenizer.json on
# the same text (WikiText-2's train.txt repeated to 50 MB), on 2 threads; then kiln's training
# of 8,192 merges on train.txt. Prints both programs' lines, the token counts (they must agree)
# and uptime's load.
#
#   bench/compare_tokenizers.sh TOKENIZER_JSON [TEXT] [VENV]
#
# VENV: a virtual environment with tokenizers (default /root/.cache/kiln-tokenizers-venv,
# created with pip when missing). Needs build/bench/bench_tokenizer.
set -euo pipefail
cd "$(dirname "$0")/.."
tokenizer=${1:?usage: bench/compare_tokenizers.sh TOKENIZER_JSON [TEXT] [VENV]}
text=${2:-${KILN_DATA:-datasets/wikitext-2}/train.txt}
venv=${3:-/root/.cache/kiln-tokenizers-venv}
[ -x "$venv/bin/python" ] || { python3 -m venv "$venv" && "$venv/bin/pip" install -q tokenizers; }
uptime
build/bench/bench_tokenizer --tokenizer "$tokenizer" --text "$text" --mb 50 --threads 2
RAYON_NUM_THREADS=2 TOKENIZERS_PARALLELISM=true "$venv/bin/python" bench/tokenizers_encode.py \
  --tokenizer "$tokenizer" --text "$text" --mb 50
build/bench/bench_tokenizer --tokenizer "$tokenizer" --text "$text" --mb 50 --threads 1 --repeats 1
RAYON_NUM_THREADS=1 TOKENIZERS_PARALLELISM=true "$venv/bin/python" bench/tokenizers_encode.py \
  --tokenizer "$tokenizer" --text "$text" --mb 50 --repeats 1
build/bench/bench_tokenizer --text "$text" --train-vocab 8448 --threads 2
uptime
