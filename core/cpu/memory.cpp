// CPU memory: 64-byte aligned blocks (one cache line, one AVX-512 vector); blocks of 2 MB and
// more on transparent huge pages; large blocks are cached for reuse (core/cpu/block_cache.h).
#include <sys/mman.h>

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
// Blocks of at least one huge page are aligned to it and asked for transparent huge pages
// (Linux's THP in its default "madvise" mode gives them only on request): a training step
// streams about a gigabyte of activations, gradients and logits, far beyond what 4 KB pages'
// TLB entries reach, and the GEMMs' packing reads the (N, V) logits down columns, a page per
// row. Measured on the large-cpu step (AVX2 build, Xeon with AMX): 1,161-1,168 -> 1,178-1,182
// tokens/s, interleaved (docs/performance.md).
constexpr std::size_t kHugePage = std::size_t{2} << 20;

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
  if (ptr == nullptr) {
    if (size_class >= kHugePage) {
      ptr = std::aligned_alloc(kHugePage, (size_class + kHugePage - 1) / kHugePage * kHugePage);
#ifdef MADV_HUGEPAGE
      if (ptr != nullptr) madvise(ptr, size_class, MADV_HUGEPAGE);  // advice only: may fail
#endif
    } else {
      ptr = std::aligned_alloc(kAlignment, size_class);
    }
  }
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
