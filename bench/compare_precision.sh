#!/usr/bin/env bash
# float32 against bf16 on this CPU, one after the other in one run (docs/mixed-precision.md's
# "Measured here" comes from this):
#   1. bench_train for both configs in both precisions, bf16 on both GEMM paths (native and
#      KILN_GEMM=widen): tokens/s, peak RSS and peak tensor bytes, the GEMMs' rate;
#   2. with --train N: train_lm --steps N of the default model on WikiText-2 in each precision
#      (same seed), and the largest |bf16 - f32| of the losses logged every 10 steps.
#   bench/compare_precision.sh [--train N] [build folder]
set -euo pipefail
train_steps=0
if [ "${1:-}" = --train ]; then
  train_steps=$2
  shift 2
fi
build="${1:-build}"
threads=$(nproc)
lscpu | grep -E "Model name|^CPU\(s\)"
grep -o -w 'avx512f\|avx512_bf16\|avx2\|fma' /proc/cpuinfo | sort -u | tr '\n' ' '
echo
uptime
# float32, bf16 on the default path (native where the CPU has AVX512_BF16) and bf16 widened,
# interleaved per config; --profile adds each run's GEMM rate (RESULT gemm PATH gflops R).
for config in default large-cpu; do
  for run in f32 bf16 bf16-widen; do
    precision=${run%-widen}
    gemm=$([ "$run" = bf16-widen ] && echo widen || echo "${KILN_GEMM:-}")
    KILN_GEMM=$gemm "$build/bench/bench_train" --config "$config" --precision "$precision" \
      --threads "$threads" --warmup 2 --windows 3 --steps 3 --profile | grep '^RESULT'
  done
done
if [ "$train_steps" -gt 0 ]; then
  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT
  for precision in f32 bf16; do
    "$build/apps/train_lm" --steps "$train_steps" --log-every 10 --eval-every 0 \
      --time-budget 0 --threads "$threads" --precision "$precision" >"$work/$precision.log"
    grep -E '^(valid ppl|test ppl|RESULT)' "$work/$precision.log" | sed "s/^/$precision: /"
  done
  losses() { awk '/^step [0-9]+\// { split($2, s, "/"); for (i = 1; i < NF; ++i) if ($i == "loss") print s[1], $(i + 1) }' "$1"; }
  join <(losses "$work/f32.log" | sort -k1,1) <(losses "$work/bf16.log" | sort -k1,1) |
    sort -n | awk '{ d = $3 - $2; if (d < 0) d = -d; if (d > worst) { worst = d; at = $1 } n++ }
      END { printf "RESULT logged_steps %d max_abs_loss_difference %.4f at_step %d\n", n, worst, at }'
fi
uptime
