// The emulator's messages (see report.h).
#include "cuda_emulator/report.h"

#include <cstdint>
#include <cstdio>
#include <cstdlib>

#include <fmt/format.h>

namespace kiln::emulator {

namespace {

struct Detail {
  cudaError_t error = cudaSuccess;
  std::string text;
};

thread_local Detail last_detail;

}  // namespace

void fatal(std::string_view message) {
  std::fprintf(stderr, "kiln CUDA emulator: %.*s\n", static_cast<int>(message.size()),
               message.data());
  std::fflush(stderr);
  std::abort();
}

cudaError_t fail_call(cudaError_t error, std::string detail) {
  last_detail = {error, std::move(detail)};
  return error;
}

const std::string& error_detail(cudaError_t error) {
  static const std::string none;
  return last_detail.error == error ? last_detail.text : none;
}

std::string hex(std::uintptr_t p) { return fmt::format("{:#x}", p); }
std::string hex(const void* p) { return hex(reinterpret_cast<std::uintptr_t>(p)); }

}  // namespace kiln::emulator
