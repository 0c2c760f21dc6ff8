#!/usr/bin/env bash
# bench/torch_ref.py under Debian's PyTorch (python3-torch, 1.13 on Debian 12), set up as fast
# as Debian allows on this CPU: OpenBLAS's OpenMP build instead of the reference BLAS that
# python3-torch would load, tcmalloc instead of glibc's malloc (PyTorch loses about a third of
# its speed without it), and OpenBLAS told which kernels to run on CPUs its 0.3.21 does not know.
# Installs whichever of the three packages is missing (apt-get; as root). Arguments go to
# torch_ref.py:
#
#   bench/run_torch_ref.sh --threads 2 --steps 100
#   bench/run_torch_ref.sh --threads 2 --time-budget 900 --eval
set -euo pipefail
bench=$(cd "$(dirname "$0")" && pwd)
triplet=$(dpkg-architecture -qDEB_HOST_MULTIARCH 2>/dev/null || echo x86_64-linux-gnu)
openblas=/usr/lib/$triplet/openblas-openmp
tcmalloc=/usr/lib/$triplet/libtcmalloc_minimal.so.4

missing=()
/usr/bin/python3 -c 'import torch' 2>/dev/null || missing+=(python3-torch)
[ -e "$openblas/libblas.so.3" ] || missing+=(libopenblas0-openmp)
[ -e "$tcmalloc" ] || missing+=(libtcmalloc-minimal4)
if [ ${#missing[@]} -gt 0 ]; then
  echo "run_torch_ref: installing ${missing[*]}" >&2
  apt-get update -qq >/dev/null
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
fi

export LD_LIBRARY_PATH=$openblas${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export LD_PRELOAD=$tcmalloc${LD_PRELOAD:+:$LD_PRELOAD}
# OpenBLAS 0.3.21 falls back to its SSE3 kernels on CPUs newer than it knows; name the family
# (the caller's OPENBLAS_CORETYPE wins, e.g. Haswell to hold an AVX-512 machine to AVX2).
if [ -z "${OPENBLAS_CORETYPE:-}" ]; then
  if grep -qw avx512f /proc/cpuinfo; then
    export OPENBLAS_CORETYPE=SkylakeX
  elif grep -qw avx2 /proc/cpuinfo; then
    export OPENBLAS_CORETYPE=Haswell
  fi
fi
exec /usr/bin/python3 "$bench/torch_ref.py" "$@"
