#!/usr/bin/env bash
# The GPU check: one call of the device tool, at most 7 minutes of wall time, nothing compiled on
# the GPU machine. Run scripts/prepare_device.sh here first (it builds the CUDA binaries with nvcc
# into .device/); docs/gpu-check.md gives the device tool's call and what each figure means.
#
#   1. suite      the CUDA suite on the GPU, every allocation poisoned (KILN_CUDA_POISON=1):
#                 test_cuda's cases, test_core's parity/ cases, test_optim's CUDA cases; none may
#                 fail or skip
#   2. attention  the attention benchmark cases (test_cuda "[bench]" cases with "attention" in
#                 their names, when the binary has them): their RESULT lines, and beside them
#                 bench/sdpa_torch_cuda.py's (PyTorch's SDPA, same shapes and flop count)
#   3. sanitizer  compute-sanitizer racecheck and synccheck over test_cuda's attention cases
#   4. bf16       bench_train --device cuda --config gpt2-small --precision bf16 beside
#                 bench/torch_ref.py (autocast bf16, SDPA, fused Adam) at the same shape on the
#                 same GPU: tokens/s, ms per step, peak memory and MFU of each
#   5. timing     bench_train --profile (a few gpt2-small bf16 steps: device ms per op family
#                 from CUDA events) and bench_ops --device cuda --quick (each kernel family
#                 timed by CUDA events: GFLOP/s, GB/s, ms)
# Files in $OUT (else build-gpu/gpu-check/): machine.txt suite.log attention.log
# attention_torch.log racecheck.log synccheck.log bench_kiln.log bench_torch.log profile.log
# ops.log summary.txt.
#
# Every phase has a timeout, cut to what is left of KILN_GPU_CHECK_BUDGET (default 400 s) less
# 10 s for the summary. Exits 1 when a test, a sanitizer or kiln's benchmark failed.
#
# KILN_GPU_CHECK_EMULATE=1 rehearses every phase on the emulated device (the binaries of a
# KILN_CUDA=EMULATE build in DEVICE_DIR, tiny shapes, a few suite cases; compute-sanitizer and
# PyTorch's GPU run are reported as not run): the CTest test gpu_check_emulated.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
root=$(pwd)
device=${DEVICE_DIR:-$root/.device}
emulate=${KILN_GPU_CHECK_EMULATE:-0}
logs=${OUT:-$root/build-gpu/gpu-check}
mkdir -p "$logs"
started=$(date +%s)
budget=${KILN_GPU_CHECK_BUDGET:-400}
# prepare_device.sh packs the binaries, their libraries and WikiText-2 into one archive (the
# device tool carries 64 MiB): unpacked beside the scripts, outside the carried folder.
if [ -f "$device/payload.tar.gz" ]; then
  unpacked=$(mktemp -d)
  tar -C "$unpacked" -xzf "$device/payload.tar.gz" || exit 2
  cp "$device"/*.py "$unpacked/"
  device=$unpacked
fi
bin=$device/bin
export PATH=/usr/local/cuda/bin:$PATH
cuda_libs=/usr/local/cuda/lib64:/usr/local/cuda/lib
export LD_LIBRARY_PATH=$device/lib:$cuda_libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}

declare -a summary=()
status=0
note() { summary+=("$(printf '%-22s %s' "$1" "$2")"); }
phase() { printf '\n==== %s (%d s in) ====\n' "$1" "$(($(date +%s) - started))"; }
limit() {
  local left=$((started + budget - 10 - $(date +%s)))
  (($1 < left)) && left=$1
  echo $((left < 1 ? 1 : left))
}
# "passed failed skipped" from Catch2's output: its totals line, and the "skipped: " lines of
# cases that found no device.
catch_counts() {
  local passed failed
  passed=$(grep -Eo '[0-9]+ passed' "$1" | awk '{s += $1} END {print s + 0}')
  failed=$(grep -Eo '[0-9]+ failed' "$1" | awk '{s += $1} END {print s + 0}')
  grep -q 'All tests passed' "$1" &&
    passed=$(grep -Eo 'All tests passed \([0-9]+ assertions? in [0-9]+ test cases?' "$1" |
      grep -Eo '[0-9]+ test case' | awk '{s += $1} END {print s + 0}')
  printf '%d %d %d\n' "$passed" "$failed" "$(grep -c 'skipped: ' "$1")"
}

for b in test_cuda test_core test_optim bench_train bench_ops; do
  [ -x "$bin/$b" ] || {
    echo "gpu_check: $bin/$b is missing; run scripts/prepare_device.sh first" >&2
    exit 2
  }
done

# ---- 0. the machine
phase "machine"
{
  date -u
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1 | head -2
  python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda,
torch.cuda.is_available())' 2>&1 | tail -1
  command -v compute-sanitizer || echo "no compute-sanitizer"
  "$bin/bench_train" --help >/dev/null 2>&1 && echo "kiln binaries start" ||
    echo "kiln binaries do not start (ldd below)"
  ldd "$bin/test_cuda" | grep -i "not found"
} >"$logs/machine.txt" 2>&1
cat "$logs/machine.txt"

# ---- 1. the CUDA suite
phase "suite"
if [ "$emulate" = 1 ]; then
  suite=("$bin/test_cuda cuda/the step ledger*" "$bin/test_core parity/layer_norm*"
    "$bin/test_optim *adam*")
else
  suite=("$bin/test_cuda" "$bin/test_core parity/*" "$bin/test_optim *cuda*,*CUDA*")
fi
: >"$logs/suite.log"
for entry in "${suite[@]}"; do
  program=${entry%% *}
  spec=${entry#"$program"}
  spec=${spec# }
  echo "---- $(basename "$program") ${spec:-(every case)}" >>"$logs/suite.log"
  # shellcheck disable=SC2086
  KILN_CUDA_POISON=1 timeout "$(limit 150)" "$program" ${spec:+"$spec"} >>"$logs/suite.log" 2>&1 ||
    status=1
done
read -r passed failed skipped < <(catch_counts "$logs/suite.log")
grep -E '^(test cases|All tests passed)' "$logs/suite.log"
if [ "$failed" -ne 0 ] || [ "$skipped" -ne 0 ] || [ "$passed" -eq 0 ]; then status=1; fi
note "suite" "$passed passed, $failed failed, $skipped skipped"

# ---- 2. the attention benchmark cases, if this test_cuda has them
phase "attention"
mapfile -t bench_cases < <("$bin/test_cuda" --list-test-names-only "[bench]" 2>/dev/null |
  grep -i attention | sed 's/^ *//')
if [ "${#bench_cases[@]}" -gt 0 ]; then
  joined=$(printf '%s,' "${bench_cases[@]//,/\\,}")
  timeout "$(limit 60)" "$bin/test_cuda" "${joined%,}" >"$logs/attention.log" 2>&1
  grep '^RESULT' "$logs/attention.log" || tail -5 "$logs/attention.log"
  while read -r _ name value; do note "${name%_tflops}" "$value TFLOP/s"; done \
    < <(grep '^RESULT' "$logs/attention.log")
else
  echo "no attention benchmark cases in this test_cuda" | tee "$logs/attention.log"
  note "attention bench" "no such cases in this binary"
fi
# PyTorch's scaled_dot_product_attention at the same shapes, flop count and format, beside them.
torch_ok=$(python3 -c 'import torch; print(int(torch.cuda.is_available()))' 2>/dev/null)
if [ "$emulate" != 1 ] && [ "$torch_ok" = 1 ]; then
  timeout "$(limit 60)" python3 -u "$device/sdpa_torch_cuda.py" >"$logs/attention_torch.log" 2>&1
  grep '^RESULT' "$logs/attention_torch.log" || tail -5 "$logs/attention_torch.log"
  while read -r _ name value; do note "${name%_tflops}" "$value TFLOP/s"; done \
    < <(grep '^RESULT' "$logs/attention_torch.log")
else
  why="PyTorch sees no CUDA device"
  [ "$emulate" = 1 ] && why="emulated device"
  echo "not run: $why" | tee "$logs/attention_torch.log"
  note "torch sdpa" "not run ($why)"
fi

# ---- 3. compute-sanitizer on the attention cases
attention_cases=$("$bin/test_cuda" --list-test-names-only 2>/dev/null | grep -i '^ *cuda/.*attention' |
  sed 's/^ *//; s/,/\\,/g' | paste -sd, -)
for tool in racecheck synccheck; do
  phase "compute-sanitizer $tool"
  if [ "$emulate" = 1 ] || ! command -v compute-sanitizer >/dev/null; then
    why="no compute-sanitizer on this machine"
    [ "$emulate" = 1 ] && why="emulated device"
    echo "not run: $why" | tee "$logs/$tool.log"
    note "$tool" "not run ($why)"
    continue
  fi
  if [ -z "$attention_cases" ]; then
    echo "not run: no attention cases in test_cuda" | tee "$logs/$tool.log"
    note "$tool" "not run (no attention cases)"
    continue
  fi
  timeout "$(limit 60)" compute-sanitizer --tool "$tool" --error-exitcode 1 --print-limit 20 \
    "$bin/test_cuda" "$attention_cases" >"$logs/$tool.log" 2>&1
  code=$?
  tail -3 "$logs/$tool.log"
  case $code in
    0) note "$tool" "clean" ;;
    124) note "$tool" "timed out" && status=1 ;;
    *) note "$tool" "FAILED, exit $code" && status=1 ;;
  esac
done

# ---- 4. bf16 gpt2-small: kiln beside PyTorch
phase "bf16 benchmark"
if [ "$emulate" = 1 ]; then
  shape=(--config tiny --warmup 1 --windows 1 --steps 2)
  torch_shape=(--d-model 32 --heads 2 --layers 2 --ff 64 --seq-len 16 --batch-size 2)
else
  shape=(--config gpt2-small --warmup 3 --windows 3 --steps 5)
  torch_shape=(--d-model 768 --heads 12 --layers 12 --ff 3072 --seq-len 1024 --batch-size 8)
fi
timeout "$(limit 150)" "$bin/bench_train" --device cuda --precision bf16 "${shape[@]}" \
  >"$logs/bench_kiln.log" 2>&1 || status=1
grep -E '^(device|RESULT)' "$logs/bench_kiln.log"
kiln=$(grep '^RESULT device' "$logs/bench_kiln.log")
peak=$(grep -Eo 'dense bf16 peak [0-9.]+' "$logs/bench_kiln.log" | awk '{print $4}')
field() { grep -Eo "$1 [^ ]+" <<<"$2" | awk '{print $2}'; }
if [ -n "$kiln" ]; then
  note "kiln bf16" "$(field tokens_per_sec "$kiln") tok/s, $(field ms_per_step "$kiln") ms/step, \
peak $(field peak_device_mb "$kiln") MiB, MFU ${kiln##* MFU }"
else
  note "kiln bf16" "FAILED (see bench_kiln.log)"
fi
if [ "$emulate" != 1 ] && [ "$torch_ok" = 1 ] && [ -d "$device/wikitext-2" ]; then
  timeout "$(limit 150)" python3 -u "$device/torch_ref.py" --device cuda --precision bf16 --sdpa \
    --fused-adam --norm pre --activation gelu "${torch_shape[@]}" --data "$device/wikitext-2" \
    --steps 25 --warmup 5 --log-interval 5 >"$logs/bench_torch.log" 2>&1
  rate=$(grep -Eo 'RESULT train_tokens_per_sec [0-9.]+' "$logs/bench_torch.log" | awk '{print $3}')
  params=$(grep -Eo 'parameters [0-9,]+' "$logs/bench_torch.log" | head -1 | tr -d , |
    awk '{print $2}')
  if [ -n "$rate" ] && [ -n "$params" ]; then
    # llm.c's FLOPs per token, 6·N + 6·L·T·d, as bench_train counts them (bench/mfu.h).
    mfu=$(awk -v r="$rate" -v n="$params" -v p="${peak:-0}" 'BEGIN {
      f = 6 * n + 6 * 12 * 1024 * 768  # L 12, T 1024, d 768: torch_shape above
      if (p > 0) printf "%.1f%%", 100 * r * f / (p * 1e12); else print "n/a"}')
    note "torch bf16" "$rate tok/s, $params parameters (WikiText-2 vocabulary), MFU $mfu"
  else
    note "torch bf16" "no figure (see bench_torch.log)"
  fi
else
  why="PyTorch sees no CUDA device"
  [ "$emulate" = 1 ] && why="emulated device"
  [ -d "$device/wikitext-2" ] || why="no WikiText-2 in $device"
  echo "not run: $why" | tee "$logs/bench_torch.log"
  note "torch bf16" "not run ($why)"
fi

# ---- 5. device time per op family and per kernel, from CUDA events
phase "device timing"
tiny=()
[ "$emulate" = 1 ] && tiny=(--tiny)
timeout "$(limit 45)" "$bin/bench_train" --device cuda --precision bf16 --profile \
  "${shape[0]}" "${shape[1]}" --warmup 1 --windows 1 --steps 3 >"$logs/profile.log" 2>&1
code=$?
sed -n '/^device time per family/,$p' "$logs/profile.log"
if [ "$code" = 0 ] && grep -q '^device time per family' "$logs/profile.log"; then
  note "kiln profile" "$(grep -Eo '^device time per family.*' "$logs/profile.log" |
    grep -Eo '[0-9.]+ ms/step') by CUDA events (profile.log)"
else
  note "kiln profile" "FAILED, exit $code (see profile.log)" && status=1
fi
timeout "$(limit 60)" "$bin/bench_ops" --device cuda --quick "${tiny[@]}" >"$logs/ops.log" 2>&1
code=$?
grep -E '^(gemm|softmax|cross|layer|adam|sum_squares|attention)' "$logs/ops.log"
case $code in
  0) note "bench_ops" "$(grep -cE 'GFLOP/s|GB/s| ms ' "$logs/ops.log") kernels timed (ops.log)" ;;
  124) note "bench_ops" "timed out (see ops.log)" && status=1 ;;
  *) note "bench_ops" "FAILED, exit $code (see ops.log)" && status=1 ;;
esac

phase "summary"
printf '%s\n' "${summary[@]}" "wall $(($(date +%s) - started)) s, exit $status" |
  tee "$logs/summary.txt"
exit "$status"
