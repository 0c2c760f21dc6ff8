#include "core/cpu/blas_library.h"

#include <dlfcn.h>
#include <omp.h>

#include <cstdint>
#include <cstdlib>
#include <mutex>

#include <fmt/format.h>

#include "core/backend.h"
#include "core/cpu/packed_gemm.h"
#include "core/cpu/packed_gemm_bf16.h"
#include "core/error.h"
#include "core/host_memory.h"

namespace kiln {

std::string gemm_environment() {
  const char* value = std::getenv("KILN_GEMM");
  if (value == nullptr || *value == '\0') return "";
  const std::string name = value;
  for (const char* valid : {"openblas", "blis", "eigen", "packed", "bf16", "widen"})
    if (name == valid) return name;
  fail(
      "KILN_GEMM={}: not a GEMM path; the valid values are openblas, blis, eigen, packed (one "
      "source for every float32 product) and bf16, widen (the path of bf16 products), or unset",
      name);
}

namespace {

// Paths of the runtime packages' libraries (cmake/KilnBlas.cmake); empty when not built in.
#ifndef KILN_OPENBLAS_PATH
#define KILN_OPENBLAS_PATH ""
#endif
#ifndef KILN_BLIS_PATH
#define KILN_BLIS_PATH ""
#endif

// OpenBLAS's kernel family for this CPU, for versions that do not detect it.
const char* openblas_core_for_this_cpu() {
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f")) return "SkylakeX";
  if (__builtin_cpu_supports("avx2")) return "Haswell";
  return nullptr;
}

template <typename F>
bool find(void* library, const char* symbol, F& function) {
  function = reinterpret_cast<F>(dlsym(library, symbol));
  return function != nullptr;
}

// BLIS takes its thread count as a dim_t (int64).
void (*blis_set_threads)(std::int64_t) = nullptr;
void blis_set_num_threads(int threads) { blis_set_threads(threads); }

// OpenBLAS 0.3 reserves a buffer of BUFFER_SIZE (128 MiB on x86-64) and a guard page per thread
// it is told of (at load for OpenMP's thread count, then for each count openblas_set_num_threads
// raises it to), and one more for the thread that calls a GEMM. When the address space
// (ulimit -v) cannot take one, its blas_memory_alloc retries the allocation forever, a hang deaf
// to SIGTERM: so kiln checks the room first and fails with a kiln::Error naming the limit.
constexpr std::int64_t kOpenblasBufferBytes = std::int64_t{129} << 20;
int openblas_buffers_reserved = 0;

void reserve_openblas_threads(int threads) {
  const int buffers = threads + 1;
  if (buffers <= openblas_buffers_reserved) return;
  try {
    check_address_space(
        (buffers - openblas_buffers_reserved) * kOpenblasBufferBytes,
        fmt::format("OpenBLAS's buffers for {} threads and the caller (129 MiB each)", threads));
  } catch (const Error& e) {
    fail(
        "{}: run fewer threads, raise the limit, or choose another GEMM source (KILN_GEMM=blis "
        "or eigen)",
        e.what());
  }
  openblas_buffers_reserved = buffers;
}

BlasLibrary* load_openblas() {
  const char* path = KILN_OPENBLAS_PATH;
  if (path[0] == '\0') return nullptr;
  reserve_openblas_threads(omp_get_max_threads());
  const char* chosen = std::getenv("OPENBLAS_CORETYPE");
  if (chosen == nullptr || chosen[0] == '\0') {
    if (const char* core = openblas_core_for_this_cpu()) setenv("OPENBLAS_CORETYPE", core, 1);
  }
  void* library = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (library == nullptr) return nullptr;
  static BlasLibrary blas;
  const char* (*corename)() = nullptr;
  if (!find(library, "cblas_sgemm", blas.sgemm) || !find(library, "cblas_dgemm", blas.dgemm) ||
      !find(library, "openblas_set_num_threads", blas.set_num_threads) ||
      !find(library, "openblas_get_corename", corename))
    return nullptr;
  blas.name = "openblas";
  blas.kernels = corename();
  return &blas;
}

BlasLibrary* load_blis() {
  const char* path = KILN_BLIS_PATH;
  if (path[0] == '\0') return nullptr;
  void* library = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (library == nullptr) return nullptr;
  static BlasLibrary blas;
  int (*arch_id)() = nullptr;
  const char* (*arch_name)(int) = nullptr;
  if (!find(library, "cblas_sgemm", blas.sgemm) || !find(library, "cblas_dgemm", blas.dgemm) ||
      !find(library, "bli_thread_set_num_threads", blis_set_threads) ||
      !find(library, "bli_arch_query_id", arch_id) || !find(library, "bli_arch_string", arch_name))
    return nullptr;
  blas.name = "blis";
  blas.kernels = arch_name(arch_id());
  blas.set_num_threads = blis_set_num_threads;
  return &blas;
}

struct Loaded {
  BlasLibrary* library = nullptr;
  std::once_flag once;
};

Loaded& slot(const std::string& name) {
  static Loaded openblas, blis, none;
  return name == "openblas" ? openblas : name == "blis" ? blis : none;
}

// Whether KILN_GEMM names the path of bf16 products only, leaving float32's sources to the rules.
bool names_bf16_path(const std::string& value) { return value == "bf16" || value == "widen"; }

// Whether KILN_GEMM forces one float32 source for every product (bf16 products widen into it).
bool forced_by_environment() {
  const std::string value = gemm_environment();
  return !value.empty() && !names_bf16_path(value);
}

// OpenBLAS first on every CPU, BLIS only when OpenBLAS is missing or KILN_GEMM=blis asks for it
// (docs/performance.md, measured on an AMD EPYC, Zen 3, 2 threads): BLIS runs the tied LM head's
// three GEMMs 7% faster in all, but its threads busy-wait at its own barriers, whatever
// OMP_WAIT_POLICY says: with more threads than free cores (two programs at once, --threads above
// the core count, or CTest running tests side by side) a gradient check took 95 s instead of 0.5.
bool forced_to(const char* name) { return forced_by_environment() && gemm_environment() == name; }

const BlasLibrary* choose() {
  if (forced_by_environment() && !forced_to("packed")) {
    const std::string forced = gemm_environment();
    return forced == "eigen" ? nullptr : blas_library(forced);
  }
  if (const BlasLibrary* blas = blas_library("openblas")) return blas;
  return blas_library("blis");
}

// On AMD Zen 3, BLIS's zen3 kernels beat OpenBLAS's Haswell ones on training's narrow products
// (n <= 768: the LM head's dE and dh, the input gradients, the QKV projection: 5-21% in
// bench_ops) and lose on square and wide ones (the logits, n = 33278: 4%; 1024^3: 10%), so those
// stay with OpenBLAS (docs/performance.md has the tables). BLIS's older zen kernels lose to
// OpenBLAS on the narrow products too (dE 55 against 69 GFLOP/s on an EPYC that BLIS runs with
// them; the default model trains 5-7% faster through OpenBLAS alone there), so only zen3 gets the
// split. Products under 2^26 multiply-adds stay with OpenBLAS too: BLIS's busy-waiting (above)
// costs most where many small products share the cores.
constexpr std::int64_t kNarrowColumns = 768;
constexpr std::int64_t kNarrowMinMultiplyAdds = std::int64_t{1} << 26;

const BlasLibrary* choose_narrow() {
  if (forced_by_environment()) return nullptr;
  const BlasLibrary* primary = gemm_library();
  if (primary == nullptr || primary->name != "openblas") return nullptr;
  const BlasLibrary* blis = blas_library("blis");
  if (blis == nullptr || blis->kernels != "zen3") return nullptr;
  return blis;
}

const BlasLibrary* narrow_library() {
  static const BlasLibrary* chosen = choose_narrow();
  return chosen;
}

}  // namespace

const BlasLibrary* blas_library(const std::string& name) {
  Loaded& loaded = slot(name);
  std::call_once(loaded.once, [&] {
    loaded.library = name == "openblas" ? load_openblas() : name == "blis" ? load_blis() : nullptr;
    if (loaded.library != nullptr) loaded.library->set_num_threads(omp_get_max_threads());
  });
  return loaded.library;
}

const BlasLibrary* gemm_library() {
  static const BlasLibrary* chosen = choose();
  return chosen;
}

const BlasLibrary* gemm_library(std::int64_t m, std::int64_t n, std::int64_t k) {
  const BlasLibrary* narrow = narrow_library();
  if (narrow != nullptr && n <= kNarrowColumns && m * n * k >= kNarrowMinMultiplyAdds)
    return narrow;
  return gemm_library();
}

bool use_packed_gemm(std::int64_t m, std::int64_t n, std::int64_t k) {
  static const bool forced = forced_to("packed") && packed_gemm_built();
  static const bool allowed = !forced_by_environment();
  return forced || (allowed && packed_gemm_preferred(m, n, k));
}

Bf16Gemm bf16_gemm() {
  static const Bf16Gemm path =
      !forced_by_environment() && gemm_environment() != "widen" && packed_gemm_bf16_available()
          ? Bf16Gemm::native
          : Bf16Gemm::widened;
  return path;
}

std::string bf16_gemm_source() {
  if (bf16_gemm() == Bf16Gemm::native) return "bf16 native (" + packed_gemm_bf16_kernel() + ")";
  const std::string value = gemm_environment();
  if (forced_by_environment()) return "bf16 widened to float32 (KILN_GEMM=" + value + ")";
  if (value == "widen") return "bf16 widened to float32 (KILN_GEMM=widen)";
  if (value == "bf16")
    return "bf16 widened to float32 (KILN_GEMM=bf16, but this CPU has no AVX512_BF16)";
  return "bf16 widened to float32 (no AVX512_BF16)";
}

std::string cpu_gemm_source() {
  const BlasLibrary* blas = gemm_library();
  std::string source = blas != nullptr ? blas->name + " (" + blas->kernels + " kernels)" : "eigen";
  if (const BlasLibrary* narrow = narrow_library())
    source += " + " + narrow->name + " (" + narrow->kernels +
              " kernels) for n <= " + std::to_string(kNarrowColumns);
  if (forced_to("packed") && packed_gemm_built()) {
    source = "packed (" + packed_gemm_kernel() + ") for float32, " + source + " for float64";
  } else if (!forced_by_environment() && !packed_gemm_rule().empty()) {
    source += " + packed (" + packed_gemm_kernel() + ") for " + packed_gemm_rule();
  }
  return source + "; " + bf16_gemm_source();
}

void set_blas_threads(int threads) {
  const BlasLibrary* blas = gemm_library();
  if (blas != nullptr && blas->name == "openblas") reserve_openblas_threads(threads);
  if (blas != nullptr) blas->set_num_threads(threads);
  if (const BlasLibrary* narrow = narrow_library()) narrow->set_num_threads(threads);
}

}  // namespace kiln
