// CPU memory: 64-byte aligned blocks (one cache line, one AVX-512 vector); large blocks are
// cached for reuse (core/cpu/block_cache.h).
#include <cstdlib>
#include <cstring>
#include <new>

#include "core/cpu/block_cache.h"
#include "core/cpu/cpu_backend.h"
#include "core/error.h"
#include "core/profiler.h"

namespace kiln {

namespace {
constexpr std::size_t kAlignment = 64;

BlockCache& block_cache() {
  static BlockCache* cache = new BlockCache();  // never destroyed: tensors may die after main
  return *cache;
}
}  // namespace

CpuBackend& cpu_backend() {
  static CpuBackend backend;
  return backend;
}

void* CpuBackend::allocate(std::size_t nbytes) {
  profile::Scope scope(profile::Family::allocation);
  const std::size_t size_class = BlockCache::size_class(nbytes);
  void* ptr = size_class >= BlockCache::kMinCachedBytes ? block_cache().take(size_class) : nullptr;
  if (ptr == nullptr) ptr = std::aligned_alloc(kAlignment, size_class);
  KILN_CHECK(ptr != nullptr, "cpu: out of memory allocating {} bytes", nbytes);
  const std::size_t now = bytes_in_use_.fetch_add(nbytes) + nbytes;
  std::size_t peak = peak_bytes_.load();
  while (now > peak && !peak_bytes_.compare_exchange_weak(peak, now)) {
  }
  return ptr;
}

void CpuBackend::deallocate(void* ptr, std::size_t nbytes) {
  profile::Scope scope(profile::Family::allocation);
  const std::size_t size_class = BlockCache::size_class(nbytes);
  if (size_class < BlockCache::kMinCachedBytes || !block_cache().give(ptr, size_class))
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
