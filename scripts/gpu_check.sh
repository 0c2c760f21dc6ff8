#!/usr/bin/env bash
# The GPU check, run on the GPU machine (nvcc, CMake, PyTorch; no network, no Debian -dev
# packages) with .device/ from scripts/prepare_device.sh carried along, in one call of at most ten
# minutes. Phases, each under its own timeout, printing as they go:
#   1. build     kiln with -DKILN_CUDA=ON into build-gpu/ against the packages unpacked in
#                .device/usr: only the targets the later phases run (test_core, test_cuda,
#                train_lm)
#   2. tests     the CUDA tests (ctest -R 'parity/|cuda'), with every GPU allocation poisoned
#   3. gemm      float32 GEMM TFLOP/s and peak GPU memory (test_cuda "[bench]")
#   4. training  200 steps of train_lm --device cuda on WikiText-2 and of torch_ref.py --device
#                cuda with the same model, for the default model and a larger one
# then one summary, the training table last. Logs go to $OUT when set (the device runner fetches
# it), else to build-gpu/gpu-check/. Exits non-zero when the build, a test or a train_lm run
# failed.
#
# Every phase's timeout is cut to what is left of KILN_GPU_CHECK_BUDGET (default 540 s), so the
# summary prints within the call. Timeouts (seconds) can be set from the environment:
# KILN_GPU_BUILD_TIMEOUT (default 300), KILN_GPU_TEST_TIMEOUT (150), KILN_GPU_BENCH_TIMEOUT (45),
# KILN_GPU_TRAIN_TIMEOUT (90, each of the four runs); KILN_GPU_TRAIN_STEPS (200).
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
root=$(pwd)
device=$root/.device
build=${KILN_BUILD_DIR:-build-gpu}
case $build in /*) ;; *) build=$root/$build ;; esac
logs=${OUT:-$build/gpu-check}
mkdir -p "$logs"
started=$(date +%s)
budget=${KILN_GPU_CHECK_BUDGET:-540}

declare -a summary=()
status=0
note() { summary+=("$(printf '%-30s %s' "$1" "$2")"); }
phase() { printf '\n==== %s (%d s in) ====\n' "$1" "$(($(date +%s) - started))"; }
# The timeout for a phase: its own, or what is left of the budget less 15 s for the summary.
limit() {
  local left=$((started + budget - 15 - $(date +%s)))
  (($1 < left)) && left=$1
  echo $((left < 1 ? 1 : left))
}

export PATH=/usr/local/cuda/bin:$PATH

# ---- 0. the machine
phase "machine"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1 | head -4
nvcc --version 2>&1 | tail -2
cmake --version | head -1
python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda)' 2>&1 | tail -1
if [ ! -d "$device/usr" ]; then
  echo "gpu_check: $device/usr is missing; run scripts/prepare_device.sh before the GPU run" >&2
  exit 2
fi
arch_lib=$device/usr/lib/x86_64-linux-gnu
export LD_LIBRARY_PATH=$arch_lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}

# ---- 1. build (scripts/setup.sh would build every target; this check needs three)
phase "build"
start=$(date +%s)
targets=(test_core test_cuda)
grep -q 'kiln_add_example(train_lm ' examples/CMakeLists.txt && targets+=(train_lm)
build_timeout=${KILN_GPU_BUILD_TIMEOUT:-300}
if timeout "$(limit "$build_timeout")" cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release \
     -DKILN_CUDA=ON -DCMAKE_PREFIX_PATH="$device/usr" >"$logs/build.log" 2>&1 &&
   timeout "$(limit $((start + build_timeout - $(date +%s))))" \
     cmake --build "$build" -j "$(nproc)" --target "${targets[@]}" >>"$logs/build.log" 2>&1; then
  built=1
  note "build" "ok ($(($(date +%s) - start)) s: ${targets[*]})"
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
  (cd "$build" && KILN_CUDA_POISON=1 timeout "$(limit "${KILN_GPU_TEST_TIMEOUT:-150}")" \
     ctest -R 'parity/|cuda' --output-on-failure -j 8) >"$logs/tests.log" 2>&1
  test_status=$?
  passed=$(grep -cE 'Test +#[0-9]+: .* Passed' "$logs/tests.log")
  failed=$(grep -cE 'Test +#[0-9]+: .*(\*\*\*Failed|\*\*\*Timeout|\*\*\*Exception|Not Run)' "$logs/tests.log")
  skipped=$(grep -cE 'Test +#[0-9]+: .*Skipped' "$logs/tests.log")
  grep -E 'tests passed' "$logs/tests.log"
  if [ "$test_status" -ne 0 ] || [ "$failed" -ne 0 ] || [ "$passed" -eq 0 ]; then
    status=1
    sed -n '/The following tests FAILED/,$p' "$logs/tests.log" | head -40
  fi
  # On the GPU machine a skipped CUDA test means kiln saw no device: the check proved nothing.
  if [ "$skipped" -ne 0 ]; then
    status=1
    echo "gpu_check: $skipped tests were skipped: kiln found no CUDA device (see tests.log)"
  fi
  note "tests" "$passed passed, $failed failed, $skipped skipped (exit $test_status)"
else
  note "tests" "not run (no build)"
fi

# ---- 3. GEMM throughput and peak memory
if [ "$built" = 1 ]; then
  phase "gemm"
  timeout "$(limit "${KILN_GPU_BENCH_TIMEOUT:-45}")" "$build/tests/cuda/test_cuda" "[bench]" \
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
# name d_model heads layers ff seq_len batch: torch_ref.py's default model, and a larger one.
configs=(
  "default 256 4 2 1024 64 32"
  "large 512 8 6 2048 256 32"
)
steps=${KILN_GPU_TRAIN_STEPS:-200}
# torch_ref.py run as a module, so that the same process can report PyTorch's peak memory.
torch_wrapper='
import sys
import torch
sys.path.insert(0, sys.argv[1])
import torch_ref
sys.argv = ["torch_ref.py"] + sys.argv[2:]
torch_ref.main()
print(f"RESULT gpu_peak_bytes {torch.cuda.max_memory_allocated()}", flush=True)
'

# Runs a command into a log, sampling the GPU's used memory (nvidia-smi, MiB) beside it.
run_logged() {
  local log=$1
  shift
  nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -lms 200 >"$log.mem" \
    2>/dev/null &
  local sampler=$!
  timeout "$(limit "${KILN_GPU_TRAIN_TIMEOUT:-90}")" "$@" >"$log" 2>&1
  local code=$?
  kill "$sampler" 2>/dev/null
  wait "$sampler" 2>/dev/null
  [ "$code" -ne 0 ] && { echo "exit $code; the log ends:"; tail -5 "$log"; }
  return "$code"
}
result() { awk -v key="$2" '$1 == "RESULT" && $2 == key { print $3; exit }' "$1"; }
mib() { awk -v b="$1" 'BEGIN { if (b + 0 > 0) printf "%.0f", b / 1048576; else print "n/a" }'; }
smi_peak() { sort -n "$1.mem" 2>/dev/null | tail -1 | grep -E '^[0-9]+$' || echo n/a; }
# tokens/s of train_lm's log lines after step 10: the steps PyTorch's figure also measures (it
# leaves out 5 warm-up steps), where train_lm's RESULT counts every step. Each line covers 10
# steps of equal tokens, so the rate over them is the harmonic mean.
steady_tps() {
  awk '/^step [0-9]+\/[0-9]+ \|/ {
         split($2, s, "/"); if (s[1] <= 10) next
         for (i = 1; i <= NF; ++i) if ($(i + 1) == "tok/s") { n++; inv += 1 / $i }
       }
       END { if (n > 0) printf "%.1f", n / inv; else print "n/a" }' "$1"
}

declare -a table=() legend=()
if [ "$built" = 1 ] && [ -x "$build/examples/train_lm" ] && [ -f "$device/torch_ref.py" ]; then
  phase "training ($steps steps each)"
  for config in "${configs[@]}"; do
    read -r name d heads layers ff seq batch <<<"$config"
    max_len=$((seq > 512 ? seq : 512))
    kiln_log=$logs/train_kiln_$name.log torch_log=$logs/train_torch_$name.log
    legend+=("$name: d_model $d, heads $heads, layers $layers, ff $ff, T $seq, B $batch")
    echo "-- ${legend[-1]}"
    # A failed kiln run fails the check; a failed PyTorch run only leaves its column empty.
    run_logged "$kiln_log" "$build/examples/train_lm" --device cuda --data "$device/wikitext-2" \
      --steps "$steps" --eval-every 0 --time-budget 0 --d-model "$d" --heads "$heads" \
      --layers "$layers" --ff "$ff" --seq-len "$seq" --batch-size "$batch" \
      --max-seq-len "$max_len" || status=1
    grep -E '^(model|training|RESULT)' "$kiln_log"
    run_logged "$torch_log" python3 -c "$torch_wrapper" "$device" --device cuda \
      --data "$device/wikitext-2" --steps "$steps" --d-model "$d" --heads "$heads" \
      --layers "$layers" --ff "$ff" --bptt "$seq" --batch "$batch"
    grep -E '^(model|RESULT)' "$torch_log"
    kiln_tps=$(result "$kiln_log" train_tokens_per_sec)
    kiln_steady=$(steady_tps "$kiln_log")
    torch_tps=$(result "$torch_log" train_tokens_per_sec)
    # The ratio compares like with like: both figures without the warm-up steps.
    ratio=$(awk -v k="$kiln_steady" -v t="$torch_tps" \
      'BEGIN { if (k + 0 > 0 && t + 0 > 0) printf "%.2f", k / t; else print "n/a" }')
    kiln_peak=$(result "$kiln_log" gpu_peak_bytes)
    table+=("$(printf '%-8s %12s %12s %12s %8s %12s %12s %9s %9s' "$name" "${kiln_tps:-n/a}" \
      "$kiln_steady" "${torch_tps:-n/a}" "$ratio" "$(mib "${kiln_peak:-0}")" \
      "$(mib "$(result "$torch_log" gpu_peak_bytes)")" "$(smi_peak "$kiln_log")" \
      "$(smi_peak "$torch_log")")")
  done
  note "training" "see the table below (logs train_kiln_*.log, train_torch_*.log)"
else
  note "training" "skipped (no build, no $build/examples/train_lm or no $device/torch_ref.py)"
fi

phase "summary"
printf '%s\n' "${summary[@]}"
if [ ${#table[@]} -gt 0 ]; then
  echo
  echo "training, $steps steps (tok/s: kiln's RESULT over every step, kiln's steady rate after"
  echo "step 10, PyTorch's after its 5 warm-up steps; ratio = kiln steady / PyTorch; peak MiB:"
  echo "allocator peaks (kiln peak_bytes_in_use, torch.cuda.max_memory_allocated), then the"
  echo "device's used memory sampled by nvidia-smi, CUDA context and cached blocks included)"
  printf '%-8s %12s %12s %12s %8s %12s %12s %9s %9s\n' config "kiln tok/s" "kiln steady" \
    "torch tok/s" ratio "kiln MiB" "torch MiB" "kiln smi" "torch smi"
  printf '%s\n' "${table[@]}"
  printf '  %s\n' "${legend[@]}"
fi
exit "$status"
