#!/usr/bin/env bash
# Prepares the one-call GPU check (scripts/gpu_check.sh, docs/gpu-check.md) on this machine: the
# GPU machine compiles nothing. Builds the CUDA binaries here with nvcc (-DKILN_CUDA=ON, sm_90
# machine code, -march=x86-64-v3 for the host code) into build-gpu/, then puts into .device/ (ignored by git, carried to the GPU
# machine):
#   bin/       test_cuda, test_core, test_optim, bench_train and bench_ops, stripped
#   lib/       the shared libraries they need that are neither glibc's nor CUDA's (libfmt, ...;
#              from ldd): the GPU machine's image brings libstdc++, libgomp, and the CUDA 13
#              runtime, cuBLAS and cuBLASLt with its toolkit (/usr/local/cuda/lib64), which
#              gpu_check.sh puts on LD_LIBRARY_PATH; they are not carried (cuBLAS alone is
#              hundreds of MB)
#   wikitext-2/, torch_ref.py and sdpa_torch_cuda.py, for PyTorch's side of the benchmarks
# and checks that the working tree and .device stay under the device tool's 64 MiB.
#
# KILN_GPU_CHECK_EMULATE=1 takes the binaries from build-emu/ (KILN_CUDA=EMULATE) instead, for the
# emulated rehearsal of the check (tests/scripts: the CTest test gpu_check_emulated).
#
#   scripts/prepare_device.sh                 # then: the device tool's call in docs/gpu-check.md
#   KILN_GPU_CHECK_EMULATE=1 DEVICE_DIR=/tmp/dev scripts/prepare_device.sh
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
device=${DEVICE_DIR:-$root/.device}
emulate=${KILN_GPU_CHECK_EMULATE:-0}
binaries=(tests/cuda/test_cuda tests/core/test_core tests/optim/test_optim bench/bench_train
  bench/bench_ops)
export CCACHE_DIR=${CCACHE_DIR:-/root/.cache/kiln-ci-ccache} CCACHE_BASEDIR=$root CCACHE_NOHASHDIR=1

if [ "$emulate" = 1 ]; then
  build=${KILN_BUILD_DIR:-$root/build-emu}
else
  build=${KILN_BUILD_DIR:-$root/build-gpu}
  export PATH=/usr/local/cuda/bin:$PATH
  command -v nvcc >/dev/null || {
    echo "prepare_device: no nvcc (CUDA toolkit) on this machine" >&2
    exit 1
  }
  launcher=()
  command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache
    -DCMAKE_CUDA_COMPILER_LAUNCHER=ccache)
  # x86-64-v3 (AVX2), not this CPU's -march=native: the GPU machine's CPU is another one.
  cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DKILN_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 \
    -DKILN_ARCH=x86-64-v3 "${launcher[@]}" >/dev/null
  nice -n 19 cmake --build "$build" -j "${JOBS:-2}" --target test_cuda test_core test_optim \
    bench_train bench_ops
fi
for b in "${binaries[@]}"; do
  [ -x "$build/$b" ] || {
    echo "prepare_device: $build/$b is missing (build it first)" >&2
    exit 1
  }
done

data=${KILN_DATA:-}
if [ -z "$data" ]; then
  for candidate in datasets/wikitext-2 ../shared/data/wikitext-2; do
    [ -f "$candidate/train.txt" ] && {
      data=$candidate
      break
    }
  done
fi

rm -rf "$device"
mkdir -p "$device/bin" "$device/lib"
for b in "${binaries[@]}"; do
  cp "$build/$b" "$device/bin/"
  strip --strip-unneeded "$device/bin/$(basename "$b")"
done
# Libraries that travel: whatever ldd finds outside glibc, the compiler's runtime and CUDA.
ldd "$device"/bin/* | awk '/=> \// {print $3}' | sort -u | while read -r lib; do
  case $(basename "$lib") in
    libc.so* | libm.so* | libdl.so* | librt.so* | libpthread.so* | ld-linux* | libstdc++.so* | \
      libgcc_s.so* | libgomp.so* | libcuda.so* | libcudart.so* | libcublas.so* | libcublasLt.so* | \
      libnccl.so*) ;;
    *) cp -L "$lib" "$device/lib/" ;;
  esac
done
if [ -n "$data" ] && [ -f "$data/train.txt" ]; then
  mkdir -p "$device/wikitext-2"
  cp "$data"/{train,valid,test}.txt "$device/wikitext-2/"
else
  echo "prepare_device: no WikiText-2 (set KILN_DATA): PyTorch's side will be skipped" >&2
fi
cp bench/torch_ref.py "$device/torch_ref.py"
cp bench/sdpa_torch_cuda.py "$device/sdpa_torch_cuda.py"

du -sh "$device"/bin/* "$device"/lib "$device"/wikitext-2 2>/dev/null | sed 's/^/  /'
# Each binary links all of kiln with its sm_90 code (13 MB apiece, 80 MiB in all on 1e34454):
# they travel as one gzip archive (27 MiB), which gpu_check.sh unpacks on the GPU machine.
payload=(bin lib)
[ -d "$device/wikitext-2" ] && payload+=(wikitext-2)
tar -C "$device" -czf "$device/payload.tar.gz" "${payload[@]}"
(cd "$device" && rm -rf "${payload[@]}")
tree_kib=$(git ls-files -z | xargs -0 du -ck 2>/dev/null | tail -1 | cut -f1)
device_kib=$(du -sk "$device" | cut -f1)
echo "prepare_device: $device holds $((device_kib / 1024)) MiB (packed); with the working tree" \
  "$(((device_kib + tree_kib) / 1024)) MiB of the device tool's 64"
if [ "$emulate" != 1 ] && ((device_kib + tree_kib > 62 * 1024)); then
  echo "prepare_device: over the limit: leave wikitext-2 out (KILN_DATA=/nonexistent)" >&2
  exit 1
fi
