#!/usr/bin/env bash
# Installs kiln's build dependencies (Debian packages) when any is missing, then configures and
# builds build/ in Release (CMake's default layout). KILN_OFFLINE=1 skips apt-get (the GPU
# machine has no network). Arguments go to CMake's configure step, e.g. -DKILN_CUDA=ON.
# KILN_BUILD_DIR overrides the build folder.
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(cmake make g++ libeigen3-dev libfmt-dev catch2 nlohmann-json3-dev libcli11-dev
          libopenblas0-openmp libblis4-openmp python3-numpy)
packages+=(libopenmpi-dev openmpi-bin)  # distributed/: the MPI backend and mpirun
source scripts/install_packages.sh
install_packages setup "${packages[@]}"

build_dir=${KILN_BUILD_DIR:-build}
cmake -S . -B "$build_dir" -DCMAKE_BUILD_TYPE=Release "$@"
cmake --build "$build_dir" -j "$(nproc)"
