#!/usr/bin/env bash
# Fuzzes the readers of untrusted files (tests/fuzz): builds the libFuzzer targets in build-fuzz/
# with clang (kiln instrumented with ASan, UBSan and libFuzzer coverage, CPU only), then runs each
# for N seconds (first argument, else $KILN_FUZZ_SECONDS, else 30) in one process with one thread,
# as many at once as there are cores, on a copy of its seed corpus: new inputs go to
# build-fuzz/corpus/, never into tests/fuzz/corpus/.
# Prints each target's executions; exits non-zero if any target crashed, hung, leaked or broke a
# property, leaving the input in build-fuzz/crashes/ (reproduce: build-fuzz/tests/fuzz/<target>
# <input>). Installs clang and libFuzzer (Debian) when missing, unless KILN_OFFLINE=1.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-${KILN_FUZZ_SECONDS:-30}}

# libclang-rt-14-dev has libFuzzer; libomp-14-dev is OpenMP for clang.
packages=(cmake make clang-14 libclang-rt-14-dev libomp-14-dev libeigen3-dev libfmt-dev
          nlohmann-json3-dev libcli11-dev)
source scripts/install_packages.sh
install_packages fuzz "${packages[@]}"

build=build-fuzz
CC=clang-14 CXX=clang++-14 cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -gline-tables-only -DNDEBUG" \
  -DKILN_CUDA=OFF -DKILN_FUZZ=ON -DKILN_SANITIZE=fuzzer-no-link,address,undefined \
  -DKILN_BUILD_TESTS=OFF -DKILN_BUILD_EXAMPLES=ON >/dev/null
cmake --build "$build" -j "$(nproc)" --target fuzz_safetensors fuzz_corpus fuzz_checkpoint_values \
  fuzz_token_shard fuzz_tokenizer_json

mkdir -p "$build/crashes"
# fuzz_one TARGET SEEDS [DICT] [OPTIONS]: one target for $seconds on a fresh copy of its seeds;
# writes its summary line to $build/TARGET.summary and the fuzzer's exit status to TARGET.status.
fuzz_one() {
  local target=$1 seeds=$2 dict=$3 options=$4
  local corpus="$build/corpus/$target" log="$build/$target.log" status=0
  rm -rf "$corpus"
  mkdir -p "$corpus"
  cp tests/fuzz/corpus/"$seeds"/* "$corpus"/
  # shellcheck disable=SC2086 # $options: words of their own, or none
  "$build/tests/fuzz/$target" "$corpus" ${dict:+-dict="tests/fuzz/$dict"} $options \
    -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -jobs=0 -workers=0 -print_final_stats=1 \
    -artifact_prefix="$build/crashes/$target-" >"$log" 2>&1 || status=$?
  executions=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
  echo "fuzz: $target: ${executions:-?} executions, exit status $status" >"$build/$target.summary"
  echo "$status" >"$build/$target.status"
}

# Each target is one process with one thread, so as many run at once as there are cores: the
# phase takes about (targets / cores) x N seconds of wall time.
runs=(fuzz_safetensors:safetensors:safetensors.dict fuzz_corpus:text:text.dict
      fuzz_checkpoint_values:checkpoint-values::-max_len=100 fuzz_token_shard:token-shard
      fuzz_tokenizer_json:tokenizer-json:tokenizer.dict)
slots=$(nproc)
failed=()
for run in "${runs[@]}"; do
  IFS=: read -r target seeds dict options <<<"$run"
  while [ "$(jobs -rp | wc -l)" -ge "$slots" ]; do
    wait -n || true  # a run's status is read from its file below
  done
  echo "fuzz: $target for ${seconds} s"
  rm -f "$build/$target.status"
  fuzz_one "$target" "$seeds" "$dict" "$options" &
done
wait
for run in "${runs[@]}"; do
  target=${run%%:*}
  status=$(cat "$build/$target.status" 2>/dev/null || echo "none: the run did not finish")
  cat "$build/$target.summary" 2>/dev/null || true
  if [ "$status" != 0 ]; then
    tail -n 60 "$build/$target.log"
    failed+=("$target")
  fi
done
if [ ${#failed[@]} -gt 0 ]; then
  echo "fuzz: FAILED: ${failed[*]} (inputs in $build/crashes/, logs in $build/*.log)" >&2
  exit 1
fi
