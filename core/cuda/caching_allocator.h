// A caching allocator for one CUDA device: cudaMalloc and cudaFree are slow and synchronise the
// device, so freed blocks are kept in free lists keyed by a rounded size and handed out again.
// A training loop allocates the same sizes every step, so after the first step it makes no
// cudaMalloc calls at all.
//
// Sizes are rounded up to a block size: multiples of 512 bytes up to 1 MiB, above that eight
// sizes per power of two (at most 12.5% waste). Blocks are never split or merged; a block is
// reused only for a request of the same block size. When cudaMalloc fails the cache is returned
// to the driver and the allocation retried once before an out-of-memory kiln::Error.
//
// The allocator makes no stream synchronisation of its own: its only user, CudaBackend, runs
// everything on one stream, so a freed block's next use is queued behind its last one. The
// caller makes the device current before allocate() and release_cached().
#pragma once

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <unordered_map>
#include <vector>

namespace kiln {

class CachingAllocator {
 public:
  explicit CachingAllocator(int device) : device_(device) {}
  CachingAllocator(const CachingAllocator&) = delete;
  CachingAllocator& operator=(const CachingAllocator&) = delete;

  // A block of at least nbytes (nbytes > 0), aligned to 256 bytes.
  void* allocate(std::size_t nbytes);
  // Returns a block from allocate() with the same nbytes to the cache.
  void deallocate(void* ptr, std::size_t nbytes);
  // cudaFree of every cached block (the caller has synchronised the device's stream).
  void release_cached();

  std::size_t bytes_in_use() const;         // requested bytes of the blocks handed out
  std::size_t peak_bytes_in_use() const;    // the most bytes_in_use() has been
  void reset_peak_bytes_in_use();           // from now on: peak = bytes_in_use()
  std::size_t bytes_reserved() const;       // block bytes held from the driver (in use + cached)
  std::int64_t device_allocations() const;  // cudaMalloc calls so far

  // The block size that serves a request of nbytes.
  static std::size_t block_size(std::size_t nbytes);

 private:
  void* malloc_or_release(std::size_t size);  // cudaMalloc, retried once after releasing the cache
  void release_cached_locked();               // release_cached with mutex_ held

  int device_;
  mutable std::mutex mutex_;
  std::unordered_map<std::size_t, std::vector<void*>> free_blocks_;  // block size -> blocks
  std::unordered_map<void*, std::size_t> live_blocks_;               // handed out -> block size
  std::size_t in_use_ = 0, peak_ = 0, reserved_ = 0;
  std::int64_t device_allocations_ = 0;
};

}  // namespace kiln
