#!/usr/bin/env bash
# Equal time, equal recipe: train_lm and bench/torch_ref.py each train train_lm's default recipe
# -- the model, the adaptive softmax and adaptive input, shuffled windows, dropout and word
# dropout, the precision, the learning rate and its warm-up-stable-decay schedule fitted to the
# budget -- for the same minutes of training on the same machine, one after the other, and each
# reports its validation and test perplexity on the headline protocol (non-overlapping windows of
# the training T, batch 10, every target counted). The recipe is read from `train_lm --help`, so
# it is the defaults train_lm has, and passed to both programs explicitly.
#
#   bench/compare_recipe.sh                     # 15 minutes each, every core
#   bench/compare_recipe.sh --minutes 2 --threads 1 --seed 2
#   bench/compare_recipe.sh --torch ref         # only Debian's PyTorch (run_torch_ref.sh)
#   bench/compare_recipe.sh --logs runs/compare # keep the programs' logs there
#
# Which PyTorch is the yardstick is measured, as in compare_torch.sh: with --torch auto (the
# default) Debian's 1.13 (run_torch_ref.sh, OpenBLAS) and PyPI's current one (run_torch_pypi.sh,
# MKL and oneDNN) each train the recipe for one minute first, and the one with more tokens/s
# trains for the full time; --torch ref or --torch pypi (compare_torch.sh's names) skips the
# probe.
#
# kiln evaluates its best-by-validation weights (validation every --eval-every steps, outside the
# budget); torch_ref.py its final weights, which the schedule has decayed. Nothing else may run on
# the machine meanwhile.
set -euo pipefail
cd "$(dirname "$0")/.."
minutes=15
threads=$(nproc)
seed=
torch=auto
logs=
while [ $# -gt 0 ]; do
  case $1 in
    --minutes) minutes=$2; shift 2 ;;
    --threads) threads=$2; shift 2 ;;
    --seed) seed=$2; shift 2 ;;
    --torch) torch=$2; shift 2 ;;
    --logs) logs=$2; shift 2 ;;
    *) echo "compare_recipe: unknown argument $1" >&2; exit 2 ;;
  esac
done
case $torch in
  auto | ref | pypi) ;;
  *) echo "compare_recipe: --torch is auto, ref or pypi, not $torch" >&2; exit 2 ;;
esac
data=${KILN_DATA:-datasets/wikitext-2}
train_lm=${KILN_BUILD_DIR:-build}/apps/train_lm
[ -x "$train_lm" ] || { echo "compare_recipe: build first (scripts/setup.sh)" >&2; exit 1; }
budget=$(awk -v m="$minutes" 'BEGIN { print m * 60 }')

# train_lm's default of a flag, from its --help line "  --flag TYPE=value ...".
default_of() {
  "$train_lm" --help | awk -v flag="$1" '$1 == flag { sub(/^[^=]*=/, "", $2); print $2; exit }'
}
# The recipe's flags under train_lm's names; torch_ref.py calls train_lm's --warmup --lr-warmup.
# The output and input (auto: resolved from the vocabulary) are read from train_lm's model line,
# and train_lm shuffles the windows by default.
recipe=()
for flag in --d-model --heads --layers --ff --norm --activation --seq-len --batch-size \
  --dropout --word-dropout --lr --beta1 --beta2 --eps --clip --schedule --warmup --min-lr \
  --decay-fraction --adaptive-div --seed; do
  value=$(default_of "$flag")
  [ "$flag" != --seed ] || value=${seed:-$value}
  [ -n "$value" ] || { echo "compare_recipe: train_lm --help shows no default for $flag" >&2; exit 1; }
  recipe+=("$flag" "$value")
done
torch_recipe=("${recipe[@]/#--warmup/--lr-warmup}")

if [ -n "$logs" ]; then
  mkdir -p "$logs"
  work=$logs
else
  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT
fi
echo "compare_recipe: $minutes minutes each, $threads threads, data $data"
echo "recipe: ${recipe[*]}"
uptime

"$train_lm" --data "$data" --threads "$threads" --time-budget "$budget" "${recipe[@]}" \
  --save "$work/kiln.safetensors" --metrics "$work/kiln.jsonl" >"$work/kiln" 2>&1 ||
  { cat "$work/kiln" >&2; exit 1; }
precision=$(sed -nE '1s/^precision ([a-z0-9]+).*/\1/p' "$work/kiln")
[ -n "$precision" ] || precision=$(default_of --precision)
cutoffs=$(sed -nE 's/^model: .*\| adaptive softmax ([0-9,]+) div .*/\1/p' "$work/kiln")
input=$(sed -nE 's/^model: .*\| input ([a-z]+).*/\1/p' "$work/kiln")
torch_recipe+=(--shuffle --input "${input:-embedding}")
[ -z "$cutoffs" ] || torch_recipe+=(--adaptive-softmax "$cutoffs")
kiln_valid=$(awk '$1 == "valid" && $2 == "ppl" { print $3 }' "$work/kiln")
kiln_test=$(awk '$1 == "test" && $2 == "ppl" { print $3 }' "$work/kiln")
kiln_steps=$(awk '$1 == "RESULT" { print $5 }' "$work/kiln")
kiln_tps=$(awk '$1 == "RESULT" { print $3 }' "$work/kiln")
grep -E '^(precision|model|training|schedule|RESULT)' "$work/kiln"

# torch_ref.py through bench/run_torch_<ref|pypi>.sh for S seconds, logged to F, with any further
# arguments (--eval).
torch_ref() {
  local runner=bench/run_torch_$1.sh seconds=$2 log=$3
  shift 3
  "$runner" --data "$data" --threads "$threads" --time-budget "$seconds" "$@" \
    --precision "$precision" "${torch_recipe[@]}" >"$log" 2>&1 || { cat "$log" >&2; exit 1; }
}
tokens_per_sec() { sed -nE 's/^RESULT train_tokens_per_sec ([0-9.]+) .*/\1/p' "$1"; }
if [ "$torch" = auto ]; then
  torch_ref ref 60 "$work/probe.ref"
  torch_ref pypi 60 "$work/probe.pypi"
  ref_tps=$(tokens_per_sec "$work/probe.ref")
  pypi_tps=$(tokens_per_sec "$work/probe.pypi")
  echo "probe, one minute each: Debian's PyTorch $ref_tps tokens/s, PyPI's $pypi_tps"
  torch=$(awk -v a="$ref_tps" -v b="$pypi_tps" 'BEGIN { print (a >= b) ? "ref" : "pypi" }')
fi
torch_ref "$torch" "$budget" "$work/torch" --eval
grep -E '^(torch|model|schedule|RESULT)' "$work/torch"
torch_valid=$(sed -nE 's/^RESULT valid loss [0-9.]+ ppl ([0-9.]+).*/\1/p' "$work/torch")
torch_test=$(sed -nE 's/.*\| test loss [0-9.]+ ppl ([0-9.]+).*/\1/p' "$work/torch")
torch_steps=$(sed -nE 's/^RESULT steps ([0-9]+) .*/\1/p' "$work/torch")
torch_tps=$(tokens_per_sec "$work/torch")

printf '%-24s %8s %10s %10s %10s\n' "$minutes min, $precision" steps "tokens/s" "valid ppl" "test ppl"
printf '%-24s %8s %10s %10s %10s\n' kiln "$kiln_steps" "$kiln_tps" "$kiln_valid" "$kiln_test"
printf '%-24s %8s %10s %10s %10s\n' "torch_ref.py" "$torch_steps" "$torch_tps" "$torch_valid" "$torch_test"
