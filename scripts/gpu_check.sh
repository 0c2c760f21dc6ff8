#!/usr/bin/env bash
# The GPU check, run on the GPU machine (nvcc, CMake, PyTorch; no network, no Debian -dev
# packages) with .device/ from scripts/prepare_device.sh carried along. Phases, each under its own
# timeout, printing as they go:
#   1. build     kiln with -DKILN_CUDA=ON (KILN_OFFLINE=1 scripts/setup.sh) into build-gpu/,
#                against the packages unpacked in .device/usr
#   2. tests     the CUDA tests (ctest -R 'parity/|cuda'), with every GPU allocation poisoned
#   3. gemm      float32 GEMM TFLOP/s and peak GPU memory (test_cuda "[bench]")
#   4. training  train_lm --device cuda against torch_ref.py --device cuda, once train_lm exists
# then one summary table. Logs go to $OUT when set (the device runner fetches it), else to
# build-gpu/gpu-check/. Exits non-zero when the build or a test failed.
#
# Timeouts (seconds) can be set from the environment: KILN_GPU_BUILD_TIMEOUT (default 480),
# KILN_GPU_TEST_TIMEOUT (300), KILN_GPU_BENCH_TIMEOUT (120), KILN_GPU_TRAIN_TIMEOUT (150, each run).
set -uo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
device=$root/.device
build=${KILN_BUILD_DIR:-build-gpu}
case $build in /*) ;; *) build=$root/$build ;; esac
logs=${OUT:-$build/gpu-check}
mkdir -p "$logs"

declare -a summary=()
status=0
note() { summary+=("$(printf '%-30s %s' "$1" "$2")"); }
phase() { printf '\n==== %s ====\n' "$1"; }

export PATH=/usr/local/cuda/bin:$PATH
export KILN_OFFLINE=1

# ---- 0. the machine
phase "machine"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1 | head -4
nvcc --version 2>&1 | tail -2
cmake --version | head -1
if [ ! -d "$device/usr" ]; then
  echo "gpu_check: $device/usr is missing; run scripts/prepare_device.sh before the GPU run" >&2
  exit 2
fi
arch_lib=$device/usr/lib/x86_64-linux-gnu
export LD_LIBRARY_PATH=$arch_lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}

# ---- 1. build
phase "build"
start=$(date +%s)
if KILN_BUILD_DIR=$build timeout "${KILN_GPU_BUILD_TIMEOUT:-480}" scripts/setup.sh \
     -DKILN_CUDA=ON -DCMAKE_PREFIX_PATH="$device/usr" >"$logs/build.log" 2>&1; then
  built=1
  note "build" "ok ($(($(date +%s) - start)) s)"
  grep -E "kiln: CUDA" "$logs/build.log"
  grep -iE "warning" "$logs/build.log" | head -20
else
  built=0
  status=1
  note "build" "FAILED or timed out after $(($(date +%s) - start)) s (see build.log)"
  tail -40 "$logs/build.log"
fi

# ---- 2. tests
if [ "$built" = 1 ]; then
  phase "tests (ctest -R 'parity/|cuda', KILN_CUDA_POISON=1)"
  (cd "$build" && KILN_CUDA_POISON=1 timeout "${KILN_GPU_TEST_TIMEOUT:-300}" \
     ctest -R 'parity/|cuda' --output-on-failure -j 8) >"$logs/tests.log" 2>&1
  test_status=$?
  passed=$(grep -cE 'Test +#[0-9]+: .* Passed' "$logs/tests.log")
  failed=$(grep -cE 'Test +#[0-9]+: .*(\*\*\*Failed|\*\*\*Timeout|\*\*\*Exception|Not Run)' "$logs/tests.log")
  skipped=$(grep -cE 'Test +#[0-9]+: .*Skipped' "$logs/tests.log")
  grep -E 'tests passed' "$logs/tests.log"
  if [ "$test_status" -ne 0 ] || [ "$failed" -ne 0 ]; then
    status=1
    sed -n '/The following tests FAILED/,$p' "$logs/tests.log" | head -40
  fi
  note "tests" "$passed passed, $failed failed, $skipped skipped (exit $test_status)"
else
  note "tests" "not run (no build)"
fi

# ---- 3. GEMM throughput and peak memory
if [ "$built" = 1 ]; then
  phase "gemm"
  timeout "${KILN_GPU_BENCH_TIMEOUT:-120}" "$build/tests/cuda/test_cuda" "[bench]" \
    >"$logs/bench.log" 2>&1
  grep RESULT "$logs/bench.log" || tail -20 "$logs/bench.log"
  while read -r _ name value; do
    case $name in
      gpu_peak_bytes) note "peak GPU memory (bench)" "$((value / 1048576)) MiB" ;;
      *) note "${name%_tflops}" "$(printf '%.1f TFLOP/s' "$value")" ;;
    esac
  done < <(grep '^RESULT' "$logs/bench.log")
fi

# ---- 4. training: kiln against PyTorch on the GPU
# Filled in by the issue that adds train_lm: each config is a list of model flags shared by
# train_lm and torch_ref.py (torch_ref.py's names). The phase runs only once train_lm is built.
configs=(
  "--d-model 256 --heads 4 --layers 2 --ff 1024 --seq-len 64 --batch-size 32"
  "--d-model 512 --heads 8 --layers 4 --ff 2048 --seq-len 128 --batch-size 32"
)
steps=${KILN_GPU_TRAIN_STEPS:-200}

# Runs a command, printing its output to a log, and echoes "<tokens/s> <peak MiB>": the RESULT
# train_tokens_per_sec figure and the most GPU memory in use while it ran (nvidia-smi samples).
measure() {
  local log=$1
  shift
  nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -lms 200 >"$log.mem" 2>/dev/null &
  local sampler=$!
  timeout "${KILN_GPU_TRAIN_TIMEOUT:-150}" "$@" >"$log" 2>&1
  kill "$sampler" 2>/dev/null
  wait "$sampler" 2>/dev/null
  local tps peak
  tps=$(awk '/RESULT train_tokens_per_sec/ {print $3; exit}' "$log")
  peak=$(sort -n "$log.mem" | tail -1)
  echo "${tps:-n/a} ${peak:-n/a}"
}

if [ "$built" = 1 ] && [ -x "$build/examples/train_lm" ]; then
  phase "training"
  for i in "${!configs[@]}"; do
    read -r -a flags <<<"${configs[$i]}"
    read -r kiln_tps kiln_mem < <(measure "$logs/train_kiln_$i.log" "$build/examples/train_lm" \
      --device cuda --data "$device/wikitext-2" --steps "$steps" --eval-every 0 "${flags[@]}")
    read -r torch_tps torch_mem < <(measure "$logs/train_torch_$i.log" python3 \
      "$device/torch_ref.py" --device cuda --data "$device/wikitext-2" --steps "$steps" "${flags[@]}")
    ratio=$(awk -v k="$kiln_tps" -v t="$torch_tps" 'BEGIN { if (k + 0 > 0 && t + 0 > 0) printf "%.2f", k / t; else print "n/a" }')
    echo "config $i (${configs[$i]}): kiln $kiln_tps tok/s, $kiln_mem MiB | torch $torch_tps tok/s, $torch_mem MiB | kiln/torch $ratio"
    note "train config $i kiln" "$kiln_tps tok/s, peak $kiln_mem MiB"
    note "train config $i torch" "$torch_tps tok/s, peak $torch_mem MiB"
    note "train config $i kiln/torch" "$ratio"
  done
else
  note "training" "skipped ($build/examples/train_lm not built yet)"
fi

phase "summary"
printf '%s\n' "${summary[@]}"
exit "$status"
