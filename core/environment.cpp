#include <fstream>

#include <fmt/format.h>

#include "core/backend.h"
#include "core/build_info.h"
#include "core/threads.h"

namespace kiln {

std::string cpu_model() {
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::string line;
  while (std::getline(cpuinfo, line)) {
    if (line.rfind("model name", 0) == 0) {
      const std::size_t colon = line.find(':');
      if (colon != std::string::npos) return line.substr(line.find_first_not_of(' ', colon + 1));
    }
  }
  return "unknown";
}

std::string environment_summary() {
  const BuildInfo& b = build_info();
  return fmt::format("kiln {} ({}) | cpu {} | threads {} | flags {} | gemm {} | cuda {}", b.version,
                     b.git, cpu_model(), num_threads(), b.flags, cpu_gemm_source(),
                     b.cuda_emulated ? "emulated on the cpu (a test build)"
                     : b.cuda        ? "built"
                                     : "not built");
}

}  // namespace kiln
