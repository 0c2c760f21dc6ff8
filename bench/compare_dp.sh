#!/usr/bin/env bash
# Training-step time per world size on this host, with the same global batch and cores:
# 1 process × 2 threads against 2 ranks × 1 thread (and 3 oversubscribed ranks), then the
# allreduce bandwidth. The figures of docs/distributed.md's "Measured here" come from this.
#   bench/compare_dp.sh [build folder]
set -euo pipefail
build="${1:-build}"
mpirun=(mpirun --oversubscribe --allow-run-as-root --bind-to none --mca btl self,vader
        --mca btl_vader_single_copy_mechanism none --mca oob_tcp_if_include lo)
steps=(--bytes 4096 --iterations 2)
lscpu | grep -E "Model name|^CPU\(s\)"
grep -o -w 'avx512f\|avx2\|fma' /proc/cpuinfo | sort -u | tr '\n' ' '
echo
uptime
"$build/bench/bench_dp" "${steps[@]}" --threads 2 --global-windows 2 --steps 8 | tail -1
"${mpirun[@]}" -np 2 "$build/bench/bench_dp" "${steps[@]}" --global-windows 2 --steps 8 | tail -1
"$build/bench/bench_dp" "${steps[@]}" --threads 2 --global-windows 6 --steps 3 | tail -1
"${mpirun[@]}" -np 2 "$build/bench/bench_dp" "${steps[@]}" --global-windows 6 --steps 3 | tail -1
"${mpirun[@]}" -np 3 "$build/bench/bench_dp" "${steps[@]}" --global-windows 6 --steps 3 | tail -1
"${mpirun[@]}" -np 2 "$build/bench/bench_dp" --step-model none
"${mpirun[@]}" -np 3 "$build/bench/bench_dp" --step-model none
uptime
