// CPU memory: 64-byte aligned blocks (one cache line, one AVX-512 vector).
#include <cstdlib>
#include <cstring>
#include <new>

#include <omp.h>

#include "core/cpu/cpu_backend.h"
#include "core/cpu/parallel.h"
#include "core/error.h"

namespace kiln {

namespace {
constexpr std::size_t kAlignment = 64;
}

CpuBackend& cpu_backend() {
  static CpuBackend backend;
  return backend;
}

int max_threads() { return omp_get_max_threads(); }

void* CpuBackend::allocate(std::size_t nbytes) {
  const std::size_t rounded = (nbytes + kAlignment - 1) / kAlignment * kAlignment;
  void* ptr = std::aligned_alloc(kAlignment, rounded);
  KILN_CHECK(ptr != nullptr, "cpu: out of memory allocating {} bytes", nbytes);
  const std::size_t now = bytes_in_use_.fetch_add(nbytes) + nbytes;
  std::size_t peak = peak_bytes_.load();
  while (now > peak && !peak_bytes_.compare_exchange_weak(peak, now)) {
  }
  return ptr;
}

void CpuBackend::deallocate(void* ptr, std::size_t nbytes) {
  std::free(ptr);
  bytes_in_use_.fetch_sub(nbytes);
}

void CpuBackend::copy_from_host(void* dst, const void* src, std::size_t nbytes) {
  std::memcpy(dst, src, nbytes);
}

void CpuBackend::copy_to_host(void* dst, const void* src, std::size_t nbytes) {
  std::memcpy(dst, src, nbytes);
}

}  // namespace kiln
