#!/usr/bin/env bash
# The check of distributed/'s GPU paths, for a machine with CUDA, NCCL and N >= 2 GPUs (NCCL takes one
# GPU per rank; the machine kiln is developed on has none, so CI only compiles the NCCL backend).
# Phases, each printing as it goes:
#   1. build    -DKILN_CUDA=ON into build-mgpu/: test_dist_ranks, test_dist, bench_dp
#   2. mpi+cuda 2 MPI ranks with tensors on cuda:0, staged through the host (needs 1 GPU)
#   3. nccl     N ranks under mpirun: collectives and the gradient-sync determinism rule
#   4. torchrun N ranks started with RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT (the
#               TCP start-up), the same tests
#   5. bench    bench_dp with NCCL on N ranks: allreduce bandwidth, gradient-sync time
# Phases 2-4 need MPI for mpirun (phase 4 does not use it). Exits non-zero when a phase fails.
#   scripts/multi_gpu_check.sh [N]     (default: every GPU)
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
build=${KILN_BUILD_DIR:-build-mgpu}
gpus=${1:-$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ')}
status=0
phase() { printf '\n==== %s ====\n' "$1"; }
run() {
  "$@"
  local rc=$?
  [ $rc -ne 0 ] && echo "FAILED ($rc): $*" && status=1
  return $rc
}
mpirun_=(mpirun --oversubscribe --allow-run-as-root --bind-to none)

phase "build ($gpus GPUs)"
run cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DKILN_CUDA=ON || exit 1
run cmake --build "$build" -j "$(nproc)" --target test_dist_ranks test_dist bench_dp || exit 1
ranks=$build/tests/distributed/test_dist_ranks

phase "mpi+cuda: 2 ranks, tensors on cuda:0"
if command -v mpirun >/dev/null && [ "$gpus" -ge 1 ]; then
  KILN_TEST_DIST_DEVICE=cuda KILN_DIST_TIMEOUT=60 run "${mpirun_[@]}" -np 2 "$ranks"
else
  echo "skipped: needs mpirun and a GPU"
fi

phase "nccl under mpirun: $gpus ranks"
if command -v mpirun >/dev/null && [ "$gpus" -ge 2 ]; then
  KILN_TEST_DIST_BACKEND=nccl KILN_DIST_TIMEOUT=60 run "${mpirun_[@]}" -np "$gpus" "$ranks"
else
  echo "skipped: needs mpirun and 2 GPUs"
fi

phase "nccl from torchrun-style variables: $gpus ranks"
if [ "$gpus" -ge 2 ]; then
  port=$((29500 + RANDOM % 1000))
  pids=()
  for ((r = 0; r < gpus; ++r)); do
    RANK=$r WORLD_SIZE=$gpus LOCAL_RANK=$r MASTER_ADDR=127.0.0.1 MASTER_PORT=$port \
      KILN_TEST_DIST_BACKEND=nccl KILN_DIST_TIMEOUT=60 "$ranks" >"$build/torchrun-rank$r.log" 2>&1 &
    pids+=($!)
  done
  for ((r = 0; r < gpus; ++r)); do
    if ! wait "${pids[$r]}"; then
      echo "FAILED: rank $r (log $build/torchrun-rank$r.log):"
      tail -20 "$build/torchrun-rank$r.log"
      status=1
    fi
  done
  tail -3 "$build/torchrun-rank0.log"
else
  echo "skipped: needs 2 GPUs"
fi

phase "bench_dp: nccl, $gpus ranks"
if command -v mpirun >/dev/null && [ "$gpus" -ge 2 ]; then
  run "${mpirun_[@]}" -np "$gpus" "$build/bench/bench_dp" --backend nccl --device cuda \
    --bytes 1048576 --bytes 16777216 --bytes 268435456
else
  echo "skipped: needs mpirun and 2 GPUs"
fi

echo
[ $status -eq 0 ] && echo "multi_gpu_check: all phases passed" || echo "multi_gpu_check: FAILED"
exit $status
