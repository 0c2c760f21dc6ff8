#!/usr/bin/env bash
# run_with_gpus.sh N COMMAND...: runs COMMAND when this machine has at least N GPUs (NCCL takes
# one per rank), and otherwise prints "skipped: ..." for CTest.
need=$1
shift
have=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ')
if [ "${have:-0}" -lt "$need" ]; then
  echo "skipped: needs $need GPUs (NCCL takes one per rank), this machine has ${have:-0}"
  exit 0
fi
exec "$@"
