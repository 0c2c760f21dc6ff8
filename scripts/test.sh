#!/usr/bin/env bash
# The test command: installs and builds (scripts/setup.sh, arguments go to CMake), then runs
# every test through CTest, printing the output of any that fail.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh "$@"
cd "${KILN_BUILD_DIR:-build}"
ctest --output-on-failure -j "$(nproc)"
