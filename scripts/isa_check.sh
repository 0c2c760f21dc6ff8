#!/usr/bin/env bash
# The ISA check (docs/isa-check.md): kiln built for the x86-64-v3 baseline (AVX2, FMA; no
# AVX-512) runs on a CPU that has exactly that baseline, emulated by qemu-user's Haswell model,
# as the CUDA emulator stands in for a GPU. Any instruction beyond the baseline that is not
# behind a cpuid check dies there of SIGILL, whatever the machine running the check has.
#
# Configures build-isa/ (-DKILN_ARCH=x86-64-v3, no CUDA) and builds only the targets it runs
# (through ccache when CMAKE_CXX_COMPILER_LAUNCHER says so, as in .ci/run); then, under
# `qemu-x86_64 -cpu Haswell`:
#   1. the negative control, first (built alone, so a broken emulator fails the phase at once):
#      tests/isa/planted_avx512.cpp, one unguarded AVX-512 instruction, must die of SIGILL (else
#      the emulator would catch nothing and the check proves nothing);
#   2. every program's --help;
#   3. bench_ops --tiny (every kernel row once; the AVX-512 peaks must say skipped);
#   4. train_lm for a few steps of a tiny model on a corpus written here, f32 and bf16, then
#      eval_ppl and generate on its checkpoint;
#   5. test_core's cases that exercise the dispatch: the GEMM paths (each KILN_GEMM source), the
#      row kernels and bf16 widening.
# Fails, never skips, when qemu-user is missing. KILN_OFFLINE=1 does not install it;
# KILN_ISA_QEMU names another emulator binary and KILN_ISA_CONTROL another control program
# (both for showing that the check fails, docs/isa-check.md); KILN_ISA_BUILD_DIR another build
# folder. Extra arguments go to CMake's configure step.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/install_packages.sh
install_packages isa-check qemu-user

fail() {
  echo "isa-check: FAILED: $*" >&2
  exit 1
}

qemu=${KILN_ISA_QEMU:-qemu-x86_64}
command -v "$qemu" >/dev/null ||
  fail "$qemu not found (Debian package qemu-user): the ISA check cannot run, and it never skips"
# Haswell less the features QEMU's TCG does not emulate and would drop with a warning on every
# run anyway (TSX's hle and rtm, and system features): the CPU the guest sees is the same.
emulate() { "$qemu" -cpu Haswell,-hle,-rtm,-pcid,-invpcid,-x2apic,-tsc-deadline "$@"; }
# qemu-user writes a core file of a guest that dies (the negative control) into the working
# directory where the limit allows one.
ulimit -c 0

build=${KILN_ISA_BUILD_DIR:-build-isa}
programs=(train_lm eval_ppl generate attention_maps kiln-prepare train_custom bench_ops
          bench_train bench_dp bench_tokenizer)
start=$SECONDS
mkdir -p "$build"
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DKILN_ARCH=x86-64-v3 -DKILN_CUDA=OFF "$@" \
  >"$build/isa-configure.log" || { cat "$build/isa-configure.log"; fail "configuring $build"; }
# build_targets TARGET...: builds them in $build, its log printed only when the build fails.
build_targets() {
  cmake --build "$build" -j "$(nproc)" --target "$@" >"$build/isa-build.log" ||
    { tail -50 "$build/isa-build.log"; fail "building $* in $build"; }
}

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# step NAME COMMAND...: runs COMMAND, its output in a log printed only when it fails.
step() {
  local name=$1 started=$SECONDS
  shift
  if ! "$@" >"$work/step.log" 2>&1; then
    tail -40 "$work/step.log"
    fail "$name"
  fi
  echo "isa-check: $name: ok ($((SECONDS - started)) s)"
}

# 1. The negative control, first: an emulator that lets AVX-512 through fails the phase at once.
build_targets planted_avx512
control=${KILN_ISA_CONTROL:-$build/tests/planted_avx512}
set +e
emulate "$control" >"$work/control.log" 2>&1
status=$?
set -e
if [ "$status" -ne $((128 + 4)) ]; then
  cat "$work/control.log"
  fail "the planted AVX-512 instruction ($control) did not die of SIGILL under $qemu -cpu Haswell" \
    "(exit status $status, 132 expected): this emulator would not catch an unguarded one in kiln"
fi
echo "isa-check: negative control: $control died of SIGILL under -cpu Haswell, as it must"

build_targets "${programs[@]}" test_core
echo "isa-check: built $build for x86-64-v3: $((SECONDS - start)) s"

# 2. Every program's --help.
find_program() { find "$build" -name "$1" -type f -perm -u+x -print -quit; }
for program in "${programs[@]}"; do
  path=$(find_program "$program")
  [ -n "$path" ] || fail "$program was not built in $build"
  step "$program --help" emulate "$path" --help
done

# 3. bench_ops's tiny mode: the AVX-512 peaks must skip, the AVX2 one must run.
step "bench_ops --tiny" emulate "$(find_program bench_ops)" --tiny --threads 1 2
grep -q "^peak fma_f32_zmm 1 skipped: no AVX512F$" "$work/step.log" ||
  fail "bench_ops --tiny ran or never reached the AVX-512 FMA peak on a CPU without AVX-512"
grep -qE "^peak fma_f32_ymm +1 +[0-9.]+ GFLOP/s$" "$work/step.log" ||
  fail "bench_ops --tiny did not time the AVX2 FMA peak"

# 4. A few training steps of a tiny model, f32 and bf16, on a corpus written here; then the
# checkpoint's perplexity and a few generated tokens.
data=$work/data
mkdir -p "$data"
nouns=(cat dog bird fish horse cow sheep goat mouse rat)
verbs=(sees eats likes chases finds hears)
for split in train:200 valid:60 test:60; do
  for ((i = 0; i < ${split#*:}; ++i)); do
    echo "the ${nouns[i % 10]} ${verbs[i % 6]} the ${nouns[(i * 7 + 3) % 10]} ."
  done >"$data/${split%:*}.txt"
done
tiny_model=(--d-model 32 --heads 2 --layers 1 --ff 64 --seq-len 16 --batch-size 8 --threads 2
            --time-budget 0 --eval-every 0 --steps 3)
for precision in f32 bf16; do
  step "train_lm --precision $precision, 3 steps" emulate "$(find_program train_lm)" \
    --data "$data" "${tiny_model[@]}" --precision "$precision" \
    --save "$work/$precision.safetensors"
done
step "eval_ppl" emulate "$(find_program eval_ppl)" --data "$data" \
  --checkpoint "$work/bf16.safetensors" --threads 2
step "generate" emulate "$(find_program generate)" --checkpoint "$work/bf16.safetensors" \
  --prompt "the cat" --tokens 8 --threads 2

# 5. The CPU tests of the dispatch, chosen to run in about 30 s emulated: the GEMM layouts (below
# once more through each KILN_GEMM source), the fused row kernels (softmax, layer norm,
# cross-entropy), the bf16 widening path and its thread determinism, attention's operand layouts
# in float32 and bf16, and vec_exp's special values. The exhaustive numeric sweeps (seconds
# natively, minutes emulated; 533 s for the whole [gemm] [bf16] [attention] [vec_exp] set) test
# rounding, not which instructions run: the native suite runs them.
cases=('[fused]' '[gemm_layouts]'
       'the widening path is the float32 GEMM of the widened operands\, bit for bit'
       'bf16 products are deterministic with 3 threads'
       'causal_attention_heads gives the same values and gradients for every operand layout'
       'bf16 attention: float32 arithmetic on the bf16 operands\, bf16 saved and returned under autocast'
       'vec_exp is 0 below the underflow threshold\, 1 at 0 and NaN for NaN')
spec=$(IFS=,; echo "${cases[*]}")
test_core=$(find_program test_core)
export OMP_NUM_THREADS=2 OMP_WAIT_POLICY=passive
step "test_core: the dispatch cases" emulate "$test_core" "$spec"
# The matmul layouts once more through each float32 source that KILN_GEMM can force, with the
# case that fails unless that source is the one used (a library not installed would leave Eigen
# in its place); a library that is not installed is skipped, and said so.
for source in openblas blis eigen packed; do
  package=
  case $source in
    openblas) package=libopenblas0-openmp ;;
    blis) package=libblis4-openmp ;;
  esac
  if [[ -n $package ]] &&
    ! dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q 'install ok installed'; then
    echo "isa-check: KILN_GEMM=$source skipped: $package is not installed"
    continue
  fi
  KILN_GEMM=$source step "test_core [gemm_layouts] with KILN_GEMM=$source" \
    emulate "$test_core" '[gemm_layouts],[gemm_source]'
done
