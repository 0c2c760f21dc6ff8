#include "core/cpu/openblas.h"

#include <dlfcn.h>
#include <omp.h>

#include <cstdlib>
#include <cstring>
#include <mutex>

namespace kiln {

namespace {

#ifndef KILN_OPENBLAS_PATH
#define KILN_OPENBLAS_PATH ""
#endif

// The kernel family for this CPU, for OpenBLAS versions that do not detect it.
const char* core_type_for_this_cpu() {
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f")) return "SkylakeX";
  if (__builtin_cpu_supports("avx2")) return "Haswell";
  return nullptr;
}

OpenBlas* load() {
  const char* path = KILN_OPENBLAS_PATH;
  const char* choice = std::getenv("KILN_GEMM");
  if (path[0] == '\0' || (choice != nullptr && std::strcmp(choice, "eigen") == 0)) return nullptr;
  const char* chosen = std::getenv("OPENBLAS_CORETYPE");
  if (chosen == nullptr || chosen[0] == '\0') {
    if (const char* core = core_type_for_this_cpu()) setenv("OPENBLAS_CORETYPE", core, 1);
  }
  void* library = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (library == nullptr) return nullptr;
  static OpenBlas blas;
  blas.sgemm = reinterpret_cast<decltype(blas.sgemm)>(dlsym(library, "cblas_sgemm"));
  blas.dgemm = reinterpret_cast<decltype(blas.dgemm)>(dlsym(library, "cblas_dgemm"));
  blas.set_num_threads =
      reinterpret_cast<decltype(blas.set_num_threads)>(dlsym(library, "openblas_set_num_threads"));
  auto corename = reinterpret_cast<const char* (*)()>(dlsym(library, "openblas_get_corename"));
  if (!blas.sgemm || !blas.dgemm || !blas.set_num_threads || !corename) return nullptr;
  blas.core = corename();
  blas.set_num_threads(omp_get_max_threads());
  return &blas;
}

}  // namespace

const OpenBlas* openblas() {
  static std::once_flag once;
  static OpenBlas* loaded = nullptr;
  std::call_once(once, [] { loaded = load(); });
  return loaded;
}

std::string gemm_source() {
  const OpenBlas* blas = openblas();
  return blas != nullptr ? "openblas (" + blas->core + " kernels)" : "eigen";
}

}  // namespace kiln
