#!/usr/bin/env bash
# kiln against PyTorch on the same machine, side by side: for each config, ROUNDS rounds that run
# train_lm and bench/torch_ref.py (the same model and recipe in PyTorch) back to back under both
# PyTorch setups a user would pick -- Debian's (bench/run_torch_ref.sh: OpenBLAS, tcmalloc) and
# the current PyPI wheel (bench/run_torch_pypi.sh: `pip install torch` in a virtual environment
# made once) -- with the same threads, the same WikiText-2 windows ($KILN_DATA, else
# datasets/wikitext-2), the same recipe and no evaluation. Prints each run's tokens/s (both over
# the steps after the first 5), final training loss and peak resident memory, then per config the
# median ratio of kiln to the faster PyTorch of each round, and fails when kiln's loss differs
# from a PyTorch loss by more than 0.25 nats (they train the same model on the same data from
# different initial weights). --precisions "f32 bf16" adds the bf16 column: in each round, after
# the float32 runs, train_lm --precision bf16 and torch_ref.py --precision bf16 (the forward and
# the loss under torch.autocast(dtype=torch.bfloat16)), interleaved with them, and per config
# the median of kiln bf16 over kiln float32 too.
#
#   bench/compare_torch.sh [--rounds N] [--threads N] [--configs "default large-cpu"]
#                          [--torch "ref pypi"] [--precisions "f32 bf16"]
#
# Configs (model flags both programs accept; train_lm also gets torch_ref.py's recipe spelled out,
# as its defaults are the 15-minute recipe): default (torch_ref.py's model, d 256, 2 layers,
# T 64, B 32, the full softmax; 100 steps), large-cpu (d 512, 8 heads, 4 layers, ff 2048, T 128,
# B 16; 40 steps) and adaptive (default's flags plus --adaptive-softmax 2000,10000 --adaptive-div 4
# --input embedding: the adaptive softmax over frequency ranks, its shortlist tied to the
# embedding; 100 steps), which only runs when named: --configs adaptive.
#
# Nothing else may run on the machine meanwhile: two programs spinning OpenMP threads on the same
# cores slow each other down several times over.
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=3
threads=$(nproc)
configs="default large-cpu"
torches="ref pypi"
precisions="f32"
while [ $# -gt 0 ]; do
  case $1 in
    --rounds) rounds=$2; shift 2 ;;
    --threads) threads=$2; shift 2 ;;
    --configs) configs=$2; shift 2 ;;
    --torch) torches=$2; shift 2 ;;
    --precisions) precisions=$2; shift 2 ;;
    *) echo "compare_torch: unknown argument $1" >&2; exit 2 ;;
  esac
done
data=${KILN_DATA:-datasets/wikitext-2}
train_lm=${KILN_BUILD_DIR:-build}/apps/train_lm
[ -x "$train_lm" ] || { echo "compare_torch: build first (scripts/setup.sh)" >&2; exit 1; }
torch_runner() { echo "bench/run_torch_$1.sh"; }
for torch in $torches; do
  [ -x "$(torch_runner "$torch")" ] || { echo "compare_torch: $(torch_runner "$torch") not found" >&2; exit 1; }
done
for precision in $precisions; do
  case $precision in f32 | bf16) ;; *) echo "compare_torch: unknown precision $precision" >&2; exit 2 ;; esac
done
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# Model flags both programs accept, and steps per run (about a minute of PyTorch each).
config_flags() {
  case $1 in
    default) echo "--d-model 256 --heads 4 --layers 2 --ff 1024 --seq-len 64 --batch-size 32" ;;
    large-cpu) echo "--d-model 512 --heads 8 --layers 4 --ff 2048 --seq-len 128 --batch-size 16" ;;
    adaptive)
      echo "$(config_flags default) --adaptive-softmax 2000,10000 --adaptive-div 4 --input embedding"
      ;;
    *) echo "compare_torch: unknown config $1" >&2; exit 2 ;;
  esac
}
config_steps() { case $1 in default | adaptive) echo 100 ;; large-cpu) echo 40 ;; esac; }
# train_lm's side of torch_ref.py's recipe beyond the model: its defaults are the 15-minute
# recipe (docs/recipes.md), so the reference's dropout, constant lr and output are named.
kiln_reference() {
  local output="--adaptive-softmax none"
  [ "$1" = adaptive ] && output=""
  echo "--dropout 0.1 --word-dropout 0 --lr 0.001 --schedule constant --warmup 0 $output"
}
# Tokens per step: --batch-size times --seq-len among a config's flags.
tokens_per_step() {
  echo "$1" | awk '{ for (i = 1; i < NF; i++) { if ($i == "--batch-size") b = $(i + 1)
                                                 if ($i == "--seq-len") t = $(i + 1) }
                     print b * t }'
}
# Steps left out of both programs' tokens/s: torch_ref.py's default --warmup.
warmup=5

# Runs a command under /usr/bin/time, leaving its output in $work/out and peak RSS (MB) in $work/rss.
measure() {
  /usr/bin/time -f "%M" -o "$work/rss.kb" "$@" >"$work/out" 2>&1 || {
    cat "$work/out" >&2
    exit 1
  }
  echo $(($(tail -1 "$work/rss.kb") / 1024)) >"$work/rss"
}

median() { sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

echo "compare_torch: $rounds rounds, $threads threads, data $data, PyTorch setups: $torches," \
  "precisions: $precisions"
uptime
status=0
check_loss() {  # check_loss CONFIG KILN_LOSS OTHER_LOSS NAME
  if awk -v a="$2" -v b="$3" 'BEGIN { d = a - b; exit !(d > 0.25 || d < -0.25) }'; then
    echo "compare_torch: $1 losses of kiln and $4 differ by more than 0.25 nats" >&2
    status=1
  fi
}
for config in $configs; do
  flags=$(config_flags "$config")
  steps=$(config_steps "$config")
  for precision in $precisions; do : >"$work/ratios.$precision"; done
  : >"$work/bf16_over_f32"
  for round in $(seq "$rounds"); do
    for precision in $precisions; do
      # Both count the same steps: torch_ref's tokens/s leaves out its first $warmup (warm-up),
      # and kiln's is taken from train_lm's metrics rows, from the end of step $warmup to the
      # end of the last (its RESULT line counts every step). Each loss is the mean over the
      # last 5.
      # shellcheck disable=SC2086
      measure "$train_lm" --data "$data" --threads "$threads" --steps "$steps" --time-budget 0 \
        --eval-every 0 --log-every 5 --metrics "$work/metrics.jsonl" --precision "$precision" \
        $flags $(kiln_reference "$config")
      kiln_tps=$(awk -v first="$warmup" -v last="$steps" -v tokens="$(tokens_per_step "$flags")" '
        /"split":"train"/ { step = $0; sub(/.*"step":/, "", step); sub(/,.*/, "", step)
          t = $0; sub(/.*"elapsed_s":/, "", t); sub(/[,}].*/, "", t)
          if (step == first) t0 = t; if (step == last) t1 = t }
        END { printf "%.1f", (last - first) * tokens / (t1 - t0) }' "$work/metrics.jsonl")
      rm -f "$work/metrics.jsonl"
      echo "$kiln_tps" >"$work/kiln_tps.$precision"
      kiln_loss=$(grep '^step ' "$work/out" | tail -1 | sed -E 's/.*loss ([0-9.]+).*/\1/')
      line=$(printf '%-9s %-4s round %d: kiln %7.1f tok/s loss %.3f peak %4d MB' "$config" \
        "$precision" "$round" "$kiln_tps" "$kiln_loss" "$(cat "$work/rss")")
      best_tps=0
      for torch in $torches; do
        # shellcheck disable=SC2086
        measure "$(torch_runner "$torch")" --data "$data" --threads "$threads" --steps "$steps" \
          --warmup "$warmup" --log-interval 5 --precision "$precision" $flags
        torch_tps=$(awk '/^RESULT train_tokens_per_sec/ { print $3 }' "$work/out")
        torch_loss=$(grep '^step ' "$work/out" | tail -1 | sed -E 's/.*loss ([0-9.]+).*/\1/')
        version=$(sed -nE 's/^torch ([^ ]+) .*/\1/p' "$work/out" | head -1)
        line+=$(printf ' | torch %s (%s) %7.1f tok/s loss %.3f peak %4d MB' "$version" "$torch" \
          "$torch_tps" "$torch_loss" "$(cat "$work/rss")")
        best_tps=$(awk -v a="$best_tps" -v b="$torch_tps" 'BEGIN { print (b > a) ? b : a }')
        check_loss "$config" "$kiln_loss" "$torch_loss" "torch ($torch, $precision)"
      done
      ratio=$(awk -v k="$kiln_tps" -v t="$best_tps" 'BEGIN { printf "%.3f", k / t }')
      echo "$ratio" >>"$work/ratios.$precision"
      echo "$line | ratio to the faster $ratio"
    done
    if [ -f "$work/kiln_tps.f32" ] && [ -f "$work/kiln_tps.bf16" ]; then
      awk -v b="$(cat "$work/kiln_tps.bf16")" -v f="$(cat "$work/kiln_tps.f32")" \
        'BEGIN { printf "%.3f\n", b / f }' >>"$work/bf16_over_f32"
      rm -f "$work"/kiln_tps.*
    fi
  done
  for precision in $precisions; do
    label=$([ "$precision" = f32 ] && echo "" || echo "precision $precision ")
    echo "RESULT compare_torch $config ${label}threads $threads" \
      "median_ratio_to_faster_torch $(median <"$work/ratios.$precision")"
  done
  if [ -s "$work/bf16_over_f32" ]; then
    echo "RESULT compare_torch $config threads $threads kiln_bf16_over_f32 $(median <"$work/bf16_over_f32")"
  fi
done
uptime
exit $status
