#!/usr/bin/env bash
# The unit tests under AddressSanitizer (with LeakSanitizer) and UndefinedBehaviorSanitizer, with
# the CUDA backend on the emulated device (KILN_CUDA=EMULATE, docs/cuda-emulator.md), so every
# kernel and every CUDA test runs instrumented too: configures build-asan/ with GCC, builds, runs
# the tests through CTest, and fails when any case of the CUDA suite (scripts/cuda_suite.sh) was
# skipped. Any report fails its test: UBSan halts on the first one, and a leak makes the program
# exit non-zero.
# A Debug build, so KILN_ASSERT checks internal invariants too, but at -O1 with line tables only
# (-g1): it compiles in about a third of the time of -O2 -g, and the suite still runs in minutes.
# Installs the build dependencies like scripts/setup.sh (KILN_OFFLINE=1 skips apt-get); extra
# arguments go to CMake's configure step.
set -euo pipefail
cd "$(dirname "$0")/.."

# Without KILN_DATA, as a newcomer runs the suite before fetching WikiText-2: only the cases that
# need the data set skip ("skipped: no WikiText-2 data"), and every other one must pass without
# it. .ci/run's release phase runs with it, so each commit is tested both ways.
unset KILN_DATA

# Set before the build too: it runs the test binaries to list their tests.
# intercept_tls_get_addr=0: with BLIS loaded (core/cpu/blas_library.h dlopens it, and it keeps
# per-thread state in dynamic TLS), GCC 12's LeakSanitizer crashes in its exit-time tracer
# ("Tracer caught signal 11") after every test that ran a GEMM; the interception of
# __tls_get_addr is what crashes (a sanitizer bug, fixed in LLVM 17: reviews.llvm.org/D147459).
# Without it, LSan scans static TLS only: memory reachable from a dlopened library's dynamic TLS
# alone could be reported as leaked, which kiln's tests never allocate.
export ASAN_OPTIONS=detect_leaks=1:strict_string_checks=1:detect_stack_use_after_return=1:intercept_tls_get_addr=0
export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
export KILN_BUILD_DIR=build-asan
# GCC 12's uninitialized-use analysis misfires on instrumented code: dozens of false reports in
# libstdc++'s std::function (inside std::regex) and Eigen's AVX-512 intrinsics, none in kiln's
# code. The release build keeps both warnings.
scripts/setup.sh -DCMAKE_BUILD_TYPE=Debug "-DCMAKE_CXX_FLAGS_DEBUG=-O1 -g1" \
  "-DCMAKE_CXX_FLAGS=-Wno-maybe-uninitialized -Wno-uninitialized" -DKILN_CUDA=EMULATE \
  -DKILN_SANITIZE=address,undefined "$@"
# shellcheck source=scripts/cuda_suite.sh
source scripts/cuda_suite.sh
cd build-asan
# The downstream test links an installed libkiln.a into a project of its own, which does not link
# the sanitizer runtimes an instrumented kiln needs; it tests packaging, and the release suite
# runs it.
ctest --output-on-failure -j "$(nproc)" -E '^downstream/' | tee ctest.log
read -r passed failed skipped < <(cuda_suite_counts ctest.log)
echo "sanitize: the emulated CUDA suite: $passed passed, $failed failed, $skipped skipped"
if [ "$skipped" -ne 0 ] || [ "$passed" -eq 0 ]; then
  echo "sanitize: every case of the CUDA suite must run on the emulated device" >&2
  exit 1
fi
