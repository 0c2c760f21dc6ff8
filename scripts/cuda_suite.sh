# shellcheck shell=bash
# The CUDA suite, for scripts that source this file (scripts/gpu_check.sh on a GPU, .ci/run on
# the emulated device): every CTest case that needs a device, i.e. every parity/ case of the op
# table and every case with "cuda" or "CUDA" in its name (tests/cuda/*, the CUDA cases of
# test_optim, test_io and test_apps, the emulator's own tests). CTest's -R is case-sensitive.
KILN_CUDA_SUITE='parity/|[Cc][Uu][Dd][Aa]'

# "passed failed skipped": the CUDA suite's cases in CTest output (a log of `ctest`, with or
# without -R "$KILN_CUDA_SUITE").
cuda_suite_counts() {
  local lines
  lines=$(grep -E 'Test +#[0-9]+: ' "$1" | grep -E "$KILN_CUDA_SUITE")
  printf '%d %d %d\n' "$(grep -cE ' Passed ' <<<"$lines")" \
    "$(grep -cE '\*\*\*(Failed|Timeout|Exception)|Not Run' <<<"$lines")" \
    "$(grep -cE '\*\*\*Skipped' <<<"$lines")"
}
