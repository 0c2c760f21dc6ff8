#include <fstream>

#include <omp.h>

#include <fmt/format.h>

#include "core/build_info.h"
#include "core/cpu/blas_library.h"
#include "core/cpu/parallel.h"
#include "core/device.h"
#include "core/error.h"
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

void set_num_threads(int threads) {
  KILN_CHECK(threads >= 1 && threads <= kMaxThreads,
             "set_num_threads: {} threads is outside [1, {}], the counts kiln runs", threads,
             kMaxThreads);
  omp_set_num_threads(threads);
  set_blas_threads(threads);
}

int num_threads() { return omp_get_max_threads(); }

std::string environment_summary() {
  const BuildInfo& b = build_info();
  return fmt::format("kiln {} ({}) | cpu {} | threads {} | flags {} | gemm {} | cuda {}", b.version,
                     b.git, cpu_model(), max_threads(), b.flags, gemm_source(),
                     b.cuda_emulated ? "emulated on the cpu (a test build)"
                     : b.cuda        ? "built"
                                     : "not built");
}

}  // namespace kiln
