// How this kiln was built and what it runs on, for programs that print their environment.
#pragma once

#include <string>

namespace kiln {

struct BuildInfo {
  const char* version;
  const char* git;     // commit at build time, "-dirty" when tracked files had changes
  const char* flags;   // compiler and optimisation flags
  bool cuda;           // the CUDA backend is built
  bool cuda_emulated;  // on kiln's CPU emulator of a GPU (KILN_CUDA=EMULATE, a test build)
};

const BuildInfo& build_info();

// The CPU model name (from /proc/cpuinfo), or "unknown".
std::string cpu_model();

// One line: CPU, threads, build flags, GEMM source (and OpenBLAS's kernels), CUDA, git commit.
std::string environment_summary();

}  // namespace kiln
