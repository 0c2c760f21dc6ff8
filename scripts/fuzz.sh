#!/usr/bin/env bash
# Fuzzes the readers of untrusted files (tests/fuzz): builds the libFuzzer targets in build-fuzz/
# with clang (kiln instrumented with ASan, UBSan and libFuzzer coverage, CPU only), then runs each
# for N seconds (first argument, else $KILN_FUZZ_SECONDS, else 30) in one process with one thread,
# on a copy of its seed corpus: new inputs go to build-fuzz/corpus/, never into tests/fuzz/corpus/.
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
  -DKILN_CUDA=OFF -DKILN_FUZZ=ON -DKILN_SANITIZE=fuzzer-no-link,address,undefined \
  -DKILN_BUILD_TESTS=OFF -DKILN_BUILD_EXAMPLES=ON >/dev/null
cmake --build "$build" -j "$(nproc)" --target fuzz_safetensors fuzz_corpus fuzz_checkpoint_values \
  fuzz_token_shard fuzz_tokenizer_json

mkdir -p "$build/crashes"
failed=()
# target:seed folder:dictionary:options of its own (fuzz_checkpoint_values: inputs of up to ten
# 10-byte edits, rather than libFuzzer's default of the longest seed)
for run in fuzz_safetensors:safetensors:safetensors.dict fuzz_corpus:text:text.dict \
  fuzz_checkpoint_values:checkpoint-values::-max_len=100 fuzz_token_shard:token-shard \
  fuzz_tokenizer_json:tokenizer-json:tokenizer.dict; do
  IFS=: read -r target seeds dict options <<<"$run"
  corpus="$build/corpus/$target"
  rm -rf "$corpus"
  mkdir -p "$corpus"
  cp tests/fuzz/corpus/"$seeds"/* "$corpus"/
  log="$build/$target.log"
  echo "fuzz: $target for ${seconds} s"
  status=0
  # shellcheck disable=SC2086 # $options: words of their own, or none
  "$build/tests/fuzz/$target" "$corpus" ${dict:+-dict="tests/fuzz/$dict"} $options \
    -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -jobs=0 -workers=0 -print_final_stats=1 \
    -artifact_prefix="$build/crashes/$target-" >"$log" 2>&1 || status=$?
  executions=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
  echo "fuzz: $target: ${executions:-?} executions, exit status $status"
  if [ "$status" -ne 0 ]; then
    tail -n 60 "$log"
    failed+=("$target")
  fi
done
if [ ${#failed[@]} -gt 0 ]; then
  echo "fuzz: FAILED: ${failed[*]} (inputs in $build/crashes/, logs in $build/*.log)" >&2
  exit 1
fi
