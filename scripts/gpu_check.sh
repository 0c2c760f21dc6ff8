#!/usr/bin/env bash
# The GPU check, run on the GPU machine (nvcc, CMake, PyTorch; no network, no Debian -dev
# packages) with .device/ from scripts/prepare_device.sh carried along. Two runs, each one call of
# the device tool well inside its ten minutes, each writing at most 8 files to $OUT (the device
# runner fetches 8), else to build-gpu/gpu-check-<run>/:
#
#   scripts/gpu_check.sh tests   1. build   kiln -DKILN_CUDA=ON into build-gpu/ against .device/usr:
#                                           every binary with a CUDA case (test_core, test_cuda,
#                                           test_optim, test_io, test_apps with train_lm)
#                                2. tests   the CUDA suite (scripts/cuda_suite.sh: every parity/
#                                           case and every case with "cuda" or "CUDA" in its
#                                           name), every GPU allocation poisoned; none may skip
#                                3. sanitizer  compute-sanitizer memcheck, racecheck and synccheck
#                                           over a short subset of test_cuda
#      files: build.log tests.log memcheck.log racecheck.log synccheck.log summary.txt
#
#   scripts/gpu_check.sh bf16    the bench run's build and training phase with --precision bf16,
#                                           PyTorch under torch.autocast(dtype=torch.bfloat16)
#      files: build.log train_{kiln,torch}_{default,gpt2}-bf16.log summary.txt
#
#   scripts/gpu_check.sh bench   1. build   test_cuda and train_lm (nothing to do when the machine
#                                           is still warm from the tests run)
#                                2. gemm    float32 GEMM TFLOP/s (test_cuda "[bench]")
#                                3. training  train_lm --device cuda and torch_ref.py --device cuda
#                                           for torch_ref.py's default model and a GPT-2-small-sized
#                                           one: tokens/s, peak memory, the loss at equal steps
#      files: build.log bench.log train_{kiln,torch}_{default,gpt2}.log summary.txt
#
# Each phase runs under its own timeout (seconds, from the environment), and every timeout is cut
# to what is left of KILN_GPU_CHECK_BUDGET (default 540 s) less 15 s for the summary; the defaults
# add up to less than the budget, so every phase gets its full time:
#   tests: KILN_GPU_BUILD_TIMEOUT (270), KILN_GPU_TEST_TIMEOUT (135), KILN_GPU_SANITIZER_TIMEOUT
#          (35, each of the three tools)                                      = 510
#   bench: KILN_GPU_BUILD_TIMEOUT (240), KILN_GPU_BENCH_TIMEOUT (45), KILN_GPU_TRAIN_TIMEOUT (55,
#          each of the four runs), KILN_GPU_TRAIN_STEPS (200 default, 50 gpt2)  = 505
# Exits non-zero when the build, a test, a sanitizer or a train_lm run failed.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
run=${1:-}
case $run in tests | bench | bf16) ;; *)
  echo "usage: scripts/gpu_check.sh tests|bench|bf16" >&2
  exit 2
  ;;
esac
root=$(pwd)
device=$root/.device
build=${KILN_BUILD_DIR:-build-gpu}
case $build in /*) ;; *) build=$root/$build ;; esac
logs=${OUT:-$build/gpu-check-$run}
mkdir -p "$logs"
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
started=$(date +%s)
budget=${KILN_GPU_CHECK_BUDGET:-540}
# shellcheck source=scripts/cuda_suite.sh
source scripts/cuda_suite.sh

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
write_summary() {
  phase "summary"
  printf '%s\n' "${summary[@]}" "$@" | tee "$logs/summary.txt"
}

export PATH=/usr/local/cuda/bin:$PATH

# ---- 0. the machine
phase "machine ($run)"
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

# ---- 1. build (scripts/setup.sh would build every target; a run needs a few)
if [ "$run" = tests ]; then
  targets=(test_core test_cuda test_optim test_io test_apps train_lm)
  build_timeout=${KILN_GPU_BUILD_TIMEOUT:-270}
else
  targets=(test_cuda train_lm)
  build_timeout=${KILN_GPU_BUILD_TIMEOUT:-240}
fi
phase "build"
start=$(date +%s)
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

if [ "$run" = tests ]; then
  # ---- 2. the CUDA suite
  if [ "$built" = 1 ]; then
    phase "tests (the CUDA suite, KILN_CUDA_POISON=1)"
    (cd "$build" && KILN_CUDA_POISON=1 timeout "$(limit "${KILN_GPU_TEST_TIMEOUT:-135}")" \
      ctest -R "$KILN_CUDA_SUITE" --output-on-failure -j 8) >"$logs/tests.log" 2>&1
    test_status=$?
    read -r passed failed skipped < <(cuda_suite_counts "$logs/tests.log")
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

  # ---- 3. compute-sanitizer over kernels of every family that use shared memory, barriers and
  # shuffles (block and warp reductions, the sort-based scatter-add, the fused row kernels)
  subset='cuda/softmax rows with no visible column match the CPU'
  subset+=',cuda/find_invalid_id returns the first bad position or -1'
  subset+=',cuda/max takes the first index on ties and propagates NaN like the CPU'
  subset+=',cuda/layer norm forward and backward match the CPU'
  subset+=',cuda/cross-entropy with its exponentials in place matches the CPU'"'"'s fused pass'
  subset+=',cuda/scatter_add_rows equals the CPU bit for bit'"\\,"' in position order'
  subset+=',cuda/dropout masks equal the CPU'"'"'s bit for bit'
  for tool in memcheck racecheck synccheck; do
    if [ "$built" = 1 ] && command -v compute-sanitizer >/dev/null; then
      phase "compute-sanitizer --tool $tool"
      timeout "$(limit "${KILN_GPU_SANITIZER_TIMEOUT:-35}")" compute-sanitizer --tool "$tool" \
        --error-exitcode 1 --print-limit 20 "$build/tests/cuda/test_cuda" "$subset" \
        >"$logs/$tool.log" 2>&1
      code=$?
      tail -3 "$logs/$tool.log"
      case $code in
        0) note "$tool" "clean ($(grep -Eo '[0-9]+ test cases' "$logs/$tool.log" | head -1))" ;;
        124) note "$tool" "timed out (see $tool.log)" && status=1 ;;
        *) note "$tool" "FAILED, exit $code (see $tool.log)" && status=1 ;;
      esac
    else
      note "$tool" "not run (no build or no compute-sanitizer)"
    fi
  done
  write_summary
  exit "$status"
fi

# ---- 2. GEMM throughput and peak memory
if [ "$built" = 1 ] && [ "$run" = bench ]; then
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

# ---- 3. training: kiln against PyTorch on the GPU
# name d_model heads layers ff seq_len batch steps precision: torch_ref.py's default model, and
# one of GPT-2 small's size (124 M parameters with GPT-2's vocabulary; 113 M with WikiText-2's),
# in float32 (bench), or in bf16 (bf16: kiln --precision bf16 against PyTorch's autocast).
precision=$([ "$run" = bf16 ] && echo bf16 || echo f32)
configs=(
  "default 256 4 2 1024 64 32 ${KILN_GPU_TRAIN_STEPS:-200} $precision"
  "gpt2 768 12 12 3072 1024 8 ${KILN_GPU_TRAIN_STEPS:-50} $precision"
)
# torch_ref.py run as a module, so that the same process can report PyTorch's peak memory, and
# under torch.autocast when the second argument is bf16 (torch_ref.py itself has no such flag).
torch_wrapper='
import contextlib
import sys
import torch
sys.path.insert(0, sys.argv[1])
import torch_ref
bf16 = sys.argv[2] == "bf16"
sys.argv = ["torch_ref.py"] + sys.argv[3:]
with torch.autocast("cuda", dtype=torch.bfloat16) if bf16 else contextlib.nullcontext():
    torch_ref.main()
print(f"RESULT gpu_peak_bytes {torch.cuda.max_memory_allocated()}", flush=True)
'

# Runs a command into a log, sampling the GPU's used memory (nvidia-smi, MiB) into the scratch
# folder (only 8 files come back from $OUT).
run_logged() {
  local log=$1 samples
  samples=$scratch/$(basename "$1").mem
  shift
  nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -lms 200 >"$samples" \
    2>/dev/null &
  local sampler=$!
  timeout "$(limit "${KILN_GPU_TRAIN_TIMEOUT:-55}")" "$@" >"$log" 2>&1
  local code=$?
  kill "$sampler" 2>/dev/null
  wait "$sampler" 2>/dev/null
  [ "$code" -ne 0 ] && { echo "exit $code; the log ends:"; tail -5 "$log"; }
  return "$code"
}
result() { awk -v key="$2" '$1 == "RESULT" && $2 == key { print $3; exit }' "$1"; }
mib() { awk -v b="$1" 'BEGIN { if (b + 0 > 0) printf "%.0f", b / 1048576; else print "n/a" }'; }
smi_peak() {
  sort -n "$scratch/$(basename "$1").mem" 2>/dev/null | tail -1 | grep -E '^[0-9]+$' || echo n/a
}
# "step loss" for each log line of either program (kiln: "step 20/200 | ... | loss 7.1 | ...",
# PyTorch: "step     20 | ... | loss 7.1 | ..."): the mean loss of the 10 steps up to it.
logged_losses() {
  awk '/^step +[0-9]+/ { split($2, s, "/"); for (i = 1; i < NF; ++i) if ($i == "loss") print s[1], $(i + 1) }' "$1"
}
# The last step both programs logged, and each one's loss there: "step kiln torch".
equal_steps_loss() {
  join <(logged_losses "$1" | sort -k1,1) <(logged_losses "$2" | sort -k1,1) | sort -n | tail -1
}
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
if [ "$built" = 1 ] && [ -x "$build/apps/train_lm" ] && [ -f "$device/torch_ref.py" ]; then
  for config in "${configs[@]}"; do
    read -r model d heads layers ff seq batch steps precision <<<"$config"
    name=$model$([ "$precision" = bf16 ] && echo -bf16)
    phase "training $name ($steps steps each)"
    max_len=$((seq > 512 ? seq : 512))
    kiln_log=$logs/train_kiln_$name.log torch_log=$logs/train_torch_$name.log
    legend+=("$name: d_model $d, heads $heads, layers $layers, ff $ff, T $seq, B $batch, $steps steps, $precision")
    echo "-- ${legend[-1]}"
    # A failed kiln run fails the check; a failed PyTorch run only leaves its columns empty.
    run_logged "$kiln_log" "$build/apps/train_lm" --device cuda --data "$device/wikitext-2" \
      --steps "$steps" --eval-every 0 --time-budget 0 --log-every 10 --d-model "$d" \
      --heads "$heads" --layers "$layers" --ff "$ff" --seq-len "$seq" --batch-size "$batch" \
      --max-seq-len "$max_len" --precision "$precision" || status=1
    grep -E '^(model|training|RESULT)' "$kiln_log"
    run_logged "$torch_log" python3 -c "$torch_wrapper" "$device" "$precision" --device cuda \
      --data "$device/wikitext-2" --steps "$steps" --log-interval 10 --d-model "$d" \
      --heads "$heads" --layers "$layers" --ff "$ff" --bptt "$seq" --batch "$batch"
    grep -E '^(model|RESULT)' "$torch_log"
    kiln_tps=$(result "$kiln_log" train_tokens_per_sec)
    kiln_steady=$(steady_tps "$kiln_log")
    torch_tps=$(result "$torch_log" train_tokens_per_sec)
    # The ratio compares like with like: both figures without the warm-up steps.
    ratio=$(awk -v k="$kiln_steady" -v t="$torch_tps" \
      'BEGIN { if (k + 0 > 0 && t + 0 > 0) printf "%.2f", k / t; else print "n/a" }')
    read -r loss_step kiln_loss torch_loss < <(equal_steps_loss "$kiln_log" "$torch_log")
    table+=("$(printf '%-12s %11s %11s %11s %6s %9s %9s %8s %8s %6s %7s %7s' "$name" \
      "${kiln_tps:-n/a}" "$kiln_steady" "${torch_tps:-n/a}" "$ratio" \
      "$(mib "$(result "$kiln_log" gpu_peak_bytes)")" \
      "$(mib "$(result "$torch_log" gpu_peak_bytes)")" "$(smi_peak "$kiln_log")" \
      "$(smi_peak "$torch_log")" "${loss_step:-n/a}" "${kiln_loss:-n/a}" "${torch_loss:-n/a}")")
  done
  note "training" "see the table below (logs train_kiln_*.log, train_torch_*.log)"
else
  note "training" "skipped (no build, no $build/apps/train_lm or no $device/torch_ref.py)"
fi

lines=()
if [ ${#table[@]} -gt 0 ]; then
  lines+=("" "training (tok/s: kiln's RESULT over every step, kiln's steady rate after step 10,"
    "PyTorch's after its 5 warm-up steps; ratio = kiln steady / PyTorch; peak MiB: allocator"
    "peaks (kiln peak_bytes_in_use, torch.cuda.max_memory_allocated), then the device's used"
    "memory sampled by nvidia-smi, CUDA context and cached blocks included; loss: the mean of"
    "the 10 steps up to the last step both logged, from different initial weights)")
  lines+=("$(printf '%-12s %11s %11s %11s %6s %9s %9s %8s %8s %6s %7s %7s' config "kiln tok/s" \
    "kiln steady" "torch tok/s" ratio "kiln MiB" "torch MiB" "kiln smi" "torch smi" step \
    "kiln" "torch")")
  lines+=("${table[@]}")
  for l in "${legend[@]}"; do lines+=("  $l"); done
fi
write_summary "${lines[@]}"
exit "$status"
